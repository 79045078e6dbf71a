#!/usr/bin/env python3
"""Benchmark: random sampling one sentence at a time vs the batched sampler.

Samples ``--n-samples`` translations of each line of ``--source`` (default: the test set of
``--case``, default ``<traces>/search``) with the literal path (``batch_size=1``, one
``sample_fn`` call per sentence, as sample.py) and with the batched path
(``--batch-size``), prints sentences/s and sampled words/s (every step of every sample:
``n_samples * 3 * (len(seq) - 1)`` per sentence), and checks that both drew the same
ids and the same float32 ``-log p`` bit for bit.

    python tools/bench_sampling.py --case ../shared/legacy_traces/search --n-samples 10
"""

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))

import numpy as np  # noqa: E402
from benchlib import add_threads_argument, set_threads  # noqa: E402

from groundhog_port.harness.check import find_case  # noqa: E402
from groundhog_port.legacy.data import read_text_lines  # noqa: E402
from groundhog_port.legacy.loading import open_experiment  # noqa: E402
from groundhog_port.sampling import Sampler, SamplingFailed  # noqa: E402
from groundhog_port.sampling.sampler import n_steps_for  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", default=str(REPO.parent / "shared" / "legacy_traces" / "search"))
    p.add_argument("--source", help="source sentences (default: the case's test file)")
    p.add_argument("--n-samples", type=int, default=10)
    p.add_argument("--alpha", type=float, default=1.0)
    p.add_argument("--batch-size", type=int, default=32)
    add_threads_argument(p, default=1)
    args = p.parse_args(argv)
    set_threads(args.threads)
    f = find_case(args.case)
    exp = open_experiment(f.state, f.model, data_dir=f.dir)
    lines = read_text_lines(args.source or f.source)
    seqs = [exp.parse_source(line)[0] for line in lines]
    words = sum(args.n_samples * n_steps_for(s) for s in seqs)
    results = {}
    for name, bs in (("literal", 1), ("batched", args.batch_size)):
        t0 = time.perf_counter()
        results[name] = Sampler(exp).sample_many(seqs, args.n_samples, args.alpha, batch_size=bs)
        dt = time.perf_counter() - t0
        print(
            f"{name:8s} batch {bs:3d}: {len(seqs) / dt:8.2f} sentences/s  "
            f"{words / dt:10.0f} sampled words/s  ({dt:.2f} s, {args.threads} thread(s))"
        )
    same = all(
        (isinstance(a, SamplingFailed) and str(a) == str(b))
        or (
            np.array_equal(a.draw.ids, b.draw.ids)
            and np.array_equal(
                a.draw.neg_log_probs.view(np.int32), b.draw.neg_log_probs.view(np.int32)
            )
        )
        for a, b in zip(results["literal"], results["batched"])
    )
    print(f"identical draws: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
