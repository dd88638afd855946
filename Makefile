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

.PHONY: help setup test-setup build run test bench fuzz clean generate

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-11s %s\n", $$1, $$2}'

setup: ## install Go modules and libchdb (into .cache/, ignored by git)
	@scripts/setup.sh

test-setup: setup ## also install what the tests need (scripts/test-setup.sh: ClickHouse, ZooKeeper, Chromium, the Collectors, Jaeger, Redocly CLI, oapi-codegen)
	@scripts/test-setup.sh

build: ## build bin/budgetd
	$(GO) build -o $(BIN) ./cmd/budgetd

run: setup build ## set up, build and start `budgetd serve` on the embedded store
	./$(BIN) serve $(if $(CONFIG),--config $(CONFIG)) $(ARGS)

# sim and sim/shapes run real services on loopback and compare their timing
# with margins of tens of milliseconds (seed 000's ladder ends 65 ms before the
# client's timeout at time_scale 0.05), so they run after the rest, one
# package at a time, on an otherwise idle machine.
SIM_PKGS := ./sim/ ./sim/shapes/
test: test-setup ## set up and run every test with the race detector
	$(GO) test -race -count=1 -timeout 25m $$($(GO) list ./... | grep -v -E '/sim$$|/sim/shapes$$')
	$(GO) test -race -count=1 -p 1 -timeout 10m $(SIM_PKGS)

bench: setup ## run the benchmarks
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./...

generate: ## regenerate api/apiclient from api/openapi.yaml (oapi-codegen, installed into .cache/bin)
	$(GO) generate ./api/apiclient

clean: ## remove build output (keeps the .cache downloads)
	rm -rf bin

# `make demo`: a budgetd with something to show. Reuses a budgetd already
# answering on DEMO_API, or starts `budgetd serve` (embedded store, default
# ports) in the background; then runs every sim scenario against it. The
# server keeps running: stop it with `kill $(cat .cache/demo-serve.pid)`.
# See docs/experiments.md.
.PHONY: demo
DEMO_API ?= localhost:8080
demo: setup build ## run the sim scenarios against budgetd serve (started in the background if needed)
	@mkdir -p .cache
	@if curl -fsS http://$(DEMO_API)/healthz >/dev/null 2>&1; then \
	  echo "demo: using the budgetd already answering on $(DEMO_API)"; \
	else \
	  nohup ./$(BIN) serve >.cache/demo-serve.log 2>&1 & echo $$! >.cache/demo-serve.pid; \
	  echo "demo: started budgetd serve, pid $$(cat .cache/demo-serve.pid), log .cache/demo-serve.log"; \
	  for i in $$(seq 1 150); do curl -fsS http://$(DEMO_API)/readyz >/dev/null 2>&1 && break; sleep 0.2; done; \
	  curl -fsS http://$(DEMO_API)/readyz >/dev/null || { echo "demo: budgetd serve did not become ready:"; tail -20 .cache/demo-serve.log; exit 1; }; \
	fi
	./$(BIN) sim --demo --otlp localhost:4317
	@echo "demo: open http://$(DEMO_API)/ - traces are analysed once idle for 10 s (analyze.assembly.idle)"
	@echo "demo: stop a server started here with: kill \$$(cat .cache/demo-serve.pid)"

# The peer (Jaeger v2 on badger), the ceiling for receiving (the Collector to
# nop), the floor for storing and budgetd; `clickhouse` adds budgetd on
# ClickHouse 18.16. ARGS may name -targets again: the last one counts.
.PHONY: bench-compare
BENCH_TARGETS ?= collector,jaeger,floor,embedded
bench-compare: test-setup build ## load the Collector (otlp → nop), Jaeger v2 and budgetd with the same OTLP load, measure the floor; prints a table
	$(GO) run ./bench/cmd/budgetd-bench -targets $(BENCH_TARGETS) $(ARGS)
