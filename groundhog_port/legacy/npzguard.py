"""What to check before decompressing a ``.npz`` archive's members.

``numpy.load`` on an ``.npz`` decompresses each member when it is asked for, allocating the
shape its ``.npy`` header declares; the port used to read every member and only then compare
names and shapes with the state.  A 2.1 MB model file with one extra deflate member declaring
2 GB of zeros therefore took 2.7 GB before its "unknown parameter" error (issue 25).

:func:`read_members` reads the zip directory and every member's ``.npy`` header (a few dozen
bytes at its start; numpy caps a header at 10,000 bytes) and checks, before any member's
data is decompressed:

* names and shapes: when the caller knows which members it expects (a model file against
  the state's parameter table), members outside them, or of another shape, are never read
  (their headers are enough for the "does not match the state" errors);
* declared sizes: a header's shape and dtype must account exactly for the member's
  uncompressed size in the zip directory (``numpy.savez`` writes exactly that), and
  ``zipfile`` never inflates past that size, so the header is what reading costs;
* compression ratio: deflate cannot compress more than 1032:1 (RFC 1951: one 258-byte match
  per 2-bit code at best), so a member declaring more than :data:`MAX_RATIO` times its
  compressed size plus :data:`SLACK_BYTES` is lying about its size; a stored member's two
  sizes must be equal;
* budget: what the state declares (the expected members with their expected shapes, float32)
  is what the user asked to load; everything else a file makes us read is charged against
  the parse budget (:mod:`groundhog_port.budget`), together with ``allowance`` bytes the
  caller expects beyond the state (none for a model file).
"""

from __future__ import annotations

import io
import os
import struct
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

import numpy as np

from .. import budget
from ..errors import LegacyInputError
from ..untrusted import open_input

#: deflate's own limit is about 1032:1; a higher ratio is a lie about the size
MAX_RATIO = 1100
#: tiny members are never refused on their ratio (headers, scalars)
SLACK_BYTES = 1 << 16
#: charged per member for the zip directory entry and the header (ZipInfo, dict, dtype)
PER_MEMBER = 2048


@dataclass
class Member:
    """One ``.npy`` member as its header declares it (``shape``/``dtype``, like an array's,
    so shape checks can run on headers before any data is read)."""

    name: str
    info: zipfile.ZipInfo
    shape: tuple
    dtype: np.dtype
    fortran: bool
    offset: int = 0  # where the data starts in the member (after the .npy header)

    @property
    def nbytes(self) -> int:
        count = 1
        for n in self.shape:
            count *= n
        return count * self.dtype.itemsize


#: ``zipfile`` holds a ZipInfo of about 560 bytes per directory entry of at least 47 bytes
#: (measured: 10.3 bytes per directory byte for 100,000 short names); charged per byte
DIRECTORY_FACTOR = 16
_EOCD, _EOCD64 = b"PK\x05\x06", b"PK\x06\x06"


def check_directory(path: str | os.PathLike[str]) -> None:
    """Charge the zip directory ``zipfile.ZipFile`` will parse whole on opening against the
    parse budget, from its size in the end record (before anything is parsed): a 9 MB
    archive of 100,000 empty members is 56 MB of ZipInfo objects."""
    import struct

    with open_input(path, "an .npz archive") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - (1 << 16) - 22))
        tail = f.read()
    at = tail.rfind(_EOCD)
    if at < 0 or at + 22 > len(tail):
        return  # not a zip end record: zipfile reports the damage
    directory = struct.unpack("<I", tail[at + 12 : at + 16])[0]
    at64 = tail.rfind(_EOCD64, 0, at)
    if directory == 0xFFFFFFFF and at64 >= 0 and at64 + 56 <= len(tail):
        directory = struct.unpack("<Q", tail[at64 + 40 : at64 + 48])[0]
    budget.check(
        path,
        f"the archive's directory of {directory} bytes",
        DIRECTORY_FACTOR * min(directory, size),
    )


def _header(zf, info, path, kind):
    with zf.open(info) as f:
        try:
            version = np.lib.format.read_magic(f)
        except ValueError:
            raise LegacyInputError(
                path,
                f"member {info.filename[:-4]!r} is not a .npy array; a "
                f"GroundHog {kind} file is numpy.savez output",
            ) from None
        read = {
            (1, 0): np.lib.format.read_array_header_1_0,
            (2, 0): np.lib.format.read_array_header_2_0,
        }.get(version)
        if read is None:
            raise LegacyInputError(
                path,
                f"member {info.filename[:-4]!r}: .npy format version "
                f"{version} (numpy.savez writes 1.0 or 2.0)",
            )
        shape, fortran, dtype = read(f)
        return shape, fortran, dtype, f.tell()


