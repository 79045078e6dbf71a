# Sourced by tools/demo.sh and tools/test.sh (not run on its own): creates, once, the
# project's virtual environment .venv/ in the repository root and installs groundhog-port
# into it in editable mode.  The system interpreter only creates the environment; nothing
# is installed into it, so this works where pip refuses to touch the system Python
# (PEP 668 "externally-managed-environment", Debian 12, Ubuntu 24.04).
#
# Re-running is cheap: when pyproject.toml, the extras and the torch choice are unchanged
# since the last successful install, pip is not run at all; otherwise pip installs only
# what is missing or changed.  pip's own configuration (a local wheel folder, an offline
# index) applies as for any pip call.
#
# Environment:
#   PYTHON           the interpreter that creates .venv (default python3; Python >= 3.10)
#   TORCH_SPEC       the torch requirement (default torch==2.13.0, the version CI tests)
#   TORCH_INDEX_URL  a package index to take torch from, to choose its CPU or CUDA build
#                    (see the README); unset: pip's configured indexes decide
set -euo pipefail

VENV=.venv
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
TORCH_INDEX_URL=${TORCH_INDEX_URL:-}

venv_die() {
    echo "error: $*" >&2
    exit 2
}

# ensure_venv EXTRAS: .venv exists, holds torch and groundhog-port[EXTRAS], and is first on PATH
ensure_venv() {
    local extras=$1 target=. py=${PYTHON:-python3}
    [ -n "$extras" ] && target=".[$extras]"
    if ! "$VENV/bin/python" -c 'import sys, pip; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
        if [ -e "$VENV" ]; then
            echo "[venv] $VENV is unusable (no working Python >= 3.10 with pip in it): recreating it"
            rm -rf "$VENV"
        fi
        command -v "$py" >/dev/null \
            || venv_die "$py not found; install Python >= 3.10, or set PYTHON=/path/to/python3"
        "$py" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
            || venv_die "$py is Python $("$py" -c 'import platform; print(platform.python_version())'); groundhog-port needs >= 3.10 (set PYTHON=/path/to/python3.10+)"
        "$py" -c 'import venv, ensurepip' 2>/dev/null \
            || venv_die "$py cannot create virtual environments (its venv/ensurepip modules are missing); on Debian/Ubuntu: apt-get install python3-venv (or python3.N-venv for your version N), then run this again"
        echo "[venv] creating $VENV with $(command -v "$py") ($("$py" -c 'import platform; print(platform.python_version())')); the system Python is left untouched"
        "$py" -m venv "$VENV" || { rm -rf "$VENV"; venv_die "'$py -m venv $VENV' failed (see above)"; }
    fi
    # what the install depends on; equal to the last successful one's: nothing to do
    local stamp="$VENV/.groundhog-port-${extras:-base}.stamp" want
    want=$(cat pyproject.toml; echo "$PWD|$extras|$TORCH_SPEC|$TORCH_INDEX_URL"; "$VENV/bin/python" -VV)
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        echo "[venv] $VENV is up to date ($TORCH_SPEC, groundhog-port$([ -n "$extras" ] && echo "[$extras]")): nothing to install"
    else
        echo "[venv] installing $TORCH_SPEC and groundhog-port$([ -n "$extras" ] && echo "[$extras]") (editable) into $VENV (the first time takes a few minutes)"
        rm -f "$stamp"
        local pip=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
        if [ -n "$TORCH_INDEX_URL" ]; then
            "${pip[@]}" --index-url "$TORCH_INDEX_URL" "$TORCH_SPEC"
        fi
        "${pip[@]}" "$TORCH_SPEC" -e "$target"
        printf '%s' "$want" > "$stamp"
    fi
    export VIRTUAL_ENV="$PWD/$VENV"
    export PATH="$VIRTUAL_ENV/bin:$PATH"
}
