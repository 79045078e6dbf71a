"""Bounds before parsing: the gates every untrusted container passes before a parser sees it.

Round six of the red team (issue 51) found each bound placed *after* the parse that blows
up: ``tarfile`` read a GNU long name or a pax header whole (a 1 GiB header in a 1.2 MB pack:
+2 GiB), decompressed a whole buffer of a bzip2 bomb at once (+3 GiB, also as padding after
the archive's end), and parsed 1 MB of pax digits in quadratic time; ``zipfile`` built the
list of a central directory of 3 million entries before our count was checked.  Here each
is bounded in the bytes that reach the parser:

* :class:`Decompressed` -- gzip, bzip2 or xz (by magic number) decompressed as the
  reader asks, at most what it asks per call (``max_length``), never more than ``limit``
  bytes in all; xz under a memory limit (a stream that claims a 4 GiB dictionary is named
  with the limit);
* :class:`TarGate` -- a tar stream whose headers are read as they pass, before ``tarfile``
  parses them: a long-name, long-link or pax header over :data:`MAX_TAR_HEADER_BYTES`, or
  more than :data:`MAX_TAR_HEADERS` headers, ends the read with one line;
* :func:`check_zip_directory` -- a zip's end-of-central-directory record (zip64's too) read
  first: more entries than allowed, or a directory over :data:`MAX_ZIP_DIRECTORY_BYTES`,
  is refused before ``zipfile`` reads it.
"""

from __future__ import annotations

import bz2
import io
import lzma
import os
import struct
import zlib
from typing import BinaryIO

from .errors import LegacyInputError

#: the largest long-name / long-link / pax header read (a member name is at most PATH_MAX,
#: 4 KiB on Linux; a pax header of a real pack holds a name, times and ids: < 1 KiB).
#: Python 3.11's pax parser is quadratic in a header's length (1 MB: ~25 min); at this
#: bound it takes under a second
MAX_TAR_HEADER_BYTES = 16 << 10
#: most headers of any kind (a member has at most a pax and a long-name header besides its
#: own: three per member of the 10,000 a pack may hold, packs.MAX_MEMBERS)
MAX_TAR_HEADERS = 30_000
#: the largest zip central directory read (an entry is 46 bytes plus its name and extra
#: fields: 10,000 entries of 4 KiB names fit in 48 MiB)
MAX_ZIP_DIRECTORY_BYTES = 48 << 20
#: xz's largest dictionary (``xz -9``: 64 MiB; its decoder needs a little more)
XZ_MEMORY_LIMIT = 128 << 20

_BLOCK = 512
_CHUNK = 64 << 10
_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"))


class Damaged(LegacyInputError):
    """A compressed stream that cannot be read to its end (the caller may say what the file
    was meant to be: ``packs`` says "damaged or not a pack")."""


def compression(head: bytes) -> str | None:
    """``"gzip"``, ``"bzip2"``, ``"xz"`` or ``None`` from a stream's first bytes."""
    return next((kind for magic, kind in _MAGIC if head.startswith(magic)), None)


