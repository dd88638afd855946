#!/usr/bin/env bash
# Installs what the tests need beyond `make setup`, each part only when it is
# missing: first Debian's ClickHouse server and client (18.16 on bookworm),
# which the store tests start on a free loopback port, and ZooKeeper (3.8,
# with Java), which the ClickHouse cluster test runs standalone for its
# replicas. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin"

missing=()
command -v clickhouse-server >/dev/null || missing+=(clickhouse-server)
command -v clickhouse-client >/dev/null || missing+=(clickhouse-client)
# The package has no command on PATH: the tests run its jars with java.
[[ -d /usr/share/zookeeper ]] && command -v java >/dev/null || missing+=(zookeeper)
if ((${#missing[@]})); then
  echo "test-setup: installing ${missing[*]} from Debian" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
scripts/install-ui-test-deps.sh
# The ingest tests export through a real OpenTelemetry Collector and load
# budgetd with telemetrygen; both are built from the Go module proxy once.
scripts/install-otelcol.sh
scripts/install-telemetrygen.sh
# The bench tests load Jaeger v2, the peer the harness compares budgetd with,
# and read back what it stored; built from the Go module proxy once.
scripts/install-jaeger.sh
# The API tests lint api/openapi.yaml with Redocly CLI (npm registry) and
# regenerate api/apiclient with oapi-codegen (Go module proxy) to check it
# is current.
scripts/install-redocly.sh
scripts/install-oapi-codegen.sh
