#!/usr/bin/env bash
# Installs headless Chromium and its WebDriver from Debian's packages for the page test
# (parity_tests/serve/test_serve_browser.py). Idempotent: returns at once when both are there.
# Needs root (CI runs as root); elsewhere it says what to install and returns 0, and the
# browser test skips saying why.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "install_browser.sh: not root or no apt-get; install Debian's chromium and" \
         "chromium-driver to run the page test" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-dejavu-core >/dev/null
chromium --version >&2
