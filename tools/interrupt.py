#!/usr/bin/env python
"""Interrupt commands at random moments and check that nothing complete-looking is wrong.

Each trial starts one command (``translate``, ``score``, ``reproduce``, ``parity --json``,
``train``)
in a fresh directory, sends SIGINT, SIGTERM or SIGKILL after a random delay (from 0 to a
little past the command's uninterrupted run time, so start-up, loading, the run itself and
the final rename are all hit), and then checks:

* every output file that exists (``--trans``, ``--n-best``, ``--scores``, the files of
  ``reproduce --save-dir``, its JSON report on stdout, ``parity --json``) is identical to
  the one of an uninterrupted run (JSON: after dropping the timings) -- a file that looks
  complete is complete;
* the exit status says what happened: 130 after SIGINT, 143 after SIGTERM (with one
  ``interrupted``/``terminated`` line), killed after SIGKILL; 0 if the run ended first;
* where the command has ``--resume`` and its output is missing, the same command with
  ``--resume`` exits 0, and every output -- and the ``Total cost`` line -- is byte-identical
  to the uninterrupted run's, with no ``.partial``/journal file left.

``train`` (issue 17's checkpoints) has checks of its own, since a checkpoint is rewritten
during the run and resuming is not byte-identical in GroundHog (the Adadelta accumulators
restart from zero).  The run saves before every update (``saveFreq=0``), so signals land
in saves of every update; whenever ``<prefix>model.npz``, ``state.pkl`` or ``timing.npz`` exists,
all three exist and form one checkpoint -- as the next run finds it: a save SIGKILLed between
its renames is completed from its rename journal first (groundhog_port/together.py) -- the model of update ``j`` (``timing['step']``) is
the uninterrupted run's model of update ``j`` to the bit, its recorded costs are that run's
first ``j``, ``state['step']`` is ``j - 1``; SIGINT/SIGTERM during the updates stop after
the update in progress and save (exit 0, as train.py did); and running the same command
again finishes the run (``loopIters``), byte-identical to the uninterrupted run when the
checkpoint was of update 0, with no partial or lock file left.

CI runs a few trials (``parity_tests/hardening/test_output_safety.py``); the figures in
docs/hardening.md come from::

    python tools/interrupt.py --trials 200 --jobs 2
"""

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # legacy_states, to read a training run's state
FX = REPO / "fixtures" / "search"
SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM, "SIGKILL": signal.SIGKILL}
#: exit status expected after each signal, once the command handles it
EXPECTED_RC = {"SIGINT": 130, "SIGTERM": 143, "SIGKILL": -signal.SIGKILL}


def legacy_root():
    return Path(os.environ.get("GROUNDHOG_LEGACY_TRACES", REPO.parent / "shared" / "legacy_traces"))


@dataclass
class Spec:
    """One command: its arguments (``{d}`` is the trial's directory), its output files
    (relative to it), whether stdout is an output (a JSON report), whether it resumes."""

    name: str
    argv: list
    outputs: list
    stdout_json: bool = False
    resumable: bool = False
    compare_stdout_line: str = ""  # a stdout line that must match after --resume
    out_dirs: list = field(default_factory=list)


#: translate's source: the first lines of the fixture's test.en (a run of a few seconds)
TRANSLATE_LINES = 12
#: train's run: this many updates of the fixture model (about 0.07 s each: the loop lasts
#: long enough for the signals to land in it, not only in start-up)
TRAIN_UPDATES = 60
CHECKPOINT = ("s_model.npz", "s_state.pkl", "s_timing.npz")


