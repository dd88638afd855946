#!/usr/bin/env bash
# Installs oapi-codegen, which generates api/apiclient from api/openapi.yaml,
# into .cache/bin (scripts/install-go-tool.sh). `go generate ./api/apiclient`
# runs this first; api/apiclient's test regenerates the client with it.
set -euo pipefail
exec "$(dirname "$0")/install-go-tool.sh" github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen v2.8.2
