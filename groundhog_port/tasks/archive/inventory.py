"""The inventory stage of ``groundhog-port archive`` (issue 50, items 1-2): every file of an
archive classified by what it holds -- never by its name -- within bounds, one row each.

:func:`classify` reads a file's first bytes and decides by magic number (pickle protocol 2
``\\x80\\x02`` and protocol 0 ``(dp``, zip ``PK\\x03\\x04``, HDF5, gzip/bzip2/xz, tar's
``ustar`` at byte 257), then by what the format's own bounded reader finds inside:

* pickles only through the project's safe unpickler
  (:func:`legacy_states.unpickle.safe_load_pickle`, bounded by :attr:`Limits.pickle_bytes`):
  a dict holding several of ``prototype_state``'s keys (experiments/nmt/state.py) is a
  state, a dict word -> id a vocabulary (preprocess.py), id -> word an inverse one
  (invert-dict.py); a pickle naming code is refused before anything is called;
* ``.npz`` archives by their zip directory and ``.npy`` headers only
  (:func:`groundhog_port.legacy.npzguard.read_members`: no member's data is decompressed):
  GroundHog parameter names (``W_0_enc_approx_embdr``...) make a model, ``MainLoop``'s
  timing keys (mainLoop.py:132-148) a timing file, ``gnorm2_*``/``dnorm2_*`` an optimizer;
* HDF5 by its top-level names, every link visited without being followed
  (:func:`groundhog_port.legacy.h5guard.check_links`);
* text by a bounded prefix (:attr:`Limits.prefix_bytes`, :attr:`Limits.sample_lines`) and an
  exact line count streamed in chunks (memory bounded whatever the size); a compressed file
  over its decompressed stream, stopped at :attr:`Limits.decompressed_bytes` (the parse
  budget by default, as :func:`groundhog_port.untrusted.iter_raw_lines` is bounded), so a
  decompression bomb is never decompressed past it.

The classifier is given regular files only: links, FIFOs, devices and folders are the
caller's business (the archive walk); one given anyway is read through
:func:`groundhog_port.untrusted.open_input`, which refuses special files by type (the row is
then :attr:`Kind.UNREADABLE`).  No exception escapes :func:`classify`: a damaged file is
UNREADABLE with a one-line reason.  Cost: a ``stat`` and one read of at most
:attr:`Limits.prefix_bytes` for most small files; torch is never imported here (the pairing
functions of :mod:`.pairing` import the model table lazily).
"""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ... import budget, contained
from ...errors import LegacyInputError
from ...file_names import snapshot_number
from ...untrusted import compression_of, describe, open_input
from .formats import hdf5_row, pickle_row, zip_row
from .kinds import (
    Facts,
    Hdf5Facts,
    Kind,
    LogFacts,
    Member,
    ModelFacts,
    PackFacts,
    Pairing,
    Row,
    SgmlFacts,
    StateFacts,
    TextFacts,
    VocabularyFacts,
)
from .pairing import model_fits_state, pair_models, vocabulary_share

__all__ = [
    "Hdf5Facts",
    "Kind",
    "Limits",
    "LogFacts",
    "Member",
    "ModelFacts",
    "PackFacts",
    "Pairing",
    "Row",
    "SgmlFacts",
    "StateFacts",
    "TextFacts",
    "VocabularyFacts",
    "classify",
    "model_fits_state",
    "pair_models",
    "snapshot_number",
    "vocabulary_share",
]


@dataclass(frozen=True)
class Limits:
    """What :func:`classify` reads of one file at most."""

    #: bytes of a text's start read for its facts (sample, encoding, log markers)
    prefix_bytes: int = 1 << 20
    #: lines kept in :attr:`TextFacts.sample`
    sample_lines: int = 20
    #: bytes of a text's end kept for a log's last lines
    tail_bytes: int = 1 << 16
    #: the largest pickle opened (a 30,000-word vocabulary is about 1 MB, a 500,000-word
    #: one some 7 MB; a state a few KB)
    pickle_bytes: int = 32 << 20
    #: decompressed bytes of a compressed file read for its line count; None: the parse
    #: budget (:func:`groundhog_port.budget.budget_bytes`, 256 MiB by default)
    decompressed_bytes: int | None = None


