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

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import json
import os
import re
import stat
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

from . import budget, contained
from .containers import Damaged, Decompressed, compression
from .errors import LegacyInputError

#: longest library message quoted in the error (a damaged file can make it huge)
MAX_DETAIL = 300

_F = TypeVar("_F", bound=Callable[..., Any])


def describe(err: BaseException) -> str:
    """``"Type: message"`` on one line, at most :data:`MAX_DETAIL` characters."""
    text = " ".join(str(err).split())
    text = f"{type(err).__name__}: {text}" if text else type(err).__name__
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 3] + "..."


@contextlib.contextmanager
def reading(
    path: str | os.PathLike[str], what: str = "unreadable or damaged file"
) -> Iterator[None]:
    """Run the body as a parse of ``path``: an unexpected exception becomes
    ``LegacyInputError(path, f"{what} ({describe(err)})")``.  In a contained worker the
    file is marked as the one being read (:func:`groundhog_port.contained.reading`)."""
    contained.reading(path)
    try:
        yield
    except (LegacyInputError, MemoryError):
        raise
    except Exception as err:  # noqa: BLE001 - the point: anything a parser raises on bad bytes
        raise LegacyInputError(path, f"{what} ({describe(err)})") from None


def reader_method(what: str) -> Callable[[_F], _F]:
    """Decorator for methods of a reader object with a ``path`` attribute: the method body
    runs inside :func:`reading` (``self.path``, ``what``)."""

    def wrap(method):
        @functools.wraps(method)
        def guarded(self, *args, **kwargs):
            with reading(self.path, what):
                return method(self, *args, **kwargs)

        return cast(_F, guarded)

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


def check_special(path: str | os.PathLike[str], what: str = "an input") -> os.stat_result | None:
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


def open_input(path: str | os.PathLike[str], what: str = "an input") -> io.BufferedReader:
    """``path`` opened for reading in binary, only if it is a regular file.

    The open is non-blocking (a FIFO without a writer does not wait) and the opened file is
    checked again with ``fstat`` (a name swapped for a FIFO after :func:`check_special`).
    A folder is refused too; a missing file raises :class:`FileNotFoundError` as ``open``
    does, for the caller's own message."""
    check_special(path, what)
    contained.reading(path)  # named if a contained worker's limit stops it while on this file
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


def read_input(
    path: str | os.PathLike[str], what: str = "an input", limit: int | None = None
) -> bytes:
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


def read_tail(path: str | os.PathLike[str], what: str = "a log", limit: int = 1 << 20) -> bytes:
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


#: the suffixes gzip, bzip2 and xz files are kept under (``newstest2012.en.gz``); their
#: magic numbers: :func:`groundhog_port.containers.compression`
COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz")


#: the compression whose magic number a file's first bytes start with (one table of them)
compression_of = compression


def strip_compression(name: str) -> str:
    """``name`` without its compression suffix (``test.en.gz`` -> ``test.en``)."""
    for suffix in COMPRESSED_SUFFIXES:
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


#: most decompressed bytes read per byte of a compressed text, and the floor for a tiny
#: file: natural text compresses 3 to 10 times (bzip2 on a repetitive corpus some 20), so a
#: text passing this is a bomb (a 48-byte .bz2 of 10 MiB of newlines took 2.4 s to count;
#: a 7.5 KB .xz of 500,000 lines, +1 GiB in bleu)
MAX_TEXT_RATIO = 200
TEXT_RATIO_FLOOR = 64 << 10


def _decompressed(f, kind, size, path):
    """The decompressed bytes of ``f`` as a buffered stream (``readline`` bounded),
    at most :data:`MAX_TEXT_RATIO` times its ``size`` (xz under its memory limit)."""
    limit = max(TEXT_RATIO_FLOOR, MAX_TEXT_RATIO * size)
    why = f"{MAX_TEXT_RATIO} times the file's {size} bytes: no text compresses that well"
    return io.BufferedReader(Decompressed(f, kind, limit, path, why))


