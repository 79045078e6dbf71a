#!/usr/bin/env python3
"""Frozen outputs (issue 52 step 0): today's outputs recorded bit for bit, so that moving the
network behind one interface can be checked against them at every step -- the paths are
otherwise only compared with each other, and a change that moves two of them together is
invisible.

    python tools/freeze_outputs.py record   # writes parity_tests/frozen/outputs.json
    python tools/freeze_outputs.py check    # recomputes, prints each difference, exit 1

Sections frozen so far (the issue lists the rest: samples, score, every parity row, the ONNX
graphs and driver, one train update):

* ``search``: the n-best list of each of the first :data:`LINES` test sentences of every case
  (the bundled fixture, every shared case with a model and a test set), beams 1, 5, 10, plain,
  ``--normalize`` and ``--ignore-unk``; each sentence with its cost as ``float.hex``.  The
  record is made with the literal search at one thread; ``check`` (and
  ``parity_tests/parity/test_frozen_outputs.py``) recompute it at batch 1 and 32 and 1 and 2
  threads, every combination equal to the record.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
FROZEN = REPO / "parity_tests" / "frozen" / "outputs.json"
#: test sentences frozen per case (the first ones: short, every case has them)
LINES = 4
BEAMS = (1, 5, 10)
MODES = ("plain", "normalize", "ignore_unk")


def cases() -> list[Path]:
    """The case folders: the bundled fixture, then every shared case holding a state, its
    model and a test set (``phrase_lstm`` failed in GroundHog: it has no model)."""
    found = [REPO / "fixtures" / "search"]
    for top in ("legacy_traces", "pending_traces"):
        for d in sorted((SHARED / top).iterdir()) if (SHARED / top).is_dir() else []:
            states = sorted(d.glob("*state.pkl"))
            if (
                states
                and (d / "test.en").is_file()
                and Path(str(states[0]).replace("state.pkl", "model.npz")).is_file()
            ):
                found.append(d)
    return found


def case_name(case: Path) -> str:
    return f"{case.parent.name}/{case.name}"


def search_outputs(case: Path, batch_size: int = 1) -> dict:
    """``{"beam5/normalize": [[[sentence, cost.hex()], ...] per line], ...}`` of ``case``."""
    from groundhog_port.legacy.loading import open_experiment
    from groundhog_port.search.translator import Translator

    state = sorted(case.glob("*state.pkl"))[0]
    exp = open_experiment(state, Path(str(state).replace("state.pkl", "model.npz")), "", case)
    with open(case / "test.en", encoding="utf-8") as f:
        lines = [next(f) for _ in range(LINES)]
    out = {}
    for beam in BEAMS:
        for mode in MODES:
            t = Translator(
                exp,
                beam,
                normalize=mode == "normalize",
                ignore_unk=mode == "ignore_unk",
                batch_size=batch_size,
            )
            out[f"beam{beam}/{mode}"] = [
                [[s, float(c).hex()] for s, c in r.nbest] if r.error is None else r.error
                for r in t.translate_lines(lines)
            ]
    return out


def record() -> dict:
    import torch

    torch.set_num_threads(1)
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=REPO, check=False
    ).stdout.strip()
    return {
        "version": 1,
        "made_at": commit,
        "search": {case_name(c): search_outputs(c) for c in cases()},
    }


def differences(frozen: dict, section: str, got: dict, where: str) -> list[str]:
    """One line per output that differs from the record."""
    out = []
    for case, runs in frozen[section].items():
        for key, want in runs.items():
            have = got.get(case, {}).get(key)
            if have != want:
                out.append(f"{section} {case} {key} ({where}): {have!r:.200} != {want!r:.200}")
    return out


def check() -> list[str]:
    import torch

    frozen = json.loads(FROZEN.read_text(encoding="utf-8"))
    found = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for batch in (1, 32):
            got = {case_name(c): search_outputs(c, batch) for c in cases()}
            found += differences(frozen, "search", got, f"{threads} threads, batch {batch}")
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=["record", "check"])
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    if args.action == "record":
        FROZEN.parent.mkdir(parents=True, exist_ok=True)
        FROZEN.write_text(json.dumps(record(), indent=1, ensure_ascii=False) + "\n", "utf-8")
        print(f"recorded {FROZEN}")
        return 0
    found = check()
    for line in found:
        print(line)
    print(f"{len(found)} outputs differ from {FROZEN.relative_to(REPO)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