LIMITS = Limits()

#: bytes per read while streaming
CHUNK = 1 << 18
#: bytes read first, for the magic numbers (tar's ``ustar`` sits at 257)
MAGIC_BYTES = 512

_ZIP = (b"PK\x03\x04", b"PK\x05\x06")
_HDF5 = b"\x89HDF\r\n\x1a\n"
#: pickle protocols 2-5 open with PROTO; protocol 0/1 dicts and lists with MARK + DICT/LIST
#: and a memo PUT (cPickle's ``(dp1``), or EMPTY_DICT/EMPTY_LIST + BINPUT (protocol 1), or a
#: GLOBAL (``cposix\nsystem``: a pickle that would call code is still a pickle)
_PICKLE = re.compile(
    rb"\A(?:\x80[\x02-\x05]|\((?:dp|lp)\d*\n|\((?:d|l)[SVIFL(]|[}\]](?:q|\(|r)"
    rb"|c[A-Za-z_][\w.]*\n[A-Za-z_]\w*\n)"
)


def classify(path: str | os.PathLike[str], limits: Limits = LIMITS) -> Row:
    """The row of ``path`` (a regular file): its :class:`Kind`, compression and facts,
    decided by content only.  Never raises: a file that cannot be read is
    :attr:`Kind.UNREADABLE` with the reason in :attr:`Row.note`."""
    path = Path(path)
    size = 0
    try:
        size = os.stat(path).st_size
        return _classify(path, size, limits)
    except LegacyInputError as err:
        return Row(path, Kind.UNREADABLE, size, note=err.problem)
    except OSError as err:
        return Row(path, Kind.UNREADABLE, size, note=f"cannot read ({err.strerror or err})")
    except Exception as err:  # noqa: BLE001 - the contract: one row, never a traceback
        if contained.out_of_memory(err):  # a worker's limit (or the machine's) reached
            return Row(
                path,
                Kind.UNREADABLE,
                size,
                note=f"its reader {contained.memory_said(describe(err))}",
            )
        return Row(path, Kind.UNREADABLE, size, note=f"damaged file ({describe(err)})")


def _classify(path: Path, size: int, limits: Limits) -> Row:
    if size == 0:
        return Row(path, Kind.EMPTY, 0)
    with open_input(path, "a file of the archive") as f:
        head = f.read(MAGIC_BYTES)
        if not head:
            return Row(path, Kind.EMPTY, 0)
        if head.startswith(_ZIP):
            return zip_row(path, size, f)
        if head.startswith(_HDF5):
            return hdf5_row(path, size)
        if _PICKLE.match(head):
            return pickle_row(path, size, limits.pickle_bytes)
        kind = compression_of(head[:8])
        if kind is not None:
            f.seek(0)
            return _stream_row(path, size, kind, _inflate(f, kind, _bound(limits)), limits)
        if _is_tar(head):
            return Row(path, Kind.PACK, size, facts=PackFacts("tar"))
        return _stream_row(path, size, None, _plain(head, f, limits.prefix_bytes), limits)


def _bound(limits: Limits) -> int:
    return budget.budget_bytes() if limits.decompressed_bytes is None else limits.decompressed_bytes


def _is_tar(head: bytes) -> bool:
    """POSIX/GNU tar: ``ustar`` at byte 257 of the first header (old v7 tars have no magic
    and are not recognised)."""
    return head[257:262] == b"ustar"


# ----------------------------------------------------------------------------------------------
# streams: plain bytes, or decompressed under a bound
# ----------------------------------------------------------------------------------------------
class _Stopped(Exception):
    """Raised by :func:`_inflate` at the decompression bound (not an error)."""


