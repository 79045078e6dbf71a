"""Training curves from ``*_timing.npz``, as ``experiments/nmt/analysis.py`` drew them.

``load_timings`` (analysis.py:8-17): the first ``step`` values of one key (default
``log2_p_expl``; the original's default ``cost2_p_expl`` is not a key GroundHog ever wrote),
a rolling mean over ``window`` updates with the first ``window`` points dropped, against
iterations or hours (``median(time_step of the last window updates) / 3600`` per update);
``show_timings`` (:19-28) one line per experiment, "iterations"/"hours" on x, "log_2
likelihood" on y, a legend, and the line "Average <y> is <v> after <n> iterations for <name>".
"""
from pathlib import Path

import numpy as np

from ..errors import LegacyInputError
from ..outputs import atomic_output
from ..plots import require_matplotlib
from .files import load_timings


def curve(path, y="log2_p_expl", start=0, finish=3000000, window=100, hours=False):
    """``(x, values)`` of one timing file (rolling mean, first ``window`` points dropped)."""
    tm = load_timings(path)
    if y not in tm:
        keys = ", ".join(k for k in tm if np.ndim(tm[k]) == 1)
        raise LegacyInputError(path, f"no {y!r} in the timing file (keys: {keys})")
    n = min(int(tm["step"]), finish)
    values = np.asarray(tm[y][start:n], dtype=np.float64)
    if window < 1:
        raise LegacyInputError(None, "--window must be at least 1")
    if values.size <= window:
        raise LegacyInputError(path, f"{values.size} updates recorded: not more than the rolling "
                                     f"window of {window}")
    csum = np.cumsum(np.insert(values, 0, 0.0))
    mean = (csum[window:] - csum[:-window]) / window     # mean of values[i-window+1 .. i]
    idx = np.arange(start + window - 1, start + values.size)
    mean, idx = mean[1:], idx[1:]                        # pandas' .iloc[window:]
    if hours:
        one_step = float(np.median(tm["time_step"][start:n][-window:])) / 3600.0
        return (idx - start) * one_step, mean
    return idx.astype(np.float64), mean


def plot(paths, out, labels=None, y="log2_p_expl", hours=False, **kw):
    """One PNG with a curve per timing file; returns the "Average ..." lines."""
    Figure, Canvas = require_matplotlib()
    labels = labels or [Path(p).name for p in paths]
    if len(labels) != len(paths):
        raise LegacyInputError(None, f"{len(labels)} labels for {len(paths)} timing files")
    fig = Figure(figsize=(8, 5))
    Canvas(fig)
    ax = fig.add_subplot(1, 1, 1)
    lines = []
    for path, name in zip(paths, labels):
        x, v = curve(path, y=y, hours=hours, **kw)
        ax.plot(x, v)
        lines.append(f"Average {y} is {v[-1]} after {x[-1]:g} {'hours' if hours else 'iterations'} "
                     f"for {name}")
    ax.set_xlabel("hours" if hours else "iterations")
    ax.set_ylabel("log_2 likelihood")
    ax.legend(labels, loc="best")
    fmt = Path(out).suffix[1:].lower() or "png"
    known = fig.canvas.get_supported_filetypes()
    if fmt not in known:
        raise LegacyInputError(out, f"cannot draw a .{fmt} file (formats: {', '.join(sorted(known))})")
    with atomic_output(out, binary=True) as f:  # never a truncated picture
        fig.savefig(f, format=fmt, dpi=100)
    return lines
