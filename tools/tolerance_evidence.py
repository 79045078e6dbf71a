#!/usr/bin/env python3
"""The evidence for the multiple ``K`` of the derived parity bounds (groundhog_port.harness.tolerance).

Theano's own recordings hold several float32 computations of the same number; their
differences are Theano's float32 noise, measured here in units of ``noise`` (eq. 3 of
:mod:`groundhog_port.harness.tolerance`: ``max(|probe - p64|, scale * m, U32 * m)`` from the float64
shadow and the float64 float32-probe on the same inputs -- no float32 run).  Two float32
implementations each within ``K`` noise units of the exact value differ by at most ``2 K``
units, so a self-difference of ``x`` units asks for ``K >= x / 2``:

* the same hypothesis in the n-best lists of two beam labels (``1`` vs ``5`` vs ``10`` vs
  ``5_ignore_unk``; the ``_normalize`` labels times the length): Theano computed its cost in
  batches of other widths (other BLAS kernels);
* the single-sentence score (``/pairs/{i}/score``) vs the padded batch score of the same
  sentence (``/batch_all``): other shapes, padding;
* run-to-run repeats (``scores_batch_run2.txt``, ``trans_beam10_run2.txt``): identical, so
  Theano was deterministic and the repeats add no spread.

It also counts, in the ``/steps`` recordings, the exact float64 ties at argpartition's
selection boundary (the n-th and (n+1)-th cheapest candidates equal), and how many printed
scores of ``score --mode batch`` differ from ``scores_batch.txt`` in the last printed digit.

Usage: ``python tools/tolerance_evidence.py [--root ../shared/legacy_traces] [--json F]``.
"""

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from groundhog_port.harness import tolerance as tol  # noqa: E402
from groundhog_port.harness.check import find_case  # noqa: E402
from groundhog_port.harness.trace import TraceFile  # noqa: E402
from groundhog_port.legacy.loading import open_experiment  # noqa: E402
from groundhog_port.search.literal import path_costs  # noqa: E402
from groundhog_port.search.scoring import score_batch, score_pair  # noqa: E402

RAW_PAIRS = (
    ("1", "5"),
    ("5", "10"),
    ("1", "10"),
    ("5", "5_ignore_unk"),
    ("1_normalize", "5_normalize"),
    ("5_normalize", "10_normalize"),
)


def noise_units(diffs, probe, p64, m):
    """``|diff| / noise`` with the noise scale pooled over these elements (TERMS kind)."""
    diffs, probe, p64, m = (np.asarray(x, dtype=np.float64) for x in (diffs, probe, p64, m))
    scale, _ = tol.pooled_scale(p64, tol.TERMS, probe, m)
    noise = np.maximum(np.abs(probe - p64), np.maximum(scale * m, tol.U32 * m))
    return diffs / noise


def beam_self_differences(probe, m64, tr):
    labels = set(tr.beam_labels())
    rows = []  # (hyp length, |c_a - c_b| raw, seq, hyp)
    for a, b in RAW_PAIRS:
        if a not in labels or b not in labels:
            continue
        ra, rb = tr.beam(a), tr.beam(b)
        for i, sa in ra.sentences.items():
            sb = rb.sentences.get(i)
            if sa.error or sb is None or sb.error:
                continue
            cb = {tuple(t): c for t, c in zip(sb.trans, sb.costs)}
            for t, c in zip(sa.trans, sa.costs):
                t = tuple(t)
                if t in cb:
                    scale = len(t) if ra.normalize else 1.0
                    rows.append((len(t), abs(c - cb[t]) * scale, i, t))
    if not rows:
        return None
    seqs = {}
    q_probe, p64 = [], []
    for _, _, i, t in rows:
        if i not in seqs:
            seqs[i] = tr.repr(i)["seq"] if tr.has(f"repr/{i}") else None
        q_probe.append(path_costs(probe, seqs[i], [t])[0])
        p64.append(path_costs(m64, seqs[i], [t])[0])
    L = [r[0] for r in rows]
    d = np.asarray([r[1] for r in rows])
    u = noise_units(d, q_probe, p64, L)
    return dict(
        n=len(rows),
        max_abs=float(d.max()),
        max_units=float(u.max()),
        p99_units=float(np.quantile(u, 0.99)),
    )


def score_self_differences(probe, m64, tr):
    single = {i: float(tr.pairs(i)["score"][0]) for i in tr.pair_indices()}
    d, q_probe, p64, m = [], [], [], []
    k = 0
    for rec in tr.batch_all():
        for j, s in enumerate(rec["scores"]):
            i = k + j
            if i in single and np.isfinite(s) and np.isfinite(single[i]):
                pr = tr.pairs(i)
                s_probe = -float(score_pair(probe, pr["src_ids"], pr["trg_ids"]).cost[0])
                s64 = -float(score_pair(m64, pr["src_ids"], pr["trg_ids"]).cost[0])
                d.append(abs(float(s) - single[i]))
                q_probe.append(s_probe)
                p64.append(s64)
                m.append(len(pr["trg_ids"]))
        k += rec["scores"].shape[0]
    if not d:
        return None
    u = noise_units(d, q_probe, p64, m)
    return dict(n=len(d), max_abs=float(max(d)), max_units=float(u.max()))


def boundary_ties(tr):
    """Steps whose n-th and (n+1)-th cheapest candidates are exactly equal (float64)."""
    n_steps = n_ties = 0
    for i in tr.steps_indices():
        for st in tr.steps(i).steps:
            flat = np.asarray(st["flat_next_costs"])
            n = int(st["n_samples"])
            n_steps += 1
            if n < flat.size:
                part = np.partition(flat, n)
                n_ties += int(part[n - 1] == part[n])
    return dict(steps=n_steps, boundary_ties=n_ties)


def printed_scores(exp, case_dir, tr):
    """Lines of scores_batch.txt the port's ``{:.5e}`` output differs from, out of all."""
    path = Path(case_dir) / "scores_batch.txt"
    if not path.is_file():
        return None
    lines = path.read_text().split()
    port = []
    for rec in tr.batch_all():
        batch = SimpleNamespace(**{n: rec[n] for n in ("x", "y", "x_mask", "y_mask")})
        port += [
            f"{s:.5e}" for s in (-score_batch(exp.model, batch).cost.numpy().astype(np.float32))
        ]
    differ = sum(1 for a, b in zip(lines, port) if a != b)
    return dict(printed=len(lines), differ_last_digit=differ)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=str(REPO.parent / "shared" / "legacy_traces"))
    ap.add_argument(
        "--cases",
        nargs="+",
        default=["search", "encdec", "phrase", "search_variant", "encdec_variant"],
    )
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    out = {}
    for case in args.cases:
        d = Path(args.root) / case
        files = find_case(d)
        exp = open_experiment(files.state, files.model, data_dir=files.dir)
        m64, probe = exp.model.float64_shadow(), exp.model.float32_probe()
        with TraceFile(files.trace) as tr, torch.no_grad():
            out[case] = dict(
                beam=beam_self_differences(probe, m64, tr),
                single_vs_padded=score_self_differences(probe, m64, tr),
                ties=boundary_ties(tr),
                printed=printed_scores(exp, d, tr),
            )
        print(case, json.dumps(out[case]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
