"""Training curves from ``*_timing.npz``, as ``experiments/nmt/analysis.py`` drew them.

``load_timings`` (analysis.py:8-17): the first ``step`` values of one key (default
``log2_p_expl``; the original's default ``cost2_p_expl`` is not a key GroundHog ever wrote),
a rolling mean over ``window`` updates with the first ``window`` points dropped, against
iterations or hours (``median(time_step of the last window updates) / 3600`` per update);
``show_timings`` (:19-28) one line per experiment, "iterations"/"hours" on x, a legend, and
the line "Average <y> is <v> after <n> iterations for <name>".

Where the original misled, the port says what it shows:

* the y axis names the quantity (analysis.py wrote "log_2 likelihood" whatever ``y``):
  GroundHog's ``cost`` is the batch's summed natural-log negative log-likelihood,
  ``log2_p_word`` / ``log2_p_expl`` the same in bits per word / per sentence
  (LM_model.py:127-138, :mod:`groundhog_port.training.cost`);
* only the ``step`` updates that ran count (the arrays are preallocated for ``loopIters``),
  and ``<n>`` is their number;
* non-finite values (a run that met NaN costs: ``search_variant`` from update 4087) are
  left out of the rolling mean, which then covers the last ``window`` finite values, and
  the line says how many were left out (pandas' rolling mean turned every window holding
  one into NaN, and the curve stopped there).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import LegacyInputError
from ..outputs import atomic_output
from ..training.files import load_timings
from .plots import DPI, FORMATS, require_matplotlib

#: y-axis titles of the keys GroundHog's MainLoop records (mainLoop.py:129-147)
Y_LABELS = {
    "cost": "cost: -ln p of the batch's words, summed (nats)",
    "log2_p_word": "-log2 p per target word (bits)",
    "log2_p_expl": "-log2 p per sentence (bits)",
    "grad_norm": "gradient norm (before clipping)",
    "time_step": "seconds per update",
}


@dataclass
class Curve:
    x: np.ndarray  # update index (0-based) or hours
    mean: np.ndarray  # rolling mean over ``window`` finite values
    updates: int  # updates that ran and are shown (start .. min(step, finish))
    dropped: np.ndarray  # update indices whose value was not finite


def curve(
    path: str | os.PathLike[str],
    y: str = "log2_p_expl",
    start: int = 0,
    finish: int = 3000000,
    window: int = 100,
    hours: bool = False,
) -> Curve:
    """The rolling mean of ``y`` over the updates that ran (non-finite values left out)."""
    tm = load_timings(path, required=("time_step",) if hours else ())
    if y not in tm:
        keys = ", ".join(k for k in tm if np.ndim(tm[k]) == 1)
        raise LegacyInputError(path, f"no {y!r} in the timing file (keys: {keys})")
    if window < 1:
        raise LegacyInputError(None, "--window must be at least 1")
    n = min(int(tm["step"]), finish)
    values = np.asarray(tm[y][start:n], dtype=np.float64)
    idx = np.arange(start, start + values.size)
    finite = np.isfinite(values)
    values, kept = values[finite], idx[finite]
    if values.size <= window:
        raise LegacyInputError(
            path,
            f"{values.size} finite values of {y} recorded: not more "
            f"than the rolling window of {window}",
        )
    csum = np.cumsum(np.insert(values, 0, 0.0))
    mean = (csum[window:] - csum[:-window]) / window  # mean of values[i-window+1 .. i]
    x: np.ndarray = kept[window - 1 :]  # update indices, or hours below
    mean, x = mean[1:], x[1:]  # pandas' .iloc[window:]
    if hours:
        time_step = np.asarray(tm["time_step"][start:n], dtype=np.float64)
        one_step = float(np.median(time_step[-window:])) / 3600.0
        x = (x - start) * one_step
    return Curve(x.astype(np.float64), mean, idx.size, idx[~finite])


def summary(y: str, c: Curve, name: str, hours: bool) -> str:
    """analysis.py's "Average ..." line, with the updates counted and what was left out."""
    line = (
        f"Average {y} is {c.mean[-1]} after "
        + (f"{c.x[-1]:g} hours" if hours else f"{c.updates} iterations")
        + f" for {name}"
    )
    if c.dropped.size:
        line += (
            f" ({c.dropped.size} non-finite values of {y} left out, the first at "
            f"iteration {c.dropped[0]})"
        )
    return line


def plot(
    paths: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    labels: Sequence[str] | None = None,
    y: str = "log2_p_expl",
    hours: bool = False,
    fmt: str | None = None,
    dpi: int = DPI,
    **kw: int,  # curve's start, finish, window
) -> list[str]:
    """One picture with a curve per timing file; returns the "Average ..." lines.

    ``fmt``: one of :data:`groundhog_port.tasks.plots.FORMATS`, by default the suffix of ``out``."""
    Figure, Canvas = require_matplotlib()
    labels = labels or [Path(p).name for p in paths]
    if len(labels) != len(paths):
        raise LegacyInputError(None, f"{len(labels)} labels for {len(paths)} timing files")
    suffix = Path(out).suffix[1:].lower()
    fmt = fmt or suffix or "png"
    if fmt not in FORMATS:
        raise LegacyInputError(out, f"cannot draw a .{fmt} file (formats: {', '.join(FORMATS)})")
    if suffix and suffix != fmt:
        raise LegacyInputError(out, f"the name says .{suffix}, --format says {fmt}")
    fig = Figure(figsize=(8, 5))
    Canvas(fig)
    ax = fig.add_subplot(1, 1, 1)
    lines = []
    for path, name in zip(paths, labels):
        c = curve(path, y=y, hours=hours, **kw)
        ax.plot(c.x, c.mean)
        lines.append(summary(y, c, name, hours))
    ax.set_xlabel("hours" if hours else "iterations (updates)")
    ax.set_ylabel(f"{Y_LABELS.get(y, y)}, rolling mean of {kw.get('window', 100)}")
    for text in ax.legend(labels, loc="best").get_texts():
        text.set_parse_math(False)  # file names are text: "$\\x$" is no mathtext (issue 40)
    with atomic_output(out, binary=True) as f:  # never a truncated picture
        fig.savefig(f, format=fmt, dpi=dpi)
    return lines
