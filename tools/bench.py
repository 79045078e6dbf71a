#!/usr/bin/env python3
"""One benchmark run: the beam search and teacher-forced scoring side by side, against the peak.

Full-size RNNsearch-50 with random weights (``bench_search.full_size_model``): the batched
search (``BatchedBeamSearch.sample_many``, as ``translate`` runs it) at beams 1, 5 and 10
on ``--sentences`` sentences of 20-40 words, the literal search on ``--n-literal``
sentences of them (the reference the batched one must equal, n-best lists and costs bit
for bit), and scoring (``score --mode batch``) of ``--batches`` batches of 80 pairs for
RNNsearch-50 and RNNencdec-50 (``bench_score``).  The float32 matmul peak (best
``torch.mm`` of 4096^2 matrices) is measured before and after; every share is of the
higher of the two.  FLOPs: matrix products only, counted as in ``bench_search``.  Every
workload runs in its own worker process, whose peak RSS (``ru_maxrss``) is reported beside
it.  Then the start-up (:func:`startup`): ``translate`` on one sentence, beam 10, with a
full-size model read from disk, seconds to its output, and ``import torch`` alone.

Each timed workload runs ``--repeat`` times in its worker process (the literal search
once: it is the reference, not a figure); the table gives the best run's rate and share,
and the median run's rate beside it.

A run judges nothing unless the machine was quiet, so the run checks it and says so
(``verdict`` in the JSON, last line of the table): "quiet" when the load average (1 min)
was at most 0.5 when the run started, the other processes' runnable threads sampled
during the run averaged at most 0.5 (the load average at the end counts the benchmark's own
threads, so it is reported but not judged), and the two peaks differ by at most 5%;
otherwise "not quiet" with the reasons.  Default settings should take about 6 minutes on
a quiet 2-core machine (estimated from issue 37's quiet rates, docs/speed.md; the run
records its own, ``elapsed_s`` in the JSON).

Targets (issues #28, #37): scoring >= 80% of the peak, beam 1 >= 60%, beams 5 and 10 >= 85%.

    python tools/bench.py [--threads N] [--repeat 3] [--json F] [--device cuda]
    python tools/bench.py --profile          # where the time goes, per workload
    python tools/bench.py --peer marian --marian-python V/bin/python   # + beside Marian

Threads: ``--threads``, else ``OMP_NUM_THREADS``, else one per core.  Run it alone: with
other processes on the machine, every multi-threaded torch op waits for all its threads.
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))

import bench_peer  # noqa: E402
import bench_score  # noqa: E402
import bench_search  # noqa: E402
import benchlib  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

TARGETS = {"score": 0.80, 1: 0.60, 5: 0.85, 10: 0.85}
#: a quiet run: load average (1 min) at the start, other runnable threads during the run
LOAD_LIMIT = 0.5
#: a quiet run: the peaks before and after differ by at most this share of the higher
PEAK_SPREAD = 0.05


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Numbers depend on the machine's load: run it alone.",
    )
    benchlib.add_threads_argument(p)
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.add_argument("--beams", default="1,5,10", help="beam sizes (default: %(default)s)")
    p.add_argument(
        "--sentences", type=int, default=100, help="sentences for the batched search (default 100)"
    )
    p.add_argument(
        "--n-literal",
        type=int,
        default=5,
        help="of them decoded by the literal search too (default 5; 0: none)",
    )
    p.add_argument("--batches", type=int, default=3, help="scoring batches of 80 pairs (3)")
    p.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="timed runs of each workload (batched search, scoring) in its worker; "
        "best and median reported (default 3)",
    )
    p.add_argument("--models", default="search,encdec", help="scoring models (%(default)s)")
    benchlib.add_seed_and_json_arguments(p)
    p.add_argument(
        "--startup-runs",
        type=int,
        default=3,
        help="runs of the start-up measurement, best kept (default 3; 0: skip it)",
    )
    p.add_argument(
        "--case-dir",
        type=Path,
        help="folder for the start-up's full-size experiment, written once and "
        "reused (default: a temporary folder, written every run)",
    )
    p.add_argument(
        "--no-onnx", action="store_true", help="skip the ONNX path's rows (tools/bench_onnx.py)"
    )
    p.add_argument(
        "--peer",
        choices=["marian"],
        help="also time translate beside a peer decoder, same CPU and work (tools/bench_peer.py: "
        "quiet and beside a busy core), its ratios in the same JSON",
    )
    bench_peer.add_arguments(p)
    p.add_argument(
        "--profile",
        action="store_true",
        help="instead: profile one scoring batch and the batched search of "
        "--sentences per beam (torch.profiler): the matrix products' share "
        "of the time and speed, and the top operations",
    )
    return p.parse_args(argv)


def search_rows(args, peak):
    sargs = bench_search.parse_args(
        [
            "--device",
            args.device,
            "--sentences",
            str(args.sentences),
            "--threads",
            str(args.threads),
            "--seed",
            str(args.seed),
            "--n-literal-full",
            str(args.n_literal),
        ]
    )
    rows = []
    for beam in [int(b) for b in args.beams.split(",")]:
        bat = bench_search.run_worker(sargs, "full", "batched", beam, repeat=args.repeat)
        row = dict(
            workload=f"search, beam {beam}",
            target=TARGETS.get(beam),
            rate=bat["src_words"] / bat["seconds"],
            rate_median=bat["src_words"] / statistics.median(bat["seconds_all"]),
            seconds_all=bat["seconds_all"],
            unit="source words/s",
            gflops=(bat["dec_flops"] + bat["enc_flops"]) / bat["seconds"] / 1e9,
            hyp_steps_per_s=bat["row_steps"] / bat["seconds"],
            encoder_share=bat["enc_flops"] / (bat["dec_flops"] + bat["enc_flops"]),
            fallbacks=bat["stats"].get("fallbacks"),
            seconds=bat["seconds"],
            peak_rss_mib=bat["peak_rss_mib"],
        )
        if args.n_literal:
            lit = bench_search.run_worker(sargs, "full", "literal", beam)
            same, n = bench_search.compare(lit, bat)
            row["identical_to_literal"] = f"{same}/{n}"
            row["speedup_vs_literal"] = (bat["src_words"] / bat["seconds"]) / (
                lit["src_words"] / lit["seconds"]
            )
        row["share"] = row["gflops"] / peak
        rows.append(row)
    return rows


def score_rows(args, peak):
    """Scoring, one model per worker process (``bench_score.py``): its peak RSS is its own."""
    rows = []
    for name in args.models.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "score.json"
            cmd = [
                sys.executable,
                str(REPO / "tools" / "bench_score.py"),
                "--models",
                name,
                "--batches",
                str(args.batches),
                "--seed",
                str(args.seed),
                "--threads",
                str(args.threads),
                "--peak-size",
                "0",
                "--repeat",
                str(args.repeat),
                "--json",
                str(out),
            ]
            benchlib.run_worker(cmd)
            r = json.loads(out.read_text())["rows"][name]
        rows.append(
            dict(
                workload=f"scoring, {'RNNsearch' if name == 'search' else 'RNNencdec'}",
                target=TARGETS["score"],
                rate=r["pairs"] / r["seconds"],
                rate_median=r["pairs"] / statistics.median(r["seconds_all"]),
                seconds_all=r["seconds_all"],
                unit="pairs/s",
                gflops=r["gflops"],
                target_tokens_per_s=r["target_tokens_per_s"],
                seconds=r["seconds"],
                share=r["gflops"] / peak,
                peak_rss_mib=r["peak_rss_mib"],
            )
        )
    return rows


#: ``python -c _REPORT_RSS FILE ARGS...`` runs ``python ARGS...`` (``-m MODULE ...`` or
#: ``-c CODE``) and writes its peak RSS in MiB to FILE at exit
#: (VmHWM, as benchlib.peak_rss_mib reads it, without importing torch before the command)
_REPORT_RSS = """\
import atexit, runpy, sys
out, mode, what, *rest = sys.argv[1:]
def peak():
    hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
    open(out, "w").write(str(int(hwm.split()[1]) / 1024))
