"""Training (groundhog_port.training): one SGD_adadelta update against the recordings, the
files train.py writes, resuming, and a short run from the bundled fixture.

The 100-update check (the training cost of the trained-on batches goes down, the saved
checkpoint scores the test set) runs as ``tools/train_check.py``; here a short run checks
the mechanics in a few seconds (set ``GROUNDHOG_TRAIN_CHECK=1`` to run the 100 updates too).
"""

import glob
import json
import os
import pickle
import pickletools

import h5py
import numpy as np
import pytest
import torch

import legacy_states
from groundhog_port.cli.main import main
from groundhog_port.harness.check import check, find_case
from groundhog_port.harness.trace import TraceFile
from groundhog_port.legacy.loading import open_experiment
from groundhog_port.model.config import ModelConfig
from groundhog_port.training.adadelta import SGDAdadelta
from groundhog_port.training.files import dumps_state, load_timings
from groundhog_port.training.order import param_order
from parity_tests.support.cases import CASES, FIXTURES, LEGACY_ROOT
from parity_tests.support.command_lines import score_args
from parity_tests.support.training import train_bundled_search

DATA = LEGACY_ROOT / "data"


def need(path):
    if not path.exists():
        pytest.skip(f"recordings not found at {path} (set GROUNDHOG_LEGACY_TRACES)")
    return path


@pytest.mark.parametrize("case", CASES)
def test_param_order_is_the_recorded_one(case):
    d = need(LEGACY_ROOT / case)
    state = legacy_states.load_state(glob.glob(str(d / "*state.pkl"))[0])
    with h5py.File(d / "trace.h5", "r") as f:
        recorded = json.loads(f["train_step"].attrs["param_order"])
    assert param_order(ModelConfig.from_state(state)) == recorded


def test_train_step_parity(one_thread):
    """/train_step of the search case (test_legacy_cases.py runs the group on every case):
    batch ==, then one SGDAdadelta.step (what train runs) from the recorded batch: cost / grad
    norm / properties / clipped gradients / accumulators / parameters, under derived bounds."""
    files = find_case(need(LEGACY_ROOT / "search"))
    exp = open_experiment(files.state, files.model, data_dir=files.dir)
    with TraceFile(files.trace) as tr:
        report = check(exp, tr, groups=("train_step",))
    rows = {r.quantity: r for r in report.rows if r.group == "train_step"}
    for q in (
        "x",
        "x_mask",
        "y",
        "y_mask",
        "param_order",
        "cost",
        "grad_norm",
        "log2_p_word",
        "log2_p_expl",
        "clipped_grads",
        "gnorm2_after",
        "dnorm2_after",
        "params_after",
    ):
        row = rows[f"train_step/{q}"]
        assert row.covered and row.n > 0 and row.passed, report.table()
    # the real SGDAdadelta.step (the product's own gradients, then its update) well inside
    for q in ("clipped_grads", "gnorm2_after", "dnorm2_after", "params_after"):
        row = rows[f"train_step/{q}"]
        assert row.product.startswith("SGDAdadelta.step") and row.max_ratio < 0.5, report.table()


@pytest.mark.parametrize("case", CASES)
def test_adadelta_update_is_bit_identical_from_the_recorded_gradients(case):
    """The update alone (``SGDAdadelta.update``: gnorm2, then update_fn) fed GroundHog's own
    clipped gradients of /train_step, from the checkpoint and zero accumulators: the
    accumulators and the parameters after it equal the recorded ones bit for bit (the
    README's claim; the gradients themselves differ by float32 noise, which
    test_train_step_parity bounds).  Proven: torch's own float32 ``sqrt`` in place of
    ``sqrt_rn``, or ``1 - rho`` one float32 ulp off, fails it on every case."""
    files = find_case(need(LEGACY_ROOT / case))
    exp = open_experiment(files.state, files.model, data_dir=files.dir)
    with TraceFile(files.trace) as tr:
        rec = tr.train_step()
    trainer = SGDAdadelta(exp.model, dict(exp.state))
    trainer.update([torch.as_tensor(rec["clipped_grads"][n]) for n in trainer.names])
    after = {
        "params_after": trainer.params,
        "gnorm2_after": trainer.gnorm2,
        "dnorm2_after": trainer.dnorm2,
    }
    for quantity, tensors in after.items():
        assert sorted(rec[quantity]) == sorted(trainer.names), quantity
        for name, t in zip(trainer.names, tensors):
            assert np.array_equal(t.numpy(), rec[quantity][name]), (quantity, name)


