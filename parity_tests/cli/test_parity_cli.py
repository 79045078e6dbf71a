"""``groundhog-port parity``: the table, the exit codes, a perturbed model, and a trace
written by tools/record_theano_traces.py (with the port standing in for GroundHog) read back.

The recorder stand-in (``PortProducer`` below) implements the producer interface of
``tools/record_theano_traces.py`` (``root_attrs``, ``pair``, ``batches``,
``representation``, ``beam_search``) with the PORT's own model, so the recording must pass
``groundhog-port parity`` exactly: this proves that the recorder's writer produces files the
parity command reads (the GroundHog producer itself needs Theano and is not run here).
"""

import importlib.util
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from groundhog_port.harness.check import find_case
from groundhog_port.harness.tolerance import K
from groundhog_port.legacy.loading import open_experiment
from groundhog_port.legacy.vocab import render_translation
from groundhog_port.search.common import SearchFailed
from groundhog_port.search.literal import BeamSearch, sample
from groundhog_port.search.scoring import batches_for, parse_pair, score_batch, score_pair
from parity_tests.support.cases import LEGACY_ROOT
from parity_tests.support.inprocess import run_cli
from parity_tests.support.nested_pytest import run_pytest

REPO = Path(__file__).resolve().parents[2]
RECORDER = REPO / "tools" / "record_theano_traces.py"
ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUTF8="1")
CASE_FILES = ("*state.pkl", "*model.npz", "*vocab*.pkl", "test.en", "test.fr")


def need_case(name):
    d = LEGACY_ROOT / name
    if not (d / "trace.h5").is_file():
        pytest.skip(f"recorded case {d} not found (set GROUNDHOG_LEGACY_TRACES)")
    return d