atexit.register(peak)
sys.argv = [what, *rest]
runpy.run_module(what, run_name="__main__", alter_sys=True) if mode == "-m" else exec(what)
"""


def startup(args):
    """``translate`` of one sentence with a full-size model on disk: seconds from the
    command's start to its output (the translation file, written when it exits), best of
    ``--startup-runs``, with its CPU time and peak RSS; and ``import torch`` alone, the floor.

    The experiment (state, vocabularies of 30,001 words, a 337 MB ``model.npz``) is
    ``numpy_trace_producer.make_case`` (the weights of :func:`bench_search.full_size_model`),
    written once into ``--case-dir`` (default: a temporary folder).
    """
    import numpy_trace_producer

    tmp = None
    case = args.case_dir
    if case is None:
        tmp = tempfile.TemporaryDirectory()
        case = Path(tmp.name)
    if not (case / "random_model.npz").exists():
        numpy_trace_producer.make_case(case, 1000, 620, 30001, 1, args.seed, 20, 30)
    cmd = [
        sys.executable,
        "-m",
        "groundhog_port",
        "--threads",
        str(torch.get_num_threads()),
        "translate",
        "--state",
        str(case / "random_state.pkl"),
        str(case / "random_model.npz"),
        "--beam-search",
        "--beam-size",
        "10",
        "--source",
        str(case / "test.en"),
        "--trans",
        str(case / "out.txt"),
    ]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    runs = []
    for what, command in (
        ("translate", cmd),
        ("import torch", [sys.executable, "-c", "import torch"]),
    ):
        best = None
        for _ in range(args.startup_runs):
            with tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile("r") as rss:
                # the child writes its own peak RSS when it exits (ru_maxrss would count the
                # memory of this process, which it was forked with)
                wrapped = [sys.executable, "-c", _REPORT_RSS, rss.name, *command[1:]]
                t = time.perf_counter()
                proc = subprocess.Popen(wrapped, stdout=subprocess.DEVNULL, stderr=err, env=env)
                _, status, usage = os.wait4(proc.pid, 0)  # this child's own CPU time
                wall = time.perf_counter() - t
                if status:
                    err.seek(0)
                    raise SystemExit(
                        f"failed: {' '.join(command)}\n"
                        f"{err.read().decode(errors='replace')[-3000:]}"
                    )
                peak_rss = float(rss.read())
            run = dict(
                seconds=wall, cpu_seconds=usage.ru_utime + usage.ru_stime, peak_rss_mib=peak_rss
            )
            if best is None or wall < best["seconds"]:
                best = run
        runs.append(dict(workload=what, **best))
    if tmp is not None:
        tmp.cleanup()
    return runs


def profile(args):
    """Where the time goes: the operations with the most self time, by input shape."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from groundhog_port.search.batched import BatchedBeamSearch
    from groundhog_port.search.scoring import score_batch
    from legacy_states import prototype_search_state

    model = bench_search.full_size_model(args.seed, args.device)
    batch = bench_score.batches(prototype_search_state(), 1, 80, args.seed)[0]
    seqs = bench_search.random_sentences(model.cfg, args.sentences, 20, 40, args.seed + 1)
    peak = benchlib.measure_peak(4096, 4, torch.device(args.device))
    work = [("scoring, RNNsearch, one batch of 80 pairs", lambda: score_batch(model, batch))]
    for beam in [int(b) for b in args.beams.split(",")]:
        work.append(
            (
                f"batched search, beam {beam}, {len(seqs)} sentences",
                lambda beam=beam: BatchedBeamSearch(model).sample_many(seqs, beam),
            )
        )
    for title, run in work:
        with torch.no_grad():
            run()  # warm-up
            with torch_profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
                run()
        events = prof.key_averages(group_by_input_shape=True)
        total = sum(e.self_cpu_time_total for e in events)
        mm_time = mm_flops = 0
        for e in events:
            if e.key in ("aten::mm", "aten::bmm") and len(e.input_shapes) >= 2:
                a, b = e.input_shapes[0], e.input_shapes[1]
                mm_flops += 2 * e.count * np.prod(a) * b[-1]
                mm_time += e.self_cpu_time_total
        print(
            f"\n== {title}: {total / 1e6:.2f} s under the profiler; matrix products "
            f"{100 * mm_time / total:.0f}% of it, at {mm_flops / mm_time / 1e3:.1f} GFLOP/s "
            f"({100 * mm_flops / mm_time / 1e3 / peak:.0f}% of the peak, {peak:.1f}, "
            f"measured just before)"
        )
        print(
            events.table(
                sort_by="self_cpu_time_total",
                row_limit=15,
                max_name_column_width=22,
                max_shapes_column_width=50,
            )
        )


