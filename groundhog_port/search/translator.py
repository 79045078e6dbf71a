"""Translating a file as ``sample.py --beam-search --source F --trans F`` did (sample.py:249-281).

Per source line: ``parse_input`` (source vocabulary, ``null_sym_source`` appended),
beam search with ``minlen = len(seq) // 2``, the hypothesis with the lowest (raw or
length-normalised) cost written as words up to ``<eol>``, and ``total_cost`` summed
in line order.  Where the original crashed (a sentence it could not translate), the
port logs the original's message with the line number, writes an empty line and
goes on: :attr:`TranslationRun.failed` lists those lines.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..legacy.experiment import Experiment
from ..legacy.vocab import render_translation
from ..outputs import Journal, atomic_output
from . import defaults
from .common import SearchFailed
from .literal import BeamSearch, Hypotheses, normalized, sample

if TYPE_CHECKING:
    from .batched import BatchedBeamSearch

logger = logging.getLogger(__name__)


@dataclass
class Translation:
    """One source line's outcome: every finished hypothesis (raw-cost order) or an error."""

    line: str = ""  # the chosen translation, words joined by spaces
    cost: float | None = None  # its (normalised) cost; None when the search failed
    error: str | None = None  # the original's error message when it failed
    nbest: list[tuple[str, float]] = field(default_factory=list)  # in sample() order

    def record(self) -> str:
        return json.dumps({"cost": self.cost, "error": self.error, "nbest": self.nbest})

    @classmethod
    def from_record(cls, line: str, record: str) -> Translation:
        d = json.loads(record)
        return cls(line, d["cost"], d["error"], [tuple(x) for x in d["nbest"]])


def choose(hyps: Hypotheses, idx2word: dict[int, str]) -> Translation:
    """``best = numpy.argmin(costs)`` (sample.py:269: the first minimum)."""
    best = int(np.argmin(hyps.costs))
    sentences = [render_translation(idx2word, t) for t in hyps.trans]
    nbest = [(s, float(c)) for s, c in zip(sentences, hyps.costs)]
    return Translation(sentences[best], float(hyps.costs[best]), None, nbest)


def render(
    result: Hypotheses | SearchFailed, idx2word: dict[int, str], normalize: bool = False
) -> Translation:
    """The :class:`Translation` of one search result; ``normalize``: apply ``--normalize``
    to a search made without it (the search is the same: sample.py's flag only rescales
    the finished list's costs, sample.py:153-155)."""
    if isinstance(result, SearchFailed):
        return Translation("", None, str(result))
    return choose(normalized(result) if normalize else result, idx2word)


class SearchWarnings(logging.Filter):
    """Names the source line in the beam search's log records.

    The search logs sample.py's messages as it printed them ("Still no translations: try
    beam size 20", sample.py:126), which name no sentence.  While installed on the search
    loggers this filter prefixes them with ``SOURCE, line N``; with ``summarise`` it holds
    the warnings back instead and :meth:`summary` gives them in one line (``reproduce``
    meets dozens of them on one file).
    """

    LOGGERS = ("groundhog_port.search.literal", "groundhog_port.search.batched")

    def __init__(self, source: object = None, summarise: bool = False) -> None:
        super().__init__()
        self.source, self.summarise = source, summarise
        self.first_line = 1  # line number of sentence 0 of the current batch of sentences
        self.current = 0  # the literal search's sentence (the batched one says it)
        self.held: dict[int, list[str]] = {}  # line number -> [messages], in order

    def filter(self, record: logging.LogRecord) -> bool:
        line = self.first_line + getattr(record, "sentence", self.current)
        message = record.getMessage()
        if self.summarise and record.levelno == logging.WARNING:
            self.held.setdefault(line, []).append(message)
            return False
        where = f"{self.source}, line {line}" if self.source else f"line {line}"
        record.msg, record.args = f"{where}: {message}", None
        return True

    def __enter__(self) -> SearchWarnings:
        for name in self.LOGGERS:
            logging.getLogger(name).addFilter(self)
        return self

    def __exit__(self, *exc: object) -> None:
        for name in self.LOGGERS:
            logging.getLogger(name).removeFilter(self)

    def summary(self, max_lines: int = 10) -> str | None:
        """The held warnings in one line (``None`` if there were none): per source line,
        how many and the first and last (sample.py's beam-size retries run 20, 40, 80...)."""
        if not self.held:
            return None
        parts = []
        for line, messages in list(self.held.items())[:max_lines]:
            span = (
                repr(messages[0])
                if len(messages) == 1
                else f"{len(messages)}: {messages[0]!r} ... {messages[-1]!r}"
            )
            parts.append(f"line {line} ({span})")
        more = (
            f", and {len(self.held) - max_lines} more lines" if len(self.held) > max_lines else ""
        )
        where = f"{self.source}: " if self.source else ""
        return (
            f"{where}the search's warnings (sample.py's) on {len(self.held)} sentence(s): "
            + ", ".join(parts)
            + more
        )


#: sentences decoded together by default: :mod:`.defaults` (read by ``--help`` without torch)
DEFAULT_BATCH_SIZE = defaults.DEFAULT_BATCH_SIZE


