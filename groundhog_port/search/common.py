"""Pieces shared by the literal and the batched beam search, so both compute the
same numbers by construction.

Costs are GroundHog's: float64 sums of ``-log p`` where ``p`` is the float32
probability and the log is a float32 (sample.py:70 ``numpy.log`` of a float32
array).  The log is taken in float64 and rounded to float32: the correctly
rounded float32 log, identical wherever a value sits in a tensor (numpy's and
torch's float32 logs may differ from it by one unit in the last place).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ..model.encdec import RNNEncoderDecoder


class SearchFailed(Exception):
    """A sentence the original sample.py could not translate (it crashed there).

    ``str(err)`` is the original's error message, e.g. ``kth(=640) out of bounds (321)``.
    """


#: Theano's scan refuses to run 0 iterations (scan_op.py, ``perform``): the grConv's pyramid
#: over a one-token source (an empty line: ``<eos>`` alone) has ``T - 1 = 0`` levels
#: (rconv_layers.py:288-293), so sample.py crashes in ``comp_repr`` on such a line
SCAN_ZERO_STEPS = "We didn't implemented yet the case where scan do 0 iteration"


def check_encodable(model: RNNEncoderDecoder, seq: Sequence[int] | np.ndarray) -> None:
    """Raise :class:`SearchFailed` where the original's encoder crashed on ``seq``."""
    if model.cfg.grconv and len(seq) < 2:
        raise SearchFailed(SCAN_ZERO_STEPS)


def legacy_log(probs: torch.Tensor) -> torch.Tensor:
    """float32 ``log p`` (see module docstring); float64 probabilities keep a float64 log."""
    return torch.log(probs.double()).to(probs.dtype)


def next_costs(
    costs: torch.Tensor,
    probs: torch.Tensor,
    step: int,
    minlen: int,
    ignore_unk: bool,
    eos_id: int,
    unk_id: int,
) -> torch.Tensor:
    """``costs[:, None] - log p`` with the search restrictions (sample.py:70-80).

    ``costs (n,)`` float64, ``probs (n, V)`` float32.  ``--ignore-unk`` forbids
    ``unk_id``; ``step < minlen`` forbids end-of-sequence (both by ``-inf`` log-prob).
    """
    log_probs = legacy_log(probs)
    if ignore_unk:
        log_probs[:, unk_id] = -float("inf")
    if step < minlen:
        log_probs[:, eos_id] = -float("inf")
    return costs[:, None] - log_probs.double()


def length_normalized(
    costs: Sequence[float] | np.ndarray, trans: Sequence[Sequence[int]]
) -> np.ndarray:
    """``--normalize`` (sample.py:153-155): ``costs[i] / len(trans[i])`` in float64, the length
    counting the end-of-sequence.  The one definition: both searches, the server and the
    parity bounds use it; the standalone ONNX driver keeps a copy that a test checks
    against it (parity_tests/export/test_export_onnx.py)."""
    lengths = np.array([len(t) for t in trans], dtype=np.float64)
    return np.asarray(costs, dtype=np.float64) / lengths


def check_kth(beam_size: int, n_candidates: int) -> None:
    """The original's crash: ``numpy.argpartition(flat, n)`` needs ``n < flat.size``."""
    if beam_size >= n_candidates:
        raise SearchFailed(f"kth(={beam_size}) out of bounds ({n_candidates})")


def select_cheapest(flat: torch.Tensor, n: Sequence[int] | torch.Tensor) -> torch.Tensor:
    """The ``n[b]`` cheapest entries of each row of ``flat (B, L)`` float64.

    Replaces ``numpy.argpartition(flat, n)[:n]`` (sample.py:82), whose order is
    unspecified and differs between numpy versions and CPUs.  The SET is the
    same as argpartition's (the ``n`` smallest, ``NaN`` last); ties at the
    boundary keep the lowest flat index, and the survivors come ordered by
    ``(cost, flat index)`` -- NaN after every number, by index.  This order
    decides beam slots and the order finished hypotheses are collected in, never
    which candidates survive.

    Returns ``idx (B, max(n))`` int64 with ``-1`` past each row's ``n[b]``.
    """
    counts_n = torch.as_tensor(n, dtype=torch.int64, device=flat.device)
    B, L = flat.shape
    k = int(counts_n.max()) if counts_n.numel() else 0
    if k == 0 or L == 0:
        return torch.full((B, k), -1, dtype=torch.int64, device=flat.device)
    # total order: numbers (inf included) by (value, index), then NaN by index
    nan = torch.isnan(flat)
    key = flat.masked_fill(nan, float("inf"))
    kk = min(k, L)
    smallest = torch.topk(key, kk, dim=1, largest=False, sorted=True).values
    thr = smallest.gather(1, (counts_n.clamp(1, kk) - 1)[:, None])  # each row's n-th smallest key
    # only entries <= the threshold can be chosen: usually about n of them (more on ties)
    rows, cols = (key <= thr).nonzero(as_tuple=True)  # row-major, index order
    counts = torch.bincount(rows, minlength=B)
    width = int(counts.max())
    slot = torch.arange(rows.numel(), device=flat.device) - (torch.cumsum(counts, 0) - counts)[rows]
    c_key = torch.full((B, width), float("inf"), dtype=flat.dtype, device=flat.device)
    c_nan = torch.ones((B, width), dtype=torch.bool, device=flat.device)  # padding: last
    c_idx = torch.full((B, width), L, dtype=torch.int64, device=flat.device)
    c_key[rows, slot] = key[rows, cols]
    c_nan[rows, slot] = nan[rows, cols]
    c_idx[rows, slot] = cols
    # two stable sorts of the (index-ordered) candidates: by value, then NaN flag
    order = torch.sort(c_key, dim=1, stable=True).indices
    c_nan, c_idx = torch.gather(c_nan, 1, order), torch.gather(c_idx, 1, order)
    order = torch.sort(c_nan.to(torch.int8), dim=1, stable=True).indices
    c_idx = torch.gather(c_idx, 1, order)
    if width < k:
        c_idx = torch.cat([c_idx, c_idx.new_full((B, k - width), L)], 1)
    c_idx = c_idx[:, :k]
    beyond = torch.arange(k, device=flat.device)[None] >= counts_n[:, None]
    return torch.where(beyond | (c_idx >= L), torch.full_like(c_idx, -1), c_idx)
