"""What a call holds: the peak of Python's allocations while it runs (``tracemalloc``),
for the tests that bound a reader's memory."""

import tracemalloc


def peak(fn):
    """``(fn(), peak bytes allocated while it ran)``."""
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
