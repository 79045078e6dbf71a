"""One sampling step's primitives (the equations are in :mod:`.sampler`'s docstring): the
draw's outputs, the calls Theano's scan refuses and the multinomial draw from a uniform.  The
tempered softmax is the model's (:func:`groundhog_port.model.decoding.probs` with ``T``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


class SamplingFailed(Exception):
    """A call the original ``sample_fn`` refuses (``str(err)`` is Theano's message)."""


@dataclass
class Draw:
    """``sample_fn``'s outputs: ``ids (n_steps, n_samples)`` int64 and
    ``neg_log_probs (n_steps, n_samples)`` float32 (``-log p`` of each drawn word)."""

    ids: np.ndarray
    neg_log_probs: np.ndarray
    #: per drawn word, the distance of its uniform to the nearest running-sum boundary
    #: (how far the probabilities could move before another word is drawn); None if unknown
    margin: np.ndarray | None = None


def n_steps_for(seq: Sequence[int] | np.ndarray) -> int:
    """``3 * (len(seq) - 1)`` (sample.py:168); ``seq`` includes end-of-sequence."""
    return 3 * (len(seq) - 1)


def check_call(n_samples: int, n_steps: int) -> None:
    """The calls Theano's scan refuses (scan_op.py:1150-1158)."""
    if n_steps < 0:
        raise SamplingFailed(f"Scan was asked to run for negative number of step {n_steps}")
    if n_steps == 0:
        raise SamplingFailed("We didn't implemented yet the case where scan do 0 iteration")
    if n_samples < 0:
        raise SamplingFailed(f"negative number of samples {n_samples}")


def multinomial_from_uniform(pvals: np.ndarray, unis: np.ndarray) -> np.ndarray:
    """``MultinomialFromUniform`` + ``argmax`` (multinomial.py:112-147, cost_layers.py:1059).

    Row ``n``: the first ``m`` whose running sum of the float32 ``pvals`` -- accumulated in
    double, left to right -- exceeds ``unis[n]``.  Legacy quirk kept: when no running sum
    exceeds ``u`` (the row sums to less than ``u`` by rounding) the one-hot row is all
    zeros and ``argmax`` gives word 0.
    """
    cum = np.cumsum(np.asarray(pvals, dtype=np.float32).astype(np.float64), axis=1)
    hit = cum > np.asarray(unis, dtype=np.float32).astype(np.float64)[:, None]
    return np.where(hit.any(1), hit.argmax(1), 0).astype(np.int64)


def boundary_margin(pvals: np.ndarray, unis: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """``min(u - S_{m-1}, S_m - u)`` for the word ``m`` drawn with uniform ``u`` (``S`` the
    double running sums of :func:`multinomial_from_uniform`; ``inf`` for the word-0 quirk)."""
    cum = np.cumsum(np.asarray(pvals, dtype=np.float32).astype(np.float64), axis=1)
    u = np.asarray(unis, dtype=np.float32).astype(np.float64)
    r = np.arange(len(ids))
    above = cum[r, ids] - u
    below = u - np.where(ids > 0, cum[r, np.maximum(ids - 1, 0)], 0.0)
    return np.where(above > 0, np.minimum(above, below), np.inf)


def temperature(inverse_temperature: float) -> float:
    """``T`` is a float32 scalar (``TT.scalar``, floatX): Theano rounds the Python float."""
    return float(np.float32(inverse_temperature))
