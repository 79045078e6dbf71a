"""Output files that are never half-written, never written by two processes, and resumable.

The small API every command that writes a file uses (translate, score, reproduce, parity;
train; serve/preprocess as they come):

* :func:`atomic_output` -- ``with atomic_output(path) as f: ...`` writes ``PATH.partial``
  (locked, see below), fsyncs it and renames it to ``PATH`` only when the body finished:
  ``PATH`` only ever holds a complete file (n-best lists, plots, JSON reports, checkpoints:
  ``np.savez(f, ...)`` with ``binary=True``).  On failure the partial file is removed.
  :func:`atomic_write_text` / :func:`atomic_write_bytes` for a file written at once;
  :func:`write_together` for several files replaced together (a training checkpoint).
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
* Failed writes (``ENOSPC`` on a full disk, ``EFBIG`` past ``ulimit -f``, ``EROFS``/``EACCES``
  on a read-only target, ``EIO``) are one :class:`OutputError` naming the file and saying
  what is kept -- exit code 2 through the command line, like bad input.
"""
import contextlib
import errno
import fcntl
import os
import signal
import sys
import time
from pathlib import Path

from .errors import LegacyInputError


class OutputError(LegacyInputError):
    """An output file that cannot be written (full disk, read-only, locked...)."""


class OutputBusyError(OutputError):
    """Another process holds the lock on the output's partial file."""


def partial_path(path):
    """``PATH.partial``: where ``PATH`` is written until it is complete."""
    path = Path(path)
    return path.with_name(path.name + ".partial")


def write_failure(path, err, kept=""):
    """:class:`OutputError` for an ``OSError`` raised writing ``path``; ``kept`` says what
    stays on disk (e.g. for ``--resume``)."""
    code = errno.errorcode.get(err.errno, "")
    reason = f"{err.strerror or err}{f' ({code})' if code else ''}"
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        reason += ": the disk is full"
    elif err.errno == errno.EFBIG:
        reason += ": over the file-size limit (ulimit -f)"
    elif err.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        reason += ": the target is not writable"
    return OutputError(path, f"cannot write ({reason}){'; ' + kept if kept else ''}")


def check_output_path(path):
    """An output file we can create: its directory exists and it is not a directory."""
    path = Path(path)
    if not path.parent.is_dir():
        raise OutputError(path, "output directory does not exist")
    if path.is_dir():
        raise OutputError(path, "is a directory, expected an output file name")


def open_locked(path, final, busy=None):
    """Open ``path`` (read/write, created, NOT truncated) and take the exclusive lock on it
    before anything else touches it; returns the file descriptor.  ``busy``: the message
    when another process holds the lock (default: another process is writing ``final``)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as err:
        raise write_failure(path, err) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise OutputBusyError(final, busy or f"another process is writing it ({Path(path).name} "
                              "is locked); wait for it to finish or choose another output file"
                              ) from None
    except OSError:  # a filesystem without flock (some network mounts): go on unlocked
        pass
    return fd


def _write_all(fd, data):
    """``os.write`` until all of ``data`` is out (a write may be partial near a full disk)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _fsync_dir(path):
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
        raise OutputError(path, f"cannot rename {Path(partial).name} to it "
                          f"({err.strerror or err}); the complete output is in {partial}") from None
    _fsync_dir(path)


@contextlib.contextmanager
def atomic_output(path, binary=False):
    """Yield a file writing ``PATH.partial`` (locked), renamed to ``PATH`` once the body
    finished and the data is on disk.  On any failure ``PATH.partial`` is removed, an
    ``OSError`` becomes :class:`OutputError`, and ``PATH`` is left as it was."""
    path = Path(path)
    check_output_path(path)
    partial = partial_path(path)
    fd = open_locked(partial, path)
    untouched = f"{path} is left as it was"
    try:
        text = {} if binary else {"encoding": "utf-8", "newline": "\n"}
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
def signals_held():
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


def write_together(writers, kept):
    """Several binary files replaced together (a training checkpoint: model, state, timings).

    ``writers``: ``[(path, write)]``, ``write(f)`` writing one file.  Every ``PATH.partial``
    is locked before any is written; only when every file is written and on disk are they
    renamed, in the order given, with SIGINT/SIGTERM held back so that an interruption cannot
    split the renames.  On any failure every partial file is removed, nothing is renamed,
    and the :class:`OutputError` ends with ``kept`` (what the caller leaves as it was)."""
    paths = [Path(p) for p, _ in writers]
    for path in paths:
        check_output_path(path)
    partials = [partial_path(p) for p in paths]
    fds = []
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
            for i, (partial, path) in enumerate(zip(partials, paths)):
                try:
                    os.replace(partial, path)
                except OSError as err:
                    done = ", ".join(str(p) for p in paths[:i]) or "nothing"
                    raise OutputError(path, f"cannot rename {partial.name} to it "
                                      f"({err.strerror or err}); already replaced: {done}") from None
            _fsync_dir(paths[0])
    except BaseException:
        for partial in partials[:len(fds)]:  # only the partial files this process locked
            with contextlib.suppress(OSError):
                os.unlink(partial)
        raise
    finally:
        for fd in fds:
            os.close(fd)


