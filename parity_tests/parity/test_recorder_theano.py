"""tools/record_theano_traces.py on real Theano 1.0.5 (the ``.venv-theano`` of
tools/theano_venv.sh: numpy 1.23.5, scipy 1.10.1, h5py 3.16.0, Python scan loop, MANIFEST
section 1's THEANO_FLAGS).

GroundHog itself is not available here (and must not be committed), so the recorder runs
against a *Theano* stand-in for GroundHog written for this test (STAND_IN below): GroundHog's
module layout and interfaces (experiments.nmt, RNNEncoderDecoder.build / create_*,
BeamSearch, sample.sample, SGD_adadelta) over a tiny GRU-less RNN encoder-decoder built from
Theano's own ops -- ``theano.scan`` loops, ``MRG_RandomStreams`` owned by the layers (seeds
drawn from the model's RandomState as GroundHog's layers do), a sampler that draws with
``trng.multinomial`` inside a scan, gradients from ``theano.grad`` and compiled
``theano.function``\\ s with shared-variable updates.  What runs for real: the recorder's
whole GroundHogProducer (model loading, the pass-through wrappers around compiled functions,
the MRG stream discovery through ``trng.state_updates`` -- 4-tuples in Theano 1.0.5 --, the
rstate read after build, the train-step recording) and its writer under h5py 3.16.0.  What it
cannot cover: GroundHog's own layers, search, scorer and trainer (docs/trace_format.md,
"The recorder on real Theano").

The trace is then read in this (port) environment and checked against independent
computations: the MRG31k3p stream states against groundhog_port.sampling.mrg (seed ->
rstate after build -> the sampler's state matrix -> its state after each call), the
representations against a numpy re-computation of the stand-in's encoder, the step records
against their own definitions.

Without .venv-theano the test skips (fails in CI, where tools/test.sh creates it).
"""

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from groundhog_port.harness.trace import TraceFile
from groundhog_port.sampling import mrg
from parity_tests.support.recorder import (
    MOCK_BATCH_ITERATOR,
    MOCK_GROUNDHOG,
    RECORDER,
    REFERENCE_COMMIT,
    load_module,
    recorder_args,
    write_corpus,
)

REPO = Path(__file__).resolve().parents[2]
THEANO_VENV = REPO / ".venv-theano"
THEANO_PY = THEANO_VENV / "bin" / "python"
#: MANIFEST section 1's flags, and cxx= : Theano's Python implementation of every op (the same
#: values; compiling the C modules of this small model costs 4-5 min cold on a busy 2-core
#: machine, 80 s warm -- too much for the suite).  base_compiledir keeps ~/.theano clean.
THEANO_FLAGS = (
    "cxx=,blas.ldflags=,floatX=float32,device=cpu,on_unused_input=warn,"
    "base_compiledir=" + str(THEANO_VENV / "compiledir")
)
#: the reference recordings' wording (../shared/legacy_traces/*/trace.h5, root attribute)
REFERENCE_SCAN_MODE = "python scan loop (scan_perform_ext disabled), inner graphs C-compiled"
DIM = 3
SHAPES = {
    "W_src_emb": (7, DIM),
    "U_enc": (DIM, DIM),
    "W_init": (DIM, DIM),
    "b_init": (DIM,),
    "W_trg_emb": (9, DIM),
    "U_dec": (DIM, DIM),
    "W_ctx": (DIM, DIM),
    "W_out": (DIM, 9),
    "b_out": (9,),
}