def specs(root, case=None):
    case = Path(case or legacy_root() / "encdec")
    src, trg = FX / "test.en", FX / "test.fr"
    short = Path(root) / "source.en"
    short.write_bytes(b"".join(src.read_bytes().splitlines(True)[:TRANSLATE_LINES]))
    model = ["--state", str(FX / "search_state.pkl"), str(FX / "search_model.npz")]
    out = {
        "translate": Spec(
            "translate",
            [
                "translate",
                *model,
                "--beam-search",
                "--beam-size",
                "3",
                "--source",
                str(short),
                "--trans",
                "{d}/trans.txt",
                "--n-best",
                "{d}/nbest.txt",
                "--batch-size",
                "4",
            ],
            ["trans.txt", "nbest.txt"],
            resumable=True,
            compare_stdout_line="Total cost of the translations",
        ),
        "score": Spec(
            "score",
            [
                "score",
                *model,
                "--mode",
                "batch",
                "--src",
                str(src),
                "--trg",
                str(trg),
                "--allow-unk",
                "--scores",
                "{d}/scores.txt",
            ],
            ["scores.txt"],
            resumable=True,
        ),
    }
    data = legacy_root() / "data"
    if (data / "binarized_text.shuffled.en.h5").is_file():
        out["train"] = Spec(
            "train",
            [
                "train",
                "--state",
                str(FX / "search_state.pkl"),
                "--model",
                str(FX / "search_model.npz"),
                "--data-dir",
                str(data),
                "prefix='{d}/s_'",
                f"loopIters={TRAIN_UPDATES}",
                "saveFreq=0",
            ],  # a save before every update
            list(CHECKPOINT),
            resumable=True,
        )
    if case.is_dir():
        out["reproduce"] = Spec(
            "reproduce",
            ["reproduce", "--case", str(case), "--json", "--save-dir", "{d}/saved"],
            [],
            stdout_json=True,
            out_dirs=["saved"],
        )
        out["parity"] = Spec(
            "parity",
            [
                "parity",
                "--case",
                str(case),
                "--only",
                "repr,pairs,batch",
                "--json",
                "{d}/parity.json",
            ],
            ["parity.json"],
        )
    return out


def _argv(spec, d, resume=False):
    args = [a.replace("{d}", str(d)) for a in spec.argv]
    return [
        sys.executable,
        "-m",
        "groundhog_port",
        "--log-level",
        "WARNING",
        *args,
        *(["--resume"] if resume else []),
    ]


ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUTF8="1", PYTHONPATH=str(REPO))


#: what CPython prints (exit 1) when SIGINT lands in its own start-up, importing ``site`` or
#: ``runpy`` for ``-m``, before any line of the package runs (nothing can be written then)
PYTHON_STARTUP = ("Fatal Python error: init_import_site", "Could not import runpy module")


def _died_starting(sig_name, rc, err):
    """Killed by the signal before the command's handlers were installed, or SIGINT in
    CPython's own start-up."""
    return rc == -SIGNALS[sig_name] or (
        sig_name == "SIGINT" and rc == 1 and any(m in err for m in PYTHON_STARTUP)
    )


def _start(spec, d):
    """``spec``'s command running in ``d``, its output piped, SIGINT at its default."""
    return subprocess.Popen(
        _argv(spec, d),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        cwd=d,
        preexec_fn=_default_sigint,
    )


def _signalled_run(spec, d, sig_name, delay):
    """Start ``spec`` in ``d``; after ``delay`` s send the signal unless it has ended.
    Returns (signalled, exit status, stdout, stderr)."""
    proc = _start(spec, d)
    try:
        proc.wait(timeout=delay)
        signalled = False
    except subprocess.TimeoutExpired:
        proc.send_signal(SIGNALS[sig_name])
        signalled = True
    out, err = proc.communicate(timeout=600)
    return signalled, proc.returncode, out, err


def _interrupted(sig_name, err):
    """The outcome of a run that exited as the signal asks: its last line must say so."""
    if sig_name != "SIGKILL":
        last = err.strip().splitlines()[-1] if err.strip() else ""
        if not last.endswith(("interrupted", "terminated")) or "Traceback" in err:
            return "interrupted (traceback)"
    return "interrupted"


