#!/usr/bin/env bash
# Installs groundhog-port with its test extras into the project's virtual environment
# .venv/ (created on the first run, see tools/venv.sh; TORCH_SPEC / TORCH_INDEX_URL choose
# torch) and the legacy Theano environment .venv-theano/ (tools/theano_venv.sh), and runs
# the parity suite, printing the reason of every skipped test.  System packages (Debian's
# chromium for the page tests, tools/install_browser.sh) only with --with-browser or CI=true;
# other arguments go to pytest.
# The README's test command; .ci/run calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
with_browser=()
pytest_args=()
for arg in "$@"; do
    if [ "$arg" = --with-browser ]; then with_browser=(--with-browser); else pytest_args+=("$arg"); fi
done
source tools/venv.sh
ensure_venv test
bash tools/install_browser.sh ${with_browser[@]+"${with_browser[@]}"}
# the layout's guard-rails (CONTRIBUTING.md): ruff lint and format, the import-linter layers
bash tools/lint.sh
# .venv-theano: real Theano 1.0.5 for parity_tests/parity/test_recorder_theano.py (~20 s once, then a
# stamp check); outside CI a failure only makes that test skip, with the reason
case "${CI:-}" in
    ""|0|false|no) bash tools/theano_venv.sh || echo "[theano-venv] not created: the real-Theano recorder test will skip" ;;
    *) bash tools/theano_venv.sh ;;
esac
# a fresh fuzz seed on every run, printed for replay (--seed N --only I); FUZZ_SECONDS=0 skips
if [ "${FUZZ_SECONDS:-60}" != 0 ]; then
    python tools/fuzz.py --seed fresh --cases 1000000 --time-budget "${FUZZ_SECONDS:-60}"
fi
# two pytest workers (pytest-xdist), a test file each at a time (module fixtures built once):
# the 2-core machine's suite in ~8 minutes instead of ~14; TEST_WORKERS=0 runs it in one process
python -m pytest -q -rs -n "${TEST_WORKERS:-2}" --dist loadfile ${pytest_args[@]+"${pytest_args[@]}"}