# A stand-in for GroundHog's experiments.nmt written with Theano (for this test; not GroundHog
# code).  sample.py / score.py are the numpy stand-ins of test_recorder.py (interfaces only).
STAND_IN_NMT = '''
import numpy
import theano
import theano.tensor as TT
from theano.sandbox.rng_mrg import MRG_RandomStreams

SHAPES = %(shapes)r
floatX = "float32"


def prototype_state():
    return dict(seed=3, null_sym_source=6, null_sym_target=8, n_sym_source=7, n_sym_target=9,
                unk_sym_source=1, unk_sym_target=1, bs=2, oov="UNK", dim=%(dim)d,
                word_indx="/nonexistent/vocab.en.pkl", word_indx_trgt="/nonexistent/vocab.fr.pkl",
                indx_word="/nonexistent/ivocab.en.pkl",
                source=["/nonexistent/binarized_text.shuffled.en.h5"],
                target=["/nonexistent/binarized_text.shuffled.fr.h5"])


def prototype_search_state():
    state = prototype_state()
    state.update(dim=1000, search=True)
    return state


def parse_input(state, word2idx, line, raise_unk=False, idx2word=None, unk_sym=-1, null_sym=-1):
    unk_sym = state["unk_sym_source"] if unk_sym < 0 else unk_sym
    null_sym = state["null_sym_source"] if null_sym < 0 else null_sym
    seq = numpy.array([word2idx.get(w, unk_sym) for w in line.split()] + [null_sym], dtype="int64")
    if idx2word:
        idx2word[null_sym] = "<eos>"
        idx2word[unk_sym] = state["oov"]
        return seq, " ".join(idx2word[i] for i in seq)
    return seq, line.split()


class _Layer(object):
    """A layer owning an MRG stream seeded from the model's RandomState."""
    def __init__(self, name, rng):
        self.name = name
        self.trng = MRG_RandomStreams(rng.randint(1000) + 1)


class _Part(object):
    pass


class _LM(object):
    def __init__(self, params, word_indxs):
        self.params = params
        self.word_indxs = word_indxs
    def load(self, path):
        values = numpy.load(path)
        for p in self.params:
            p.set_value(values[p.name].astype(floatX))


def _batch(offset):
    x = numpy.array([[2, 4], [3, 5], [6, 6]], dtype="int64")
    y = numpy.array([[2, 3], [4, 8], [8, 0]], dtype="int64")
    ym = numpy.array([[1, 1], [1, 1], [1, 0]], dtype="float32")
    return {"x": x, "x_mask": numpy.ones((3, 2), dtype="float32"), "y": y, "y_mask": ym}

%(batch_iterator)s


class RNNEncoderDecoder(object):
    """x (Ls, B) -> annotations c_t = m_t tanh(E_s[x_t] + c_{t-1} U_enc) + (1 - m_t) c_{t-1};
    h_0 = tanh(c_0 W_init + b_init); ctx = masked mean of c;
    p(y_k) = softmax((h_{k-1} + ctx W_ctx + E_t[y_{k-1}]) W_out + b_out) (y_{-1} = 0);
    h_k = m_k tanh(E_t[y_k] + h_{k-1} U_dec + ctx W_ctx) + (1 - m_k) h_{k-1}."""

    def __init__(self, state, rng, skip_init=False, compute_alignment=False):
        self.state, self.rng, self.skip_init = state, rng, skip_init

    def build(self):
        self.encoder, self.backward_encoder, self.decoder = _Part(), _Part(), _Part()
        self.encoder.transitions = [_Layer("enc_transition_0", self.rng)]   # never drawn from
        self.decoder.output_layer = _Layer("dec_deep_softmax", self.rng)
        self.params = []
        for name in sorted(SHAPES):
            value = numpy.zeros(SHAPES[name], dtype=floatX)
            if not self.skip_init:
                value = self.rng.normal(0, 0.5, size=SHAPES[name]).astype(floatX)
            self.params.append(theano.shared(value, name=name))
        self.p = dict((p.name, p) for p in self.params)
        self.sampling_x = TT.lvector("x")
        x = self.sampling_x.dimshuffle(0, "x")
        self.sampling_c = self.encode(x, TT.ones_like(x, dtype=floatX))[:, 0, :]
        self.n_samples, self.n_steps = TT.lscalar("n_samples"), TT.lscalar("n_steps")
        self.T = TT.scalar("T")
        (self.sample, self.sample_log_prob), self.sampling_updates = self.build_sampler(
            self.sampling_c)

    def encode(self, x, x_mask):
        p = self.p
        def step(x_t, m_t, c_prev):
            c_new = TT.tanh(p["W_src_emb"][x_t] + TT.dot(c_prev, p["U_enc"]))
            return m_t[:, None] * c_new + (1 - m_t[:, None]) * c_prev
        c0 = TT.zeros((x.shape[1], SHAPES["U_enc"][0]), dtype=floatX)
        c, _ = theano.scan(step, sequences=[x, x_mask], outputs_info=[c0])
        return c

    def init_state(self, c0):
        return TT.tanh(TT.dot(c0, self.p["W_init"]) + self.p["b_init"])

    def probs(self, h, y_prev, ctx, T=1.0):
        p = self.p
        readout = h + TT.dot(ctx, p["W_ctx"]) + p["W_trg_emb"][y_prev]
        return TT.nnet.softmax((TT.dot(readout, p["W_out"]) + p["b_out"]) / T)

    def next_state(self, h, y, ctx, m=None):
        p = self.p
        h_new = TT.tanh(p["W_trg_emb"][y] + TT.dot(h, p["U_dec"]) + TT.dot(ctx, p["W_ctx"]))
        return h_new if m is None else m[:, None] * h_new + (1 - m[:, None]) * h

    def draw(self, probs):
        """One multinomial draw per row from the softmax layer's stream (a new random op)."""
        return TT.argmax(self.decoder.output_layer.trng.multinomial(pvals=probs), axis=1)

    def build_sampler(self, c):
        ctx = TT.alloc(c.mean(0), self.n_samples, c.shape[1])
        h0 = TT.alloc(self.init_state(c[0]), self.n_samples, c.shape[1])
        y0 = TT.zeros((self.n_samples,), dtype="int64")
        def step(y_prev, h):
            probs = self.probs(h, y_prev, ctx, self.T)
            y = self.draw(probs)
            nlp = -TT.log(probs[TT.arange(y.shape[0]), y])
            return [y, nlp, self.next_state(h, y, ctx)]
        (ys, nlps, _), updates = theano.scan(step, outputs_info=[y0, None, h0],
                                             n_steps=self.n_steps)
        return (ys, nlps), updates

    def batch_costs(self, x, y, x_mask, y_mask):
        c = self.encode(x, x_mask)
        ctx = (c * x_mask[:, :, None]).sum(0) / x_mask.sum(0)[:, None]
        h0 = self.init_state(c[0])
        y_prev = TT.concatenate([TT.zeros_like(y[:1]), y[:-1]])
        def step(y_t, y_p, m_t, h):
            probs = self.probs(h, y_p, ctx)
            return [probs[TT.arange(y_t.shape[0]), y_t], self.next_state(h, y_t, ctx, m_t)]
        (word_probs, _), _ = theano.scan(step, sequences=[y, y_prev, y_mask],
                                         outputs_info=[None, h0])
        return word_probs, -(TT.log(word_probs) * y_mask).sum(0)

    def create_sampler(self, many_samples=False):
        if not hasattr(self, "sample_fn"):
            self.sample_fn = theano.function(
                [self.n_samples, self.n_steps, self.T, self.sampling_x],
                [self.sample, self.sample_log_prob], updates=self.sampling_updates,
                name="sample_fn")
        return self.sample_fn

    def create_lm_model(self):
        word_indxs = dict((i, "w%%d" %% i) for i in range(8))
        word_indxs[8] = "<eol>"
        self.lm_model = _LM(self.params, word_indxs)
        self.lm_model.enc_dec = self      # what the trainer stand-in builds its graph from
        self.create_sampler()
        return self.lm_model

    def _batch_inputs(self):
        return TT.lmatrix("x"), TT.lmatrix("y"), TT.matrix("x_mask"), TT.matrix("y_mask")

    def create_probs_computer(self, return_alignment=False):
        x, y = TT.lvector("x"), TT.lvector("y")
        xs, ys = x.dimshuffle(0, "x"), y.dimshuffle(0, "x")
        word_probs, _ = self.batch_costs(xs, ys, TT.ones_like(xs, dtype=floatX),
                                         TT.ones_like(ys, dtype=floatX))
        fn = theano.function([x, y], word_probs, name="probs_fn")
        return lambda x, y: (fn(x, y), numpy.zeros((1,), dtype=floatX))

    def create_scorer(self, batch=False):
        inputs = self._batch_inputs()
        fn = theano.function(list(inputs), [-self.batch_costs(*inputs)[1]], name="score_fn")
        if batch:
            return fn
        return lambda x, y: fn(x[:, None], y[:, None], numpy.ones((len(x), 1), floatX),
                               numpy.ones((len(y), 1), floatX))

    def create_representation_computer(self):
        return theano.function([self.sampling_x], [self.sampling_c], name="repr_fn")

    def create_initializers(self):
        c = TT.matrix("c")
        return theano.function([c], [self.init_state(c[0])], name="init_fn")

    def create_next_probs_computer(self):
        c, k, y, h = TT.matrix("c"), TT.lscalar("k"), TT.lvector("y"), TT.matrix("h")
        return theano.function([c, k, y, h], [self.probs(h, y, c.mean(0)[None, :])],
                               name="next_probs_fn", on_unused_input="ignore")

    def create_next_states_computer(self):
        """Built, like GroundHog's (encdec.py:1259), from a graph that also draws: one more
        random op on the softmax layer's stream, after build."""
        c, k, y, h = TT.matrix("c"), TT.lscalar("k"), TT.lvector("y"), TT.matrix("h")
        ctx = c.mean(0)[None, :]
        self.draw(self.probs(h, y, ctx))
        return theano.function([c, k, y, h], [self.next_state(h, y, ctx)],
                               name="next_states_fn", on_unused_input="ignore")
''' % {"shapes": SHAPES, "dim": DIM, "batch_iterator": MOCK_BATCH_ITERATOR}

