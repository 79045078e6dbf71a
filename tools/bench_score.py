#!/usr/bin/env python3
"""Benchmark: teacher-forced scoring (score.py --mode batch) at full size, against the peak.

RNNsearch-50 (``prototype_search_state``) and RNNencdec-50 (``prototype_encdec_state``),
dim 1000, rank 620, 30,001 words, random weights (:func:`bench_search.full_size_model` for
RNNsearch; N(0, 1/fan_in) for RNNencdec).  ``--batches`` batches of ``--batch-size`` (80,
GroundHog's ``bs``) random pairs, source and target lengths 20-50 words, padded as GroundHog
padded them (``create_padded_batch``, trim_batches; ``seqlen`` raised to 50 where the state
has less, so that every batch keeps its 80 pairs).  Reported: pairs/s, target tokens/s,
achieved GFLOP/s and its share of the float32 matmul peak measured in the same run
(``benchlib.measure_peak``), and the process's peak RSS (run one model per process, as
``tools/bench.py`` does, for that model's own).  FLOPs are those of the padded batch, matrix products only,
as in ``bench_search`` (encoder per source position, one decoder step per target position
with the full 30,001-word output layer, attention over the padded source length).

    python tools/bench_score.py [--threads N] [--batches 3] [--models search,encdec] [--json F]
"""

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from bench_search import encoder_flops, full_size_model, step_flops  # noqa: E402
from benchlib import (  # noqa: E402
    add_seed_and_json_arguments,
    add_threads_argument,
    measure_peak,
    peak_rss_mib,
    set_threads,
)


def encdec_model(seed=1234):
    from groundhog_port.model.config import ModelConfig
    from groundhog_port.model.encdec import RNNEncoderDecoder
    from legacy_states import prototype_encdec_state

    model = RNNEncoderDecoder(ModelConfig.from_state(prototype_encdec_state()))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            scale = (
                0.1
                if p.dim() == 1
                else (1.0 if name.endswith("approx_embedder.W") else p.shape[0] ** -0.5)
            )
            p.copy_(torch.randn(p.shape, generator=g) * scale)
    return model


def batches(state, n_batches, batch_size, seed):
    from groundhog_port.legacy.data import Batch, create_padded_batch

    # RNNencdec-50's state has seqlen 30, which drops every pair with a side over 30 words
    # (create_padded_batch): batches of 80 pairs of 20-50 words need seqlen 50
    state = dict(state, seqlen=max(int(state["seqlen"]), 50))
    rng = np.random.default_rng(seed)
    eos_s, eos_t = state["null_sym_source"], state["null_sym_target"]
    out = []
    for _ in range(n_batches):
        xs = [
            np.append(rng.integers(2, eos_s, int(rng.integers(20, 51))), eos_s)
            for _ in range(batch_size)
        ]
        ys = [
            np.append(rng.integers(2, eos_t, int(rng.integers(20, 51))), eos_t)
            for _ in range(batch_size)
        ]
        X, Xm, Y, Ym = create_padded_batch(state, xs, ys)
        out.append(Batch(X, Xm, Y, Ym))
    return out


def measure(model, state, args):
    from groundhog_port.search.scoring import score_batch

    cfg = model.cfg
    data = batches(state, args.batches, args.batch_size, args.seed)
    times = []
    with torch.no_grad():
        score_batch(model, data[0])  # warm-up: first-call allocations
        for _ in range(max(1, args.repeat)):
            t = time.perf_counter()
            for b in data:
                score_batch(model, b)
            times.append(time.perf_counter() - t)
    dt = min(times)
    pairs = sum(b.x.shape[1] for b in data)
    tokens = int(sum(b.y_mask.sum() for b in data))
    flops = sum(
        b.x.shape[1]
        * (encoder_flops(cfg, b.x.shape[0]) + b.y.shape[0] * step_flops(cfg, b.x.shape[0]))
        for b in data
    )
    return {
        "pairs": pairs,
        "seconds": round(dt, 3),
        "seconds_all": [round(t, 3) for t in times],
        "pairs_per_s": round(pairs / dt, 2),
        "target_tokens_per_s": round(tokens / dt, 1),
        "gflops": round(flops / dt / 1e9, 1),
        "peak_rss_mib": round(peak_rss_mib()),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="search,encdec")
    p.add_argument("--batches", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=80)
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="timed passes over the batches in one process; the best is reported (1)",
    )
    add_threads_argument(p)
    p.add_argument(
        "--peak-size",
        type=int,
        default=4096,
        help="matmul peak: square size (0: not measured, as tools/bench.py runs it)",
    )
    add_seed_and_json_arguments(p)
    args = p.parse_args(argv)
    set_threads(args.threads)
    from legacy_states import prototype_encdec_state, prototype_search_state

    peak = measure_peak(args.peak_size, 3, torch.device("cpu")) if args.peak_size else None
    rows = {}
    for name in args.models.split(","):
        model = full_size_model(args.seed) if name == "search" else encdec_model(args.seed)
        state = prototype_search_state() if name == "search" else prototype_encdec_state()
        r = measure(model, state, args)
        r["share_of_peak"] = round(r["gflops"] / peak, 3) if peak else None
        rows[name] = r
        del model
    print(
        f"threads {torch.get_num_threads()}, matmul peak "
        + (f"{peak:.1f} GFLOP/s ({args.peak_size}^2)" if peak else "not measured")
        + f", batch {args.batch_size}, lengths 20-50"
    )
    print("| model | pairs/s | target tokens/s | GFLOP/s | share of peak | peak RSS (MiB) |")
    print("|---|---|---|---|---|---|")
    for name, r in rows.items():
        share = "-" if peak is None else f"{100 * r['share_of_peak']:.1f}%"
        print(
            f"| {name} | {r['pairs_per_s']} | {r['target_tokens_per_s']} | {r['gflops']} | "
            f"{share} | {r['peak_rss_mib']} |"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {"threads": torch.get_num_threads(), "peak_gflops": peak, "rows": rows}, indent=1
            )
        )


if __name__ == "__main__":
    main()
