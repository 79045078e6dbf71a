"""Containment: one piece of work run in a child process under a memory and a CPU-time limit,
so that a runaway parser or a bomb the bounds before parsing missed stops that piece only
(issue 51 item 2).  ``archive`` runs each experiment's re-doing this way
(:func:`groundhog_port.tasks.archive.pipeline.redo_tree`).

How (POSIX, with ``os.fork`` and ``resource``):

- the child is forked, so it starts with everything the run has learnt (and the tests'
  monkeypatches); it sends its value back pickled through a pipe and leaves with
  ``os._exit`` (nothing of the parent's is flushed or closed twice);
- **memory**: ``RLIMIT_AS``, the address space the child held when it began plus
  :attr:`Limits.memory_mib` -- an allocation past it fails (``MemoryError``, or torch's
  allocator error, or a C library's abort), and the child reports the breach.  It bounds
  address space, not resident memory: what the child held mapped but not resident at its
  start (heap freed by the parent, library reservations) can become resident without
  growing it, so the resident peak may pass the limit by that much
  (:attr:`Outcome.unresident_mib`); where ``/proc`` does not give the address space, no
  memory limit is set;
- **CPU time**: ``RLIMIT_CPU`` (a forked child starts at zero), all its threads together:
  ``SIGXCPU`` at the limit, ``SIGKILL`` ten seconds later; no core file is written;
- **where**: the child writes the stage it is in and the last untrusted file it opened or
  parsed (:func:`stage`, :func:`reading`: the readers of :mod:`groundhog_port.untrusted`,
  the pickle, ``.npz`` and HDF5 loaders call it) on a page shared with the parent, which
  names them when the child is stopped;
- **peak memory**: the child's ``ru_maxrss`` (``wait4``) less its resident size at the
  start (a forked child starts with the parent's pages resident).

A parent that has run OpenMP work (torch's thread pool, MKL's) cannot hand it to a forked
child: GNU libgomp's pool is not fork-safe, and the child's first parallel region waits for
threads that do not exist.  Such a parent is seen by its threads (native threads beyond
Python's own) and the child then runs with one thread (:attr:`Outcome.single_threaded`,
``on_threaded_parent``).  ``archive``'s own process never runs torch before its children, so
there the children have every thread.

Where fork or ``resource`` is missing, the work runs in this process, unlimited, and
:attr:`Outcome.contained` is ``False`` for the caller to say so.  No limit on wall-clock
time: a read that blocks (a FIFO) is refused by type before it is opened
(:func:`groundhog_port.untrusted.open_input`).
"""

from __future__ import annotations

import mmap
import os
import pickle
import signal
import struct
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: default address space a contained piece of work may add (MiB): a real GroundHog
#: experiment (RNNsearch-50, 30,000 words: a ~350 MB model) loads and translates within
#: about 1.5 GiB, and a glibc malloc arena reserves 64 MiB of address space per thread
DEFAULT_MEMORY_MIB = 4096
#: default CPU time (minutes, all threads together) of one contained piece of work:
#: re-translating a full WMT test set several times on CPU fits; a runaway parser does not
DEFAULT_CPU_MINUTES = 240
#: seconds between ``SIGXCPU`` (the soft limit) and ``SIGKILL`` (the hard one)
_GRACE_S = 10

# the shared page: [0:8] the child's resident bytes at its start, [8:16] its address space
# then; then two fields, each a 4-byte length and UTF-8 bytes (surrogateescape): the stage,
# the file
_PAGE = 8192
_STAGE, _STAGE_MAX = 16, 1024
_FILE, _FILE_MAX = 16 + 4 + 1024, _PAGE - (16 + 4 + 1024) - 4
_board: mmap.mmap | None = None
_limits: Limits | None = None  # in a contained worker: its limits


@dataclass(frozen=True)
class Limits:
    """What one contained piece of work may use (``None``: no limit)."""

    memory_mib: int | None = DEFAULT_MEMORY_MIB
    cpu_seconds: int | None = DEFAULT_CPU_MINUTES * 60
    #: the flags that set them, for the breach's line to name
    memory_flag: str = "--max-memory-mib"
    cpu_flag: str = "--max-cpu-minutes"


#: the limits when none are given
DEFAULT_LIMITS = Limits()


@dataclass
class Breach:
    """Why a contained piece of work stopped before its end."""

    limit: str  # "memory", "cpu", "signal" or "exit"
    detail: str  # what happened, one clause ("went past the memory limit of 4096 MiB ...")
    stage: str | None  # the stage it was in, as the work named it
    file: str | None  # the last untrusted file it opened or parsed

    def text(self) -> str:
        where = []
        if self.file:
            where.append(f"while reading {self.file}")
        if self.stage:
            where.append(f"in {self.stage!r}")
        return self.detail + (f" ({', '.join(where)})" if where else "")


