"""tools/record_theano_traces.py: argument handling, the trace it writes (read back with
groundhog_port.harness.trace.TraceFile) and its Python-2.7 compatibility.

GroundHog/Theano are not needed: ``main(argv, producer=...)`` takes a stand-in producer
(FAKE_PRODUCER below, deterministic random records of the documented shapes).  When a
Python 2.7 interpreter with numpy and h5py is found (``GROUNDHOG_PY2`` or the usual
places), the same recording is also made under Python 2 and compared.
"""

import ast
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from groundhog_port.harness.trace import TraceFile
from parity_tests.support.cases import REPO
from parity_tests.support.recorder import (
    MOCK_GROUNDHOG,
    MOCK_PAD,
    RECORDER,
    REFERENCE_COMMIT,
    lay_out_mock_case,
    load_module,
    recorder_args,
    write_corpus,
)

FAKE_PRODUCER = (
    '''# -*- coding: utf-8 -*-
"""A stand-in for GroundHog: deterministic random records of the documented shapes."""
from __future__ import print_function, division
import io
import numpy

V_SRC, V_TRG, DIM, LEVELS, C_DIM = 10, 12, 4, 1, 8
'''
    + MOCK_PAD
    + """

class FakeProducer(object):
    def __init__(self, fail_on=u"hello"):
        self.rng = numpy.random.RandomState(1234)
        self.fail_on = fail_on
        self.returned = {"pairs": [], "batches": [], "repr": [], "beam": []}

    def root_attrs(self):
        return {"null_sym_source": V_SRC - 1, "null_sym_target": V_TRG - 1, "n_sym_source": V_SRC,
                "n_sym_target": V_TRG, "unk_sym_source": 1, "unk_sym_target": 1, "seed": 1234,
                "theano_version": "fake", "param_names": ["W_a", "b_b"]}

    def _ids(self, line, v):
        ids = [2 + (len(w) % (v - 3)) for w in line.split()] + [v - 1]
        return numpy.array(ids, dtype="int64")

    def pair(self, src_line, trg_line):
        src, trg = self._ids(src_line, V_SRC), self._ids(trg_line, V_TRG)
        probs = self.rng.uniform(0.01, 1, size=(len(trg), 1)).astype("float32")
        rec = {"src_ids": src, "trg_ids": trg, "word_probs": probs,
               "alignment": self.rng.uniform(size=(len(trg), len(src), 1)).astype("float32"),
               "score": numpy.array([numpy.log(probs).sum()], dtype="float32")}
        if len(self.returned["pairs"]) == 1:
            rec["score"] = numpy.array([-numpy.inf], dtype="float32")
        if len(self.returned["pairs"]) == 2:
            rec["score"] = numpy.array([numpy.nan], dtype="float32")
        self.returned["pairs"].append(rec)
        return rec

    def batches(self, source_path, target_path):
        src = [l.strip() for l in io.open(source_path, encoding="utf-8")]
        trg = [l.strip() for l in io.open(target_path, encoding="utf-8")]
        for start in range(0, len(src), 3):
            xs = [self._ids(l, V_SRC) for l in src[start:start + 3]]
            ys = [self._ids(l, V_TRG) for l in trg[start:start + 3]]
            rec = {}
            for name, seqs in (("x", xs), ("y", ys)):
                rec[name], rec[name + "_mask"] = pad(seqs)
            rec["scores"] = -self.rng.uniform(1, 50, size=len(xs)).astype("float32")
            rec["batch_size"] = 3
            self.returned["batches"].append(rec)
            yield rec

    def representation(self, line):
        line = line.strip()
        seq = self._ids(line, V_SRC)
        rec = {"seq": seq, "parsed_in": line + u" <eos>",
               "c": self.rng.normal(size=(len(seq), C_DIM)).astype("float32"),
               "init_states": self.rng.normal(size=(LEVELS, DIM)).astype("float32")}
        self.returned["repr"].append(rec)
        return rec

    def _hyps(self, n):
        trans = [numpy.append(self.rng.randint(2, V_TRG - 1, size=1 + self.rng.randint(4)), V_TRG - 1)
                 for _ in range(n)]
        costs = numpy.sort(self.rng.uniform(0, 20, size=n))
        return trans, costs

    def beam_search(self, seq, beam_size, ignore_unk=False, normalize=False, instrument=False):
        if len(seq) == 2 and seq[0] == 2 + (len(self.fail_on) % (V_SRC - 3)):
            err = ValueError("kth(=640) out of bounds (12)")
            if instrument:
                err.trace_steps = self._steps(2, beam_size)
            raise err
        trans, costs = self._hyps(beam_size)
        if instrument:
            return {"steps": self._steps(3, beam_size), "trans": trans, "costs": costs,
                    "minlen": len(seq) // 2}
        if normalize:
            costs = costs / numpy.array([len(t) for t in trans])
        rec = {"trans": trans, "costs": costs,
               "sentences": [u" ".join(u"w%d" % w for w in t[:-1]) + u" é" for t in trans]}
        self.returned["beam"].append(rec)
        return rec

    def _steps(self, n, beam):
        steps = []
        for k in range(n):
            b = 1 if k == 0 else beam
            probs = self.rng.uniform(size=(b, V_TRG)).astype("float32")
            flat = -numpy.log(probs.astype("float64")).ravel()
            flat[V_TRG - 1] = numpy.inf
            best = numpy.argpartition(flat, beam)[:beam]
            steps.append({"k": k, "n_samples": beam,
                          "last_words": numpy.zeros(b, dtype="int64"),
                          "states_in": self.rng.normal(size=(LEVELS, b, DIM)).astype("float32"),
                          "next_probs": probs, "flat_next_costs": flat,
                          "best_costs_indices": best, "trans_indices": best // V_TRG,
                          "word_indices": best % V_TRG, "costs": flat[best],
                          "states_gathered": self.rng.normal(size=(LEVELS, beam, DIM)).astype("float32"),
                          "next_states": self.rng.normal(size=(LEVELS, beam, DIM)).astype("float32")})
        if n == 2:
            del steps[-1]["next_states"]  # a step cut short by the crash
        return steps

    # -- the random sampler: a toy stream whose state is advanced by each call --------------
    def sampler_record(self, picked, n_samples, alpha):
        streams = [numpy.arange(60, dtype="int32").reshape(10, 6) + 7,   # sample_fn's
                   numpy.full((10, 6), 3, dtype="int32")]                # never advanced
        before = [a.copy() for a in streams]
        calls = []
        for index, seq in picked:
            n_steps = 3 * (len(seq) - 1)
            rng = numpy.random.RandomState(int(streams[0][0, 0]))
            ids = rng.randint(2, V_TRG, size=(n_steps, n_samples)).astype("int64")
            nlp = rng.uniform(0, 3, size=(n_steps, n_samples)).astype("float32")
            lengths = [n_steps] * n_samples
            for j in range(n_samples):
                ends = numpy.flatnonzero(ids[:, j] == V_TRG - 1)
                if len(ends):
                    lengths[j] = int(ends[0])
            # sample.py: cost = -sum of the float32 log-probs up to and including </s>
            costs = numpy.array([float(nlp[:lengths[j] + 1, j].sum()) for j in range(n_samples)])
            streams[0] = streams[0] + 1
            calls.append({"index": index, "seq": seq, "sample_ids": ids, "sample_neg_log_probs": nlp,
                          "costs": costs, "sentences": [u"w%d é" % ids[0, j] for j in range(n_samples)],
                          "n_samples": n_samples, "n_steps": n_steps, "alpha": alpha,
                          "rstate_after": [a.copy() for a in streams]})
        self.returned["sampler"] = {"before": before, "calls": calls}
        return {"attrs": {"mrg_seed": 7, "mrg_seed_origin": u"fake"},
                "base_rstate_after_build": numpy.arange(6, dtype="int32"),
                "rstate_before": before, "used": [True, False], "calls": calls}

    # -- one Adadelta update (SGD_adadelta.py) of a toy quadratic cost -----------------------
    def train_step(self, rho=0.95, eps=1e-6):
        x = numpy.array([[2, 3], [V_SRC - 1, 4], [0, V_SRC - 1]], dtype="int64")
        mask = (numpy.arange(3)[:, None] < numpy.array([[2, 3]])).astype("float32")
        before = {"W_a": self.rng.normal(size=(3, 2)).astype("float32"),
                  "b_b": self.rng.normal(size=(2,)).astype("float32")}
        order = ["b_b", "W_a"]
        grads = {"W_a": (0.5 * before["W_a"]).astype("float32"),   # d/dW of 0.25 |W|^2
                 "b_b": numpy.zeros(2, dtype="float32")}          # b_b not in the cost
        gn2, dn2, after = {}, {}, {}
        for n in order:
            g = grads[n]
            gn2[n] = ((1 - rho) * g ** 2).astype("float32")
            step = -numpy.sqrt(numpy.float32(eps)) / numpy.sqrt(gn2[n] + numpy.float32(eps)) * g
            dn2[n] = ((1 - rho) * step ** 2).astype("float32")
            after[n] = (before[n] + step).astype("float32")
        rec = {"x": x, "x_mask": mask, "y": x + 1, "y_mask": mask, "param_order": order,
               "params_before": before, "params_after": after, "clipped_grads": grads,
               "gnorm2_after": gn2, "dnorm2_after": dn2,
               "rval": {"cost": numpy.float32(0.25 * (before["W_a"] ** 2).sum()), "lr": 1.0},
               "attrs": {"iterator_start_offset": 0}}
        self.returned["train_step"] = rec
        return rec
"""
)


