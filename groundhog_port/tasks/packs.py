"""Experiments kept packed: ``run7.tar.gz``, ``run7.tgz``, ``.tar``, ``.tar.bz2``, ``.tar.xz``, ``.zip``.

A finished GroundHog run is often archived whole (``tar czf run7.tar.gz run7/``).  ``archive``
and ``reproduce --case`` read such a file as the folder it holds: :func:`unpack` writes its
members into a private temporary folder (mode 0700, removed when the run ends), and the
experiment is then re-done from there, named ``run7.tar.gz/...`` in the report.

Nothing in a pack is trusted.  Every bound is checked before the bytes it guards are written:

* at most :data:`MAX_MEMBERS` members (an experiment folder holds a few dozen files);
* a member's path must be relative and stay inside the folder (no ``/abs``, no ``..``: the
  whole pack is refused); a member whose name is not valid UTF-8 is not written and is
  listed with its bytes escaped;
* links (symbolic or hard), devices, FIFOs and other special members are not written: each
  is listed with the reason, like any file that is not read;
* the total unpacked size is at most :func:`max_unpacked_bytes` (16 times the parse budget:
  4 GiB by default, room for a few full-size snapshots) and at most
  :data:`MAX_RATIO` times the pack's own size (a decompression bomb stops there, however
  much its headers declare), and the free space of the temporary folder's disk is checked
  before each member;
* the bytes are counted as they are decompressed, so a member whose header lies about its
  size is stopped at the same bounds.

Anything refused is one :class:`~groundhog_port.errors.LegacyInputError` naming the pack and
the member: the pack is then "not done" with that line, and the rest of the archive goes on.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, BinaryIO, cast

from .. import budget
from ..containers import (
    MAX_TAR_HEADERS,
    Damaged,
    Decompressed,
    TarGate,
    check_zip_directory,
    compression,
)
from ..errors import LegacyInputError
from ..untrusted import open_input

#: names of packed experiments (by suffix; the content decides the format)
PACK_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".zip")
#: most members a pack may hold (GroundHog's run folder: state, model(s), vocabularies, outputs)
MAX_MEMBERS = 10_000
#: most unpacked bytes per byte of pack (gzip's own limit is about 1,032; text packs 3-10)
MAX_RATIO = 200
#: unpacked bytes allowed regardless of the ratio (a pack of a few empty files)
RATIO_FLOOR = 1 << 20
#: deepest member path (folders) accepted; an archive search walks no deeper either
MAX_DEPTH = 64
#: bytes copied at a time
CHUNK = 1 << 20


def is_pack(name: str) -> bool:
    """Whether a file of this name is a packed experiment (by its suffix)."""
    lower = name.lower()
    return any(lower.endswith(s) for s in PACK_SUFFIXES)


def max_unpacked_bytes() -> int:
    """The most bytes one pack may unpack to: 16 times the parse budget."""
    return 16 * budget.budget_bytes()


@dataclass
class Unpacked:
    """What :func:`unpack` wrote: the folder, and the members not written with the reason."""

    pack: Path
    folder: Path
    files: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)


class _Counter:
    """The unpacked-size bounds, charged as bytes are written."""

    def __init__(self, pack: Path, size: int, dest: Path):
        self.pack, self.dest = pack, dest
        self.limit = min(max_unpacked_bytes(), max(RATIO_FLOOR, MAX_RATIO * size))
        self.why = (
            f"{MAX_RATIO} times the pack's {size} bytes"
            if self.limit < max_unpacked_bytes()
            else f"16 times the parse budget ({budget.FLAG} N raises it)"
        )
        self.total = 0

    def charge(self, member: str, n: int) -> None:
        self.total += n
        if self.total > self.limit:
            raise LegacyInputError(
                self.pack,
                f"member {member}: unpacking passes {self.limit} bytes ({self.why}): "
                "a decompression bomb or a damaged pack, not unpacked",
            )

    def room(self, member: str, declared: int) -> None:
        if declared > self.limit - self.total:
            raise LegacyInputError(
                self.pack,
                f"member {member} declares {declared} bytes: over the {self.limit} bytes "
                f"a pack may unpack to ({self.why}), not unpacked",
            )
        free = shutil.disk_usage(self.dest).free
        if declared > free:
            raise LegacyInputError(
                self.pack,
                f"member {member} declares {declared} bytes: the disk of {self.dest} has "
                f"{free} free (set TMPDIR to a folder with room)",
            )


def member_path(pack: Path, name: str) -> PurePosixPath:
    """A member's name as a relative path inside the folder; refused (the whole pack) when
    absolute or climbing out (``..``): such a pack was made to write elsewhere."""
    path = PurePosixPath(name)
    if path.is_absolute():
        raise LegacyInputError(
            pack,
            f"member {shown_name(name)} has an absolute path: refused (nothing is written outside)",
        )
    if len(path.parts) > MAX_DEPTH:
        raise LegacyInputError(
            pack,
            f"member {shown_name(name[:200])}... lies {len(path.parts)} folders deep (more "
            f"than {MAX_DEPTH}): not an experiment, not unpacked",
        )
    if ".." in path.parts:
        raise LegacyInputError(
            pack,
            f"member {shown_name(name)} climbs out of the pack ('..'): refused "
            "(nothing is written outside)",
        )
    return PurePosixPath(*[p for p in path.parts if p not in ("", ".")])


def shown_name(name: str) -> str:
    """A member's name as printed: bytes that are not UTF-8 (tar keeps them as surrogates)
    and control characters escaped."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return repr(text) if not text.isprintable() else text