# SGD_adadelta's interface (gs, gnorm2, dnorm2, one call = one update) with Theano's grad
STAND_IN_SGD = """
import numpy
import theano
import theano.tensor as TT


class SGD(object):
    def __init__(self, model, state, data):
        self.model, self.data, self.enc_dec = model, data, model.enc_dec
        zeros = lambda p: theano.shared(numpy.zeros_like(p.get_value()), name=p.name)
        self.gs = [zeros(p) for p in model.params]
        self.gnorm2 = [zeros(p) for p in model.params]
        self.dnorm2 = [zeros(p) for p in model.params]
        inputs = self.enc_dec._batch_inputs()
        cost = self.enc_dec.batch_costs(*inputs)[1].sum()
        grads = theano.grad(cost, model.params)
        norm = TT.sqrt(sum((g ** 2).sum() for g in grads))
        clipped = [g / TT.maximum(norm, 1.0) for g in grads]
        self.train_fn = theano.function(list(inputs), [cost, norm],
                                        updates=list(zip(self.gs, clipped)), name="train_fn")
        rho, eps = 0.95, 1e-6
        ups = []
        for p, g, gn, dn in zip(model.params, self.gs, self.gnorm2, self.dnorm2):
            gn_new = rho * gn + (1 - rho) * g ** 2
            d = -TT.sqrt(dn + eps) / TT.sqrt(gn_new + eps) * g
            ups += [(gn, gn_new), (dn, rho * dn + (1 - rho) * d ** 2), (p, p + d)]
        self.update_fn = theano.function([], [], updates=ups, name="update_fn")

    def __call__(self):
        b = self.data.next()
        cost, norm = self.train_fn(b["x"], b["y"], b["x_mask"], b["y_mask"])
        self.update_fn()
        return {"cost": cost, "grad_norm": norm, "lr": 1.0}
"""


