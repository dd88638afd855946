#!/usr/bin/env bash
# Installs telemetrygen, the OpenTelemetry load generator the ingest tests
# send spans with, into .cache/bin. The tests look for it there and fail,
# naming `make test-setup`, when it is missing.
# Safe to run again: it does nothing when the same version is installed.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION="v0.149.0"
dest=.cache/bin

command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "install-telemetrygen: Go is not installed (want Go 1.26)" >&2; exit 1; }

if [[ -x "$dest/telemetrygen" && "$(cat "$dest/telemetrygen.VERSION" 2>/dev/null)" == "$VERSION" ]]; then
  exit 0
fi
echo "install-telemetrygen: installing telemetrygen $VERSION" >&2
mkdir -p "$dest"
GOBIN="$(pwd)/$dest" go install "github.com/open-telemetry/opentelemetry-collector-contrib/cmd/telemetrygen@$VERSION"
echo "$VERSION" > "$dest/telemetrygen.VERSION"
echo "install-telemetrygen: installed $dest/telemetrygen" >&2