class LoadSampler(threading.Thread):
    """Counts, every ``period`` seconds, the runnable threads of other processes: the
    machine's runnable threads (``/proc/loadavg``, 4th field) less this sampler and the
    benchmark's own ``threads`` (a lower bound: the benchmark's threads are not always
    runnable).  ``mean``: their average over the run so far (None where ``/proc`` is absent)."""

    def __init__(self, threads, period=0.5):
        super().__init__(daemon=True)
        self.threads, self.period = threads, period
        self.samples = []
        self.done = threading.Event()

    def run(self):
        while not self.done.wait(self.period):
            try:
                with open("/proc/loadavg") as f:
                    running = int(f.read().split()[3].split("/")[0])
            except (OSError, ValueError, IndexError):
                return
            self.samples.append(max(0, running - 1 - self.threads))

    def stop(self):
        self.done.set()
        self.join()
        return statistics.mean(self.samples) if self.samples else None


def verdict(load_before, others, peak0, peak1):
    """("quiet" | "not quiet", reasons): see the module docstring."""
    reasons = []
    if load_before > LOAD_LIMIT:
        reasons.append(f"load average {load_before:.2f} > {LOAD_LIMIT} at the start")
    if others is not None and others > LOAD_LIMIT:
        reasons.append(
            f"other processes' runnable threads averaged {others:.2f} > {LOAD_LIMIT} during the run"
        )
    spread = abs(peak1 - peak0) / max(peak0, peak1)
    if spread > PEAK_SPREAD:
        reasons.append(
            f"peaks {peak0:.1f} and {peak1:.1f} differ by {100 * spread:.1f}% > "
            f"{100 * PEAK_SPREAD:.0f}%"
        )
    return ("not quiet" if reasons else "quiet"), reasons