def same(a, b):
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    a, b = np.asarray(a), np.asarray(b)
    return np.array_equal(a, b, equal_nan=a.dtype.kind == "f" and b.dtype.kind == "f")


@pytest.fixture(scope="module")
def rec():
    return load_module("record_theano_traces", RECORDER)


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "src.txt").write_text(
        "we have four hot schools .\nhello\nthe cat  \n", encoding="utf-8"
    )
    (tmp_path / "trg.txt").write_text(
        "nous avons quatre écoles chaudes .\nbonjour\nle chat\n", encoding="utf-8"
    )
    (tmp_path / "fake_producer.py").write_text(FAKE_PRODUCER, encoding="utf-8")
    return tmp_path


# ---------------------------------------------------------------------------------------
# arguments
# ---------------------------------------------------------------------------------------
def test_help(rec, capsys):
    assert rec.main(["--help"]) == 0
    out = capsys.readouterr().out
    for opt in (
        "--groundhog",
        "--state",
        "--model",
        "--source",
        "--target",
        "--beam-sizes",
        "--steps",
    ):
        assert opt in out


def test_missing_and_bad_arguments(rec, workdir, capsys):
    assert rec.main([]) == 2
    assert "required" in capsys.readouterr().err
    args = recorder_args(workdir)
    bad = list(args)
    bad[bad.index("--source") + 1] = str(workdir / "nope.txt")
    assert rec.main(bad) == 2
    err = capsys.readouterr().err
    assert "--source" in err and "not found" in err
    assert rec.main(args + ["--beam-sizes", "5_wide"]) == 2
    assert rec.main(args + ["--changes", "dim=open('x')"]) == 2
    assert rec.main(args + ["--parts", "pairs,everything"]) == 2
    assert rec.main(args + ["--steps", "-1"]) == 2
    (workdir / "exists.h5").write_bytes(b"")
    assert rec.main(recorder_args(workdir, "exists.h5")) == 2
    capsys.readouterr()
    # no producer: the state/model/GroundHog paths are checked before Theano is imported
    assert rec.main(args) == 2
    assert "record_theano_traces.py: error: --state" in capsys.readouterr().err


def test_parse_changes_and_labels(rec):
    assert rec.parse_changes("word_indx='/x/v.pkl', dim=32, cutoff=1e4, ok=True") == {
        "word_indx": "/x/v.pkl",
        "dim": 32,
        "cutoff": 1e4,
        "ok": True,
    }
    assert rec.parse_changes("") == {}
    for bad in ("x=foo()", "**d", "a=1,,", "__import__('os')"):
        with pytest.raises(rec.InputError):
            rec.parse_changes(bad)
    assert rec.parse_beam_label("10_normalize") == (10, True, False)
    assert rec.parse_beam_label("5_ignore_unk") == (5, False, True)
    with pytest.raises(rec.InputError):
        rec.parse_beam_label("0")


# ---------------------------------------------------------------------------------------
# the written trace
# ---------------------------------------------------------------------------------------
def record_with_fake(rec, d, out="trace.h5", extra=()):
    fake = load_module("fake_producer_" + out.replace(".", "_"), d / "fake_producer.py")
    producer = fake.FakeProducer()
    argv = (
        recorder_args(d, out)
        + ["--steps", "2", "--beam-sizes", "1", "5_normalize", "5_ignore_unk", "--case", "fake"]
        + list(extra)
    )
    assert rec.main(argv, producer=producer) == 0
    return producer, d / out