def test_state_pickle_is_python2_protocol_2():
    state = legacy_states.prototype_search_state()
    state.update(
        {
            "prefix": "out/é_",
            "source": ["a.h5"],
            "big": 2**40,
            "t": (1, 2.5),
            "np": np.float32(0.5),
            "none": None,
        }
    )
    data = dumps_state(state)
    ops = {op.name for op, _, _ in pickletools.genops(data)}
    assert data[:2] == b"\x80\x02"
    assert not ops & {
        "BINUNICODE",
        "SHORT_BINUNICODE",
        "UNICODE",
        "FRAME",
        "BINBYTES",
        "SHORT_BINBYTES",
        "GLOBAL",
        "STACK_GLOBAL",
        "REDUCE",
    }
    back = pickle.loads(data, encoding="utf-8")
    assert back["prefix"] == "out/é_" and back["np"] == 0.5 and back["t"] == (1, 2.5)
    assert pickle.loads(data, encoding="bytes")[b"prefix"] == "out/é_".encode()
    with pytest.raises(Exception, match="plain data"):
        dumps_state({"x": object()})


def _train(tmp_path, *extra):
    need(DATA / "binarized_text.shuffled.en.h5")
    return train_bundled_search(DATA, f"{tmp_path}/s_", *extra)


def test_continue_training_saves_resumes_and_scores(tmp_path, capsys):
    assert _train(tmp_path, "loopIters=3") == 0
    out = capsys.readouterr().out
    assert ".. iter    0 cost 34.191" in out  # the recorded first update (rval_cost 34.1913)
    assert "grad_norm" in out and "words/s" in out
    t = load_timings(tmp_path / "s_timing.npz")
    recorded = load_timings(LEGACY_ROOT / "search" / "search_timing.npz")
    assert set(t) == set(recorded)
    assert int(t["step"]) == 3 and t["cost"].shape == (4,) and np.all(t["cost"][:3] > 0)
    offset = int(t["next_offset"])
    assert offset > 0
    state = legacy_states.load_state(tmp_path / "s_state.pkl")
    assert state["step"] == 2 and state["prefix"] == f"{tmp_path}/s_"
    # resume: the same command with more updates continues at step 3 and the saved offset
    assert _train(tmp_path, "loopIters=5") == 0
    assert ".. iter    3 " in capsys.readouterr().out
    t2 = load_timings(tmp_path / "s_timing.npz")
    assert int(t2["step"]) == 5 and t2["cost"].shape == (6,)  # arrays grown past loopIters=3
    np.testing.assert_array_equal(t2["cost"][:3], t["cost"][:3])
    # the checkpoint loads back (strictly) and scores the test set
    exp = open_experiment(tmp_path / "s_state.pkl", tmp_path / "s_model.npz", data_dir=DATA)
    fx = FIXTURES / "search"
    checkpoint = dict(state=tmp_path / "s_state.pkl", model=tmp_path / "s_model.npz")
    argv = score_args(
        "batch", fx / "test.en", fx / "test.fr", "--allow-unk", "--data-dir", fx, **checkpoint
    )
    assert main([str(a) for a in argv]) == 0
    scores = capsys.readouterr().out.split()
    assert len(scores) == 40 and exp.cfg.search


KILLED_AFTER_TWO_RENAMES = """
import os, signal, sys
from pathlib import Path
real, renamed = os.replace, []

def replace(src, dst):  # SIGKILL in the second save (the first is at the start, as
    real(src, dst)      # mainLoop.py:263 saves), its model and state renamed, not its timings
    if not str(dst).endswith(".together"):
        renamed.append(dst)
        if len(renamed) == 3 + 2:
            os.kill(os.getpid(), signal.SIGKILL)

os.replace = replace
from parity_tests.support.training import train_bundled_search
sys.exit(train_bundled_search(Path(sys.argv[1]), sys.argv[2], "loopIters=3"))
"""