def write_stand_in(root):
    files = {
        "experiments/__init__.py": "",
        "groundhog/__init__.py": "",
        "groundhog/trainer/__init__.py": "",
        "experiments/nmt/__init__.py": STAND_IN_NMT,
        "experiments/nmt/sample.py": MOCK_GROUNDHOG["experiments/nmt/sample.py"],
        "experiments/nmt/score.py": MOCK_GROUNDHOG["experiments/nmt/score.py"],
        "groundhog/trainer/SGD_adadelta.py": STAND_IN_SGD,
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text.lstrip("\n"), encoding="utf-8")


def encoder_numpy(w, seq):
    """The stand-in's annotations for one sentence, in float64 (see RNNEncoderDecoder)."""
    c, out = np.zeros(DIM), []
    for x in seq:
        c = np.tanh(w["W_src_emb"][x] + c @ w["U_enc"])
        out.append(c)
    return np.array(out)


@pytest.fixture(scope="module")
def theano_python():
    if not THEANO_PY.is_file():
        ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
        (pytest.fail if ci else pytest.skip)(
            f"{THEANO_VENV} not found: create it with `bash tools/theano_venv.sh` (tools/test.sh does)"
        )
    return THEANO_PY


@pytest.fixture(scope="module")
def recorded(theano_python, tmp_path_factory):
    d = tmp_path_factory.mktemp("theano_recorder")
    write_stand_in(d / "gh")
    (d / "src.txt").write_text("we have four hot schools .\nhello\nthe cat\n", encoding="utf-8")
    (d / "trg.txt").write_text(
        "nous avons quatre écoles chaudes .\nbonjour\nle chat\n", encoding="utf-8"
    )
    data = d / "data"
    data.mkdir()
    vocab_en = {"we": 2, "have": 3, "the": 4, "cat": 5}
    for name, obj in (
        ("vocab.en.pkl", vocab_en),
        ("vocab.fr.pkl", {"le": 2, "chat": 3}),
        ("ivocab.en.pkl", {v: k for k, v in vocab_en.items()}),
    ):
        (data / name).write_bytes(pickle.dumps(obj, protocol=2))
    write_corpus(data)
    (d / "s.pkl").write_bytes(pickle.dumps({"seed": 3}, protocol=0))
    rng = np.random.RandomState(20261201)
    weights = {k: rng.normal(0, 0.8, size=s).astype("float32") for k, s in SHAPES.items()}
    np.savez(d / "m.npz", **weights)
    argv = recorder_args(d, groundhog=d / "gh") + [
        "--remap-dir",
        str(data),
        "--steps",
        "2",
        "--steps-beam",
        "2",
        "--beam-sizes",
        "1",
        "2_normalize",
        "--sampler-calls",
        "2",
        "--changes",
        "bs=2",
        "--case",
        "theano_stand_in",
    ]
    env = dict(os.environ, THEANO_FLAGS=THEANO_FLAGS, PYTHONHASHSEED="0", PYTHONUTF8="1")
    env.pop("PYTHONPATH", None)
    run = subprocess.run(
        [str(theano_python), str(RECORDER)] + argv,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=str(d),
        env=env,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert (d / "trace.h5").is_file() and not (d / "trace.h5.partial").exists()
    return d, weights, run


def test_recorder_runs_on_theano_1_0_5(recorded):
    d, _, run = recorded
    with TraceFile(d / "trace.h5") as tr:
        tr.validate()
        a = tr.attrs
        assert a["theano_version"] == "1.0.5" and a["numpy_version"] == "1.23.5"
        # this machine's paths by their base name (issue 35): base_compiledir=compiledir
        public_flags = THEANO_FLAGS.replace(str(THEANO_VENV / "compiledir"), "compiledir")
        assert a["theano_floatX"] == "float32" and a["THEANO_FLAGS"] == public_flags
        assert (
            a["scan_mode"] == "no C compiler: Python implementations of every op, python scan loop"
        )
        assert a["groundhog_commit"] == REFERENCE_COMMIT
        assert "is not a git checkout" in run.stderr
        assert a["prototype"] == "prototype_state"
        assert sorted(a["param_names"]) == sorted(SHAPES)
    raw = (d / "trace.h5").read_bytes()
    assert str(d).encode() not in raw and str(REPO).encode() not in raw


def test_missing_corpus_on_real_theano(theano_python, tmp_path):
    """Issue 35's first run: vocabularies and test set in --remap-dir, the training corpus
    elsewhere.  Exit 2 within a minute (Theano imported, nothing compiled) naming the corpus
    file and the fixes, no trace written -- where the recorder of main waited forever for
    GroundHog's dead loader thread."""
    write_stand_in(tmp_path / "gh")
    (tmp_path / "src.txt").write_text("we have\n", encoding="utf-8")
    (tmp_path / "trg.txt").write_text("le chat\n", encoding="utf-8")
    data = tmp_path / "data"
    data.mkdir()
    for name in ("vocab.en.pkl", "vocab.fr.pkl", "ivocab.en.pkl"):
        (data / name).write_bytes(pickle.dumps({"we": 2}, protocol=2))
    (tmp_path / "s.pkl").write_bytes(pickle.dumps({"seed": 3}, protocol=0))
    np.savez(tmp_path / "m.npz", W_out=np.zeros((DIM, 9), dtype="float32"))
    env = dict(os.environ, THEANO_FLAGS=THEANO_FLAGS, PYTHONHASHSEED="0", PYTHONUTF8="1")
    env.pop("PYTHONPATH", None)
    argv = recorder_args(tmp_path, groundhog=tmp_path / "gh") + ["--remap-dir", str(data)]
    run = subprocess.run(
        [str(theano_python), str(RECORDER)] + argv,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(tmp_path),
        env=env,
    )
    assert run.returncode == 2, run.stderr[-3000:]
    assert run.stderr.strip().splitlines()[-1] == (
        "record_theano_traces.py: error: state['source'][0] "
        "/nonexistent/binarized_text.shuffled.en.h5 (the training corpus /train_step reads): "
        f"not found there nor as binarized_text.shuffled.en.h5 in --remap-dir {data}; give "
        "--data DIR (the folder holding binarized_text.shuffled.en.h5), or --parts without "
        "train_step"
    )
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("trace.h5")]


