"""State options no recording exercises, checked against the original's formula (issue 44,
item 1): each computed here in numpy from the cited lines of GroundHog 4d2433b, on the
shared ``search`` model, and compared with what the port does under the option.

* ``cutoff_rescale_length`` (``groundhog/trainer/SGD_adadelta.py:103-116``): the clipping
  threshold is ``float32(cutoff) * float32(x.shape[0])`` -- the *source* length in steps --
  and every gradient is scaled by ``c / norm`` when ``norm >= c``; non-finite norms give
  ``0.1 * p``.
* ``cutoff <= 0`` (``SGD_adadelta.py:103``): no clipping and no non-finite guard.
* ``oov`` (``groundhog/models/LM_model.py:221-225``, ``experiments/nmt/sample.py:157``):
  the target dictionary maps ``unk_sym_target`` to ``state['oov']`` and
  ``null_sym_target`` to ``'<eol>'``; a translation holding the unknown id prints the
  ``oov`` word, and stops at ``<eol>``.
"""

import numpy as np
import pytest
import torch

import legacy_states
from groundhog_port.legacy.loading import open_experiment
from groundhog_port.legacy.vocab import indices_to_words
from groundhog_port.training.adadelta import SGDAdadelta


@pytest.fixture(scope="module")
def search_exp(legacy_root):
    case = legacy_root / "search"
    return open_experiment(case / "search_state.pkl", case / "search_model.npz", data_dir=case)


def _numpy_clip(grads, params, cutoff, rescale, n_steps_x):
    """SGD_adadelta.py:101-116 in numpy float32 (the sums of squares in float64, added in
    float32 in parameter order, as Theano's Sum of float32 and Python's sum() do)."""
    norm = np.float32(0)
    for g in grads:
        norm = np.float32(norm + np.float32(np.sum(g.astype(np.float64) ** 2)))
    norm = np.float32(np.sqrt(norm))
    c = np.float32(cutoff)
    if rescale:
        c = np.float32(c * np.float32(n_steps_x))
    if not np.isfinite(norm):
        return norm, [np.float32(0.1) * p for p in params]
    if norm >= c:
        return norm, [g * c / norm for g in grads]
    return norm, list(grads)


#: the clipping threshold the clipping tests give (the prototypes' is 1.0)
CUTOFF = 2.0


@pytest.mark.parametrize("rescale", [0, 1])
@pytest.mark.parametrize("scale", [0.5, 3.0, 30.0])
def test_clipping_with_and_without_cutoff_rescale_length(search_exp, rescale, scale):
    """Gradients of norm ``scale * cutoff`` for a batch of 7 source steps: with the option
    the threshold is ``7 * cutoff`` (a norm of 3 x cutoff is left alone, 30 x is scaled to
    7 x cutoff), without it ``cutoff`` (both scaled to it).  The port's clipped gradients
    equal the formula's to float32 rounding of the one division."""
    # read from the state file as train.py reads it, with a cutoff unlike the prototype's 1
    state = legacy_states.load_state(
        search_exp.state_path, f"cutoff={CUTOFF},cutoff_rescale_length={rescale}"
    )
    trainer = SGDAdadelta(search_exp.model, state)
    rng = np.random.default_rng(7)
    raw = [rng.standard_normal(tuple(p.shape)).astype(np.float32) for p in trainer.params]
    total = np.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in raw))
    raw = [(g * np.float32(scale * CUTOFF / total)).astype(np.float32) for g in raw]
    norm, clipped = trainer.clip([torch.from_numpy(g) for g in raw], n_steps_x=7)
    params = [p.detach().numpy() for p in trainer.params]
    want_norm, want = _numpy_clip(raw, params, CUTOFF, rescale, 7)
    assert float(norm) == pytest.approx(float(want_norm), rel=1e-6)
    threshold = CUTOFF * (7.0 if rescale else 1.0)
    expected_norm = min(scale * CUTOFF, threshold)
    got_norm = np.sqrt(sum(float(np.sum(g.numpy().astype(np.float64) ** 2)) for g in clipped))
    assert got_norm == pytest.approx(expected_norm, rel=1e-5)
    for g, w in zip(clipped, want):
        np.testing.assert_allclose(g.numpy(), w, rtol=2e-7, atol=0)


