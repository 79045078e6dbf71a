"""Output files that are never half-written, never written by two processes, and resumable.

The small API every command that writes a file uses (translate, score, reproduce, parity;
train; serve/preprocess as they come):

* :func:`atomic_output` -- ``with atomic_output(path) as f: ...`` writes ``PATH.partial``
  (locked, see below), fsyncs it and renames it to ``PATH`` only when the body finished:
  ``PATH`` only ever holds a complete file (n-best lists, plots, JSON reports, checkpoints:
  ``np.savez(f, ...)`` with ``binary=True``).  On failure the partial file is removed.
  :func:`atomic_write_text` / :func:`atomic_write_bytes` for a file written at once;
  :mod:`groundhog_port.together` for several files replaced together (a training
  checkpoint), with a rename journal.
* :class:`Journal` -- for long line-per-item outputs that ``--resume`` continues: result
  lines go to ``PATH.partial`` and a matching record per line (a cost, a batch number...)
  to ``PATH.partial.journal``, each line written through to the OS as it comes;
  ``commit()`` renames ``PATH.partial`` to ``PATH`` and removes the journal.  After an
  interruption or a failed write the same command with ``--resume`` keeps every complete
  line (a line counts once it and its journal record end with a newline) and continues.
* Locks: both hold an exclusive ``fcntl.flock`` on ``PATH.partial`` from before its first
  byte is touched until it is renamed: a second process pointed at the same output refuses
  at once with one clear error (:class:`OutputBusyError`) instead of interleaving lines.
  The kernel drops the lock when a process dies, even by SIGKILL.  :func:`run_lock` holds
  such a lock for a whole run that rewrites its outputs (``train``).
* Targets (:func:`output_target`): a regular file (or a new name) is replaced as above; a
  symbolic link is written through -- its target is replaced, by a partial file in the
  target's own directory, and the link stays; ``-``, a FIFO, a character device and the
  ``/dev/stdout``-like names of an open descriptor are streamed (written as the lines come:
  no partial file, no rename, no resume); a directory, a socket or block device, an input
  of the same run and one file named for two outputs are refused (:func:`check_outputs`).
  Nothing that is not a regular file of this run is ever renamed over.
* Fingerprints: a :class:`Journal` records, in its first line, what made its lines (the
  digests of the inputs, every setting that changes the output); ``--resume`` refuses a
  journal of another run, naming what differs, and a run without ``--resume`` refuses to
  discard the complete lines of an earlier one.  A run that fails before its first line
  leaves no partial files behind.
* Failed writes (``ENOSPC`` on a full disk, ``EFBIG`` past ``ulimit -f``, ``EROFS``/``EACCES``
  on a read-only target, ``EIO``) are one :class:`OutputError` naming the file and saying
  what is kept -- exit code 2 through the command line, like bad input.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import signal
import stat
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TextIO

from .errors import LegacyInputError


class OutputError(LegacyInputError):
    """An output file that cannot be written (full disk, read-only, locked...)."""


class OutputBusyError(OutputError):
    """Another process holds the lock on the output's partial file."""


def partial_path(path: str | os.PathLike[str]) -> Path:
    """``PATH.partial``: where ``PATH`` is written until it is complete."""
    path = Path(path)
    return path.with_name(path.name + ".partial")


def write_failure(path: str | os.PathLike[str], err: OSError, kept: str = "") -> OutputError:
    """:class:`OutputError` for an ``OSError`` raised writing ``path``; ``kept`` says what
    stays on disk (e.g. for ``--resume``)."""
    code = errno.errorcode.get(err.errno, "") if err.errno is not None else ""
    reason = f"{err.strerror or err}{f' ({code})' if code else ''}"
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        reason += ": the disk is full"
    elif err.errno == errno.EFBIG:
        reason += ": over the file-size limit (ulimit -f)"
    elif err.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        reason += ": the target is not writable"
    return OutputError(path, f"cannot write ({reason}){'; ' + kept if kept else ''}")


