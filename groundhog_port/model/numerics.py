"""Float32 kernels whose result for one row does not depend on the other rows.

The batched search must return exactly what the literal search returns, so a
hypothesis' numbers may not change with the number of rows it is computed with.
``torch.mm`` breaks that on CPU (measured with MKL on this project's machines): it picks other inner kernels for row counts that are not a multiple of
  4 (a row computed alone differs from the same row in a bigger product by up to
  ~1e-4 at dim 1000).  :func:`mm` pads the rows up to a multiple of 4 with zeros,
  which selects the same kernel for every row count.

(``torch.sigmoid`` is position dependent too -- its vectorised body and scalar
tail round differently -- which is one more reason the activations use
``1 / (1 + exp(-x))``, see :func:`groundhog_port.model.activations.theano_sigmoid`.)

``parity_tests/unit/test_batched_search.py`` checks the property on random models.
"""

from __future__ import annotations

import numpy as np
import torch

ROW_BLOCK = 4
#: inner dimensions above DEEP are multiplied ROW_CHUNK rows at a time (see :func:`mm`)
DEEP = 768
ROW_CHUNK = 64
#: column block of the output matrix in :func:`output_blocks`; matrices of up to
#: SINGLE_BLOCK_VOCAB columns stay whole
OUT_BLOCK = 2048
SINGLE_BLOCK_VOCAB = 4096


def mm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x @ w`` for ``x (..., k)`` and ``w (k, n)``, row-count invariant.

    Narrow outputs (``4 < n < 12``) are computed ``ROW_BLOCK`` columns wider, with zero
    columns: MKL's kernels for 5-7 and 9-11 output columns (k >= 8) give a row other
    bits in products of 4 rows than in products of 8 or more, padded or not.

    Deep products (``k > DEEP``) are cut into calls of at most ROW_CHUNK rows: on this
    project's Intel Xeon (AVX-512) MKL multiplies by another kernel from about 128 rows on
    (2 threads; 192 with one) when ``k >= 800``, and a row then gets other bits than in a
    4-row product; calls of up to 124 rows, and every call at ``k <= 768``, gave every row
    the bits of the 4-row product (measured for k = 64-2000, up to 4096 rows).  The batched
    search multiplies up to thousands of rows where the literal one multiplies a beam.
    """
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1])
    rows = x2.shape[0]
    n = w.shape[1]
    if 4 < n < 12 and n % ROW_BLOCK:
        w = torch.cat([w, w.new_zeros((w.shape[0], -n % ROW_BLOCK))], 1)
    if x2.shape[1] > DEEP and rows > ROW_CHUNK:
        out = x2.new_empty((rows, w.shape[1]))
        for r0 in range(0, rows, ROW_CHUNK):
            r1 = min(rows, r0 + ROW_CHUNK)
            if (r1 - r0) % ROW_BLOCK:
                out[r0:r1] = _mm_padded(x2[r0:r1], w)
            else:
                torch.mm(x2[r0:r1], w, out=out[r0:r1])
    else:
        out = _mm_padded(x2, w)
    return out[:, :n].reshape(*lead, n)


def _mm_padded(x2: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``torch.mm`` with the rows padded up to a multiple of ROW_BLOCK (zeros)."""
    rows = x2.shape[0]
    pad = -rows % ROW_BLOCK
    if pad:
        return torch.mm(torch.cat([x2, x2.new_zeros((pad, x2.shape[1]))]), w)[:rows]
    return torch.mm(x2, w)


def output_blocks(W: torch.Tensor) -> list[tuple[int, int, torch.Tensor]]:
    """``W (k, V)`` cut into column blocks of OUT_BLOCK words (one block up to
    SINGLE_BLOCK_VOCAB words): ``[(j0, j1, W[:, j0:j1])]``, views of ``W`` (no copy).

    MKL multiplies by a 620 x 30001 matrix at half the speed it multiplies by its
    2048-column blocks; each output element is the same dot product either way
    (``parity_tests/unit/test_batched_search.py`` checks it against :func:`mm`).  A block need
    not be copied out: MKL reads it with the row stride of ``W``, at the speed of a
    contiguous copy and with the same bits (a copy was 74 MB per batch at full size).
    """
    V = W.shape[1]
    if V <= SINGLE_BLOCK_VOCAB:
        return [(0, V, W)]
    cuts = list(range(0, V, OUT_BLOCK)) + [V]
    if cuts[-1] - cuts[-2] < 2 * ROW_BLOCK * ROW_BLOCK:  # no narrow last block
        del cuts[-2]
    return [(j0, j1, W[:, j0:j1]) for j0, j1 in zip(cuts, cuts[1:])]


def sum_positions(x: torch.Tensor) -> torch.Tensor:
    """``x.sum(0)`` added position by position: ``((x[0] + x[1]) + x[2]) + ...``.

    ``torch.sum`` over dim 0 groups the terms by how many columns sit beside
    a column (vectorised lanes, or a scalar tail with four partial sums) and by
    the number of rows, so a hypothesis' attention normaliser would change with
    the beam size and with padding.  This order is fixed: a column's result
    depends on its own values only, and trailing zero rows leave it unchanged
    (``acc + 0 == acc``), which is what lets a padded batch reproduce it.

    On the CPU the sum runs in numpy's C loop, in the same order: ``np.add.reduce``
    over axis 0 of a C-contiguous array with two or more columns adds whole rows
    into the accumulator one after the other (numpy sums pairwise only along a
    contiguous reduction axis, i.e. for a single column, where ``np.add.accumulate``
    is used: it is strictly sequential).  A Python loop over the positions made
    scoring quadratic in the sentence length (7 s for a 1000-word pair);
    ``parity_tests/unit/test_numerics.py`` checks the two orders agree bit for bit.
    Tensors that need a gradient (training) or live on a GPU keep the loop.
    """
    if x.device.type == "cpu" and not x.requires_grad and x.dim() == 2 and x.shape[0] > 1:
        a = x.contiguous().numpy()
        if a.shape[1] == 1:
            return torch.from_numpy(np.add.accumulate(a[:, 0])[-1:].copy())
        return torch.from_numpy(np.add.reduce(a, axis=0))
    return _sum_positions_loop(x)


def _sum_positions_loop(x: torch.Tensor) -> torch.Tensor:
    acc = x[0].clone()
    for j in range(1, x.shape[0]):
        acc.add_(x[j])
    return acc
