#!/usr/bin/env python
"""Fuzz every loader with broken and hostile versions of the real fixture files.

Each case runs in its own forked process (the loaders are imported once, before forking)
with a CPU-time limit (``--timeout``, through ``RLIMIT_CPU``: past it the process is
killed and the case counts as a hang; a wall-clock limit catches cases blocked without
using CPU) and an address-space limit (``--memory-mb`` above what the process already
uses, through ``RLIMIT_AS``: an allocation past it fails inside the loader).  Outcomes per
loader:

  loaded         the file was accepted (it may be a harmless mutation)
  clean error    one LegacyInputError naming the file (CLI: exit 2, one 'error:' line)
  unclear error  a LegacyInputError that is not one line / names no file; CLI exit != 0, 2
  CRASH          any other exception, a traceback, or the process died on a signal
  hang           still running after --timeout seconds
  memory         MemoryError / failed allocation under the limit, or a peak RSS above
                 ``--rss-alarm-mb`` (the fixture files are kilobytes: a loader that touches
                 hundreds of MiB for one of them was made to by the file)
  executed       the case's marker file exists: code from the file ran

Cases are reproducible: case I of seed S is generated from random.Random(f"S:I") alone,
so ``--only I`` replays it, and ``--save DIR`` keeps the files of every failing case.
The ``hostile`` target (issue 25) draws small well-formed files that hurt: nesting before
hashing, constructors called with a size, opcode floods, colliding dict keys, ``.npz`` and
``.h5`` size lies per dtype, megabyte state values (``fuzzing._gen_hostile``); cases of
seeds run before it existed replay with
``--targets state,vocab,model,trace,bitext,text,cli``.  The ``collisions`` target (issue 40)
points the output of every command that writes at what the run reads or checks
(``fuzzing._gen_collisions``); seeds run before it replay with
``--targets state,vocab,model,trace,bitext,text,cli,hostile,outputs``.  The ``pack``,
``compressed`` and ``plan`` targets (issue 51) draw packs, compressed texts and plans with
the red team's lies (a header's size, pax digits, a zip's end record, a stream going on
after its end, a plan's value of the wrong kind: ``fuzzing_containers``); seeds run before
them replay with ``--targets`` set to ``fuzzing.TARGETS_BEFORE_ISSUE_51``.  The ``ties``
and ``serve-batch`` targets (issue 53) draw tie-heavy costs, ordered against numpy 1.23 in
``.venv-theano``, and concurrent server requests differing in every per-request option
(``fuzzing_mixes``); seeds run before them replay with ``fuzzing.TARGETS_BEFORE_ISSUE_53``.
A target that cannot run here (no recordings, no ``.venv-theano``) is named, with why.
``--seed fresh`` draws a new seed (printed first, and with every failure as the command
that replays it); ``--time-budget S`` stops starting cases after S seconds (CI runs a fresh
seed for about a minute on every run: ``.ci/run``).

Examples::

    python tools/fuzz.py --cases 10000 --jobs 2
    python tools/fuzz.py --cases 200 --targets state,vocab --seed 7 --verbose
    python tools/fuzz.py --seed 0 --only 4711 --save /tmp/case4711
    python tools/fuzz.py --seed fresh --cases 1000000 --time-budget 60
"""

import argparse
import json
import os
import resource
import select
import shutil
import signal
import sys
import tempfile
import time
import warnings
from collections import Counter, defaultdict, deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from parity_tests.support import fuzzing  # noqa: E402

#: a command run (cli target) loads a model and runs a search: it gets this many --timeout
CLI_TIMEOUT_FACTOR = 3
#: --timeout is CPU time (RLIMIT_CPU); a case blocked without using CPU is stopped after
#: this many times it in wall-clock time
WALL_FACTOR = 4


def _factor(case):
    return CLI_TIMEOUT_FACTOR if case.target in ("cli", "collisions") else 1


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="outcomes and examples: see the module docstring (python -m pydoc tools/fuzz.py)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--cases", type=int, default=1000, help="number of cases (default 1000)")
    p.add_argument(
        "--seed",
        type=_seed,
        default=0,
        help="run seed (default 0), or 'fresh' for a new random one (printed)",
    )
    p.add_argument(
        "--time-budget",
        type=float,
        metavar="S",
        help="start no case after S seconds (the report covers the cases run)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=20.0,
        help="CPU seconds per case before it counts as a hang (default 20; cli and collisions "
        f"cases, which run commands, get {CLI_TIMEOUT_FACTOR}x; a case also "
        f"stops after {WALL_FACTOR}x that in wall-clock time)",
    )
    p.add_argument(
        "--memory-mb",
        type=int,
        default=2048,
        help="address space a case may add to the forked process, MiB (default 2048; 0: no limit)",
    )
    p.add_argument(
        "--rss-alarm-mb",
        type=int,
        default=512,
        help="a case whose peak RSS grows by more than this counts as a memory "
        "blow-up, even under the limit (default 512; 0: only the limit)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="cases run at once (default: the number of CPUs)",
    )
    p.add_argument(
        "--targets",
        default=",".join(fuzzing.TARGETS),
        help=f"comma-separated loaders to fuzz (default all: {','.join(fuzzing.TARGETS)})",
    )
    default_weights = ",".join(f"{k}={v}" for k, v in fuzzing.DEFAULT_WEIGHTS.items())
    p.add_argument(
        "--weights",
        default=default_weights,
        help=f"relative frequency of targets, e.g. 'trace=0.5' (default {default_weights})",
    )
    p.add_argument(
        "--only",
        type=int,
        action="append",
        metavar="I",
        help="run only case I of this seed (repeatable)",
    )
    p.add_argument("--save", metavar="DIR", help="copy the files of every failing case here")
    p.add_argument("--json", metavar="FILE", help="also write the summary and failures as JSON")
    p.add_argument("--verbose", action="store_true", help="print every case")
    return p.parse_args(argv)


