#!/usr/bin/env python3
"""An independent float32 producer of traces: RNNsearch in plain numpy, at any size.

The reference recordings (``shared/legacy_traces``) come from Theano on models of dim
<= 40.  To show that the parity bounds (:mod:`groundhog_port.harness.tolerance`) hold at scale
without Theano, this tool builds a random RNNsearch (``prototype_search_state`` with the
sizes asked, up to RNNsearch-50: dim 1000, rank 620, 30,001 words, c_dim 2000), writes it
as a case folder (``*_state.pkl``, ``*_model.npz``, vocabularies, ``test.en``/``test.fr``)
and records ``trace.h5`` with a second float32 implementation written here in plain numpy
-- numpy's own BLAS, which is what Theano called on the reference recordings
(``blas.ldflags`` empty) -- of what GroundHog computes:

* ``/repr``: the bidirectional encoder's annotations and the initial decoder state
  (encdec.py:659 ``Encoder``, :1296 annotations, :847 initializer);
* ``/pairs``: teacher-forced word probabilities, alignments and the score
  (``create_probs_computer``/``create_scorer``, encdec.py:1441-1476);
* ``/steps``: sample.py's ``BeamSearch.search`` (sample.py:47-135) instrumented step by step,
  with ``numpy.argpartition`` as the original;
* ``/beam``: ``sample()`` (sample.py:145) for the beam labels asked.

No groundhog_port code computes any recorded number: the port only draws the random
weights (``tools/bench_search.full_size_model``'s recipe, which makes random models end
their sentences at realistic lengths) and writes the file (``TraceWriter``).  Then
``groundhog-port parity --case DIR`` must pass: float32 noise of another implementation,
at that size, is within the derived bounds.

Usage::

    python tools/numpy_trace_producer.py --out /tmp/full --size full --sentences 6
    python tools/numpy_trace_producer.py --out /tmp/mid --dim 256 --rank 128 --vocab 2001
    groundhog-port parity --case /tmp/full --float64-reference
"""

import argparse
import pickle
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))

F32 = np.float32


# -- the model in numpy float32 ----------------------------------------------------------------
def sigmoid(x):
    return F32(1) / (F32(1) + np.exp(-x))


