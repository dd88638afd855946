#!/usr/bin/env bash
# Installs what the web UI and deploy tests need beyond `make setup`:
# Debian's chromium (the UI test drives it headless) and Debian's prometheus
# package for promtool (the alert rules test runs `promtool check rules`).
# Only what is missing is installed; safe to run again.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"

missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v promtool >/dev/null || missing+=(prometheus)
if ((${#missing[@]})); then
  echo "install-ui-test-deps: installing ${missing[*]} from Debian" >&2
  apt-get update -qq
  # Only promtool is wanted from the prometheus package. Without an init
  # system (containers, CI) its server does not start; on a host with
  # systemd the package enables one: `systemctl disable --now prometheus`.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
