# budgetd — build, run and test. `make run` and `make test` are the two
# commands a new machine needs; both install what is missing first.
SHELL := /bin/bash
.DEFAULT_GOAL := help

export PATH := $(PATH):/usr/local/go/bin:/usr/sbin:/sbin
export CHDB_LIB_PATH := $(CURDIR)/.cache/libchdb/libchdb.so

GO       ?= go
BIN      := bin/budgetd
CONFIG   ?=
ARGS     ?=

.PHONY: help setup test-setup build run test bench fuzz clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-11s %s\n", $$1, $$2}'

setup: ## install Go modules and libchdb (into .cache/, ignored by git)
	@scripts/setup.sh

test-setup: setup ## also install what the tests need (Debian clickhouse-server)
	@scripts/test-setup.sh

build: ## build bin/budgetd
	$(GO) build -o $(BIN) ./cmd/budgetd

run: setup build ## set up, build and start `budgetd serve` on the embedded store
	./$(BIN) serve $(if $(CONFIG),--config $(CONFIG)) $(ARGS)

test: test-setup ## set up and run every test with the race detector
	$(GO) test -race -count=1 -timeout 25m ./...

bench: setup ## run the benchmarks
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./...

clean: ## remove build output (keeps the .cache downloads)
	rm -rf bin
