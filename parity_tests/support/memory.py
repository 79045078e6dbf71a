"""What a call holds, for the tests that bound a reader's memory: the peak of Python's
allocations while it runs (``tracemalloc``: numpy's buffers included, torch's not), and the
peak resident memory of a worker process running it (:func:`worker_peak`: the child's
``ru_maxrss`` less its resident size at the start, as ``archive`` measures each
experiment's worker, :mod:`groundhog_port.contained`)."""

import tracemalloc

from groundhog_port import contained


def peak(fn):
    """``(fn(), peak bytes allocated while it ran)``."""
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def worker_peak(fn, memory_mib=1024, cpu_seconds=120):
    """``(fn(), peak bytes, CPU seconds)`` with ``fn`` run in a contained worker (its value
    must pickle; an exception it raises is raised here) under ``memory_mib`` of address
    space and ``cpu_seconds``; a breach fails the caller's test with its text."""
    out = contained.run(fn, limits=contained.Limits(memory_mib=memory_mib, cpu_seconds=cpu_seconds))
    assert out.breach is None, out.breach.text()
    return out.value, int((out.peak_mib or 0.0) * 2**20), out.cpu_s
