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

The bounded readers (issue 40) live here too, so that no reader opens a file the port did
not write in a way that can block or take unbounded memory:

* :func:`check_special` / :func:`open_input`: FIFOs, character and block devices and sockets
  are refused *by type* (``os.stat`` does not open, and the one ``open`` is ``O_NONBLOCK``
  and checked again with ``fstat``), so ``model.safetensors`` as a FIFO, ``--source
  /dev/zero`` or ``scores_batch.txt -> /dev/urandom`` never reach a read;
* :func:`read_input`: a whole file, its size checked against the parse budget before
  anything is read;
* :func:`iter_lines`: a text file line by line, each line at most :func:`max_line_bytes`
  (1/4096 of the parse budget: 64 KiB by default, a sentence of some 10,000 words), the
  lines' memory charged to the budget as they come; gzip, bzip2 and xz files (told by
  their magic number) are decompressed as they are read, under the same limits;
* :func:`load_json` / :func:`read_json`: JSON under the budget (size and element count
  estimated before parsing), the nesting depth, the length of each number, no ``NaN`` /
  ``Infinity``; anything else is one :class:`LegacyInputError`, never a ``RecursionError``
  or ``ValueError`` traceback.
"""

import contextlib
import functools
import json
import os
import stat

from . import budget
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


# ----------------------------------------------------------------------------------------
# bounded readers (issue 40)
# ----------------------------------------------------------------------------------------
_SPECIAL = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def special_kind(mode: int) -> str | None:
    """What a file of ``st_mode`` ``mode`` is when it is not a regular file or a folder."""
    return _SPECIAL.get(stat.S_IFMT(mode))


def _refusal(path, kind, what):
    return LegacyInputError(
        path,
        f"is {kind}, not a regular file: not read as {what} (reading it could block "
        "forever or never end)",
    )


def check_special(path, what="an input"):
    """Refuse ``path`` when it is (or a link leads to) a FIFO, a device or a socket -- by
    ``os.stat``, which opens nothing; a missing or unreadable path passes (the reader's
    own open says what is wrong)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    kind = special_kind(st.st_mode)
    if kind is not None:
        raise _refusal(path, kind, what)
    return st


def open_input(path, what="an input"):
    """``path`` opened for reading in binary, only if it is a regular file.

    The open is non-blocking (a FIFO without a writer does not wait) and the opened file is
    checked again with ``fstat`` (a name swapped for a FIFO after :func:`check_special`).
    A folder is refused too; a missing file raises :class:`FileNotFoundError` as ``open``
    does, for the caller's own message."""
    check_special(path, what)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        kind = special_kind(st.st_mode)
        if kind is not None:
            raise _refusal(path, kind, what)
        if stat.S_ISDIR(st.st_mode):
            raise LegacyInputError(path, f"is a folder, not a file ({what})")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _os_error(path, err, what):
    if isinstance(err, FileNotFoundError):
        return LegacyInputError(path, f"cannot read {what}: file not found")
    return LegacyInputError(path, f"cannot read {what} ({err.strerror or err})")


def read_input(path, what="an input", limit=None):
    """The bytes of ``path`` (a regular file), its size checked before reading: at most
    ``limit`` bytes when given, and within the parse budget."""
    try:
        with open_input(path, what) as f:
            size = os.fstat(f.fileno()).st_size
            if limit is not None and size > limit:
                raise LegacyInputError(
                    path, f"{what} of {size} bytes: more than the {limit} accepted"
                )
            budget.check(path, f"{what} of {size} bytes", size)
            data = f.read(size + 1)
    except OSError as err:
        raise _os_error(path, err, what) from None
    if len(data) > size:  # grew while read: still bounded, never read to its end
        raise LegacyInputError(path, f"{what} is growing while read (a log being written?)")
    return data


def read_tail(path, what="a log", limit=1 << 20):
    """The last ``limit`` bytes of ``path`` (a regular file; all of it when shorter): what a
    log's last lines need, whatever its size."""
    try:
        with open_input(path, what) as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - limit))
            return f.read(limit)
    except OSError as err:
        raise _os_error(path, err, what) from None


#: the line limit is this fraction of the parse budget (64 KiB of the default 256 MiB)
LINE_FRACTION = 4096
#: what holding one line costs beyond its bytes: a ``str`` object and a list slot
LINE_OVERHEAD = 64


