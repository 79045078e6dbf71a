#!/usr/bin/env python3
"""Benchmark: the literal beam search (legacy.BeamSearch) vs the batched one.

Two models:

* ``full``: RNNsearch-50 at full size (prototype_search_state: dim 1000,
  rank_n_approx 620, 30001-word vocabularies) with random weights, built in memory
  (no file).  How the weights are chosen so that decoding ends at realistic lengths
  is in :func:`full_size_model`;
* ``fixture``: a recorded case (``--case``, default ``<traces>/search``).

On 100 random source sentences of 20-40 words (+ end-of-sequence), for beams 1, 5
and 10, each search runs in its own worker process (so that peak RSS is its own):
words/s (source words, end-of-sequence excluded), peak RSS
(``resource.getrusage``), ``torch.cuda.max_memory_allocated`` on CUDA, achieved
GFLOP/s and its share of the float32 matmul peak measured in the same run
(best ``torch.mm`` of ``--peak-size`` square matrices).  The literal search can be
limited to ``--n-literal`` sentences: its words/s is then per-sentence
extrapolation (words / time of those sentences) and says so.  The batched search's
n-best lists are compared with the literal ones on the sentences both decoded.

FLOPs are counted from the configuration (:func:`step_flops`, :func:`encoder_flops`):
matrix products only (elementwise work, the softmax and the selection are not
counted), per hypothesis and target step: ``next_probs`` (one attention with
the sentence's own length, readout, output layer) plus ``next_states`` (word
signals, context inputs, GRU) -- the attention once, as the model needs it (the
literal search computes it twice); the number of hypothesis-steps is the rows fed
to ``next_probs``, retries included.  The encoder (both directions, ``c @ A``,
initial state) is included and printed apart.

Threads: ``--threads`` (default: torch's, one per core).  On a machine other
processes are using, a run with more than one thread slows down several-fold (every
torch op waits for all its OpenMP threads to be scheduled); ``--threads 1`` then
gives steadier figures, measured against a one-thread peak.  The literal and the
batched search give identical results only at the same thread count (MKL's
reduction order may depend on it).

Run ``python tools/bench_search.py --help``.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import benchlib  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

# -- models -----------------------------------------------------------------------------------
#: unit of the decoder state used as a length counter, and of the backward encoder
COUNTER = 0
#: component of the word embeddings held constant (1) to drive the counters' gates
CONST = 0


def full_size_model(seed=1234, device="cpu", state=None):
    """RNNsearch-50 at full size with random weights that end at realistic lengths.

    ``state``: another size of the same architecture (default ``prototype_search_state()``;
    ``tools/numpy_trace_producer.py`` uses smaller ones).

    Every matrix is N(0, 1/fan_in), the word embeddings N(0, 1), biases N(0, 0.01);
    the output matrix W2 is scaled by 6 (peaked distributions: median top
    probability ~0.5) and the output bias is a Zipf prior ``-0.5 log(1 + id)``.
    Random weights alone never end a sentence (end-of-sequence has to beat 30000
    random logits), so two counters are wired in:

    * backward encoder unit ``COUNTER``: candidate ``tanh(3)``, constant update gate
      ``z_e = 0.005`` (a constant embedding component ``CONST`` feeds the gate), so
      after the whole sentence it holds ``h_v = 0.995 (1 - (1 - z_e)^L)``, which grows
      with the source length L; the decoder's initial state reads it:
      ``s0_u = tanh(-h_v)``;
    * decoder unit ``COUNTER`` climbs from ``s0_u`` towards 0.995 with gate
      ``z_d = 0.0043``: it crosses 0 after ~L target words;
    * the end-of-sequence logit is ``800 * s_u + 24`` plus the usual random part,
      through one maxout unit, one rank component and W2's end-of-sequence column:
      about 4 logits more per word, so end-of-sequence wins around t ~ L.

    Hypotheses end between ~0.6 L (minlen is L // 2) and ~1.3 L.
    """
    from groundhog_port.model.config import ModelConfig
    from groundhog_port.model.encdec import RNNEncoderDecoder
    from legacy_states import prototype_search_state

    cfg = ModelConfig.from_state(state if state is not None else prototype_search_state())
    model = RNNEncoderDecoder(cfg)
    g = torch.Generator().manual_seed(seed)
    u, c = COUNTER, CONST
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
            elif name.endswith("approx_embedder.W"):
                p.copy_(torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[0] ** 0.5)
        enc, back, dec = model.encoder, model.backward_encoder, model.decoder
        out = dec.output_layer
        out.W2.mul_(6.0)
        V, eos = cfg.n_sym_target, cfg.null_sym_target
        out.b.copy_(-0.5 * torch.log1p(torch.arange(V, dtype=torch.float32)))
        # constant embedding component CONST (source and target embeddings)
        for emb in (enc.approx_embedder, dec.approx_embedder):
            emb.W[:, c] = 0
            emb.b[c] = 1
        # counter units: candidate tanh(3), update gate sigmoid(g) held constant
        logit = lambda z: float(np.log(z / (1 - z)))
        for layer, inputs, gate in (
            (back, (back.input_embedder,), logit(0.005)),
            (dec, (dec.input_embedder, dec.dec_inputter), logit(0.0043)),
        ):
            layer.transition.W[:, u] = 0
            layer.transition.G[:, u] = 0
            for m in inputs:
                m.W[:, u] = 0
            layer.input_embedder.b[u] = 3.0
            layer.update_embedder.W[:, u] = 0
            layer.update_embedder.W[c, u] = gate
        dec.dec_updater.W[:, u] = 0
        # s0_u = tanh(-h_v): backward annotation of position 0 (c[0, -dim:]) -> initializer
        dec.initializer.W[:, u] = 0
        dec.initializer.W[u, u] = -1.0
        dec.initializer.b[u] = 0
        # end-of-sequence logit += 800 * s_u: readout columns 0, 1 (maxout unit 0) = 40 s_u,
        # W1 row 0 -> rank component 0 only, W2 row 0 -> end-of-sequence only (x 20)
        for m in (dec.repr_readout, dec.hid_readout, dec.prev_readout):
            m.W[:, :2] = 0
        dec.hid_readout.W[u, :2] = 40.0
        dec.hid_readout.b[:2] = 0
        out.W1[0, :] = 0
        out.W1[:, 0] = 0
        out.W1[0, 0] = 1.0
        out.W2[0, :] = 0
        out.W2[0, eos] = 20.0
        out.b[eos] = 24.0
    return model.to(device)


def fixture_model(case_dir, device="cpu"):
    from groundhog_port.legacy.loading import open_experiment

    state = next(Path(case_dir).glob("*state.pkl"))
    model_path = next(Path(case_dir).glob("*model.npz"))
    return open_experiment(state, model_path, device=device).model


def random_sentences(cfg, n, min_len, max_len, seed):
    """``n`` sources of ``min_len``..``max_len`` random words (ids 2..eos-1) + end-of-sequence."""
    rng = np.random.default_rng(seed)
    eos = cfg.null_sym_source
    return [
        np.append(rng.integers(2, eos, int(rng.integers(min_len, max_len + 1))), eos).astype(
            np.int64
        )
        for _ in range(n)
    ]


# -- FLOPs ------------------------------------------------------------------------------------
def _gates(rec):
    return 1 + int(rec.gating) + int(rec.reseting)


def step_flops(cfg, S):
    """Matrix-product FLOPs of one hypothesis at one target step, source length ``S``."""
    dim, rank, cdim, V = cfg.dim, cfg.rank_n_approx, cfg.c_dim, cfg.n_sym_target
    f = 0
    if cfg.search:
        f += 2 * dim * dim + 2 * S * dim + 2 * S * cdim  # s @ B, tanh(.) @ D, alpha @ c
    f += 2 * cdim * dim + 2 * dim * dim  # repr and hid readouts
    if cfg.bigram:
        f += 2 * rank * dim  # previous-word readout
    f += (2 * cfg.softmax_in * rank + 2 * rank * V) if rank else 2 * cfg.softmax_in * V
    g = _gates(cfg.dec)
    f += 2 * rank * dim * g  # word signals
    if cfg.decoding_inputs:
        f += 2 * cdim * dim * g  # context inputs
    f += 2 * dim * dim * g  # W, G, R
    return f


def encoder_flops(cfg, S):
    """Matrix-product FLOPs of encoding one sentence of ``S`` ids (incl. end-of-sequence)."""
    dim, rank = cfg.dim, cfg.rank_n_approx
    per_word = 2 * rank * dim * _gates(cfg.enc) + 2 * dim * dim * _gates(cfg.enc)
    if cfg.needs_backward_encoder:
        per_word += 2 * rank * dim * _gates(cfg.back_enc) + 2 * dim * dim * _gates(cfg.back_enc)
    f = S * per_word
    if cfg.search:
        f += 2 * S * cfg.c_dim * dim  # p_from_c = c @ A
    if cfg.bias_code:
        f += 2 * dim * dim  # initial state
    return f


# -- one measurement (worker process) ---------------------------------------------------------
def worker(args):
    """Run one (model, search, beam) measurement; print one JSON line."""
    import logging

    logging.disable(logging.ERROR)
    from groundhog_port.search.common import SearchFailed

    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    model = (
        full_size_model(args.seed, device)
        if args.model == "full"
        else fixture_model(args.case, args.device)
    )
    cfg = model.cfg
    seqs = random_sentences(cfg, args.sentences, args.min_len, args.max_len, args.seed + 1)
    if args.search == "literal":
        seqs = seqs[: args.n_literal]
    rss_model = benchlib.peak_rss_mib()
    local_peak = benchlib.measure_peak(2048, 3, device)  # the machine as this run finds it
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times, first = [], None
    for _ in range(max(1, args.repeat)):
        results, stats, seconds, rows_S = _search_once(args, model, seqs)
        times.append(seconds)
        if first is None:
            first = results
        elif _outcomes(results) != _outcomes(first):
            raise SystemExit("the search gave other results when repeated")
    results = first
    seconds = min(times)
    if rows_S is not None:
        row_steps = sum(r for r, _ in rows_S)
        dec_flops = sum(r * step_flops(cfg, S) for r, S in rows_S)
    else:
        row_steps = stats["row_steps"]
        dec_flops = sum(r * step_flops(cfg, S) for S, r in stats["rows_by_length"].items())
    enc_flops = sum(encoder_flops(cfg, len(s)) for s in seqs)
    out = _outcomes(results)
    best_len = [
        len(r.trans[int(np.argmin(r.costs))]) for r in results if not isinstance(r, SearchFailed)
    ]
    print(
        json.dumps(
            dict(
                seconds=seconds,
                seconds_all=times,
                sentences=len(seqs),
                src_words=int(sum(len(s) - 1 for s in seqs)),
                out_words=int(sum(best_len)),
                row_steps=int(row_steps),
                dec_flops=dec_flops,
                enc_flops=enc_flops,
                peak_rss_mib=benchlib.peak_rss_mib(),
                model_rss_mib=rss_model,
                cuda_max_mib=(
                    torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else None
                ),
                failed=sum(isinstance(r, SearchFailed) for r in results),
                local_peak=local_peak,
                len_ratio=float(np.mean([b / (len(s) - 1) for b, s in zip(best_len, seqs)]))
                if best_len
                else None,
                stats=stats,
                results=out,
            )
        )
    )


def _search_once(args, model, seqs):
    """One timed run of the search over ``seqs``: results, the batched search's stats,
    seconds, and the literal search's (rows, source length) per step (None if batched)."""
    from groundhog_port.search.batched import BatchedBeamSearch
    from groundhog_port.search.common import SearchFailed
    from groundhog_port.search.literal import BeamSearch, sample

    device = torch.device(args.device)
    rows_S = []
    with torch.inference_mode():
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        if args.search == "literal":
            results = []
            for seq in seqs:
                S = len(seq)
                bs = BeamSearch(
                    model, recorder=lambda d, S=S: rows_S.append((d["next_probs"].shape[0], S))
                )
                try:
                    results.append(sample(bs, seq, args.beam))
                except SearchFailed as err:
                    results.append(err)
            stats = {}
        else:
            bb = BatchedBeamSearch(model, batch_size=args.batch_size, max_rows=args.max_rows)
            results = bb.sample_many(seqs, args.beam)
            stats = dict(bb.stats)
            rows_S = None
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
    return results, stats, seconds, rows_S


def _outcomes(results):
    """Results as comparable JSON: [hypotheses, costs as float hex] or the failure message."""
    from groundhog_port.search.common import SearchFailed

    out = []
    for r in results:
        if isinstance(r, SearchFailed):
            out.append(str(r))
        else:
            out.append([r.trans, [float(c).hex() for c in r.costs]])
    return out


# -- driver -----------------------------------------------------------------------------------
def run_worker(args, model, search, beam, repeat=1):
    """One measurement in its own process; ``repeat``: timed runs of the search in it (the
    figures are the best one's, ``seconds_all`` has every run's)."""
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        "--model",
        model,
        "--search",
        search,
        "--beam",
        str(beam),
        "--device",
        args.device,
        "--case",
        str(args.case),
        "--sentences",
        str(args.sentences),
        "--min-len",
        str(args.min_len),
        "--max-len",
        str(args.max_len),
        "--seed",
        str(args.seed),
        "--batch-size",
        str(args.batch_size),
        "--max-rows",
        str(args.max_rows),
        "--threads",
        str(args.threads),
        "--n-literal",
        str(args.n_literal_full if model == "full" else args.n_literal),
        "--repeat",
        str(repeat),
    ]
    return json.loads(benchlib.run_worker(cmd).strip().splitlines()[-1])


