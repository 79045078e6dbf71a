"""Float32 kernels whose result for one row does not depend on the other rows.

The batched search must return exactly what the literal search returns, so a
hypothesis' numbers may not change with the number of rows it is computed with.
``torch.mm`` breaks that on CPU (measured with MKL on this project's machines): it picks other inner kernels for row counts that are not a multiple of
  4 (a row computed alone differs from the same row in a bigger product by up to
  ~1e-4 at dim 1000).  :func:`mm` pads the rows up to a multiple of 4 with zeros,
  which selects the same kernel for every row count.

With one torch thread, a float32 product without gradients on the CPU is a list of MKL
calls (:func:`_tasks`): tiles of ROW_TILE rows (inner dimension above DEEP) times the
column blocks of :func:`column_blocks`; a single-threaded call gave every row the 4-row
product's bits up to 188 rows.  With more threads, the calls of issue 28: deep products in
calls of ROW_CHUNK rows on all threads, the output matrix by its column blocks.  (A pool
running the single-threaded calls on every thread measured slower than MKL's own threads
on a quiet machine: ``docs/speed.md``.)

(``torch.sigmoid`` is position dependent too -- its vectorised body and scalar
tail round differently -- which is one more reason the activations use
``1 / (1 + exp(-x))``, see :func:`groundhog_port.model.activations.theano_sigmoid`.)

A product by one of the model's weights (a :class:`torch.nn.Parameter`) that needs no
gradient -- every product of the search, scoring and sampling by a weight -- is not MKL's:
it runs on onnxruntime's MLAS with the weight packed once (:mod:`.packed`), row-count
invariant and the same on any thread count; what follows is for the other products (by
activations, e.g. the attention's weighted context; with gradients; float64).

``parity_tests/unit/test_batched_search.py`` checks the property on random models.
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

from . import packed

ROW_BLOCK = 4
#: inner dimensions above DEEP are multiplied ROW_CHUNK rows at a time (see :func:`mm`)
DEEP = 768
ROW_CHUNK = 64
#: row tile of the single-threaded tasks (inner dimension above DEEP, see :func:`mm`)
ROW_TILE = 128
#: products of fewer multiply-adds run their tasks on the calling thread alone (a hand-off
#: to the pool costs tens of microseconds)
POOL_MIN_MACS = 1 << 22
#: columns above which a product's columns are cut in two blocks (two tasks for two threads)
SPLIT_COLUMNS = 512
#: column block of the output matrix in :func:`column_blocks`; matrices of up to
#: SINGLE_BLOCK_VOCAB columns stay whole
OUT_BLOCK = 2048
SINGLE_BLOCK_VOCAB = 4096


def mm(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ w`` for ``x (..., k)`` and ``w (k, n)``, row-count invariant.

    Narrow outputs (``4 < n < 12``) are computed ``ROW_BLOCK`` columns wider, with zero
    columns: MKL's kernels for 5-7 and 9-11 output columns (k >= 8) give a row other
    bits in products of 4 rows than in products of 8 or more, padded or not.

    Deep products (``k > DEEP``): on this project's Intel Xeon (AVX-512) MKL multiplies by
    another kernel from about 128 rows on (2 threads; 192 with one) when ``k >= 800``, and
    a row then gets other bits than in a 4-row product; calls of up to 124 rows (2 threads)
    and 188 rows (one thread), and every call at ``k <= 768``, gave every row the bits of
    the 4-row product (measured for k = 64-2000, up to 4096 rows).  The batched search
    multiplies up to thousands of rows where the literal one multiplies a beam.  So, with
    one thread and without gradients (float32, CPU: :func:`_tasks`), a deep product is
    computed in tiles of ROW_TILE rows; otherwise in calls of at most ROW_CHUNK rows.

    ``out`` (optional, no gradients): a ``(rows rounded up to ROW_BLOCK, n)`` tensor the
    product is written into (its padding rows get the zero rows' products); the result is
    then ``out[:rows]``.
    """
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1])
    n = w.shape[1]
    if packed.packs(x2, w):
        return packed.product(x2, w, out).reshape(*lead, n)
    if _tasked(x2, w):
        return _tasks(x2, w, out).reshape(*lead, n)
    rows = x2.shape[0]
    if 4 < n < 12 and n % ROW_BLOCK:
        w = torch.cat([w, w.new_zeros((w.shape[0], -n % ROW_BLOCK))], 1)
    if x2.shape[1] > DEEP and rows > ROW_CHUNK:
        y = x2.new_empty((rows, w.shape[1]))
        for r0 in range(0, rows, ROW_CHUNK):
            r1 = min(rows, r0 + ROW_CHUNK)
            # assigned, not out=: out= does not record the product for autograd
            y[r0:r1] = _mm_padded(x2[r0:r1], w)
    elif n > SINGLE_BLOCK_VOCAB and not (
        torch.is_grad_enabled() and (x2.requires_grad or w.requires_grad)
    ):
        # the output matrix by its column blocks (twice MKL's speed of one wide call)
        pad = -rows % ROW_BLOCK
        xp = torch.cat([x2, x2.new_zeros((pad, x2.shape[1]))]) if pad else x2
        y = x2.new_empty((xp.shape[0], n))
        for j0, j1 in column_blocks(n):
            torch.mm(xp, w[:, j0:j1], out=y[:, j0:j1])
        y = y[:rows]
    else:
        y = _mm_padded(x2, w)
    y = y[:, :n]
    if out is not None:
        out[:rows] = y
        y = out[:rows]
    return y.reshape(*lead, n)


