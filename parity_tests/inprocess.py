"""``groundhog-port ARGS`` run in this process, for tests that are not about the process
boundary: a fresh ``python -m groundhog_port`` costs seconds of importing torch per call.

:func:`groundhog_port.fuzzing.run_cli_inprocess` captures stdout and stderr at the file
descriptors and gives the exit status ``main`` returns; here the warnings a fresh process
would print on stderr (all but the categories Python hides by default) are recorded and
appended to stderr too, since pytest would otherwise swallow them.
"""
import subprocess
import warnings

from groundhog_port.cli import main
from groundhog_port.fuzzing import run_cli_inprocess

#: what a fresh interpreter's default warning filters do not print
HIDDEN_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


def run_cli(*args, cwd=None):
    """``groundhog-port ARGS`` -> ``CompletedProcess(args, returncode, stdout, stderr)``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rc, out, err = run_cli_inprocess(main, [str(a) for a in args], cwd=cwd)
    err += "".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno)
                   for w in caught if not issubclass(w.category, HIDDEN_WARNINGS))
    return subprocess.CompletedProcess(list(args), rc, out, err)