def max_line_bytes() -> int:
    """Longest line :func:`iter_lines` accepts: 1/:data:`LINE_FRACTION` of the parse
    budget (64 KiB by default, some 10,000 words: GroundHog trained on ``seqlen`` = 50)."""
    return budget.budget_bytes() // LINE_FRACTION


#: compressed text, told by its first bytes (never by its name): gzip (RFC 1952), bzip2, xz
COMPRESSIONS = ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"))
#: the suffixes those formats are kept under (``newstest2012.en.gz``)
COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz")


def compression_of(head: bytes) -> str | None:
    """The compression whose magic number ``head`` (a file's first bytes) starts with."""
    for magic, kind in COMPRESSIONS:
        if head.startswith(magic):
            return kind
    return None


def strip_compression(name: str) -> str:
    """``name`` without its compression suffix (``test.en.gz`` -> ``test.en``)."""
    for suffix in COMPRESSED_SUFFIXES:
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def _decompressed(f, kind):
    import bz2
    import gzip
    import lzma

    opener = {"gzip": gzip.GzipFile, "bzip2": bz2.BZ2File, "xz": lzma.LZMAFile}[kind]
    return opener(fileobj=f) if kind == "gzip" else opener(f)


def _decompression_errors():
    import lzma
    import zlib

    return (OSError, EOFError, zlib.error, lzma.LZMAError)


def iter_raw_lines(path, what="a text file", whole=True):
    """``(number, raw)``: the lines of ``path`` as bytes, each with its ``b"\\n"`` (a last
    line without one comes without), one at a time -- the one reader of text files the
    port did not write.

    A gzip, bzip2 or xz file (told by its magic number) is decompressed as it is read, so
    ``newstest2012.en.gz`` reads as ``newstest2012.en`` everywhere a text file is read; its
    decompressed lines are under the same limits as a plain file's, so a decompression bomb
    stops at the budget, never at the end of its stream.

    Refused with one line naming the file: a special file (by type, before any open), a
    file bigger than the parse budget (before anything is read), a line longer than
    :func:`max_line_bytes` (before it is held whole), lines whose memory -- bytes plus
    :data:`LINE_OVERHEAD` each, as a caller keeping them holds them -- passes the budget,
    and a damaged compressed stream.  ``whole=False``: the caller reads only the first lines
    (the file's size is not held against the budget; its lines still are)."""
    limit = max_line_bytes()
    try:
        f = open_input(path, what)
    except OSError as err:
        raise _os_error(path, err, what) from None
    with f:
        size = os.fstat(f.fileno()).st_size
        if whole:
            budget.check(path, f"{what} of {size} bytes", size)
        kind = compression_of(f.peek(8)[:8])
        stream = f if kind is None else _decompressed(f, kind)
        errors = OSError if kind is None else _decompression_errors()
        shown = what if kind is None else f"{what} ({kind}-compressed)"
        held, cap = 0, budget.budget_bytes()
        number = 0
        while True:
            try:
                line = stream.readline(limit + 1)
            except errors as err:
                if kind is None:
                    raise _os_error(path, err, what) from None
                raise LegacyInputError(
                    path, f"damaged {kind} stream after line {number} ({describe(err)})"
                ) from None
            if not line:
                return
            number += 1
            if not line.endswith(b"\n") and len(line) > limit:
                raise LegacyInputError(
                    path,
                    f"line {number} is longer than {limit} bytes (the line-length limit, "
                    f"1/{LINE_FRACTION} of the parse budget: not a sentence; for genuinely "
                    f"long lines raise the budget with {budget.FLAG} N or {budget.ENV}=N)",
                )
            held += len(line) + LINE_OVERHEAD
            if held > cap:
                raise budget.over_budget(path, f"the lines of {shown} (up to line {number})")
            yield number, line


def iter_lines(path, what="a text file", whole=True):
    """``(number, line)`` of ``path``, lines ending at ``b"\\n"`` only (the ``\\n``
    removed, nothing else), one at a time, under the limits of :func:`iter_raw_lines`
    (compressed files read decompressed)."""
    for number, line in iter_raw_lines(path, what, whole):
        yield number, line[:-1] if line.endswith(b"\n") else line


