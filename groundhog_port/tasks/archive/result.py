"""The result of one experiment as ``archive`` builds it: a :class:`ResultRecord` (JSON in
the end), the one definition the cache checks an entry against before it is used
(:func:`groundhog_port.tasks.archive.records.problem`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, TypedDict, TypeVar

from ... import contained
from ...errors import LegacyInputError
from .context import Run

if TYPE_CHECKING:
    from .context import ExperimentEntry

_T = TypeVar("_T")

logger = logging.getLogger("groundhog_port.tasks.archive")


# ----------------------------------------------------------------------------------------
# the record (records.py: ``float`` is a number or "nan"/"inf"/"-inf"; total=False: keys
# that may be absent)
# ----------------------------------------------------------------------------------------
class Settings(TypedDict):
    beam_size: int
    normalize: bool
    ignore_unk: bool


class Bleu(TypedDict):
    sacrebleu: float
    signature: str
    multi_bleu: float
    multi_bleu_text: str


class Bleus(TypedDict):
    archived_vs_reference: Bleu | None
    reproduced_vs_reference: Bleu | None
    archived_vs_reproduced: Bleu | None


class _TransDiff(TypedDict):
    line: int
    source: str
    archived: str | None
    reproduced: str | None


class TransDiff(_TransDiff, total=False):
    port_error: str


class SnapshotRow(TypedDict):
    model: str
    status: str


class _Reproduction(TypedDict):
    file: str
    settings: Settings
    compared: int
    identical: int
    all_identical: bool
    first_differences: list[TransDiff]
    bleu: Bleus
    total_cost: float
    archived_total_cost: float | None
    original_stopped_after: int | None
    source: str
    reference: str | None
    crash_reproduced: bool | None
    original_error: str | None


class Reproduction(_Reproduction, total=False):
    """One translation output re-done (:func:`groundhog_port.tasks.reproduce.reproduce`)."""

    limited: str
    crash_not_rechecked: str
    settings_why: str
    snapshot: str
    snapshots: list[SnapshotRow]
    status: str


class ScoreDiff(TypedDict):
    line: int
    archived: str | None
    reproduced: str | None


class _Scores(TypedDict):
    file: str
    how: str
    compared: int
    archived_lines: int
    identical: int
    all_identical: bool
    beyond_last_digit: int
    max_rel_diff: float
    first_differences: list[ScoreDiff]


class Scores(_Scores, total=False):
    """One score.py output re-scored (:mod:`.checks`)."""

    within_print_noise: bool | None


class TestSet(TypedDict):
    source: str | None
    reference: str | None
    how: str


class Files(TypedDict, total=False):
    """The vocabularies (``groundhog_port.file_names.VOCABULARY_FILE_KEYS``) and test sets."""

    word_indx: str | None
    indx_word: str | None
    word_indx_trgt: str | None
    indx_word_target: str | None
    test: TestSet
    holdout: TestSet


class CrashLog(TypedDict):
    file: str
    last_line: str | None
    trans: str | None
    status: str


class ParityRow(TypedDict):
    quantity: str
    n: int
    max_abs: float | None
    max_rel: float | None
    tolerance: str
    status: str


class Parity(TypedDict):
    trace: str
    groups: list[str]
    ok: bool
    rows: list[ParityRow]


class Plot(TypedDict):
    sentence: int
    file: str


class NotDone(TypedDict):
    what: str
    why: str


class _ResultRecord(TypedDict):
    id: str
    folder: str
    state: str
    model: str | None
    files: Files
    reproduction: list[Reproduction]
    scores: list[Scores]
    crash_logs: list[CrashLog]
    parity: Parity | None
    plots: list[Plot]
    notes: list[str]
    not_done: list[NotDone]


class ResultRecord(_ResultRecord, total=False):
    """One experiment's result: what the report renders and the cache keeps."""

    origin: str
    not_outputs: list[str]


class Result:
    """The result of one experiment under construction (a JSON-able dict in the end)."""

    def __init__(self, run: Run, entry: ExperimentEntry) -> None:
        self.run = run
        self.data: ResultRecord = {
            "id": entry.id,
            "folder": self.rel(entry.folder),
            "state": self.rel(entry.state),
            "model": self.rel(entry.model) if entry.model else None,
            "files": {},
            "reproduction": [],
            "scores": [],
            "crash_logs": [],
            "parity": None,
            "plots": [],
            "notes": [],
            "not_done": [],
        }
        self._causes: dict = {}
        self.missing: dict = {}  # test set name -> why a score file's test set was not found

    def rel(self, path: str | os.PathLike[str]) -> str:
        return self.run.rel(path)

    def not_done(self, what: str, why: str, cause: Hashable | None = None) -> None:
        """Record ``what`` as not done.  One cause, one entry: the same ``why`` (or the same
        ``cause``, for reasons worded per file) given again adds its ``what`` to the first."""
        why = self.run.said(why)
        for entry in self.data["not_done"]:
            if entry["why"] == why or (cause is not None and self._causes.get(id(entry)) == cause):
                entry["what"] += f", {what}"
                return
        entry = {"what": what, "why": why}
        self._causes[id(entry)] = cause
        self.data["not_done"].append(entry)

    def flush(self) -> None:
        """One warning per cause (``why``) of this experiment."""
        for entry in self.data["not_done"]:
            logger.warning("%s: not done: %s: %s", self.data["id"], entry["what"], entry["why"])


def attempt(res: Result, what: str, fn: Callable[..., _T], *args: object) -> _T | None:
    """``fn(*args)``; a failure is recorded as "not done" with its reason (one experiment's
    problem never stops the archive).  Running out of memory is not such a failure: the
    worker's limit was reached (:func:`groundhog_port.tasks.archive.pipeline.redo_contained`
    names it), and the experiment stops."""
    contained.stage(what)
    try:
        return fn(*args)
    except LegacyInputError as err:
        res.not_done(what, str(err))
    except Exception as err:  # noqa: BLE001 -- an archive holds anything; report, go on
        if contained.out_of_memory(err):
            raise MemoryError(" ".join(str(err).split())[:200]) from err
        res.not_done(what, f"{type(err).__name__}: {' '.join(str(err).split())[:300]}")
    return None
