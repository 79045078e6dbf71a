#!/usr/bin/env bash
# Installs groundhog-port with its test extras into the project's virtual environment
# .venv/ (created on the first run, see tools/venv.sh; TORCH_SPEC / TORCH_INDEX_URL choose
# torch) and runs the parity suite, printing the reason of every skipped test.
# The README's test command; .ci/run calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/venv.sh
ensure_venv test
bash tools/install_browser.sh
python -m pytest -q -rs "$@"