def _seed(text):
    """``--seed``: an integer, or ``fresh`` for one drawn from the OS (printed, replayable)."""
    if text == "fresh":
        return int.from_bytes(os.urandom(4), "little")
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or 'fresh', got {text!r}") from None


def _vm_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _child(fx, case, workdir, conn_w, memory_mb, cpu_seconds):
    """Runs in the forked process: limits, the case, one JSON line back."""
    try:
        os.setsid()
        if memory_mb:
            limit = _vm_kib("VmSize") * 1024 + memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        # CPU seconds (SIGXCPU past them): a spinning loop is a hang whatever the machine's load
        cpu = int(cpu_seconds) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 2))
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM):
            signal.signal(s, signal.SIG_DFL)
        # the loaders' log lines and warnings are not the report
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        rss0 = _vm_kib("VmRSS")
        res = fuzzing.run_case(fx, case, workdir)
        peak = max(0, _vm_kib("VmHWM") - rss0)
        msg = {"outcome": res.outcome, "detail": res.detail, "peak_kib": peak}
    except BaseException as err:  # noqa: BLE001
        msg = {"outcome": "CRASH", "detail": f"harness: {type(err).__name__}: {err}", "peak_kib": 0}
    os.write(conn_w, (json.dumps(msg) + "\n").encode())
    os._exit(0)


class Running:
    def __init__(self, index, case, pid, fd, workdir):
        self.index, self.case, self.pid, self.fd, self.workdir = index, case, pid, fd, workdir
        self.start = time.monotonic()
        self.buf = b""