def _odd_name(rel: PurePosixPath) -> str | None:
    """Why a member of this name is not written, or None."""
    name = rel.as_posix()
    if "\0" in name:
        return "its name holds a NUL byte: not written"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "its name is not valid UTF-8: not written"
    return None


def _write(dest: Path, rel: PurePosixPath, src: IO[bytes], count: _Counter, shown: str) -> None:
    target = dest.joinpath(*rel.parts)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        while chunk := src.read(CHUNK):
            count.charge(shown, len(chunk))
            out.write(chunk)


def _unpack_tar(pack: Path, f: BinaryIO, size: int, result: Unpacked) -> None:
    count = _Counter(pack, size, result.folder)
    seen: set[PurePosixPath] = set()
    # decompressed by us, as tarfile asks, within the members' bound plus the headers and
    # padding of the most headers a pack may hold (tarfile's own decompression took a whole
    # buffer of a bzip2 bomb at once); the headers read before tarfile parses them
    kind = compression(f.read(8))
    f.seek(0)
    stream = Decompressed(f, kind, count.limit + 2 * 512 * MAX_TAR_HEADERS, pack, count.why)
    gate = cast(BinaryIO, TarGate(stream, pack))  # tarfile reads it as a file: read(n)
    # streaming mode: one pass, no member list built first (100,000 headers are never held)
    with tarfile.open(fileobj=gate, mode="r|") as tar:
        for n, info in enumerate(tar, start=1):
            if n > MAX_MEMBERS:
                raise LegacyInputError(
                    pack, f"holds more than {MAX_MEMBERS} members: not an experiment, not unpacked"
                )
            rel = member_path(pack, info.name)
            shown = shown_name(rel.as_posix() or ".")
            if info.isdir():
                continue
            if (odd := _odd_name(rel)) is not None:
                result.skipped.append((shown, odd))
                continue
            if info.issym() or info.islnk():
                result.skipped.append(
                    (shown, f"a link in the pack (to {info.linkname!r}): not followed")
                )
                continue
            if not info.isfile():
                result.skipped.append((shown, "a special member (device, FIFO...): not written"))
                continue
            if rel in seen or not rel.parts:
                result.skipped.append((shown, "a second member of the same name: not written"))
                continue
            seen.add(rel)
            count.room(shown, info.size)
            src = tar.extractfile(info)
            if src is None:
                continue
            _write(result.folder, rel, src, count, shown)
            result.files += 1


