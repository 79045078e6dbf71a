#!/usr/bin/env python3
"""The port's beam search on a quiet machine and on one where a core is kept busy (issue 54).

Every multi-threaded torch operation waits for all its threads, so a process of two threads
on a machine where another process keeps a core busy waits for that core at every step.
This tool measures that collapse and its cure, ``translate --workers``, as a user runs the
command: the full-size random RNNsearch of ``numpy_trace_producer.make_case`` (dim 1000,
rank 620, 30,001 words; written once), ``--sentences`` sources of 20-30 words, beam
``--beam``, each run a fresh ``groundhog-port translate`` process whose decoding rate is
the one it logs (sentences/s over the search alone, loading excluded).  Settings:

* ``default``: no option (``--workers auto`` since issue 54: the cores free, one thread
  each);
* ``threads-N``: one process of N torch threads (``--threads N``);
* ``workers-N``: ``--workers N``, N processes of one thread;
* ``workers-auto``: ``--workers auto`` (the cores no other process is using).

Each setting runs quiet, then with a busy loop (``while True: pass``, started and stopped
by this tool) on the machine, interleaved, ``--repeat`` times; the table gives the median
rates, busy / quiet, and busy against the quiet rate of one process of one thread (what
one free core gives).  Outputs are compared: every run writes the same file.  Run it with
nothing else on the machine (the load average is checked before each run).

    python tools/bench_shared.py --json shared.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

RATE = re.compile(r"(\d+) sentences(?: on \d+ worker processes)?, ([0-9.]+) sentences/s")


def settings(cores: int) -> dict[str, list[str]]:
    out = {"default": [], "threads-1": ["--threads", "1"]}
    if cores > 1:
        out[f"threads-{cores}"] = ["--threads", str(cores)]
        out[f"workers-{cores}"] = ["--workers", str(cores)]
    out["workers-auto"] = ["--workers", "auto"]
    return out


def wait_quiet(limit: float = 0.5, patience_s: float = 120.0) -> float:
    """Wait (up to ``patience_s``) for the 1-minute load average to fall below ``limit``."""
    end = time.monotonic() + patience_s
    while os.getloadavg()[0] >= limit and time.monotonic() < end:
        time.sleep(5)
    return os.getloadavg()[0]


def run_once(case: Path, extra: list[str], out: Path, beam: int) -> tuple[float, bytes]:
    """One ``translate`` process: its logged decoding rate and the file it wrote."""
    cmd = [sys.executable, "-m", "groundhog_port"]
    if extra[:1] == ["--threads"]:  # a global option: before the command
        cmd += extra
    cmd += ["translate", "--state", str(case / "random_state.pkl"), str(case / "random_model.npz"),
            "--beam-search", "--beam-size", str(beam), "--source", str(case / "test.en"),
            "--trans", str(out)]  # fmt: skip
    if extra[:1] == ["--workers"]:
        cmd += extra
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("OMP_NUM_THREADS", None)
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if run.returncode != 0:
        raise SystemExit(f"bench_shared.py: {' '.join(cmd)} failed:\n{run.stderr[-2000:]}")
    found = RATE.search(run.stderr)
    if not found:
        raise SystemExit(f"bench_shared.py: no rate in the log of {' '.join(cmd)}")
    return float(found.group(2)), out.read_bytes()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sentences", type=int, default=16)
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--case-dir", type=Path, help="where the full-size case is (made once)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    import numpy_trace_producer

    from groundhog_port.distributed.pool import cores_present

    tmp = tempfile.TemporaryDirectory()
    case = args.case_dir or Path(tmp.name) / "case"
    if not (case / "random_model.npz").exists():
        numpy_trace_producer.make_case(case, 1000, 620, 30001, args.sentences, 1234, 20, 30)
    cores = cores_present()
    runs: dict[tuple[str, str], list[float]] = {}
    outputs = set()
    for r in range(args.repeat):
        for name, extra in settings(cores).items():
            for load in ("quiet", "busy") if r % 2 == 0 else ("busy", "quiet"):
                before = wait_quiet()
                busy = None
                if load == "busy":
                    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    time.sleep(1.0)
                try:
                    rate, text = run_once(case, extra, Path(tmp.name) / "out.txt", args.beam)
                finally:
                    if busy is not None:
                        busy.kill()
                        busy.wait()
                outputs.add(text)
                runs.setdefault((name, load), []).append(rate)
                print(
                    f"[shared] {name:13s} {load:5s} {rate:7.3f} sentences/s (load before "
                    f"{before:.2f})",
                    file=sys.stderr,
                    flush=True,
                )
    one = statistics.median(runs[("threads-1", "quiet")])
    rows = []
    print(f"\n{args.sentences} sentences, beam {args.beam}, {cores} cores; median sentences/s")
    print(f"{'setting':14s} {'quiet':>8s} {'busy':>8s} {'busy/quiet':>11s} {'busy/1-core':>12s}")
    for name in settings(cores):
        q, b = (statistics.median(runs[(name, load)]) for load in ("quiet", "busy"))
        rows.append(
            dict(setting=name, quiet=q, busy=b, busy_over_quiet=b / q, busy_over_one=b / one)
        )
        print(f"{name:14s} {q:8.3f} {b:8.3f} {b / q:11.2f} {b / one:12.2f}")
    print(f"outputs identical across every run: {len(outputs) == 1}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                dict(
                    sentences=args.sentences,
                    beam=args.beam,
                    cores=cores,
                    repeat=args.repeat,
                    runs={f"{k[0]}/{k[1]}": v for k, v in runs.items()},
                    rows=rows,
                    identical=len(outputs) == 1,
                    date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                ),
                indent=1,
            )
        )
    return 0 if len(outputs) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
