"""What the benchmarks of tools/ share: their torch thread count, the float32 matmul peak
their GFLOP/s are a share of, a process's peak RSS, and their worker processes (one per
workload, so that each peak RSS is the workload's own).

Imported by ``tools/bench.py``, ``bench_search.py``, ``bench_score.py`` and
``bench_sampling.py`` (run as ``python tools/NAME.py``: this folder is on ``sys.path``).
"""

import resource
import subprocess
import time
from pathlib import Path

import torch


def add_threads_argument(parser, default=0):
    """``--threads N``, applied by :func:`set_threads`."""
    parser.add_argument(
        "--threads",
        type=int,
        default=default,
        help=f"torch threads (default {default}; 0: torch's default, OMP_NUM_THREADS "
        "else one per core)",
    )


def add_seed_and_json_arguments(parser):
    """``--seed N`` (of the random weights and sentences) and ``--json FILE``."""
    parser.add_argument(
        "--seed", type=int, default=1234, help="random weights and sentences (default 1234)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")


def set_threads(threads):
    """``torch.set_num_threads(threads)``; 0 leaves torch's default."""
    if threads:
        torch.set_num_threads(threads)


def peak_rss_mib():
    """Peak RSS of this process in MiB: ``VmHWM`` of ``/proc/self/status`` where there is
    one (``ru_maxrss`` also counts the parent's memory this process was forked with, which
    exec records as this process's peak), else ``ru_maxrss`` (Linux reports KiB)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure_peak(size, repeats, device):
    """The float32 matmul peak in GFLOP/s: the best of ``repeats + 1`` ``torch.mm`` of two
    ``size`` x ``size`` matrices on ``device`` (``2 size^3`` FLOPs each)."""
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    best = float("inf")
    for _ in range(repeats + 1):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        torch.mm(a, b)
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t)
    return 2 * size**3 / best / 1e9


def run_worker(cmd):
    """Run the worker command ``cmd`` (argv); its standard output, or exit naming the command
    with the end of its standard error."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"worker failed: {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    return proc.stdout
