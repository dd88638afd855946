#!/usr/bin/env bash
# Installs what `budgetd serve` needs on a fresh machine: the Go modules and
# libchdb (the embedded ClickHouse engine) from the npm registry into
# .cache/libchdb. Safe to run again: it only fetches what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

LIBCHDB_PACKAGE="@chdb/lib-linux-x64-gnu"
LIBCHDB_VERSION="26.7.3-stable.1"
dest=.cache/libchdb

command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "setup: Go is not installed (want Go 1.26)" >&2; exit 1; }
go mod download

if [[ -f "$dest/libchdb.so" && "$(cat "$dest/VERSION" 2>/dev/null)" == "$LIBCHDB_VERSION" ]]; then
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "setup: npm is needed to fetch libchdb; installing Debian's npm" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
fi
echo "setup: fetching libchdb $LIBCHDB_VERSION (178 MB download, 566 MB unpacked)" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$LIBCHDB_PACKAGE@$LIBCHDB_VERSION" >/dev/null)
tar -xzf "$tmp"/*.tgz -C "$tmp" package/libchdb.so
mkdir -p "$dest"
mv "$tmp/package/libchdb.so" "$dest/libchdb.so"
echo "$LIBCHDB_VERSION" > "$dest/VERSION"
echo "setup: libchdb installed in $dest" >&2