def main(argv=None):
    args = parse_args(argv)
    if args.peer:
        bench_peer.check_marian(args.marian_python)
    t_start = time.perf_counter()
    threads = args.threads or int(os.environ.get("OMP_NUM_THREADS", 0) or 0)
    if threads:
        torch.set_num_threads(threads)
        args.threads = threads
    if args.profile:
        return profile(args)
    device = torch.device(args.device)
    load_before = os.getloadavg()
    sampler = LoadSampler(torch.get_num_threads())
    sampler.start()
    peak0 = benchlib.measure_peak(4096, 4, device)
    search = search_rows(args, peak0)
    scoring = score_rows(args, peak0)
    peak1 = benchlib.measure_peak(4096, 4, device)
    others = sampler.stop()
    load_after = os.getloadavg()
    quiet, reasons = verdict(load_before[0], others, peak0, peak1)
    start = startup(args) if args.startup_runs and device.type == "cpu" else []
    peak = max(peak0, peak1)
    rows = search + scoring
    for r in rows:
        r["share"] = r["gflops"] / peak
        r["met"] = None if r["target"] is None else r["share"] >= r["target"]
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    machine = (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {args.device}"
    )
    load_line = (
        f"load average (1/5/15 min) {'/'.join(f'{x:.2f}' for x in load_before)} at the start, "
        f"{'/'.join(f'{x:.2f}' for x in load_after)} after the workloads (their own threads "
        "included); other processes' runnable threads during them: "
        + ("not measured" if others is None else f"{others:.2f} on average")
    )
    print(f"{when}; {machine}")
    print(load_line)
    print(
        f"float32 matmul peak (torch.mm 4096^2): {peak0:.1f} GFLOP/s before, "
        f"{peak1:.1f} after; shares are of {peak:.1f}\n"
    )
    print(
        f"| workload | rate (best of {args.repeat}) | median | GFLOP/s | share of peak | target "
        "| identical to literal | peak RSS |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        target = (
            "-"
            if r["target"] is None
            else (f"{100 * r['target']:.0f}% ({'met' if r['met'] else 'not met'})")
        )
        print(
            f"| {r['workload']} | {r['rate']:.1f} {r['unit']} | {r['rate_median']:.1f} | "
            f"{r['gflops']:.1f} | {100 * r['share']:.1f}% | {target} | "
            f"{r.get('identical_to_literal', '-')} | {r['peak_rss_mib']:.0f} MiB |"
        )
    print(
        f"\nverdict: {quiet}"
        + (
            ""
            if not reasons
            else " (" + "; ".join(reasons) + "): these figures judge nothing about the code"
        )
    )
    if start:
        print(
            f"\nstart-up (best of {args.startup_runs}; load average {os.getloadavg()[0]:.1f} now):"
        )
        print("| command | seconds to its output | CPU seconds | peak RSS |")
        print("|---|---|---|---|")
        for r in start:
            what = (
                "translate, 1 sentence, beam 10, full-size model from disk"
                if r["workload"] == "translate"
                else "python -c 'import torch' (the floor)"
            )
            print(
                f"| {what} | {r['seconds']:.2f} | {r['cpu_seconds']:.2f} | "
                f"{r['peak_rss_mib']:.0f} MiB |"
            )
    onnx = onnx_rows(args)
    peer = None
    if args.peer:
        print(f"\nbeside {args.peer} (tools/bench_peer.py):")
        peer = bench_peer.run(
            args.marian_python,
            args.peer_work.resolve(),
            [int(b) for b in args.beams.split(",")],
            args.peer_repeat,
            args.peer_tool,
        )
        print(bench_peer.table(peer))
    elapsed = time.perf_counter() - t_start
    print(f"\n{elapsed / 60:.1f} minutes in all")
    if args.json:
        args.json.write_text(
            json.dumps(
                dict(
                    date=when,
                    machine=machine,
                    command=" ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
                    verdict=quiet,
                    not_quiet_because=reasons,
                    load_average_before=load_before,
                    load_average_after=load_after,
                    other_runnable_threads=others,
                    peak_before=peak0,
                    peak_after=peak1,
                    repeat=args.repeat,
                    rows=rows,
                    startup=start,
                    onnx=onnx,
                    peer=peer,
                    elapsed_s=elapsed,
                ),
                indent=1,
            )
        )


def onnx_rows(args):
    """The exported ONNX graphs run by their numpy driver (onnxruntime, CPU) against the
    port's searches, in this run: the fixture at beams 1/5/10 and 3 sentences of
    RNNsearch-50 at beam 10 (tools/bench_onnx.py); None when skipped."""
    if args.no_onnx:
        return None
    import bench_onnx

    rows = bench_onnx.measure() + bench_onnx.measure_full(3, seed=args.seed)
    bench_onnx.print_rows(rows)
    return rows


if __name__ == "__main__":
    main()
