"""Several files replaced together (a training checkpoint: model, state, timings), even
across SIGKILL or a power cut.

No filesystem renames three names in one step.  :func:`write_together` therefore writes a
*rename journal* between the writes and the renames (a write-ahead log, as databases keep):

1. every ``PATH.partial`` is locked and written, then fsynced;
2. ``LAST.together`` -- ``LAST`` the last file given (a checkpoint's timings) -- is written
   (through its own partial file, fsynced, renamed): from here the new files are committed;
3. each ``PATH.partial`` is renamed to ``PATH`` in the order given;
4. the journal is removed.

A process killed in step 3 leaves some files new and some old, the journal and the
remaining partial files -- all complete, since step 2 came after every fsync.
:func:`finish_together` (run before a checkpoint is read again: ``train`` does) completes
those renames, so whoever continues finds one whole checkpoint, the new one.  Killed before
step 2, nothing was renamed: the old checkpoint stands and the partial files are written
over by the next save.  SIGINT and SIGTERM are held back during step 3 as well, so an
interrupted run that exits normally never needs the journal.

The journal names its files relative to its own folder (one name per line, no ``/``):
the files replaced together lie in one folder.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

from .outputs import (
    OutputError,
    fsync_dir,
    open_locked,
    output_target,
    partial_path,
    signals_held,
    write_failure,
)

JOURNAL_SUFFIX = ".together"


def journal_of(last: str | os.PathLike[str]) -> Path:
    """``LAST.together``: the rename journal of files replaced together, ``LAST`` last."""
    last = Path(last)
    return last.with_name(last.name + JOURNAL_SUFFIX)


def write_together(
    writers: Sequence[tuple[str | os.PathLike[str], Callable[[BinaryIO], object]]], kept: str
) -> None:
    """Several binary files replaced together (see the module docstring).

    ``writers``: ``[(path, write)]``, ``write(f)`` writing one file, every path in one
    folder.  A failure before the journal is in place removes every partial file, renames
    nothing, and the :class:`OutputError` ends with ``kept`` (what the caller leaves as it
    was); a failure after it leaves the journal, and the next :func:`finish_together`
    completes the renames."""
    folders = {Path(os.path.abspath(given)).parent for given, _ in writers}
    if len(folders) != 1:
        raise ValueError(f"files replaced together lie in one folder, not {sorted(folders)}")
    paths = []
    for given, _ in writers:
        target = output_target(given)
        if target.stream:
            raise OutputError(
                given,
                "is not a regular file: files replaced together (a checkpoint) cannot be streamed",
            )
        paths.append(target.path)
    partials = [partial_path(p) for p in paths]
    journal = journal_of(writers[-1][0])
    fds = []
    committed = False
    try:
        for partial, path in zip(partials, paths):
            fds.append(open_locked(partial, path))
        for fd, partial, (_, write) in zip(fds, partials, writers):
            try:
                os.ftruncate(fd, 0)
                with open(fd, "wb", closefd=False) as f:
                    write(f)
                os.fsync(fd)
            except OSError as err:
                raise write_failure(partial, err, kept) from None
        with signals_held():
            names = "".join(Path(given).name + "\n" for given, _ in writers)
            fds.append(_write_journal(journal, names.encode(), kept))
            committed = True
            _rename_all(partials, paths, journal)
            os.unlink(journal)
            fsync_dir(journal)
    except BaseException:
        if not committed:
            for partial in partials[: len(fds)]:  # only the partial files this process locked
                with contextlib.suppress(OSError):
                    os.unlink(partial)
        raise
    finally:
        for fd in fds:
            os.close(fd)


def _write_journal(journal: Path, data: bytes, kept: str) -> int:
    """Write, fsync and rename ``journal``'s partial file into place; returns its descriptor
    (locked: :func:`finish_together` leaves a journal alone while its writer lives)."""
    partial = partial_path(journal)
    fd = open_locked(partial, journal)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, data)  # a few names: one write
        os.fsync(fd)
        os.replace(partial, journal)
    except OSError as err:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise write_failure(partial, err, kept) from None
    fsync_dir(journal)
    return fd


def _rename_all(partials: Sequence[Path], paths: Sequence[Path], journal: Path) -> None:
    for i, (partial, path) in enumerate(zip(partials, paths)):
        try:
            os.replace(partial, path)
        except OSError as err:
            done = ", ".join(str(p) for p in paths[:i]) or "nothing"
            raise OutputError(
                path,
                f"cannot rename {partial.name} to it ({err.strerror or err}); already "
                f"replaced: {done}; {journal.name} lists the rest: running the same command "
                "again completes them",
            ) from None
    fsync_dir(paths[0])


def finish_together(last: str | os.PathLike[str]) -> list[Path]:
    """Complete the renames of a :func:`write_together` that was killed between them
    (``LAST.together`` left behind); returns the files it replaced (``[]``: no journal, or
    nothing left to rename).  A journal still locked by its live writer is left to it
    (:class:`~groundhog_port.outputs.OutputBusyError`); one naming anything but plain names in its folder is refused
    (:class:`OutputError`), nothing renamed."""
    journal = journal_of(last)
    if not os.path.lexists(journal):
        return []
    fd = open_locked(
        journal,
        journal,
        f"another process is replacing the files {journal.name} lists; wait for it to finish",
    )
    try:
        names = _journal_names(journal, fd)
        done = []
        for name in names:
            path = output_target(journal.with_name(name)).path
            partial = partial_path(path)
            if os.path.lexists(partial):
                # the same refusals as a write: a plain file of ours, held by no one
                os.close(open_locked(partial, path))
                os.replace(partial, path)
                done.append(path)
        if done:
            fsync_dir(done[0])
        os.unlink(journal)
        fsync_dir(journal)
        return done
    except OSError as err:
        raise write_failure(journal, err, "the files it lists are as they were") from None
    finally:
        os.close(fd)


def _journal_names(journal: Path, fd: int) -> list[str]:
    """The names a rename journal lists, each checked to be a plain name in its folder."""
    with open(fd, "rb", closefd=False) as f:
        data = f.read(1 << 16)
    try:
        names = data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        names = []
    if not names or any(
        not n or "/" in n or "\0" in n or n in (".", "..") or n.endswith(JOURNAL_SUFFIX)
        for n in names
    ):
        raise OutputError(
            journal,
            "is not a rename journal this program wrote (one file name per line, in its own "
            "folder): nothing was renamed; remove it if the files beside it are as you want them",
        )
    return names