def _default_sigint():
    """In the child, before Python starts: SIGINT back to its default.  A tool started in
    the background by a shell inherits SIGINT ignored, Python then installs no Ctrl-C
    handler, and every SIGINT trial would run to the end ("finished first")."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _strip_timings(value):
    if isinstance(value, dict):
        return {k: _strip_timings(v) for k, v in value.items() if "second" not in k}
    if isinstance(value, list):
        return [_strip_timings(v) for v in value]
    return value


def _files(spec, d):
    """``{relative name: bytes}`` of every output of ``spec`` present in ``d``."""
    found = {}
    for name in spec.outputs:
        p = Path(d) / name
        if p.is_file():
            found[name] = p.read_bytes()
    for sub in spec.out_dirs:
        p = Path(d) / sub
        if p.is_dir():
            for f in sorted(p.iterdir()):
                found[f"{sub}/{f.name}"] = f.read_bytes()
    return found


def _complete(spec, d, ref, out):
    """Every output of the uninterrupted run is present and the same (the check below still
    compares whatever is present)."""
    got = _files(spec, d)
    if spec.stdout_json:
        got["<stdout>"] = out.encode() if out.strip() else b""
    return set(got) == set(ref.files) and all(_same(n, got[n], ref.files[n]) for n in got)


def _same(name, got, want):
    if name.endswith(".json") or name == "<stdout>":
        try:
            return _strip_timings(json.loads(got)) == _strip_timings(json.loads(want))
        except ValueError:
            return False
    return got == want


@dataclass
class Reference:
    files: dict
    stdout: str
    seconds: float
    #: when the first output (partial) file appeared: start-up and loading are over
    first_output: float


def run_reference(spec, root):
    d = Path(tempfile.mkdtemp(prefix=f"ref-{spec.name}-", dir=root))
    t = time.monotonic()
    proc = _start(spec, d)
    first = None
    while proc.poll() is None:
        if first is None and any(d.iterdir()):
            first = time.monotonic() - t
        time.sleep(0.02)
    out, err = proc.communicate()
    seconds = time.monotonic() - t
    if proc.returncode != 0:
        raise SystemExit(
            f"interrupt.py: the uninterrupted {spec.name} run failed "
            f"(exit {proc.returncode}):\n{err}"
        )
    files = _files(spec, d)
    if spec.stdout_json:
        files["<stdout>"] = out.encode()
    return Reference(files, out, seconds, seconds if first is None else first)


def _npz(path):
    import numpy as np

    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def _same_arrays(a, b):
    import numpy as np

    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def run_train_reference(spec, root):
    """The uninterrupted run, saving before every update (``saveFreq=0``) into its own
    file (``overwrite=0``: ``s_model<j>.npz`` holds the model of update ``j``)."""
    d = Path(tempfile.mkdtemp(prefix="ref-train-", dir=root))
    argv = _argv(spec, d) + ["overwrite=0"]
    t = time.monotonic()
    p = subprocess.run(
        argv, capture_output=True, text=True, env=ENV, cwd=d, preexec_fn=_default_sigint
    )
    if p.returncode != 0:
        raise SystemExit(
            f"interrupt.py: the uninterrupted train run failed (exit {p.returncode}):\n{p.stderr}"
        )
    models = [_npz(d / f"s_model{j}.npz") for j in range(TRAIN_UPDATES + 1)]
    ref = Reference(
        {"models": models, "timing": _npz(d / "s_timing.npz")}, p.stdout, time.monotonic() - t, 0.0
    )
    # when the first update starts: the time of the run minus that of its updates
    ref.first_output = max(0.0, ref.seconds - float(ref.files["timing"]["time_step"].sum()))
    return ref


def _pending_renames(d):
    """``{name: its partial file}`` of the files a save killed between its renames left to
    rename: those its rename journal (``s_timing.npz.together``, one name per line) lists
    whose ``.partial`` is still there -- the checkpoint as the next ``train`` completes it
    (groundhog_port/together.py), read here without the port's code."""
    journal = d / "s_timing.npz.together"
    if not journal.exists():
        return {}
    names = journal.read_text().split()
    return {n: d / f"{n}.partial" for n in names if (d / f"{n}.partial").exists()}