@contextlib.contextmanager
def run_lock(path, busy):
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


def atomic_write_text(path, text):
    """``path`` holds ``text`` (UTF-8) completely or is left as it was."""
    with atomic_output(path) as f:
        f.write(text)


def atomic_write_bytes(path, data):
    """``path`` holds ``data`` completely or is left as it was."""
    with atomic_output(path, binary=True) as f:
        f.write(data)


class Journal:
    """``PATH.partial`` + ``PATH.partial.journal``; see the module docstring."""

    def __init__(self, path, resume=False, keep=None):
        """``keep(records) -> n`` may cut the kept prefix further (e.g. to a batch boundary)."""
        self.path = Path(path)
        self.partial = partial_path(self.path)
        self.journal = self.path.with_name(self.path.name + ".partial.journal")
        check_output_path(self.path)
        # the lock comes first: a second process must not even truncate the first one's files
        self._out = open_locked(self.partial, self.path)
        self._rec = None
        try:
            self._rec = os.open(self.journal, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
            lines = _complete_lines(self.partial) if resume else []
            records = _complete_lines(self.journal) if resume else []
            n = min(len(lines), len(records))
            if keep is not None and n:
                n = keep([r for r, _ in records[:n]])
            # cut both files after their n-th line: what follows is incomplete or unmatched
            os.ftruncate(self._out, sum(size for _, size in lines[:n]))
            os.ftruncate(self._rec, sum(size for _, size in records[:n]))
            os.lseek(self._out, 0, os.SEEK_END)
            os.lseek(self._rec, 0, os.SEEK_END)
        except OSError as err:
            self._close()
            raise write_failure(self.journal if self._rec is None else self.partial, err) from None
        except BaseException:
            self._close()
            raise
        self.done_lines = [line for line, _ in lines[:n]]
        self.done_records = [record for record, _ in records[:n]]
        self.count = n

    def _kept(self):
        return (f"the {self.count} complete lines written so far and the journal are kept: "
                "free space (or make the target writable) and rerun the command with --resume")

    def append(self, line, record=""):
        """Write one result line and its record (through to the OS, not fsynced)."""
        try:
            _write_all(self._out, (line + "\n").encode("utf-8"))
        except OSError as err:
            raise write_failure(self.partial, err, self._kept()) from None
        try:
            _write_all(self._rec, (record + "\n").encode("utf-8"))
        except OSError as err:
            raise write_failure(self.journal, err, self._kept()) from None
        self.count += 1

    def flush(self):
        """Nothing to do: every line is written through as it comes (kept for callers)."""

    def commit(self):
        """The output is complete: ``PATH.partial`` becomes ``PATH``, the journal goes.  The
        journal is removed first, so a process that takes the freed name next never loses
        its own journal to this one."""
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

    def close_unfinished(self):
        """Leave the partial files for ``--resume`` (interrupted or failed run)."""
        self._close()

    def _close(self):
        for fd in (self._out, self._rec):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._out = self._rec = None


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
        raise LegacyInputError(path, f"not UTF-8 ({err.reason}): not a file this program wrote; "
                               "remove it or run without --resume") from None


class Progress:
    """A progress bar (tqdm) on stderr: ``35/40 [00:02<00:00, 16.5 sent/s]``.

    Shown when stderr is a terminal, or always with ``enabled=True``.  While it is shown,
    log records go through tqdm (``logging_redirect_tqdm``), which clears the bar, prints
    the record on its own line and redraws the bar below it.
    """

    def __init__(self, total, unit="sent", enabled=None, stream=None):
        self.total, self.unit = total, unit
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.start = time.monotonic()
        self.count = 0
        self._bar = self._redirect = None
        if self.enabled:
            from tqdm import tqdm
            from tqdm.contrib.logging import logging_redirect_tqdm
            self._bar = tqdm(total=total or None, unit=f" {unit}", file=self.stream,
                             mininterval=0.5, dynamic_ncols=True)
            self._redirect = logging_redirect_tqdm(tqdm_class=tqdm)
            self._redirect.__enter__()

    def update(self, n=1):
        self.count += n
        if self._bar is not None:
            self._bar.update(n)

    def rate(self):
        elapsed = time.monotonic() - self.start
        return self.count / elapsed if elapsed > 0 else 0.0

    def close(self):
        """Leave the final bar on screen and give logging its handlers back (idempotent)."""
        if self._bar is not None:
            self._bar.close()
            self._redirect.__exit__(None, None, None)
            self._bar = self._redirect = None