def test_recording_reads_back(rec, workdir):
    producer, path = record_with_fake(rec, workdir)
    assert not (workdir / "trace.h5.partial").exists()
    got = producer.returned
    with TraceFile(path) as tr:
        assert tr.format_version == 1
        a = tr.attrs
        assert a["format_version"] == 1 and a["case"] == "fake" and a["null_sym_target"] == 11
        assert a["param_names"] == ["W_a", "b_b"] and a["test_src_file"] == "src.txt"
        assert tr.pair_indices() == [0, 1, 2]
        for i, want in enumerate(got["pairs"]):
            p = tr.pairs(i)
            for k, v in want.items():
                assert p[k].dtype == np.asarray(v).dtype
                assert same(p[k], v), k
        assert tr.pairs(0)["trg_line"] == "nous avons quatre écoles chaudes ."
        assert tr.pairs(2)["src_line"] == "the cat" and tr.repr(2)["parsed_in"] == "the cat <eos>"
        assert np.isneginf(tr.pairs(1)["score"][0]) and np.isnan(tr.pairs(2)["score"][0])
        batches = tr.batch_all()
        assert len(batches) == len(got["batches"]) == 1
        for k in ("x", "y", "x_mask", "y_mask", "scores"):
            assert np.array_equal(batches[0][k], got["batches"][0][k])
        assert tr.batch()["batch_size"] == 3
        for i, want in enumerate(got["repr"]):
            r = tr.repr(i)
            assert r["parsed_in"] == want["parsed_in"]
            for k in ("seq", "c", "init_states"):
                assert np.array_equal(r[k], want[k])
        # steps: sentence 0 complete, sentence 1 ("hello") crashed after one full step
        assert tr.steps_indices() == [0, 1] and tr.steps_attrs == {
            "beam_size": 5,
            "ignore_unk": False,
        }
        s0 = tr.steps(0)
        assert s0.error is None and s0.n_steps == 3 and s0.minlen == 3
        assert [st["k"] for st in s0.steps] == [0, 1, 2] and s0.steps[0]["states_in"].shape == (
            1,
            1,
            4,
        )
        assert len(s0.trans) == 5 and all(t[-1] == 11 for t in s0.trans)
        s1 = tr.steps(1)
        assert (
            s1.error == "ValueError: kth(=640) out of bounds (12)"
            and s1.n_steps == 1
            and s1.trans == []
        )
        # beam: every label, the crash recorded as an error record, the run goes on
        assert tr.beam_labels() == ["1", "5_ignore_unk", "5_normalize"]
        want_beams = iter(got["beam"])
        for label, (size, norm, unk) in (
            ("1", (1, False, False)),
            ("5_normalize", (5, True, False)),
            ("5_ignore_unk", (5, False, True)),
        ):
            run = tr.beam(label)
            assert (run.beam_size, run.normalize, run.ignore_unk) == (size, norm, unk)
            assert run.errors == {1: "ValueError: kth(=640) out of bounds (12)"}
            assert run.attrs["seconds_per_sentence"] >= 0
            for i in (0, 2):
                want = next(want_beams)
                s = run.sentences[i]
                assert [list(t) for t in s.trans] == [list(t) for t in want["trans"]]
                assert np.array_equal(s.costs, want["costs"])
                assert s.best == int(np.argmin(want["costs"]))
                assert s.best_sentence == want["sentences"][s.best] and s.best_sentence.endswith(
                    "é"
                )
        tr.validate()


def test_sampler_and_train_step_groups(rec, workdir):
    """/sampler and /train_step in docs/trace_format.md's layout: every record as the producer
    returned it, the MRG states in full only for the stream sample_fn advanced (others: first
    8 rows + sha256 of the whole array), params_after only for the parameters that changed."""
    import hashlib

    import h5py

    producer, path = record_with_fake(rec, workdir, "groups.h5")
    want_s, want_t = producer.returned["sampler"], producer.returned["train_step"]
    with TraceFile(path) as tr:
        smp = tr.sampler()
        # the sentences with >= 3 tokens: 0 and 2 ("hello" has 2)
        assert sorted(smp["calls"]) == [0, 2] and smp["attrs"]["mrg_seed"] == 7
        assert smp["mrg_base_rstate_after_build"].tolist() == list(range(6))
        for want in want_s["calls"]:
            got = smp["calls"][want["index"]]
            for k in ("seq", "sample_ids", "sample_neg_log_probs", "costs"):
                assert got[k].dtype == np.asarray(want[k]).dtype or k == "costs"
                assert np.array_equal(got[k], want[k]), k
            assert got["sentences"][0].endswith("é") and got["attrs"]["n_steps"] == want["n_steps"]
            assert got["attrs"]["test_index"] == want["index"] and got["attrs"]["alpha"] == 1.0
        ts = tr.train_step()
        assert ts["attrs"]["param_order"] == ["b_b", "W_a"] and ts["attrs"]["changed_params"] == [
            "W_a"
        ]
        assert sorted(ts["params_after"]) == ["W_a"]
        assert np.array_equal(ts["params_after"]["W_a"], want_t["params_after"]["W_a"])
        for sub in ("clipped_grads", "gnorm2_after", "dnorm2_after"):
            assert sorted(ts[sub]) == ["W_a", "b_b"]
            for n in ("W_a", "b_b"):
                assert np.array_equal(ts[sub][n], want_t[sub][n]), (sub, n)
        for k in ("x", "x_mask", "y", "y_mask"):
            assert np.array_equal(ts[k], want_t[k])
        assert ts["attrs"]["rval_cost"] == float(want_t["rval"]["cost"])
        tr.validate()
    with h5py.File(path, "r") as f:
        before = f["sampler/rstate_shared_before_first_call"]
        assert sorted(before) == ["00", "01_first8rows"]
        full = before["00"]
        assert full.shape == (10, 6) and bool(full.attrs["used_by_sample_fn"])
        assert (
            full.attrs["sha256"]
            == hashlib.sha256(np.ascontiguousarray(full[()]).tobytes()).hexdigest()
        )
        assert before["01_first8rows"].shape == (8, 6) and before["01_first8rows"].attrs[
            "full_shape"
        ].tolist() == [10, 6]
        last = f["sampler/2/rstate_shared_after_call"]
        assert sorted(last) == ["00_first8rows", "01_first8rows"]
        assert (
            last["00_first8rows"].attrs["sha256"]
            == hashlib.sha256(want_s["calls"][-1]["rstate_after"][0].tobytes()).hexdigest()
        )
        assert (
            f["sampler/0/sample_ids"].dtype == np.int64
            and f["train_step/params_after/W_a"].dtype == np.float32
        )


def test_parts_and_max_sentences(rec, workdir):
    _, path = record_with_fake(
        rec, workdir, "part.h5", ["--parts", "repr,beam", "--max-sentences", "1"]
    )
    with TraceFile(path) as tr:
        assert tr.repr_indices() == [0] and tr.pair_indices() == [] and tr.steps_indices() == []
        assert not tr.has("batch_all") and sorted(tr.beam("1").sentences) == [0]


