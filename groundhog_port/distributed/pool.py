"""Worker processes on one machine (``--workers N``): parallelism that survives a shared CPU.

A torch operation with several threads waits for all of them, so a process of two threads
on a machine where one core is busy waits for that core at every step (issue 54: 4 to 30
times slower than alone).  Here the parallelism is between whole units of work instead:
the model is loaded once, the process forks ``N`` workers of ONE torch thread each (the
weights are shared copy-on-write, never copied), the units are dealt out as workers come
free (on a long input a worker on a busy core takes fewer units) and their outputs
come back, and are written, in input order -- byte-identical to one worker, since a unit's
lines do not depend on which process computed them (the batched search returns the
literal search's numbers for any batch composition).

``--workers auto`` is the number of cores *free* when the command starts
(:class:`FreeCores`: the CPU time of the whole machine over the first moments of the run,
less this process's own), not the number present.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from ..errors import LegacyInputError

logger = logging.getLogger(__name__)

#: the unit function of the running pool, set before the fork (inherited, never pickled)
_COMPUTE: Callable[[Any], Any] | None = None


def cores_present() -> int:
    """The cores this process may run on (its CPU affinity)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def _machine_busy_s() -> float | None:
    """Seconds of CPU time the machine's cores have spent busy since boot (``/proc/stat``:
    user, nice, system, irq, softirq, steal); ``None`` where there is no such file."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return None
    ticks = [int(v) for v in fields[1:9]]
    busy = ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6] + ticks[7]
    return busy / os.sysconf("SC_CLK_TCK")


class FreeCores:
    """How many cores no other process is using: started when the command starts, read
    before the model loads (``translate``: ``import torch`` in between is the sample) or
    after (``score``).

    ``free = present - round((machine busy - this process's CPU) / elapsed)``, at least 1.
    Without ``/proc/stat`` (not Linux) it says the cores present."""

    def __init__(self) -> None:
        self._t0 = time.monotonic()
        self._busy0 = _machine_busy_s()
        self._own0 = time.process_time()

    def count(self, min_sample_s: float = 0.25) -> int:
        present = cores_present()
        if self._busy0 is None:
            return present
        elapsed = time.monotonic() - self._t0
        if elapsed < min_sample_s:  # too short to tell: sample a little longer
            time.sleep(min_sample_s - elapsed)
            elapsed = time.monotonic() - self._t0
        busy1 = _machine_busy_s()
        assert busy1 is not None
        others = (busy1 - self._busy0) - (time.process_time() - self._own0)
        used = max(0, round(others / elapsed))
        return max(1, present - used)


def workers(asked: int | str, free: FreeCores | None) -> int:
    """``--workers``: the number asked, or with ``auto`` the cores ``free`` counts (said in
    the log).  The runners cap it at the units of work there are."""
    if asked != "auto":
        return int(asked)
    n = (free or FreeCores()).count()
    logger.info("--workers auto: %d of %d cores free", n, cores_present())
    return n


def _start_worker(parent: int) -> None:
    """A worker's set-up: one torch thread, and death with its parent.

    A parent killed outright (``kill -9``, the OOM killer) cannot stop its workers, which
    would run their units to the end and then wait for more forever, holding the
    command's stdout and stderr open (a caller reading them to the end hangs): Linux's
    ``PR_SET_PDEATHSIG`` sends each worker SIGKILL when its parent dies, and a worker whose
    parent died before that was set ends at once."""
    import torch

    torch.set_num_threads(1)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the workers outlive a killed parent
        return
    if os.getppid() != parent:
        os._exit(1)


#: prctl(2)'s option: the signal this process gets when its parent dies (Linux)
PR_SET_PDEATHSIG = 1


def _call(unit: Any) -> Any:
    assert _COMPUTE is not None  # set by imap_in_workers before the fork
    return _COMPUTE(unit)


class WorkerLost(LegacyInputError):
    """A worker process died (killed, out of memory) with units of work unfinished."""

    def __init__(self, problem: str) -> None:
        super().__init__(None, problem)


def imap_in_workers(n: int, compute: Callable[[Any], Any], units: Sequence[Any]) -> Iterator[Any]:
    """``compute(unit)`` for every unit in ``n`` forked worker processes of one torch
    thread each, yielded in the order of ``units``.  A worker's exception is raised here; a
    worker that dies is :class:`WorkerLost` (``ProcessPoolExecutor`` sees a dead worker, where
    ``multiprocessing.Pool`` would wait for its unit forever); leaving the iteration early
    (or an interrupt) stops the workers at once."""
    global _COMPUTE
    _COMPUTE = compute
    others = {p.pid for p in multiprocessing.active_children()}
    executor = ProcessPoolExecutor(
        n,
        mp_context=multiprocessing.get_context("fork"),
        initializer=_start_worker,
        initargs=(os.getpid(),),
    )
    finished = False
    try:
        yield from executor.map(_call, units)
        finished = True
    except BrokenProcessPool:
        raise WorkerLost(
            f"a worker process died before its work was done (killed, or out of memory?): "
            f"the output is incomplete; rerun the same command (with --resume where it has "
            f"one), perhaps with fewer --workers than {n}"
        ) from None
    finally:
        _COMPUTE = None
        mine = [p for p in multiprocessing.active_children() if p.pid not in others]
        executor.shutdown(wait=finished, cancel_futures=True)
        if not finished:  # units still running: stopped, not waited for
            for p in mine:
                p.kill()
            for p in mine:
                p.join()
