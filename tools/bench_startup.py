#!/usr/bin/env python3
"""Benchmark: wall time of commands that need no model, from process start to exit.

Each command runs ``--repeat`` times as a fresh ``python -m groundhog_port`` process (the
installed ``groundhog-port`` script runs the same ``main``); the figure is the median wall
time (and the minimum, the least disturbed by other work on the machine).  The target of
issue 26 is under 1 s for ``--help`` and ``bleu``; the target of issue 43 is under 0.5 s for
every command's ``--help`` (``translate --help`` and five others imported torch for a help
text, 14-19 s under load).  For scale the same run times a bare ``python -c pass`` and
``import torch`` (what every command paid before the CLI imported only the module of the
command given).  ``bleu`` scores the bundled fixture's archived ``trans_beam10.txt`` against
``test.fr`` (sacrebleu BLEU and chrF, as a user does).

    python tools/bench_startup.py [--repeat 5] [--limit 1.0] [--help-limit 0.5] [--json F]

Exit status 1 when the median of ``--help`` or ``bleu`` is over ``--limit`` seconds, or the
median of a ``COMMAND --help`` over ``--help-limit``.
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
sys.path.insert(0, str(REPO))
from groundhog_port.cli.main import COMMANDS  # noqa: E402  (reads no torch)

FIXTURE = REPO / "fixtures" / "search"
CLI = [sys.executable, "-m", "groundhog_port"]

#: name -> argv; the first two are the ones the target is about
RUNS = {
    "groundhog-port --help": CLI + ["--help"],
    "groundhog-port bleu": CLI
    + ["bleu", "--hyp", str(FIXTURE / "trans_beam10.txt"), "--ref", str(FIXTURE / "test.fr")],
    "python -c pass": [sys.executable, "-c", "pass"],
    "python -c 'import torch'": [sys.executable, "-c", "import torch"],
    **{f"groundhog-port {c} --help": CLI + [c, "--help"] for c in COMMANDS},
}
TARGETS = ("groundhog-port --help", "groundhog-port bleu")
HELP_TARGETS = tuple(f"groundhog-port {c} --help" for c in COMMANDS)


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
    ap.add_argument(
        "--help-limit",
        type=float,
        default=0.5,
        help="seconds the median of every COMMAND --help must stay under (default 0.5)",
    )
    ap.add_argument("--json", help="also write the figures as JSON")
    args = ap.parse_args()
    report = {}
    print(
        f"{'command':<40} {'median s':>9} {'min s':>7}   ({args.repeat} runs, "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})"
    )
    for name, argv in RUNS.items():
        times = wall_times(argv, args.repeat)
        report[name] = {"median_s": statistics.median(times), "min_s": min(times), "runs_s": times}
        print(f"{name:<40} {report[name]['median_s']:>9.3f} {min(times):>7.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    over = [n for n in TARGETS if report[n]["median_s"] >= args.limit]
    over += [n for n in HELP_TARGETS if report[n]["median_s"] >= args.help_limit]
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    if over:
        print(f"over the limit: {', '.join(over)}")
        return 1
    print(f"--help and bleu under {args.limit} s; every COMMAND --help under {args.help_limit} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