def read_members(
    zf: zipfile.ZipFile,
    path: str | os.PathLike[str],
    kind: str,
    expected: Mapping[str, tuple[int, ...] | None] | None = None,
    allowance: int = 0,
) -> tuple[dict[str, Member], dict[str, Member]]:
    """``(to_read, skipped)``: ``{name: Member}`` of the members to read, and of those outside
    ``expected`` or of another shape than expected (headers only: their data is never
    decompressed, as no model could use it); raises as the module docstring says.  ``expected``: ``{name: shape}`` the state declares (float32; a shape of
    None: expected but not declared by the state), or None to read every member."""
    infos = zf.infolist()
    budget.check(path, f"the directory of {len(infos)} archive members", PER_MEMBER * len(infos))
    to_read: dict[str, Member] = {}
    skipped: dict[str, Member] = {}
    charged = 0
    for info in infos:
        name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise LegacyInputError(
                path,
                f"member {name!r}: compression method "
                f"{info.compress_type} (numpy.savez writes stored or "
                "deflate members)",
            )
        _check_ratio(info, path, name)
        shape, fortran, dtype, header_len = _header(zf, info, path, kind)
        member = Member(name, info, tuple(shape), dtype, fortran, header_len)
        if dtype.hasobject:  # pickled objects follow the header: no size to compare
            raise LegacyInputError(
                path,
                f"holds object arrays (pickled Python objects); a "
                f"GroundHog {kind} file holds only numeric arrays",
            )
        if header_len + member.nbytes != info.file_size:
            raise LegacyInputError(
                path,
                f"member {name!r} declares shape {member.shape} of "
                f"{dtype} ({member.nbytes} bytes) but the archive holds "
                f"{info.file_size - header_len} bytes for it: truncated "
                "or corrupt file",
            )
        if expected is not None and (
            name not in expected or expected[name] is not None and member.shape != expected[name]
        ):
            skipped[name] = member  # unknown, or a shape the model cannot take: never usable
            continue
        if expected is None or member.shape != expected[name] or dtype != np.float32:
            charged += member.nbytes
        to_read[name] = member
    if charged > allowance:
        budget.check(
            path,
            f"{len(to_read)} archive members declaring {charged} bytes beyond "
            "what the state declares",
            charged - allowance,
        )
    return to_read, skipped


def _check_ratio(info, path, name):
    if info.compress_type == zipfile.ZIP_STORED:
        if info.file_size != info.compress_size:
            raise LegacyInputError(
                path,
                f"member {name!r}: stored (uncompressed) but declares "
                f"{info.file_size} bytes in {info.compress_size}: corrupt "
                "archive",
            )
    elif info.file_size > MAX_RATIO * info.compress_size + SLACK_BYTES:
        raise LegacyInputError(
            path,
            f"member {name!r} declares {info.file_size} bytes from "
            f"{info.compress_size} compressed: more than deflate's "
            f"{MAX_RATIO}:1 can give, a lie about its size",
        )


def read_array(zf: zipfile.ZipFile, member: Member) -> np.ndarray:
    """The member's data, after the checks above: its bytes read (``zipfile`` checks their
    CRC at the end) into an array of the header's shape and dtype.

    The array's memory is torch's (``torch.empty``), not numpy's: numpy advises the kernel
    to back arrays of 4 MB and more with huge pages, and where transparent huge pages are
    ``madvise``'d, finding and zeroing them cost more than the reading.  Measured (issue 54,
    the 2-core AMD EPYC, a 337 MB model): numpy's reader 0.86-0.92 s, into 4 KB pages
    0.43-0.51 s; the beam search was no slower on them (5.6 s either way).
    """
    import torch

    data = torch.empty(member.nbytes, dtype=torch.uint8).numpy()
    view = data.data  # a memoryview of the array
    fp = cast(io.BufferedReader, zf.fp)  # the archive's file, opened by zipfile
    start = _stored_data_start(fp, member.info)
    if start is not None:
        _read_stored(fp, member, start, view)
    else:
        with zf.open(member.info) as f:
            f.read(member.offset)  # the .npy header, read and checked by read_members
            done = 0
            while done < member.nbytes:
                piece = f.read(min(CHUNK, member.nbytes - done))
                if not piece:
                    raise EOFError(f"member {member.name!r} ends after {done} of its data bytes")
                view[done : done + len(piece)] = piece
                done += len(piece)
            if f.read(1):  # never: read_members checked header + data == the member's size
                raise ValueError(f"member {member.name!r} holds more than its header declares")
    flat = data.view(member.dtype)
    if member.fortran:
        return flat.reshape(member.shape[::-1]).T
    return flat.reshape(member.shape)


#: bytes read from a member at a time
CHUNK = 1 << 24


#: a zip local file header: 30 bytes, the lengths of the name and the extra field that
#: follow it at bytes 26 and 28 (PKWARE's APPNOTE 4.3.7)
_LOCAL_HEADER, _LENGTHS_AT = 30, 26


def _stored_data_start(fp: io.BufferedReader, info: zipfile.ZipInfo) -> int | None:
    """Where a stored (uncompressed, unencrypted) member's bytes start in the archive: past
    its local header (whose signature and name ``zipfile`` checked when :func:`read_members`
    opened the member).  None for any other member: ``zipfile``'s reader reads it."""
    if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x1:  # encrypted
        return None
    fp.seek(info.header_offset)
    head = fp.read(_LOCAL_HEADER)
    if len(head) != _LOCAL_HEADER:
        return None
    name_len, extra_len = struct.unpack_from("<HH", head, _LENGTHS_AT)
    return info.header_offset + _LOCAL_HEADER + name_len + extra_len


def _read_stored(fp: io.BufferedReader, member: Member, start: int, view: memoryview) -> None:
    """A stored member's data read straight into ``view`` (``zipfile``'s reader copies each
    piece twice: into its own buffer, then into ours -- 0.54 s of a 337 MB model where this
    takes 0.30 s), and the member's CRC-32 checked as ``zipfile`` checks it (``zipfile``'s
    read-ahead checks a small member's already, when :func:`read_members` reads its header)."""
    fp.seek(start)
    header = fp.read(member.offset)  # the .npy header, read and checked by read_members
    if len(header) != member.offset:
        raise EOFError(f"member {member.name!r} ends inside its .npy header")
    done = 0
    while done < member.nbytes:
        got = fp.readinto(view[done : min(member.nbytes, done + CHUNK)])
        if not got:
            raise EOFError(f"member {member.name!r} ends after {done} of its data bytes")
        done += got
    if zlib.crc32(view, zlib.crc32(header)) != member.info.CRC:
        raise zipfile.BadZipFile(f"Bad CRC-32 for file {member.info.filename!r}")