def _tasked(x2: torch.Tensor, w: torch.Tensor) -> bool:
    """Whether ``mm`` computes ``x2 @ w`` by single-threaded tasks (:func:`_tasks`)."""
    return (
        x2.device.type == "cpu"
        and w.device.type == "cpu"
        and x2.dtype == w.dtype == torch.float32
        and not (torch.is_grad_enabled() and (x2.requires_grad or w.requires_grad))
        # with more threads the pool measured slower than MKL's own threads on a quiet
        # machine (docs/speed.md): issue 28's calls there
        and torch.get_num_threads() == 1
    )


def column_blocks(n: int, halves: bool = False) -> list[tuple[int, int]]:
    """The column blocks ``[(j0, j1)]`` of a product with ``n`` output columns: blocks of
    OUT_BLOCK above SINGLE_BLOCK_VOCAB columns (no narrow last block); with ``halves``, two
    halves (the first a multiple of 16 columns) from SPLIT_COLUMNS on; else one block.

    MKL multiplies by a 620 x 30001 matrix at half the speed it multiplies by its
    2048-column blocks.  :func:`mm` cuts columns in halves only with more than one torch
    thread (two tasks for the two threads when a product has few rows; with one thread
    they cost 15-50% more than one call on 12-52 rows), so the blocks depend on the
    product's width and the thread count, never on its rows.
    """
    if n > SINGLE_BLOCK_VOCAB:
        cuts = list(range(0, n, OUT_BLOCK)) + [n]
        if cuts[-1] - cuts[-2] < 2 * ROW_BLOCK * ROW_BLOCK:  # no narrow last block
            del cuts[-2]
    elif halves and n >= SPLIT_COLUMNS:
        cuts = [0, -(-n // 32) * 16, n]
    else:
        cuts = [0, n]
    return list(zip(cuts, cuts[1:]))


def _tasks(x2: torch.Tensor, w: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    """``x2 @ w`` (float32, CPU, no gradients) as single-threaded MKL calls, one per row
    tile and column block, run on torch's thread count of threads (:func:`_run_tasks`).

    Rows are padded with zeros to a multiple of ROW_BLOCK; a deep product (``k > DEEP``) is
    cut in tiles of ROW_TILE rows (a multiple of ROW_BLOCK), a shallow one stays whole;
    columns are cut by :func:`column_blocks`.  Narrow outputs are widened as in :func:`mm`.
    """
    rows, k = x2.shape
    n = w.shape[1]
    if 4 < n < 12 and n % ROW_BLOCK:
        w = torch.cat([w, w.new_zeros((k, -n % ROW_BLOCK))], 1)
    wide = w.shape[1]
    padded = rows + (-rows % ROW_BLOCK)
    if padded != rows:
        x2 = torch.cat([x2, x2.new_zeros((padded - rows, k))])
    if out is None or wide != n:
        y = x2.new_empty((padded, wide))
    else:
        y = out[:padded]
    tile = ROW_TILE if k > DEEP else max(padded, 1)
    halves = torch.get_num_threads() > 1 and _LOCAL_THREADS is not None
    work = [
        (x2[r0 : r0 + tile], w[:, j0:j1], y[r0 : r0 + tile, j0:j1])
        for r0 in range(0, padded, tile)
        for j0, j1 in column_blocks(wide, halves)
    ]
    _run_tasks(work, pooled=padded * k * wide >= POOL_MIN_MACS)
    if wide != n:
        y = y[:, :n]
        if out is not None:
            out[:padded] = y
            y = out[:padded]
    return y[:rows]


# -- single-threaded tasks on torch's threads -------------------------------------------------
def _mkl_local_threads() -> Callable[[Any], int] | None:
    """MKL's ``mkl_set_num_threads_local`` (the number of threads of MKL calls made by the
    calling thread; 0 restores the global setting), from the MKL linked into torch; None
    where torch has none (its BLAS then threads each call as it does)."""
    libdir = os.path.join(os.path.dirname(torch.__file__), "lib")
    for path in sorted(glob.glob(os.path.join(libdir, "*torch_cpu.*"))):
        try:
            fn = ctypes.CDLL(path).mkl_set_num_threads_local
        except (OSError, AttributeError):
            continue
        fn.argtypes = [ctypes.POINTER(ctypes.c_int)]  # the exported symbol takes a pointer
        fn.restype = ctypes.c_int
        return fn
    return None


_LOCAL_THREADS = _mkl_local_threads()
_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _one_mkl_thread(n: int = 1) -> int:
    """Make this thread's MKL calls use ``n`` threads (0: the global setting); returns the
    previous setting."""
    if _LOCAL_THREADS is None:
        return 0
    return _LOCAL_THREADS(ctypes.byref(ctypes.c_int(n)))


def _pool(workers: int) -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL._max_workers < workers:
            old = _POOL
            _POOL = ThreadPoolExecutor(
                workers, thread_name_prefix="numerics-mm", initializer=_one_mkl_thread
            )
            if old is not None:
                old.shutdown(wait=False)
        return _POOL


def _forget_pool() -> None:
    """A forked child has none of its parent's threads."""
    global _POOL
    _POOL = None


os.register_at_fork(after_in_child=_forget_pool)


def _run_tasks(
    work: Sequence[tuple[torch.Tensor, torch.Tensor, torch.Tensor]], pooled: bool
) -> None:
    """``torch.mm(a, b, out=c)`` for every ``(a, b, c)`` of ``work``, each call with one MKL
    thread, on the calling thread and (``pooled``, more than one torch thread) on
    ``torch.get_num_threads() - 1`` pool threads, which take the next task as they finish
    one.  The tasks write disjoint blocks of ``c``; which thread computes one does not
    change its bits."""
    threads = torch.get_num_threads()
    if threads == 1 or _LOCAL_THREADS is None:
        # one thread: every MKL call already has one; without MKL: its own threading
        for a, b, c in work:
            torch.mm(a, b, out=c)
        return
    threads = min(threads, len(work)) if pooled else 1
    tasks = iter(work)  # a list iterator hands out each task once, whatever the threads
    inference = torch.is_inference_mode_enabled()

    def drain() -> None:
        # grad mode is per thread: a pool thread must not see the caller's parameters as
        # needing a gradient (mm takes this path only when none is needed)
        with torch.inference_mode(inference), torch.no_grad():
            for a, b, c in tasks:
                torch.mm(a, b, out=c)

    previous = _one_mkl_thread(1)
    try:
        futures = [_pool(threads - 1).submit(drain) for _ in range(threads - 1)]
        drain()
        for f in futures:
            f.result()
    finally:
        _one_mkl_thread(previous)


def _mm_padded(x2: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``torch.mm`` with the rows padded up to a multiple of ROW_BLOCK (zeros)."""
    rows = x2.shape[0]
    pad = -rows % ROW_BLOCK
    if pad:
        return torch.mm(torch.cat([x2, x2.new_zeros((pad, x2.shape[1]))]), w)[:rows]
    return torch.mm(x2, w)


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
