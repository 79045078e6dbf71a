"""``train`` against GroundHog's own recorded training runs (parity_tests.support.train_fidelity).

* ``init_draws``: a new ``prototype_search_state`` model drawn call for call, the initial
  model bit for bit, the first update within the derived bounds -- all through the ``train``
  command;
* ``continue_search_variant``: the trained ``search_variant`` continued for 30 updates as
  GroundHog continued it (costs exploding to inf/NaN as Adadelta restarts from zero),
  judged against the spread of float32 sibling runs;
* the restart warning and ``--keep-accumulators`` (a deviation, off by default).

The recordings are read from ``legacy_traces`` and, until they are moved there, from
``pending_traces`` (``conftest.recording_dir``).
"""

import logging
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import legacy_states
from groundhog_port.cli.main import main
from groundhog_port.legacy import checkpoint
from groundhog_port.model.config import ModelConfig
from groundhog_port.training import files
from groundhog_port.training.init import build_plan, draw
from parity_tests.support import train_fidelity as fidelity
from parity_tests.support.cases import LEGACY_ROOT, recording_dir
from parity_tests.support.models import small_sizes
from parity_tests.support.training import train_bundled_search

DATA = LEGACY_ROOT / "data"


def _data():
    if not (DATA / "binarized_text.shuffled.en.h5").is_file():
        pytest.skip(f"the shared corpus is not at {DATA}")
    return DATA.resolve()


def _init_state(rec):
    state = legacy_states.load_state(rec / "init_state.pkl")
    return state, ModelConfig.from_state(state)


# -- the draws -----------------------------------------------------------------------------
def test_draws_are_groundhogs_call_for_call():
    rec = recording_dir("init_draws")
    state, cfg = _init_state(rec)
    drawn = draw(cfg, state)
    recorded = fidelity.read_draw_log(rec / "rng_draws.jsonl.gz")
    n, first_bad = fidelity.compare_draws(drawn.log, recorded)
    assert first_bad is None, (first_bad, drawn.log[first_bad][:4], recorded[first_bad][:4])
    assert n == len(recorded) == 3871  # 1923 permutations, 1923 normals, 25 randint


def test_the_draw_check_catches_a_wrong_order():
    """Mutations the draw comparison must catch: a layer that does not seed its MRG stream,
    a weight drawn at another scale, two layers built in the other order."""
    rec = recording_dir("init_draws")
    state, cfg = _init_state(rec)
    recorded = fidelity.read_draw_log(rec / "rng_draws.jsonl.gz")
    plan = build_plan(cfg, state)
    no_seed = [
        replace(plan[1], mrg_seed=False) if i == 1 else layer for i, layer in enumerate(plan)
    ]
    first = 1 + 2 * 201  # after enc_approx_embdr: its randint, 201 x (permutation, normal)
    assert fidelity.compare_draws(draw(cfg, state, no_seed).log, recorded)[1] == first
    rescaled = [
        replace(plan[0], tensors=(replace(plan[0].tensors[0], scale=0.02),) + plan[0].tensors[1:])
    ] + plan[1:]
    assert fidelity.compare_draws(draw(cfg, state, rescaled).log, recorded)[1] == 2
    swapped = [plan[1], plan[0]] + plan[2:]
    assert fidelity.compare_draws(draw(cfg, state, swapped).log, recorded)[1] == 0


SMALL = small_sizes(12, 14, dim=8, rank=4)


VARIANTS = {
    "as is": {},
    "encdec_variant": {
        "last_backward": True,
        "bias_code": False,
        "maxout_part": 4,
        "unary_activ": "Maxout(4)",
    },
    "grconv": {
        "enc_rec_layer": "RecursiveConvolutionalLayer",
        "enc_rec_gating": False,
        "enc_rec_reseting": False,
    },
}
PLANS = [
    (p, v)
    for p in (
        "prototype_state",
        "prototype_encdec_state",
        "prototype_phrase_state",
        "prototype_search_state",
    )
    for v in VARIANTS
    if not (v == "grconv" and p == "prototype_search_state")
]  # grConv: RNNencdec only


@pytest.mark.parametrize(("proto", "variant"), PLANS)
def test_every_parameter_of_every_prototype_is_drawn(proto, variant):
    """The plans not recorded draw every saved parameter, with its shape, and a layer's MRG
    seed per constructor."""
    state = legacy_states.PROTOTYPES[proto]()
    state.update(SMALL, **VARIANTS[variant])
    cfg = ModelConfig.from_state(state)
    drawn = draw(cfg, state)
    table, _ = checkpoint.legacy_param_table(cfg)
    assert all(
        drawn.params[p.name].shape == tuple(p.shape) and drawn.params[p.name].dtype == np.float32
        for p in table
    )
    plan = build_plan(cfg, state)
    seeds = sum(1 for m, *_ in drawn.log if m == "randint")
    assert seeds == sum(layer.mrg_seed for layer in plan) + 1  # + create_lm_model's
    assert len({layer.name for layer in plan}) == len(plan)


