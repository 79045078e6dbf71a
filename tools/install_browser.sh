#!/usr/bin/env bash
# Installs headless Chromium and its WebDriver from Debian's packages for the page tests
# (parity_tests/serve/test_serve_browser.py, the archive report's page test) -- system
# packages, so only when asked: `--with-browser` (tools/test.sh passes it on) or CI=true (as
# .ci/run sets it).  Otherwise it installs nothing and says how to enable the tests, which
# skip saying why.  Needs root and apt-get; idempotent (returns at once when both are there).
set -euo pipefail
asked=
for arg in "$@"; do
    case "$arg" in
        --with-browser) asked=yes ;;
        *) echo "install_browser.sh: unknown argument $arg (only --with-browser)" >&2; exit 2 ;;
    esac
done
case "${CI:-}" in ""|0|false|no) ;; *) asked=yes ;; esac
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    exit 0
fi
# name the part that is missing: Chromium may be there without its driver, or the reverse
missing=()
command -v chromium >/dev/null 2>&1 || missing+=("Chromium (Debian's chromium: no 'chromium' on PATH)")
command -v chromedriver >/dev/null 2>&1 || missing+=("its WebDriver (Debian's chromium-driver: no 'chromedriver' on PATH)")
if [ ${#missing[@]} = 2 ]; then missing_text="${missing[0]} and ${missing[1]}"; else missing_text="${missing[0]}"; fi
if [ -z "$asked" ]; then
    echo "[browser] not installed: $missing_text (system packages are installed only when" \
         "asked): the page tests will skip; 'bash tools/test.sh --with-browser' installs Debian's" \
         "chromium and chromium-driver with apt-get (root)" >&2
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "install_browser.sh: not root or no apt-get; missing: $missing_text; install" \
         "Debian's chromium and chromium-driver to run the page tests" >&2
    exit 0
fi
echo "[browser] installing Debian's chromium, chromium-driver and fonts-dejavu-core with apt-get" \
     "(system packages, for the page tests)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-dejavu-core >/dev/null
chromium --version >&2
