#!/usr/bin/env bash
# Builds the OpenTelemetry Collector the ingest tests export through (an otlp
# receiver; otlp gRPC, otlphttp, debug and nop exporters) with the Collector's
# own builder, into .cache/otelcol/otelcol-budgetd. The ingest tests look for
# it there and fail, naming `make test-setup`, when it is missing.
# Safe to run again: it does nothing when the same version is already built.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILDER_VERSION="v0.165.0"   # go.opentelemetry.io/collector/cmd/builder
CORE_VERSION="v0.165.0"      # unstable core components
STABLE_VERSION="v1.71.0"     # stable core modules (confmap providers)
dest=.cache/otelcol
binary="$dest/otelcol-budgetd"
stamp="$BUILDER_VERSION"

command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "install-otelcol: Go is not installed (want Go 1.26)" >&2; exit 1; }

if [[ -x "$binary" && "$(cat "$dest/VERSION" 2>/dev/null)" == "$stamp" ]]; then
  exit 0
fi

echo "install-otelcol: building the OpenTelemetry Collector $CORE_VERSION (a few minutes)" >&2
mkdir -p "$dest"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/manifest.yaml" <<YAML
dist:
  name: otelcol-budgetd
  description: OpenTelemetry Collector for budgetd's ingest tests
  output_path: $work/build
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver $CORE_VERSION
exporters:
  - gomod: go.opentelemetry.io/collector/exporter/otlpexporter $CORE_VERSION
  - gomod: go.opentelemetry.io/collector/exporter/otlphttpexporter $CORE_VERSION
  - gomod: go.opentelemetry.io/collector/exporter/debugexporter $CORE_VERSION
  - gomod: go.opentelemetry.io/collector/exporter/nopexporter $CORE_VERSION
providers:
  - gomod: go.opentelemetry.io/collector/confmap/provider/fileprovider $STABLE_VERSION
  - gomod: go.opentelemetry.io/collector/confmap/provider/envprovider $STABLE_VERSION
YAML
GOBIN="$work/bin" go install "go.opentelemetry.io/collector/cmd/builder@$BUILDER_VERSION"
"$work/bin/builder" --config "$work/manifest.yaml"
mv "$work/build/otelcol-budgetd" "$binary"
echo "$stamp" > "$dest/VERSION"
echo "install-otelcol: installed $binary" >&2
