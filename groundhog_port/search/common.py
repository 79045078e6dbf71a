"""Pieces shared by the literal and the batched beam search, so both compute the
same numbers by construction.

Costs are GroundHog's: float64 sums of ``-log p`` where ``p`` is the float32
probability and the log is a float32 (sample.py:70 ``numpy.log`` of a float32
array).  The log is taken in float64 and rounded to float32: the correctly
rounded float32 log, identical wherever a value sits in a tensor (numpy's and
torch's float32 logs may differ from it by one unit in the last place).
"""
import torch

#: sample.py:127: the beam is doubled while it is below this
MAX_RETRY_BEAM = 500


class SearchFailed(Exception):
    """A sentence the original sample.py could not translate (it crashed there).

    ``str(err)`` is the original's error message, e.g. ``kth(=640) out of bounds (321)``.
    """


def legacy_log(probs):
    """float32 ``log p`` (see module docstring)."""
    return torch.log(probs.double()).float()


def next_costs(costs, probs, step, minlen, ignore_unk, eos_id, unk_id):
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


def check_kth(n_samples, n_candidates):
    """The original's crash: ``numpy.argpartition(flat, n)`` needs ``n < flat.size``."""
    if n_samples >= n_candidates:
        raise SearchFailed(f"kth(={n_samples}) out of bounds ({n_candidates})")


def select_cheapest(flat, n):
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
    n = torch.as_tensor(n, dtype=torch.int64, device=flat.device)
    k = int(n.max())
    B = flat.shape[0]
    if k == 0:
        return torch.full((B, 0), -1, dtype=torch.int64, device=flat.device)
    # NaN sorts last: a key of +inf with a flag keeps numbers first, then NaN by index.
    nan = torch.isnan(flat)
    key = torch.where(nan, torch.full_like(flat, float("inf")), flat)
    vals, _ = torch.topk(key, k, dim=1, largest=False, sorted=True)
    rows = torch.arange(B, device=flat.device)
    thr = vals[rows, (n - 1).clamp(min=0)][:, None]           # n-th smallest key
    below = (key < thr) & ~nan
    n_below = below.sum(1, keepdim=True)
    at = (key == thr)
    # among entries equal to the threshold, numbers come before NaN, then by index
    at_num, at_nan = at & ~nan, at & nan
    need = n[:, None] - n_below
    take_num = at_num & (at_num.cumsum(1) <= need)
    need_nan = need - take_num.sum(1, keepdim=True)
    take_nan = at_nan & (at_nan.cumsum(1) <= need_nan)
    chosen = below | take_num | take_nan
    chosen &= (n[:, None] > 0)
    # order: (key, nan flag, index); index order first, then two stable sorts
    idx = torch.arange(flat.shape[1], device=flat.device).expand(B, -1)
    pos = torch.where(chosen, idx, torch.full_like(idx, flat.shape[1]))
    pos, _ = torch.sort(pos, dim=1)
    pos = pos[:, :k]
    valid = pos < flat.shape[1]
    safe = torch.where(valid, pos, torch.zeros_like(pos))
    sel_key = torch.gather(key, 1, safe)
    sel_nan = torch.gather(nan, 1, safe) | ~valid
    sel_key = torch.where(valid, sel_key, torch.full_like(sel_key, float("inf")))
    order = torch.sort(sel_nan.to(torch.int8), dim=1, stable=True).indices
    sel_key, safe, valid = (torch.gather(t, 1, order) for t in (sel_key, safe, valid))
    sel_nan = torch.gather(sel_nan, 1, order)
    # within the numbers block sort by key (stable keeps index order for ties)
    key_for_sort = torch.where(sel_nan, torch.full_like(sel_key, float("inf")), sel_key)
    order = torch.sort(key_for_sort, dim=1, stable=True).indices
    safe, valid = torch.gather(safe, 1, order), torch.gather(valid, 1, order)
    return torch.where(valid, safe, torch.full_like(safe, -1))