def test_a_save_killed_between_its_renames_is_completed_on_the_next_start(tmp_path, capsys, caplog):
    """SIGKILL between the renames of a save leaves the model and the state of update 3 beside
    the timings of update 2; the next ``train`` completes the save from its rename journal
    (groundhog_port/together.py) and continues at update 3, ending with the model of runs
    that were never killed."""
    import shutil
    import subprocess
    import sys

    from groundhog_port.legacy.checkpoint import read_npz_arrays
    from groundhog_port.together import journal_of

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    assert _train(a, "loopIters=2") == 0
    shutil.copytree(a, b)
    p = subprocess.run(
        [sys.executable, "-c", KILLED_AFTER_TWO_RENAMES, str(DATA), f"{b}/s_"],
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
        capture_output=True,
        text=True,
    )
    assert p.returncode == -9, p.stderr
    assert int(load_timings(b / "s_timing.npz")["step"]) == 2  # split: the old timings
    assert legacy_states.load_state(b / "s_state.pkl")["step"] == 2  # the new state
    assert journal_of(b / "s_timing.npz").exists()
    capsys.readouterr()
    assert _train(b, "loopIters=4") == 0
    out = capsys.readouterr().out
    assert "stopped between its renames" in caplog.text and ".. iter    3 " in out, out
    assert ".. iter    2 " not in out
    assert not journal_of(b / "s_timing.npz").exists()
    # never killed: 2 -> 3, then 3 -> 4 (each run starts Adadelta again, as GroundHog did)
    assert _train(a, "loopIters=3") == 0 and _train(a, "loopIters=4") == 0
    never_killed, completed = (read_npz_arrays(d / "s_model.npz", "model") for d in (a, b))
    assert completed.keys() == never_killed.keys()
    for k in never_killed:
        np.testing.assert_array_equal(completed[k], never_killed[k], err_msg=k)
    assert int(load_timings(b / "s_timing.npz")["step"]) == 4


def test_bad_prefix_is_one_line(tmp_path, capsys):
    assert _train(tmp_path / "missing") == 2
    err = capsys.readouterr().err
    assert "prefix" in err and len(err.strip().splitlines()) == 1


def test_plot_training(tmp_path, capsys):
    timing = need(LEGACY_ROOT / "search" / "search_timing.npz")
    pytest.importorskip("matplotlib")
    assert main(["plot-training", str(timing), "--out", str(tmp_path / "c.png")]) == 0
    line = capsys.readouterr().out.strip()
    tm = load_timings(timing)
    expected = float(np.mean(tm["log2_p_expl"][5900:6000]))
    assert line.startswith("Average log2_p_expl is") and "after 6000 iterations" in line
    assert abs(float(line.split()[3]) - expected) < 1e-6
    assert (tmp_path / "c.png").stat().st_size > 1000


@pytest.mark.skipif(
    os.environ.get("GROUNDHOG_TRAIN_CHECK", "") in ("", "0"),
    reason="100 updates take ~30-60 s on a 2-core machine; run with "
    "GROUNDHOG_TRAIN_CHECK=1 or tools/train_check.py",
)
def test_100_updates_lower_the_training_cost(tmp_path, one_thread):
    from groundhog_port.training.check import train_and_check

    fx = FIXTURES / "search"
    r = train_and_check(
        fx / "search_state.pkl",
        fx / "search_model.npz",
        need(DATA),
        f"{tmp_path}/s_",
        100,
        fx / "test.en",
        fx / "test.fr",
    )
    assert r.cost_after < r.cost_before
    assert r.test_sentences == 40 and np.isfinite(r.test_cost)


