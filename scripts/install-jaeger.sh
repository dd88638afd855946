#!/usr/bin/env bash
# Installs Jaeger v2 (an OpenTelemetry Collector distribution that stores
# what it receives, here in badger) into .cache/bin/jaeger: the harness
# loads it as the peer a tracing backend is compared with, and its test
# fails, naming `make test-setup`, when it is missing.
# `go install …/cmd/jaeger@VERSION` (scripts/install-go-tool.sh) refuses
# this module because its go.mod has a replace directive, so this builds
# the command inside the module's own directory from the Go module proxy,
# where go.mod and go.sum apply as they do for Jaeger's release builds.
# Safe to run again: it does nothing when the same version is installed.
set -euo pipefail
cd "$(dirname "$0")/.."

module=github.com/jaegertracing/jaeger
version=v1.76.0
dest=.cache/bin

command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "install-jaeger: Go is not installed (want Go 1.26)" >&2; exit 1; }

if [[ -x "$dest/jaeger" && "$(cat "$dest/jaeger.VERSION" 2>/dev/null)" == "$version" ]]; then
  exit 0
fi
echo "install-jaeger: building jaeger $version (a few minutes the first time)" >&2
mkdir -p "$dest"
out="$(pwd)/$dest/jaeger"
src=$(go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[[ -d "$src" ]] || { echo "install-jaeger: could not download $module@$version" >&2; exit 1; }
(cd "$src" && GOFLAGS=-buildvcs=false go build -trimpath -o "$out" ./cmd/jaeger)
echo "$version" > "$dest/jaeger.VERSION"
echo "install-jaeger: installed $dest/jaeger" >&2
