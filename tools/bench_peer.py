#!/usr/bin/env python3
"""The port's ``translate`` beside Marian's decoder, same CPU, same work (issue 54).

The method and the models are those of ``../shared/peer/marian_vs_port.py`` (its README):
RNNsearch-50-sized models with random weights on both sides -- the port's a GroundHog
experiment, Marian's ``--type amun`` -- each carrying a length counter that makes every
hypothesis decode exactly 3(L+1) steps, 40 sources of 20-40 words.  What this tool adds:

* the port as users run it: ``groundhog-port translate --beam-search --source F`` in a fresh
  process, its whole run timed (start-up, loading, decoding, writing), with its default
  settings ("every core": ``--workers auto``, one thread each) and with ``--threads 1``
  ("1 thread"); Marian through ``pymarian`` in a fresh process, its decoding alone timed (as
  the shared tool's ``marian`` system does), with 1 thread and with every core;
* the same with one core kept busy by a loop this tool starts and stops: the port's default
  settings against its own quiet one-thread rate (issue 54: at least 0.8) and against
  Marian's rate beside the same loop (at least 1.0);
* equal work checked on every run: each output line has 3L+2 words (the counter's length).

The shared tool builds the port's model through model internals that moved behind the
network's interface (issue 52), so :func:`build` writes it here from the same
``rewire_port`` weights (no per-length margin table; the word counts prove the lengths).
Marian's model is the shared tool's own ``build_marian``.

    python tools/bench_peer.py --marian-python /path/to/bench-venv/bin/python --work DIR
    python tools/bench.py --peer marian ...   # the same, its ratios in bench.py's JSON

``--marian-python``: a Python with ``pip install -e ".[bench]"`` (pymarian, ~600 MB: a venv
of its own, never the test install).
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import datetime
import importlib.util
import json
import os
import pickle
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PEER_TOOL = REPO.parent / "shared" / "peer" / "marian_vs_port.py"
#: issue 54's acceptance: port (CLI) / Marian on a quiet machine; busy: the default settings'
#: rate over the quiet one-thread rate, and over Marian's beside the same loop
QUIET_RATIO, BUSY_OVER_ONE, BUSY_RATIO = 1.5, 0.8, 1.0
LOAD_LIMIT = 0.5


def load_tool(path: Path):
    """The shared tool as a module (its functions: build_marian, rewire_port, run_one...)."""
    if not path.is_file():
        raise SystemExit(f"bench_peer.py: no peer tool at {path} (--peer-tool)")
    spec = importlib.util.spec_from_file_location("marian_vs_port", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(tool, work: Path) -> None:
    """Both models in ``work`` (about 700 MB), written once."""
    if (work / "port" / "random_model.npz").is_file() and (work / "marian" / "model.npz").is_file():
        return
    sys.path[:0] = [str(REPO), str(REPO / "tools")]
    import numpy as np
    from bench_search import full_size_model

    import legacy_states
    from groundhog_port.legacy.checkpoint import legacy_param_table

    work.mkdir(parents=True, exist_ok=True)
    (work / "source.txt").write_text("\n".join(tool.sentences()) + "\n")
    tool.build_marian(work)
    out = work / "port"
    out.mkdir(exist_ok=True)
    V = tool.VOCAB
    state = legacy_states.prototype_search_state()
    state.update(dim=tool.DIM, rank_n_approx=tool.EMB, n_sym_source=V, n_sym_target=V,
                 null_sym_source=V - 1, null_sym_target=V - 1, seed=tool.SEED)  # fmt: skip
    for side, key, ikey, lang in (("s", "word_indx", "indx_word", "en"),
                                  ("t", "word_indx_trgt", "indx_word_target", "fr")):  # fmt: skip
        w2i = {"<s>": 0, "UNK": 1, **{f"{side}{i}": i for i in range(2, V - 1)}}
        (out / f"vocab.{lang}.pkl").write_bytes(pickle.dumps(w2i, protocol=2))
        (out / f"ivocab.{lang}.pkl").write_bytes(
            pickle.dumps({i: w for w, i in w2i.items()}, protocol=2)
        )
        state[key], state[ikey] = str(out / f"vocab.{lang}.pkl"), str(out / f"ivocab.{lang}.pkl")
    (out / "random_state.pkl").write_bytes(pickle.dumps(state, protocol=2))
    model = tool.rewire_port(full_size_model(seed=tool.SEED, state=state))
    table, _ = legacy_param_table(model.cfg)
    arrays = {
        p.name: model.get_parameter(p.path).detach().numpy().astype(np.float32) for p in table
    }
    np.savez(out / "random_model.npz", **arrays)


def port_cli(work: Path, beam: int, threads: int | None, out: Path) -> float:
    """``groundhog-port translate`` as a user runs it: seconds of the whole process."""
    cmd = [sys.executable, "-m", "groundhog_port"]
    if threads is not None:
        cmd += ["--threads", str(threads)]
    cmd += ["translate", "--beam-search", "--beam-size", str(beam),
            "--state", str(work / "port" / "random_state.pkl"), "--source",
            str(work / "source.txt"), "--trans", str(out), "--log-level", "warning",
            str(work / "port" / "random_model.npz")]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("OMP_NUM_THREADS", None)  # as users run it
    t = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work)
    seconds = time.perf_counter() - t
    if run.returncode != 0:
        raise SystemExit(f"bench_peer.py: {' '.join(cmd)} failed:\n{run.stderr[-2000:]}")
    return seconds


def marian(tool, a: argparse.Namespace, beam: int, threads: int, out: Path) -> float:
    """Marian's decoding seconds (the shared tool's in-process ``marian`` system)."""
    return float(tool.run_one(a, "marian", beam, threads, out)["decode_s"])


def equal_work(out: Path, lengths: list[int]) -> bool:
    """Every output line has 3L+2 words: the counter ran its full length on both sides."""
    return [len(x.split()) for x in out.read_text().splitlines()] == [3 * L + 2 for L in lengths]


class BusyLoop:
    """``while True: pass`` in a child process for the length of a ``with`` block."""

    def __enter__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        time.sleep(1.0)  # on the CPU before the timed run starts
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else the platform's word for it."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def wait_quiet(patience_s: float = 90.0) -> float:
    end = time.monotonic() + patience_s
    while os.getloadavg()[0] >= LOAD_LIMIT and time.monotonic() < end:
        time.sleep(5)
    return os.getloadavg()[0]


def run(
    marian_python: Path,
    work: Path,
    beams: list[int],
    repeat: int,
    peer_tool: Path = PEER_TOOL,
    log=print,
) -> dict:
    """The whole measurement; returns its record (also what ``bench.py --peer`` stores)."""
    tool = load_tool(peer_tool)
    build(tool, work)
    # a user's Python writes the package's bytecode on its first run; where that is turned
    # off (PYTHONDONTWRITEBYTECODE=1 on the machine of issue 54: 86 modules uncached), each
    # timed run would compile them again, 0.09 s of a translate there: written once here
    if not compileall.compile_dir(REPO / "groundhog_port", quiet=1):
        raise SystemExit("bench_peer.py: the package's modules did not compile")
    lengths = [len(x.split()) for x in (work / "source.txt").read_text().splitlines()]
    cores = len(os.sched_getaffinity(0))
    a = argparse.Namespace(project=REPO, port_python=Path(sys.executable),
                           marian_venv=Path(marian_python).parent.parent, work=work,
                           workspace=2048, mini_batch=16)  # fmt: skip
    runs: dict[tuple, list[float]] = {}
    loads: list[float] = []
    every_equal = True
    settings = [("1 thread", 1, 1), ("every core", None, cores)]
    for rep in range(repeat):
        for beam in beams:
            for label, port_threads, marian_threads in settings:
                for busy in (False, True) if label == "every core" else (False,):
                    loads.append(wait_quiet())
                    for system in ("port", "marian") if rep % 2 == 0 else ("marian", "port"):
                        out = work / f"peer.{system}.txt"
                        with BusyLoop() if busy else contextlib.nullcontext():
                            s = (
                                port_cli(work, beam, port_threads, out)
                                if system == "port"
                                else marian(tool, a, beam, marian_threads, out)
                            )
                        runs.setdefault((system, label, beam, busy), []).append(s)
                        every_equal &= equal_work(out, lengths)
                        log(f"rep {rep} beam {beam:2d} {label:10s} {'busy' if busy else 'quiet'} "
                            f"{system:6s} {s:6.2f} s")  # fmt: skip
    words = sum(lengths)
    rows = []
    for beam in beams:
        for label, _, _ in settings:
            for busy in (False, True) if label == "every core" else (False,):
                p = statistics.median(runs[("port", label, beam, busy)])
                m = statistics.median(runs[("marian", label, beam, busy)])
                row = dict(beam=beam, setting=label, busy=busy, port_cli_s=p, marian_s=m,
                           port_words_per_s=words / p, marian_words_per_s=words / m,
                           ratio=m / p, target=BUSY_RATIO if busy else QUIET_RATIO)  # fmt: skip
                if busy:
                    one = statistics.median(runs[("port", "1 thread", beam, False)])
                    row["port_busy_over_quiet_one_thread"] = one / p
                row["met"] = row["ratio"] >= row["target"] and (
                    not busy or row["port_busy_over_quiet_one_thread"] >= BUSY_OVER_ONE
                )
                rows.append(row)
    return dict(
        peer="marian (pymarian, --type amun)",
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        machine=f"{cpu_name()}, {cores} cores",
        method=str(peer_tool),
        equal_work=every_equal,
        load_average_before_runs=loads,
        quiet=max(loads) < LOAD_LIMIT,
        repeat=repeat,
        rows=rows,
    )


def table(record: dict) -> str:
    lines = [
        f"{record['date']}; {record['machine']}; peer {record['peer']}; equal work "
        f"{record['equal_work']}; load average before every run < {LOAD_LIMIT}: {record['quiet']}",
        "| beam | setting | machine | port CLI s (whole run) | Marian s (decoding) | port / "
        "Marian | busy / quiet 1 thread | target |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in record["rows"]:
        over = r.get("port_busy_over_quiet_one_thread")
        lines.append(
            f"| {r['beam']} | {r['setting']} | {'one core busy' if r['busy'] else 'quiet'} | "
            f"{r['port_cli_s']:.2f} | {r['marian_s']:.2f} | {r['ratio']:.2f}x | "
            f"{'-' if over is None else f'{over:.2f}'} | {'met' if r['met'] else 'NOT met'} |"
        )
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--marian-python", type=Path,
                   help="a Python with pymarian (pip install -e '.[bench]' in a venv of its own)")  # fmt: skip
    p.add_argument("--peer-work", type=Path, default=Path("peer-work"),
                   help="where the two models (~700 MB, written once) and outputs go")  # fmt: skip
    p.add_argument("--peer-tool", type=Path, default=PEER_TOOL, help="the shared peer tool")
    p.add_argument("--peer-repeat", type=int, default=1, help="runs of each setting (1)")


def check_marian(python: Path | None) -> Path:
    if python is None:
        raise SystemExit("bench_peer.py: --marian-python PATH is required (a venv with pymarian)")
    probe = subprocess.run([str(python), "-c", "import pymarian"], capture_output=True, text=True)
    if probe.returncode != 0:
        raise SystemExit(
            f"bench_peer.py: {python} cannot import pymarian: install the bench extra in a venv "
            f"of its own (python -m venv V && V/bin/pip install -e '.[bench]')"
        )
    return python


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(p)
    p.add_argument("--beams", default="1,5,10")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    python = check_marian(args.marian_python)
    beams = [int(b) for b in args.beams.split(",")]
    record = run(python, args.peer_work.resolve(), beams, args.peer_repeat, args.peer_tool)
    print(table(record))
    if args.json:
        args.json.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
