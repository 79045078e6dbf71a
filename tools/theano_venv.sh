#!/usr/bin/env bash
# Creates, once, .venv-theano/ in the repository root: the legacy environment of
# ../shared/legacy_traces/MANIFEST.md section 1 (Theano 1.0.5, numpy 1.23.5, scipy 1.10.1,
# h5py 3.16.0 from the package index) in which parity_tests/parity/test_recorder_theano.py runs
# tools/record_theano_traces.py on real Theano.  tools/test.sh calls it; run it by hand with
#     bash tools/theano_venv.sh
#
# * Theano 1.0.5 needs numpy < 1.24 (it uses numpy.bool etc.), whose last release, 1.23.5,
#   has wheels for Python 3.8-3.11 only: the interpreter is THEANO_PYTHON (default python3.11
#   when found, else python3), and must be one of those.
# * Theano's C scan loop (scan_perform_ext, Cython) does not build on Python 3.11
#   (longintrepr.h is gone); as in MANIFEST section 1 it is disabled -- here by a .pth file
#   that sets sys.modules['theano.scan_module.scan_perform_ext'] = None at start-up, so
#   Theano runs its Python scan loop (it falls back on ImportError); inner graphs are still
#   C-compiled (g++ needed).  Values do not depend on it, only speed.
# * Theano must run with MANIFEST section 1's THEANO_FLAGS
#   (blas.ldflags=,floatX=float32,device=cpu,on_unused_input=warn): without blas.ldflags=
#   its BLAS probe fails on import with numpy 1.23 ('blas_opt_info').
# * Cost: the first run downloads about 60 MB and takes ~20 s (Theano is an sdist, built
#   locally); later runs compare a stamp and return at once.  Theano's compiled C modules are
#   cached in .venv-theano/compiledir (the first recorder test run compiles for ~1 min).
set -euo pipefail
cd "$(dirname "$0")/.."

THEANO_VENV=.venv-theano
THEANO_REQUIREMENTS="numpy==1.23.5 scipy==1.10.1 Theano==1.0.5 h5py==3.16.0"

theano_venv_die() {
    echo "error: $*" >&2
    exit 2
}

py=${THEANO_PYTHON:-}
if [ -z "$py" ]; then
    if command -v python3.11 >/dev/null; then py=python3.11; else py=python3; fi
fi
command -v "$py" >/dev/null || theano_venv_die "$py not found (set THEANO_PYTHON to a Python 3.8-3.11)"
"$py" -c 'import sys; sys.exit(not (3, 8) <= sys.version_info[:2] <= (3, 11))' \
    || theano_venv_die "$py is Python $("$py" -c 'import platform; print(platform.python_version())'); Theano 1.0.5 with numpy 1.23.5 needs Python 3.8-3.11 (set THEANO_PYTHON)"

stamp="$THEANO_VENV/.stamp"
want="$THEANO_REQUIREMENTS|$("$py" -VV)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "[theano-venv] $THEANO_VENV is up to date ($THEANO_REQUIREMENTS): nothing to install"
    exit 0
fi
echo "[theano-venv] creating $THEANO_VENV with $THEANO_REQUIREMENTS ($("$py" -VV | head -1); ~20 s, once)"
rm -rf "$THEANO_VENV"
"$py" -m venv "$THEANO_VENV" || { rm -rf "$THEANO_VENV"; theano_venv_die "'$py -m venv $THEANO_VENV' failed"; }
# shellcheck disable=SC2086
"$THEANO_VENV/bin/python" -m pip install -q --disable-pip-version-check $THEANO_REQUIREMENTS \
    || { rm -rf "$THEANO_VENV"; theano_venv_die "pip could not install $THEANO_REQUIREMENTS"; }
site=$("$THEANO_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "import sys; sys.modules['theano.scan_module.scan_perform_ext'] = None" \
    > "$site/groundhog_port_no_c_scan.pth"
# MANIFEST section 1's flags (blas.ldflags= is needed: Theano's BLAS probe fails on numpy 1.23)
THEANO_FLAGS="blas.ldflags=,floatX=float32,device=cpu,base_compiledir=$PWD/$THEANO_VENV/compiledir" \
    "$THEANO_VENV/bin/python" -c 'import theano, sys; assert sys.modules["theano.scan_module.scan_perform_ext"] is None; print("[theano-venv] Theano", theano.__version__, "ready (python scan loop)")'
printf '%s' "$want" > "$stamp"
