#!/usr/bin/env python3
"""Frozen outputs (issue 52 step 0): today's outputs recorded bit for bit, so that moving the
network behind one interface can be checked against them at every step -- the paths are
otherwise only compared with each other, and a change that moves two of them together is
invisible.

    python tools/freeze_outputs.py record   # writes parity_tests/frozen/outputs.json
    python tools/freeze_outputs.py check    # recomputes, prints each difference, exit 1
    python tools/freeze_outputs.py record --sections parity   # re-records those sections only

A deliberate change of some outputs (a bound derived anew changes ``parity`` rows) re-records
its sections alone, the others kept as they were; ``made_at`` names the commit each section
was recorded at.

The sections (:data:`SECTIONS`; each says the batch sizes and thread counts it is checked at):

* ``parity``: every row ``parity --case`` reports on each case holding a recording, as its
  JSON (the errors against the recording, the float32 noise and the bounds; no timings);
* ``onnx``: the exported graphs' bytes (a sha256 each) and the exported driver's n-best lists
  (beams 1, 5, 10, plain / ``--normalize`` / ``--ignore-unk``) with their costs;
* ``train``: one ``SGD_adadelta`` update on the first batch of the training corpora: the values
  ``algo()`` returns and a sha256 of each parameter after it;
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
from collections.abc import Callable
from dataclasses import dataclass
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


def parity_rows(case: Path, batch_size: int = 1) -> dict:
    """``{quantity: row}``: every row ``parity --case`` reports on ``case``
    (:func:`row_record`)."""
    from groundhog_port.harness.check import check_case

    return {row.quantity: row_record(row) for row in check_case(case).rows}


def row_record(row) -> dict:
    """A parity row as frozen: ``Row.as_dict`` (the errors against the recording, the float32
    noise, the bounds, the worst element; a report holds no timing), floats as JSON writes
    them (``repr``: exact)."""
    return json.loads(json.dumps(row.as_dict(), allow_nan=False))


def parity_cases() -> list[Path]:
    """The cases holding a recording (``trace.h5``): ``parity --case`` runs on them."""
    return [c for c in cases() if (c / "trace.h5").is_file()]


def onnx_outputs(case: Path, batch_size: int = 1) -> dict:
    """The exported graphs (a sha256 of each file's bytes: every node, name and weight) and the
    exported driver's n-best lists (``beam_search.py``, onnxruntime at the thread count torch
    has) of the first test sentences, beams 1, 5, 10, plain / ``--normalize`` /
    ``--ignore-unk``, costs as ``float.hex``."""
    import hashlib
    import tempfile

    import torch

    from groundhog_port.export.beam_search import OnnxTranslator, SearchFailed
    from groundhog_port.export.onnx_graphs import write_onnx

    exp = _open(case)
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="frozen_onnx_") as tmp:
        for path in write_onnx(exp, tmp):
            if path.suffix == ".onnx":
                out[f"graph/{path.name}"] = hashlib.sha256(path.read_bytes()).hexdigest()
        driver = OnnxTranslator(tmp, threads=torch.get_num_threads())
        for beam in BEAMS:
            for mode in MODES:
                runs = []
                for line in _lines(case):
                    try:
                        trans, costs = driver.sample(
                            driver.parse_source(line),
                            beam,
                            ignore_unk=mode == "ignore_unk",
                            normalize=mode == "normalize",
                        )
                    except SearchFailed as err:
                        runs.append(f"SearchFailed: {err}")
                        continue
                    runs.append([[driver.render(t), float(c).hex()] for t, c in zip(trans, costs)])
                out[f"driver/beam{beam}/{mode}"] = runs
    return out


def train_update(case: Path, batch_size: int = 1) -> dict:
    """One ``SGD_adadelta`` update (what ``train`` runs) on the first batch of GroundHog's
    training iterator over the corpora the state names (the batch each recording's
    ``/train_step`` holds): the values ``algo()`` returns (timings aside) as ``float.hex``, and
    a sha256 of each parameter's bytes after it."""
    import hashlib

    import torch

    from groundhog_port.legacy.data import first_training_batch
    from groundhog_port.training.adadelta import SGDAdadelta

    exp = _open(case)
    batch = first_training_batch(exp.state, exp.path("source"), exp.path("target"))
    trainer = SGDAdadelta(exp.model, dict(exp.state))
    got = trainer.step(
        *(torch.as_tensor(a) for a in (batch.x, batch.x_mask, batch.y, batch.y_mask))
    )
    out: dict = {
        k: float(v).hex() for k, v in sorted(got.items()) if k not in ("time_step", "whole_time")
    }
    for name, param in zip(trainer.names, trainer.params):
        out[f"param/{name}"] = hashlib.sha256(param.detach().cpu().numpy().tobytes()).hexdigest()
    return out