class Translator:
    """Beam search over many source lines: literal (``batch_size=1``) or batched.

    ``Translator(exp, beam_size=10).translate_lines(lines)`` is ``sample.py --beam-search
    --beam-size 10`` on ``lines`` (``ignore_unk`` / ``normalize``: its ``--ignore-unk`` /
    ``--normalize``); every ``batch_size`` gives the same translations.

    ``warnings``: an optional :class:`SearchWarnings` that names the line in the search's
    messages (``translate_seqs(..., first_line=N)`` says which line the first sentence is).
    """

    def __init__(
        self,
        experiment: Experiment,
        beam_size: int,
        *,
        ignore_unk: bool = False,
        normalize: bool = False,
        batch_size: int = 1,
        warnings: SearchWarnings | None = None,
    ) -> None:
        self.exp = experiment
        self.beam_size, self.ignore_unk, self.normalize = beam_size, ignore_unk, normalize
        self.batch_size = batch_size
        self.warnings = warnings
        self.literal = BeamSearch(experiment.model)
        self.batched: BatchedBeamSearch | None = None
        if batch_size > 1:
            from .batched import BatchedBeamSearch

            self.batched = BatchedBeamSearch(experiment.model, batch_size=batch_size)

    def translate_lines(self, lines: Sequence[str], first_line: int = 1) -> list[Translation]:
        """:class:`Translation` of each source line (text, as in ``--source``), in order:
        ``parse_input`` then the beam search, as sample.py:264-270."""
        return self.translate_seqs([self.exp.parse_source(line)[0] for line in lines], first_line)

    def translate_seqs(
        self, seqs: Sequence[Sequence[int] | np.ndarray], first_line: int = 1
    ) -> list[Translation]:
        """Translations of parsed sources, in order; ``seqs[0]`` is line ``first_line``."""
        if self.warnings is None:
            return self._translate_seqs(seqs)
        self.warnings.first_line = first_line
        with self.warnings:
            return self._translate_seqs(seqs)

    def _translate_seqs(self, seqs: Sequence[Sequence[int] | np.ndarray]) -> list[Translation]:
        return [render(r, self.exp.trg_idx2word) for r in self.search_seqs(seqs)]

    def searches(
        self, seqs: Sequence[Sequence[int] | np.ndarray], first_line: int = 1
    ) -> list[Hypotheses | SearchFailed]:
        """:meth:`search_seqs` with the search's messages naming the line (as
        :meth:`translate_seqs`)."""
        if self.warnings is None:
            return self.search_seqs(seqs)
        self.warnings.first_line = first_line
        with self.warnings:
            return self.search_seqs(seqs)

    def search_seqs(
        self, seqs: Sequence[Sequence[int] | np.ndarray]
    ) -> list[Hypotheses | SearchFailed]:
        """``sample()`` on every parsed source, in order: :class:`Hypotheses` (costs
        normalised with ``normalize``) or the :class:`SearchFailed` of a sentence the original
        could not translate (what :meth:`translate_seqs` renders; ``groundhog-port parity``
        compares it with the recordings)."""
        if self.batched is None:
            results: list[Hypotheses | SearchFailed] = []
            for i, seq in enumerate(seqs):
                if self.warnings is not None:
                    self.warnings.current = i
                try:
                    results.append(
                        sample(self.literal, seq, self.beam_size, self.ignore_unk, self.normalize)
                    )
                except SearchFailed as err:
                    results.append(err)
        else:
            results = self.batched.sample_many(
                seqs, self.beam_size, self.ignore_unk, self.normalize
            )
        return results


def total_cost(translations: Sequence[Translation]) -> float:
    """``total_cost += costs[best]`` in line order (sample.py:273), failures skipped."""
    total = 0.0
    for t in translations:
        if t.cost is not None:
            total += t.cost
    return total


def write_nbest(path: str | os.PathLike[str], translations: Sequence[Translation]) -> None:
    """Moses n-best format: ``i ||| hypothesis ||| cost= C ||| -C`` (higher score is better)."""
    with atomic_output(path) as f:  # complete or absent; OutputError when it cannot be written
        for i, t in enumerate(translations):
            for sentence, cost in t.nbest:
                f.write(f"{i} ||| {sentence} ||| cost= {cost!r} ||| {-cost!r}\n")


def write_nbest_then_commit(
    path: str | os.PathLike[str] | None, results: Sequence[Translation], journal: Journal
) -> None:
    """``--n-best`` before the translations are committed: if it cannot be written, the
    journal keeps every translation and ``--resume`` redoes only the n-best list (the
    caller leaves the journal unfinished on any exception)."""
    from ..outputs import OutputError

    if path:
        try:
            write_nbest(path, results)
        except OutputError as err:
            if journal.partial is None:  # streamed: the translations are already out
                raise OutputError(
                    err.path,
                    f"{err.problem}; the translations were written to {journal.target.given}",
                ) from None
            raise OutputError(
                err.path,
                f"{err.problem}; the translations are kept in "
                f"{journal.partial} (and its journal): rerun with --resume "
                "once it can be written",
            ) from None
    journal.commit()


def report_failures(results: Sequence[Translation], note: str = "") -> bool:
    """Log the lines where the original sample.py crashed (one line, ending with ``note``);
    True when there are any."""
    failed = [i + 1 for i, t in enumerate(results) if t.error is not None]
    if failed:
        logger.error("%s", crashed_lines(failed, "sentence(s) could not be translated", note))
    return bool(failed)


def crashed_lines(failed: Sequence[int], what: str, note: str = "") -> str:
    """The summary of the source lines ``failed`` (1-based) where the original crashed:
    ``"2 sentence(s) could not be translated (lines 4, 9): the original would have crashed
    at the first"`` (``what``), then ``note``."""
    return (
        f"{len(failed)} {what} (lines {', '.join(map(str, failed))}): "
        f"the original would have crashed at the first{note}"
    )
