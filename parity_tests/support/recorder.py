"""What the recorder tests share: the GroundHog commit the recordings were made with, the
recorder ``tools/record_theano_traces.py``, a module loader, its arguments, and a mock
GroundHog + Theano."""

import importlib.util

from parity_tests.support.cases import REPO

REFERENCE_COMMIT = "4d2433b6ff03da63f3619ecb3e8c501901779cdb"
RECORDER = REPO / "tools" / "record_theano_traces.py"


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, str(path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---------------------------------------------------------------------------------------
# The real producer (GroundHogProducer) against a mock GroundHog + Theano
# ---------------------------------------------------------------------------------------
# A minimal stand-in with GroundHog's *interfaces* (module layout, class and function names,
# call signatures, return conventions) and toy numerics -- enough to run the recorder's
# GroundHog code path end to end: model loading, parse_input, the compiled-function wrappers,
# sample.argpartition, the beam-doubling crash.  It is written for this test, not GroundHog code.

#: the training batches of the stand-ins of ``experiments.nmt`` (here and in
#: test_recorder_theano.py): ``get_batch_iterator(state)``, ``start(offset)`` and ``next()``
#: as GroundHog's (groundhog/datasets/TM_dataset.py:162-262): ``start`` starts a daemon
#: loader thread that opens ``state['target'][0]`` then ``state['source'][0]`` (here: each
#: must begin with HDF5's signature, else the thread dies) and puts the batch (the module's
#: ``_batch(offset)``) on a queue, where ``next()`` waits for it -- forever, when the thread
#: died, as GroundHog's does.  ``__next__`` is what a lib2to3 conversion leaves (the raw
#: queue item); the mock's SGD calls ``next(self.data)`` as the converted SGD_adadelta does
#: (test_recorder_theano.py's calls ``self.data.next()``, as the original).
MOCK_BATCH_ITERATOR = """
import threading
try:
    import queue as _queue
except ImportError:
    import Queue as _queue

HDF5_SIGNATURE = b"\\x89HDF\\r\\n\\x1a\\n"


class _Fetcher(threading.Thread):
    def __init__(self, parent, offset):
        threading.Thread.__init__(self)
        self.parent, self.offset = parent, offset
        self.daemon = True

    def run(self):
        import os, time
        time.sleep(float(os.environ.get("MOCK_LOADER_SLEEP", 0)))  # a loader that never answers
        for path in (self.parent.state["target"][0], self.parent.state["source"][0]):
            with open(path, "rb") as f:
                if f.read(8) != HDF5_SIGNATURE:
                    raise IOError("%s: not an HDF5 file" % path)
        self.parent.queue.put(_batch(self.offset))


class _Iterator(object):
    def __init__(self, state):
        self.state = state
    def start(self, offset):
        self.queue = _queue.Queue()
        self.gather = _Fetcher(self, offset)
        self.gather.start()
    def next(self):
        return self.queue.get()
    def __next__(self):
        # what lib2to3 leaves (TM_dataset.py's next renamed): the raw queue item, no batch
        return ("raw", "queue item")

def get_batch_iterator(state):
    return _Iterator(state)
"""

#: the state's training corpus in the stand-ins' prototype_state (stored, legacy paths)
MOCK_CORPUS = (
    "/nonexistent/binarized_text.shuffled.en.h5",
    "/nonexistent/binarized_text.shuffled.fr.h5",
)
#: what the stand-ins' loader threads accept as an .h5 file
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def write_corpus(folder, valid=True):
    """The stand-ins' training corpus (MOCK_CORPUS's base names) in ``folder``; ``valid``:
    with HDF5's signature, else files the loader thread dies on."""
    for path in MOCK_CORPUS:
        name = path.rsplit("/", 1)[1]
        (folder / name).write_bytes(HDF5_SIGNATURE + b"toy" if valid else b"not hdf5")


#: ``pad(seqs)``: the mocks' id sequences as a batch, time-major (longest x number of
#: sequences, int64, zero-padded) with its float32 0/1 mask (test_recorder.py's fake producer
#: and the mock score.py)
MOCK_PAD = """
def pad(seqs):
    t = max(len(s) for s in seqs)
    a = numpy.zeros((t, len(seqs)), dtype="int64")
    m = numpy.zeros((t, len(seqs)), dtype="float32")
    for j, s in enumerate(seqs):
        a[:len(s), j] = s
        m[:len(s), j] = 1
    return a, m
"""

MOCK_GROUNDHOG = {
    "theano/__init__.py": """
__version__ = "mock"
class config(object):
    floatX = "float32"
    cxx = "g++"
""",
    "theano/sandbox/__init__.py": "",
    "theano/sandbox/rng_mrg.py": """
import numpy

class _Shared(object):
    def __init__(self, value):
        self.value = value
    def get_value(self):
        return self.value.copy()
    def set_value(self, value):
        self.value = value

class MRG_RandomStreams(object):
    def __init__(self, seed=12345):
        self.rstate = numpy.array([seed] * 6, dtype="int32")
        self.state_updates = []
    def new_state(self, rows):
        st = numpy.arange(rows * 6, dtype="int32").reshape(rows, 6) + self.rstate[0]
        self.rstate = self.rstate + 1
        sv = _Shared(st)
        self.state_updates.append((sv, None))
        return sv
""",
    "groundhog/__init__.py": "",
    "groundhog/trainer/__init__.py": "",
    "groundhog/trainer/SGD_adadelta.py": """
import numpy
from theano.sandbox.rng_mrg import _Shared

class SGD(object):
    def __init__(self, model, state, data):
        self.model, self.data = model, data
        zeros = lambda: [_Shared(numpy.zeros_like(p.get_value())) for p in model.params]
        self.gs, self.gnorm2, self.dnorm2 = zeros(), zeros(), zeros()
    def __call__(self):
        batch = next(self.data)       # SGD_adadelta.py:163 as lib2to3 converts it
        for p, g, gn, dn in zip(self.model.params, self.gs, self.gnorm2, self.dnorm2):
            grad = numpy.full_like(p.get_value(), float(batch["x"].sum()) / 100.0)
            if p.name == "W_b":
                grad[...] = 0           # a parameter this batch leaves unchanged
            g.set_value(grad)
            gn.set_value(0.05 * grad ** 2)
            dn.set_value(0.05 * grad ** 2 + 1.0)
            p.set_value(p.get_value() - grad)
        return {"cost": 2.5, "grad_norm": 0.75, "lr": 1.0, "name": "not a number"}
""",
    "experiments/__init__.py": "",
    "experiments/nmt/__init__.py": """
import numpy

def prototype_state():
    return dict(seed=3, null_sym_source=6, null_sym_target=8, n_sym_source=7, n_sym_target=9,
                unk_sym_source=1, unk_sym_target=1, bs=2, oov="UNK", dim=3,
                word_indx="/nonexistent/vocab.en.pkl", word_indx_trgt="/nonexistent/vocab.fr.pkl",
                indx_word="/nonexistent/ivocab.en.pkl",
                source=["/nonexistent/binarized_text.shuffled.en.h5"],
                target=["/nonexistent/binarized_text.shuffled.fr.h5"])

def parse_input(state, word2idx, line, raise_unk=False, idx2word=None, unk_sym=-1, null_sym=-1):
    unk_sym = state["unk_sym_source"] if unk_sym < 0 else unk_sym
    null_sym = state["null_sym_source"] if null_sym < 0 else null_sym
    words = line.split()
    seq = numpy.array([word2idx.get(w, unk_sym) for w in words] + [null_sym], dtype="int64")
    if idx2word:
        idx2word[null_sym] = "<eos>"
        idx2word[unk_sym] = state["oov"]
        return seq, " ".join(idx2word[i] for i in seq)
    return seq, words

from theano.sandbox.rng_mrg import MRG_RandomStreams, _Shared

class _P(_Shared):
    def __init__(self, name):
        _Shared.__init__(self, numpy.zeros((2, 3), dtype="float32"))
        self.name = name

class _LM(object):
    def __init__(self):
        self.params = [_P("W_b"), _P("W_a")]
    def load(self, path):
        self.loaded = path
        for k, p in enumerate(self.params):
            p.set_value(numpy.full((2, 3), k + 0.5, dtype="float32"))

class _Layer(object):
    def __init__(self, name, seed):
        self.name = name
        self.trng = MRG_RandomStreams(seed)

class _Part(object):
    pass

def _batch(offset):
    x = numpy.arange(6, dtype="int64").reshape(3, 2) + offset
    m = numpy.ones((3, 2), dtype="float32")
    return {"x": x, "x_mask": m, "y": x + 1, "y_mask": m}
"""
    + MOCK_BATCH_ITERATOR
    + """
class RNNEncoderDecoder(object):
    def __init__(self, state, rng, skip_init=False, compute_alignment=False):
        assert skip_init == compute_alignment  # sample.py's build, or train.py's
        self.state = state
        self.rng = rng
    def build(self):
        import sys
        sys.stderr.write("mock GroundHog: build\\n")
        self.built = True
        self.encoder, self.backward_encoder, self.decoder = _Part(), _Part(), _Part()
        self.encoder.transitions = [_Layer("enc_transition_0", self.rng.randint(1000))]
        self.decoder.output_layer = _Layer("dec_deep_softmax", self.rng.randint(int(1e6)))
        trng = self.decoder.output_layer.trng
        self.sampler_state = trng.new_state(20)
        trng.new_state(20)                      # a stream sample_fn never advances
    def create_sampler(self, many_samples=False):
        def sample_fn(n_samples, n_steps, T, seq):
            st = self.sampler_state.get_value()
            ids = (st[:n_steps, :n_samples] % 9).astype("int64")
            ids[-1] = 8
            self.sampler_state.set_value(st + 1)
            return ids, numpy.full((n_steps, n_samples), 0.25, dtype="float32")
        return sample_fn
    def create_lm_model(self):
        self.lm = _LM()
        self.lm.word_indxs = dict((i, "w%d" % i) for i in range(8))
        self.lm.word_indxs[8] = "<eol>"
        return self.lm
    def create_probs_computer(self, return_alignment=False):
        def probs(x, y):
            p = numpy.full((len(y), 1), 0.5, dtype="float32")
            return p, numpy.full((len(y), len(x), 1), 1.0 / len(x), dtype="float32")
        return probs
    def create_scorer(self, batch=False):
        if batch:
            return lambda x, y, xm, ym: [(numpy.log(0.5) * ym.sum(0)).astype("float32")]
        return lambda x, y: [numpy.array([numpy.log(0.5) * len(y)], dtype="float32")]
    def create_representation_computer(self):
        return lambda seq: [numpy.outer(seq, numpy.ones(6)).astype("float32")]
    def create_initializers(self):
        return lambda c: [numpy.tanh(c[0, -3:])]
    def create_next_probs_computer(self):
        def next_probs(c, k, y, h):
            logits = numpy.add.outer(h.sum(1), numpy.arange(9.0)) + y[:, None] % 3
            p = numpy.exp(-numpy.abs(logits - 4.0 - k))
            if c.shape[0] == 2:          # a one-word sentence: never ends (-> beam doubling)
                p[:, 8] = 0.0
            return [(p / p.sum(1, keepdims=True)).astype("float32")]
        return next_probs
    def create_next_states_computer(self):
        return lambda c, k, y, h: [numpy.tanh(h + y[:, None] * 0.1).astype("float32")]
""",
    "experiments/nmt/sample.py": """
import numpy
from numpy import argpartition

class BeamSearch(object):
    def __init__(self, enc_dec):
        self.enc_dec = enc_dec
        self.eos = enc_dec.state["null_sym_target"]
    def compile(self):
        import sys
        sys.stderr.write("mock GroundHog: BeamSearch.compile\\n")
        e = self.enc_dec
        self.comp_repr = e.create_representation_computer()
        self.comp_init_states = e.create_initializers()
        self.comp_next_probs = e.create_next_probs_computer()
        self.comp_next_states = e.create_next_states_computer()
    def search(self, seq, n, ignore_unk=False, minlen=1):
        c = self.comp_repr(seq)[0]
        h = self.comp_init_states(c)[0][None, :]
        hyps, costs, done, done_costs = [[]], numpy.zeros(1), [], []
        for k in range(3 * len(seq)):
            if n == 0:
                break
            last = numpy.array([t[-1] if t else 0 for t in hyps], dtype="int64")
            logp = numpy.log(self.comp_next_probs(c, k, last, h)[0])
            if k < minlen:
                logp[:, self.eos] = -numpy.inf
            flat = (costs[:, None] - logp).flatten()
            best = argpartition(flat, n)[:n]
            voc = logp.shape[1]
            new = [hyps[i] + [w] for i, w in zip(best // voc, best % voc)]
            h = self.comp_next_states(c, k, best % voc, h[best // voc])[0]
            keep = [j for j, t in enumerate(new) if t[-1] != self.eos]
            for j, t in enumerate(new):
                if t[-1] == self.eos:
                    done.append(t)
                    done_costs.append(flat[best][j])
                    n -= 1
            hyps, costs, h = [new[j] for j in keep], flat[best][keep], h[keep]
        if not done:
            return self.search(seq, n * 2, False, minlen)
        order = numpy.argsort(done_costs)
        return [numpy.array(done[i]) for i in order], numpy.array(sorted(done_costs))

def sample(lm_model, seq, n_samples, sampler=None, beam_search=None, ignore_unk=False,
           normalize=False, alpha=1, verbose=False):
    import os
    if beam_search is not None and os.environ.get("MOCK_HANG_AT_BEAM") == str(n_samples):
        import time                          # the interruption tests: wait to be stopped
        open(os.environ["MOCK_HANG_MARKER"], "w").close()
        time.sleep(600)
    if sampler is not None:
        values, probs = sampler(n_samples, 3 * (len(seq) - 1), alpha, seq)
        sentences, costs = [], []
        for j in range(n_samples):
            words = []
            for w in values[:, j]:
                if lm_model.word_indxs[w] == "<eol>":
                    break
                words.append(lm_model.word_indxs[w])
            sentences.append(" ".join(words))
            costs.append(-numpy.sum(-probs[:len(words) + 1, j]))
        return sentences, costs, None
    trans, costs = beam_search.search(seq, n_samples, ignore_unk=ignore_unk, minlen=len(seq) // 2)
    if normalize:
        costs = [co / len(t) for co, t in zip(costs, trans)]
    sentences = [" ".join(lm_model.word_indxs[w] for w in t if lm_model.word_indxs[w] != "<eol>")
                 for t in trans]
    return sentences, costs, trans
""",
    "experiments/nmt/score.py": """
import numpy
"""
    + MOCK_PAD
    + """
class BatchBiTxtIterator(object):
    def __init__(self, state, src, indx_src, trg, indx_trg, batch_size, raise_unk):
        self.files, self.bs = (src, trg), batch_size
    def start(self):
        self.lines = [open(f).read().split("\\n")[:-1] for f in self.files]
    def __iter__(self):
        n = len(self.lines[0])
        for s in range(0, n, self.bs):
            out = {}
            for name, lines in zip("xy", self.lines):
                seqs = [[2 + len(w) % 4 for w in l.split()] + [6 if name == "x" else 8]
                        for l in lines[s:s + self.bs]]
                out[name], out[name + "_mask"] = pad(seqs)
            yield out
""",
}


def recorder_args(d, out="trace.h5", groundhog=None):
    """The recorder's required arguments for a work folder ``d`` holding ``s.pkl``, ``m.npz``,
    ``src.txt`` and ``trg.txt``; the trace is written to ``d / out``, GroundHog (or the
    producer) is looked for in ``groundhog`` (default: ``d``)."""
    return [
        "--groundhog",
        str(groundhog or d),
        "--state",
        str(d / "s.pkl"),
        "--model",
        str(d / "m.npz"),
        "--source",
        str(d / "src.txt"),
        "--target",
        str(d / "trg.txt"),
        "--output",
        str(d / out),
    ]


def lay_out_mock_case(d, corpus=True):
    """A work folder ``d`` for the recorder on the mock GroundHog (MOCK_GROUNDHOG): ``gh/``,
    the vocabularies in ``data/`` (and the training corpus, valid or not, unless ``corpus``
    is None), the state (GroundHog's prototype: the stored paths of MOCK_CORPUS and
    ``/nonexistent/...`` vocabularies), an empty model, three sentence pairs.  Returns the
    recorder's arguments (``--remap-dir data``, every part) less ``--output``."""
    import pickle

    gh = d / "gh"
    for rel, text in MOCK_GROUNDHOG.items():
        (gh / rel).parent.mkdir(parents=True, exist_ok=True)
        (gh / rel).write_text(text.lstrip("\n"), encoding="utf-8")
    data = d / "data"
    data.mkdir()
    vocab_en = {"we": 2, "have": 3, "the": 4, "cat": 5}
    for name, obj in (
        ("vocab.en.pkl", vocab_en),
        ("vocab.fr.pkl", {"le": 2, "chat": 3}),
        ("ivocab.en.pkl", {v: k for k, v in vocab_en.items()}),
    ):
        (data / name).write_bytes(pickle.dumps(obj, protocol=2))
    if corpus is not None:
        write_corpus(data, valid=corpus)
    (d / "s.pkl").write_bytes(pickle.dumps({"seed": 3}, protocol=0))
    (d / "m.npz").write_bytes(b"")
    (d / "src.txt").write_text("we have four hot schools .\nhello\nthe cat  \n", encoding="utf-8")
    (d / "trg.txt").write_text(
        "nous avons quatre écoles chaudes .\nbonjour\nle chat\n", encoding="utf-8"
    )
    argv = recorder_args(d, groundhog=gh)
    argv = argv[: argv.index("--output")]
    return argv + [
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