@dataclass(frozen=True)
class Section:
    """One frozen section: how its outputs of one case are made, on which cases, and the batch
    sizes and thread counts that change the path computing them (each is checked against the
    one record made at batch 1, one thread)."""

    make: Callable[[Path, int], dict]
    batches: tuple[int, ...] = (1, 32)
    threads: tuple[int, ...] = (1, 2)
    cases: Callable[[], list[Path]] = cases
    #: where the suite checks it: ``test_frozen_outputs`` (every batch and thread count), or
    #: the test that already computes these outputs (``parity``: test_legacy_cases.py, at
    #: its one thread; a second parity run of every case would cost the suite ~65 s)
    checked_by: str = "test_frozen_outputs"


#: the frozen sections; ``batches`` is (1,) where the output has no batch-size setting (score
#: batches by the state's ``bs``; parity, the driver and training have none)
SECTIONS = {
    "search": Section(search_outputs),
    "samples": Section(sample_outputs),
    "score": Section(score_outputs, batches=(1,)),
    "parity": Section(
        parity_rows, batches=(1,), cases=parity_cases, checked_by="test_legacy_cases"
    ),
    "onnx": Section(onnx_outputs, batches=(1,)),
    "train": Section(train_update, batches=(1,)),
}


def record(sections: list[str]) -> dict:
    """The frozen file with ``sections`` recorded now (at one thread), the others as they
    were; ``made_at``: ``{section: commit}``."""
    import torch

    torch.set_num_threads(1)
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=REPO, check=False
    ).stdout.strip()
    old = json.loads(FROZEN.read_text(encoding="utf-8")) if FROZEN.is_file() else {}
    made = old.get("made_at", {})
    if isinstance(made, str):  # the first record: one commit for every section
        made = dict.fromkeys(SECTIONS, made)
    out = {"version": 1, "made_at": made}
    for name, sec in SECTIONS.items():
        if name in sections:
            out[name] = {case_name(c): sec.make(c, 1) for c in sec.cases()}
            made[name] = commit
        else:
            out[name] = old[name]
    return out


def differences(frozen: dict, section: str, got: dict, where: str) -> list[str]:
    """One line per output that differs from the record."""
    out = []
    for case, runs in frozen[section].items():
        for key, want in runs.items():
            have = got.get(case, {}).get(key)
            if have != want:
                out.append(f"{section} {case} {key} ({where}): {have!r:.200} != {want!r:.200}")
    return out


def check(sections: list[str]) -> list[str]:
    import torch

    frozen = json.loads(FROZEN.read_text(encoding="utf-8"))
    found = []
    for name, sec in SECTIONS.items():
        if name not in sections:
            continue
        for threads in sec.threads:
            torch.set_num_threads(threads)
            for batch in sec.batches:
                got = {case_name(c): sec.make(c, batch) for c in sec.cases()}
                found += differences(frozen, name, got, f"{threads} threads, batch {batch}")
    return found


def main(argv=None) -> int:
    import logging

    logging.disable(logging.WARNING)  # the searches' retries ("Still no translations") are expected
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=["record", "check"])
    ap.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help="the sections to record anew (the others kept) or to check (default: all of "
        "%(default)s)",
    )
    args = ap.parse_args(argv)
    sections = args.sections.split(",")
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        ap.error(f"unknown section(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}")
    sys.path.insert(0, str(REPO))
    if args.action == "record":
        FROZEN.parent.mkdir(parents=True, exist_ok=True)
        FROZEN.write_text(
            json.dumps(record(sections), indent=1, ensure_ascii=False) + "\n", "utf-8"
        )
        print(f"recorded {FROZEN}")
        return 0
    found = check(sections)
    for line in found:
        print(line)
    print(f"{len(found)} outputs differ from {FROZEN.relative_to(REPO)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
