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

Legacy quirk kept: exp-then-normalise WITHOUT subtracting the maximum energy.
Theano did not rewrite this one into a stable softmax (unlike the output layer),
so an energy above ~88 overflows to ``inf`` and the weights become ``nan`` exactly
as in the original.  ``stable=True`` (CLI ``--stable-softmax``) subtracts the
maximum first: a documented deviation, never the default.
"""

from __future__ import annotations

import torch

from .numerics import mm, sum_positions


def precompute_p_from_c(c: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    """``p_from_c = c @ A`` for annotations ``c`` of shape ``(S, n, c_dim)`` -> ``(S, n, dim)``."""
    return mm(c, A)


def scores(
    h_prev: torch.Tensor, p_from_c: torch.Tensor, B: torch.Tensor, D: torch.Tensor
) -> torch.Tensor:
    """``tanh(p_from_h + p_from_c_j) @ D`` -> ``(S, n)``; ``p_from_c (S, m, dim)``."""
    p = mm(h_prev, B)[None] + p_from_c  # (S, n, dim)
    return energy_scores(p.tanh_(), D)  # (S, n); in place: p is S x n x dim


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
    if stable:
        score = score - score.amax(0, keepdim=True)
    energy = torch.exp(score)
    if c_mask is not None:
        energy = energy * c_mask
    alpha = energy / sum_positions(energy)
    return weighted_context(alpha, c, c_rows), alpha
