#!/usr/bin/env bash
# Builds the OpenTelemetry Collectors the tests export through, with the
# Collector's own builder:
#   - .cache/otelcol/otelcol-budgetd: an otlp receiver; otlp gRPC, otlphttp,
#     debug and nop exporters (the ingest tests);
#   - .cache/otelcol/otelcol-budgetd-zipkin: an otlp receiver and the
#     Zipkin exporter, whose Zipkin v2 JSON the foreign-format tests read
#     (ingest/formats_producers_test.go);
#   - .cache/otelcol/otelcol-budgetd-lb: an otlp receiver and the
#     loadbalancing exporter (routing_key: traceID), which spreads traces
#     over several budgetd replicas in the scale-out test (app/cluster_test.go,
#     docs/scale-out.md).
# The Zipkin and loadbalancing exporters are separate builds at an older
# release because the Go module proxy has neither for the releases after
# v0.161.0, and a Collector's components must all come from one release.
# The ingest tests look for the binaries there and fail, naming
# `make test-setup`, when one is missing.
# Safe to run again: it does nothing when the same versions are already built.
set -euo pipefail
cd "$(dirname "$0")/.."

dest=.cache/otelcol

command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "install-otelcol: Go is not installed (want Go 1.26)" >&2; exit 1; }
work=""
trap 'rm -rf "$work"' EXIT

# build NAME BUILDER_VERSION MANIFEST_BODY builds $dest/NAME from a builder
# manifest whose dist section this function writes, unless $dest/NAME.VERSION
# already names the builder version.
build() {
  local name=$1 builder=$2 components=$3
  local binary="$dest/$name" stampfile="$dest/$name.VERSION"
  # The first build's stamp predates the per-binary stamp files.
  [[ $name == otelcol-budgetd && ! -e $stampfile && -e $dest/VERSION ]] && stampfile="$dest/VERSION"
  if [[ -x "$binary" && "$(cat "$stampfile" 2>/dev/null)" == "$builder" ]]; then
    return 0
  fi
  echo "install-otelcol: building $name, OpenTelemetry Collector $builder (a few minutes)" >&2
  mkdir -p "$dest"
  rm -rf "$work"
  work=$(mktemp -d)
  cat > "$work/manifest.yaml" <<YAML
dist:
  name: $name
  description: OpenTelemetry Collector for budgetd's tests
  output_path: $work/build
$components
YAML
  GOBIN="$work/bin" go install "go.opentelemetry.io/collector/cmd/builder@$builder"
  "$work/bin/builder" --config "$work/manifest.yaml"
  mv "$work/build/$name" "$binary"
  echo "$builder" > "$dest/$name.VERSION"
  [[ $name == otelcol-budgetd ]] && echo "$builder" > "$dest/VERSION"
  echo "install-otelcol: installed $binary" >&2
}

CORE_VERSION="v0.165.0"      # go.opentelemetry.io/collector/cmd/builder and unstable core components
STABLE_VERSION="v1.71.0"     # stable core modules (confmap providers)
build otelcol-budgetd "$CORE_VERSION" "receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver $CORE_VERSION
exporters:
  - gomod: go.opentelemetry.io/collector/exporter/otlpexporter $CORE_VERSION
  - gomod: go.opentelemetry.io/collector/exporter/otlphttpexporter $CORE_VERSION
  - gomod: go.opentelemetry.io/collector/exporter/debugexporter $CORE_VERSION
  - gomod: go.opentelemetry.io/collector/exporter/nopexporter $CORE_VERSION
providers:
  - gomod: go.opentelemetry.io/collector/confmap/provider/fileprovider $STABLE_VERSION
  - gomod: go.opentelemetry.io/collector/confmap/provider/envprovider $STABLE_VERSION"

ZIPKIN_CORE_VERSION="v0.161.0"    # the newest release with a Zipkin exporter on the module proxy
ZIPKIN_STABLE_VERSION="v1.67.0"   # the stable core modules of that release
build otelcol-budgetd-zipkin "$ZIPKIN_CORE_VERSION" "receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver $ZIPKIN_CORE_VERSION
exporters:
  - gomod: github.com/open-telemetry/opentelemetry-collector-contrib/exporter/zipkinexporter $ZIPKIN_CORE_VERSION
providers:
  - gomod: go.opentelemetry.io/collector/confmap/provider/fileprovider $ZIPKIN_STABLE_VERSION
  - gomod: go.opentelemetry.io/collector/confmap/provider/envprovider $ZIPKIN_STABLE_VERSION"

# The loadbalancing exporter (type load_balancing at this release) pulls in
# the AWS Cloud Map resolver, whose servicediscovery v1.48.x the module
# proxy refuses: pin the next release.
build otelcol-budgetd-lb "$ZIPKIN_CORE_VERSION" "receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver $ZIPKIN_CORE_VERSION
exporters:
  - gomod: github.com/open-telemetry/opentelemetry-collector-contrib/exporter/loadbalancingexporter $ZIPKIN_CORE_VERSION
  - gomod: go.opentelemetry.io/collector/exporter/otlpexporter $ZIPKIN_CORE_VERSION
providers:
  - gomod: go.opentelemetry.io/collector/confmap/provider/fileprovider $ZIPKIN_STABLE_VERSION
  - gomod: go.opentelemetry.io/collector/confmap/provider/envprovider $ZIPKIN_STABLE_VERSION
replaces:
  - github.com/aws/aws-sdk-go-v2/service/servicediscovery => github.com/aws/aws-sdk-go-v2/service/servicediscovery v1.49.0"