def iter_raw_lines(
    path: str | os.PathLike[str], what: str = "a text file", whole: bool = True
) -> Iterator[tuple[int, bytes]]:
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
        stream = f if kind is None else _decompressed(f, kind, size, path)
        errors = (OSError, Damaged)
        shown = what if kind is None else f"{what} ({kind}-compressed)"
        held, cap = 0, budget.budget_bytes()
        number = 0
        while True:
            try:
                line = stream.readline(limit + 1)
            except errors as err:
                if kind is None:
                    raise _os_error(path, err, what) from None
                detail = err.problem if isinstance(err, Damaged) else describe(err)
                raise LegacyInputError(
                    path, f"damaged {kind} stream after line {number} ({detail})"
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


def iter_lines(
    path: str | os.PathLike[str], what: str = "a text file", whole: bool = True
) -> Iterator[tuple[int, bytes]]:
    """``(number, line)`` of ``path``, lines ending at ``b"\\n"`` only (the ``\\n``
    removed, nothing else), one at a time, under the limits of :func:`iter_raw_lines`
    (compressed files read decompressed)."""
    for number, line in iter_raw_lines(path, what, whole):
        yield number, line[:-1] if line.endswith(b"\n") else line


def read_text(path: str | os.PathLike[str], what: str = "a text file") -> str:
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


def json_depth(value: object, limit: int) -> int:
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


def json_estimate(data: bytes | str) -> int:
    """Bytes a JSON text may take once parsed: twice its size (the text and the decoded
    strings) plus :data:`JSON_ELEMENT_BYTES` per element; counted with ``bytes.count``
    before anything is parsed."""
    if isinstance(data, bytes):
        elements = 1 + data.count(b",") + data.count(b":")
    else:
        elements = 1 + data.count(",") + data.count(":")
    return 2 * len(data) + JSON_ELEMENT_BYTES * elements


def load_json(
    data: bytes | str,
    path: str | os.PathLike[str] | None = None,
    what: str = "JSON",
    max_depth: int = MAX_JSON_DEPTH,
) -> Any:  # a parsed JSON value: any of dict, list, str, int, float, bool, None
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


def read_json(
    path: str | os.PathLike[str],
    what: str = "a JSON file",
    max_depth: int = MAX_JSON_DEPTH,
    limit: int | None = None,
) -> Any:  # a parsed JSON value (load_json)
    """:func:`read_input` then :func:`load_json`."""
    return load_json(read_input(path, what, limit), path, what, max_depth)


# ----------------------------------------------------------------------------------------
# WMT SGML / XML test sets: their segments are the sentences (issue 50 item 4)
# ----------------------------------------------------------------------------------------
#: the outermost elements of a WMT test set file: mteval's SGML (``srcset``, ``refset``,
#: ``tstset``, mteval-v14's ``mteval``) and the WMT21+ XML form (``dataset``)
MARKUP_ROOTS = ("srcset", "refset", "tstset", "mteval", "dataset")
#: the elements accepted around the segments (anything else outside a ``<seg>`` is refused)
MARKUP_ELEMENTS = frozenset(MARKUP_ROOTS + ("collection", "doc", "p", "hl", "src", "ref", "hyp"))
#: the parts of a WMT XML ``<dataset>`` (one file holds the source, references, outputs)
MARKUP_PARTS = ("src", "ref", "hyp")
_ROOT = re.compile(rb"<(" + b"|".join(r.encode() for r in MARKUP_ROOTS) + rb")[\s>/]")
_XML_DECL = re.compile(rb"<\?xml\b[^>]*\?>")
_TAG = re.compile(r"<(/?)([A-Za-z_][-A-Za-z0-9_.:]*)([^<>]*?)(/?)>")
_SEG_OPEN = re.compile(r"<seg(?:\s[^<>]*)?>")
_XML_ENTITY = re.compile(r"&(?:#([0-9]{1,7})|#x([0-9A-Fa-f]{1,6})|(amp|lt|gt|quot|apos));")
_XML_PREDEFINED = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'"}
#: sacrebleu's ``Dataset._clean``: strip, and any run of whitespace as one space
_CLEAN = re.compile(r"\s+")


def markup_kind(first: bytes, second: bytes = b"") -> str | None:
    """``"sgml"`` or ``"xml"`` when a file whose first non-blank line is ``first`` (the next
    non-blank one ``second``) is a WMT test set, else ``None`` (a plain text file).

    Told by content, never by name: the first non-blank bytes open a ``<srcset``,
    ``<refset``, ``<tstset``, ``<mteval`` or ``<dataset`` element (``"sgml"``; ``dataset``
    is ``"xml"``), or an XML declaration ``<?xml ...?>`` followed by one (``"xml"``)."""
    head = first.lstrip(b"\xef\xbb\xbf").strip()
    decl = _XML_DECL.match(head)
    if decl is not None:
        rest = head[decl.end() :].strip() or second.strip()
        return "xml" if _ROOT.match(rest) else None
    m = _ROOT.match(head)
    if m is None:
        return None
    return "xml" if m.group(1) == b"dataset" else "sgml"


def _unescape_xml(text, path, number):
    """XML's five predefined entities and character references replaced; any other ``&``
    is refused (an entity only a DTD defines is never expanded: no entity bombs)."""

    def one(m):
        code = m.group(1) or m.group(2)
        if code is None:
            return _XML_PREDEFINED[m.group(3)]
        value = int(code, 10 if m.group(1) else 16)
        if not 0 < value <= 0x10FFFF or 0xD800 <= value <= 0xDFFF:
            raise LegacyInputError(path, f"line {number}: {m.group(0)} is no character")
        return chr(value)

    out = _XML_ENTITY.sub(one, text)
    if "&" in _XML_ENTITY.sub("", text):
        bad = _XML_ENTITY.sub("", text)
        at = bad.index("&")
        raise LegacyInputError(
            path,
            f"line {number}: {bad[at : at + 12]!r} in a <seg> is not one of XML's entities "
            "(&amp; &lt; &gt; &quot; &apos; &#N;): entities a DTD defines are not expanded",
        )
    return out


class _Markup:
    """The state of reading one WMT SGML / XML file line by line (:func:`iter_sentences`)."""

    def __init__(self, path, kind, part):
        self.path, self.kind, self.part = path, kind, part
        self.root: str | None = None  # the outermost element, once opened
        self.closed = False  # its closing tag seen
        self.parts: list[str] = []  # the open <src>/<ref>/<hyp> of a <dataset>
        self.names: dict[str, set] = {p: set() for p in MARKUP_PARTS}

    def fail(self, number, problem):
        return LegacyInputError(
            self.path, f"line {number}: {problem} ({self.kind.upper()} test set)"
        )

    def segments(self, number, raw):
        """The segments of one line of the file, in order (markup checked, none kept)."""
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise self.fail(
                number, f"not valid UTF-8 (byte 0x{raw[err.start]:02x} at column {err.start + 1})"
            ) from None
        if number == 1:
            line = line.lstrip("\ufeff")
        out, pos = [], 0
        while True:
            lt = line.find("<", pos)
            text = line[pos:] if lt < 0 else line[pos:lt]
            if text.strip():
                where = f"after </{self.root}>" if self.closed else "outside a <seg>"
                raise self.fail(number, f"text {text.strip()[:40]!r} {where}")
            if lt < 0:
                return out
            pos = self._markup(number, line, lt, out)

    def _markup(self, number, line, lt, out):
        """Read the markup at ``line[lt]``; returns where the text after it starts."""
        if line.startswith("<!--", lt):
            end = line.find("-->", lt + 4)
            if end < 0:
                raise self.fail(number, "a comment not closed on its line")
            return end + 3
        if line.startswith("<?", lt) or line.startswith("<!DOCTYPE", lt):
            end = line.find(">", lt)
            if end < 0 or "[" in line[lt:end]:
                raise self.fail(number, "a declaration not closed on its line, or a DTD (not read)")
            return end + 1
        seg = _SEG_OPEN.match(line, lt)
        if seg is not None:
            if self.root is None or self.closed:
                raise self.fail(number, f"a <seg> outside <{self.root or 'srcset'}>")
            close = line.find("</seg>", seg.end())
            inner = line[seg.end() : close if close >= 0 else len(line)]
            if _SEG_OPEN.search(inner) or "<seg>" in inner:
                raise self.fail(number, "a <seg> inside a <seg>")
            if close < 0:
                raise self.fail(number, "a <seg> not closed on its line (no </seg>)")
            self._keep(number, inner, out)
            return close + len("</seg>")
        tag = _TAG.match(line, lt)
        if tag is None:
            raise self.fail(number, f"{line[lt : lt + 40]!r}: not markup of a test set")
        closing, name, rest, empty = tag.groups()
        low = name.lower()
        if low == "seg":
            raise self.fail(number, "a </seg> without its <seg>")
        if low not in MARKUP_ELEMENTS:
            raise self.fail(
                number, f"<{closing}{name}> outside a <seg>: not an element of a WMT test set"
            )
        if self.closed:
            raise self.fail(number, f"<{closing}{name}> after </{self.root}>")
        if self.root is None:
            if closing or low not in MARKUP_ROOTS:
                raise self.fail(number, f"<{closing}{name}> before the test set's element")
            self.root = low
        elif closing and low == self.root:
            self.closed = True
        if low in MARKUP_PARTS and not empty:
            if closing:
                if not self.parts or self.parts[-1] != low:
                    raise self.fail(number, f"</{name}> without its <{name}>")
                self.parts.pop()
            else:
                self.parts.append(low)
                attrs = dict(re.findall(r'([\w:-]+)\s*=\s*"([^"]*)"', rest))
                self.names[low].add(attrs.get("translator") or attrs.get("system") or "")
        return tag.end()

    def _keep(self, number, inner, out):
        if self.kind == "xml":
            if "<" in inner:
                raise self.fail(number, "markup inside a <seg>")
            if self.root == "dataset":
                if not self.parts:
                    raise self.fail(number, "a <seg> outside <src>, <ref> or <hyp>")
                if self.parts[-1] != self.part:
                    return
            text = _unescape_xml(inner, self.path, number)
            if "\n" in text or "\r" in text:
                raise self.fail(number, "a line break inside a <seg> (&#10; or &#13;)")
            out.append(text)
        else:
            out.append(_CLEAN.sub(" ", inner.strip()))

    def finish(self, number):
        if not self.closed:
            raise self.fail(
                number, f"the file ends before </{self.root}> (truncated?): not read partly"
            )
        several = sorted(n for n in self.names[self.part] if n)
        if len(several) > 1:
            raise LegacyInputError(
                self.path,
                f"holds <{self.part}> of {len(several)} translators or systems "
                f"({', '.join(several[:4])}): give one of them as its own file",
            )


#: blank lines read before a file's first non-blank one, at most, to tell whether it is a WMT
#: SGML / XML test set (a file of millions of empty lines -- a decompressed bomb -- was held
#: whole: +412 MiB for a 64 KiB .gz)
MAX_SNIFF_LINES = 1024


def _sniff(lines):
    """``(kind, held)``: :func:`markup_kind` of the file whose :func:`iter_raw_lines` are
    ``lines``, and the lines read to tell (its blank lines, its first non-blank one and,
    after an XML declaration, up to the next non-blank one; no more than
    :data:`MAX_SNIFF_LINES` blank ones)."""
    held = []
    for number, raw in lines:
        held.append((number, raw))
        first = raw.lstrip(b"\xef\xbb\xbf").strip()
        if not first:
            if len(held) >= MAX_SNIFF_LINES:  # no markup opens so late: a plain text
                return None, held
            continue
        following = b""
        decl = _XML_DECL.match(first)
        if decl is not None and not first[decl.end() :].strip():
            for number2, raw2 in lines:  # the root may be on the next non-blank line
                held.append((number2, raw2))
                if raw2.strip():
                    following = raw2
                    break
        return markup_kind(raw, following), held
    return None, held


def iter_sentences(
    path: str | os.PathLike[str], what: str = "a text file", whole: bool = True, part: str = "src"
) -> Iterator[tuple[int, bytes]]:
    """``(number, raw)``: the sentences of a text file as bytes, each ending in ``b"\\n"``
    (a plain file's last line without one comes without) -- the one reader of test sets,
    references and translations.

    A plain text file's sentences are its lines (:func:`iter_raw_lines`, whose limits hold
    for every file).  A WMT test set in SGML or XML (:func:`markup_kind`: by its content,
    never its name; compressed or not) gives its ``<seg>`` contents in document order,
    ``number`` being the line of the file the segment is on; a ``<dataset>`` (WMT21+ XML,
    source, references and outputs in one file) gives those of its ``part``: ``"src"``,
    ``"ref"`` or ``"hyp"``.  The rules are sacrebleu's (2.x, ``sacrebleu.dataset``), so the
    port reads the same sentences as sacrebleu from the same file:

    * SGML (``<srcset>``, ``<refset>``, ``<tstset>``, ``<mteval>`` without an XML
      declaration: WMT up to 2020): the text between ``<seg ...>`` and ``</seg>`` is taken
      as it is -- entities such as ``&amp;`` are *not* unescaped (sacrebleu's
      ``FakeSGMLDataset`` and Moses' ``input-from-sgm.perl`` do not; WMT's .sgm files hold
      ``&`` and ``"`` raw, and tokenized text holds Moses' own ``&apos;`` escapes) -- then
      stripped, each run of whitespace one space (sacrebleu's ``Dataset._clean``);
    * XML (an ``<?xml`` declaration, or ``<dataset>``): what an XML parser gives
      (sacrebleu's ``WMTXMLDataset`` reads it with lxml): ``&amp; &lt; &gt; &quot; &apos;``
      and ``&#N;`` unescaped, whitespace kept; any other entity is refused, never expanded
      (no DTD is read: no entity-expansion bomb), as is markup inside a ``<seg>``.

    The file is read line by line (the standard library's XML parsers are not used), and
    each of its lines is a line of :func:`iter_raw_lines`.  A malformed file is one
    :class:`LegacyInputError` naming the file and the line -- a ``<seg>`` not closed on
    its line, a ``<seg>`` inside a ``<seg>``, text or an unknown element outside a
    ``<seg>``, the file ending before its outermost element is closed (a truncated file is
    never read in part) -- as is a segment that is not UTF-8.  ``whole=False``: the caller
    stops after the first sentences (:func:`iter_raw_lines`)."""
    lines = iter_raw_lines(path, what, whole)
    kind, held = _sniff(lines)
    if kind is None:
        yield from held
        yield from lines
        return
    if part not in MARKUP_PARTS:
        raise ValueError(f"part {part!r} is none of {MARKUP_PARTS}")
    reader = _Markup(path, kind, part)
    number = 0
    for number, raw in itertools.chain(held, lines):
        for segment in reader.segments(number, raw):
            yield number, segment.encode("utf-8") + b"\n"
    reader.finish(number)


def markup_of(path: str | os.PathLike[str]) -> str | None:
    """:func:`markup_kind` of the file ``path`` (``"sgml"``, ``"xml"`` or ``None``), reading
    only its first non-blank lines (decompressed); ``None`` also when it cannot be read."""
    try:
        return _sniff(iter_raw_lines(path, "a text file", whole=False))[0]
    except (LegacyInputError, OSError):
        return None