def test_interrupted_run_saves_and_resumes(tmp_path):
    """SIGINT during a run: the update in progress finishes, everything is saved, and the
    next run resumes at the saved step and iterator offset."""
    import signal

    from groundhog_port.training.loop import MainLoop, new_timings

    class InterruptAfterFirstLine:
        def __init__(self):
            self.lines = []

        def write(self, text):
            if text.startswith(".. iter") and not self.lines:
                os.kill(os.getpid(), signal.SIGINT)
            self.lines.append(text)

        def flush(self):
            pass

    fx = FIXTURES / "search"
    exp = open_experiment(
        fx / "search_state.pkl",
        fx / "search_model.npz",
        f"prefix='{tmp_path}/s_',loopIters=50",
        data_dir=need(DATA),
    )
    out = InterruptAfterFirstLine()
    loop = MainLoop(
        exp.model,
        exp.state,
        new_timings(exp.state),
        exp.path("source"),
        exp.path("target"),
        out=out,
    )
    assert loop.run() == 1
    t = load_timings(tmp_path / "s_timing.npz")
    assert int(t["step"]) == 1 and int(t["next_offset"]) > 0
    assert not list(tmp_path.glob("*.partial"))
    resumed = open_experiment(tmp_path / "s_state.pkl", tmp_path / "s_model.npz", data_dir=DATA)
    loop2 = MainLoop(
        resumed.model,
        resumed.state,
        t,
        resumed.path("source"),
        resumed.path("target"),
        out=out,
        max_updates=1,
    )
    assert loop2.run() == 1 and int(load_timings(tmp_path / "s_timing.npz")["step"]) == 2


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--state", "{tmp}/missing_state.pkl"],
        ["train", "--proto", "prototype_search_state", "prefix='{tmp}/x_'"],
        [
            "train",
            "--state",
            str(FIXTURES / "search" / "search_state.pkl"),
            "--model",
            "{tmp}/junk.npz",
            "--data-dir",
            str(DATA),
            "prefix='{tmp}/x_'",
        ],
        ["train", "--state", str(FIXTURES / "search" / "search_state.pkl"), "dropout=0.5"],
        ["plot-training", "{tmp}/junk.npz", "--out", "{tmp}/c.png"],
        [
            "plot-training",
            str(LEGACY_ROOT / "search" / "search_timing.npz"),
            "--out",
            "{tmp}/c.xyz",
        ],
    ],
    ids=["missing-state", "no-corpora", "junk-model", "dropout", "junk-timing", "picture-format"],
)
def test_bad_training_input_is_one_line(tmp_path, capsys, argv):
    (tmp_path / "junk.npz").write_bytes(b"junk")
    if "{tmp}/junk.npz" in argv and "--model" in argv:
        need(DATA / "binarized_text.shuffled.en.h5")
    assert main([a.replace("{tmp}", str(tmp_path)) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and " error: " in err[0], err


def test_snapshots_numbered_from_0_in_each_run_with_overwrite_0(tmp_path, capsys):
    """mainLoop.py:230-236: with ``overwrite=0`` every save writes ``<prefix>model%d.npz`` with
    ``save_iter`` -- 0 for a run's first save, one more per save, 0 again in a new process
    (:270) -- beside the one ``timing.npz`` and ``state.pkl``; never ``<prefix>model.npz``.
    ``main`` saves before the first update (:271) and after the last (:353): ``model0`` holds
    the parameters the run started from, ``model1`` those it ended with."""
    from groundhog_port.training.loop import MainLoop, new_timings

    assert _train(tmp_path, "loopIters=2", "overwrite=0") == 0
    capsys.readouterr()
    assert sorted(p.name for p in tmp_path.glob("s_model*")) == ["s_model0.npz", "s_model1.npz"]
    start, end = (np.load(tmp_path / f"s_model{k}.npz") for k in (0, 1))
    initial = np.load(FIXTURES / "search" / "search_model.npz")
    assert all(np.array_equal(start[k], initial[k]) for k in initial.files)
    assert not all(np.array_equal(end[k], initial[k]) for k in initial.files)
    fx = FIXTURES / "search"
    exp = open_experiment(
        fx / "search_state.pkl",
        fx / "search_model.npz",
        f"prefix='{tmp_path}/t_',overwrite=0",
        data_dir=need(DATA),
    )
    loop = MainLoop(
        exp.model, exp.state, new_timings(exp.state), exp.path("source"), exp.path("target")
    )
    for _ in range(3):
        loop.save()
    names = sorted(p.name for p in tmp_path.glob("t_*"))
    assert names == ["t_model0.npz", "t_model1.npz", "t_model2.npz", "t_state.pkl", "t_timing.npz"]