class Decompressed(io.RawIOBase):
    """A readable stream of the decompressed bytes of ``raw`` (``kind`` from
    :func:`compression`; ``None``: read as it is), at most ``limit`` bytes in all: the next
    byte raises :class:`LegacyInputError` naming ``path`` and ``why`` (the bound's reason).
    Concatenated streams (``cat a.gz b.gz``) read as one, as gzip/bzip2/xz tools do."""

    def __init__(
        self, raw: BinaryIO, kind: str | None, limit: int, path: str | os.PathLike[str], why: str
    ) -> None:
        super().__init__()
        self.raw, self.kind, self.limit, self.path, self.why = raw, kind, limit, path, why
        self.total = 0
        self._pending = b""  # compressed bytes not yet given to the decompressor
        self._done = False
        self._d = self._new()

    def _new(self):
        if self.kind == "gzip":
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        if self.kind == "bzip2":
            return bz2.BZ2Decompressor()
        if self.kind == "xz":
            return lzma.LZMADecompressor(memlimit=XZ_MEMORY_LIMIT)
        return None

    def readable(self) -> bool:
        return True

    # io.BufferedReader reads through it (readline), into a memoryview; typeshed's
    # parameter is any writable buffer, which has no len() or slicing in its type
    def readinto(self, b: memoryview | bytearray) -> int:  # type: ignore[override]
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:
            n = self.limit - self.total + 1  # a read of everything is still bounded
        out = self._read(n)
        self.total += len(out)
        if self.total > self.limit:
            raise LegacyInputError(
                self.path,
                f"decompresses to more than {self.limit} bytes ({self.why}): a decompression "
                "bomb or a damaged file, not read",
            )
        return out

    def _read(self, n: int) -> bytes:
        if self._d is None:
            return self.raw.read(n)
        while not self._done:
            if self._wants_input():
                data = self.raw.read(_CHUNK)
                if not data:
                    raise Damaged(self.path, f"damaged {self.kind} stream: it ends early")
                self._pending += data
            out = self._step(n)
            if out:
                return out
        return b""

    def _wants_input(self) -> bool:
        d = self._d
        if isinstance(d, (bz2.BZ2Decompressor, lzma.LZMADecompressor)):
            return d.needs_input and not self._pending
        return not self._pending and not d.unconsumed_tail

    def _step(self, n: int) -> bytes:
        d = self._d
        try:
            if isinstance(d, (bz2.BZ2Decompressor, lzma.LZMADecompressor)):
                out = d.decompress(self._pending, max_length=n)
            else:
                out = d.decompress(d.unconsumed_tail + self._pending, n)
            self._pending = b""
        except lzma.LZMAError as err:
            if "memory" in str(err).lower():
                raise LegacyInputError(
                    self.path,
                    f"an xz stream that needs more than {XZ_MEMORY_LIMIT >> 20} MiB to "
                    "decompress (its dictionary; xz -9 needs 65 MiB): not read",
                ) from None
            raise Damaged(self.path, f"damaged xz stream ({err})") from None
        except (OSError, EOFError, zlib.error) as err:
            raise Damaged(self.path, f"damaged {self.kind} stream ({err})") from None
        if d.eof:  # another stream may follow (cat a.gz b.gz); zeros after the end are padding
            rest = d.unused_data or self.raw.read(_CHUNK)
            if rest.strip(b"\0"):
                self._d, self._pending = self._new(), rest
            else:
                self._done = True
        return out


