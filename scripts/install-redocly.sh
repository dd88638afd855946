#!/usr/bin/env bash
# Installs Redocly CLI, the OpenAPI linter api/openapi_lint_test.go runs on
# api/openapi.yaml, from the npm registry into .cache/redocly. The test looks
# for it there and fails, naming `make test-setup`, when it is missing.
# Safe to run again: it does nothing when the same version is installed.
set -euo pipefail
cd "$(dirname "$0")/.."

# 2.x needs Node.js 20.19 or later (the machine image ships 20). Debian
# bookworm's own nodejs is 18, which only 1.34 runs; both versions report
# the same on api/openapi.yaml with the recommended rules.
VERSION="2.77.0"
NODE18_VERSION="1.34.20"
dest=.cache/redocly

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "install-redocly: Node.js and npm are needed; installing Debian's nodejs and npm" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)'; then
  echo "install-redocly: Node.js $(node --version) is older than 20.19: using @redocly/cli $NODE18_VERSION" >&2
  VERSION="$NODE18_VERSION"
fi

if [[ -x "$dest/node_modules/.bin/redocly" && "$(cat "$dest/VERSION" 2>/dev/null)" == "$VERSION" ]]; then
  exit 0
fi
echo "install-redocly: installing @redocly/cli $VERSION" >&2
rm -rf "$dest"
mkdir -p "$dest"
npm install --silent --no-audit --no-fund --prefix "$dest" "@redocly/cli@$VERSION" >/dev/null
echo "$VERSION" > "$dest/VERSION"
echo "install-redocly: installed $dest/node_modules/.bin/redocly" >&2
