#!/usr/bin/env python3
"""A/B benchmark: ``tools/bench.py`` on another commit and on this tree, interleaved.

    python tools/bench_ab.py 283dbdc [--rounds 2] [--repeat 3] [--json ab.json]

The other commit is checked out into a temporary worktree (removed afterwards); each round
runs ``bench.py`` once per tree, each once the load average has settled below 0.5 (each in its own process, on its own code: ``bench.py``
imports the tree it lies in), in the order A B, then B A, then A B ... so that a drift of
the machine's speed during the run falls on both sides alike.  For every workload (the
batched search at each beam, scoring of each model) the best rate of each side over all
rounds is kept and the ratio this tree / the other is reported, with each side's
median-of-rounds beside it.

Skipped here, and said so in the output: the literal search (``--n-literal 0``: it is
the batched search's reference, not a workload), the start-up and the ONNX rows (their
own tools: ``bench_startup.py``, ``bench_onnx.py``).

The verdict is ``bench.py``'s: the comparison is "quiet" only if every run of either
side was (load average, other processes' threads, peak spread: see ``bench.py``).
Run it alone: every other process on the machine slows one side or the other.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SKIPPED = "literal search (--n-literal 0), start-up (--startup-runs 0), ONNX rows (--no-onnx)"
#: bench.py's quiet limit on the 1-minute load average at a run's start (bench.LOAD_LIMIT)
LOAD_LIMIT = 0.5
#: the longest wait for the load of the previous run to decay (the 1-minute average of a
#: 2-thread run falls from ~2 below 0.5 in about 1.5 minutes)
MAX_WAIT_S = 600


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("rev", help="the commit to compare this tree against (A)")
    p.add_argument("--rounds", type=int, default=2, help="runs of bench.py per side (2)")
    p.add_argument("--repeat", type=int, default=3, help="bench.py --repeat (3)")
    p.add_argument("--threads", type=int, help="bench.py --threads (default: its own)")
    p.add_argument("--sentences", type=int, help="bench.py --sentences (default: its own)")
    p.add_argument("--json", type=Path, help="write the comparison here as JSON")
    return p.parse_args(argv)


def wait_for_quiet() -> None:
    """Wait until the 1-minute load average is at most :data:`LOAD_LIMIT` (the previous
    run's own threads decaying), at most :data:`MAX_WAIT_S`; bench.py judges the rest."""
    t0 = time.monotonic()
    while os.getloadavg()[0] > LOAD_LIMIT and time.monotonic() - t0 < MAX_WAIT_S:
        time.sleep(10)
    waited = time.monotonic() - t0
    if waited >= 10:
        print(f"[ab] waited {waited:.0f} s for the load average", file=sys.stderr, flush=True)


def run_bench(tree: Path, args: argparse.Namespace, out: Path) -> dict:
    """One ``bench.py`` run of ``tree`` once the load has settled; its JSON."""
    wait_for_quiet()
    cmd = [sys.executable, str(tree / "tools" / "bench.py"), "--json", str(out)]
    cmd += ["--n-literal", "0", "--startup-runs", "0", "--no-onnx", "--repeat", str(args.repeat)]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    if args.sentences:
        cmd += ["--sentences", str(args.sentences)]
    print(f"[ab] {tree}: {' '.join(cmd[2:])}", file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, cwd=tree, stdout=subprocess.DEVNULL)
    result: dict = json.loads(out.read_text())
    return result


def compare(runs: dict[str, list[dict]]) -> list[dict]:
    """Per workload: each side's best and median-of-rounds rate, and B / A of the best."""
    rows = []
    names = [r["workload"] for r in runs["A"][0]["rows"]]
    for name in names:
        rates = {
            side: [next(r["rate"] for r in run["rows"] if r["workload"] == name) for run in got]
            for side, got in runs.items()
        }
        rows.append(
            dict(
                workload=name,
                unit=next(r["unit"] for r in runs["A"][0]["rows"] if r["workload"] == name),
                a_best=max(rates["A"]),
                b_best=max(rates["B"]),
                a_median=statistics.median(rates["A"]),
                b_median=statistics.median(rates["B"]),
                ratio=max(rates["B"]) / max(rates["A"]),
            )
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rev = subprocess.run(
        ["git", "rev-parse", "--short", args.rev],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout.strip()
    runs: dict[str, list[dict]] = {"A": [], "B": []}
    with tempfile.TemporaryDirectory(prefix="bench_ab_") as tmp:
        other = Path(tmp) / "a"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-q", str(other), rev], check=True, cwd=REPO
        )
        try:
            for k in range(args.rounds):
                order = ("A", "B") if k % 2 == 0 else ("B", "A")
                for side in order:
                    tree = other if side == "A" else REPO
                    runs[side].append(run_bench(tree, args, Path(tmp) / f"{side}{k}.json"))
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(other)], check=False, cwd=REPO
            )
    rows = compare(runs)
    verdicts = [run.get("verdict", "?") for side in runs.values() for run in side]
    quiet = all(v == "quiet" for v in verdicts)
    print(f"A = {rev}, B = this tree ({REPO}); {args.rounds} rounds; skipped: {SKIPPED}")
    print(f"{'workload':24} {'A best':>10} {'B best':>10} {'B/A':>7} {'A med':>10} {'B med':>10}")
    for r in rows:
        print(
            f"{r['workload']:24} {r['a_best']:10.1f} {r['b_best']:10.1f} {r['ratio']:7.3f} "
            f"{r['a_median']:10.1f} {r['b_median']:10.1f}  {r['unit']}"
        )
    print(f"verdict: {'quiet' if quiet else 'NOT QUIET'} (runs: {', '.join(verdicts)})")
    for side, got in runs.items():
        for k, run in enumerate(got):
            for reason in run.get("not_quiet_because") or []:
                print(f"  {side} run {k + 1}: {reason}")
    if args.json:
        args.json.write_text(
            json.dumps(
                dict(
                    a=rev,
                    rounds=args.rounds,
                    skipped=SKIPPED,
                    rows=rows,
                    verdicts=verdicts,
                    quiet=quiet,
                ),
                indent=1,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