# -- train --proto: the initial model and the first update --------------------------------
def test_train_proto_max_updates_0_writes_groundhogs_initial_model(tmp_path, caplog, one_thread):
    """The acceptance command: no update, the model GroundHog saved before its first one."""
    rec, data = recording_dir("init_draws"), _data()
    caplog.set_level(logging.INFO)
    assert (
        main(
            [
                "train",
                "--proto",
                "prototype_search_state",
                "--max-updates",
                "0",
                *fidelity.recorded_changes(rec, data, f"{tmp_path}/zero_"),
            ]
        )
        == 0
    )
    assert "drawn as GroundHog drew it" in caplog.text
    ours = checkpoint.read_npz_arrays(tmp_path / "zero_model0.npz")
    recorded = checkpoint.read_npz_arrays(rec / "init_model0.npz")
    assert sorted(ours) == sorted(recorded) and len(ours) == 40
    # bit for bit here, the orthogonal matrices included (their bound is checked below)
    assert all(
        np.array_equal(ours[n], recorded[n]) and ours[n].dtype == recorded[n].dtype
        for n in recorded
    )


def test_train_proto_draws_groundhogs_model_and_first_update(tmp_path, one_thread):
    rec, data = recording_dir("init_draws"), _data()
    r = fidelity.check_new_model(rec, data, tmp_path)
    assert r.first_bad is None and r.n_draws == 3871 and r.rng_state
    assert len(r.initial) == 40 and all(v.ok for v in r.initial.values()), r.initial
    assert set(r.orthogonal) == {
        f"{m}_{p}_transition_0" for m in "WGR" for p in ("enc", "back_enc", "dec")
    }
    assert all(v.identical for n, v in r.initial.items() if n not in r.orthogonal)
    assert max(v.bound for v in r.initial.values()) < 1.2e-7  # ~ one float32 spacing of |u| <= 1
    assert ".. iter    0 cost 2452.863" in r.stdout  # GroundHog printed this cost
    assert len(r.first_update) == 40 and all(c.ok for c in r.first_update.values()), {
        n: c.units() for n, c in r.first_update.items() if not c.ok
    }
    # the bound catches an update with Adadelta's default rho (0.96, what SGD_adadelta uses when
    # the state has no adarho) instead of the state's 0.95
    runs = [
        fidelity.continue_run(
            tmp_path / "init_state.pkl",
            tmp_path / "init_model0.npz",
            None,
            f"prefix='{tmp_path}/rho_',overwrite=1,adarho=0.96",
            None,
            0,
            1,
            float64=f64,
        ).params
        for f64 in (False, True)
    ]
    recorded0, recorded1 = (checkpoint.read_npz_arrays(rec / f"init_model{i}.npz") for i in (0, 1))
    state = legacy_states.load_state(tmp_path / "init_state.pkl")
    n_tokens = int(state["bs"]) * (int(state["seqlen"]) + 1)
    assert not all(
        c.ok
        for c in fidelity.compare_first_update(
            recorded1, recorded0, *runs, n_tokens=n_tokens
        ).values()
    )


# -- continued training ---------------------------------------------------------------------
def _search_variant():
    case = LEGACY_ROOT / "search_variant"
    if not case.is_dir():
        pytest.skip(f"the search_variant case is not at {case}")
    return case


def test_continued_training_is_groundhogs_for_30_updates(tmp_path, caplog, one_thread):
    rec, data, case = recording_dir("continue_search_variant"), _data(), _search_variant()
    caplog.set_level(logging.INFO)
    r = fidelity.check_continued(rec, case, data, tmp_path)
    assert "Adadelta restarts from ZERO accumulators" in caplog.text
    assert "timing arrays extended from 10001 to 10031" in caplog.text  # GroundHog: IndexError
    assert r.stdout.count("Got NaN while training") == 4  # as GroundHog printed
    assert np.isinf(r.recorded.values["cost"]).sum() == 4
    assert np.isnan(r.recorded.values["grad_norm"]).sum() == 6
    v = r.verdict
    assert v.same_batches and v.unstable == 0
    assert (
        len(v.updates) == 4 * 30 and sorted(v.model) == sorted(r.port.params) and len(v.model) == 39
    )
    assert v.ok, [
        (w, c.units()) for w, c in list(v.updates.items()) + list(v.model.items()) if not c.ok
    ]
    # a resumed run that ignores the saved iterator offset (the first batches again) is caught
    timing = case / "search_variant_timing.npz"
    t = dict(files.load_timings(timing))
    t["next_offset"] = np.int64(-1)
    np.savez(tmp_path / "offset0_timing.npz", **t)
    wrong = fidelity.continue_run(
        case / "search_variant_state.pkl",
        case / "search_variant_model.npz",
        tmp_path / "offset0_timing.npz",
        f"prefix='{tmp_path}/w_',reload=True,hookFreq=-1",
        data,
        10000,
        30,
    )
    assert not fidelity.compare_continued(r.recorded, wrong, r.siblings).ok


