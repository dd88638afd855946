#!/usr/bin/env bash
# Usage: scripts/install-go-tool.sh PACKAGE VERSION
# Installs the command PACKAGE (a Go package path) at VERSION from the Go
# module proxy into .cache/bin, where the tests look for it; they fail,
# naming `make test-setup`, when it is missing. The install-<tool>.sh
# scripts call this with their pinned versions.
# Safe to run again: it does nothing when the same version is installed.
set -euo pipefail
cd "$(dirname "$0")/.."

pkg="$1"
version="$2"
name="${pkg##*/}"
dest=.cache/bin

command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "install-$name: Go is not installed (want Go 1.26)" >&2; exit 1; }

if [[ -x "$dest/$name" && "$(cat "$dest/$name.VERSION" 2>/dev/null)" == "$version" ]]; then
  exit 0
fi
echo "install-$name: installing $name $version" >&2
mkdir -p "$dest"
GOBIN="$(pwd)/$dest" go install "$pkg@$version"
echo "$version" > "$dest/$name.VERSION"
echo "install-$name: installed $dest/$name" >&2