def parity(*args):
    """``groundhog-port parity ARGS`` as a user runs it, in this process on one thread
    (``inprocess.run_cli``: the command's code path without a second torch import)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return run_cli("parity", *args, cwd=REPO)
    finally:
        torch.set_num_threads(threads)


def copy_case(src, dst, with_trace=True):
    dst.mkdir()
    for pattern in CASE_FILES + (("trace.h5",) if with_trace else ()):
        for f in src.glob(pattern):
            if not f.name.endswith("timing.npz"):
                shutil.copy(f, dst / f.name)
    return dst


# ---------------------------------------------------------------------------------------
# the command on a shared case
# ---------------------------------------------------------------------------------------
def test_parity_case_passes_and_prints_the_table(tmp_path):
    case = need_case("search_variant")
    out = parity(
        "--case",
        case,
        "--only",
        "repr,pairs,batch,sampler,train_step",
        "--json",
        tmp_path / "r.json",
    )
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    header = [c.strip() for c in lines[0].split("|")]
    assert header == [
        "quantity",
        "n",
        "max abs err",
        "max rel err",
        "err/bound",
        "tolerance",
        "result",
    ]
    rows = {c[0]: c for c in ([x.strip() for x in l.split("|")] for l in lines[2:]) if len(c) == 7}
    for q in (
        "repr/seq",
        "repr/c",
        "repr/init_states",
        "pairs/src_ids",
        "pairs/trg_ids",
        "pairs/word_probs",
        "pairs/alignment",
        "pairs/score",
        "batch/x",
        "batch/y",
        "batch/x_mask",
        "batch/y_mask",
        "batch/scores",
    ):
        assert rows[q][6] == "PASS", rows[q]
        assert int(rows[q][1]) > 0
        if rows[q][5] != "exact":  # the largest error / bound, well inside
            assert float(rows[q][4]) < 0.5, rows[q]
    assert rows["pairs/score"][5] == f"{K:g}*noise(terms)"
    assert rows["repr/c"][5] == f"{K:g}*noise(abs)"
    # never silently skipped: what the port cannot compute yet is a row
    assert not [q for q, r in rows.items() if r[6].startswith("NOT COVERED")]
    for group in ("sampler/", "train_step/"):
        assert [q for q in rows if q.startswith(group)], group
        assert all(r[6] == "PASS" for q, r in rows.items() if q.startswith(group)), group
    assert "quantities pass" in lines[-1]
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert report["ok"] is True and report["n_compared"] > 0
    by_q = {r["quantity"]: r for r in report["rows"]}
    assert by_q["repr/c"]["worst"].startswith("repr/") and "/c[" in by_q["repr/c"]["worst"]
    assert by_q["pairs/score"]["max_abs_err"] < 1e-4
    assert by_q["train_step/params_after"]["status"] == "PASS"
    assert by_q["sampler/sample_ids"]["passed"] is True
    assert "steps/next_probs" not in by_q  # not selected with --only


def test_parity_reproduces_the_recorded_crashes(tmp_path):
    """search_variant sentence 35 crashed sample.py for every beam size; the port must fail
    there with the same message (beam label 1: kth(=512) out of bounds (321))."""
    case = need_case("search_variant")
    out = parity(
        "--case", case, "--only", "beam", "--beam-labels", "1", "--json", tmp_path / "r.json"
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "beam/1/fin_trans" in out.stdout and "beam/1/best_sentence" in out.stdout
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    fin = next(r for r in report["rows"] if r["quantity"] == "beam/1/fin_trans")
    assert fin["status"] == "PASS" and any("crash" in n for n in fin["notes"])


def test_not_covered_rows_the_recording_cannot_tell_apart_exit_0_and_are_named():
    """search's beam/5_ignore_unk cannot tell ignore_unk apart (no UNK in any beam/5
    hypothesis): an expected NOT COVERED row -- printed in the table, named on stderr, exit 0
    (docs/exit-codes.md; main exited 1 and asked for --allow-uncovered)."""
    case = need_case("search")
    out = parity("--case", case, "--only", "beam", "--beam-labels", "5_ignore_unk")
    assert out.returncode == 0, out.stdout + out.stderr
    line = next(l for l in out.stdout.splitlines() if l.startswith("beam/5_ignore_unk/ignore_unk "))
    assert "NOT COVERED (no hypothesis of beam/5 contains UNK" in line
    assert "| FAIL" not in out.stdout
    assert "1 row(s) NOT COVERED, expected" in out.stderr
    assert "beam/5_ignore_unk/ignore_unk" in out.stderr


def test_a_recorded_group_the_port_does_not_compare_exits_1_unless_allowed(monkeypatch):
    """A row NOT COVERED although the recording holds it (a recorded group in
    ``check.NOT_COVERED``, the port's own gap: none today, so one is made up here) exits 1,
    naming it and --allow-uncovered; --allow-uncovered accepts it."""
    from groundhog_port.harness import check

    monkeypatch.setitem(check.NOT_COVERED, "repr", "made up: the port cannot recompute /repr")
    case = need_case("search")
    args = ("--case", case, "--only", "repr")
    out = parity(*args)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "NOT COVERED (made up" in out.stdout
    assert "NOT COVERED that the recording holds" in out.stderr and "repr" in out.stderr
    assert "--allow-uncovered" in out.stderr
    assert parity(*args, "--allow-uncovered").returncode == 0


# ---------------------------------------------------------------------------------------
# a perturbed model fails, naming the quantities
# ---------------------------------------------------------------------------------------
def test_perturbed_weight_fails_with_the_offending_quantities(tmp_path):
    case = copy_case(need_case("search"), tmp_path / "search")
    model = next(case.glob("*model.npz"))
    with np.load(model) as z:
        params = {k: z[k] for k in z.files}
    # the output bias of the most frequent target word (id 2): every softmax row changes
    params["b_dec_deep_softmax"] = params["b_dec_deep_softmax"].copy()
    params["b_dec_deep_softmax"][2] += np.float32(3e-3)
    np.savez(model, **params)
    out = parity("--case", case, "--only", "repr,pairs", "--json", tmp_path / "r.json")
    assert out.returncode == 1, out.stdout + out.stderr
    fails = {l.split("|")[0].strip() for l in out.stdout.splitlines() if "| FAIL" in l}
    assert {"pairs/word_probs", "pairs/score"} <= fails
    assert not {q for q in fails if q.startswith("repr/")}, (
        "the encoder does not use the output bias"
    )
    for q in ("pairs/word_probs", "pairs/score"):
        line = next(l for l in out.stdout.splitlines() if l.startswith(q + " "))
        assert "worst pairs/" in line, line
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert report["ok"] is False
    wp = next(r for r in report["rows"] if r["quantity"] == "pairs/word_probs")
    assert wp["n_bad"] > 0 and wp["max_abs_err"] > 1e-5 and wp["worst"].startswith("pairs/")


# ---------------------------------------------------------------------------------------
# bad input: exit 2, one line
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, expect",
    [
        (("--case", "/nonexistent/case"), "case directory not found"),
        (("--case", "{case}", "--trace", "{bad_trace}"), "not a readable HDF5"),
    ],
)
def test_bad_input_exit_2_one_line(tmp_path, args, expect):
    case = need_case("encdec")
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"not hdf5 at all")
    out = parity(*[a.format(case=case, bad_trace=bad) for a in args])
    assert out.returncode == 2, out.stdout + out.stderr
    err = [l for l in out.stderr.splitlines() if l.strip()]
    assert (
        len(err) == 1 and err[0].startswith("groundhog-port parity: error:") and expect in err[0]
    ), err
    assert out.stdout == ""


@pytest.mark.parametrize(
    "args, expect",
    [
        (("--state", "s.pkl"), "--model"),
        (("--case", "{case}", "--only", "everything"), "unknown group"),
        (("--case", "{case}", "--only", "beam", "--beam-labels", "7_wide"), "not in the trace"),
    ],
)
def test_bad_input_exit_2(capsys, args, expect):
    from groundhog_port.cli import main as cli

    case = need_case("encdec")
    assert cli.main(["parity", *[a.format(case=case) for a in args]]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip().splitlines()[-1].startswith("groundhog-port parity: error:")
    assert expect in captured.err


# ---------------------------------------------------------------------------------------
# recorder stand-in: tools/record_theano_traces.py with the port as the producer
# ---------------------------------------------------------------------------------------
class PortProducer:
    """The producer interface of tools/record_theano_traces.py, computed by the port
    (a stand-in for ``GroundHogProducer``; it returns what the GroundHog functions return,
    in the same shapes and dtypes).  ``state_attrs``: the state values the recorder writes as
    root attributes (its ``STATE_ATTRS``)."""

    def __init__(self, exp, state_attrs):
        self.exp = exp
        self.model = exp.model
        self.voc = exp.cfg.n_sym_target
        self.state_attrs = state_attrs

    def root_attrs(self):
        s = self.exp.state
        attrs = {k: int(s[k]) for k in self.state_attrs}
        attrs.update(
            theano_version="none (groundhog-port stand-in producer)",
            param_names=sorted(n for n, _ in self.model.named_parameters()),
        )
        return attrs

    def pair(self, src_line, trg_line):
        (src, _), (trg, _) = parse_pair(
            self.exp, src_line.strip(), trg_line.strip(), allow_unk=True
        )
        s = score_pair(self.model, src, trg)
        alignment = np.zeros((1,), np.float32) if s.alignment is None else s.alignment.numpy()
        return {
            "src_ids": src,
            "trg_ids": trg,
            "word_probs": s.word_probs.numpy(),
            "alignment": alignment,
            "score": (-s.cost).numpy(),
        }

    def batches(self, source_path, target_path):
        for b in batches_for(self.exp, source_path, target_path, allow_unk=True):
            rec = b.as_dict()
            rec["scores"] = (-score_batch(self.model, b).cost).numpy()
            rec["batch_size"] = int(self.exp.state["bs"])
            yield rec

    def representation(self, line):
        seq, parsed_in = self.exp.parse_source(line.strip())
        c = self.model.encode(seq)
        return {
            "seq": seq,
            "parsed_in": parsed_in,
            "c": c.numpy(),
            "init_states": self.model.initial_states(c).numpy(),
        }

    def _step(self, d):
        n = lambda t: t.cpu().numpy()
        best = n(d["trans_indices"]) * self.voc + n(d["word_indices"])
        return {
            "k": int(d["k"]),
            "n_samples": int(d["trans_indices"].numel()),
            "last_words": n(d["last_words"]),
            "states_in": n(d["states_in"])[None],
            "next_probs": n(d["next_probs"]),
            "flat_next_costs": n(d["flat_next_costs"]),
            "best_costs_indices": best,
            "trans_indices": n(d["trans_indices"]),
            "word_indices": n(d["word_indices"]),
            "costs": n(d["costs"]),
            "states_gathered": n(d["states_gathered"])[None],
            "next_states": n(d["next_states"])[None],
        }

    def beam_search(self, seq, beam_size, ignore_unk=False, normalize=False, instrument=False):
        steps = []
        searcher = BeamSearch(
            self.model, recorder=(lambda d: steps.append(self._step(d))) if instrument else None
        )
        try:
            if instrument:
                minlen = len(seq) // 2
                hyps = searcher.search(seq, beam_size, ignore_unk=ignore_unk, minlen=minlen)
                return {"steps": steps, "trans": hyps.trans, "costs": hyps.costs, "minlen": minlen}
            hyps = sample(searcher, seq, beam_size, ignore_unk, normalize)
        except SearchFailed as err:  # what sample.py raised there: numpy's ValueError
            exc = ValueError(str(err))
            exc.trace_steps = steps
            raise exc from None
        return {
            "trans": hyps.trans,
            "costs": hyps.costs,
            "sentences": [render_translation(self.exp.trg_idx2word, t) for t in hyps.trans],
        }


def load_recorder():
    spec = importlib.util.spec_from_file_location("record_theano_traces_parity", str(RECORDER))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def stand_in_case(tmp_path_factory):
    """A case folder whose trace.h5 tools/record_theano_traces.py wrote with the port as the
    producer: 3 sentences of search_variant, one of which (``hello``) crashes sample.py."""
    src_case = need_case("search_variant")
    tmp = tmp_path_factory.mktemp("stand_in")
    case = copy_case(src_case, tmp / "mine", with_trace=False)
    src = (src_case / "test.en").read_text(encoding="utf-8").splitlines()
    trg = (src_case / "test.fr").read_text(encoding="utf-8").splitlines()
    pick = [0, 35, 5]  # 35: "hello", where sample.py crashed
    (case / "test.en").write_text("".join(src[i] + "\n" for i in pick), encoding="utf-8")
    (case / "test.fr").write_text("".join(trg[i] + "\n" for i in pick), encoding="utf-8")
    files = find_case(src_case)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        exp = open_experiment(files.state, files.model, data_dir=src_case)
        rec = load_recorder()
        argv = [
            "--groundhog",
            str(tmp),
            "--state",
            str(files.state),
            "--model",
            str(files.model),
            "--source",
            str(case / "test.en"),
            "--target",
            str(case / "test.fr"),
            "--output",
            str(case / "trace.h5"),
            "--steps",
            "2",
            "--beam-sizes",
            "1",
            "5_normalize",
            "5_ignore_unk",
            "--case",
            "mine",
        ]
        assert rec.main(argv, producer=PortProducer(exp, rec.STATE_ATTRS)) == 0
    finally:
        torch.set_num_threads(threads)
    return case


def test_recorder_stand_in_trace_passes_parity(stand_in_case, tmp_path):
    """The written trace (pairs, batch, repr, steps, beam incl. error records) reads back and
    passes ``groundhog-port parity`` with the port's own numbers."""
    out = parity("--case", stand_in_case, "--json", tmp_path / "r.json", "--allow-uncovered")
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    rows = {r["quantity"]: r for r in report["rows"]}
    for q in (
        "repr/c",
        "pairs/word_probs",
        "pairs/score",
        "batch/scores",
        "steps/next_probs",
        "steps/flat_next_costs",
        "steps/survivors",
        "steps/next_states",
        "steps/fin_trans",
        "beam/1/fin_trans",
        "beam/5_normalize/fin_costs",
        "beam/5_ignore_unk/best_sentence",
    ):
        assert rows[q]["status"] == "PASS" and rows[q]["n"] > 0, rows[q]
    # the port against itself: the same numbers (max_abs_err: the product against the recording)
    for q in (
        "repr/c",
        "pairs/word_probs",
        "steps/next_probs",
        "steps/next_states",
        "beam/1/fin_costs",
    ):
        assert rows[q]["max_abs_err"] == 0, rows[q]
    assert any("crash" in n for n in rows["beam/1/fin_trans"]["notes"])
    # this stand-in offers no sampler_record() / train_step(), so the recorder wrote neither group
    assert "sampler" not in rows and "train_step" not in rows


def test_pytest_plugin_on_a_user_case(stand_in_case):
    """``pytest parity_tests/parity/test_legacy_cases.py --legacy-case DIR``: one test per group and
    beam label of that case only, all passing."""
    out = run_pytest(
        REPO / "parity_tests" / "parity" / "test_legacy_cases.py",
        "--legacy-case",
        stand_in_case,
        "-rA",
        env={**ENV, "CI": ""},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    passed = sorted(
        l.split("[", 1)[1].rsplit("]", 1)[0]
        for l in out.stdout.splitlines()
        if l.startswith("PASSED")
    )
    assert passed == sorted(
        [
            "mine-repr",
            "mine-pairs",
            "mine-batch",
            "mine-steps",
            "mine-beam[1]",
            "mine-beam[5_normalize]",
            "mine-beam[5_ignore_unk]",
        ]
    ), out.stdout
