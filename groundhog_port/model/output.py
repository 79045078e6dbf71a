"""The output normaliser of decoding: Theano's ``SoftmaxWithBias`` over logit rows, in parts.

For logits ``z (R, V)`` (:meth:`~groundhog_port.model.layers.SoftmaxLayer.logits`)::

    e    = exp(z - max_j z_j)            float32, written over z
    inv  = 1 / sum_j double(e_j)         float64, one per row
    p    = float32(double(e) * inv)      (:meth:`Normalised.probs`)

which is :func:`~groundhog_port.model.functional.softmax_with_bias` bit for bit: the
maximum is exact, ``exp`` elementwise, and each row's double sum is made whole by one thread
in one order whatever rows lie beside it (the *one-row rule* below).  A search keeps the
parts: it ranks words by ``e`` (the same order as ``p``) and turns only its candidates into
probabilities.

The one-row rule.  torch splits the reduction of a *single* row of ``_GRAIN`` elements or
more between threads, so the literal search's one-row beam (a sentence with one live
hypothesis, beam 1) gets another double sum than the same row summed among others.  Rows
``single_rows`` are therefore summed alone, as a one-row call sums them; every other row is
summed in calls of at least two rows (:func:`sum64`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from . import functional
from .workspace import Workspace

#: word chunk of the per-chunk maxima a search's prefilter reads (vocabularies above
#: CHUNKED_VOCAB words)
CHUNK = 128
CHUNKED_VOCAB = 4096

#: rows of the float64 sum converted at a time (:func:`sum64`)
SUM64_ROWS = 16

#: torch's CPU reductions split one output's reduction between threads from this many
#: elements on (at::internal::GRAIN_SIZE): a one-row sum of that size is not the per-row
#: sum of a bigger call
_GRAIN = 32768


@dataclass
class Normalised:
    """The softmax of logit rows in parts: ``e (R, V)`` = ``exp(z - max z)`` (the logits'
    dtype), ``inv (R, 1)`` float64 = ``1 / sum(e)``, and ``chunk_max (R, ceil(V / CHUNK))``,
    the maximum logit of each chunk of CHUNK words (None unless asked for and
    ``V > CHUNKED_VOCAB``)."""

    e: torch.Tensor
    inv: torch.Tensor
    chunk_max: torch.Tensor | None = None

    def probs(self, rows: slice = slice(None)) -> torch.Tensor:
        """``p`` of ``rows``: ``softmax_with_bias`` of their logits, bit for bit."""
        return self.scaled(self.e[rows], rows)

    def scaled(self, values: torch.Tensor, rows: slice = slice(None)) -> torch.Tensor:
        """The probabilities of ``values``, entries of ``e`` (a row of them per row of
        ``rows``): ``float(double(values) * inv)``, what :meth:`probs` gives there."""
        return (values.double() * self.inv[rows]).to(self.e.dtype)


def normalise(
    z: torch.Tensor,
    single_rows: Sequence[int] = (),
    workspace: Workspace | None = None,
    chunk_max: bool = False,
) -> Normalised:
    """The parts of ``softmax_with_bias(z)`` for ``z (R, V)``, computed in place in ``z``:
    :func:`~groundhog_port.model.functional.softmax_with_bias` itself, run by
    :class:`_InParts` (so an edit of that one definition changes decoding too).

    ``single_rows``: rows a one-row call would sum (see the module docstring); ``chunk_max``:
    also keep each chunk's maximum (a search's candidate prefilter)."""
    out = functional.softmax_with_bias(_InParts(single_rows, workspace, chunk_max), z)
    assert isinstance(out, Normalised)  # _InParts.mul makes it
    return out


class _InParts(functional.TorchOps):
    """``softmax_with_bias``'s operations as decoding runs them: in place in the logits, the
    double row sums by :func:`sum64` with the one-row rule, the per-chunk maxima kept, and the
    result left in parts (``mul(e64, 1 / sum)`` makes a :class:`Normalised` instead of the
    ``(R, V)`` doubles; its :meth:`Normalised.probs` is the product, rounded)."""

    def __init__(
        self, single_rows: Sequence[int], workspace: Workspace | None, chunked: bool
    ) -> None:
        self.single_rows, self.workspace, self.chunked = single_rows, workspace, chunked
        self.chunk_max: torch.Tensor | None = None

    def row_max(self, z: torch.Tensor) -> torch.Tensor:
        V = z.shape[1]
        if not (self.chunked and V > CHUNKED_VOCAB):
            return z.amax(-1, keepdim=True)
        nfull = V // CHUNK
        maxima = z[:, : nfull * CHUNK].reshape(z.shape[0], nfull, CHUNK).amax(-1)
        if V % CHUNK:
            maxima = torch.cat([maxima, z[:, nfull * CHUNK :].amax(-1, keepdim=True)], 1)
        self.chunk_max = maxima
        return maxima.amax(-1, keepdim=True)  # == z.amax(-1): a maximum is exact

    def sub(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a.sub_(b)

    def exp(self, x: torch.Tensor) -> torch.Tensor:
        return x.exp_()

    def to_double(self, x: torch.Tensor) -> torch.Tensor:
        return x  # converted row block by row block in row_sum and in Normalised.probs

    def row_sum(self, e: torch.Tensor) -> torch.Tensor:
        total = sum64(e, self.workspace)
        rows = self.single_rows
        if rows and e.shape[0] > 1 and e.shape[1] >= _GRAIN and e.device.type == "cpu":
            if torch.get_num_threads() > 1:
                for r in rows:
                    total[r] = e[r : r + 1].sum(-1, dtype=torch.float64)
        return total

    def mul(self, a: torch.Tensor, b: torch.Tensor) -> Normalised:  # type: ignore[override]
        return Normalised(a, b, self.chunk_max)

    def cast_like(self, x: Normalised, like: torch.Tensor) -> Normalised:  # type: ignore[override]
        return x


def sum64(e: torch.Tensor, workspace: Workspace | None = None) -> torch.Tensor:
    """``e.double().sum(-1, keepdim=True)`` for ``e (R, V)``, SUM64_ROWS rows at a time
    through a reused float64 buffer.

    ``torch.sum(e, dtype=float64)`` converts the whole matrix first (a fresh 240 MB at 1,000
    rows, every step).  Each row is summed whole by one thread, in the same order whatever
    rows are beside it, as in ``softmax_with_bias``'s multi-row sum; a chunk is never a lone
    row unless ``R`` is 1 (torch splits a one-row sum of _GRAIN elements or more between
    threads), and never fewer rows than SUM64_ROWS unless ``R`` is.
    """
    R, V = e.shape
    if R <= 2 * SUM64_ROWS:
        return e.double().sum(-1, keepdim=True)
    total = torch.empty((R, 1), dtype=torch.float64, device=e.device)
    ws = workspace if workspace is not None else Workspace(e.device)
    buf = ws.buffer("e64", (2 * SUM64_ROWS, V), torch.float64)
    r0 = 0
    while r0 < R:
        r1 = R if R - r0 < 2 * SUM64_ROWS else r0 + SUM64_ROWS
        chunk = buf[: r1 - r0]
        chunk.copy_(e[r0:r1])
        total[r0:r1] = chunk.sum(-1, keepdim=True)
        r0 = r1
    return total


def probabilities_of_costs(neg_log_probs: np.ndarray) -> np.ndarray:
    """``exp(-c)`` of costs ``c = -log p``: the word probabilities sample() prints beside a
    sample (sample.py:176-178), in the costs' dtype."""
    probs: np.ndarray = np.exp(-neg_log_probs)
    return probs