@dataclass
class Outcome:
    """What came of one contained piece of work: its value, or the breach that stopped it."""

    value: Any = None
    breach: Breach | None = None
    peak_mib: float | None = None  # the child's peak resident memory above its start
    #: address space the child held but had not resident at its start (freed heap, library
    #: reservations): it may become resident without growing the address space, so the
    #: peak may pass the memory limit by this much
    unresident_mib: float | None = None
    cpu_s: float | None = None  # its CPU time, user + system
    contained: bool = True  # False: run in this process (no fork or no resource)
    single_threaded: bool = False  # the parent had a native thread pool (see the module)


# ----------------------------------------------------------------------------------------
# marks: what the child is doing, for the parent to name
# ----------------------------------------------------------------------------------------
def _put(offset: int, most: int, text: str) -> None:
    if _board is None:
        return
    data = text.encode("utf-8", "surrogateescape")[:most]
    _board[offset : offset + 4 + len(data)] = struct.pack("<I", len(data)) + data


def _get(board: mmap.mmap, offset: int) -> str | None:
    (n,) = struct.unpack_from("<I", board, offset)
    return board[offset + 4 : offset + 4 + n].decode("utf-8", "replace") if n else None


def stage(name: str) -> None:
    """Mark the stage the contained work is in (nothing outside a contained child)."""
    _put(_STAGE, _STAGE_MAX, name)


def reading(path: str | os.PathLike | None) -> None:
    """Mark ``path`` as the untrusted file being opened or parsed (nothing outside a
    contained child)."""
    _put(_FILE, _FILE_MAX, os.fsdecode(os.fspath(path)) if path is not None else "")


def memory_said(detail: str) -> str:
    """What running out of memory is, in one clause: the worker's limit and its flag where
    this is a contained worker with one (``detail``: the allocator's message)."""
    return _memory_said(_limits or Limits(memory_mib=None), detail)


def out_of_memory(err: BaseException) -> bool:
    """``err`` says an allocation was refused: ``MemoryError`` (numpy's among them), or the
    ``RuntimeError`` torch's CPU allocator raises."""
    if isinstance(err, MemoryError):
        return True
    text = str(err)
    return isinstance(err, RuntimeError) and (
        "DefaultCPUAllocator" in text or "can't allocate memory" in text
    )


# ----------------------------------------------------------------------------------------
# running
# ----------------------------------------------------------------------------------------
def available() -> bool:
    """Whether work can be contained here (``os.fork`` and ``resource``)."""
    try:
        import resource  # noqa: F401
    except ImportError:
        return False
    return hasattr(os, "fork") and hasattr(os, "wait4")


def _native_threads() -> int:
    """Threads of this process that are not Python's (an OpenMP or MKL pool), where
    ``/proc`` tells; 0 where it cannot."""
    try:
        return max(0, len(os.listdir("/proc/self/task")) - threading.active_count())
    except OSError:
        return 0