def _plain(first: bytes, f: BinaryIO, prefix: int) -> Iterator[bytes]:
    """The file's bytes: the prefix in one piece (one read for a small file), then chunks."""
    yield first + f.read(max(0, prefix - len(first)))
    while chunk := f.read(CHUNK):
        yield chunk


def _decompressor(kind: str) -> Any:
    import bz2
    import lzma
    import zlib

    if kind == "gzip":
        return zlib.decompressobj(wbits=31)
    return bz2.BZ2Decompressor() if kind == "bzip2" else lzma.LZMADecompressor()


def _inflate(f: BinaryIO, kind: str, bound: int) -> Iterator[bytes]:
    """The decompressed stream of ``f`` in pieces of at most :data:`CHUNK` bytes, members
    one after the other (``cat a.gz b.gz`` is one gzip file); raises :class:`_Stopped` once
    ``bound`` bytes were given and more remain, and :class:`LegacyInputError` on a damaged
    or truncated stream.  Never holds more than one compressed and one decompressed chunk."""
    d, data, started, given = _decompressor(kind), b"", False, 0
    while True:
        if not data and (kind == "gzip" or d.needs_input):
            data = f.read(CHUNK)
            if not data:
                if started and not d.eof:
                    raise EOFError(f"the {kind} stream ends before its end marker")
                return
        room = bound - given
        if room <= 0:
            raise _Stopped
        started = True
        piece = d.decompress(data, min(room, CHUNK))
        # zlib keeps the input its output limit left over; bz2/lzma buffer it themselves
        data = d.unconsumed_tail if kind == "gzip" else b""
        if d.eof:  # the next member, if any: everything after this one's end
            data = d.unused_data
            if not data.strip(b"\0"):  # tape padding after the last member
                data = b""
            d, started = _decompressor(kind), False
        if piece:
            given += len(piece)
            yield piece


# ----------------------------------------------------------------------------------------------
# text, logs, SGML
# ----------------------------------------------------------------------------------------------
_TRACEBACK = b"Traceback (most recent call last):"
#: sample.py:276 ``print "Total cost of the translations: {}".format(total_cost)``
_TOTAL_COST = re.compile(rb"^Total cost of the translations: \S+", re.M)
#: the line closing a traceback: ``ValueError: ...``, ``KeyboardInterrupt``
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning)\b")
#: lines of logs: SGD_adadelta.py:191-201's progress line, MainLoop's messages
#: (mainLoop.py:222-239, 355-361), logging prefixes, time stamps, ``key=value`` records
_LOG_LINE = re.compile(
    r"^(?:\.\. iter\s+\d+ cost |Saving the model|Model saved, took|>>>|Took \d|Average step took"
    r"|That amounts to|(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\b[:\s]|\d{4}-\d\d-\d\d[ T]\d\d:\d\d"
    r"|\S+\s+(?:\w+=\S+\s*){2,}$)"
)
_NUMBER = re.compile(r"^\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*$|^\s*[-+]?(?:nan|inf)\s*$")
_SGML_START = re.compile(
    rb"\A(?:\xef\xbb\xbf)?\s*(?:<\?xml[^>]*>\s*)?(?:<!DOCTYPE[^>]*>\s*)?"
    rb"(?:<mteval\b[^>]*>\s*)?<(srcset|refset|tstset|dataset)\b([^>]*)>",
    re.I,
)
_SEG = re.compile(rb"<seg[\s>]", re.I)
_SET_KINDS = {b"srcset": "src", b"refset": "ref", b"tstset": "tst", b"dataset": "dataset"}
_CONTROL = tuple(bytes([b]) for b in (*range(0, 9), *range(14, 27), *range(28, 32), 127))


