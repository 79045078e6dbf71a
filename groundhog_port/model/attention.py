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

The pieces are written once, over a backend (:class:`AttentionOps`, the
:class:`~groundhog_port.model.functional.Ops` of the rest of the network grown by the
attention's few operations): :func:`energies` (``tanh(p) @ D``), :func:`weights` (``exp``
then the normaliser) and :func:`attend` (both, then the weighted context).  Three schedules
run them:

* teacher forcing, :func:`align`: a padded batch, the energies multiplied by ``c_mask``
  (score.py's semantics: an overflowing padded energy gives ``inf * 0 = nan``, as there);
* decoding, :func:`ragged_context`: the real (hypothesis, source position) pairs of each
  sentence only, so a padding position never enters a sentence's numbers and a
  hypothesis' context does not depend on the other sentences or on its beam's size;
* the ONNX export: :func:`attend` on graph values (``export.onnx_graphs.GraphOps``), one
  sentence broadcast over the step's rows.

Legacy quirk kept: exp-then-normalise WITHOUT subtracting the maximum energy.
Theano did not rewrite this one into a stable softmax (unlike the output layer),
so an energy above ~88 overflows to ``inf`` and the weights become ``nan`` exactly
as in the original.  ``stable=True`` (CLI ``--stable-softmax``) subtracts the
maximum first: a documented deviation, never the default.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import torch

from .functional import Ops, TorchOps, Value
from .numerics import mm, sum_positions
from .workspace import Workspace


class AttentionOps(Ops, Protocol):
    """What the attention needs of a backend beyond :class:`~.functional.Ops`."""

    def tanh(self, x: Value) -> Value: ...
    def div(self, a: Value, b: Value) -> Value: ...
    def over_positions(self, p_from_h: Value, p_from_c: Value) -> Value:
        """``p_from_h_i + p_from_c_j`` for every (position ``j``, row ``i``) pair."""

    def project(self, t: Value, v: Value) -> Value:
        """``t @ v`` for a column ``v (dim, 1)``, the last axis summed away."""

    def position_max(self, e: Value) -> Value:
        """Each row's maximum energy over its source positions (``--stable-softmax``)."""

    def position_sum(self, e: Value) -> Value:
        """Each row's sum over its source positions."""

    def weighted_context(self, alpha: Value, c: Value) -> Value:
        """``sum_j alpha_ij c_j`` for every row ``i``."""


def energies(ops: AttentionOps, p: Value, D: Value) -> Value:
    """``e_ij = tanh(p_ij) @ D`` for ``p = p_from_h_i + p_from_c_j``: the energies of every
    schedule."""
    return ops.project(ops.tanh(p), D)


def weights(
    ops: AttentionOps, e: Value, c_mask: Value | None = None, stable: bool = False
) -> Value:
    """``alpha_ij = exp(e_ij) [* c_mask_j] / sum_j exp(e_ij) [* c_mask_j]``.

    Legacy quirk kept: no maximum is subtracted (the module docstring); ``stable``
    (``--stable-softmax``) subtracts each row's maximum first."""
    energy = ops.exp(ops.sub(e, ops.position_max(e)) if stable else e)
    if c_mask is not None:
        energy = ops.mul(energy, c_mask)
    return ops.div(energy, ops.position_sum(energy))


def attend(
    ops: AttentionOps,
    weight: Callable[[str], Value],
    s_prev: Value,
    c: Value,
    p_from_c: Value,
    c_mask: Value | None = None,
    stable: bool = False,
) -> tuple[Value, Value]:
    """One attention step, ``(ctx, alpha)``: ``p_from_h = s_{i-1} @ B``, :func:`energies`,
    :func:`weights`, the weighted context.  ``weight(name)`` gives ``B`` and ``D``."""
    p = ops.over_positions(ops.mm(s_prev, weight("B")), p_from_c)
    alpha = weights(ops, energies(ops, p, weight("D")), c_mask, stable)
    return ops.weighted_context(alpha, c), alpha


def precompute_p_from_c(c: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    """``p_from_c = c @ A`` for annotations ``c`` of shape ``(S, n, c_dim)`` -> ``(S, n, dim)``."""
    return mm(c, A)


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


class _InPlace(TorchOps):
    """The torch schedules' common operations: ``tanh`` and the projection on ``D`` in
    place in the fresh ``p`` they are given (no second ``(pairs, dim)`` tensor)."""

    def tanh(self, x: torch.Tensor) -> torch.Tensor:
        return x.tanh_()

    def div(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a / b

    def project(self, t: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return energy_scores(t, v)


class _Padded(_InPlace):
    """Teacher forcing's schedule: positions on axis 0 of ``(S, n)`` energies, a padded
    batch (or one sentence, ``m == 1``, broadcast over a beam)."""

    def __init__(self, c_rows: torch.Tensor | None) -> None:
        self.c_rows = c_rows

    def over_positions(self, p_from_h: torch.Tensor, p_from_c: torch.Tensor) -> torch.Tensor:
        return p_from_h[None] + p_from_c  # (S, n, dim)

    def position_max(self, e: torch.Tensor) -> torch.Tensor:
        return e.amax(0, keepdim=True)

    def position_sum(self, e: torch.Tensor) -> torch.Tensor:
        return sum_positions(e)

    def weighted_context(self, alpha: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return weighted_context(alpha, c, self.c_rows)


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
    """One attention step (:func:`attend` on a padded batch).

    Shapes: ``h_prev (n, dim)``; ``c (S, m, c_dim)`` and ``p_from_c (S, m, dim)`` with
    ``m == n`` (batch) or ``m == 1`` (one sentence broadcast over a beam);
    ``c_mask (S, n)`` or None; ``c_rows``: ``c`` batch-major, see :func:`weighted_context`.
    Returns ``ctx (n, c_dim)`` and ``alpha (S, n)``.
    """
    BD = {"B": B, "D": D}
    ctx, alpha = attend(_Padded(c_rows), BD.__getitem__, h_prev, c, p_from_c, c_mask, stable)
    return ctx, alpha


class _Ragged(_InPlace):
    """Decoding's schedule: the flat (row, position) pairs of consecutive sentences,
    ``n_b x S_b`` pairs for sentence ``b``; their sums and maxima through an ``(R, S_max)``
    grid whose other cells are exactly 0 (or -inf) -- written, never a product with a mask
    (``exp`` may overflow, ``inf * 0`` is NaN)."""

    def __init__(
        self, p: torch.Tensor, sizes: Sequence[tuple[int, int]], S_b: Sequence[int]
    ) -> None:
        self.p = p  # the workspace's (pairs, dim) buffer of one sentence's energies
        self.sizes, self.S_b = sizes, S_b
        device = p.device
        S_rows = torch.repeat_interleave(
            torch.tensor(S_b, device=device), torch.tensor([n for _, n in sizes], device=device)
        )
        R, S_max = S_rows.shape[0], max(S_b)
        self.R, self.S_max = R, S_max
        self.pair_row = torch.repeat_interleave(torch.arange(R, device=device), S_rows)
        starts = torch.cumsum(S_rows, 0) - S_rows
        N = self.pair_row.shape[0]
        self.slot = self.pair_row * S_max + torch.arange(N, device=device) - starts[self.pair_row]

    def over_positions(self, p_from_h: torch.Tensor, p_from_c: torch.Tensor) -> torch.Tensor:
        n, (S, dim) = p_from_h.shape[0], p_from_c.shape
        pb = self.p[: n * S]
        torch.add(p_from_h[:, None], p_from_c[None], out=pb.view(n, S, dim))
        return pb

    def _grid(self, e: torch.Tensor, fill: float) -> torch.Tensor:
        grid = torch.full((self.R * self.S_max,), fill, dtype=e.dtype, device=e.device)
        grid[self.slot] = e
        return grid.view(self.R, self.S_max)

    def position_max(self, e: torch.Tensor) -> torch.Tensor:
        return self._grid(e, -float("inf")).amax(1)[self.pair_row]

    def position_sum(self, e: torch.Tensor) -> torch.Tensor:
        return sum_positions(self._grid(e, 0.0).t())[self.pair_row]

    def weighted_context(self, alpha: torch.Tensor, c: Sequence[torch.Tensor]) -> torch.Tensor:
        ctx, off = [], 0
        for (b, n), S in zip(self.sizes, self.S_b):
            # weighted_context(alpha_b (S, n), c_b): the same contiguous (n, S) operand
            ctx.append(weighted_context(alpha[off : off + n * S].view(n, S).t(), c[b][:, None]))
            off += n * S
        return torch.cat(ctx) if len(ctx) > 1 else ctx[0]


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

    * :func:`energies` a sentence at a time, its ``n_b x S_b x dim`` block kept in cache
      between the three passes;
    * :func:`weights` over all pairs at once (:class:`_Ragged`'s grid, summed by
      :func:`~groundhog_port.model.numerics.sum_positions`: ``acc + 0 == acc``);
    * the context :func:`weighted_context` on the sentence's own ``(S_b, n_b)`` weights.

    Called with one sentence it is :func:`align` of that sentence broadcast over its beam
    (``m == 1``) bit for bit.  Every buffer takes the states' dtype (the float64 shadow runs
    it too).
    """
    dim, dtype = s_prev.shape[1], s_prev.dtype
    S_b = [c[b].shape[0] for b, _ in sizes]
    big = max(n * S for (_, n), S in zip(sizes, S_b))
    ws = workspace if workspace is not None else Workspace(s_prev.device)
    ops = _Ragged(ws.buffer("att", (big, dim), dtype), sizes, S_b)
    hB = ops.mm(s_prev, B)
    score = s_prev.new_empty(ops.pair_row.shape[0])
    off = r0 = 0
    for (b, n), S in zip(sizes, S_b):
        p = ops.over_positions(hB[r0 : r0 + n], p_from_c[b])
        score[off : off + n * S] = energies(ops, p, D)
        off, r0 = off + n * S, r0 + n
    return ops.weighted_context(weights(ops, score, stable=stable), c)
