"""A derived bound survives exact cancellation (issue 53, item 1).

The encdec prototype with ``search=True`` attends over its ``last_forward`` annotation: every
source position holds the same vector, the attention is uniform whatever ``A``, ``B`` and
``D``, and the exact gradient of those weights is 0 (so a trained ``D`` stays near its
initial zeros, encdec.py:285-286: here a small one).  A float32 implementation returns the
rounding of the terms instead, uncorrelated from one implementation to another.  The train step's bound
(:func:`groundhog_port.harness.groups.train_step.judge_quantity`) must hold there -- it was
scaled by the float64 result's own largest value, ~0, and failed -- and must still catch a
real error of the size of the terms.

The other float32 implementation (the recording's stand-in) is numpy's:
``tools/numpy_train_step.py`` runs the network written from the original
(``tools/numpy_groundhog.py``) on ``autograd.numpy`` -- numpy's float32 kernels,
differentiated in reverse, no torch -- then the clipping and Adadelta of SGD_adadelta.py.
Its cancelling sums leave its own rounding residues, of the size of the port's and
uncorrelated with them, as Theano's did beside the port's (4.2e-19 / 5.8e-19 / 1.0e-11
against 2.1e-19 / 5.7e-19 / 8.8e-12 on the hidden recording).  The bound is judged against
Theano itself on every shared case by ``test_legacy_cases.py``.
"""

import copy
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from groundhog_port.harness.groups import train_step as ts
from groundhog_port.harness.rounding import Float32Rounding
from groundhog_port.model.config import ModelConfig
from groundhog_port.model.encdec import RNNEncoderDecoder
from legacy_states import prototype_encdec_state
from parity_tests.support.models import small_sizes
from parity_tests.support.tools import REPO

sys.path.insert(0, str(REPO / "tools"))
from numpy_train_step import train_step as numpy_train_step  # noqa: E402

#: the alignment model's weights (legacy names)
ATTENTION = ("A_dec_transition_0", "B_dec_transition_0", "D_dec_transition_0")


@pytest.fixture(scope="module")
def steps():
    """The experiment (uniform attention, ``D = 0``), a batch, and the train step of the
    float32 port, its float64 shadow, the two probes and the stand-in recording."""
    state = prototype_encdec_state()
    state.update(small_sizes(30, 40, 16, 8), search=True, bs=6)
    state["dec_rec_layer"] = "RecurrentLayerWithSearch"
    cfg = ModelConfig.from_state(state)
    model = RNNEncoderDecoder(cfg)
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for p in model.parameters():
            scale = 0.5 / p.shape[0] ** 0.5 if p.dim() == 2 else 0.1
            p.copy_(torch.randn(p.shape, generator=g) * scale)
        model.decoder.D.mul_(1e-3)  # near GroundHog's zeros: it has no gradient to follow
    exp = SimpleNamespace(state=state, model=model)
    rng = np.random.default_rng(3)
    T, n = 9, state["bs"]
    rec = {
        "x": rng.integers(2, 29, (T, n)),
        "y": rng.integers(2, 39, (T + 2, n)),
        "x_mask": np.ones((T, n), np.float32),
        "y_mask": np.ones((T + 2, n), np.float32),
    }
    out = {
        "32": ts._real_step(exp, copy.deepcopy(model), rec, torch.float32),
        "64": ts._real_step(exp, model.float64_shadow(), rec, torch.float64),
        "probe": ts._real_step(exp, model.float32_probe(backward=True), rec, torch.float64),
    }
    out["recorded"] = numpy_train_step(
        state, out["32"]["before"], rec["x"], rec["x_mask"], rec["y"], rec["y_mask"]
    )
    with Float32Rounding(seed=0):
        out["rounded"] = ts._real_step(exp, model.float64_shadow(), rec, torch.float64)
    return out


def _judge(steps, q, n, recorded=None):
    s = steps
    r = s["recorded"][q][n] if recorded is None else recorded
    return ts.judge_quantity(
        r, s["32"][q][n], s["64"][q][n], s["probe"][q][n], s["rounded"][q][n], q
    )


def test_the_attention_gradients_cancel(steps):
    """The case is what it claims: the exact gradients of ``A``, ``B``, ``D`` are 0 up to
    float64's rounding, the float32 ones are float32's rounding, 1e7 times larger."""
    g64, g32 = steps["64"]["clipped_grads"], steps["32"]["clipped_grads"]
    for n in ATTENTION:
        assert 1e7 * np.abs(g64[n]).max() < np.abs(g32[n]).max(), n


def test_the_numpy_step_is_another_implementation_of_the_same_step(steps):
    """numpy's step computes the same cost and norm as the port's float64 shadow to float32
    rounding, and its cancelling gradients are rounding residues of their own: the size of
    the port's float32 ones, not equal to them."""
    num, p64, p32 = steps["recorded"], steps["64"], steps["32"]
    assert num["cost"] == pytest.approx(p64["rvals"]["cost"], rel=1e-5)
    assert num["grad_norm"] == pytest.approx(p64["rvals"]["grad_norm"], rel=1e-5)
    for n in ATTENTION:
        mine, port = num["clipped_grads"][n], p32["clipped_grads"][n]
        assert 1e7 * np.abs(p64["clipped_grads"][n]).max() < np.abs(mine).max(), n
        assert np.abs(mine).max() < 1e3 * np.abs(port).max(), n
        assert not np.array_equal(mine, port), n


@pytest.mark.parametrize("quantity", ("clipped_grads",) + ts.UPDATE)
def test_parity_passes_where_a_sum_cancels_exactly(steps, quantity):
    """Every array of every step quantity within its bound, the cancelling ones included."""
    failing = {
        n: float(_judge(steps, quantity, n).ratio.max())
        for n in steps["32"][quantity]
        if not _judge(steps, quantity, n).ok
    }
    assert failing == {}


def test_the_weight_probe_alone_collapses_there(steps):
    """Without the rounded run the bound of ``D``'s gradient is float64-sized: the float32
    port fails against its own shadow (what the hidden recording showed)."""
    s, q, n = steps, "clipped_grads", "D_dec_transition_0"
    old = ts.judge_quantity(
        s["recorded"][q][n], s["32"][q][n], s["64"][q][n], s["probe"][q][n], s["64"][q][n], q
    )
    assert not old.ok


@pytest.mark.parametrize("name", ATTENTION)
def test_an_error_of_the_size_of_the_terms_still_fails(steps, name):
    """A recording off by the terms themselves (what a port that did not cancel would give:
    ``m = max |rounded - p64| / U32``) fails by far."""
    s, q = steps, "clipped_grads"
    m = np.abs(s["rounded"][q][name] - s["64"][q][name]).max() / 2.0**-24
    wrong = s["recorded"][q][name] + np.float32(m)
    assert not _judge(steps, q, name, wrong).ok