def _stream_row(
    path: Path, size: int, compression: str | None, chunks: Iterator[bytes], limits: Limits
) -> Row:
    """One pass over ``chunks``: the prefix first (what the file is), then the count."""
    pieces: list[bytes] = []
    got = 0
    try:
        for chunk in chunks:
            pieces.append(chunk)
            got += len(chunk)
            if got >= limits.prefix_bytes:
                break
    except _Stopped:
        pass
    except (EOFError, OSError, ValueError) as err:
        raise _damaged(path, compression, got, err) from None
    head = pieces[0] if len(pieces) == 1 else b"".join(pieces)
    del pieces
    rest = b""
    if len(head) > limits.prefix_bytes:
        head, rest = head[: limits.prefix_bytes], head[limits.prefix_bytes :]
    inner = _inner_kind(head, compression)
    if inner is not None:
        return inner(path, size, compression)
    if b"\0" in head or _mostly_control(head):
        return Row(path, Kind.BINARY, size, compression)
    sgml = _SGML_START.match(head)
    counts = _count(path, compression, head, rest, chunks, limits, bool(sgml))
    if sgml:
        attrs = sgml.group(2).decode("utf-8", "replace")
        facts: Facts = SgmlFacts(
            _SET_KINDS[sgml.group(1).lower()],
            counts.segments,
            _attr(attrs, "srclang"),
            _attr(attrs, "trglang"),
            counts.complete,
        )
        return Row(path, Kind.SGML, size, compression, facts, counts.note)
    log = _log_facts(head, counts.tail, limits)
    if log is not None:
        kind = Kind.CRASH_LOG if log.error is not None else Kind.LOG
        return Row(path, kind, size, compression, log, counts.note)
    return Row(path, Kind.TEXT, size, compression, _text_facts(head, counts, limits), counts.note)


def _damaged(path: Path, compression: str | None, at: int, err: Exception) -> LegacyInputError:
    what = f"damaged {compression} stream" if compression else "read error"
    return LegacyInputError(path, f"{what} after {at} bytes ({describe(err)})")


def _mostly_control(head: bytes) -> bool:
    """More than a tenth control bytes (other than tab, newline, CR, form feed, escape)."""
    return sum(head.count(b) for b in _CONTROL) > len(head) // 10


def _inner_kind(head: bytes, compression: str | None) -> Any:
    """For a compressed file: a row maker when the decompressed start is a tar (a PACK) or
    another binary format (a BINARY, the inner format named); None for text."""
    if compression is None:
        return None
    if _is_tar(head):
        return lambda p, s, c: Row(p, Kind.PACK, s, c, PackFacts("tar"))
    for magic, name in ((_ZIP[0], "zip"), (_HDF5, "HDF5")):
        if head.startswith(magic):
            note = f"a {c_name(compression)} {name} file: not opened compressed"
            return lambda p, s, c, n=note: Row(p, Kind.BINARY, s, c, note=n)
    if _PICKLE.match(head):
        note = f"a {c_name(compression)} pickle: not opened (GroundHog reads its pickles plain)"
        return lambda p, s, c: Row(p, Kind.BINARY, s, c, note=note)
    return None


def c_name(compression: str) -> str:
    """``"gzip-compressed"``."""
    return f"{compression}-compressed"


@dataclass
class _Counts:
    lines: int = 0
    total: int = 0
    ends_with_newline: bool = True
    tail: bytes = b""
    segments: int = 0
    complete: bool = True
    note: str = ""


