#!/usr/bin/env python3
"""Benchmark: ``archive`` on trees of 1k, 10k and 100k files (issue 47: the lookup is linear).

Each tree holds ``--experiments`` experiments (default 10) of the shared ``search`` case (4 sentences each; one per
folder) and N small text files spread over folders of 100 (candidate test sets of other
lengths: each is walked, counted and hashed into the cache key).  Each size runs
``groundhog-port archive ROOT --out OUT --plots 0`` once in a fresh process; the figure is
its wall time and the time per 1,000 files.  Linear means the per-file time stays flat as N
grows (every file's facts -- stat, line count, digest -- are worked out once per run and
shared by the experiments, ``lookup.text_files`` and ``archive.cache.digest``).

    python tools/bench_tree.py [--sizes 1000 10000 100000] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CASE = REPO.parent / "shared" / "legacy_traces" / "search"
FILES = ("search_state.pkl", "search_model.npz", "vocab.en.pkl", "ivocab.en.pkl",
         "vocab.fr.pkl", "ivocab.fr.pkl")  # fmt: skip


def build(root: Path, n: int, experiments: int) -> None:
    for e in range(experiments):
        d = root / f"exp{e}"
        d.mkdir(parents=True)
        for name in FILES:
            shutil.copyfile(CASE / name, d / name)
        for name in ("test.en", "test.fr", "trans_beam10.txt"):
            lines = (CASE / name).read_bytes().splitlines(keepends=True)[:4]
            (d / name).write_bytes(b"".join(lines))
    for i in range(n):
        d = root / "corpus" / f"part{i // 100:04d}"
        if i % 100 == 0:
            d.mkdir(parents=True)
        (d / f"f{i}.txt").write_bytes(f"line {i}\nand {i % 7} more\n".encode())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--experiments", type=int, default=10)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    rows = []
    for n in args.sizes:
        with tempfile.TemporaryDirectory(prefix="bench_tree_") as tmp:
            root, out = Path(tmp) / "root", Path(tmp) / "out"
            build(root, n, args.experiments)
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            r = subprocess.run(
                [sys.executable, "-m", "groundhog_port", "--log-level", "ERROR", "archive",
                 str(root), "--out", str(out), "--plots", "0"],
                capture_output=True, text=True, cwd=REPO,
            )  # fmt: skip
            wall = time.perf_counter() - t0
            if r.returncode != 0:
                print(r.stderr[-2000:], file=sys.stderr)
                return 1
            rows.append({"files": n, "experiments": args.experiments, "wall_s": round(wall, 2),
                         "load": round(load, 2),
                         "s_per_1000_files": round(wall / n * 1000, 3)})  # fmt: skip
            print(
                f"{n:>7} files: {wall:7.1f} s ({wall / n * 1000:.3f} s per 1,000; load {load:.2f})"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
