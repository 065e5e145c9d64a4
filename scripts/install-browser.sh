#!/usr/bin/env bash
# Headless browser for the e2e tests: Debian's chromium, driven by the playwright Python package
# through executable_path=/usr/bin/chromium (we never run `playwright install`, which downloads
# its own browser builds). Idempotent: does nothing when chromium is already there.
set -euo pipefail

CHROMIUM="${TFDOCTOR_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$CHROMIUM" ]; then
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-browser: $CHROMIUM is missing and apt-get is not available;" \
       "install Chromium yourself (the browser tests are skipped without it)" >&2
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-browser: need root (or sudo) to apt-get install chromium; browser tests will be skipped" >&2
    exit 0
  fi
fi

echo "install-browser: installing Debian chromium" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core
"$CHROMIUM" --version >&2