def _count(
    path: Path,
    compression: str | None,
    head: bytes,
    rest: bytes,
    chunks: Iterator[bytes],
    limits: Limits,
    sgml: bool,
) -> _Counts:
    """Newlines (and ``<seg>`` tags) over the whole stream, the last bytes kept: memory is
    one chunk plus :attr:`Limits.tail_bytes`, whatever the file's size."""
    c = _Counts()
    carry = b""

    def take(chunk: bytes) -> None:
        nonlocal carry
        c.lines += chunk.count(b"\n")
        c.total += len(chunk)
        c.ends_with_newline = chunk.endswith(b"\n")
        c.tail = (c.tail + chunk[-limits.tail_bytes :])[-limits.tail_bytes :]
        if sgml:  # a tag cut between chunks: the last 4 bytes carried over
            c.segments += len(_SEG.findall(carry + chunk))
            carry = chunk[-4:]

    take(head)
    try:
        if rest:
            take(rest)
        for chunk in chunks:
            take(chunk)
    except _Stopped:
        c.complete = False
        c.note = (
            f"counted over the first {c.total} decompressed bytes only (the decompression "
            "bound): the file holds more"
        )
    except (EOFError, OSError, ValueError) as err:
        raise _damaged(path, compression, c.total, err) from None
    if c.total and not c.ends_with_newline:
        c.lines += 1  # a last line without newline counts (lookup.line_count does so)
    return c


def _attr(attrs: str, name: str) -> str | None:
    m = re.search(name + r"""\s*=\s*["']?([^"'\s>]+)""", attrs, re.I)
    return m.group(1) if m else None


def _sample(head: bytes, limits: Limits) -> list[str]:
    """The first :attr:`Limits.sample_lines` lines of the prefix (each cut at 300 characters
    when shown; words are counted on the whole line by :func:`_text_facts`)."""
    return [line.rstrip(b"\r").decode("utf-8", "replace")[:300] for line in _lines(head, limits)]


def _lines(head: bytes, limits: Limits) -> list[bytes]:
    out: list[bytes] = []
    at = 0
    while len(out) < limits.sample_lines and at < len(head):
        end = head.find(b"\n", at)
        end = len(head) if end < 0 else end
        out.append(head[at:end])
        at = end + 1
    return out


def _log_facts(head: bytes, tail: bytes, limits: Limits) -> LogFacts | None:
    """A traceback's closing line, sample.py's total cost, or lines most of which are log
    lines; None for other text."""
    for text in (tail, head):
        at = text.rfind(_TRACEBACK)
        if at >= 0:
            error = _exception_line(text[at:].decode("utf-8", "replace"))
            if error is not None:
                return LogFacts(error, None, len(_sample(head, limits)))
    for text in (tail, head):
        found = _TOTAL_COST.findall(text)
        if found:  # the last one: a log of several runs ends with the latest
            return LogFacts(None, found[-1].decode("utf-8", "replace"), 0)
    lines = [line for line in _sample(head, limits) if line.strip()]
    if lines and 2 * sum(bool(_LOG_LINE.match(line)) for line in lines) >= len(lines):
        return LogFacts(None, None, len(lines))
    return None


def _exception_line(after_marker: str) -> str | None:
    """The first line at column 0 after the ``Traceback`` line, when it names an exception."""
    for line in after_marker.splitlines()[1:]:
        if line.strip() and not line[0].isspace():
            return line.strip() if _EXCEPTION_LINE.match(line) else None
    return None


def _text_facts(head: bytes, counts: _Counts, limits: Limits) -> TextFacts:
    bad = None
    try:  # the decoded text is dropped at once; a character cut at the prefix's end waits
        codecs.utf_8_decode(head, "strict", False)
    except UnicodeDecodeError as err:
        bad = head.count(b"\n", 0, err.start) + 1
    sample = _sample(head, limits)
    words = [len(line.split()) for line in _lines(head, limits)]
    numeric = bool(sample) and all(_NUMBER.match(line) for line in sample if line.strip())
    return TextFacts(
        lines=counts.lines,
        complete=counts.complete,
        encoding_ok=bad is None,
        first_bad_line=bad,
        avg_words=sum(words) / len(words) if words else 0.0,
        sample=tuple(sample),
        ends_with_newline=counts.ends_with_newline,
        crlf=b"\r\n" in head,
        numeric=numeric,
        bytes_counted=counts.total,
    )