def read_text(path, what="a text file") -> str:
    """The whole of a UTF-8 text file (compressed or not) as one ``str`` with universal
    newlines (``\\r\\n`` and ``\\r`` read as ``\\n``, as ``Path.read_text`` reads), through
    :func:`iter_raw_lines` (its line and budget limits); a byte that is not UTF-8 is one
    :class:`LegacyInputError` naming the file, the line and the byte."""
    parts = []
    for number, raw in iter_raw_lines(path, what):
        try:
            parts.append(raw.decode("utf-8"))
        except UnicodeDecodeError as err:
            raise LegacyInputError(
                path,
                f"line {number}: not valid UTF-8 (byte 0x{raw[err.start]:02x} at column "
                f"{err.start + 1}); {what} must be UTF-8",
            ) from None
    return "".join(parts).replace("\r\n", "\n").replace("\r", "\n")


#: deepest JSON nesting accepted by default (GroundHog's config and requests need 4)
MAX_JSON_DEPTH = 32
#: longest number accepted in JSON text (int64 needs 20 characters, a float repr 24)
MAX_JSON_NUMBER = 40
#: what one JSON element (a ``,`` or ``:`` apart) may cost parsed: a small object (str,
#: int or float: 28-60 bytes), a list slot or a dict entry (8-100 bytes, with growth)
JSON_ELEMENT_BYTES = 160


class _Refused(ValueError):
    pass


def _number(text, kind):
    if len(text) > MAX_JSON_NUMBER:
        raise _Refused(f"a number of {len(text)} characters (at most {MAX_JSON_NUMBER})")
    value = kind(text)
    if kind is float and value in (float("inf"), float("-inf")):
        raise _Refused(f"the number {text} is out of range for a float")
    return value


def _constant(name):
    raise _Refused(f"{name} is not JSON (a non-finite number)")


_DECODER = json.JSONDecoder(
    parse_int=lambda t: _number(t, int),
    parse_float=lambda t: _number(t, float),
    parse_constant=_constant,
)


def json_depth(value, limit):
    """How deep the containers (objects, arrays) of a parsed JSON value nest (``0`` for a
    scalar, ``1`` for ``[1, 2]``), or ``limit + 1`` as soon as it passes ``limit``;
    iterative (no recursion on hostile depth)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        children = v.values() if isinstance(v, dict) else v if isinstance(v, list) else None
        if children is None:
            continue
        deepest = max(deepest, d)
        if deepest > limit:
            return deepest
        stack.extend((x, d + 1) for x in children if isinstance(x, (dict, list)))
    return deepest


def json_estimate(data) -> int:
    """Bytes a JSON text may take once parsed: twice its size (the text and the decoded
    strings) plus :data:`JSON_ELEMENT_BYTES` per element; counted with ``bytes.count``
    before anything is parsed."""
    sep = (b",", b":") if isinstance(data, bytes) else (",", ":")
    return 2 * len(data) + JSON_ELEMENT_BYTES * (1 + data.count(sep[0]) + data.count(sep[1]))


def load_json(data, path=None, what="JSON", max_depth=MAX_JSON_DEPTH):
    """``data`` (``bytes`` in UTF-8, or ``str``) parsed as strict JSON under the parse
    budget; anything else -- not UTF-8, malformed, nested deeper than ``max_depth``, a
    number longer than :data:`MAX_JSON_NUMBER` characters, ``NaN`` / ``Infinity`` -- is
    one :class:`LegacyInputError` naming ``path`` and ``what``."""
    budget.check(path, f"{what} of {len(data)} bytes", json_estimate(data))
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
        value = _DECODER.decode(text)
    except _Refused as err:
        raise LegacyInputError(path, f"{what} is refused: {err}") from None
    except RecursionError:
        raise LegacyInputError(
            path, f"{what} is refused: nested deeper than {max_depth} levels"
        ) from None
    except (UnicodeDecodeError, ValueError) as err:
        raise LegacyInputError(path, f"{what} is not UTF-8 JSON ({describe(err)})") from None
    if json_depth(value, max_depth) > max_depth:
        raise LegacyInputError(path, f"{what} is refused: nested deeper than {max_depth} levels")
    return value


def read_json(path, what="a JSON file", max_depth=MAX_JSON_DEPTH, limit=None):
    """:func:`read_input` then :func:`load_json`."""
    return load_json(read_input(path, what, limit), path, what, max_depth)