def test_scan_mode_wording_is_the_reference_recordings(monkeypatch):
    """With a C compiler and scan_perform_ext disabled (MANIFEST section 1; what the .pth file
    of tools/theano_venv.sh does), ``scan_mode`` is worded as the shared recordings'."""
    import h5py

    rec = load_module("record_theano_traces", RECORDER)

    class theano:
        class config:
            cxx = "g++"

    monkeypatch.setitem(sys.modules, "theano.scan_module.scan_perform_ext", None)
    assert rec.scan_mode(theano) == REFERENCE_SCAN_MODE
    monkeypatch.setattr(theano.config, "cxx", "")
    assert rec.scan_mode(theano).startswith("no C compiler")
    ref = REPO.parent / "shared" / "legacy_traces" / "search" / "trace.h5"
    if ref.is_file():
        with h5py.File(ref, "r") as f:
            assert f.attrs["scan_mode"] == REFERENCE_SCAN_MODE


def test_representations_are_the_compiled_scan(recorded):
    d, w, _ = recorded
    with TraceFile(d / "trace.h5") as tr:
        for i in range(3):
            r = tr.repr(i)
            c = encoder_numpy({k: v.astype(np.float64) for k, v in w.items()}, r["seq"])
            assert np.abs(r["c"] - c).max() < 1e-5
            h0 = np.tanh(c[0] @ w["W_init"] + w["b_init"])
            assert np.abs(r["init_states"].reshape(-1) - h0).max() < 1e-5
        steps = tr.steps(0)
        assert steps.n_steps >= 1
        for st in steps.steps:
            assert np.allclose(st["next_probs"].sum(1), 1, atol=1e-5)
            assert np.array_equal(st["costs"], st["flat_next_costs"][st["best_costs_indices"]])
        p0 = tr.pairs(0)
        assert p0["word_probs"].shape == (len(p0["trg_ids"]), 1) and np.all(p0["word_probs"] > 0)