class TarGate:
    """The tar stream ``inner`` (uncompressed: a :class:`Decompressed`) passed on to
    ``tarfile`` as read, its headers read on the way: a GNU long-name / long-link or pax
    header (local or global) over :data:`MAX_TAR_HEADER_BYTES`, or more than
    :data:`MAX_TAR_HEADERS` headers, raises :class:`LegacyInputError` before ``tarfile``
    reads it.  A pax header's ``size`` record moves the next header as ``tarfile`` does."""

    def __init__(self, inner: Decompressed, path: str | os.PathLike[str]) -> None:
        self.inner, self.path = inner, path
        self.pos = 0  # bytes passed on
        self.next_header = 0  # where the next header starts
        self.headers = 0
        self._head = b""  # the bytes of the header being read
        self._pax: bytearray | None = None  # a pax header's data being read
        self._pax_end = 0
        self._size_override: int | None = None

    def read(self, n: int | None = -1) -> bytes:
        data = self.inner.read(n)
        self._inspect(data)
        return data

    def _inspect(self, data: bytes) -> None:
        start = self.pos
        self.pos += len(data)
        i = 0
        while i < len(data):
            at = start + i
            if self._pax is not None and at < self._pax_end:
                take = min(len(data) - i, self._pax_end - at)
                self._pax += data[i : i + take]
                i += take
                if start + i >= self._pax_end:
                    self._size_override = _pax_size(bytes(self._pax))
                    self._pax = None
                continue
            if at < self.next_header:
                i += min(len(data) - i, self.next_header - at)
                continue
            take = min(len(data) - i, _BLOCK - len(self._head))
            self._head += data[i : i + take]
            i += take
            if len(self._head) == _BLOCK:
                self._header(self._head, start + i)
                self._head = b""

    def _header(self, block: bytes, end: int) -> None:
        if not block.strip(b"\0"):  # an end-of-archive block
            self.next_header = end
            return
        self.headers += 1
        if self.headers > MAX_TAR_HEADERS:
            raise LegacyInputError(
                self.path,
                f"holds more than {MAX_TAR_HEADERS} tar headers: not an experiment, not unpacked",
            )
        size = _octal(block[124:136])
        kind = block[156:157]
        if kind in (b"L", b"K", b"x", b"g") and size > MAX_TAR_HEADER_BYTES:
            what = {b"L": "long-name", b"K": "long-link", b"x": "pax", b"g": "global pax"}[kind]
            raise LegacyInputError(
                self.path,
                f"a {what} header of {size} bytes (more than {MAX_TAR_HEADER_BYTES}: no file "
                "name is that long): not unpacked",
            )
        if kind not in (b"L", b"K", b"x", b"g") and self._size_override is not None:
            size, self._size_override = self._size_override, None
        if kind == b"x":
            self._pax, self._pax_end = bytearray(), end + size
        self.next_header = end + -(-size // _BLOCK) * _BLOCK


def _octal(field: bytes) -> int:
    """A tar header's number: octal text, or base-256 when the first byte's high bit is set
    (as ``tarfile.nti``); a field that is neither reads as 0 (``tarfile`` then refuses it)."""
    if field[:1] and field[0] & 0x80:
        return int.from_bytes(field[1:], "big")
    text = field.split(b"\0", 1)[0].strip()
    try:
        return int(text or b"0", 8)
    except ValueError:
        return 0


def _pax_size(data: bytes) -> int | None:
    """The ``size`` record of a pax header (``"%d size=%d\\n"``), or ``None``."""
    for record in data.split(b"\n"):
        _, _, kv = record.partition(b" ")
        key, eq, value = kv.partition(b"=")
        if eq and key == b"size":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def check_zip_directory(
    f: BinaryIO, size: int, path: str | os.PathLike[str], max_entries: int
) -> None:
    """Refuse a zip whose central directory (as its end record says) lists more than
    ``max_entries`` entries or is over :data:`MAX_ZIP_DIRECTORY_BYTES`, before ``zipfile``
    reads it.  ``f``: seekable, its position kept.  A zip whose end record is not found is
    left to ``zipfile`` (it refuses it)."""
    where = f.tell()
    try:
        tail_len = min(size, 22 + 0xFFFF)  # the end record and its comment
        f.seek(size - tail_len)
        tail = f.read(tail_len)
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or len(tail) - at < 22:
            return
        entries, dir_size = struct.unpack("<6xHI", tail[at + 4 : at + 16])  # after 3 counts
        if entries == 0xFFFF or dir_size == 0xFFFFFFFF:  # zip64: its own end record
            loc = tail[at - 20 : at] if at >= 20 else b""
            if not loc.startswith(b"PK\x06\x07"):
                return
            (offset,) = struct.unpack("<Q", loc[8:16])
            if offset > size - 56:
                return
            f.seek(offset)
            rec = f.read(56)
            if not rec.startswith(b"PK\x06\x06"):
                return
            entries, dir_size = struct.unpack("<QQ", rec[32:48])
    finally:
        f.seek(where, os.SEEK_SET)
    if entries > max_entries:
        raise LegacyInputError(
            path,
            f"its directory lists {entries} members (more than {max_entries}): not an "
            "experiment, not unpacked",
        )
    if dir_size > MAX_ZIP_DIRECTORY_BYTES:
        raise LegacyInputError(
            path,
            f"its directory is {dir_size} bytes (more than {MAX_ZIP_DIRECTORY_BYTES}): "
            "not unpacked",
        )