@dataclass(frozen=True)
class Target:
    """Where an output named ``given`` goes: ``path`` is the regular file replaced (symbolic
    links followed), or, with ``stream``, the file written in place as the lines come."""

    given: str
    path: Path
    stream: bool = False

    @property
    def is_stdout(self) -> bool:
        """Streamed to this process's standard output (``-``, ``/dev/stdout`` ...)."""
        if not self.stream:
            return False
        if self.given == "-":
            return True
        try:
            return os.path.samestat(os.stat(self.path), os.fstat(sys.stdout.fileno()))
        except (OSError, ValueError, AttributeError):
            return False


#: a file type named in a refusal
_KINDS = {stat.S_IFSOCK: "socket", stat.S_IFBLK: "block device", stat.S_IFDIR: "directory"}


def _through_descriptor_names(path):
    """Whether ``path`` or a symbolic link on the way to its target lies in ``/dev`` or
    ``/proc`` (``/dev/stdout`` -> ``/proc/self/fd/1`` -> whatever descriptor 1 is): such
    a name stands for an open descriptor, which must be written, never replaced."""
    p = Path(os.path.abspath(path))
    for _ in range(40):  # the kernel's own limit on a chain of links
        if p.parts[1:2] in (("dev",), ("proc",)):
            return True
        if not p.is_symlink():
            return False
        p = Path(os.path.abspath(p.parent / os.readlink(p)))
    return False


def output_target(path: str | os.PathLike[str]) -> Target:
    """:class:`Target` of an output name; :class:`OutputError` for what cannot be one."""
    if str(path) == "-":
        return Target("-", Path("-"), stream=True)
    given = Path(path)
    try:
        st = os.stat(given)  # follows symbolic links
    except FileNotFoundError:
        st = None
    except OSError as err:
        raise write_failure(given, err) from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise OutputError(given, "is a directory, expected an output file name")
        if (
            stat.S_ISFIFO(st.st_mode)
            or stat.S_ISCHR(st.st_mode)
            or (stat.S_ISREG(st.st_mode) and _through_descriptor_names(given))
        ):
            return Target(str(path), given, stream=True)
        if not stat.S_ISREG(st.st_mode):
            kind = _KINDS.get(stat.S_IFMT(st.st_mode), "special file")
            raise OutputError(given, f"is a {kind}, not a file an output can be written to")
    real = Path(os.path.realpath(given))  # a dangling link: the file it will create
    if not real.parent.is_dir():
        raise OutputError(
            given,
            "output directory does not exist"
            + (f" (the link points to {real})" if real != given.absolute() else ""),
        )
    return Target(str(path), real)


def check_output_path(path: str | os.PathLike[str]) -> None:
    """An output we can write (see :func:`output_target`)."""
    output_target(path)


def check_outputs(
    outputs: Iterable[tuple[str, str | os.PathLike[str] | None]],
    inputs: Iterable[tuple[str, str | os.PathLike[str] | None]] = (),
    folders: Iterable[tuple[str, str | os.PathLike[str] | None]] = (),
) -> None:
    """Refuse, before any work, an output that would replace evidence: one file named for
    two outputs; an output that is, or reaches through links (or is a hard link of), a file
    the run reads; an output whose partial file or journal would be such a file; an output
    that resolves to a place inside a folder the run checks (a case, an archive, an exported
    checkpoint).  One :class:`OutputError` line each (exit 2 through the command line).

    ``outputs``/``inputs``: ``[(flag, path)]``; ``folders``: ``[(what, folder)]`` (``None``
    paths skipped).  Files are compared by what they are (symbolic links followed, hard
    links included), not by their names.  A streamed output (``-``, a FIFO, a device) is
    written in place and never renamed over anything: only its name is checked; a regular
    file streamed to because it is named through ``/proc`` or ``/dev/fd``
    (``/proc/self/cwd/src.en``) is checked by what it is, like any output."""
    seen: list[tuple[str, Path | str]] = []
    key: Path | str
    for flag, path in outputs:
        if path is None:
            continue
        target = output_target(path)
        if target.given == "-":
            key = "-"
        else:
            key = target.path
        for other_flag, other_key in seen:
            if other_key == key or (key != "-" and other_key != "-" and _same_file(key, other_key)):
                raise OutputError(
                    path, f"named for both {other_flag} and {flag}: give each output its own file"
                )
        seen.append((flag, key))
        if target.stream and not _regular_file(target.path):
            continue  # a pipe, a terminal, a device: nothing of the run's can be there
        # a stream to a regular file (named through /proc or /dev/fd: /proc/self/cwd/src.en)
        # writes that very file in place: compared by device and inode like any output
        side = () if target.stream else (partial_path(target.path), journal_path(target.path))
        for in_flag, in_path in inputs:
            if in_path is None or str(in_path) == "-":
                continue
            if _same_file(target.path, in_path):
                raise OutputError(
                    path,
                    f"is the {in_flag} input of this run: writing {flag} "
                    "there would destroy it; choose another output file",
                )
            for s in side:
                if os.path.lexists(s) and _same_file(s, in_path):
                    raise OutputError(
                        path,
                        f"its partial file {s.name} is the {in_flag} input of this run: "
                        f"writing {flag} would destroy it; choose another output file",
                    )
        for what, folder in folders:
            if folder is not None and lies_inside(target.path, folder):
                raise OutputError(
                    path,
                    f"lies inside {what} {folder}, which this run reads: {flag} is never "
                    "written into it (it could replace a recorded file); choose a file "
                    "outside it",
                )


