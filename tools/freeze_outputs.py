#!/usr/bin/env python3
"""Frozen outputs (issue 52 step 0): today's outputs recorded bit for bit, so that moving the
network behind one interface can be checked against them at every step -- the paths are
otherwise only compared with each other, and a change that moves two of them together is
invisible.

    python tools/freeze_outputs.py record   # writes parity_tests/frozen/outputs.json
    python tools/freeze_outputs.py check    # recomputes, prints each difference, exit 1

Sections frozen so far (the issue lists the rest: every parity row, the ONNX
graphs and driver, one train update):

* ``score``: score.py's ``txt`` (each of those pairs: cost, word probabilities), ``batch``
  (the first batch of the test set) and ``h5`` (the first batch of the training corpora)
  modes, costs as ``float.hex``;
* ``samples``: :data:`N_SAMPLES` samples of each of those sentences at inverse temperatures
  0.5, 1 and 2 (the state's stream), each with its cost as ``float.hex``;
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
    from groundhog_port.search.translator import Translator

    exp = _open(case)
    lines = _lines(case)
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


#: inverse temperatures (sample.py's ``--alpha``) and samples drawn per sentence
ALPHAS = (0.5, 1.0, 2.0)
N_SAMPLES = 5


def sample_outputs(case: Path, batch_size: int = 1) -> dict:
    """``{"alpha0.5": [[[sentence, cost.hex()], ...] per line], ...}``: ``N_SAMPLES`` samples
    of each of the first test sentences, a fresh stream (the state's seed) per temperature."""
    from groundhog_port.sampling.sampler import Sampler

    exp = _open(case)
    seqs = [exp.parse_source(line)[0] for line in _lines(case)]
    out = {}
    for alpha in ALPHAS:
        drawn = Sampler(exp).sample_many(seqs, N_SAMPLES, alpha, batch_size=batch_size)
        out[f"alpha{alpha}"] = [
            [[s, float(c).hex()] for s, c in zip(d.sentences, d.costs)]
            if hasattr(d, "sentences")
            else str(d)
            for d in drawn
        ]
    return out


def score_outputs(case: Path, batch_size: int = 1) -> dict:
    """score.py's three modes on the case's test set: ``txt`` each of the first pairs alone
    (its cost and word probabilities), ``batch`` the first batch of the text files, ``h5``
    the first batch of the training corpora the state names; costs as ``float.hex``, or the
    error where a mode cannot run.  (``batch_size`` is not score's: its batches are the
    state's ``bs``.)"""
    from groundhog_port.errors import LegacyInputError
    from groundhog_port.search.scoring import batches_for, parse_pair, score_batch, score_pair

    exp = _open(case)
    with open(case / "test.fr", encoding="utf-8") as f:
        targets = [next(f) for _ in range(LINES)]
    txt = []
    for src, trg in zip(_lines(case), targets):
        (x, _), (y, _) = parse_pair(exp, src, trg, allow_unk=True)
        s = score_pair(exp.model, x, y)
        txt.append([float(s.cost[0]).hex(), [float(p).hex() for p in s.word_probs[:, 0]]])
    out: dict = {"txt": txt}
    for mode, files in (("batch", (case / "test.en", case / "test.fr")), ("h5", (None, None))):
        try:
            batch = next(iter(batches_for(exp, *files, allow_unk=True, n_batches=1)))
            out[mode] = [float(c).hex() for c in score_batch(exp.model, batch).cost]
        except (LegacyInputError, StopIteration) as err:
            out[mode] = f"not run: {err}"
    return out


def _open(case: Path):
    from groundhog_port.legacy.loading import open_experiment

    state = sorted(case.glob("*state.pkl"))[0]
    model = Path(str(state).replace("state.pkl", "model.npz"))
    # the case's own files first, then the shared corpora (score's h5 mode reads them)
    return open_experiment(state, model, "", [case, SHARED / "legacy_traces" / "data"])


def _lines(case: Path) -> list[str]:
    with open(case / "test.en", encoding="utf-8") as f:
        return [next(f) for _ in range(LINES)]


#: each frozen section: how its outputs of one case are made (batch 1: the literal path)
SECTIONS = {
    "search": lambda c, b: search_outputs(c, b),
    "samples": lambda c, b: sample_outputs(c, b),
    "score": lambda c, b: score_outputs(c, b),
}


def record() -> dict:
    import torch

    torch.set_num_threads(1)
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=REPO, check=False
    ).stdout.strip()
    return {
        "version": 1,
        "made_at": commit,
        **{name: {case_name(c): make(c, 1) for c in cases()} for name, make in SECTIONS.items()},
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
            for name, make in SECTIONS.items():
                got = {case_name(c): make(c, batch) for c in cases()}
                found += differences(frozen, name, got, f"{threads} threads, batch {batch}")
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