class NumpySearch:
    """RNNsearch (prototype_search_state architecture) on the arrays of a ``*_model.npz``."""

    def __init__(self, params, dim, eos, unk):
        self.p = {k: np.asarray(v, dtype=F32) for k, v in params.items()}
        self.dim, self.eos, self.unk = dim, eos, unk

    def _w(self, name):
        return self.p[name]

    # encoder (encdec.py:705 build_encoder; rec_layers.py:1018 step_fprop)
    def _gru(self, prefix, x, x_z, x_r, h):
        r = sigmoid(h @ self._w(f"R_{prefix}_transition_0") + x_r)
        cand = np.tanh((r * h) @ self._w(f"W_{prefix}_transition_0") + x)
        z = sigmoid(h @ self._w(f"G_{prefix}_transition_0") + x_z)
        return z * cand + (F32(1) - z) * h

    def _run(self, prefix, emb):
        x = emb @ self._w(f"W_0_{prefix}_input_embdr_0") + self._w(f"b_0_{prefix}_input_embdr_0")
        x_z = emb @ self._w(f"W_0_{prefix}_update_embdr_0")
        x_r = emb @ self._w(f"W_0_{prefix}_reset_embdr_0")
        h = np.zeros((1, self.dim), F32)
        out = []
        for t in range(len(emb)):
            h = self._gru(prefix, x[t : t + 1], x_z[t : t + 1], x_r[t : t + 1], h)
            out.append(h[0])
        return np.stack(out)

    def encode(self, seq):
        """Annotations ``c (S, 2 dim)``: forward states ‖ backward states; the backward
        encoder embeds with the forward encoder's approx embedder (encdec.py:1330)."""
        emb = self._w("W_0_enc_approx_embdr")[seq] + self._w("b_0_enc_approx_embdr")
        fwd = self._run("enc", emb)
        bwd = self._run("back_enc", emb[::-1].copy())[::-1]
        return np.concatenate([fwd, bwd], axis=1)

    def initial_state(self, c):
        return np.tanh(
            c[:1, -self.dim :] @ self._w("W_0_dec_initializer_0") + self._w("b_0_dec_initializer_0")
        )

    # decoder one-step functions (encdec.py:1457 create_next_*_computer)
    def context(self, s, c, p_from_c):
        """RecurrentLayerWithSearch (encdec.py:299): exp-then-normalise, no max subtracted."""
        p = np.tanh((s @ self._w("B_dec_transition_0"))[None] + p_from_c[:, None])  # (S, n, dim)
        energy = np.exp((p @ self._w("D_dec_transition_0"))[..., 0])  # (S, n)
        alpha = energy / energy.sum(0)
        return alpha.T @ c, alpha

    def probs(self, s, ctx, y_prev, first_word_check=True):
        """Readout + maxout(2) + softmax (encdec.py:897-958; cost_layers.py:878)."""
        t = (
            ctx @ self._w("W_0_dec_repr_readout")
            + s @ self._w("W_0_dec_hid_readout_0")
            + self._w("b_0_dec_hid_readout_0")
        )
        if y_prev is not None:
            emb = self._w("W_0_dec_approx_embdr")[y_prev] + self._w("b_0_dec_approx_embdr")
            prev = emb @ self._w("W_0_dec_prev_readout_0")
            if first_word_check:
                prev = (y_prev > 0).astype(F32)[:, None] * prev
            t = t + prev
        t = t.reshape(len(t), -1, 2).max(-1)
        z = (t @ self._w("W1_dec_deep_softmax")) @ self._w("W2_dec_deep_softmax") + self._w(
            "b_dec_deep_softmax"
        )
        e = np.exp(z - z.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    def next_state(self, s, ctx, y):
        emb = self._w("W_0_dec_approx_embdr")[y] + self._w("b_0_dec_approx_embdr")
        x = (
            emb @ self._w("W_0_dec_input_embdr_0")
            + self._w("b_0_dec_input_embdr_0")
            + ctx @ self._w("W_0_dec_dec_inputter_0")
        )
        x_z = emb @ self._w("W_0_dec_update_embdr_0") + ctx @ self._w("W_0_dec_dec_updater_0")
        x_r = emb @ self._w("W_0_dec_reset_embdr_0") + ctx @ self._w("W_0_dec_dec_reseter_0")
        return self._gru("dec", x, x_z, x_r, s)

    def next_probs_fn(self, c, p_from_c, y_prev, s):
        ctx, _ = self.context(s, c, p_from_c)
        return self.probs(s, ctx, y_prev)

    def next_states_fn(self, c, p_from_c, y, s):
        ctx, _ = self.context(s, c, p_from_c)
        return self.next_state(s, ctx, y)

    def score(self, src, trg):
        """Teacher forcing (EVALUATION mode, encdec.py:963): word probabilities, alignments
        ``(T, S)`` and the float32 sum of ``log p`` (``-cost_per_sample``)."""
        c = self.encode(src)
        p_from_c = c @ self._w("A_dec_transition_0")
        s = self.initial_state(c)
        probs, alphas = [], []
        for t, y in enumerate(trg):
            ctx, alpha = self.context(s, c, p_from_c)
            # Shift-ed previous word, no y > 0 check in this mode (encdec.py:1159)
            prev = None if t == 0 else np.asarray([trg[t - 1]])
            p = self.probs(s, ctx, prev, first_word_check=False)
            probs.append(p[0, y])
            alphas.append(alpha[:, 0])
            s = self.next_state(s, ctx, np.asarray([y]))
        p = np.asarray(probs, dtype=F32)
        cost = -np.log(p)
        # the probabilities come out masked as p * mask + 1 - mask (mask 1): quantised to 2**-23
        mask = np.ones_like(p)
        word_probs = p * mask + F32(1) - mask
        return word_probs, np.stack(alphas).astype(F32), F32(-cost.sum(dtype=F32))


# -- sample.py's beam search, literally -----------------------------------------------------
class Failed(Exception):
    pass


def beam_search(m, seq, n_samples, ignore_unk=False, minlen=1, record=None):
    """sample.py:47-135 with numpy.argpartition; ``record`` collects the steps."""
    c = m.encode(seq)
    p_from_c = c @ m._w("A_dec_transition_0")
    states = m.initial_state(c)
    fin_trans, fin_costs = [], []
    trans, costs = [[]], np.zeros(1)
    for k in range(3 * len(seq)):
        if n_samples == 0:
            break
        beam_size = len(trans)
        last_words = np.asarray(
            [t[-1] for t in trans] if k > 0 else np.zeros(beam_size, dtype=np.int64), dtype=np.int64
        )
        probs = m.next_probs_fn(c, p_from_c, last_words, states)
        log_probs = np.log(probs)
        if ignore_unk:
            log_probs[:, m.unk] = -np.inf
        if k < minlen:
            log_probs[:, m.eos] = -np.inf
        next_costs = costs[:, None] - log_probs
        flat = next_costs.flatten()
        if n_samples >= flat.size:
            raise Failed(f"kth(={n_samples}) out of bounds ({flat.size})")
        best = np.argpartition(flat, n_samples)[:n_samples]
        voc = probs.shape[1]
        trans_indices, word_indices = best // voc, best % voc
        new_costs = flat[best]
        gathered = states[trans_indices]
        new_states = m.next_states_fn(c, p_from_c, word_indices, gathered)
        if record is not None:
            record.append(
                dict(
                    k=k,
                    n_samples=n_samples,
                    last_words=last_words,
                    states_in=states[None],
                    next_probs=probs,
                    flat_next_costs=flat,
                    best_costs_indices=best,
                    trans_indices=trans_indices,
                    word_indices=word_indices,
                    costs=new_costs,
                    states_gathered=gathered[None],
                    next_states=new_states[None],
                )
            )
        new_trans = [trans[ti] + [wi] for ti, wi in zip(trans_indices, word_indices)]
        trans, kept_costs, kept = [], [], []
        for i in range(n_samples):
            if word_indices[i] != m.eos:
                trans.append(new_trans[i])
                kept_costs.append(new_costs[i])
                kept.append(i)
            else:
                fin_trans.append(new_trans[i])
                fin_costs.append(new_costs[i])
        costs = np.asarray(kept_costs)
        states = new_states[kept]
        n_samples = len(kept)
    if not fin_trans:
        if ignore_unk:
            return beam_search(m, seq, n_samples, False, minlen, record)
        if n_samples < 500:
            return beam_search(m, seq, n_samples * 2, False, minlen, record)
        raise Failed("Translation failed")
    order = np.argsort(fin_costs)
    return [fin_trans[i] for i in order], np.asarray(fin_costs)[order]


# -- the case folder -------------------------------------------------------------------------
SIZES = {"full": dict(dim=1000, rank=620, vocab=30001), "mid": dict(dim=64, rank=48, vocab=501)}


def make_case(out, dim, rank, vocab, sentences, seed, min_len=4, max_len=12):
    """Random model + vocabularies + test sentences in ``out``; returns (state, params)."""
    from bench_search import full_size_model

    from groundhog_port.legacy.checkpoint import legacy_param_table
    from legacy_states import prototype_search_state

    out.mkdir(parents=True, exist_ok=True)
    state = prototype_search_state()
    state.update(
        dim=dim,
        rank_n_approx=rank,
        n_sym_source=vocab,
        n_sym_target=vocab,
        null_sym_source=vocab - 1,
        null_sym_target=vocab - 1,
        seed=seed,
    )
    words = {side: [f"{side}{i}" for i in range(2, vocab - 1)] for side in ("s", "t")}
    for side, key, ikey, lang in (
        ("s", "word_indx", "indx_word", "en"),
        ("t", "word_indx_trgt", "indx_word_target", "fr"),
    ):
        w2i = {"<s>": 0, "UNK": 1, **{w: i + 2 for i, w in enumerate(words[side])}}
        (out / f"vocab.{lang}.pkl").write_bytes(pickle.dumps(w2i, protocol=2))
        (out / f"ivocab.{lang}.pkl").write_bytes(
            pickle.dumps({i: w for w, i in w2i.items()}, protocol=2)
        )
        state[key], state[ikey] = str(out / f"vocab.{lang}.pkl"), str(out / f"ivocab.{lang}.pkl")
    (out / "random_state.pkl").write_bytes(pickle.dumps(state, protocol=2))
    model = full_size_model(seed=seed, state=state)
    table, _ = legacy_param_table(model.cfg)
    params = {}
    for entry in table:
        t = model
        for part in entry.path.split("."):
            t = getattr(t, part)
        params[entry.name] = t.detach().cpu().numpy().astype(F32)
    np.savez(out / "random_model.npz", **params)
    rng = np.random.RandomState(seed)
    # frequent words (small ids) more often, as in real text
    pick = lambda n: [int(min(vocab - 3, rng.zipf(1.3))) - 1 for _ in range(n)]
    src, trg = [], []
    for _ in range(sentences):
        src.append(" ".join(words["s"][i] for i in pick(rng.randint(min_len, max_len + 1))))
        trg.append(" ".join(words["t"][i] for i in pick(rng.randint(min_len, max_len + 1))))
    (out / "test.en").write_text("\n".join(src) + "\n", encoding="utf-8")
    (out / "test.fr").write_text("\n".join(trg) + "\n", encoding="utf-8")
    return state, params, src, trg


def ids(line, w2i, eos):
    return np.asarray([w2i.get(w, 1) for w in line.split()] + [eos], dtype=np.int64)


def produce(
    out,
    dim,
    rank,
    vocab,
    sentences=6,
    labels=("1", "5", "10_normalize", "5_ignore_unk"),
    n_steps=2,
    steps_beam=5,
    seed=1234,
    log=print,
    words=(4, 12),
):
    """Build the case in ``out`` and record ``out/trace.h5`` with :class:`NumpySearch`;
    ``words``: the fewest and most words of a test sentence (long sentences: sums of 64+
    terms, docs/trace_format.md)."""
    from groundhog_port.harness.trace import TraceWriter, parse_beam_label

    t0 = time.perf_counter()
    state, params, src, trg = make_case(Path(out), dim, rank, vocab, sentences, seed, *words)
    m = NumpySearch(params, dim, eos=vocab - 1, unk=1)
    w2i_s = {f"s{i}": i for i in range(2, vocab - 1)}
    w2i_t = {f"t{i}": i for i in range(2, vocab - 1)}
    path = Path(out) / "trace.h5"
    if path.exists():
        path.unlink()
    log(f"model built in {time.perf_counter() - t0:.1f} s; recording")
    with TraceWriter(
        path,
        case=Path(out).name,
        null_sym_source=vocab - 1,
        null_sym_target=vocab - 1,
        n_sym_source=vocab,
        n_sym_target=vocab,
        unk_sym_source=1,
        unk_sym_target=1,
        test_src_file="test.en",
        test_trg_file="test.fr",
        recorder="tools/numpy_trace_producer.py (numpy float32)",
        numpy_version=np.__version__,
    ) as w:
        for i, (s_line, t_line) in enumerate(zip(src, trg)):
            x, y = ids(s_line, w2i_s, vocab - 1), ids(t_line, w2i_t, vocab - 1)
            c = m.encode(x)
            w.write_repr(i, seq=x, c=c, init_states=m.initial_state(c))
            wp, al, score = m.score(x, y)
            w.write_pair(
                i,
                src_ids=x,
                trg_ids=y,
                word_probs=wp[:, None],
                alignment=al[:, :, None],
                score=score,
                src_line=s_line,
                trg_line=t_line,
            )
        for i in range(min(n_steps, len(src))):
            x = ids(src[i], w2i_s, vocab - 1)
            steps = []
            trans, costs = beam_search(m, x, steps_beam, minlen=len(x) // 2, record=steps)
            w.write_steps(
                i,
                steps=steps,
                seq=x,
                minlen=len(x) // 2,
                fin_trans=trans,
                fin_costs=costs,
                beam_size=steps_beam,
            )
        for label in labels:
            cfg = parse_beam_label(label)
            for i, s_line in enumerate(src):
                x = ids(s_line, w2i_s, vocab - 1)
                try:
                    trans, costs = beam_search(
                        m, x, cfg["beam_size"], cfg["ignore_unk"], len(x) // 2
                    )
                except Failed as err:
                    w.write_beam(label, i, error=f"ValueError: {err}")
                    continue
                if cfg["normalize"]:
                    costs = costs / np.asarray([len(t) for t in trans])
                w.write_beam(label, i, fin_trans=trans, fin_costs=costs)
            log(f"beam {label}: done ({time.perf_counter() - t0:.1f} s)")
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", required=True, help="case folder to write (created)")
    ap.add_argument(
        "--size",
        choices=sorted(SIZES),
        help="full: RNNsearch-50 (dim 1000, rank 620, "
        "30001 words); mid: dim 64, rank 48, 501 words",
    )
    ap.add_argument("--dim", type=int)
    ap.add_argument("--rank", type=int)
    ap.add_argument("--vocab", type=int, help="words per side incl. end-of-sequence")
    ap.add_argument("--sentences", type=int, default=6)
    ap.add_argument("--steps", type=int, default=2, help="instrumented searches (/steps)")
    ap.add_argument(
        "--labels", nargs="*", default=["1", "5", "10_normalize", "5_ignore_unk"],
        help="beam labels for /beam (none: no /beam group)",
    )  # fmt: skip
    ap.add_argument("--min-words", type=int, default=4, help="fewest words of a test sentence")
    ap.add_argument("--max-words", type=int, default=12, help="most words of a test sentence")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args(argv)
    size = dict(SIZES[args.size]) if args.size else {}
    for key in ("dim", "rank", "vocab"):
        if getattr(args, key) is not None:
            size[key] = getattr(args, key)
    if set(size) != {"dim", "rank", "vocab"}:
        ap.error("give --size or all of --dim, --rank, --vocab")
    if size["dim"] % 2 or size["dim"] < 4:
        ap.error("--dim must be even (maxout of 2) and >= 4")
    path = produce(
        Path(args.out),
        size["dim"],
        size["rank"],
        size["vocab"],
        args.sentences,
        args.labels,
        args.steps,
        seed=args.seed,
        log=lambda s: print(s, file=sys.stderr),
        words=(args.min_words, args.max_words),
    )
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
