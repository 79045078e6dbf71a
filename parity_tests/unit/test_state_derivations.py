"""Training options that every recording holds at the prototype's value, varied and checked
against the original's formulas (issue 53, item 2: the state keys no recording varies).

Each state goes through ``legacy_states.load_state`` (a pickle plus ``changes``), as
``train`` reads it, so ``tools/mutation_sweep.py --state-keys`` -- the key's value replaced
by ``prototype_state()``'s right after loading -- makes these tests fail.
"""

from __future__ import annotations

import pickle
import re
import sys

import numpy as np
import pytest
import torch

import legacy_states
from groundhog_port.model.config import ModelConfig
from groundhog_port.training.init import draw
from parity_tests.support.models import small_sizes
from parity_tests.support.tools import REPO

sys.path.insert(0, str(REPO / "tools"))
from numpy_train_step import train_step as numpy_train_step  # noqa: E402

FIXTURE = REPO / "fixtures" / "search"


def _loaded(tmp_path, changes=""):
    state = legacy_states.prototype_search_state()
    state.update(small_sizes(20, 24, 8, 6), seed=3)
    path = tmp_path / "init_state.pkl"
    path.write_bytes(pickle.dumps(state, protocol=2))
    return legacy_states.load_state(path, changes)


def _drawn(tmp_path, changes=""):
    state = _loaded(tmp_path, changes)
    return draw(ModelConfig.from_state(state), state)


#: the changes, and the factor each transition's prefix is scaled by against the prototype's
#: ``rec_weight_scale`` of 1 (``weight_scale``: 0.01 -> 0.05 where given)
SCALES = {
    "weight_scale=0.05,rec_weight_scale=3.0,enc_rec_weight_scale=0.5,bias=0.25": dict(
        enc=0.5, back_enc=3.0, dec=3.0, weights=5.0, bias=0.25
    ),
    "dec_rec_weight_scale=2.0,back_enc_rec_weight_scale=4.0": dict(
        enc=1.0, back_enc=4.0, dec=2.0, weights=1.0, bias=0.0
    ),
}


@pytest.mark.parametrize("changes", sorted(SCALES))
def test_init_scales_and_bias_are_the_states(tmp_path, changes):
    """``sample_weights_classic`` draws ``rng.normal(0, scale)`` -- numpy's ``loc + scale *
    gauss`` -- and ``sample_weights_orth`` takes the SVD's ``u`` times ``scale`` of such a
    matrix (utils.py:107-141): on the same generator, a matrix drawn at scale ``s`` is the one
    drawn at ``s0`` times ``s / s0``.  ``weight_scale`` scales the feed-forward matrices,
    ``rec_weight_scale`` the transitions, each ``<prefix>_rec_weight_scale`` its own layer's
    (the transition's scale, encdec.py:649, read with ``prefix_lookup``); the attention's
    ``A`` / ``B`` keep their hard-coded 1e-3 (encdec.py:269-284); ``bias`` is the decoder
    initializer's bias
    (encdec.py:853), every other bias 0."""
    want = SCALES[changes]
    drawn, drawn_varied = _drawn(tmp_path), _drawn(tmp_path, changes)
    # an orthogonal matrix is compared before its SVD (the SVD's u moves by float32's rounding
    # of the input times s_1 / gap, utils.py:139), and checked to be the SVD's u times scale
    base = {**drawn.params, **drawn.svd_inputs}
    varied = {**drawn_varied.params, **drawn_varied.svd_inputs}
    assert set(base) == set(varied) and set(drawn.svd_inputs) == set(drawn_varied.svd_inputs)
    for name, b in base.items():
        v = varied[name]
        if b.ndim == 1:
            value = want["bias"] if name == "b_0_dec_initializer_0" else 0.0
            assert np.all(v == np.float32(value)) and np.all(b == 0), name
            continue
        layer = re.fullmatch(r"[WGR]_(enc|back_enc|dec)_transition_0", name)
        if name in ("A_dec_transition_0", "B_dec_transition_0", "D_dec_transition_0"):
            ratio = 1.0
        elif layer:
            ratio = want[layer.group(1)]
            u = np.linalg.svd(v)[0]
            assert np.allclose(drawn_varied.params[name], u * ratio, rtol=0, atol=1e-6), name
        else:
            ratio = want["weights"]
        assert np.allclose(v, b * np.float32(ratio), rtol=1e-5, atol=1e-9), name


def test_rec_weight_init_fn_classic_keeps_the_draws_orth_would_decompose(tmp_path):
    """``rec_weight_init_fn='sample_weights_classic'``: each transition is the float32 matrix
    of normals that ``sample_weights_orth`` would have taken the SVD of (the same draws,
    utils.py:122-141); every other array is unchanged."""
    orth = _drawn(tmp_path)
    classic = _drawn(tmp_path, "rec_weight_init_fn='sample_weights_classic'")
    assert orth.svd_inputs and not classic.svd_inputs
    for name, value in classic.params.items():
        want = orth.svd_inputs.get(name, orth.params[name])
        assert np.array_equal(value, want), name
    assert any(not np.array_equal(orth.params[n], classic.params[n]) for n in orth.svd_inputs)