def _checkpoint_problems(d, ref):
    """What is wrong with the checkpoint in ``d`` (none may be present); returns
    (problems, its update or None)."""
    files = {n: d / n for n in CHECKPOINT} | _pending_renames(d)
    present = [n for n in CHECKPOINT if files[n].exists()]
    if not present:
        return [], None
    if len(present) < len(CHECKPOINT):
        return [f"an incomplete checkpoint: only {', '.join(present)}"], None
    timing = _npz(files["s_timing.npz"])
    j = int(timing["step"])
    problems = []
    if not 0 <= j <= TRAIN_UPDATES:
        return [f"s_timing.npz: step {j}"], None
    if not _same_arrays(_npz(files["s_model.npz"]), ref.files["models"][j]):
        problems.append(f"s_model.npz is not the model of update {j} (s_timing.npz's step)")
    want = ref.files["timing"]["cost"][:j]
    if not (timing["cost"][:j] == want).all():
        problems.append(f"s_timing.npz: the costs of updates 0-{j - 1} differ")
    import legacy_states

    try:
        state = legacy_states.load_state(files["s_state.pkl"])
    except Exception as err:  # noqa: BLE001 - a finding, not a crash of the tool
        return problems + [f"s_state.pkl does not load: {err}"], j
    if j > 0 and state.get("step") != j - 1:
        problems.append(f"s_state.pkl: step {state.get('step')}, s_timing.npz: {j}")
    return problems, j


def train_trial(spec, ref, sig_name, delay, root):
    """One interrupted training run and its continuation (see the module docstring); returns
    (outcome, resumed, problems)."""
    d = Path(tempfile.mkdtemp(prefix="train-", dir=root))
    problems = []
    signalled, rc, out, err = _signalled_run(spec, d, sig_name, delay)
    found, j = _checkpoint_problems(d, ref)
    problems += found
    if not signalled or (rc == 0 and j == TRAIN_UPDATES):
        outcome = "finished first"
        if rc != 0:
            problems.append(f"exit {rc} without a signal: {err.strip()[-300:]}")
    elif rc == 0:
        outcome = "stopped and saved"  # the update in progress finished, then a save
        if j is None:
            problems.append("exit 0 after the signal, but no checkpoint")
    elif rc == EXPECTED_RC[sig_name]:
        outcome = _interrupted(sig_name, err)
    elif rc == -SIGNALS[sig_name] and j == TRAIN_UPDATES:
        outcome = "died while exiting"
    elif _died_starting(sig_name, rc, err):
        outcome = "died during start-up"
    else:
        outcome = f"exit {rc}"
        problems.append(f"{sig_name}: exit {rc}: {err.strip()[-300:]}")
    resumed = None
    if j != TRAIN_UPDATES and not problems:
        p = subprocess.run(_argv(spec, d), capture_output=True, text=True, env=ENV, cwd=d)
        if p.returncode != 0:
            problems.append(f"running again: exit {p.returncode}: {p.stderr.strip()[-300:]}")
        again, j2 = _checkpoint_problems(d, ref)
        if j2 != TRAIN_UPDATES:
            problems.append(f"running again ended at update {j2}, not {TRAIN_UPDATES}")
        elif not j:  # from update 0 (or nothing): the uninterrupted run, to the bit
            problems += again
            resumed = "identical" if not again else None
        else:
            resumed = "continued"
        left = [f.name for f in d.iterdir() if ".partial" in f.name or f.name.endswith(".lock")]
        if left:
            problems.append(f"running again left {', '.join(left)}")
    shutil.rmtree(d, ignore_errors=True)
    return outcome, resumed, problems


def _stdout_line(text, prefix):
    return next((l for l in text.splitlines() if l.startswith(prefix)), None)


