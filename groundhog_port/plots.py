"""Attention heatmaps as Figure 3 of Bahdanau et al. (2015).

One PNG per sentence pair: the weights ``alpha[t, j]`` of target word ``t`` (rows, top to
bottom) over source position ``j`` (columns, left to right, ``<eos>`` included on both
sides), in grayscale with 0 black and 1 white, source words written across the top.
Each cell is a square of the same size in every picture, so a picture's shape follows the
pair's lengths.

matplotlib is an optional extra (``pip install groundhog-port[plot]``); only its
object-oriented API is used (``Figure`` + the Agg canvas), so the caller's pyplot state
and backend are left alone.
"""
from pathlib import Path

import numpy as np

from .errors import LegacyInputError
from .outputs import atomic_output

#: inches per heatmap cell; per label character (9 pt) and around the labels
CELL_INCHES = 0.3
CHAR_INCHES = 0.075
MARGIN_INCHES = 0.15
DPI = 100
#: words longer than this are shortened in the labels (the heatmap is unchanged)
MAX_LABEL_CHARS = 20


def require_matplotlib():
    """Import matplotlib's Figure and Agg canvas, or explain how to install it."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:
        raise LegacyInputError(None, f"attention plots need matplotlib ({err}); install it with "
                               "`pip install groundhog-port[plot]` (or `pip install matplotlib`)"
                               ) from None
    return Figure, FigureCanvasAgg


def _label(word):
    return word if len(word) <= MAX_LABEL_CHARS else word[:MAX_LABEL_CHARS - 1] + "\u2026"


def plot_alignment(alignment, src_words, trg_words, path, title=None):
    """Write the heatmap of ``alignment`` (``(T, S)``, rows sum to 1) to ``path`` (PNG).

    ``src_words`` / ``trg_words``: the ``S`` column and ``T`` row labels (``<eos>``
    included).  Returns the path.
    """
    Figure, FigureCanvasAgg = require_matplotlib()
    a = np.asarray(alignment, dtype=np.float64)
    if a.ndim != 2 or a.shape != (len(trg_words), len(src_words)):
        raise ValueError(f"alignment of shape {a.shape} for {len(trg_words)} target and "
                         f"{len(src_words)} source words")
    rows, cols = a.shape
    src_labels = [_label(w) for w in src_words]
    trg_labels = [_label(w) for w in trg_words]
    # label bands as wide as the longest word; square cells
    left = 2 * MARGIN_INCHES + CHAR_INCHES * max(map(len, trg_labels))
    top = 2 * MARGIN_INCHES + CHAR_INCHES * max(map(len, src_labels)) + (0.3 if title else 0.0)
    width = left + cols * CELL_INCHES + MARGIN_INCHES
    height = top + rows * CELL_INCHES + MARGIN_INCHES
    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_axes([left / width, MARGIN_INCHES / height,
                       cols * CELL_INCHES / width, rows * CELL_INCHES / height])
    ax.imshow(a, cmap="gray", vmin=0.0, vmax=1.0, interpolation="nearest", aspect="auto")
    ax.xaxis.tick_top()
    ax.set_xticks(range(cols))
    ax.set_xticklabels(src_labels, rotation=90, fontsize=9)
    ax.set_yticks(range(rows))
    ax.set_yticklabels(trg_labels, fontsize=9)
    ax.tick_params(length=0)
    if title:
        fig.suptitle(title, fontsize=9, y=1 - 0.1 / height, va="top")
    path = Path(path)
    with atomic_output(path, binary=True) as f:  # never a truncated picture
        fig.savefig(f, format="png", dpi=DPI)
    return path


def plot_file_name(index, total):
    """``align_0007.png`` for pair 7 (1-based) of ``total``: zero padded to sort in order."""
    return f"align_{index:0{max(4, len(str(total)))}d}.png"