def test_adadelta_rho_and_eps_are_the_states_lr_is_not(tmp_path, one_thread):
    """``adarho``, ``adaeps`` (SGD_adadelta.py:46-48, :125, :137-151): one update of the
    fixture model with other values than the prototypes' is numpy's float32 step with those
    values (``tools/numpy_train_step.py``) to float32 rounding; with zero accumulators the
    first step of a large gradient is about ``sqrt(eps / (1 - rho))``, so the prototypes'
    0.95 / 1e-6 would give 4.5e-3, these 0.02.  The state's ``lr`` is not read: the trainer
    sets ``float32(1.)`` (:136), reports it and writes it over the state's (:187)."""
    from groundhog_port.legacy.loading import open_experiment
    from groundhog_port.training.adadelta import SGDAdadelta

    exp = open_experiment(
        FIXTURE / "search_state.pkl",
        FIXTURE / "search_model.npz",
        "adarho=0.75,adaeps=1e-4,lr=0.25",
        data_dir=FIXTURE,
    )
    # three test pairs cut to 6 source and 5 target words (no padding: masks all 1)
    pairs = zip(*((FIXTURE / f"test.{lang}").read_text().splitlines()[:3] for lang in ("en", "fr")))
    ids = [(exp.parse_source(s)[0][:6], [exp.trg_word2idx.get(w, 1) for w in f.split()][:5])
           for s, f in pairs]  # fmt: skip
    x = np.stack([a for a, _ in ids], axis=1)
    y = np.stack([b for _, b in ids], axis=1)
    xm, ym = np.ones(x.shape, np.float32), np.ones(y.shape, np.float32)
    algo = SGDAdadelta(exp.model, dict(exp.state))
    before = {k: p.detach().numpy().copy() for k, p in zip(algo.names, algo.params)}
    t = torch.as_tensor
    rvals = algo.step(t(x), t(xm), t(y), t(ym))
    assert rvals["lr"] == 1.0 and algo.state["lr"] == 1.0
    ref = numpy_train_step(exp.state, before, x, xm, y, ym)
    assert rvals["cost"] == pytest.approx(float(ref["cost"]), rel=1e-5)
    gs = {k: g.detach().numpy() for k, g in zip(algo.names, algo.gs)}
    rho, eps = np.float32(0.75), np.float32(1e-4)
    biggest = 0.0
    for k, p in zip(algo.names, algo.params):
        # the gradients: two float32 backward passes differ by the rounding of their sums,
        # ~1e-6 of the array's largest (measured: at most 5e-6 against the float64 pass)
        g, numpy_g = gs[k], ref["clipped_grads"][k]
        assert float(np.abs(g - numpy_g).max()) <= 1e-4 * float(np.abs(numpy_g).max()), k
        # the update of those gradients: SGD_adadelta.py:125, :137-140 with this rho and eps
        step = before[k] - p.detach().numpy()
        want = np.sqrt(eps) / np.sqrt((np.float32(1) - rho) * g * g + eps) * g
        ulp = np.spacing(np.abs(before[k]).astype(np.float32))
        assert np.all(np.abs(step - want) <= 1e-5 * np.abs(want) + 2 * ulp), k
        biggest = max(biggest, float(np.abs(step).max()))
    assert biggest == pytest.approx(np.sqrt(1e-4 / 0.25), rel=0.05)


def test_seqlen_and_trim_batches_are_the_states(legacy_root):
    """``trim_batches=False``: a training batch is ``seqlen`` positions wide whatever its
    sentences (encdec.py:58-62; trimmed it is ``min(seqlen, longest) + 1``), and holds no
    pair longer than ``seqlen`` (encdec.py:51-56 skips them): the state's values, read from
    the state file, not the prototypes' (30, True)."""
    from groundhog_port.legacy.data import first_training_batch

    case, data = legacy_root / "encdec", legacy_root / "data"
    corpora = (data / "binarized_text.shuffled.en.h5", data / "binarized_text.shuffled.fr.h5")
    for seqlen in (12, 13):
        state = legacy_states.load_state(
            case / "encdec_state.pkl", f"trim_batches=False,seqlen={seqlen},bs=8"
        )
        batch = first_training_batch(state, *corpora)
        longest = int(max(batch.x_mask.sum(0).max(), batch.y_mask.sum(0).max())) - 1
        if longest + 1 != seqlen:  # trimmed, the width would be longest + 1: not seqlen
            break
    assert batch.x.shape[0] == batch.y.shape[0] == seqlen
    assert longest <= seqlen


