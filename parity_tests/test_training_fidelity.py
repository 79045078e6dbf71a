"""``train`` against GroundHog's own recorded training runs (groundhog_port.training.fidelity).

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
import hashlib
import json
import logging
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conftest import FIXTURES, LEGACY_ROOT, recording_dir

import legacy_states
from groundhog_port import checkpoint
from groundhog_port.cli import main
from groundhog_port.config import ModelConfig
from groundhog_port.training import fidelity, files
from groundhog_port.training.init import build_plan, draw

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
    summary = json.loads((rec / "rng_log_summary.json").read_text())
    _, key, pos, *_ = drawn.rng.get_state()
    assert pos == summary["rng_state_after_build"]["pos"]
    assert hashlib.sha256(key.tobytes()).hexdigest() == summary["rng_state_after_build"]["key_sha256"]


def test_the_draw_check_catches_a_wrong_order():
    """Mutations the draw comparison must catch: a layer that does not seed its MRG stream,
    a weight drawn at another scale, two layers built in the other order."""
    rec = recording_dir("init_draws")
    state, cfg = _init_state(rec)
    recorded = fidelity.read_draw_log(rec / "rng_draws.jsonl.gz")
    plan = build_plan(cfg, state)
    no_seed = [replace(plan[1], mrg_seed=False) if i == 1 else layer for i, layer in enumerate(plan)]
    first = 1 + 2 * 201          # after enc_approx_embdr: its randint, 201 x (permutation, normal)
    assert fidelity.compare_draws(draw(cfg, state, no_seed).log, recorded)[1] == first
    rescaled = [replace(plan[0], tensors=(replace(plan[0].tensors[0], scale=0.02),)
                        + plan[0].tensors[1:])] + plan[1:]
    assert fidelity.compare_draws(draw(cfg, state, rescaled).log, recorded)[1] == 2
    swapped = [plan[1], plan[0]] + plan[2:]
    assert fidelity.compare_draws(draw(cfg, state, swapped).log, recorded)[1] == 0


# -- train --proto: the initial model and the first update --------------------------------
def _recorded_changes(rec, data, prefix, **extra):
    """The changes of init_draws/train_cmd.sh, the corpus where it is here."""
    summary = json.loads((rec / "rng_log_summary.json").read_text())
    common, case = summary["changes"]
    case = case.replace("prefix='init_'", f"prefix='{prefix}'")
    return [common.replace("/data/legacy/data", str(data)), case] + [f"{k}={v}" for k, v in extra.items()]


def test_train_proto_draws_groundhogs_model_and_first_update(tmp_path, capsys, caplog, one_thread):
    rec, data = recording_dir("init_draws"), _data()
    caplog.set_level(logging.INFO)
    # the acceptance command: no update, the model GroundHog saved before its first update
    assert main(["train", "--proto", "prototype_search_state", "--max-updates", "0",
                 *_recorded_changes(rec, data, f"{tmp_path}/zero_")]) == 0
    assert "drawn as GroundHog drew it" in caplog.text
    state, cfg = _init_state(rec)
    drawn = draw(cfg, state)
    orth = {m.name: m.scale for layer in build_plan(cfg, state) for m in layer.tensors
            if getattr(m, "fn", "") == "sample_weights_orth"}
    recorded0 = checkpoint.read_npz_arrays(rec / "init_model0.npz")
    ours0 = checkpoint.read_npz_arrays(tmp_path / "zero_model0.npz")
    verdict = fidelity.compare_initial(recorded0, ours0, drawn.svd_inputs, orth)
    assert len(verdict) == len(ours0) == 40 and all(v.ok for v in verdict.values()), verdict
    assert set(orth) == {"W_enc_transition_0", "G_enc_transition_0", "R_enc_transition_0",
                         "W_back_enc_transition_0", "G_back_enc_transition_0",
                         "R_back_enc_transition_0", "W_dec_transition_0", "G_dec_transition_0",
                         "R_dec_transition_0"}
    assert all(v.identical for n, v in verdict.items() if n not in orth)
    assert max(v.bound for v in verdict.values()) < 1.2e-7  # ~ one float32 spacing of |u| <= 1

    # one update, as recorded (loopIters=1): the train command's float32 model against the
    # float64 shadow's same update
    assert main(["train", "--proto", "prototype_search_state",
                 *_recorded_changes(rec, data, f"{tmp_path}/init_")]) == 0
    out = capsys.readouterr().out
    assert ".. iter    0 cost 2452.863" in out     # GroundHog printed this cost
    p64 = fidelity.continue_run(tmp_path / "init_state.pkl", tmp_path / "init_model0.npz", None,
                                f"prefix='{tmp_path}/f64_',overwrite=1", None, 0, 1,
                                float64=True).params
    ours1 = checkpoint.read_npz_arrays(tmp_path / "init_model1.npz")
    recorded1 = checkpoint.read_npz_arrays(rec / "init_model1.npz")
    first = fidelity.compare_first_update(recorded1, recorded0, ours1, p64)
    assert len(first) == 40 and all(c.ok for c in first.values()), \
        {n: c.units() for n, c in first.items() if not c.ok}
    changed = [n for n in recorded1 if not np.array_equal(recorded1[n], recorded0[n])]
    assert len(changed) == 29 and all(not np.array_equal(ours1[n], ours0[n]) for n in changed)


# -- continued training ---------------------------------------------------------------------
def _continue_case(tmp_path, timing=None):
    """GroundHog's command of continue_search_variant/cmd.txt: the checkpoint copied to the
    run's prefix (reload=True), the timing file as saved (GroundHog needed it padded)."""
    case = LEGACY_ROOT / "search_variant"
    if not case.is_dir():
        pytest.skip(f"the search_variant case is not at {case}")
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(case / "search_variant_model.npz", run / "search_variant_model.npz")
    shutil.copy(timing or case / "search_variant_timing.npz", run / "search_variant_timing.npz")
    return case, run