def test_step_recorder_wrappers(rec):
    """The pass-through wrappers record one complete step per next_probs call."""
    r = rec.StepRecorder()
    rng = np.random.RandomState(0)
    voc, dim = 7, 3
    probs_fn = r.wrap_next_probs(
        lambda c, k, y, *h: [rng.uniform(size=(len(y), voc)).astype("float32")]
    )
    states_fn = r.wrap_next_states(lambda c, k, y, *h: [s + 1 for s in h])
    argpartition = r.wrap_argpartition(np.argpartition)
    r.start()
    beam, n = 1, 2
    states = [np.zeros((1, dim), dtype="float32")]
    costs = np.zeros(1)
    for k in range(2):
        last = np.zeros(beam, dtype="int64")
        p = probs_fn(None, k, last, *states)[0]
        flat = (costs[:, None] - np.log(p)).flatten()
        best = argpartition(flat, n)[:n]
        gathered = [s[best // voc] for s in states]
        states = states_fn(None, k, best % voc, *gathered)
        costs, beam = flat[best], n
    assert argpartition(np.arange(5.0), 2)[:2].tolist() in ([0, 1], [1, 0])
    steps = r.stop()
    assert [s["k"] for s in steps] == [0, 1] and not r.active
    for st in steps:
        assert set(st) == {
            "k",
            "last_words",
            "states_in",
            "next_probs",
            "n_samples",
            "flat_next_costs",
            "best_costs_indices",
            "trans_indices",
            "word_indices",
            "costs",
            "states_gathered",
            "next_states",
        }
        assert np.array_equal(st["trans_indices"], st["best_costs_indices"] // voc)
        assert np.array_equal(st["costs"], st["flat_next_costs"][st["best_costs_indices"]])
        assert st["next_states"].shape == (1, n, dim)
    assert steps[0]["states_in"].shape == (1, 1, dim) and steps[1]["states_in"].shape == (1, n, dim)
    # inactive: nothing recorded, results unchanged
    probs_fn(None, 0, np.zeros(1, dtype="int64"), *states)
    assert r.steps == []


# ---------------------------------------------------------------------------------------
# Python 2.7 compatibility
# ---------------------------------------------------------------------------------------
PY3_ONLY = {
    ast.JoinedStr: "f-string",
    ast.AnnAssign: "annotated assignment",
    ast.Nonlocal: "nonlocal",
    ast.YieldFrom: "yield from",
    ast.AsyncFunctionDef: "async def",
    ast.Await: "await",
    ast.AsyncFor: "async for",
    ast.AsyncWith: "async with",
    ast.NamedExpr: "walrus",
}


def test_py2_compatible_syntax():
    source = RECORDER.read_text(encoding="utf-8")
    compile(source, str(RECORDER), "exec", dont_inherit=True)
    tree = ast.parse(source)
    problems = []
    # f(a, *args) is Python 2; a starred expression anywhere else ([*a], a, *b = ..., f(*a, b)) is not
    call_star = {
        id(n.args[-1])
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and n.args and isinstance(n.args[-1], ast.Starred)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Starred) and id(node) not in call_star:
            problems.append(f"line {node.lineno}: starred expression")
        for kind, what in PY3_ONLY.items():
            if isinstance(node, kind):
                problems.append(f"line {node.lineno}: {what}")
        if isinstance(node, (ast.FunctionDef, ast.Lambda)):
            a = node.args
            if a.kwonlyargs or getattr(a, "posonlyargs", []):
                problems.append(f"line {node.lineno}: keyword/positional-only arguments")
            for arg in a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]:
                if arg.annotation is not None:
                    problems.append(f"line {node.lineno}: annotation")
            if isinstance(node, ast.FunctionDef) and node.returns is not None:
                problems.append(f"line {node.lineno}: return annotation")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            problems.append(f"line {node.lineno}: @ operator")
        if isinstance(node, ast.Dict) and None in node.keys:
            problems.append(f"line {node.lineno}: dict unpacking")
        if isinstance(node, ast.Raise) and node.cause is not None:
            problems.append(f"line {node.lineno}: raise ... from")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [n.name for n in node.names]
            )
            problems += [
                f"line {node.lineno}: imports {n}" for n in names if n.startswith("groundhog_port")
            ]
    assert not problems, problems
    futures = {
        a.name
        for n in tree.body
        if isinstance(n, ast.ImportFrom) and n.module == "__future__"
        for a in n.names
    }
    assert {"print_function", "division"} <= futures
    assert (
        "FileNotFoundError" not in source
        and "exist_ok" not in source
        and "perf_counter" not in source
    )


def find_py2():
    cands = [os.environ.get("GROUNDHOG_PY2"), shutil.which("python2.7"), shutil.which("python2")]
    cands += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/2.7*/bin/python")))
    for c in cands:
        if not c:
            continue
        try:
            out = subprocess.run(
                [c, "-c", "import sys; sys.stdout.write(str(sys.version_info[0]))"],
                capture_output=True,
                text=True,
                timeout=20,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and out.stdout.strip() == "2":
            return c
    return None


def test_compiles_and_records_under_python2(rec, workdir, tmp_path):
    py2 = find_py2()
    if py2 is None:
        pytest.skip("no Python 2.7 interpreter found (set GROUNDHOG_PY2)")
    shutil.copy(RECORDER, tmp_path / "rec2.py")
    out = subprocess.run(
        [py2, "-m", "py_compile", str(tmp_path / "rec2.py")], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    has_libs = (
        subprocess.run([py2, "-c", "import numpy, h5py"], capture_output=True).returncode == 0
    )
    if not has_libs:
        pytest.skip("Python 2.7 found but without numpy/h5py: compiled only")
    script = (
        "import sys\n"
        "sys.path[:0] = [%r, %r]\n"
        "import rec2, fake_producer\n"
        "sys.exit(rec2.main(sys.argv[1:], producer=fake_producer.FakeProducer()))\n"
    ) % (str(tmp_path), str(workdir))
    argv = recorder_args(workdir, "py2.h5") + [
        "--steps",
        "2",
        "--beam-sizes",
        "1",
        "5_normalize",
        "--case",
        "fake",
    ]
    run = subprocess.run([py2, "-c", script] + argv, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    _, py3_path = record_with_fake(rec, workdir, "py3.h5")
    with TraceFile(workdir / "py2.h5") as t2, TraceFile(py3_path) as t3:
        assert t2.format_version == 1 and t2.attrs["python_version"].startswith("2.7")
        t2.validate()
        for i in range(3):
            for k, v in t3.pairs(i).items():
                assert same(t2.pairs(i)[k], v), k
            for k, v in t3.repr(i).items():
                assert same(t2.repr(i)[k], v), k
        for label in ("1", "5_normalize"):
            a, b = t2.beam(label), t3.beam(label)
            assert a.errors == b.errors
            for i in (0, 2):
                x, y = a.sentences[i], b.sentences[i]
                assert (x.finished, x.best, x.best_sentence) == (
                    y.finished,
                    y.best,
                    y.best_sentence,
                )
        s2, s3 = t2.steps(0), t3.steps(0)
        assert s2.finished == s3.finished and t2.steps(1).error == t3.steps(1).error
        for x, y in zip(s2.steps, s3.steps):
            for k in (
                "next_probs",
                "flat_next_costs",
                "states_in",
                "states_gathered",
                "next_states",
            ):
                assert np.array_equal(x[k], y[k]), k
            # the fake calls numpy's argpartition: its order differs between numpy versions
            assert sorted(x["best_costs_indices"]) == sorted(y["best_costs_indices"])


def test_groundhog_producer_with_a_mock_groundhog(rec, workdir, tmp_path):
    import pickle

    gh = tmp_path / "gh"
    for rel, text in MOCK_GROUNDHOG.items():
        (gh / rel).parent.mkdir(parents=True, exist_ok=True)
        (gh / rel).write_text(text.lstrip("\n"), encoding="utf-8")
    data = tmp_path / "data"
    data.mkdir()
    vocab_en = {"we": 2, "have": 3, "the": 4, "cat": 5}
    ivocab_en = {v: k for k, v in vocab_en.items()}
    for name, obj in (
        ("vocab.en.pkl", vocab_en),
        ("vocab.fr.pkl", {"le": 2, "chat": 3}),
        ("ivocab.en.pkl", ivocab_en),
    ):
        (data / name).write_bytes(pickle.dumps(obj, protocol=2))
    write_corpus(data)
    (workdir / "s.pkl").write_bytes(pickle.dumps({"seed": 3}, protocol=0))
    (workdir / "m.npz").write_bytes(b"")
    argv = recorder_args(workdir, "mock.h5", groundhog=gh)
    argv += [
        "--remap-dir",
        str(data),
        "--steps",
        "3",
        "--steps-beam",
        "2",
        "--beam-sizes",
        "1",
        "2_normalize",
        "--changes",
        "bs=2",
        "--case",
        "mock",
    ]
    run = subprocess.run(
        [sys.executable, str(RECORDER)] + argv,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(workdir),
    )
    assert run.returncode == 0, run.stderr
    assert "beam/1/1: ValueError: kth(=" in run.stderr  # "hello": the doubled beam overflows
    assert run.stderr.count("mock GroundHog: BeamSearch.compile") == 1
    with TraceFile(workdir / "mock.h5") as tr:
        tr.validate()
        a = tr.attrs
        assert (
            a["case"] == "mock"
            and a["theano_version"] == "mock"
            and a["param_names"] == ["W_a", "W_b"]
        )
        assert a["null_sym_target"] == 8 and a["seed"] == 3
        assert tr.repr(0)["parsed_in"] == "we have UNK UNK UNK UNK <eos>"
        assert tr.pairs(2)["src_ids"].tolist() == [4, 5, 6]
        assert [b["x"].shape[1] for b in tr.batch_all()] == [2, 1] and tr.batch()["batch_size"] == 2
        s0 = tr.steps(0)
        assert s0.error is None and s0.minlen == 3 and s0.n_steps >= 3
        assert s0.steps[0]["states_in"].shape == (1, 1, 3) and s0.steps[0]["next_probs"].shape == (
            1,
            9,
        )
        for st in s0.steps:
            assert np.array_equal(st["costs"], st["flat_next_costs"][st["best_costs_indices"]])
            assert st["next_states"].shape == (1, st["n_samples"], 3)
        fin = sorted((p + (w,), c) for step in s0.survivors(8) for p, w, c in step if w == 8)
        assert sorted(s0.finished) == fin
        # sentence 1 ("hello"): the search is redone with doubled beams until argpartition fails
        s1 = tr.steps(1)
        assert s1.error.startswith("ValueError: kth(=") and s1.trans == []
        assert [st["k"] for st in s1.steps].count(0) > 1  # restarts at k = 0 are recorded
        for label in ("1", "2_normalize"):
            run_ = tr.beam(label)
            assert set(run_.errors) == {1}
            assert run_.sentences[0].best_sentence == " ".join(
                "w%d" % w for w in run_.sentences[0].trans[run_.sentences[0].best][:-1]
            )
        assert tr.beam("2_normalize").normalize
        # root attributes the shared recordings carry
        # --groundhog-commit defaults to the reference commit; gh/ is no git checkout: warned
        assert a["prototype"] == "prototype_state" and a["groundhog_commit"] == REFERENCE_COMMIT
        assert "is not a git checkout: cannot check that it is GroundHog commit" in run.stderr
        assert a["scan_mode"].startswith("python scan loop")
        # /sampler: sentences 0 and 2 have >= 3 tokens; the stream sample_fn advanced is
        # stored in full before the first call, the other one as first rows + sha256
        smp = tr.sampler()
        assert sorted(smp["calls"]) == [0, 2]
        assert smp["attrs"]["mrg_seed"] == int(smp["mrg_base_rstate_after_build"][0]) - 2
        assert "dec_deep_softmax" in smp["attrs"]["mrg_seed_origin"]
        c0 = smp["calls"][0]
        assert c0["sample_ids"].shape == (3 * (len(c0["seq"]) - 1), 5) and c0["costs"].shape == (5,)
        assert c0["attrs"]["n_steps"] == 3 * (len(c0["seq"]) - 1) and c0["attrs"]["alpha"] == 1.0
        import h5py

        with h5py.File(workdir / "mock.h5", "r") as f:
            before = f["sampler/rstate_shared_before_first_call"]
            assert sorted(before) == ["00", "01_first8rows"]
            assert bool(before["00"].attrs["used_by_sample_fn"]) and before["00"].shape == (20, 6)
            assert not before["01_first8rows"].attrs["used_by_sample_fn"]
            after = f["sampler/2/rstate_shared_after_call"]
            assert np.array_equal(after["00_first8rows"][()], before["00"][:8] + 2)  # two calls
            assert after["01_first8rows"].attrs["sha256"] == before["01_first8rows"].attrs["sha256"]
        # /train_step: W_b got a zero gradient, so only W_a is in params_after
        ts = tr.train_step()
        assert ts["attrs"]["param_order"] == ["W_b", "W_a"] and ts["attrs"]["changed_params"] == [
            "W_a"
        ]
        assert sorted(ts["params_after"]) == ["W_a"] and sorted(ts["clipped_grads"]) == [
            "W_a",
            "W_b",
        ]
        assert ts["attrs"]["rval_cost"] == 2.5 and "rval_name" not in ts["attrs"]
        assert (
            ts["x"].tolist() == [[0, 1], [2, 3], [4, 5]]
            and ts["attrs"]["iterator_start_offset"] == 0
        )
        assert np.allclose(ts["params_after"]["W_a"], 1.5 - 15 / 100.0)


def test_groundhog_commit_is_the_named_one_with_a_warning_when_the_checkout_differs(rec, tmp_path):
    """The checkout's HEAD can be a local commit (a Python-3 adaptation on top of 4d2433b):
    the recorded commit is the one the user names; the HEAD only triggers a warning."""
    assert "is not a git checkout" in rec.commit_mismatch(str(tmp_path), REFERENCE_COMMIT)
    git = tmp_path / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    local = "0123456789abcdef0123456789abcdef01234567"
    (git / "refs" / "heads" / "main").write_text(local + "\n")
    warning = rec.commit_mismatch(str(tmp_path), REFERENCE_COMMIT)
    assert f"is at git commit {local}, not {REFERENCE_COMMIT}" in warning
    (git / "refs" / "heads" / "main").write_text(REFERENCE_COMMIT + "\n")
    assert rec.commit_mismatch(str(tmp_path), "4d2433b") is None  # short ids match by prefix
    assert (
        rec.build_parser()
        .parse_args(
            [
                "--groundhog",
                "g",
                "--state",
                "s",
                "--model",
                "m",
                "--source",
                "a",
                "--target",
                "b",
                "--output",
                "o",
            ]
        )
        .groundhog_commit
        == REFERENCE_COMMIT
    )


# ---------------------------------------------------------------------------------------
# On a user's own environment (issue 35, item 1): inputs checked before anything is built,
# GroundHog's loader thread watched, every finished group committed as it is recorded
# ---------------------------------------------------------------------------------------
#: the groups of a whole recording on the mock (lay_out_mock_case's arguments)
ALL_GROUPS = {
    "pairs",
    "batch",
    "batch_all",
    "repr",
    "steps",
    "beam",
    "beam/1",
    "beam/2_normalize",
    "sampler",
    "train_step",
}
#: what differs between two recordings of the same inputs: seconds
TIMING_ATTRS = {"recorder_timings_json", "timings_json", "seconds_total", "seconds_per_sentence"}


def py2_with_libs():
    """A Python 2.7 with numpy and h5py (``GROUNDHOG_PY2`` or the usual places), or None."""
    py2 = find_py2()
    if py2 and subprocess.run([py2, "-c", "import numpy, h5py"], capture_output=True).returncode:
        return None
    return py2


@pytest.fixture(scope="module", params=["python3", "python2.7"])
def recorder_python(request):
    """The interpreters the user-environment tests run the recorder under: this one, and a
    Python 2.7 with numpy and h5py where one is found (GROUNDHOG_PY2)."""
    if request.param == "python3":
        return sys.executable
    py2 = py2_with_libs()
    if py2 is None:
        pytest.skip("no Python 2.7 with numpy and h5py found (set GROUNDHOG_PY2)")
    return py2


def run_recorder(argv, cwd, env=None, timeout=120, python=None):
    return subprocess.run(
        [python or sys.executable, str(RECORDER)] + [str(a) for a in argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(cwd),
        env=env,
    )


def groups_of(path):
    import h5py

    with h5py.File(path, "r") as f:
        names = set(f)
        names.update("beam/" + k for k in f.get("beam", {}))
    return names


def contents(path):
    """Every dataset (dtype, shape, bytes) and attribute of a trace but the timings."""
    import h5py

    out = {}
    with h5py.File(path, "r") as f:

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                a = obj[()]
                raw = np.ascontiguousarray(a).tobytes() if isinstance(a, np.ndarray) else repr(a)
                out["dataset " + name] = (str(obj.dtype), obj.shape, raw)
            for k, v in obj.attrs.items():
                if k not in TIMING_ATTRS:
                    out[f"attr {name}@{k}"] = repr(v.tolist() if isinstance(v, np.ndarray) else v)

        visit("/", f)
        f.visititems(visit)
    return out


@pytest.fixture(scope="module")
def whole_mock_recording(tmp_path_factory, recorder_python):
    """An uninterrupted recording of every part on the mock: ``(argv less --output, trace)``."""
    d = tmp_path_factory.mktemp("whole")
    argv = lay_out_mock_case(d)
    run = run_recorder(argv + ["--output", d / "whole.h5"], d, python=recorder_python)
    assert run.returncode == 0, run.stderr
    assert groups_of(d / "whole.h5") == ALL_GROUPS
    return d, argv, d / "whole.h5"


def test_missing_corpus_stops_before_anything_is_built(tmp_path, recorder_python):
    """The corpus absent (vocabularies and test set in --remap-dir): exit 2 at once, one line
    naming the corpus file, where it looked and the fixes; nothing built, nothing written.
    With --parts without train_step the same command records the rest.  Proven: without the
    corpus check (main before issue 35) the run builds the model and waits for the loader
    thread forever (here: the 60 s timeout fails the test)."""
    argv = lay_out_mock_case(tmp_path, corpus=None)
    run = run_recorder(
        argv + ["--output", tmp_path / "t.h5"], tmp_path, timeout=60, python=recorder_python
    )
    assert run.returncode == 2, run.stderr
    line = run.stderr.strip().splitlines()[-1]
    data = tmp_path / "data"
    assert line == (
        "record_theano_traces.py: error: state['source'][0] "
        "/nonexistent/binarized_text.shuffled.en.h5 (the training corpus /train_step reads): "
        f"not found there nor as binarized_text.shuffled.en.h5 in --remap-dir {data}; give "
        "--data DIR (the folder holding binarized_text.shuffled.en.h5), or --parts without "
        "train_step"
    )
    assert "mock GroundHog: build" not in run.stderr and "Traceback" not in run.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("t.h5")) == []
    # where each vocabulary was found is logged
    assert f"state['word_indx']: /nonexistent/vocab.en.pkl not found; using {data}" in run.stderr
    parts = ["--parts", "pairs,batch,repr,steps,beam,sampler"]
    run = run_recorder(
        argv + ["--output", tmp_path / "t.h5"] + parts, tmp_path, timeout=60, python=recorder_python
    )
    assert run.returncode == 0, run.stderr
    assert groups_of(tmp_path / "t.h5") == ALL_GROUPS - {"train_step"}
    with TraceFile(tmp_path / "t.h5") as tr:
        tr.validate()
    # --data names the corpus folder: then /train_step is added with --resume
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    write_corpus(corpus)
    extra = ["--data", corpus, "--resume", "--output", tmp_path / "t.h5"]
    run = run_recorder(argv + extra, tmp_path, timeout=60, python=recorder_python)
    assert run.returncode == 0, run.stderr
    assert (
        f"state['source'][0]: /nonexistent/binarized_text.shuffled.en.h5 not found; using {corpus}"
        in run.stderr
    )
    assert groups_of(tmp_path / "t.h5") == ALL_GROUPS
    # only /train_step to add: sample.py's BeamSearch is not compiled for it
    assert "BeamSearch.compile" not in run.stderr and "mock GroundHog: build" in run.stderr


def test_vocabulary_lookup_repeatable_remap_dir_never_the_stored_path(tmp_path):
    """--remap-dir is repeatable and searched in order; a vocabulary found nowhere is an
    error naming it (main before issue 35 kept the stored path and failed later)."""
    argv = lay_out_mock_case(tmp_path)
    second = tmp_path / "more"
    second.mkdir()
    (tmp_path / "data" / "ivocab.en.pkl").rename(second / "ivocab.en.pkl")
    out = ["--output", tmp_path / "t.h5", "--parts", "repr"]
    run = run_recorder(argv + out, tmp_path)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines()[-1] == (
        "record_theano_traces.py: error: state['indx_word'] /nonexistent/ivocab.en.pkl: not "
        f"found there nor as ivocab.en.pkl in --remap-dir {tmp_path / 'data'}; give "
        "--remap-dir DIR (the folder holding ivocab.en.pkl)"
    )
    assert "mock GroundHog: build" not in run.stderr
    run = run_recorder(argv + ["--remap-dir", second] + out, tmp_path)
    assert run.returncode == 0, run.stderr
    assert (
        f"state['indx_word']: /nonexistent/ivocab.en.pkl not found; using "
        f"{second / 'ivocab.en.pkl'} (--remap-dir {second})" in run.stderr
    )
    (tmp_path / "data" / "vocab.en.pkl").write_bytes(b"truncated")
    run = run_recorder(argv + ["--remap-dir", second, "--force"] + out, tmp_path)
    assert run.returncode == 2 and "not a readable vocabulary pickle" in run.stderr
    assert "mock GroundHog: build" not in run.stderr


def test_dead_loader_thread_is_an_error_not_a_hang(tmp_path, recorder_python):
    """Corpus files GroundHog's loader thread dies on: exit 2 within seconds naming both files
    and the thread's error, the groups recorded before /train_step kept.  Proven: without
    the watch (original_next called directly) the run waits forever (timeout here)."""
    argv = lay_out_mock_case(tmp_path, corpus=False)
    run = run_recorder(
        argv + ["--output", tmp_path / "t.h5"], tmp_path, timeout=60, python=recorder_python
    )
    assert run.returncode == 2, run.stderr
    data = tmp_path / "data"
    line = run.stderr.strip().splitlines()[-1]
    error = "OSError" if recorder_python == sys.executable else "IOError"
    assert line.startswith(
        "record_theano_traces.py: error: GroundHog's data loader thread died before giving a "
        f"batch ({error}: {data / 'binarized_text.shuffled.fr.h5'}: not an HDF5 file) reading "
        f"state['source'][0] {data / 'binarized_text.shuffled.en.h5'} and state['target'][0] "
        f"{data / 'binarized_text.shuffled.fr.h5'}"
    ), line
    assert (
        f"{tmp_path / 't.h5'} holds pairs, batch_all, repr, steps, beam/1, beam/2_normalize, "
        "sampler (every group finished)" in run.stderr
    )
    assert groups_of(tmp_path / "t.h5") == ALL_GROUPS - {"train_step"}
    assert not (tmp_path / "t.h5.partial").exists()


def test_loader_timeout(tmp_path):
    """A loader that never answers: --loader-timeout seconds, then an error."""
    argv = lay_out_mock_case(tmp_path)
    env = dict(os.environ, MOCK_LOADER_SLEEP="60")
    out = ["--output", tmp_path / "t.h5", "--parts", "train_step", "--loader-timeout", "1"]
    run = run_recorder(argv + out, tmp_path, env=env, timeout=60)
    assert run.returncode == 2, run.stderr
    assert "no batch from GroundHog's data loader within 1 s (--loader-timeout)" in run.stderr
    assert "nothing was finished" in run.stderr and not (tmp_path / "t.h5").exists()


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_interrupted_run_keeps_every_finished_group(
    whole_mock_recording, tmp_path, sig, recorder_python
):
    """Stopped while recording /beam/2_normalize: the trace opens and holds every group
    finished before, and --resume adds the rest -- the same trace as an uninterrupted run.
    Proven: with the trace written to .partial and renamed only at the end (main before
    issue 35), no trace is left (SIGINT/SIGTERM) or it cannot be opened."""
    d, argv, whole = whole_mock_recording
    out = tmp_path / "t.h5"
    marker = tmp_path / "hanging"
    env = dict(os.environ, MOCK_HANG_AT_BEAM="2", MOCK_HANG_MARKER=str(marker))
    proc = subprocess.Popen(
        [recorder_python, str(RECORDER)] + [str(a) for a in argv + ["--output", out]],
        cwd=str(d),
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(600):
            if marker.exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert marker.exists(), "the recorder never reached beam/2_normalize"
        proc.send_signal(getattr(signal, sig))
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    want = {"SIGINT": 130, "SIGTERM": 143, "SIGKILL": -signal.SIGKILL}[sig]
    assert proc.returncode == want, err
    if sig != "SIGKILL":
        word = "interrupted" if sig == "SIGINT" else "terminated"
        assert err.strip().splitlines()[-1] == (
            f"record_theano_traces.py: {word}: {out} holds pairs, batch_all, repr, steps, "
            "beam/1 (every group finished); --resume adds the rest"
        )
        assert not (tmp_path / "t.h5.partial").exists()
    finished = {"pairs", "batch", "batch_all", "repr", "steps", "beam", "beam/1"}
    assert groups_of(out) == finished
    with TraceFile(out) as tr:
        tr.validate()
        assert tr.beam_labels() == ["1"] and tr.pair_indices() == [0, 1, 2]
    run = run_recorder(argv + ["--output", out, "--resume"], d, python=recorder_python)
    assert run.returncode == 0, run.stderr
    assert "--resume: " in run.stderr and "recording beam, sampler, train_step" in run.stderr
    assert contents(out) == contents(whole)


def test_resume_rules(rec, workdir, capsys):
    """--resume needs the trace, refuses --force and another model's trace, and adds nothing
    when every part is there; an existing --output names both options."""
    _, path = record_with_fake(rec, workdir, "r.h5", ["--parts", "pairs,repr"])
    args = recorder_args(workdir, "r.h5") + ["--steps", "2", "--beam-sizes", "1", "--case", "fake"]
    fake = load_module("fake_producer_resume", workdir / "fake_producer.py")
    assert rec.main(args, producer=fake.FakeProducer()) == 2
    assert (
        "exists (--resume adds the parts it lacks, --force overwrites it)"
        in capsys.readouterr().err
    )
    assert rec.main(args + ["--resume", "--force"], producer=fake.FakeProducer()) == 2
    missing = recorder_args(workdir, "nope.h5") + ["--resume"]
    assert rec.main(missing, producer=fake.FakeProducer()) == 2
    assert "nothing to resume" in capsys.readouterr().err
    other = list(args)
    (workdir / "other_model.npz").write_bytes(b"")
    other[other.index("--model") + 1] = str(workdir / "other_model.npz")
    assert rec.main(other + ["--resume"], producer=fake.FakeProducer()) == 2
    assert (
        "was recorded with model_file m.npz, this run has other_model.npz"
        in capsys.readouterr().err
    )
    assert rec.main(args + ["--resume", "--parts", "repr"], producer=fake.FakeProducer()) == 0
    assert groups_of(path) == {"pairs", "repr"}
    extra = ["--resume", "--parts", "beam", "--train-changes", "dim=3"]
    assert rec.main(args + extra, producer=fake.FakeProducer()) == 0
    assert groups_of(path) == {"pairs", "repr", "beam", "beam/1"}
    with TraceFile(path) as tr:  # an attribute the first run did not write is added
        assert json.loads(tr.attrs["state_changes_json"]) == {"dim": 3}


def test_a_crash_keeps_every_finished_group(rec, workdir):
    """An exception of the recorder (here: the sampler) propagates with its traceback, and the
    trace holds every group finished before it."""
    fake = load_module("fake_producer_crash", workdir / "fake_producer.py")
    producer = fake.FakeProducer()

    def broken(*a, **k):
        raise RuntimeError("a bug")

    producer.sampler_record = broken
    argv = recorder_args(workdir, "c.h5") + ["--steps", "1", "--beam-sizes", "1"]
    with pytest.raises(RuntimeError, match="a bug"):
        rec.main(argv, producer=producer)
    assert groups_of(workdir / "c.h5") == {
        "pairs",
        "batch",
        "batch_all",
        "repr",
        "steps",
        "beam",
        "beam/1",
    }
    assert not (workdir / "c.h5.partial").exists()


def test_no_path_of_the_recording_machine_unless_asked(
    whole_mock_recording, tmp_path, recorder_python
):
    """Nothing of the recording machine's folders in the trace (main before issue 35 wrote the
    remapped vocabulary paths into state_json); --keep-paths keeps them; --train-changes is
    recorded as state_changes_json, --changes as recorder_changes_json."""
    d, argv, whole = whole_mock_recording
    assert str(d).encode() not in whole.read_bytes()
    with TraceFile(whole) as tr:
        # the state as given: the stored paths of the training machine, not where they were found
        state = json.loads(tr.attrs["state_json"])
        assert state["word_indx"] == "/nonexistent/vocab.en.pkl"
        assert state["source"] == ["/nonexistent/binarized_text.shuffled.en.h5"]
        assert json.loads(tr.attrs["recorder_changes_json"]) == {"bs": 2}
        assert "state_changes_json" not in tr.attrs
    vocab = d / "data" / "vocab.en.pkl"
    changes = f"source=['{d}/x.h5'],dim=3,prefix='runs/'"
    extra = ["--train-changes", changes, "--changes", f"bs=2,word_indx='{vocab}'"]
    extra += ["--parts", "repr", "--keep-paths", "--output", tmp_path / "k.h5"]
    run = run_recorder(argv + extra, d, python=recorder_python)
    assert run.returncode == 0, run.stderr
    with TraceFile(tmp_path / "k.h5") as tr:
        assert json.loads(tr.attrs["state_json"])["word_indx"] == str(vocab)
        assert json.loads(tr.attrs["recorder_changes_json"]) == {"bs": 2, "word_indx": str(vocab)}
        assert json.loads(tr.attrs["state_changes_json"]) == {
            "source": [f"{d}/x.h5"],
            "dim": 3,
            "prefix": "runs/",
        }
    extra[-3:] = ["--log-level=INFO", "--output", tmp_path / "p.h5"]
    run = run_recorder(argv + extra, d, python=recorder_python)
    assert run.returncode == 0, run.stderr
    assert str(d).encode() not in (tmp_path / "p.h5").read_bytes()
    with TraceFile(tmp_path / "p.h5") as tr:
        assert json.loads(tr.attrs["state_json"])["word_indx"] == "vocab.en.pkl"
        assert json.loads(tr.attrs["recorder_changes_json"]) == {
            "bs": 2,
            "word_indx": "vocab.en.pkl",
        }
        assert json.loads(tr.attrs["state_changes_json"]) == {
            "source": ["x.h5"],
            "dim": 3,
            "prefix": "runs/",
        }


def test_public_paths(rec, tmp_path):
    (tmp_path / "v.pkl").write_bytes(b"")
    assert rec.public(
        {
            "a": str(tmp_path / "v.pkl"),
            "b": [str(tmp_path / "gone.h5")],
            "c": "search_",
            "d": "/data/lisatmp3/x/v.pkl",
            "e": 3,
        }
    ) == {"a": "v.pkl", "b": ["gone.h5"], "c": "search_", "d": "/data/lisatmp3/x/v.pkl", "e": 3}
    flags = f"floatX=float32,base_compiledir={tmp_path}/compiledir,device=cpu"
    assert rec.public_flags(flags) == "floatX=float32,base_compiledir=compiledir,device=cpu"
    assert rec.public_flags(flags, keep_paths=True) == flags


def test_walkthrough_as_written(tmp_path):
    """docs/recording.md's "Record" commands, run as written with HOME a scratch folder laid
    out as the page says (the mock GroundHog in ~/GroundHog, a state holding the training
    machine's paths): the first stops on the missing corpus with the error the page shows,
    the second records every part but /train_step, the third adds it with --resume."""
    import pickle
    import re

    text = (REPO / "docs" / "recording.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```(\w*)\n(.*?)```", text, re.S)
    commands = [b for lang, b in blocks if lang == "sh" and "record_theano_traces.py" in b]
    shown = [b.strip() for lang, b in blocks if lang == "text" and "error:" in b]
    assert len(commands) == 3 and len(shown) == 1
    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (home / "bin" / "python").chmod(0o755)
    (home / "groundhog-port").symlink_to(REPO)
    for rel, body in MOCK_GROUNDHOG.items():
        (home / "GroundHog" / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / "GroundHog" / rel).write_text(body.lstrip("\n"), encoding="utf-8")
    exp, data = home / "wmt14" / "search", home / "wmt14" / "data"
    lay_out_mock_case(tmp_path / "case")
    shutil.copytree(tmp_path / "case" / "data", exp)
    for name in ("binarized_text.shuffled.en.h5", "binarized_text.shuffled.fr.h5"):
        data.mkdir(exist_ok=True)
        (exp / name).rename(data / name)
    shutil.copy(tmp_path / "case" / "src.txt", exp / "test.en")
    shutil.copy(tmp_path / "case" / "trg.txt", exp / "test.fr")
    (exp / "search_model.npz").write_bytes(b"")
    legacy = "/data/lisatmp3/you/wmt14/"
    state = {
        "seed": 3,
        "word_indx": legacy + "vocab.en.pkl",
        "word_indx_trgt": legacy + "vocab.fr.pkl",
    }
    state.update(indx_word=legacy + "ivocab.en.pkl")
    state.update(source=[legacy + "binarized_text.shuffled.en.h5"])
    state.update(target=[legacy + "binarized_text.shuffled.fr.h5"])
    (exp / "search_state.pkl").write_bytes(pickle.dumps(state, protocol=0))
    env = dict(os.environ, HOME=str(home), PATH=f"{home / 'bin'}:{os.environ['PATH']}")
    runs = [
        subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=env, timeout=120)
        for cmd in commands
    ]
    assert runs[0].returncode == 2, runs[0].stderr
    assert runs[0].stderr.strip().splitlines()[-1].replace(str(home), "/home/you") == shown[0]
    assert runs[1].returncode == 0 and runs[2].returncode == 0, runs[1].stderr + runs[2].stderr
    trace = exp / "trace.h5"
    assert "train_step" in groups_of(trace) and "sampler" in groups_of(trace)
    with TraceFile(trace) as tr:
        tr.validate()
        assert len(tr.beam_labels()) == 7 and tr.attrs["case"] == "search"


@pytest.mark.parametrize("leftover", [".tmp", ".partial"])
def test_temporary_files_never_written_through_a_link(rec, workdir, capsys, leftover):
    """A stale ``t.h5.tmp -> src.txt`` (or ``.partial``) left beside the output: the
    recorder refuses in one line (exit 2) and the linked file keeps its bytes; a stale
    regular file there is replaced (an earlier, killed run's)."""
    out = workdir / f"t{leftover}.h5"
    stale = workdir / (out.name + leftover)
    before = (workdir / "src.txt").read_bytes()
    stale.symlink_to(workdir / "src.txt")
    fake = load_module(f"fake_producer_link{leftover}", workdir / "fake_producer.py")
    args = recorder_args(workdir, out.name) + ["--parts", "pairs", "--case", "fake"]
    try:
        assert rec.main(args, producer=fake.FakeProducer()) == 2
        err = capsys.readouterr().err
        assert f"{stale.name} is a symbolic link" in err and "Traceback" not in err
        assert (workdir / "src.txt").read_bytes() == before
    finally:
        stale.unlink()
    stale.write_bytes(b"left by a killed run")
    assert rec.main(args, producer=fake.FakeProducer()) == 0
    assert groups_of(out) == {"pairs"} and not stale.exists()


def test_resume_of_a_tampered_trace_is_one_line(rec, workdir, capsys):
    """--resume on a trace whose ``recorder_timings_json`` was edited into bad JSON: one line
    naming the attribute, exit 2, no partial file left (was a JSONDecodeError traceback)."""
    import h5py

    _, path = record_with_fake(rec, workdir, "tampered.h5", ["--parts", "pairs"])
    with h5py.File(path, "r+") as f:
        f.attrs["recorder_timings_json"] = "{not json"
    fake = load_module("fake_producer_tampered", workdir / "fake_producer.py")
    args = recorder_args(workdir, "tampered.h5") + ["--parts", "repr", "--case", "fake"]
    assert rec.main(args + ["--resume"], producer=fake.FakeProducer()) == 2
    err = capsys.readouterr().err
    assert "recorder_timings_json attribute is not a JSON object" in err
    assert "Traceback" not in err and not (workdir / "tampered.h5.partial").exists()