def _regular_file(path):
    """Whether ``path`` is (or leads to) a regular file; ``-`` is not."""
    if str(path) == "-":
        return False
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def journal_path(path: str | os.PathLike[str]) -> Path:
    """``PATH.partial.journal``: the records of a :class:`Journal` on ``PATH``."""
    path = Path(path)
    return path.with_name(path.name + ".partial.journal")


def lies_inside(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> bool:
    """Whether ``path`` (symbolic links resolved, also a name not created yet) is ``folder``
    or lies anywhere under it (``folder``'s links resolved too)."""
    real, top = os.path.realpath(path), os.path.realpath(folder)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def _same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def file_in(folder: str | os.PathLike[str], *parts: str) -> Path:
    """``folder/parts...``: a file this program names inside an output folder (``archive
    --out``'s report and cache, ``reproduce --save-dir``, ``export OUTDIR``).  Links inside
    such a folder are never followed -- a link there is left by someone else, and could
    lead to an input or an archived result -- so a symbolic link at any step below
    ``folder``, or anything but a folder on the way or a regular file at the end, is
    refused with one :class:`OutputError` line.  ``folder`` itself is the user's name
    (followed)."""
    path = Path(folder)
    for i, part in enumerate(parts):
        path = path / part
        st = _lstat(path)
        if st is None:
            continue
        last = i == len(parts) - 1
        if stat.S_ISLNK(st.st_mode):
            raise OutputError(
                path,
                f"is a symbolic link inside the output folder {folder}: links there are "
                "never followed (it could lead to an input or an archived result); "
                "remove it",
            )
        if not last and not stat.S_ISDIR(st.st_mode):
            raise OutputError(path, f"is not a folder, inside the output folder {folder}")
        if last and not stat.S_ISREG(st.st_mode):
            kind = _KINDS.get(stat.S_IFMT(st.st_mode), "special file")
            raise OutputError(
                path, f"is a {kind} inside the output folder {folder}: expected a file"
            )
    return path


def folder_in(folder: str | os.PathLike[str], *parts: str, create: bool = True) -> Path:
    """``folder/parts...`` created as real folders (no link followed, see :func:`file_in`);
    ``create=False``: only checked (a missing one is fine)."""
    path = Path(folder)
    for part in parts:
        path = path / part
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            if not create:
                return path
            try:
                os.mkdir(path)
            except FileExistsError:
                pass
            except OSError as err:
                raise write_failure(path, err) from None
            st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            raise OutputError(
                path,
                f"is a symbolic link inside the output folder {folder}: links there are "
                "never followed (it could lead to an input or an archived result); "
                "remove it",
            )
        if not stat.S_ISDIR(st.st_mode):
            raise OutputError(path, f"is not a folder, inside the output folder {folder}")
    return path


def _lstat(path):
    """``os.lstat(path)`` (links not followed), ``None`` when nothing is there; any other
    failure is one :class:`OutputError` line."""
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise write_failure(path, err) from None


def check_partial(partial: str | os.PathLike[str]) -> None:
    """A partial file about to be written must be this program's own: not a symbolic link
    (written through, it would replace the link's target), not a hard link of another file,
    not a FIFO or a device.  A leftover regular file is fine (it is cut before use)."""
    st = _lstat(partial)
    if st is None:
        return
    if stat.S_ISLNK(st.st_mode):
        problem = "is a symbolic link"
    elif not stat.S_ISREG(st.st_mode):
        problem = f"is a {_KINDS.get(stat.S_IFMT(st.st_mode), 'special file')}"
    elif st.st_nlink > 1:
        problem = f"has {st.st_nlink - 1} other hard link(s)"
    else:
        return
    raise OutputError(
        partial,
        f"{problem}: an output's partial file is written in place, which would change "
        "another file; remove it",
    )


def open_locked(
    path: str | os.PathLike[str], final: str | os.PathLike[str], busy: str | None = None
) -> int:
    """Open ``path`` (read/write, created, NOT truncated) and take the exclusive lock on it
    before anything else touches it; returns the file descriptor.  ``busy``: the message
    when another process holds the lock (default: another process is writing ``final``).
    ``path`` is never a link, a hard link of another file or a special file
    (:func:`check_partial`; ``O_NOFOLLOW`` for one made meanwhile)."""
    check_partial(path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o666)
    except OSError as err:
        raise write_failure(path, err) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise OutputBusyError(
            final,
            busy
            or f"another process is writing it ({Path(path).name} "
            "is locked); wait for it to finish or choose another output file",
        ) from None
    except OSError:  # a filesystem without flock (some network mounts): go on unlocked
        pass
    return fd


def _write_all(fd, data):
    """``os.write`` until all of ``data`` is out (a write may be partial near a full disk)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make a rename durable; best effort (not every filesystem lets a directory be synced)."""
    try:
        fd = os.open(Path(path).parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _commit(fd, partial, path, kept):
    """fsync ``partial`` (descriptor ``fd``) and rename it to ``path``."""
    try:
        os.fsync(fd)
    except OSError as err:
        raise write_failure(partial, err, kept) from None
    try:
        os.replace(partial, path)
    except OSError as err:
        raise OutputError(
            path,
            f"cannot rename {Path(partial).name} to it "
            f"({err.strerror or err}); the complete output is in {partial}",
        ) from None
    fsync_dir(path)


def _open_stream(target, binary=False):
    """A file object writing a streamed :class:`Target` in place (see :func:`output_target`):
    standard output itself (not closed), or the FIFO/device opened for writing."""
    text = {} if binary else {"encoding": "utf-8", "newline": "\n"}
    if target.is_stdout:
        sys.stdout.flush()
        out = sys.stdout.buffer if binary and hasattr(sys.stdout, "buffer") else sys.stdout
        return _Unclosed(out)
    try:  # no O_CREAT: a stream exists; O_TRUNC as GroundHog's open(path, 'w') (a no-op on FIFOs)
        fd = os.open(target.path, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
    except OSError as err:
        raise write_failure(target.path, err) from None
    return open(fd, "wb" if binary else "w", **text)


class _Unclosed:
    """``sys.stdout`` lent to an output: flushed, never closed."""

    def __init__(self, f):
        self._f = f

    def __getattr__(self, name):
        return getattr(self._f, name)

    def close(self):
        self._f.flush()


@contextlib.contextmanager
def _streamed(target, binary):
    f = _open_stream(target, binary)
    try:
        yield f
        f.flush()
    except OSError as err:
        raise write_failure(
            target.path,
            err,
            "what was written so far stays there (a streamed output is written in place)",
        ) from None
    finally:
        with contextlib.suppress(OSError):
            f.close()


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], binary: bool = False) -> Iterator[IO[Any]]:
    """Yield a file writing ``PATH.partial`` (locked), renamed to ``PATH`` once the body
    finished and the data is on disk.  On any failure ``PATH.partial`` is removed, an
    ``OSError`` becomes :class:`OutputError`, and ``PATH`` is left as it was.  A symbolic
    link is written through (its target replaced); a stream is written in place."""
    target = output_target(path)
    if target.stream:
        with _streamed(target, binary) as f:
            yield f
        return
    path = target.path
    partial = partial_path(path)
    fd = open_locked(partial, path)
    untouched = f"{path} is left as it was"
    try:
        text: dict[str, Any] = {} if binary else {"encoding": "utf-8", "newline": "\n"}
        f = open(fd, "wb" if binary else "w", closefd=False, **text)
        try:
            os.ftruncate(fd, 0)
            yield f
            f.flush()
        except OSError as err:
            raise write_failure(partial, err, untouched) from None
        finally:
            with contextlib.suppress(OSError):  # a failed flush fails again here
                f.close()
        _commit(fd, partial, path, untouched)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM are delivered when the block ends, not inside it (for this
    thread; where the platform has ``pthread_sigmask``)."""
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    except (AttributeError, ValueError, OSError):
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def run_lock(path: str | os.PathLike[str], busy: str) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (created) for a whole run, e.g. a training
    run writing ``<prefix>*`` checkpoints again and again; :class:`OutputBusyError` with
    ``busy`` when another process holds it.  The file is removed at the end.  Whoever locks
    a file that was removed (or replaced) in the meantime tries again, so two runs can never
    each hold a lock on a different file of the same name."""
    path = Path(path)
    check_output_path(path)
    while True:
        fd = open_locked(path, path, busy)
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the holder removed it between our open and our lock
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)  # while still holding the lock: see the retry above
        os.close(fd)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """``path`` holds ``text`` (UTF-8) completely or is left as it was."""
    with atomic_output(path) as f:
        f.write(text)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """``path`` holds ``data`` completely or is left as it was."""
    with atomic_output(path, binary=True) as f:
        f.write(data)