def test_continued_training_is_groundhogs_for_30_updates(tmp_path, capsys, caplog, one_thread):
    rec, data = recording_dir("continue_search_variant"), _data()
    caplog.set_level(logging.INFO)
    case, run = _continue_case(tmp_path)
    state = case / "search_variant_state.pkl"
    changes = f"prefix='{run}/search_variant_',reload=True,hookFreq=-1"
    assert main(["train", "--state", str(state), "--data-dir", str(data),
                 changes + ",loopIters=10030"]) == 0
    out, err = capsys.readouterr().out, caplog.text
    assert "Adadelta restarts from ZERO accumulators" in err
    assert "timing arrays extended from 10001 to 10031" in err      # GroundHog: IndexError
    assert out.count("Got NaN while training") == 4                 # as GroundHog printed
    port = fidelity.run_of(files.load_timings(run / "search_variant_timing.npz"),
                           checkpoint.read_npz_arrays(run / "search_variant_model.npz"), 10000, 30)
    recorded = fidelity.run_of(
        files.load_timings(rec / "search_variant_after_10030_timing.npz"),
        checkpoint.read_npz_arrays(rec / "search_variant_after_10030_model.npz"), 10000, 30)
    assert np.isinf(recorded.values["cost"]).sum() == 4 and np.isnan(recorded.values["grad_norm"]).sum() == 6

    # the siblings: the checkpoint moved by one update's float32 noise, eight times (with four,
    # the worst final-model ratio varied from 8 to 20 units with the random signs; with eight
    # 10.6-11.3, with sixteen 10.9: docs/training.md)
    model, timing = case / "search_variant_model.npz", case / "search_variant_timing.npz"
    scratch = f"prefix='{tmp_path}/sib_',reload=True,hookFreq=-1"
    one = {dt: fidelity.continue_run(state, model, timing, scratch, data, 10000, 1, float64=dt == 64)
           for dt in (32, 64)}
    start = {k: v.astype(np.float64) for k, v in checkpoint.read_npz_arrays(model).items()}
    perturbations = fidelity.sibling_perturbations(start, one[32].params, one[64].params, 8)
    siblings = [fidelity.continue_run(state, model, timing, scratch, data, 10000, 30, perturb=p)
                for p in perturbations]
    verdict = fidelity.compare_continued(recorded, port, siblings)
    assert verdict.same_batches and verdict.unstable == 0
    assert verdict.ok, [(w, c.units()) for w, c in list(verdict.updates.items())
                        + list(verdict.model.items()) if not c.ok]

    # a resumed run that ignores the saved iterator offset (training on the first batches
    # again) is caught
    t = dict(files.load_timings(timing))
    t["next_offset"] = np.int64(-1)
    np.savez(tmp_path / "offset0_timing.npz", **t)
    wrong = fidelity.continue_run(state, model, tmp_path / "offset0_timing.npz", scratch, data,
                                  10000, 30)
    assert not fidelity.compare_continued(recorded, wrong, siblings).ok


# -- the restart warning and --keep-accumulators --------------------------------------------
def _fixture_train(prefix, *extra):
    """The bundled search model trained on; ``sort_k_batches=1`` so that a resumed run sees
    the batches an uninterrupted one sees (with k > 1 GroundHog skips the rest of the
    interrupted group of k batches)."""
    data = _data()
    return main(["--threads", "1", "train", "--state", str(FIXTURES / "search" / "search_state.pkl"),
                 "--model", str(FIXTURES / "search" / "search_model.npz"), "--data-dir", str(data),
                 f"prefix='{prefix}'", "sort_k_batches=1", *extra])


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
    kept, one, restarted = (checkpoint.read_npz_arrays(tmp_path / f"{p}_model.npz")
                            for p in ("k", "one", "g"))
    assert all(np.array_equal(kept[n], one[n]) for n in one)
    assert not all(np.array_equal(restarted[n], one[n]) for n in one)
    acc = files.load_accumulators(tmp_path / "k_adadelta.npz")
    np.testing.assert_array_equal(acc["dnorm2_W_dec_transition_0"],
                                  files.load_accumulators(tmp_path / "one_adadelta.npz")["dnorm2_W_dec_transition_0"])
    # accumulators of another update are refused, not silently used
    np.savez(tmp_path / "one_adadelta.npz", **{**acc, "step": np.int64(3)})
    assert _fixture_train(f"{tmp_path}/one_", "loopIters=6", "--keep-accumulators") == 2
    assert "accumulators of update 3, but one_model.npz is at update 4" in capsys.readouterr().err


def test_accumulators_path():
    assert files.accumulators_path(Path("a/x_model.npz")) == Path("a/x_adadelta.npz")
    assert files.accumulators_path(Path("a/x_model3.npz")) == Path("a/x_adadelta3.npz")
    assert files.accumulators_path(Path("a/weights.npz")) is None
