"""``harness.rounding.Float32Rounding``: float32's rounding simulated in a float64 run."""

import torch

from groundhog_port.harness.rounding import U32, Float32Rounding


def test_a_sum_that_cancels_keeps_the_rounding_of_its_terms():
    """``sum(t) == 0`` (float64: ~1e-15); rounded, it is ``sum U32 z_k t_k``: within ``U32 *
    sum |t|`` and, over many such sums, of that order."""
    g = torch.Generator().manual_seed(0)
    t = torch.randn(200, 64, generator=g, dtype=torch.float64)
    t = torch.cat([t, -t])  # every column sums to 0 (float64 leaves ~1e-15)
    bound = U32 * t.abs().sum(0)
    assert t.sum(0).abs().max() < 1e-6 * bound.max()
    with Float32Rounding(seed=1):
        s = t.sum(0)
    assert (s.abs() <= bound).all()
    assert s.abs().max() > 0.05 * bound.max()  # not float64's ~1e-16 of the terms


def test_a_product_rounds_each_term():
    """A dot product of cancelling terms, ``[a, -a] @ [b, b]``: the same as the sum."""
    g = torch.Generator().manual_seed(2)
    a = torch.randn(3, 50, generator=g, dtype=torch.float64)
    x, w = torch.cat([a, -a], 1), torch.ones(100, 4, dtype=torch.float64)
    with Float32Rounding(seed=3):
        y = x @ w
    terms = U32 * 2 * a.abs().sum(1).max()
    assert 0.01 * terms < y.abs().max() <= terms


def test_what_does_not_round_is_left_alone():
    """Copies, views, indexing, maxima, comparisons, ``where``, negation: exact in float32
    too; float32 tensors pass through untouched."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(6, 5, generator=g, dtype=torch.float64)
    x32 = x.float()
    with Float32Rounding(seed=5):
        outs = [
            x.clone(), x[::2].contiguous(), torch.cat([x, x]), x.amax(0), -x,
            torch.where(x > 0, x, -x), x.t().contiguous(), x[[0, 3]], x32 + x32, x32 @ x32.t(),
        ]  # fmt: skip
    want = [
        x.clone(), x[::2].contiguous(), torch.cat([x, x]), x.amax(0), -x,
        torch.where(x > 0, x, -x), x.t().contiguous(), x[[0, 3]], x32 + x32, x32 @ x32.t(),
    ]  # fmt: skip
    assert all(torch.equal(a, b) for a, b in zip(outs, want))


def test_arithmetic_and_autograd_backward_round():
    """An element-wise result and a gradient each move, by float32's relative rounding."""
    x = torch.linspace(0.1, 2.0, 40, dtype=torch.float64, requires_grad=True)
    exact = torch.autograd.grad(torch.tanh(x * 3.0).sum(), x)[0]
    with Float32Rounding(seed=6):
        y = torch.tanh(x * 3.0)
        grad = torch.autograd.grad(y.sum(), x)[0]
    rel = ((y - torch.tanh(x * 3.0)) / torch.tanh(x * 3.0)).abs()
    assert 0 < rel.max() <= 4 * U32 * 3  # x * 3 rounded, tanh's slope <= 1, tanh rounded
    assert not torch.equal(grad, exact)
    assert ((grad - exact).abs() <= 16 * U32 * exact.abs().max()).all()
