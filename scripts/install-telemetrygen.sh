#!/usr/bin/env bash
# Installs telemetrygen, the OpenTelemetry load generator the ingest tests
# send spans with, into .cache/bin (scripts/install-go-tool.sh).
set -euo pipefail
exec "$(dirname "$0")/install-go-tool.sh" github.com/open-telemetry/opentelemetry-collector-contrib/cmd/telemetrygen v0.149.0
