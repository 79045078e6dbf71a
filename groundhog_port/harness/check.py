"""The equivalence harness: recompute what a trace holds and compare, quantity by quantity.

A trace (``trace.h5``, :mod:`groundhog_port.harness.trace`) records what GroundHog's compiled
Theano functions computed for a model and a set of test sentences.  :func:`check`
recomputes every recorded quantity with the PRODUCT -- the float32 functions ``translate``,
``score``, ``train`` and ``sample`` call, with their default options -- and returns a
:class:`~groundhog_port.harness.report.Report`: one :class:`~groundhog_port.harness.report.Row` per quantity with the product function compared
(``Row.product``), the number of values compared, the maximum absolute and relative error
of the product against the recording, the largest error / bound, the rule from
:data:`groundhog_port.harness.trace.TOLERANCES` and the worst element's location.  The float64
shadow and the float32 probe of the model only set the bounds
(:mod:`groundhog_port.harness.tolerance`).  ``groundhog-port parity`` prints it,
``parity_tests/parity/test_legacy_cases.py`` asserts it.

What is compared (groups, selectable with ``groups=``):

``repr``
    ``seq`` (== the source line parsed as sample.py does), annotations ``c`` and the initial
    decoder states, computed from the recorded ``seq``.
``pairs``
    ``src_ids``/``trg_ids`` (== score.py's txt-mode parsing, unknown words allowed), then
    ``word_probs``, ``alignment`` and ``score`` of the recorded ids.
``batch``
    ``x``, ``y``, masks of ``/batch`` and every ``/batch_all/{b}`` (== the batches
    score.py --mode=batch builds from the source/target files) and the batch scores of the
    recorded batches.
``steps``
    every instrumented search step fed with the RECORDED inputs (``k``, ``last_words``,
    ``states_in``; the previous step's recorded survivors and costs): ``last_words`` as the
    beam bookkeeping derives them, ``next_probs``, ``flat_next_costs``, the survivors
    compared as a set of (hypothesis prefix, word, cost) -- argpartition's order is numpy's
    and not compared --, ``states_gathered``, ``next_states`` (from the recorded word and
    gathered states); then the whole search re-run: finished hypotheses == and their costs.
``beam``
    ``Translator.search_seqs`` with each label's beam size / normalize / ignore_unk on every
    sentence, twice: the literal search (``--batch-size 1``: rows ``beam/{label}/...``) and
    translate's default batched search (rows ``beam/{label}/batched/...``): the finished
    lists ==, their costs and normalised costs as the product wrote them, the line it
    writes (``best_sentence``), and where the original crashed, the same error (the port
    raises :class:`~groundhog_port.search.common.SearchFailed` with the message minus the
    exception type).

``sampler``
    the random sampler (sample.py without ``--beam-search``): the MRG seed derived from the
    state, every MRG stream state (exact), ``Sampler.sample``'s own step count, drawn ids,
    sentences and stream after each call (exact), ``-log p`` and costs under the derived
    bound, and ``Sampler.sample_many`` at the default batch size
    (:mod:`groundhog_port.harness.groups.sampler`).

``train_step``
    one real ``SGDAdadelta.step`` (what ``train`` runs) from the recorded batch: the batch,
    cost, gradient norm, clipped gradients, accumulators and parameters after it
    (:mod:`groundhog_port.harness.groups.train_step`).

NOT COVERED rows say what a recording cannot discriminate
(:func:`groundhog_port.harness.groups.search._beam_coverage`: ``ignore_unk`` where no hypothesis of the plain run holds UNK, choosing by normalised cost
where it never changes the choice; a group the port cannot recompute, none today); they
never pass or fail and are never dropped.  The first two are expected (the recording does
not hold what the row needs: ``Row.recording_gap``; reported, exit 0); a recorded group the
port cannot recompute should be covered and makes ``groundhog-port parity`` exit 1 unless
``--allow-uncovered`` (one rule for the command and the pytest plugin: docs/exit-codes.md).

Each group is a :class:`~groundhog_port.harness.report.Group` in :data:`GROUP_TABLE` (its
module: :mod:`groundhog_port.harness.groups.scoring` for ``repr``/``pairs``/``batch``,
:mod:`groundhog_port.harness.groups.search` for ``steps``/``beam``, and the two above); the rows,
comparisons and the conventions of the figures are :mod:`groundhog_port.harness.report`'s.
Each sentence is computed from its recorded inputs, so one wrong quantity does not
cascade into the rows of the next.

Typical use::

    exp = open_experiment(state, model, data_dir=case_dir)
    with TraceFile(case_dir / "trace.h5") as tr:
        report = check(exp, tr, source=case_dir / "test.en", target=case_dir / "test.fr")
    print(report.table()); report.ok
    report = check_case(case_dir)        # the same for a folder laid out like the fixtures
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from .. import lookup
from ..errors import LegacyInputError
from .groups.sampler import SAMPLER
from .groups.scoring import BATCH, PAIRS, REPR
from .groups.search import BEAM, STEPS
from .groups.train_step import TRAIN_STEP
from .names import GROUP_NAMES
from .report import Context, Report, Rows
from .trace import Tolerance, TraceFile

if TYPE_CHECKING:
    from ..legacy.experiment import Experiment
    from ..outputs import Progress

logger = logging.getLogger(__name__)

#: the groups :func:`check` compares, by name, in report order
GROUP_TABLE = {g.name: g for g in (REPR, PAIRS, BATCH, STEPS, SAMPLER, TRAIN_STEP, BEAM)}
GROUPS = tuple(GROUP_TABLE)
if GROUPS != GROUP_NAMES:  # the names --help shows without torch (names.py)
    raise ImportError(f"harness.names.GROUP_NAMES {GROUP_NAMES} != the groups {GROUPS}")
#: recorded groups the port cannot recompute yet (reported as NOT COVERED rows): none today
NOT_COVERED: dict[str, str] = {}


def _not_covered(tr: TraceFile, rows: Rows):
    for group, why in NOT_COVERED.items():
        if tr.has(group):
            row = rows.get(group, group, tol=Tolerance("n/a"))
            row.covered = False
            row.notes.append(why)


def count_work(
    tr: TraceFile, groups: Sequence[str], beam_labels: Sequence[str] | None = None
) -> int:
    """Progress units of :func:`check`: one per sentence / batch / instrumented search /
    (label, sentence)."""
    return sum(g.work(tr, beam_labels) for name, g in GROUP_TABLE.items() if name in groups)


def check(
    exp: Experiment,
    trace: TraceFile,
    *,
    groups: Sequence[str] = GROUPS,
    beam_labels: Sequence[str] | None = None,
    source: str | os.PathLike[str] | None = None,
    target: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
) -> Report:
    """Recompute what ``trace`` holds with ``exp`` (:class:`~groundhog_port.legacy.experiment.Experiment`).

    ``groups``: a subset of :data:`GROUPS`; a group the trace does not hold is left out.
    ``beam_labels``: restrict ``/beam`` to these labels (default: all in the trace).
    ``source``/``target``: the test text files (``test.en``/``test.fr``); without them the
    lines recorded in ``/pairs`` are used where possible, and the batch checks need them.
    ``progress``: an object with ``update(n)`` (:class:`~groundhog_port.outputs.Progress`).
    Raises :class:`LegacyInputError` for an unreadable or inconsistent trace or input file.
    """
    groups = tuple(groups)
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        raise LegacyInputError(
            None, f"unknown parity group(s) {', '.join(unknown)} (known: {', '.join(GROUPS)})"
        )
    ctx = Context(exp, trace, source, target, progress, beam_labels)
    rows = Rows()
    seconds: dict[str, float] = {}
    with torch.no_grad():
        for name, group in GROUP_TABLE.items():
            if name not in groups or not group.present(trace):
                continue
            t0 = time.perf_counter()
            group.run(ctx, rows)
            seconds[name] = time.perf_counter() - t0
    rows.finish()
    _not_covered(trace, rows)
    return Report(
        list(rows.rows.values()),
        trace=str(trace.path),
        case=trace.attrs.get("case"),
        seconds=seconds,
    )


# --------------------------------------------------------------------------------------
# Case folders
# --------------------------------------------------------------------------------------
@dataclass
class CaseFiles:
    """The files of a case folder (laid out like ``shared/legacy_traces/<case>``)."""

    dir: Path
    state: Path
    model: Path
    trace: Path
    source: Path | None
    target: Path | None

    @property
    def name(self) -> str:
        return self.dir.name


def find_case(
    case_dir: str | os.PathLike[str],
    state: str | os.PathLike[str] | None = None,
    model: str | os.PathLike[str] | None = None,
    trace: str | os.PathLike[str] | None = None,
    source: str | os.PathLike[str] | None = None,
    target: str | os.PathLike[str] | None = None,
    data_dirs: Sequence[Path] = (),
) -> CaseFiles:
    """Locate ``*_state.pkl``, the matching ``*_model.npz``, ``trace.h5`` in ``case_dir`` and
    the test files (named by the trace's ``test_src_file``/``test_trg_file`` attributes,
    default ``test.en``/``test.fr``) there or in ``data_dirs`` (:func:`groundhog_port.lookup.
    find_named`); explicit paths override what is found."""
    d = Path(case_dir)
    if not d.is_dir():
        raise LegacyInputError(d, "case directory not found")
    if state is None:
        found = sorted(d.glob("*state.pkl"))
        if len(found) != 1:
            raise LegacyInputError(
                d,
                f"expected one *_state.pkl in the case directory, found "
                f"{len(found)}"
                + (f" ({', '.join(p.name for p in found)}); pass --state" if found else ""),
            )
        state = found[0]
    state = Path(state)
    if model is None:
        prefix = state.name[: -len("state.pkl")] if state.name.endswith("state.pkl") else None
        cand = d / f"{prefix}model.npz" if prefix is not None else None
        if cand is None or not cand.is_file():
            found = sorted(p for p in d.glob("*model.npz"))
            if len(found) != 1:
                raise LegacyInputError(
                    d,
                    f"expected {cand.name if cand else '*_model.npz'} in the case "
                    "directory; pass --model",
                )
            cand = found[0]
        model = cand
    trace = Path(trace) if trace is not None else d / "trace.h5"
    if not trace.is_file():
        raise LegacyInputError(trace, "trace file not found")
    if source is None or target is None:
        src_name, trg_name = _test_file_names(trace)
        if source is None:
            source = lookup.find_named(src_name, d, data_dirs) or _by_content(
                trace, "src_line", d, data_dirs
            )
        if target is None:
            target = lookup.find_named(trg_name, d, data_dirs) or _by_content(
                trace, "trg_line", d, data_dirs
            )
    return CaseFiles(
        d,
        state,
        Path(model),
        trace,
        None if source is None else Path(source),
        None if target is None else Path(target),
    )


def _by_content(trace_path, side, case_dir, data_dirs):
    """The test file whose lines the trace's ``pairs/{i}`` recorded as ``side`` (``src_line``
    / ``trg_line``), found by content (:func:`groundhog_port.lookup.find_source`: as
    many lines as the trace's sentences, the first ones equal); ``None`` when the trace holds
    no pairs or no file matches (the groups needing it then say so)."""
    from ..legacy.data import first_text_lines

    with TraceFile(trace_path) as tr:
        if not tr.has("pairs"):
            return None
        indices = tr.pair_indices()
        recorded = {i: tr.pairs(i)[side] for i in indices[: lookup.CONFIRM_LINES]}
    if not indices or indices[: len(recorded)] != list(range(len(recorded))):
        return None
    first = [str(recorded[i]) for i in range(len(recorded))]

    def confirm(path):
        try:
            got = first_text_lines(path, len(first))
        except LegacyInputError as err:
            return err.problem
        for i, (a, b) in enumerate(zip(first, got + [None] * len(first))):
            if a != b:
                return f"line {i + 1} is {b!r}, the trace recorded {a!r}"
        return None

    what = "the trace's test " + ("sources" if side == "src_line" else "targets")
    try:
        choice = lookup.find_source(
            max(indices) + 1,
            confirm,
            lookup.case_places(case_dir, data_dirs),
            case_dir,
            what,
            "as recorded",
            ("", ""),
            fix="; pass --source FILE --target FILE, or --data-dir DIR (the folder holding it)",
        )
    except LegacyInputError as err:
        logger.warning("%s", err.problem)
        return None
    logger.info("%s: %s", what, choice.why.split(", reference")[0])
    return choice.source


def _test_file_names(trace_path):
    """The trace's ``test_src_file``/``test_trg_file``: names relative to the case folder;
    an absolute name or one climbing out (``..``) is refused, never joined."""
    with TraceFile(trace_path) as tr:
        names = (
            str(tr.attrs.get("test_src_file") or "test.en"),
            str(tr.attrs.get("test_trg_file") or "test.fr"),
        )
    for key, name in zip(("test_src_file", "test_trg_file"), names):
        if Path(name).is_absolute() or ".." in Path(name).parts or "\0" in name:
            raise LegacyInputError(
                trace_path,
                f"attribute {key} = {name[:200]!r}: not a name inside the case folder "
                "(absolute or climbing out with '..'): refused, nothing read there",
            )
    return names


def test_files_near(trace_path: str | os.PathLike[str]) -> tuple[Path | None, Path | None]:
    """``(source, target)`` next to a trace, as its ``test_src_file``/``test_trg_file`` attributes
    name them (None where absent)."""
    d = Path(trace_path).parent
    src, trg = _test_file_names(trace_path)
    return ((d / src) if (d / src).is_file() else None, (d / trg) if (d / trg).is_file() else None)


def check_case(
    case_dir: str | os.PathLike[str],
    *,
    groups: Sequence[str] = GROUPS,
    beam_labels: Sequence[str] | None = None,
    device: str = "cpu",
    progress: Progress | None = None,
    changes: str | list[str] | None = "",
) -> Report:
    """:func:`check` on a case folder (:func:`find_case`); vocabularies are looked up there."""
    from ..legacy.loading import open_experiment

    dirs = lookup.case_data_dirs(case_dir)
    files = find_case(case_dir, data_dirs=dirs)
    exp = open_experiment(files.state, files.model, changes, data_dir=dirs, device=device)
    exp.data_dirs = tuple(exp.data_dirs) + lookup.near_case_dirs(exp.state, case_dir)
    with TraceFile(files.trace) as tr:
        report = check(
            exp,
            tr,
            groups=groups,
            beam_labels=beam_labels,
            source=files.source,
            target=files.target,
            progress=progress,
        )
    report.case = report.case or files.name
    return report