def test_parity_group_continued(one_thread):
    """``parity --case search_variant``'s group ``continued`` (the library's MainLoop, the same
    judgement): every row passes, and it finds the recording where the suite does.  Adadelta's
    accumulators reset between updates fail it (tools/mutation_sweep.py
    adadelta_accumulators_reset: continued/cost, grad_norm, log2_p_*, params_after).  ~15 s."""
    from groundhog_port import lookup
    from groundhog_port.harness.groups import continued

    rec, case = recording_dir("continue_search_variant"), _search_variant()
    assert continued.recording_dir(case) == rec
    rows = continued.check_continued(
        case / "search_variant_state.pkl",
        case / "search_variant_model.npz",
        rec,
        lookup.case_data_dirs(case),
    )
    names = {r.quantity for r in rows}
    assert names == {"continued/batches", "continued/params_after"} | {
        f"continued/{k}" for k in fidelity.SCALARS
    }
    assert all(r.passed and r.n > 0 for r in rows), [(r.quantity, r.notes) for r in rows]


# -- the restart warning and --keep-accumulators --------------------------------------------
def _fixture_train(prefix, *extra):
    """The bundled search model trained on; ``sort_k_batches=1`` so that a resumed run sees
    the batches an uninterrupted one sees (with k > 1 GroundHog skips the rest of the
    interrupted group of k batches)."""
    return train_bundled_search(_data(), prefix, "sort_k_batches=1", *extra)


def _log(caplog):
    text = caplog.text
    caplog.clear()
    return text


def test_restart_warning_and_keep_accumulators(tmp_path, caplog, capsys):
    caplog.set_level(logging.INFO)
    # GroundHog's way (default): a loud warning, no extra file; resuming restarts from zero
    assert _fixture_train(f"{tmp_path}/g_", "loopIters=2") == 0
    err = _log(caplog)
    assert "Adadelta restarts from ZERO accumulators" in err and "--keep-accumulators" in err
    assert not (tmp_path / "g_adadelta.npz").exists()
    assert _fixture_train(f"{tmp_path}/g_", "loopIters=4") == 0
    assert "Adadelta restarts from ZERO" in _log(caplog)
    # the deviation: interrupted after 2 updates and resumed = 4 updates in one run, to the bit
    assert _fixture_train(f"{tmp_path}/k_", "loopIters=2", "--keep-accumulators") == 0
    assert "no search_adadelta.npz beside" in _log(caplog)
    assert int(files.load_accumulators(tmp_path / "k_adadelta.npz")["step"]) == 2
    assert _fixture_train(f"{tmp_path}/k_", "loopIters=4", "--keep-accumulators") == 0
    err = _log(caplog)
    assert "carried over" in err and "ZERO" not in err
    assert _fixture_train(f"{tmp_path}/one_", "loopIters=4", "--keep-accumulators") == 0
    kept, one, restarted = (
        checkpoint.read_npz_arrays(tmp_path / f"{p}_model.npz") for p in ("k", "one", "g")
    )
    assert all(np.array_equal(kept[n], one[n]) for n in one)
    assert not all(np.array_equal(restarted[n], one[n]) for n in one)
    acc = files.load_accumulators(tmp_path / "k_adadelta.npz")
    np.testing.assert_array_equal(
        acc["dnorm2_W_dec_transition_0"],
        files.load_accumulators(tmp_path / "one_adadelta.npz")["dnorm2_W_dec_transition_0"],
    )
    # accumulators of another update are refused, not silently used
    np.savez(tmp_path / "one_adadelta.npz", **{**acc, "step": np.int64(3)})
    assert _fixture_train(f"{tmp_path}/one_", "loopIters=6", "--keep-accumulators") == 2
    assert "accumulators of update 3, but one_model.npz is at update 4" in capsys.readouterr().err


def test_accumulators_path():
    assert files.accumulators_path(Path("a/x_model.npz")) == Path("a/x_adadelta.npz")
    assert files.accumulators_path(Path("a/x_model3.npz")) == Path("a/x_adadelta3.npz")
    assert files.accumulators_path(Path("a/weights.npz")) is None