def _unpack_zip(pack: Path, f: BinaryIO, size: int, result: Unpacked) -> None:
    count = _Counter(pack, size, result.folder)
    check_zip_directory(f, size, pack, MAX_MEMBERS)  # before zipfile reads the directory
    with zipfile.ZipFile(f) as zf:
        infos = zf.infolist()
        if len(infos) > MAX_MEMBERS:
            raise LegacyInputError(
                pack, f"holds {len(infos)} members (more than {MAX_MEMBERS}): not unpacked"
            )
        seen: set[PurePosixPath] = set()
        for info in infos:
            rel = member_path(pack, info.filename)
            shown = shown_name(rel.as_posix() or ".")
            if info.is_dir():
                continue
            if (odd := _odd_name(rel)) is not None:
                result.skipped.append((shown, odd))
                continue
            kind = stat.S_IFMT(info.external_attr >> 16)
            if kind == stat.S_IFLNK:
                result.skipped.append((shown, "a link in the pack: not followed"))
                continue
            if kind not in (0, stat.S_IFREG):
                result.skipped.append((shown, "a special member (device, FIFO...): not written"))
                continue
            if rel in seen or not rel.parts:
                result.skipped.append((shown, "a second member of the same name: not written"))
                continue
            seen.add(rel)
            count.room(shown, info.file_size)
            with zf.open(info) as src:
                _write(result.folder, rel, src, count, shown)
            result.files += 1


def unpack(pack: Path | str, into: Path | str) -> Unpacked:
    """The members of ``pack`` written under the new folder ``into/<pack name>`` (see the
    module's bounds); raises :class:`LegacyInputError` on the first bound passed (the
    partly written folder is removed)."""
    pack = Path(pack)
    folder = Path(into) / pack.name
    folder.mkdir(mode=0o700)
    result = Unpacked(pack, folder)
    try:
        with open_input(pack, "a packed experiment") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.peek(4)[:4]
            if head.startswith(b"PK"):
                _unpack_zip(pack, f, size, result)
            else:
                _unpack_tar(pack, f, size, result)
    except Damaged as err:
        shutil.rmtree(folder, ignore_errors=True)
        raise LegacyInputError(
            pack, f"damaged or not a pack ({err.problem}): not unpacked"
        ) from None
    except LegacyInputError:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    except OSError as err:
        shutil.rmtree(folder, ignore_errors=True)
        why = _write_failure(err)
        if why is not None:
            raise LegacyInputError(pack, why) from None
        detail = " ".join(str(err).split())[:200] or type(err).__name__
        raise LegacyInputError(pack, f"damaged or not a pack ({detail}): not unpacked") from None
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, ValueError) as err:
        shutil.rmtree(folder, ignore_errors=True)
        detail = " ".join(str(err).split())[:200] or type(err).__name__
        raise LegacyInputError(pack, f"damaged or not a pack ({detail}): not unpacked") from None
    return result


def _write_failure(err: OSError) -> str | None:
    """What a failed write while unpacking says, where it is not the pack's fault: the
    disk full or the file-size limit, each with its fix; else ``None``."""
    import errno

    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return (
            f"the disk of the temporary folder ({tempfile.gettempdir()}) filled up while "
            f"unpacking ({os.strerror(err.errno)}): not unpacked; set TMPDIR to a folder "
            "with room"
        )
    if err.errno == errno.EFBIG:
        return (
            "a member passes the file-size limit of this process (ulimit -f) while unpacking: "
            "not unpacked; raise the limit, or unpack it by hand and give its folder"
        )
    return None


def private_folder() -> Path:
    """A new temporary folder only this user can read (mode 0700), for :func:`unpack`."""
    return Path(tempfile.mkdtemp(prefix="groundhog-port-packs-"))


@contextlib.contextmanager
def case_folder(pack: Path | str) -> Iterator[tuple[Path, Unpacked]]:
    """``reproduce --case run7.tar.gz``: the pack unpacked into a private folder for the
    run, and the one folder in it that holds a ``*state.pkl`` (refused, naming them, when
    it holds none or several)."""
    pack = Path(pack)
    into = private_folder()
    try:
        up = unpack(pack, into)
        states = sorted({p.parent for p in up.folder.rglob("*state.pkl") if p.is_file()})
        if len(states) != 1:
            found = ", ".join(p.relative_to(up.folder).as_posix() or "." for p in states)
            raise LegacyInputError(
                pack,
                "holds no experiment (*state.pkl)"
                if not states
                else f"holds {len(states)} experiments ({found}): use archive on its "
                "folder, or unpack it and give one with --case",
            )
        yield states[0], up
    finally:
        shutil.rmtree(into, ignore_errors=True)
