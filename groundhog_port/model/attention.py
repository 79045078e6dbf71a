"""The alignment model of RNNsearch: ``RecurrentLayerWithSearch.step_fprop`` (encdec.py:299).

Bahdanau et al. (2015), eq. (6) and appendix A.1.2, as GroundHog computed it::

    p_from_c = c @ A                  (once per sentence, outside the time loop: encdec.py:462)
    p_from_h = s_{i-1} @ B
    e_ij     = exp(tanh(p_from_h + p_from_c_j) @ D)
    e_ij    *= c_mask_j               (padded batches only)
    alpha_ij = e_ij / sum_j e_ij       (summed position by position: numerics.sum_positions)
    ctx_i    = sum_j alpha_ij c_j      (a matmul per sentence, see weighted_context)

In the paper's symbols (the legacy-name table, ``checkpoint.paper_symbol``): ``A = U_a``,
``B = W_a``, ``D = v_a`` and ``c_j = h_j``, so ``e_ij = exp(v_a^T tanh(W_a s_{i-1} + U_a h_j))``.

Two schedules of these pieces (:func:`energies`, ``exp``,
:func:`~groundhog_port.model.numerics.sum_positions`, :func:`weighted_context`):

* teacher forcing, :func:`align`: a padded batch, the energies multiplied by ``c_mask``
  (score.py's semantics: an overflowing padded energy gives ``inf * 0 = nan``, as there);
* decoding, :func:`ragged_context`: the real (hypothesis, source position) pairs of each
  sentence only, so a padding position never enters a sentence's numbers and a
  hypothesis' context does not depend on the other sentences or on its beam's size.

Legacy quirk kept: exp-then-normalise WITHOUT subtracting the maximum energy.
Theano did not rewrite this one into a stable softmax (unlike the output layer),
so an energy above ~88 overflows to ``inf`` and the weights become ``nan`` exactly
as in the original.  ``stable=True`` (CLI ``--stable-softmax``) subtracts the
maximum first: a documented deviation, never the default.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .numerics import mm, sum_positions
from .workspace import Workspace


def precompute_p_from_c(c: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    """``p_from_c = c @ A`` for annotations ``c`` of shape ``(S, n, c_dim)`` -> ``(S, n, dim)``."""
    return mm(c, A)


def scores(
    h_prev: torch.Tensor, p_from_c: torch.Tensor, B: torch.Tensor, D: torch.Tensor
) -> torch.Tensor:
    """``tanh(p_from_h + p_from_c_j) @ D`` -> ``(S, n)``; ``p_from_c (S, m, dim)``."""
    return energies(mm(h_prev, B)[None] + p_from_c, D)  # (S, n)


def energies(p: torch.Tensor, D: torch.Tensor) -> torch.Tensor:
    """``tanh(p) @ D`` for ``p = p_from_h + p_from_c (..., dim)`` -> ``p.shape[:-1]``: the
    energies of both schedules, computed in place in ``p``."""
    return energy_scores(p.tanh_(), D)


def energy_scores(t: torch.Tensor, D: torch.Tensor) -> torch.Tensor:
    """``t @ D`` for ``t (..., dim)`` and ``D (dim, 1)`` -> ``t.shape[:-1]``.

    Without gradients (search, scoring): a product and a sum over ``dim``, in place in
    ``t``.  Each row is summed on its own, in one order whatever the other rows:
    ``torch.mm`` with one output column splits the rows between threads, so a row's bits
    depended on how many rows the call had (from 20 rows on, 2 threads), and the batched
    search multiplies other row counts than the literal one.  Training keeps the product
    (its recorded first update is judged against that arithmetic's float32 noise).
    """
    if t.requires_grad or D.requires_grad:
        return mm(t, D)[..., 0]
    return t.mul_(D[:, 0]).sum(-1)


def weighted_context(
    alpha: torch.Tensor, c: torch.Tensor, c_rows: torch.Tensor | None = None
) -> torch.Tensor:
    """``ctx_i = sum_j alpha_ij c_j`` for ``alpha (S, n)``, ``c (S, m, c_dim)`` -> ``(n, c_dim)``.

    One sentence broadcast over a beam (``m == 1``): ``alpha^T @ c`` through the
    row-count-invariant :func:`~groundhog_port.model.numerics.mm`, so a hypothesis gets the
    same context whatever the beam size (the batched search relies on it).  A batch of
    sentences (``m == n``, teacher forcing): one product per sentence, ``alpha_b^T @ c_b``
    as a batched matmul over ``c_rows``, the batch-major copy ``(n, S, c_dim)`` of ``c``
    that the caller makes once for all steps (without it, one is made here).
    """
    if c.shape[1] == 1:
        return mm(alpha.t().contiguous(), c[:, 0])
    if c_rows is None:
        c_rows = c.transpose(0, 1).contiguous()
    return torch.bmm(alpha.t()[:, None, :], c_rows)[:, 0]


def exp_energies(score: torch.Tensor, maxima: torch.Tensor | None) -> torch.Tensor:
    """``exp(e_ij)``, the unnormalised weights of both schedules.

    Legacy quirk kept: no maximum is subtracted (the module docstring); ``maxima`` (each
    pair's row maximum, ``--stable-softmax`` only) is subtracted first."""
    return torch.exp(score if maxima is None else score - maxima)


def align(
    h_prev: torch.Tensor,
    c: torch.Tensor,
    p_from_c: torch.Tensor,
    B: torch.Tensor,
    D: torch.Tensor,
    c_mask: torch.Tensor | None = None,
    stable: bool = False,
    c_rows: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One attention step.

    Shapes: ``h_prev (n, dim)``; ``c (S, m, c_dim)`` and ``p_from_c (S, m, dim)`` with
    ``m == n`` (batch) or ``m == 1`` (one sentence broadcast over a beam);
    ``c_mask (S, n)`` or None; ``c_rows``: ``c`` batch-major, see :func:`weighted_context`.
    Returns ``ctx (n, c_dim)`` and ``alpha (S, n)``.
    """
    score = scores(h_prev, p_from_c, B, D)  # (S, n)
    energy = exp_energies(score, score.amax(0, keepdim=True) if stable else None)
    if c_mask is not None:
        energy = energy * c_mask
    alpha = energy / sum_positions(energy)
    return weighted_context(alpha, c, c_rows), alpha


def ragged_context(
    s_prev: torch.Tensor,
    sizes: Sequence[tuple[int, int]],
    c: Sequence[torch.Tensor],
    p_from_c: Sequence[torch.Tensor],
    B: torch.Tensor,
    D: torch.Tensor,
    stable: bool = False,
    workspace: Workspace | None = None,
) -> torch.Tensor:
    """The decoding schedule: ``ctx (R, c_dim)`` of decoder states ``s_prev (R, dim)``.

    ``sizes``: ``(b, n_b)`` for each sentence in row order -- sentence ``b``'s ``n_b`` rows are
    consecutive; ``c[b] (S_b, c_dim)`` and ``p_from_c[b] (S_b, dim)`` its annotations and
    their projection.  Sentence ``b``'s rows hold ``n_b x S_b`` consecutive (row, position)
    pairs, the layout of :func:`align`'s ``alpha.t()`` for that sentence alone:

    * energies ``tanh(s @ B + p_from_c_j) @ D`` (:func:`energies`) a sentence at a time,
      its ``n_b x S_b x dim`` block kept in cache between the three passes;
    * the normaliser over an ``(S_max, R)`` grid whose other cells are exactly 0 -- written,
      never a product with a mask (``exp`` may overflow, ``inf * 0`` is NaN) -- summed by
      :func:`~groundhog_port.model.numerics.sum_positions` (``acc + 0 == acc``);
    * the context :func:`weighted_context` on the sentence's own ``(S_b, n_b)`` weights.

    Called with one sentence it is :func:`align` of that sentence broadcast over its beam
    (``m == 1``) bit for bit.  Every buffer takes the states' dtype (the float64 shadow runs
    it too).
    """
    R, dim = s_prev.shape
    device, dtype = s_prev.device, s_prev.dtype
    N = sum(n * c[b].shape[0] for b, n in sizes)
    hB = mm(s_prev, B)
    big = max(n * c[b].shape[0] for b, n in sizes)
    ws = workspace if workspace is not None else Workspace(device)
    p = ws.buffer("att", (big, dim), dtype)
    score = torch.empty(N, dtype=dtype, device=device)
    off = r0 = 0
    for b, n in sizes:
        S = c[b].shape[0]
        pb = p[: n * S]
        torch.add(hB[r0 : r0 + n, None], p_from_c[b][None], out=pb.view(n, S, dim))
        score[off : off + n * S] = energies(pb, D)
        off, r0 = off + n * S, r0 + n
    # each pair's place in the (R, S_max) grid
    S_rows = torch.repeat_interleave(
        torch.tensor([c[b].shape[0] for b, _ in sizes], device=device),
        torch.tensor([n for _, n in sizes], device=device),
    )
    S_max = max(c[b].shape[0] for b, _ in sizes)
    pair_row = torch.repeat_interleave(torch.arange(R, device=device), S_rows)
    starts = torch.cumsum(S_rows, 0) - S_rows
    slot = pair_row * S_max + torch.arange(N, device=device) - starts[pair_row]
    maxima = None
    if stable:
        grid = torch.full((R * S_max,), -float("inf"), dtype=dtype, device=device)
        grid[slot] = score
        maxima = grid.view(R, S_max).amax(1)[pair_row]
    energy = exp_energies(score, maxima)
    grid = torch.zeros(R * S_max, dtype=dtype, device=device)
    grid[slot] = energy
    alpha = energy / sum_positions(grid.view(R, S_max).t())[pair_row]
    ctx, off = [], 0
    for b, n in sizes:
        S = c[b].shape[0]
        # weighted_context(alpha_b (S, n), c_b): the same contiguous (n, S) operand
        ctx.append(weighted_context(alpha[off : off + n * S].view(n, S).t(), c[b][:, None]))
        off += n * S
    return torch.cat(ctx) if len(ctx) > 1 else ctx[0]