def _resident_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _address_space() -> int:
    """This process's address space in bytes, 0 where ``/proc`` does not tell."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    except (OSError, StopIteration, ValueError):
        return 0


def run(
    fn: Callable[..., Any],
    *args: Any,
    limits: Limits = DEFAULT_LIMITS,
    on_threaded_parent: Callable[[], None] | None = None,
) -> Outcome:
    """``fn(*args)`` in a child process under ``limits``; its value must pickle.

    An exception ``fn`` raises is raised here again (a ``RuntimeError`` carrying its text
    where it does not pickle); a ``KeyboardInterrupt`` in the child, or here while the child
    runs, stops the child and is raised here.  ``on_threaded_parent``: called in the child
    when this process has a native thread pool (see the module: the child must not use it)."""
    if not available():
        return Outcome(value=fn(*args), contained=False)
    global _board, _limits
    board = mmap.mmap(-1, _PAGE)
    threaded = _native_threads() > 0
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # else what is buffered is written by both processes
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(r)
        _board, _limits = board, limits
        _child(w, fn, args, limits, on_threaded_parent if threaded else None)
    os.close(w)
    try:
        data = _read_all(r)
        _, status, usage = os.wait4(pid, 0)
    except BaseException:  # KeyboardInterrupt above all: the child goes with us
        _stop(pid)
        raise
    finally:
        os.close(r)
    started, space = struct.unpack_from("<QQ", board, 0)
    cpu_s = usage.ru_utime + usage.ru_stime
    out = Outcome(
        peak_mib=max(0.0, (usage.ru_maxrss * 1024 - started) / 2**20) if started else None,
        unresident_mib=max(0, space - started) / 2**20 if started and space else None,
        cpu_s=cpu_s,
        single_threaded=threaded,
    )
    message = _message(data)
    where = _get(board, _STAGE), _get(board, _FILE)
    board.close()
    if message is not None:
        kind, payload = message
        if kind == "value":
            out.value = payload
            return out
        if kind == "raise":
            raise payload
        out.breach = Breach("memory", _memory_said(limits, payload), *where)
        return out
    out.breach = _ended(status, cpu_s, limits, where)
    if out.breach is None:
        raise KeyboardInterrupt  # the child was interrupted (Ctrl-C reaches both of us)
    return out


def _read_all(fd: int) -> bytes:
    parts = []
    while chunk := os.read(fd, 1 << 16):
        parts.append(chunk)
    return b"".join(parts)


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def _message(data: bytes):
    if not data:
        return None
    try:
        return pickle.loads(data)  # noqa: S301 -- our own child's, through our own pipe
    except Exception:  # noqa: BLE001 -- cut short by a kill while it wrote
        return None


def _detail(err: BaseException) -> str:
    return " ".join(str(err).split())[:200] or type(err).__name__


def _memory_said(limits: Limits, detail: str) -> str:
    if not limits.memory_mib:
        return f"ran out of memory ({detail})"
    return (
        f"went past the memory limit of {limits.memory_mib} MiB of address space "
        f"({detail}); raise it with {limits.memory_flag} N (0: none) to re-do it"
    )


def _duration(seconds: int) -> str:
    return f"{seconds // 60} min" if seconds % 60 == 0 else f"{seconds} s"


def _ended(status: int, cpu_s: float, limits: Limits, where) -> Breach | None:
    """The breach of a child that ended without a message; ``None``: it was interrupted."""
    if os.WIFEXITED(status):
        code = os.WEXITSTATUS(status)
        if code == 130:
            return None
        return Breach("exit", f"its worker process ended with exit code {code}", *where)
    sig = os.WTERMSIG(status)
    if limits.cpu_seconds and (
        sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu_s >= limits.cpu_seconds)
    ):
        return Breach(
            "cpu",
            f"went past the CPU-time limit of {_duration(limits.cpu_seconds)} (all threads "
            f"together); raise it with {limits.cpu_flag} N (0: none) to re-do it",
            *where,
        )
    name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
    detail = f"its worker process was stopped by {name}"
    if sig == signal.SIGKILL:
        detail += " (by the system's out-of-memory killer, or by hand?)"
    elif limits.memory_mib and sig in (signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS):
        detail += (
            f" (under the memory limit of {limits.memory_mib} MiB a library may abort "
            f"when an allocation is refused: raise it with {limits.memory_flag} N)"
        )
    return Breach("signal", detail, *where)


def _child(w: int, fn, args, limits: Limits, single_thread) -> None:
    """The forked child: limits set, ``fn`` run, one message written; leaves by ``os._exit``."""
    code = 0
    try:
        import resource

        space = _address_space()
        struct.pack_into("<QQ", _board, 0, _resident_bytes(), space)  # type: ignore[arg-type]
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if limits.cpu_seconds:
            cpu = limits.cpu_seconds
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + _GRACE_S))
        if limits.memory_mib and space:  # (no /proc: no address space to start from)
            _, hard = resource.getrlimit(resource.RLIMIT_AS)
            cap = space + limits.memory_mib * 2**20
            if hard != resource.RLIM_INFINITY:
                cap = min(cap, hard)
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        if single_thread is not None:
            single_thread()
        try:
            message: tuple = ("value", fn(*args))
        except KeyboardInterrupt:
            raise
        except BaseException as err:  # noqa: BLE001 -- sent to the parent, raised there
            if out_of_memory(err):
                message = ("memory", _detail(err))
            else:
                message = ("raise", err)
        try:
            data = pickle.dumps(message)
        except Exception as err:  # noqa: BLE001 -- an exception or value that does not pickle
            what = repr(message[1])
            what = what if len(what) <= 300 else what[:297] + "..."
            data = pickle.dumps(("raise", RuntimeError(f"{what} did not pickle ({err})")))
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        _write_all(w, data)
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # noqa: BLE001 -- nothing may return into the parent's code
        code = 1
    finally:
        os._exit(code)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
