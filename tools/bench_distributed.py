#!/usr/bin/env python3
"""Scaling of ``torchrun`` runs: 1 process vs N processes on this machine, in one run.

Translates the bundled fixture's test set (repeated ``--repeat`` times) and, when the shared
recordings are beside the checkout, scores ``--n-batches`` batches of their ``.h5`` corpus;
each workload once in a single process with the CLI's default threads (one for a model as
small as the fixture, torch's default otherwise), once under ``torchrun --nproc-per-node N``
(``cores / N`` threads each, as :func:`groundhog_port.distributed.world.setup` chooses).  Wall-clock includes process
start and model loading, as a user sees it; outputs are checked byte-identical.

    python tools/bench_distributed.py [--nproc 2] [--repeat 10] [--beam-size 5] [--json out.json]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
F = REPO / "fixtures" / "search"
MODEL = [f"--state={F / 'search_state.pkl'}", str(F / "search_model.npz")]
DATA = (
    Path(os.environ.get("GROUNDHOG_LEGACY_TRACES", REPO.parent / "shared" / "legacy_traces"))
    / "data"
)


def timed(cmd):
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env["PYTHONPATH"] = str(REPO)
    t = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{r.stderr[-2000:]}")
    return time.monotonic() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=10, help="copies of the 40-line test set")
    ap.add_argument("--beam-size", type=int, default=5)
    ap.add_argument("--n-batches", type=int, default=100, help="h5 batches to score")
    ap.add_argument("--json", help="write the figures here too")
    a = ap.parse_args()
    cores = os.cpu_count() or 1
    per_rank = max(1, cores // a.nproc)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        src = tmp / "src.en"
        src.write_text((F / "test.en").read_text() * a.repeat)
        n_lines = 40 * a.repeat
        work = [
            (
                "translate",
                n_lines,
                "sent",
                lambda out: [
                    "translate",
                    "--beam-search",
                    "--beam-size",
                    str(a.beam_size),
                    "--source",
                    src,
                    "--trans",
                    out,
                    *MODEL,
                ],
            )
        ]
        if (DATA / "binarized_text.shuffled.en.h5").exists():
            work.append(
                (
                    "score h5",
                    None,
                    "pairs",
                    lambda out: [
                        "score",
                        "--mode",
                        "batch",
                        "--allow-unk",
                        "--src",
                        DATA / "binarized_text.shuffled.en.h5",
                        "--trg",
                        DATA / "binarized_text.shuffled.fr.h5",
                        "--n-batches",
                        str(a.n_batches),
                        "--scores",
                        out,
                        *MODEL,
                    ],
                )
            )
        for name, count, unit, args in work:
            one, many = tmp / f"{unit}.1", tmp / f"{unit}.n"
            t1 = timed([sys.executable, "-m", "groundhog_port", *map(str, args(one))])
            tn = timed(
                [
                    sys.executable,
                    "-m",
                    "torch.distributed.run",
                    "--standalone",
                    "--nproc-per-node",
                    str(a.nproc),
                    "-m",
                    "groundhog_port",
                    *map(str, args(many)),
                ]
            )
            if one.read_bytes() != many.read_bytes():
                sys.exit(f"{name}: outputs differ between 1 and {a.nproc} processes")
            count = count or len(one.read_text().splitlines())
            rows.append(
                {
                    "workload": name,
                    "items": count,
                    "unit": unit,
                    "one_process_s": round(t1, 2),
                    "one_process_rate": round(count / t1, 1),
                    f"{a.nproc}_processes_s": round(tn, 2),
                    f"{a.nproc}_processes_rate": round(count / tn, 1),
                    "speedup": round(t1 / tn, 2),
                    "identical": True,
                }
            )
    print(
        f"{cores} cores; 1 process (default threads) vs {a.nproc} processes x {per_rank} "
        f"thread(s); fixture model, beam {a.beam_size}"
    )
    print(f"| workload | items | 1 process | {a.nproc} processes | speed-up | outputs |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['workload']} | {r['items']} {r['unit']} | {r['one_process_s']} s "
            f"({r['one_process_rate']} {r['unit']}/s) | {r[f'{a.nproc}_processes_s']} s "
            f"({r[f'{a.nproc}_processes_rate']} {r['unit']}/s) | x{r['speedup']} | identical |"
        )
    if a.json:
        Path(a.json).write_text(
            json.dumps({"cores": cores, "nproc": a.nproc, "rows": rows}, indent=1)
        )


if __name__ == "__main__":
    main()