def test_unk_sym_source_is_the_states(legacy_root):
    """``parse_input`` (sample.py:28-46) maps an unknown source word, and an id at or past
    ``n_sym_source``, to ``state['unk_sym_source']``: 3 here, given in the state file's
    changes, not the prototypes' 1."""
    from groundhog_port.legacy.loading import open_experiment

    case = legacy_root / "encdec"
    exp = open_experiment(
        case / "encdec_state.pkl", case / "encdec_model.npz", "unk_sym_source=3", data_dir=case
    )
    seq, _ = exp.parse_source("zzunknownzz")
    assert seq.tolist() == [3, exp.state["null_sym_source"]]


def test_the_training_corpora_are_the_states(legacy_root):
    """``score --mode batch`` without ``--src``/``--trg`` scores the corpora the state names
    (score.py:136-141, ``state['source'][0]`` / ``state['target'][0]``): here the French file
    as the source and the English as the target, given in the changes, so the batches are
    those of the files read the other way round."""
    from groundhog_port.legacy.data import iter_h5_batches
    from groundhog_port.legacy.loading import open_experiment
    from groundhog_port.search import scoring

    case, data = legacy_root / "encdec", legacy_root / "data"
    fr, en = data / "binarized_text.shuffled.fr.h5", data / "binarized_text.shuffled.en.h5"
    exp = open_experiment(
        case / "encdec_state.pkl",
        case / "encdec_model.npz",
        f"source=[{str(fr)!r}],target=[{str(en)!r}]",
        data_dir=case,
    )
    got = next(iter(scoring.batches_for(exp, None, None, allow_unk=True)))
    want = next(iter(iter_h5_batches(exp.state, fr, en)))
    other = next(iter(iter_h5_batches(exp.state, en, fr)))
    assert np.array_equal(got.x, want.x) and np.array_equal(got.y, want.y)
    assert not np.array_equal(got.x, other.x)


def test_use_infinite_loop_is_the_states(legacy_root):
    """``use_infinite_loop=False`` (encdec.py:184, TM_dataset.py): the training loop's batches
    end after one pass over the corpus (the loop then stops, "end of the training data");
    the prototypes' True would start the pass again."""
    import itertools

    from groundhog_port.legacy.data import iter_h5_batches
    from groundhog_port.legacy.loading import open_experiment
    from groundhog_port.training.loop import MainLoop, new_timings

    corpora = lambda e: (e.path("source"), e.path("target"))  # noqa: E731

    exp = open_experiment(
        FIXTURE / "search_state.pkl",
        FIXTURE / "search_model.npz",
        "use_infinite_loop=False,bs=400,sort_k_batches=1",
        data_dir=legacy_root / "data",
    )
    loop = MainLoop(
        exp.model, exp.state, new_timings(exp.state), exp.path("source"), exp.path("target")
    )
    # at most 200 taken: an endless iterator fails here instead of hanging
    taken = len(list(itertools.islice(loop.batches(-1), 200)))
    one_pass = sum(1 for _ in iter_h5_batches(exp.state, *corpora(exp), sort_k_batches=1))
    assert 0 < taken == one_pass < 200


def test_loop_iters_is_the_states(legacy_root, tmp_path, one_thread):
    """``loopIters=2`` (mainLoop.py:297: ``while step < loopIters``): the loop stops after 2
    updates, its timings say step 2 (a cap of 4 updates keeps the prototypes' 3,000,000 from
    running on)."""
    import io

    from groundhog_port.legacy.loading import open_experiment
    from groundhog_port.training.loop import MainLoop, new_timings

    exp = open_experiment(
        FIXTURE / "search_state.pkl",
        FIXTURE / "search_model.npz",
        f"loopIters=2,bs=4,prefix='{tmp_path}/l_',hookFreq=-1",
        data_dir=legacy_root / "data",
    )
    timings = new_timings(exp.state)
    loop = MainLoop(
        exp.model,
        exp.state,
        timings,
        exp.path("source"),
        exp.path("target"),
        out=io.StringIO(),
        max_updates=4,
    )
    loop.run()
    assert int(loop.timings["step"]) == 2


def test_reload_false_starts_over(legacy_root, tmp_path, one_thread):
    """``reload=False`` (train.py:94: ``if state['reload']: main.load()``): a run on a prefix
    that already holds a checkpoint starts from the given model again, so 2 updates after
    an earlier run of 1 give the model of a fresh run of 2 updates, not the earlier run's
    model updated once more (the prototypes' ``reload=True``)."""
    from parity_tests.support.training import train_bundled_search

    data = legacy_root / "data"
    assert train_bundled_search(data, f"{tmp_path}/fresh_", "loopIters=2", "hookFreq=-1") == 0
    assert train_bundled_search(data, f"{tmp_path}/again_", "loopIters=1", "hookFreq=-1") == 0
    assert (
        train_bundled_search(
            data, f"{tmp_path}/again_", "loopIters=2", "hookFreq=-1", "reload=False"
        )
        == 0
    )
    fresh, again = (np.load(tmp_path / f"{p}_model.npz") for p in ("fresh", "again"))
    assert all(np.array_equal(fresh[k], again[k]) for k in fresh.files)
