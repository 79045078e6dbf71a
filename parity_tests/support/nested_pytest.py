"""pytest run on a few tests in a fresh process, for the tests of what the suite itself does
(``--legacy-case``, ``--legacy-data-dir``, the CI check of the recordings): the options and
the session hooks of ``parity_tests/conftest.py`` as a user's ``pytest`` run meets them."""

import subprocess
import sys

from parity_tests.support.cases import REPO


def run_pytest(*args, env=None, timeout=600):
    """``python -m pytest -q -p no:cacheprovider ARGS`` from the repository root (no cache
    written into the checkout): its ``CompletedProcess``, stdout and stderr as text."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=REPO,
    )
