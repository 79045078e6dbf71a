"""Attention heatmaps as Figure 3 of Bahdanau et al. (2015).

One picture per sentence pair (PNG, PDF or SVG, at a chosen dpi): the weights
``alpha[t, j]`` of target word ``t`` of the scored pair -- the reference's words, labelled
so (rows, top to bottom) -- over source position ``j``
(columns, left to right, ``<eos>`` included on both sides), in grayscale with 0 black and 1
white, source words written across the top; axis titles and a colour bar of the weights.
Each cell is a square of the same size in every picture, so a picture's shape follows the
pair's lengths.

matplotlib is an optional extra (``pip install -e ".[plot]"`` from a checkout); only its
object-oriented API is used (``Figure`` + the Agg canvas), so the caller's pyplot state
and backend are left alone.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from ..errors import LegacyInputError
from ..outputs import atomic_output

if TYPE_CHECKING:  # matplotlib is optional (the plot extra): imported where used
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

logger = logging.getLogger(__name__)

#: inches per heatmap cell; per label character (9 pt) and around the labels
CELL_INCHES = 0.3
CHAR_INCHES = 0.075
MARGIN_INCHES = 0.15
DPI = 100
#: the colour bar and its ticks, right of the heatmap; an axis title's band
COLORBAR_INCHES = 0.15
COLORBAR_BAND_INCHES = 0.75
AXIS_TITLE_INCHES = 0.25
#: picture formats (matplotlib writes them without extra dependencies)
FORMATS = ("png", "pdf", "svg")
#: words longer than this are shortened in the labels (the heatmap is unchanged)
MAX_LABEL_CHARS = 20
#: words drawn per side of a plot: a figure is sized by its words (a 200 x 200 heatmap with
#: its ticks took some 1.5 GiB in matplotlib); longer sentences are drawn cut, with a warning
MAX_PLOT_WORDS = 100
#: words of a grConv tree drawn (its nodes and edges grow with the square: 50 words take
#: some 8 s to draw on the project's 2-core machine, 2026-12-03)
MAX_TREE_WORDS = 50


def require_matplotlib() -> tuple[type[Figure], type[FigureCanvasAgg]]:
    """Import matplotlib's Figure and Agg canvas, or explain how to install it."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:
        raise LegacyInputError(
            None,
            f"plots need matplotlib ({err}); install it with "
            '`pip install matplotlib` (from a checkout: `pip install -e ".[plot]"`)',
        ) from None
    return Figure, FigureCanvasAgg


def _label(word):
    return word if len(word) <= MAX_LABEL_CHARS else word[: MAX_LABEL_CHARS - 1] + "\u2026"


def plot_alignment(
    alignment: ArrayLike,
    src_words: Sequence[str],
    trg_words: Sequence[str],
    path: str | os.PathLike[str],
    title: str | None = None,
    fmt: str = "png",
    dpi: int = DPI,
) -> Path:
    """Write the heatmap of ``alignment`` (``(T, S)``, rows sum to 1) to ``path``.

    ``src_words`` / ``trg_words``: the ``S`` column and ``T`` row labels (``<eos>``
    included); ``fmt`` one of :data:`FORMATS`.  Returns the path.
    """
    Figure, FigureCanvasAgg = require_matplotlib()
    a = np.asarray(alignment, dtype=np.float64)
    if a.ndim != 2 or a.shape != (len(trg_words), len(src_words)):
        raise ValueError(
            f"alignment of shape {a.shape} for {len(trg_words)} target and "
            f"{len(src_words)} source words"
        )
    if max(a.shape) > MAX_PLOT_WORDS:
        logger.warning(
            "%s: %d target x %d source words: drawn for the first %d of each side (plots "
            "are capped at %d words a side)",
            path, a.shape[0], a.shape[1], MAX_PLOT_WORDS, MAX_PLOT_WORDS,
        )  # fmt: skip
        a = a[:MAX_PLOT_WORDS, :MAX_PLOT_WORDS]
        src_words, trg_words = src_words[:MAX_PLOT_WORDS], trg_words[:MAX_PLOT_WORDS]
    rows, cols = a.shape
    src_labels = [_label(w) for w in src_words]
    trg_labels = [_label(w) for w in trg_words]
    # label bands as wide as the longest word; square cells
    left = 2 * MARGIN_INCHES + AXIS_TITLE_INCHES + CHAR_INCHES * max(map(len, trg_labels))
    top = (
        2 * MARGIN_INCHES
        + AXIS_TITLE_INCHES
        + CHAR_INCHES * max(map(len, src_labels))
        + (0.3 if title else 0.0)
    )
    width = left + cols * CELL_INCHES + COLORBAR_BAND_INCHES
    height = top + rows * CELL_INCHES + MARGIN_INCHES
    fig = Figure(figsize=(width, height), dpi=dpi)
    FigureCanvasAgg(fig)
    box = [MARGIN_INCHES / height, rows * CELL_INCHES / height]  # bottom, height
    ax = fig.add_axes((left / width, box[0], cols * CELL_INCHES / width, box[1]))
    image = ax.imshow(a, cmap="gray", vmin=0.0, vmax=1.0, interpolation="nearest", aspect="auto")
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    ax.set_xticks(range(cols))
    # words are text, never mathtext: "$\\fakecmd$" would raise inside savefig (issue 40)
    ax.set_xticklabels(src_labels, rotation=90, fontsize=9, parse_math=False)
    ax.set_yticks(range(rows))
    ax.set_yticklabels(trg_labels, fontsize=9, parse_math=False)
    ax.tick_params(length=0)
    ax.set_xlabel("source words", fontsize=9)
    ax.set_ylabel("reference words", fontsize=9)  # both callers score a given target line
    bar = fig.add_axes(
        (
            (left + cols * CELL_INCHES + MARGIN_INCHES) / width,
            box[0],
            COLORBAR_INCHES / width,
            box[1],
        )
    )
    fig.colorbar(image, cax=bar).ax.tick_params(labelsize=7)
    bar.set_ylabel("attention weight", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=9, y=1 - 0.1 / height, va="top", parse_math=False)
    return _save(fig, path, fmt, dpi)


