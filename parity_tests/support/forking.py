"""Running a piece of a test in a forked child: a file-size limit (``ulimit -f``) or a
SIGKILL stays there, and the parent reads what happened."""

import os
import resource
import signal


def in_child(fn):
    """``fn()`` in a forked child; returns ``(message, wait status)``: ``"ok <result>"`` or
    ``"<ExceptionName> <text>"`` (empty when the child was killed before it could say)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            msg = f"ok {fn()}"
        except BaseException as err:  # noqa: BLE001 - reported to the parent
            msg = f"{type(err).__name__} {err}"
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        msg = f.read().decode()
    _, status = os.waitpid(pid, 0)
    return msg, status


def file_size_limit(n):
    """``ulimit -f``: writes past ``n`` bytes fail with EFBIG (SIGXFSZ ignored)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