def main(argv=None):
    args = parse_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    unknown = set(targets) - set(fuzzing.TARGETS)
    if unknown:
        print(f"fuzz.py: error: unknown target(s) {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    weights = {}
    for item in filter(None, args.weights.split(",")):
        k, _, v = item.partition("=")
        weights[k] = float(v)
    root = Path(tempfile.mkdtemp(prefix="gh-fuzz-"))
    fx = fuzzing.Fixtures(scratch=root / "fixtures")
    (root / "fixtures").mkdir()
    for target, why in fuzzing.unavailable_targets(fx).items():
        if target in targets:
            print(f"[fuzz] target {target} not run: {why}", file=sys.stderr)
    targets = [t for t in targets if t in fuzzing.available_targets(fx)]
    if fx.has_traces:
        fx.small_trace()
    # import everything the loaders use before forking, so each case starts warm; one
    # thread per case (tiny matrices: threads only contend, and --jobs runs cases side by side)
    import torch

    torch.set_num_threads(1)
    import legacy_states  # noqa: F401
    from groundhog_port.cli.commands import (
        translate,  # noqa: F401
    )
    from groundhog_port.harness import trace  # noqa: F401

    for p in (
        fx.vocab_files
        + fx.text_files
        + [e.state for e in fx.experiments]
        + [e.model for e in fx.experiments]
        + fx.trace_files()
        + [p for pair in fx.bitext_pairs for p in pair]
    ):
        fx.read(p)

    print(
        f"fuzz.py: seed {args.seed} (replay a case with: python tools/fuzz.py --seed "
        f"{args.seed} --only I)",
        flush=True,
    )
    indices = args.only if args.only else range(args.cases)
    pending = deque(indices)
    running = []
    counts = defaultdict(Counter)
    peaks = defaultdict(int)
    failures = []
    started = time.monotonic()
    done = 0
    alarms = [mb for mb in (args.memory_mb, args.rss_alarm_mb) if mb]
    mem_limit_kib = min(alarms) * 1024 if alarms else None

    def finish(r, outcome, detail, peak_kib=0):
        nonlocal done
        marker = r.workdir / fuzzing.MARKER_NAME
        if marker.exists() and outcome != "executed":
            detail = f"{fuzzing.MARKER_NAME} created; was: {outcome} {detail}"
            outcome = "executed"
        if outcome in ("loaded", "clean error") and mem_limit_kib and peak_kib > mem_limit_kib:
            outcome, detail = "memory", f"peak RSS +{peak_kib // 1024} MiB; was: {outcome} {detail}"
        counts[r.case.target][outcome] += 1
        peaks[r.case.target] = max(peaks[r.case.target], peak_kib)
        done += 1
        if outcome in fuzzing.FAILURES:
            failures.append(
                {
                    "index": r.index,
                    "target": r.case.target,
                    "case": r.case.label,
                    "outcome": outcome,
                    "detail": detail,
                }
            )
            if args.save:
                dest = Path(args.save) / f"{args.seed}-{r.index}-{r.case.target}"
                dest.mkdir(parents=True, exist_ok=True)
                for name, blob in r.case.files.items():
                    (dest / name).parent.mkdir(parents=True, exist_ok=True)  # "root/exp/x"
                    (dest / name).write_bytes(blob)
                (dest / "case.json").write_text(
                    json.dumps(
                        {
                            "seed": args.seed,
                            "index": r.index,
                            "target": r.case.target,
                            "case": r.case.label,
                            "options": r.case.options,
                            "outcome": outcome,
                            "detail": detail,
                        },
                        indent=2,
                        default=str,
                    )
                )
        if args.verbose or outcome in fuzzing.FAILURES:
            print(
                f"[{r.index}] {r.case.target:6s} {outcome:13s} {r.case.label[:70]} | {detail[:150]}"
                f" | peak RSS +{peak_kib // 1024} MiB",
                flush=True,
            )
        if outcome in fuzzing.FAILURES:
            print(
                f"    replay: python tools/fuzz.py --seed {args.seed} --only {r.index}", flush=True
            )
        elif done % 500 == 0:
            el = time.monotonic() - started
            print(f"... {done} cases, {el:.0f}s, {len(failures)} failing", flush=True)
        shutil.rmtree(r.workdir, ignore_errors=True)

    while pending or running:
        if args.time_budget is not None and time.monotonic() - started > args.time_budget:
            pending.clear()  # out of time: finish the running cases, start no more
        while pending and len(running) < max(1, args.jobs):
            i = pending.popleft()
            workdir = root / f"case{i}"
            workdir.mkdir()
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                case = fuzzing.seeded_case(fx, args.seed, i, workdir, targets, weights)
            rfd, wfd = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(rfd)
                _child(fx, case, workdir, wfd, args.memory_mb, args.timeout * _factor(case))
            os.close(wfd)
            running.append(Running(i, case, pid, rfd, workdir))
        ready, _, _ = select.select([r.fd for r in running], [], [], 0.05)
        now = time.monotonic()
        for r in list(running):
            if r.fd in ready:
                chunk = os.read(r.fd, 65536)
                if chunk:
                    r.buf += chunk
                    continue
                # EOF: the child is done (or died)
                os.close(r.fd)
                _, status = os.waitpid(r.pid, 0)
                running.remove(r)
                if r.buf.strip():
                    msg = json.loads(r.buf.decode().strip().splitlines()[-1])
                    finish(r, msg["outcome"], msg["detail"], msg.get("peak_kib", 0))
                elif os.WIFSIGNALED(status):
                    sig = signal.Signals(os.WTERMSIG(status)).name
                    if sig in ("SIGXCPU", "SIGKILL"):  # SIGKILL: past the hard CPU limit
                        finish(
                            r,
                            "hang",
                            f"over {args.timeout * _factor(r.case):.0f} CPU seconds ({sig})",
                        )
                    else:
                        finish(r, "CRASH", f"process killed by {sig}")
                else:
                    finish(r, "CRASH", f"process exited {os.WEXITSTATUS(status)} without a result")
            elif now - r.start > WALL_FACTOR * args.timeout * _factor(r.case):
                try:
                    os.killpg(r.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                os.waitpid(r.pid, 0)
                os.close(r.fd)
                running.remove(r)
                finish(r, "hang", f"no result after {now - r.start:.0f}s")

    elapsed = time.monotonic() - started
    shutil.rmtree(root, ignore_errors=True)
    print()
    print(
        f"{done} cases in {elapsed:.0f}s (seed {args.seed}, timeout {args.timeout:.0f}s, "
        f"memory limit {args.memory_mb} MiB, RSS alarm {args.rss_alarm_mb} MiB, {args.jobs} jobs)"
    )
    cols = fuzzing.OUTCOMES
    print(f"{'loader':10s} {'cases':>6s} " + " ".join(f"{c:>13s}" for c in cols) + "   peak RSS")
    total = Counter()
    for t in targets:
        c = counts[t]
        total.update(c)
        print(
            f"{t:10s} {sum(c.values()):6d} "
            + " ".join(f"{c[o]:13d}" for o in cols)
            + f"   +{peaks[t] // 1024} MiB"
        )
    print(f"{'all':10s} {sum(total.values()):6d} " + " ".join(f"{total[o]:13d}" for o in cols))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "cases": done,
                    "seconds": round(elapsed, 1),
                    "seed": args.seed,
                    "timeout": args.timeout,
                    "memory_mb": args.memory_mb,
                    "rss_alarm_mb": args.rss_alarm_mb,
                    "per_loader": {t: dict(counts[t]) for t in targets},
                    "peak_rss_mib": {t: peaks[t] // 1024 for t in targets},
                    "failures": failures,
                },
                indent=2,
            )
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
