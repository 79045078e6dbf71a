"""numerics.sum_positions: numpy's C loop adds in exactly the position-by-position order."""
import numpy as np
import pytest
import torch

from groundhog_port.numerics import _sum_positions_loop, sum_positions


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_positions_equals_the_loop_bit_for_bit(dtype):
    rng = np.random.default_rng(7)
    shapes = [(2, 1), (3, 1), (1000, 1), (2, 2), (9, 3), (130, 4), (257, 17), (600, 80),
              (50, 320), (1, 5)]
    shapes += [(int(rng.integers(2, 700)), int(rng.integers(1, 90))) for _ in range(60)]
    for S, n in shapes:
        # magnitudes spread over 16 orders: any other summation order changes the bits
        x = (rng.standard_normal((S, n)) * np.exp(rng.uniform(-18, 18, (S, n)))).astype(dtype)
        for t in (torch.from_numpy(x), torch.from_numpy(np.asfortranarray(x)),
                  torch.from_numpy(x.T.copy()).t()):
            got, want = sum_positions(t), _sum_positions_loop(t)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert torch.equal(got, want), (S, n)


def test_pairwise_summation_would_differ():
    """The test above can fail: numpy's pairwise sum of one contiguous column is another order."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((1000, 1)) * np.exp(rng.uniform(-18, 18, (1000, 1)))).astype(np.float32)
    assert not np.array_equal(np.add.reduce(x[:, 0])[None], _sum_positions_loop(torch.from_numpy(x)).numpy())


def test_gradients_keep_the_loop():
    x = torch.rand(5, 3, requires_grad=True)
    sum_positions(x).sum().backward()
    assert torch.equal(x.grad, torch.ones(5, 3))
