#!/usr/bin/env python3
"""Benchmark: wall time of commands that need no model, from process start to exit.

Each command runs ``--repeat`` times as a fresh ``python -m groundhog_port`` process (the
installed ``groundhog-port`` script runs the same ``main``); the figure is the median wall
time (and the minimum, the least disturbed by other work on the machine).  The target of
issue 26 is under 1 s for ``--help`` and ``bleu``.  For scale the same run times a bare
``python -c pass``, ``import torch`` (what every command paid before the CLI imported only
the module of the command given) and ``translate --help`` (a command whose module needs
torch).  ``bleu`` scores the bundled fixture's archived ``trans_beam10.txt`` against
``test.fr`` (sacrebleu BLEU and chrF, as a user does).

    python tools/bench_startup.py [--repeat 5] [--limit 1.0] [--json F]

Exit status 1 when the median of ``--help`` or ``bleu`` is over ``--limit`` seconds.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "fixtures" / "search"
CLI = [sys.executable, "-m", "groundhog_port"]

#: name -> argv; the first two are the ones the target is about
RUNS = {
    "groundhog-port --help": CLI + ["--help"],
    "groundhog-port bleu": CLI
    + ["bleu", "--hyp", str(FIXTURE / "trans_beam10.txt"), "--ref", str(FIXTURE / "test.fr")],
    "python -c pass": [sys.executable, "-c", "pass"],
    "python -c 'import torch'": [sys.executable, "-c", "import torch"],
    "groundhog-port translate --help": CLI + ["translate", "--help"],
}
TARGETS = ("groundhog-port --help", "groundhog-port bleu")


def wall_times(argv, repeat):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = subprocess.run(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=REPO
        )
        times.append(time.perf_counter() - t0)
        if r.returncode != 0:
            sys.exit(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.decode()[-500:]}")
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs per command (default 5)")
    ap.add_argument(
        "--limit",
        type=float,
        default=1.0,
        help="seconds the median of --help and bleu must stay under (default 1.0)",
    )
    ap.add_argument("--json", help="also write the figures as JSON")
    args = ap.parse_args()
    report = {}
    print(
        f"{'command':<34} {'median s':>9} {'min s':>7}   ({args.repeat} runs, "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})"
    )
    for name, argv in RUNS.items():
        times = wall_times(argv, args.repeat)
        report[name] = {"median_s": statistics.median(times), "min_s": min(times), "runs_s": times}
        print(f"{name:<34} {report[name]['median_s']:>9.3f} {min(times):>7.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    over = [n for n in TARGETS if report[n]["median_s"] >= args.limit]
    if over:
        print(f"over {args.limit} s: {', '.join(over)}")
        return 1
    print(f"--help and bleu under {args.limit} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