#: the first line of a journal: the fingerprint of the run that wrote it (JSON follows)
FINGERPRINT_TAG = "#fingerprint "


def file_digest(path: str | os.PathLike[str]) -> str:
    """``sha256:HEX`` of a file's bytes (read in 1 MiB pieces)."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError as err:
        raise LegacyInputError(path, f"cannot read it ({err.strerror or err})") from None
    return "sha256:" + h.hexdigest()


class DigestsAhead:
    """:func:`file_digest` of some files, computed on a thread from construction on.

    hashlib and file reads release the GIL, so the digest of a model (0.27 s for 337 MB on
    the 2-core AMD EPYC, issue 54) is computed while the model loads instead of after it.
    :meth:`get` waits for the thread (a file not given is digested there and then); a file
    the thread could not read raises in :meth:`get` what :func:`file_digest` raises.
    """

    def __init__(self, paths: Iterable[str | os.PathLike[str] | None]) -> None:
        import threading

        self._paths = [os.fspath(p) for p in paths if p is not None]
        self._done: dict[str, str | BaseException] = {}
        self._thread = threading.Thread(target=self._run, name="file-digests", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for path in self._paths:
            try:
                self._done[path] = file_digest(path)
            except BaseException as err:  # raised in get(), in the caller's thread
                self._done[path] = err

    def get(self, path: str | os.PathLike[str]) -> str:
        """``file_digest(path)``."""
        key = os.fspath(path)
        if key not in self._paths:
            return file_digest(path)
        self._thread.join()
        done = self._done[key]
        if isinstance(done, BaseException):
            raise done
        return done


def text_digest(lines: Iterable[str]) -> str:
    """``sha256:HEX`` of text lines as read (what a run actually used, even from a pipe)."""
    h = hashlib.sha256()
    for line in lines:
        h.update(line.encode("utf-8", "surrogatepass") + b"\n")
    return "sha256:" + h.hexdigest()


def _shown_value(value):
    text = str(value)
    if text.startswith("sha256:"):
        return text[:19]  # the digest's first 12 hex digits
    return repr(value) if len(text) <= 60 else repr(text[:57]) + "..."


def fingerprint_differences(old: Mapping[str, object], new: Mapping[str, object]) -> list[str]:
    """``["beam_size 10 (now 5)", ...]``: what differs between two fingerprints."""
    out = []
    for key in list(new) + [k for k in old if k not in new]:
        if old.get(key) != new.get(key):
            out.append(f"{key} {_shown_value(old.get(key))} (now {_shown_value(new.get(key))})")
    return out


class Journal:
    """``PATH.partial`` + ``PATH.partial.journal``; see the module docstring.

    ``fingerprint``: a JSON-able dict of what makes the output (input digests, settings),
    kept as the journal's first line; ``--resume`` refuses a journal whose fingerprint
    differs.  A streamed target (:func:`output_target`) is written line by line in place:
    no partial file, no journal, no resume."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        resume: bool = False,
        keep: Callable[[list[str]], int] | None = None,
        fingerprint: Mapping[str, object] | None = None,
    ) -> None:
        """``keep(records) -> n`` may cut the kept prefix further (e.g. to a batch boundary)."""
        self.target = output_target(path)
        self.path = self.target.path
        self.fingerprint = dict(fingerprint or {})
        self.count = 0
        self.done_lines, self.done_records = [], []
        self._out = self._rec = self._stream = None
        if self.target.stream:
            if resume:
                raise OutputError(
                    path,
                    "--resume: this output is streamed (standard output, a "
                    "FIFO or a device: written in place, with no partial file): "
                    "there is nothing to resume",
                )
            self.partial = self.journal = None
            self._stream = _open_stream(self.target)
            return
        self.partial = partial_path(self.path)
        self.journal = journal_path(self.path)
        existed = self.partial.exists() or self.journal.exists()
        # the lock comes first: a second process must not even truncate the first one's files
        self._out = open_locked(self.partial, self.path)
        try:
            check_partial(self.journal)
            self._rec = os.open(
                self.journal, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o666
            )
            lines = _complete_lines(self.partial)
            header, records = _split_fingerprint(_complete_lines(self.journal))
            n = min(len(lines), len(records))
            if keep is not None and n:
                n = keep([r for r, _ in records[:n]])
            if lines and not resume:
                raise OutputError(
                    self.path,
                    f"{self.partial} holds {len(lines)} complete "
                    "lines of an earlier run that did not finish: add --resume "
                    "to continue it, or remove it (and its .journal) to start "
                    "afresh",
                )
            if lines or records:  # even when no line is readable: not another run's
                self._check(header)
            # cut both files after their n-th line: what follows is incomplete or unmatched
            os.ftruncate(self._out, sum(size for _, size in lines[:n]))
            if n:
                os.ftruncate(self._rec, header[1] + sum(size for _, size in records[:n]))
            else:
                os.ftruncate(self._rec, 0)
                _write_all(
                    self._rec,
                    (FINGERPRINT_TAG + json.dumps(self.fingerprint, sort_keys=True) + "\n").encode(
                        "utf-8"
                    ),
                )
            os.lseek(self._out, 0, os.SEEK_END)
            os.lseek(self._rec, 0, os.SEEK_END)
        except OSError as err:
            self._close(remove=not existed)
            raise write_failure(self.journal if self._rec is None else self.partial, err) from None
        except BaseException:
            self._close(remove=not existed)
            raise
        self.done_lines = [line for line, _ in lines[:n]]
        self.done_records = [record for record, _ in records[:n]]
        self.count = n

    def _check(self, header):
        """Refuse to resume the journal of another run (``header``: its fingerprint line)."""
        where = f"--resume: {self.partial}"
        if header is None:
            raise OutputError(
                self.path,
                f"{where} has no fingerprint (an older version wrote "
                "it), so it cannot be checked to be this run's: remove it (and "
                "its .journal) to start afresh",
            )
        diffs = fingerprint_differences(header[0], self.fingerprint)
        if diffs:
            raise OutputError(
                self.path,
                f"{where} was written by another run: "
                f"{'; '.join(diffs)}; resume with the same inputs and settings, "
                "or remove it (and its .journal) to start afresh",
            )

    @property
    def to_stdout(self) -> bool:
        """The lines go to this process's standard output (print summaries elsewhere)."""
        return self.target.is_stdout

    def _kept(self):
        return (
            f"the {self.count} complete lines written so far and the journal are kept: "
            "free space (or make the target writable) and rerun the command with --resume"
        )

    def append(self, line: str, record: str = "") -> None:
        """Write one result line and its record (through to the OS, not fsynced)."""
        if self._stream is not None:
            try:
                self._stream.write(line + "\n")
                self._stream.flush()
            except OSError as err:
                raise write_failure(
                    self.target.path,
                    err,
                    "the lines before it were written (a streamed output has no partial file)",
                ) from None
            self.count += 1
            return
        assert self.partial is not None and self.journal is not None  # not streamed
        try:
            _write_all(self._out, (line + "\n").encode("utf-8"))
        except OSError as err:
            raise write_failure(self.partial, err, self._kept()) from None
        try:
            _write_all(self._rec, (record + "\n").encode("utf-8"))
        except OSError as err:
            raise write_failure(self.journal, err, self._kept()) from None
        self.count += 1

    def flush(self) -> None:
        """Nothing to do: every line is written through as it comes (kept for callers)."""

    def commit(self) -> None:
        """The output is complete: ``PATH.partial`` becomes ``PATH``, the journal goes.  The
        journal is removed first, so a process that takes the freed name next never loses
        its own journal to this one."""
        if self._stream is not None:
            stream, self._stream = self._stream, None
            try:
                stream.close()
            except OSError as err:
                raise write_failure(self.target.path, err) from None
            return
        # not streamed: the files __init__ opened (None only once closed)
        assert self._out is not None and self._rec is not None
        assert self.partial is not None and self.journal is not None
        os.close(self._rec)
        self._rec = None
        try:
            os.fsync(self._out)
        except OSError as err:
            raise write_failure(self.partial, err, self._kept()) from None
        with contextlib.suppress(FileNotFoundError):
            self.journal.unlink()
        _commit(self._out, self.partial, self.path, "")
        self._close()

    def close_unfinished(self) -> None:
        """Leave the partial files for ``--resume`` (interrupted or failed run) -- unless
        not one line was written: then they go (no empty leftovers)."""
        self._close(remove=self.count == 0)

    def _close(self, remove=False):
        if remove and self._out is not None:  # still locked: nobody else's files
            for path in (self.journal, self.partial):
                with contextlib.suppress(OSError):
                    os.unlink(path)
        if self._stream is not None:
            with contextlib.suppress(OSError):
                self._stream.close()
        for fd in (self._out, self._rec):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._out = self._rec = self._stream = None