def trial(spec, ref, sig_name, delay, root):
    """One interrupted run (and its --resume); returns (outcome, resumed, problems)."""
    d = Path(tempfile.mkdtemp(prefix=f"{spec.name}-", dir=root))
    problems = []
    signalled, rc, out, err = _signalled_run(spec, d, sig_name, delay)
    if not signalled:
        outcome = "finished first"
        if rc != 0:
            problems.append(f"exit {rc} without a signal: {err.strip()[-300:]}")
    elif rc == 0:
        outcome = "finished first"  # the signal came after the work was done
    elif rc == EXPECTED_RC[sig_name]:
        outcome = _interrupted(sig_name, err)
    elif rc == -SIGNALS[sig_name] and _complete(spec, d, ref, out):
        outcome = "died while exiting"  # outputs complete: Python's finalisation had
        # restored the default handlers
    elif _died_starting(sig_name, rc, err):
        outcome = "died during start-up"  # before the handlers were installed
    else:
        outcome = f"exit {rc}"
        problems.append(f"{sig_name}: exit {rc}: {err.strip()[-300:]}")
    # nothing that looks complete may be wrong
    present = _files(spec, d)
    if spec.stdout_json and out.strip():
        present["<stdout>"] = out.encode()
    for name, data in present.items():
        if not _same(name, data, ref.files.get(name, b"")):
            try:
                json.loads(data) if name.endswith(".json") or name == "<stdout>" else None
                problems.append(f"{name} exists but differs from the uninterrupted run's")
            except ValueError:
                if name != "<stdout>":
                    problems.append(f"{name} exists but is not complete JSON")
    resumed = None
    if spec.resumable and set(present) != set(ref.files):
        p = subprocess.run(
            _argv(spec, d, resume=True), capture_output=True, text=True, env=ENV, cwd=d
        )
        resumed = "identical" if p.returncode == 0 else None
        if p.returncode != 0:
            problems.append(f"--resume: exit {p.returncode}: {p.stderr.strip()[-300:]}")
        got = _files(spec, d)
        for name, want in ref.files.items():
            if got.get(name) != want:
                problems.append(f"--resume: {name} differs from the uninterrupted run's")
        if spec.compare_stdout_line:
            a = _stdout_line(p.stdout, spec.compare_stdout_line)
            b = _stdout_line(ref.stdout, spec.compare_stdout_line)
            if a != b:
                problems.append(f"--resume: {a!r} instead of {b!r}")
        left = [f.name for f in d.iterdir() if ".partial" in f.name]
        if left:
            problems.append(f"--resume left {', '.join(left)}")
    shutil.rmtree(d, ignore_errors=True)
    return outcome, resumed, problems


