#!/usr/bin/env python3
"""Benchmark: does ``archive`` take time linear in what one folder or one pack holds?
(issue 51 item 6: at 06d3c0e, three times the experiments of one folder of a pack took 8.3
times the CPU, three times the texts of one folder 8.4 times.)

Three shapes, each at N and 3N, each run once in a fresh process
(``groundhog-port archive ROOT --out OUT --plots 0 --max-sentences 2``):

* ``folder``: N experiments of the shared ``search`` case in one folder, each its state,
  model and output under its own prefix (``e7_state.pkl``, ``e7_model.npz``,
  ``e7_trans_beam10.txt``), the vocabularies and test set once beside them;
* ``pack``: the same folder kept as one ``.tar.gz``;
* ``folders``: N experiments each in its own folder (``runs/e7/search_state.pkl``, its model
  and output), the vocabularies and test set once in ``runs/data``;
* ``texts``: one experiment beside N small text files of other lengths.

The figure is the ratio of the 3N run's time to the N run's: 3.0 is linear.  Run it on a
quiet machine (``uptime`` load under 0.5); it prints the load it saw.

    python tools/bench_scaling.py [--n 10] [--shapes folder pack texts] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CASE = REPO.parent / "shared" / "legacy_traces" / "search"
VOCABS = ("vocab.en.pkl", "ivocab.en.pkl", "vocab.fr.pkl", "ivocab.fr.pkl")


def _head(name: str, n: int = 4) -> bytes:
    return b"".join((CASE / name).read_bytes().splitlines(keepends=True)[:n])


def _data(d: Path) -> None:
    """The vocabularies and the test set's first lines, once, in folder ``d``."""
    d.mkdir(parents=True)
    for name in VOCABS:
        shutil.copyfile(CASE / name, d / name)
    (d / "test.en").write_bytes(_head("test.en"))
    (d / "test.fr").write_bytes(_head("test.fr"))


def _experiment(d: Path, prefix: str = "search_", output: str = "trans_beam10.txt") -> None:
    """The ``search`` case's state, model and the first lines of an output in folder ``d``."""
    shutil.copyfile(CASE / "search_state.pkl", d / f"{prefix}state.pkl")
    shutil.copyfile(CASE / "search_model.npz", d / f"{prefix}model.npz")
    (d / output).write_bytes(_head("trans_beam10.txt"))


def _folder(d: Path, n: int) -> None:
    _data(d)
    for e in range(n):
        _experiment(d, f"e{e}_", f"e{e}_trans_beam10.txt")


def build(shape: str, root: Path, n: int) -> None:
    if shape == "folder":
        _folder(root / "runs", n)
    elif shape == "folders":
        _data(root / "runs" / "data")
        for e in range(n):
            (root / "runs" / f"e{e}").mkdir()
            _experiment(root / "runs" / f"e{e}")
    elif shape == "pack":
        _folder(root.parent / "packing" / "runs", n)
        root.mkdir(parents=True)
        with tarfile.open(root / "runs.tar.gz", "w:gz") as tf:
            tf.add(root.parent / "packing" / "runs", "runs")
    else:
        _folder(root / "run", 1)
        for i in range(n):
            lines = "".join(f"text {i} line {j}\n" for j in range(5 + i % 7))
            (root / "run" / f"notes{i}.txt").write_text(lines, encoding="utf-8")


def timed(shape: str, n: int) -> float:
    with tempfile.TemporaryDirectory(prefix="bench_scaling_") as tmp:
        root, out = Path(tmp) / "root", Path(tmp) / "out"
        build(shape, root, n)
        argv = [sys.executable, "-m", "groundhog_port", "--log-level", "ERROR", "archive"]
        argv += [str(root), "--out", str(out), "--plots", "0", "--max-sentences", "2"]
        start = time.monotonic()
        r = subprocess.run(argv, capture_output=True, text=True, cwd=REPO)
        seconds = time.monotonic() - start
        if r.returncode not in (0, 1):
            raise SystemExit(f"{shape} n={n}: exit {r.returncode}\n{r.stderr[-2000:]}")
        return seconds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10, help="the smaller size (the other is 3 times)")
    ap.add_argument("--shapes", nargs="+", default=["folder", "folders", "pack", "texts"])
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    rows = []
    for shape in args.shapes:
        n = args.n if shape != "texts" else 30 * args.n
        load = os.getloadavg()[0]
        small, large = timed(shape, n), timed(shape, 3 * n)
        rows.append({"shape": shape, "n": n, "seconds": [small, large], "load": load})
        print(
            f"{shape:7s} n={n:5d}: {small:7.1f} s, 3n: {large:7.1f} s, ratio {large / small:4.1f} "
            f"(linear: 3.0; load {load:.2f})",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
