"""The boundary with files the port did not write: whatever a library raises is ONE error.

h5py, numpy's zip reader (``np.load`` on a ``.npz``) and the unpickler parse bytes from
disk; on a damaged file each can raise almost anything -- ``OSError`` from HDF5, a
``UnicodeDecodeError`` for a compound-type field name that is no longer UTF-8, ``TypeError``
or ``IndexError`` from a malformed header, ``zlib.error``, ``struct.error``... Listing the
types at each call site missed some (issue 17: ``UnicodeDecodeError`` at ``h5t.pyx``), so
every reader runs its parsing inside :func:`reading`, which turns *any* ``Exception`` into
one :class:`~groundhog_port.errors.LegacyInputError` naming the file.  Readers still raise
their own, more precise ``LegacyInputError`` first; the guard only catches what nobody
anticipated.

Two things pass through unchanged: ``MemoryError`` (an allocation the file made us attempt
is a bug to prevent by checking sizes first -- ``h5guard.check_dataset`` -- not to hide; the
fuzzer counts it as a memory blow-up) and ``BaseException`` that is not an ``Exception``
(Ctrl-C, ``SystemExit``).
"""

import contextlib
import functools

from .errors import LegacyInputError

#: longest library message quoted in the error (a damaged file can make it huge)
MAX_DETAIL = 300


def describe(err: BaseException) -> str:
    """``"Type: message"`` on one line, at most :data:`MAX_DETAIL` characters."""
    text = " ".join(str(err).split())
    text = f"{type(err).__name__}: {text}" if text else type(err).__name__
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 3] + "..."


@contextlib.contextmanager
def reading(path, what="unreadable or damaged file"):
    """Run the body as a parse of ``path``: an unexpected exception becomes
    ``LegacyInputError(path, f"{what} ({describe(err)})")``."""
    try:
        yield
    except (LegacyInputError, MemoryError):
        raise
    except Exception as err:  # noqa: BLE001 - the point: anything a parser raises on bad bytes
        raise LegacyInputError(path, f"{what} ({describe(err)})") from None


def reader_method(what):
    """Decorator for methods of a reader object with a ``path`` attribute: the method body
    runs inside :func:`reading` (``self.path``, ``what``)."""

    def wrap(method):
        @functools.wraps(method)
        def guarded(self, *args, **kwargs):
            with reading(self.path, what):
                return method(self, *args, **kwargs)

        return guarded

    return wrap
