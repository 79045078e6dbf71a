#!/usr/bin/env python3
"""An independent float32 producer of traces: GroundHog's network in plain numpy, at any size
and for any architecture its state options describe.

The reference recordings (``shared/legacy_traces``) come from Theano on models of dim
<= 40 and on the options of five prototypes.  To show that the parity bounds
(:mod:`groundhog_port.harness.tolerance`) hold at scale, and that the port follows every
architecture option as the original does, without Theano, this tool builds a random model
-- ``prototype_search_state`` with the sizes asked, up to RNNsearch-50 (dim 1000, rank 620,
30,001 words, c_dim 2000), or any prototype with state changes (``variant``,
``parity_tests/parity/test_state_options.py``) -- writes it as a case folder
(``*_state.pkl``, ``*_model.npz``, vocabularies, ``test.en``/``test.fr``) and records
``trace.h5`` with a second float32 implementation written in plain numpy
(``tools/numpy_groundhog.py``) -- numpy's own BLAS, which is what Theano called on the
reference recordings (``blas.ldflags`` empty) -- of what GroundHog computes:

* ``/repr``: the encoder's annotations and the initial decoder state
  (encdec.py:659 ``Encoder``, :1296 annotations, :847 initializer);
* ``/pairs``: teacher-forced word probabilities, alignments and the score
  (``create_probs_computer``/``create_scorer``, encdec.py:1441-1476);
* ``/steps``: sample.py's ``BeamSearch.search`` (sample.py:47-135) instrumented step by step,
  with ``numpy.argpartition`` as the original;
* ``/beam``: ``sample()`` (sample.py:145) for the beam labels asked.

No groundhog_port code computes any recorded number: the port only draws the random
weights of the full-size search model (``tools/bench_search.full_size_model``'s recipe,
which makes random models end their sentences at realistic lengths; a variant's weights
are drawn here) and writes the file (``TraceWriter``).  Then
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

from numpy_groundhog import F32, Failed, NumpyGroundHog, beam_search  # noqa: E402

# -- the architectures varied ---------------------------------------------------------------
HARD_SIGMOID = "lambda x: x*(x>0)*(x<1)"
HARD_TANH = "lambda x: x*(x>-1)*(x<1)"
RELU = "lambda x: x*(x>0)"
SEARCH, ENCDEC = "prototype_search_state", "prototype_encdec_state"

#: the architectures ``parity_tests/parity/test_state_options.py`` records, by name: a
#: prototype and the options changed from it (docs/options.md names the variants of a key)
VARIANTS: dict[str, dict[str, object]] = {
    # readout: no previous word, no initializer, the first-word check off
    "no_bigram_no_bias_code": dict(prototype=SEARCH, bigram=False, bias_code=False),
    "first_word_unchecked": dict(prototype=SEARCH, check_first_word=False),
    # the output layer: no deep output; Maxout(3); a tanh readout over maxout_part=1
    "shallow_output": dict(prototype=SEARCH, deep_out=False),
    "maxout_3": dict(prototype=SEARCH, unary_activ="Maxout(3)", maxout_part=3),
    "tanh_readout": dict(prototype=SEARCH, unary_activ="lambda x: TT.tanh(x)", maxout_part=1),
    # activations: the embeddings', every layer's, then each layer's own
    "rectified": dict(prototype=SEARCH, rank_n_activ=RELU, activ=RELU),
    "prefixed_activations": dict(
        prototype=SEARCH, enc_activ=HARD_TANH, dec_activ=RELU, back_enc_activ=HARD_SIGMOID
    ),
    # the gates' activations: un-prefixed (the backward encoder's), then each layer's own
    "gate_activations": dict(
        prototype=SEARCH,
        rec_gater=HARD_SIGMOID,
        rec_reseter=HARD_SIGMOID,
        enc_rec_gater=HARD_SIGMOID,
        dec_rec_reseter=HARD_SIGMOID,
    ),
    "prefixed_gate_activations": dict(
        prototype=SEARCH,
        enc_rec_reseter=HARD_SIGMOID,
        dec_rec_gater=HARD_SIGMOID,
        back_enc_rec_gater=HARD_TANH,
        back_enc_rec_reseter=HARD_TANH,
    ),
    # gates removed from the encoders (the search decoder asserts both, encdec.py:209)
    "encoder_gates_off": dict(prototype=SEARCH, enc_rec_gating=False, rec_reseting=False),
    "encoder_resets_off": dict(prototype=SEARCH, enc_rec_reseting=False, rec_gating=False),
    "backward_gates_prefixed_off": dict(
        prototype=SEARCH, back_enc_rec_gating=False, back_enc_rec_reseting=False
    ),
    # RNNencdec's decoder: without update gate; without reset gate and context inputs
    "encdec_decoder_ungated": dict(prototype=ENCDEC, dec_rec_gating=False),
    "encdec_no_reset_no_inputs": dict(
        prototype=ENCDEC, dec_rec_reseting=False, decoding_inputs=False
    ),
    # the annotations: every component alone or in pairs
    "encdec_forward_states": dict(prototype=ENCDEC, forward=True, last_forward=False),
    "encdec_last_backward": dict(prototype=ENCDEC, last_backward=True),
    "encdec_backward_states": dict(prototype=ENCDEC, backward=True),
    "search_last_backward": dict(prototype=SEARCH, backward=False, last_backward=True),
    "search_over_last_forward": dict(
        prototype=SEARCH, forward=False, backward=False, last_forward=True
    ),
}


# -- the case folder -------------------------------------------------------------------------
SIZES = {"full": dict(dim=1000, rank=620, vocab=30001), "mid": dict(dim=64, rank=48, vocab=501)}


def make_case(out, dim, rank, vocab, sentences, seed, min_len=4, max_len=12, variant=None):
    """Random model + vocabularies + test sentences in ``out``; returns (state, params, src,
    trg).

    Without ``variant``: ``prototype_search_state`` with :func:`bench_search.full_size_model`'s
    weights (realistic sentence lengths at any size).  With ``variant`` (``{"prototype":
    name, **state changes}``): that prototype changed so, its weights drawn by
    :meth:`numpy_groundhog.NumpyGroundHog.draw_params` -- exactly the arrays the original
    saves for that architecture, found without the port -- and the end-of-sequence output
    bias raised by 2 so that searches end."""
    import legacy_states

    out.mkdir(parents=True, exist_ok=True)
    changes = dict(variant or {})
    state = getattr(legacy_states, changes.pop("prototype", "prototype_search_state"))()
    state.update(
        dim=dim,
        rank_n_approx=rank,
        n_sym_source=vocab,
        n_sym_target=vocab,
        null_sym_source=vocab - 1,
        null_sym_target=vocab - 1,
        seed=seed,
    )
    state.update(changes)
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
    if variant is None:
        params = full_size_params(state, seed)
    else:
        params = NumpyGroundHog(state, draw=np.random.RandomState(seed)).draw_params()
        out_bias = "b_dec_deep_softmax" if state["deep_out"] else "b_dec_softmax"
        params[out_bias][state["null_sym_target"]] += F32(2)
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


def full_size_params(state, seed):
    """:func:`bench_search.full_size_model`'s weights under their legacy names."""
    from bench_search import full_size_model

    from groundhog_port.legacy.checkpoint import legacy_param_table

    model = full_size_model(seed=seed, state=state)
    table, _ = legacy_param_table(model.cfg)
    params = {}
    for entry in table:
        t = model
        for part in entry.path.split("."):
            t = getattr(t, part)
        params[entry.name] = t.detach().cpu().numpy().astype(F32)
    return params


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
    variant=None,
):
    """Build the case in ``out`` and record ``out/trace.h5`` with
    :class:`numpy_groundhog.NumpyGroundHog`; ``words``: the fewest and most words of a test
    sentence (long sentences: sums of 64+ terms, docs/trace_format.md); ``variant``: another
    architecture (:func:`make_case`)."""
    from groundhog_port.harness.trace import TraceWriter, parse_beam_label

    t0 = time.perf_counter()
    state, params, src, trg = make_case(
        Path(out), dim, rank, vocab, sentences, seed, *words, variant=variant
    )
    m = NumpyGroundHog(state, params)
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
                # without search the original's alignment is TT.zeros((1,)) (encdec.py:1076)
                alignment=np.zeros(1, F32) if al is None else al[:, :, None],
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