def _split_fingerprint(journal_lines):
    """``((fingerprint dict, size of its line) or None, records)`` of a journal's lines."""
    if journal_lines and journal_lines[0][0].startswith(FINGERPRINT_TAG):
        text, size = journal_lines[0]
        try:
            fp = json.loads(text[len(FINGERPRINT_TAG) :])
        except ValueError:
            fp = None
        return ((fp, size) if isinstance(fp, dict) else None), journal_lines[1:]
    return None, journal_lines


def _complete_lines(path):
    """``(text, size in bytes with its newline)`` of each line of ``path`` that ends with a
    newline.  Split before decoding: a run killed while writing may end in the middle of a
    UTF-8 character."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    parts = data.split(b"\n")[:-1]  # the last piece is incomplete
    try:
        return [(p.decode("utf-8"), len(p) + 1) for p in parts]
    except UnicodeDecodeError as err:
        raise LegacyInputError(
            path,
            f"not UTF-8 ({err.reason}): not a file this program wrote; "
            "remove it or run without --resume",
        ) from None


class Progress:
    """A progress bar (tqdm) on stderr: ``35/40 [00:02<00:00, 16.5 sent/s]``.

    Shown when stderr is a terminal, or always with ``enabled=True``.  While it is shown,
    log records go through tqdm (``logging_redirect_tqdm``), which clears the bar, prints
    the record on its own line and redraws the bar below it.
    """

    def __init__(
        self,
        total: int | None,
        unit: str = "sent",
        enabled: bool | None = None,
        stream: TextIO | None = None,
    ) -> None:
        self.total, self.unit = total, unit
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.start = time.monotonic()
        self.count = 0
        self._bar = self._redirect = None
        if self.enabled:
            from tqdm import tqdm
            from tqdm.contrib.logging import logging_redirect_tqdm

            self._bar = tqdm(
                total=total or None,
                unit=f" {unit}",
                file=self.stream,
                mininterval=0.5,
                dynamic_ncols=True,
            )
            self._redirect = logging_redirect_tqdm(tqdm_class=tqdm)
            self._redirect.__enter__()

    def update(self, n: int = 1) -> None:
        self.count += n
        if self._bar is not None:
            self._bar.update(n)

    def rate(self) -> float:
        elapsed = time.monotonic() - self.start
        return self.count / elapsed if elapsed > 0 else 0.0

    def close(self) -> None:
        """Leave the final bar on screen and give logging its handlers back (idempotent)."""
        if self._bar is not None:
            self._bar.close()
            assert self._redirect is not None  # set with _bar
            self._redirect.__exit__(None, None, None)
            self._bar = self._redirect = None