def _save(fig, path, fmt, dpi):
    if fmt not in FORMATS:
        raise LegacyInputError(
            None, f"picture format {fmt!r}: expected one of {', '.join(FORMATS)}"
        )
    path = Path(path)
    with atomic_output(path, binary=True) as f:  # never a truncated picture
        fig.savefig(f, format=fmt, dpi=dpi)
    return path


def plot_file_name(index: int, total: int, fmt: str = "png") -> str:
    """``align_0007.png`` for pair 7 (1-based) of ``total``: zero padded to sort in order."""
    return f"align_{index:0{max(4, len(str(total)))}d}.{fmt}"


def plot_grconv_tree(
    gates: ArrayLike,
    words: Sequence[str],
    path: str | os.PathLike[str],
    threshold: float = 0.1,
    title: str | None = None,
    fmt: str = "png",
    dpi: int = DPI,
) -> Path:
    """The grConv's gating tree of one sentence, drawn as ``experiments/nmt/tree.py`` does.

    ``gates (T-1, T, 3)`` from :func:`groundhog_port.model.encoder.grconv_gates`; ``words`` the
    ``T`` leaf labels (``<eos>`` included: the root the decoder reads covers it, where
    tree.py leaves that column out).  Node ``(k, t)`` (level ``k``, words ``t-k .. t``)
    sits above the middle of its words.  As in tree.py (:131-151), each node has a merge
    point ``m`` fed by both children with weight ``w_new`` and an aggregation ``+`` fed by
    ``m`` (``w_new``), the left child (``w_left``) and the right child (``w_right``); edges
    are drawn from white (0) to black (1), those at or below ``threshold`` are left out.
    """
    Figure, FigureCanvasAgg = require_matplotlib()
    g = np.asarray(gates, dtype=np.float64)
    T = len(words)
    if g.shape != (max(T - 1, 0), T, 3):
        raise ValueError(f"gates of shape {g.shape} for {T} words")
    if T > MAX_TREE_WORDS:
        logger.warning(
            "%s: a tree of %d words: drawn for the first %d (trees are capped at %d words)",
            path, T, MAX_TREE_WORDS, MAX_TREE_WORDS,
        )  # fmt: skip
        T, words, g = (
            MAX_TREE_WORDS,
            words[:MAX_TREE_WORDS],
            g[: MAX_TREE_WORDS - 1, :MAX_TREE_WORDS],
        )
    labels = [_label(w) for w in words]
    width = max(3.0, 0.9 * T + 1.0)
    height = max(2.5, 0.8 * T + 1.0)
    fig = Figure(figsize=(width, height), dpi=dpi)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.02, 0.02, 0.96, 0.92 if title else 0.96))
    pos = lambda k, t: (t - k / 2.0, float(k))  # noqa: E731
    shade = lambda w: str(1.0 - min(max(w, 0.0), 1.0))  # noqa: E731  (matplotlib gray)

    def edge(a, b, w):
        if w > threshold:
            ax.plot([a[0], b[0]], [a[1], b[1]], color=shade(w), lw=0.6 + 1.6 * w, zorder=1)

    for t, word in enumerate(labels):
        ax.text(t, -0.15, word, ha="center", va="top", rotation=90, fontsize=9, parse_math=False)
    for k in range(1, T):
        for t in range(k, T):
            w_new, w_left, w_right = g[k - 1, t]
            node, left, right = pos(k, t), pos(k - 1, t - 1), pos(k - 1, t)
            merge = (node[0], node[1] - 0.5)
            edge(left, merge, w_new)
            edge(right, merge, w_new)
            edge(merge, node, w_new)
            edge(left, node, w_left)
            edge(right, node, w_right)
            ax.scatter([merge[0]], [merge[1]], s=12, color="tab:blue", alpha=0.8, zorder=2)
            ax.scatter([node[0]], [node[1]], s=40, color="tab:red", alpha=0.8, zorder=2)
    ax.scatter([pos(0, t)[0] for t in range(T)], [0.0] * T, s=20, color="black", zorder=2)
    ax.set_xlim(-0.8, T - 0.2)
    ax.set_ylim(-0.25 - 0.11 * max(map(len, labels)), T - 0.5)
    ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=9, parse_math=False)
    return _save(fig, path, fmt, dpi)


def tree_file_name(index: int, total: int, fmt: str = "png") -> str:
    """``tree_0007.png`` for sentence 7 (1-based) of ``total``."""
    return f"tree_{index:0{max(4, len(str(total)))}d}.{fmt}"