#: command -> (uninterrupted reference run, trial); the others use run_reference and trial
RUNNERS = {"train": (run_train_reference, train_trial)}
DEFAULT_RUNNERS = (run_reference, trial)
#: a trial's ``resumed`` -> its column (train from update j > 0 cannot be compared to the bit)
RESUMED_COLUMN = {"identical": "resumed identical", "continued": "continued"}


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--trials", type=int, default=200, help="number of trials (default 200)")
    ap.add_argument("--seed", type=int, help="random seed (default: drawn and printed)")
    ap.add_argument(
        "--commands",
        default="translate,score,reproduce,parity,train",
        help="comma-separated (default: all five)",
    )
    ap.add_argument(
        "--case", help="the recorded case reproduce/parity use (default: legacy_traces/encdec)"
    )
    ap.add_argument("--jobs", type=int, default=1, help="trials run at once (default 1)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    ap.add_argument(
        "--time-budget",
        type=float,
        metavar="S",
        help="start no trial after S seconds (the table covers the trials run)",
    )
    ap.add_argument("--verbose", action="store_true", help="print every trial")
    args = ap.parse_args(argv)
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        # started as a background job (`... &`, nohup): the commands would inherit SIGINT
        # ignored and never be interrupted by it; a handler here lets exec reset it
        signal.signal(signal.SIGINT, signal.default_int_handler)
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    rng = random.Random(seed)
    root = Path(tempfile.mkdtemp(prefix="gh-interrupt-"))
    all_specs = specs(root, args.case)
    names = [n for n in args.commands.split(",") if n]
    missing = [n for n in names if n not in all_specs]
    if missing:
        print(
            f"interrupt.py: error: unknown or unavailable command(s): {', '.join(missing)}",
            file=sys.stderr,
        )
        return 2
    print(f"interrupt.py: seed {seed}", flush=True)
    refs = {}
    for n in names:
        refs[n] = RUNNERS.get(n, DEFAULT_RUNNERS)[0](all_specs[n], root)
        print(
            f"uninterrupted {n}: {refs[n].seconds:.1f}s (first output after "
            f"{refs[n].first_output:.1f}s)",
            flush=True,
        )
    plan = []
    for i in range(args.trials):
        n = names[i % len(names)]
        sig = rng.choice(list(SIGNALS))
        ref = refs[n]
        # most signals come once the command writes (its output, its rename); some earlier
        if rng.random() < 0.75:
            delay = rng.uniform(ref.first_output, 1.05 * ref.seconds)
        else:
            delay = rng.uniform(0.0, ref.first_output)
        plan.append((i, n, sig, delay))
    table = defaultdict(Counter)
    failures = []
    from concurrent.futures import ThreadPoolExecutor

    started = time.monotonic()

    def run_planned(p):
        if args.time_budget is not None and time.monotonic() - started > args.time_budget:
            return None  # out of time
        return RUNNERS.get(p[1], DEFAULT_RUNNERS)[1](all_specs[p[1]], refs[p[1]], p[2], p[3], root)

    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = [(p, pool.submit(run_planned, p)) for p in plan]
        for (i, n, sig, delay), fut in futures:
            result = fut.result()
            if result is None:
                continue
            outcome, resumed, problems = result
            if args.verbose:
                print(
                    f"[{i}] {n} {sig} after {delay:.2f}s: {outcome}"
                    f"{', ' + RESUMED_COLUMN[resumed] if resumed else ''}"
                    f"{': FAILED' if problems else ''}",
                    flush=True,
                )
            table[(n, sig)][outcome] += 1
            table[(n, sig)]["trials"] += 1
            if resumed:
                table[(n, sig)][RESUMED_COLUMN[resumed]] += 1
            if problems:
                table[(n, sig)]["FAILED"] += 1
                failures.append(
                    {
                        "trial": i,
                        "command": n,
                        "signal": sig,
                        "delay": round(delay, 3),
                        "problems": problems,
                    }
                )
                print(
                    f"[{i}] {n} {sig} after {delay:.2f}s: FAILED: {'; '.join(problems)}", flush=True
                )
            elif (i + 1) % 20 == 0:
                print(f"... {i + 1} trials, {len(failures)} failed", flush=True)
    shutil.rmtree(root, ignore_errors=True)
    cols = [
        "trials",
        "finished first",
        "interrupted",
        "stopped and saved",
        "died during start-up",
        "died while exiting",
        "interrupted (traceback)",
        "resumed identical",
        "continued",
        "FAILED",
    ]
    n_run = sum(c["trials"] for c in table.values())
    print(f"\n{n_run} trials (seed {seed})")
    print(f"{'command':10s} {'signal':8s} " + " ".join(f"{c:>14s}" for c in cols))
    total = Counter()
    for (n, sig), c in sorted(table.items()):
        total.update(c)
        print(f"{n:10s} {sig:8s} " + " ".join(f"{c[k]:14d}" for k in cols))
    print(f"{'all':10s} {'':8s} " + " ".join(f"{total[k]:14d}" for k in cols))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "seed": seed,
                    "trials": n_run,
                    "table": {f"{n} {s}": dict(c) for (n, s), c in table.items()},
                    "failures": failures,
                },
                indent=2,
            )
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