def test_clipping_non_finite_norm_gives_a_tenth_of_the_parameters(search_exp):
    """A NaN gradient: every gradient becomes ``0.1 * p`` (SGD_adadelta.py:114), rescaled
    threshold or not."""
    state = dict(search_exp.state, cutoff=1.0, cutoff_rescale_length=1)
    trainer = SGDAdadelta(search_exp.model, state)
    grads = [torch.zeros_like(p) for p in trainer.params]
    grads[0][0] = float("nan")
    _, clipped = trainer.clip(grads, n_steps_x=5)
    for g, p in zip(clipped, trainer.params):
        np.testing.assert_array_equal(g.numpy(), np.float32(0.1) * p.detach().numpy())


@pytest.mark.parametrize("cutoff", [0.0, -1.0])
def test_cutoff_at_or_below_zero_leaves_the_gradients_alone(search_exp, cutoff):
    """``if 'cutoff' in state and state['cutoff'] > 0`` (SGD_adadelta.py:103): a cutoff of 0
    or below is no clipping AND no non-finite guard -- a norm of 30 stays 30 (a threshold of
    0 would zero every gradient, -1 flip it), a NaN stays NaN (not ``0.1 * p``); a cutoff of
    1 on the same gradients does clip (the check sees the difference)."""
    rng = np.random.default_rng(11)
    params = SGDAdadelta(search_exp.model, dict(search_exp.state)).params
    raw = [torch.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32)) for p in params]
    total = float(torch.sqrt(sum((g.double() ** 2).sum() for g in raw)))
    raw = [g * np.float32(30.0 / total) for g in raw]
    clipping = SGDAdadelta(search_exp.model, dict(search_exp.state, cutoff=1.0))
    assert not torch.equal(clipping.clip(raw, n_steps_x=7)[1][0], raw[0])
    trainer = SGDAdadelta(search_exp.model, dict(search_exp.state, cutoff=cutoff))
    _, kept = trainer.clip(raw, n_steps_x=7)
    assert all(torch.equal(g, r) for g, r in zip(kept, raw))
    raw[0] = raw[0].clone()
    raw[0][0] = float("nan")
    _, kept = trainer.clip(raw, n_steps_x=7)
    assert torch.isnan(kept[0][0]).all() and all(
        torch.equal(g, r) for g, r in zip(kept[1:], raw[1:])
    )


@pytest.mark.parametrize("oov", ["UNK", "<unk>", "##"])
def test_target_oov_word_is_the_states(search_exp, legacy_root, oov):
    """The target dictionary (LM_model.py:221-225) is the raw id -> word pickle with
    ``[unk_sym_target] = state['oov']`` and ``[null_sym_target] = '<eol>'``: built here from
    the pickle and compared whole with the port's under ``--changes "oov='...'"``; ids
    holding the unknown id print the ``oov`` word and stop at ``<eol>`` (sample.py:137-143)."""
    import pickle

    case = legacy_root / "search"
    # another unknown id than the prototypes' 1, given as a change (read through load_state)
    exp = open_experiment(case / "search_state.pkl", case / "search_model.npz",
                          changes=f"oov={oov!r},unk_sym_target=5", data_dir=case)  # fmt: skip
    with open(case / "ivocab.fr.pkl", "rb") as f:  # the recorded pickle, Python 2 protocol
        expected = {int(k): (v.decode() if isinstance(v, bytes) else v)
                    for k, v in pickle.load(f, encoding="bytes").items()}  # fmt: skip
    unk, eol = 5, exp.state["null_sym_target"]
    expected[eol] = "<eol>"
    expected[unk] = oov
    assert dict(exp.trg_idx2word) == expected
    assert indices_to_words(exp.trg_idx2word, [4, unk, 7, eol, 9]) == [
        expected[4],
        oov,
        expected[7],
    ]