def compare(lit, bat):
    """Sentences both decoded: identical lists and bitwise costs?"""
    n = len(lit["results"])
    same = sum(a == b for a, b in zip(lit["results"], bat["results"][:n]))
    return same, n


def parse_args(argv=None):
    default_root = Path(
        os.environ.get("GROUNDHOG_LEGACY_TRACES", REPO.parent / "shared" / "legacy_traces")
    )
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Numbers depend on the machine's load: run it alone.",
    )
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.add_argument(
        "--case",
        type=Path,
        default=default_root / "search",
        help="recorded case folder for the fixture model (default: %(default)s)",
    )
    p.add_argument(
        "--models",
        default="full,fixture",
        help="comma-separated: full, fixture (default: %(default)s)",
    )
    p.add_argument("--beams", default="1,5,10", help="beam sizes (default: %(default)s)")
    p.add_argument("--sentences", type=int, default=100, help="source sentences (default 100)")
    p.add_argument("--min-len", type=int, default=20, help="shortest source, words (20)")
    p.add_argument("--max-len", type=int, default=40, help="longest source, words (40)")
    p.add_argument(
        "--n-literal",
        type=int,
        default=100,
        help="sentences decoded by the literal search, fixture model (100)",
    )
    p.add_argument(
        "--n-literal-full",
        type=int,
        default=10,
        help="sentences decoded by the literal search at full size (10); "
        "its words/s is then extrapolated per sentence",
    )
    p.add_argument(
        "--batch-size",
        type=int,
        default=100,
        help="sentences decoded together by the batched search (100)",
    )
    p.add_argument(
        "--max-rows",
        type=int,
        default=2048,
        help="hypotheses a batched group starts with, at most (2048)",
    )
    benchlib.add_threads_argument(p)
    p.add_argument("--peak-size", type=int, default=4096, help="matmul peak: square size (4096)")
    benchlib.add_seed_and_json_arguments(p)
    # worker mode (internal)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--search", help=argparse.SUPPRESS)
    p.add_argument("--beam", type=int, help=argparse.SUPPRESS)
    p.add_argument("--repeat", type=int, default=1, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    benchlib.set_threads(args.threads)
    if args.worker:
        return worker(args)
    device = torch.device(args.device)
    peak = benchlib.measure_peak(args.peak_size, 4, device)
    load = os.getloadavg()[0]
    print(
        f"device {args.device}, torch threads {torch.get_num_threads()}, load average "
        f"{load:.1f} on {os.cpu_count()} cores, float32 matmul peak (torch.mm "
        f"{args.peak_size}^2, best of 5): {peak:.1f} GFLOP/s"
    )
    if load > 0.5 and torch.get_num_threads() > 1 and device.type == "cpu":
        print(
            "note: other processes are running; with more than one thread every torch op "
            "waits for all its OpenMP threads to be scheduled (--threads 1 is then faster)"
        )
    report = dict(
        peak_gflops=peak,
        device=args.device,
        threads=torch.get_num_threads(),
        load_average=load,
        rows=[],
    )
    header = (
        f"{'model':8} {'beam':>4} {'search':8} {'sents':>5} {'seconds':>8} {'words/s':>8} "
        f"{'GFLOP/s':>8} {'%peak':>6} {'%peak2k':>7} {'hyp-steps':>9} {'MFLOP/hs':>8} "
        f"{'enc%':>5} {'RSS MiB':>8} {'cuda MiB':>8} {'len':>5} {'fails':>5}"
    )
    for model in args.models.split(","):
        print(f"\n== {model} model" + ("" if model == "full" else f" ({args.case})"))
        print(header)
        for beam in [int(b) for b in args.beams.split(",")]:
            res = {}
            for search in ("literal", "batched"):
                r = run_worker(args, model, search, beam)
                flops = r["dec_flops"] + r["enc_flops"]
                r["words_per_s"] = r["src_words"] / r["seconds"]
                r["gflops"] = flops / r["seconds"] / 1e9
                r["pct_peak"] = 100 * r["gflops"] / peak
                r["pct_local_peak"] = 100 * r["gflops"] / r["local_peak"]
                res[search] = r
                extrap = "*" if search == "literal" and r["sentences"] < args.sentences else " "
                cuda = f"{r['cuda_max_mib']:8.0f}" if r["cuda_max_mib"] is not None else f"{'-':>8}"
                print(
                    f"{model:8} {beam:4d} {search:8}{extrap}{r['sentences']:5d} "
                    f"{r['seconds']:8.2f} {r['words_per_s']:8.1f} {r['gflops']:8.1f} "
                    f"{r['pct_peak']:6.1f} {r['pct_local_peak']:7.1f} {r['row_steps']:9d} "
                    f"{r['dec_flops'] / max(r['row_steps'], 1) / 1e6:8.3f} "
                    f"{100 * r['enc_flops'] / flops:5.1f} {r['peak_rss_mib']:8.0f} {cuda} "
                    f"{r['len_ratio'] or 0:5.2f} {r['failed']:5d}",
                    flush=True,
                )
            same, n = compare(res["literal"], res["batched"])
            lit, bat = res["literal"], res["batched"]
            print(
                f"{'':8} {beam:4d} batched/literal: words/s "
                f"x{bat['words_per_s'] / lit['words_per_s']:.1f}, GFLOP/s x{bat['gflops'] / lit['gflops']:.1f}; identical n-best lists and "
                f"costs on {same}/{n} sentences decoded by both",
                flush=True,
            )
            for r in res.values():
                r.pop("results")
            report["rows"].append(dict(model=model, beam=beam, identical=same, compared=n, **res))
    print(
        "\n* literal search on fewer sentences: words/s and GFLOP/s extrapolated per sentence "
        "(the rate over the sentences it decoded).\nGFLOP/s: matrix products only, decoder "
        "(one attention per hypothesis-step) + encoder (column enc%); MFLOP/hs = decoder "
        "MFLOP per hypothesis-step.  %peak: of the peak above; %peak2k: of a 2048^2 "
        "torch.mm peak measured by the worker\njust before its search (the machine as that "
        "run found it).  len: best hypothesis words / source words."
    )
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