def test_sampler_streams_against_the_port_mrg(recorded):
    """Seed -> rstate right after build (ONE jump: the sampler's multinomial; the extra op
    BeamSearch.compile builds must not show) -> the sampler's state matrix -> its state after
    each call (each of the n_steps draws advances rows 0..n_samples-1 by one step)."""
    import h5py

    d, _, _ = recorded
    with TraceFile(d / "trace.h5") as tr:
        smp = tr.sampler()
    assert sorted(smp["calls"]) == [0, 2]
    streams = mrg.MRGRandomStreams(smp["attrs"]["mrg_seed"])
    matrix = streams.new_state_matrix()  # the sampler's multinomial, built in build()
    assert np.array_equal(smp["mrg_base_rstate_after_build"], streams.rstate)
    with h5py.File(d / "trace.h5", "r") as f:
        before = f["sampler/rstate_shared_before_first_call"]
        # 01: the op create_next_states_computer built after build, never advanced
        assert sorted(before) == ["00", "01_first8rows"]
        assert bool(before["00"].attrs["used_by_sample_fn"])
        assert not before["01_first8rows"].attrs["used_by_sample_fn"]
        assert np.array_equal(before["00"][()], matrix.rows)
        for index in (0, 2):
            call = smp["calls"][index]
            n_steps, n_samples = call["sample_ids"].shape
            assert n_steps == call["attrs"]["n_steps"] == 3 * (len(call["seq"]) - 1)
            for _ in range(n_steps):
                matrix.uniform(n_samples)
            after = f[f"sampler/{index}/rstate_shared_after_call/00_first8rows"]
            assert np.array_equal(after[()], matrix.rows[:8])
            assert (
                after.attrs["sha256"]
                == __import__("hashlib")
                .sha256(np.ascontiguousarray(matrix.rows).tobytes())
                .hexdigest()
            )
            assert np.all(call["sample_neg_log_probs"] > 0)


def test_train_step_from_the_compiled_trainer(recorded):
    d, w, _ = recorded
    with TraceFile(d / "trace.h5") as tr:
        ts = tr.train_step()
    order = ts["attrs"]["param_order"]
    assert sorted(order) == sorted(SHAPES) and sorted(ts["attrs"]["changed_params"]) == sorted(
        SHAPES
    )
    assert np.isfinite(ts["attrs"]["rval_cost"]) and ts["attrs"]["rval_grad_norm"] > 0
    for name in order:
        step = ts["params_after"][name].astype(np.float64) - w[name]
        # Adadelta's first step from zero accumulators: |d| = sqrt(eps / (eps + 0.05 g^2)) |g|
        g = ts["clipped_grads"][name].astype(np.float64)
        expect = -np.sqrt(1e-6) / np.sqrt(0.05 * g**2 + 1e-6) * g
        assert np.abs(step - expect).max() < 1e-6, name
        assert np.allclose(ts["gnorm2_after"][name], 0.05 * g**2, rtol=1e-5, atol=1e-12)
    assert json.loads(json.dumps(ts["attrs"]["param_order"])) == order
