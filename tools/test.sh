#!/usr/bin/env bash
# Installs the package with its test extras (CPU torch) and runs the parity suite.
# The README's test command; .ci/run calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --disable-pip-version-check "torch==2.13.0" -e ".[test]"
bash tools/install_browser.sh
python3 -m pytest -q "$@"
