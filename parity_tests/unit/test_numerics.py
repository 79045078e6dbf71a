"""numerics: sum_positions adds in exactly the position-by-position order; the products
give a row the same bits whatever the rows beside it."""

import numpy as np
import pytest
import torch

from groundhog_port.model import attention
from groundhog_port.model.numerics import _sum_positions_loop, mm, sum_positions


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_positions_equals_the_loop_bit_for_bit(dtype):
    rng = np.random.default_rng(7)
    shapes = [
        (2, 1),
        (3, 1),
        (1000, 1),
        (2, 2),
        (9, 3),
        (130, 4),
        (257, 17),
        (600, 80),
        (50, 320),
        (1, 5),
    ]
    shapes += [(int(rng.integers(2, 700)), int(rng.integers(1, 90))) for _ in range(60)]
    for S, n in shapes:
        # magnitudes spread over 16 orders: any other summation order changes the bits
        x = (rng.standard_normal((S, n)) * np.exp(rng.uniform(-18, 18, (S, n)))).astype(dtype)
        for t in (
            torch.from_numpy(x),
            torch.from_numpy(np.asfortranarray(x)),
            torch.from_numpy(x.T.copy()).t(),
        ):
            got, want = sum_positions(t), _sum_positions_loop(t)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert torch.equal(got, want), (S, n)


def test_pairwise_summation_would_differ():
    """The test above can fail: numpy's pairwise sum of one contiguous column is another order."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((1000, 1)) * np.exp(rng.uniform(-18, 18, (1000, 1)))).astype(
        np.float32
    )
    assert not np.array_equal(
        np.add.reduce(x[:, 0])[None], _sum_positions_loop(torch.from_numpy(x)).numpy()
    )


def test_gradients_keep_the_loop():
    x = torch.rand(5, 3, requires_grad=True)
    sum_positions(x).sum().backward()
    assert torch.equal(x.grad, torch.ones(5, 3))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("k", [1000, 2000])
def test_deep_products_are_row_count_invariant(threads, k):
    """A row of ``numerics.mm`` has the same bits in a product of 4 rows as in one of 512,
    for the inner dimensions of RNNsearch-50 (dim 1000, annotations 2000) and up to the row
    counts of the batched search (without the ROW_CHUNK cut, MKL gives rows of products of
    128-256 rows and more other bits on this project's CPU)."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        g = torch.Generator().manual_seed(k)
        x = torch.randn(512, k, generator=g)
        w = torch.randn(k, 256, generator=g) / k**0.5
        full = mm(x, w)
        for rows in (4, 6, 64, 128, 200, 256):
            assert torch.equal(mm(x[:rows], w), full[:rows]), rows
    finally:
        torch.set_num_threads(before)


def test_energy_scores_are_row_count_invariant():
    """The attention's ``tanh(.) @ D`` of a row does not depend on the rows beside it (a
    matrix-vector ``torch.mm`` did, from 20 rows on with 2 threads)."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        g = torch.Generator().manual_seed(0)
        t = torch.randn(600, 1000, generator=g)
        D = torch.randn(1000, 1, generator=g)
        full = attention.energy_scores(t.clone(), D)
        for rows in (1, 4, 36, 100, 300):
            assert torch.equal(attention.energy_scores(t[:rows].clone(), D), full[:rows]), rows
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("threads", [1, 2])
def test_tasked_products_are_row_count_invariant(threads):
    """Without gradients ``numerics.mm`` runs single-threaded MKL calls (row tiles of
    ROW_TILE rows when k > DEEP; at 2 threads, column halves too, on the pool): a row has
    the same bits in a product of 1-1000 rows, for the shapes of the search's products
    (k = 620, 1000, 2000; 1000 columns, and 30,001 in column blocks)."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        g = torch.Generator().manual_seed(threads)
        with torch.inference_mode():
            for k, n, R in (
                (1000, 1000, 1000),
                (2000, 1000, 1000),
                (620, 1000, 300),
                (620, 30001, 300),
            ):
                x = torch.randn(R, k, generator=g)
                w = torch.randn(k, n, generator=g) / k**0.5
                full = mm(x, w)
                for rows in (1, 3, 4, 6, 12, 100, 130, 260):
                    assert torch.equal(mm(x[:rows], w), full[:rows]), (k, n, rows)
    finally:
        torch.set_num_threads(before)


def test_parameters_with_and_without_gradients():
    """Scoring multiplies by parameters (``requires_grad``) under ``no_grad``: the pool's
    threads, whose grad mode is their own, must not refuse ``out=``; with gradients (training,
    deep products of more than ROW_CHUNK rows) the product is recorded for autograd.  Both
    give the same bits."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        g = torch.Generator().manual_seed(5)
        w = torch.nn.Parameter(torch.randn(1000, 1000, generator=g) / 1000**0.5)
        x = torch.randn(300, 1000, generator=g)
        with torch.no_grad():
            fast = mm(x, w)
        slow = mm(x, w)
        slow.sum().backward()
        assert torch.equal(fast, slow.detach())
        # d(sum)/dw = column sums of x, whatever order autograd adds them in
        assert torch.allclose(w.grad, x.sum(0)[:, None].expand(1000, 1000), atol=1e-3)
    finally:
        torch.set_num_threads(before)
