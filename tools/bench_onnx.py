#!/usr/bin/env python3
"""The ONNX path against the port, in one run: sentences per second on the CPU.

The bundled fixture (``fixtures/search``, RNNsearch dim 32, a model trained by GroundHog)
is exported with ``export --format onnx`` and its 40 test sentences translated at each beam
by (a) the exported ``beam_search.py`` (numpy + onnxruntime, one sentence at a time, as
sample.py), (b) the port's literal search (``translate --batch-size 1``) and (c) the port's
batched search (``translate``'s default), all with one thread; the lines must be the
same.  ``tools/bench.py`` prints these rows after its own table; alone::

    python tools/bench_onnx.py [--beams 1,5,10] [--repeat 3] [--full N]

Tiny model: the figures measure per-step overhead (graph dispatch against torch op
dispatch), not arithmetic; the best of ``--repeat`` runs is kept.  ``--full N`` adds N
sentences through a full-size RNNsearch-50 (random weights) at beam 10, where the
arithmetic dominates: the driver against the port's literal search (same hypotheses?).
"""

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))

FIXTURE = REPO / "fixtures" / "search"


def _best(fn, repeat):
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def measure(beams=(1, 5, 10), repeat=3):
    """One row per beam: sentences/s of the ONNX driver, the literal and batched port
    searches, and whether all three wrote the same lines."""
    import logging

    import torch

    from groundhog_port.export.onnx_graphs import DRIVER_FILE, write_onnx
    from groundhog_port.legacy.loading import open_experiment
    from groundhog_port.search.translator import Translator

    logging.getLogger("groundhog_port").setLevel(logging.ERROR)
    logging.getLogger("groundhog_onnx").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    exp = open_experiment(FIXTURE / "search_state.pkl", FIXTURE / "search_model.npz")
    lines = (FIXTURE / "test.en").read_text(encoding="utf-8").split("\n")[:-1]
    seqs = [exp.parse_source(line)[0] for line in lines]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        write_onnx(exp, tmp)
        spec = importlib.util.spec_from_file_location("beam_search_bench", Path(tmp) / DRIVER_FILE)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        onnx = mod.OnnxTranslator(tmp, threads=1)

        def run_onnx(beam):
            out = []
            for line in lines:
                try:
                    out.append(onnx.translate_line(line, beam)[0])
                except mod.SearchFailed:
                    out.append("")
            return out

        for beam in beams:
            t_onnx, onnx_lines = _best(lambda beam=beam: run_onnx(beam), repeat)
            t_lit, lit = _best(lambda beam=beam: Translator(exp, beam).translate_seqs(seqs), repeat)
            t_bat, bat = _best(
                lambda beam=beam: Translator(exp, beam, batch_size=32).translate_seqs(seqs), repeat
            )
            same = onnx_lines == [t.line for t in lit] == [t.line for t in bat]
            rows.append(
                dict(
                    beam=beam,
                    sentences=len(lines),
                    onnx_per_s=len(lines) / t_onnx,
                    literal_per_s=len(lines) / t_lit,
                    batched_per_s=len(lines) / t_bat,
                    identical=same,
                )
            )
    return rows


def measure_full(n_sentences=3, beams=(10,), seed=1234):
    """The same at full RNNsearch-50 size (random weights, ``bench_search.full_size_model``;
    30,000 + 30,000 words, dim 1000): ``n_sentences`` random sources of 20-40 words, the
    ONNX driver against the port's literal search, one thread each, one run."""
    import json

    import bench_search
    import torch

    from groundhog_port.export.onnx_graphs import DRIVER_FILE, GRAPHS, search_settings, write_graphs
    from groundhog_port.search.literal import BeamSearch, sample
    from legacy_states import prototype_search_state

    torch.set_num_threads(1)
    model = bench_search.full_size_model(seed)
    seqs = bench_search.random_sentences(model.cfg, n_sentences, 20, 40, seed + 1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        write_graphs(model, tmp)
        config = {
            "graphs": GRAPHS,
            "search": search_settings(prototype_search_state(), model.cfg),
            "vocabularies": {"source_word2idx": {}, "source_idx2word": {}, "target_idx2word": {}},
        }
        (Path(tmp) / "config.json").write_text(json.dumps(config), encoding="utf-8")
        spec = importlib.util.spec_from_file_location(
            "beam_search_full", REPO / "groundhog_port" / "export" / DRIVER_FILE
        )
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        onnx = mod.OnnxTranslator(tmp, threads=1)
        for beam in beams:
            t0 = time.perf_counter()
            got = [onnx.sample(seq, beam)[0] for seq in seqs]
            t1 = time.perf_counter()
            want = [sample(BeamSearch(model), seq, beam).trans for seq in seqs]
            t2 = time.perf_counter()
            rows.append(
                dict(
                    beam=beam,
                    sentences=len(seqs),
                    onnx_per_s=len(seqs) / (t1 - t0),
                    literal_per_s=len(seqs) / (t2 - t1),
                    batched_per_s=None,
                    identical=got == want,
                    model="RNNsearch-50, random weights",
                )
            )
    return rows


def print_rows(rows):
    print("\nONNX path (1 thread; onnxruntime on the CPU vs the port, this run):")
    print(
        "| model | beam | sentences | ONNX driver | port, literal | port, batched | "
        "ONNX / literal | same output |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        batched = "-" if r["batched_per_s"] is None else f"{r['batched_per_s']:.2f} sent/s"
        print(
            f"| {r.get('model', 'fixtures/search')} | {r['beam']} | {r['sentences']} | "
            f"{r['onnx_per_s']:.2f} sent/s | {r['literal_per_s']:.2f} sent/s | {batched} | "
            f"{r['onnx_per_s'] / r['literal_per_s']:.2f}x | {'yes' if r['identical'] else 'NO'} |"
        )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--beams", default="1,5,10")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument(
        "--full",
        type=int,
        default=0,
        metavar="N",
        help="also N random sentences through RNNsearch-50 at full size (beam 10)",
    )
    args = p.parse_args(argv)
    rows = measure([int(b) for b in args.beams.split(",")], args.repeat)
    if args.full:
        rows += measure_full(args.full)
    print_rows(rows)


if __name__ == "__main__":
    main()
