"""What the server computes: source parsing, batched beam search, the chosen translation
and its attention, all on one model.

Parsing is ``parse_input`` of sample.py:264 on the Moses-tokenized sentence; the search
is :class:`~groundhog_port.search.batched.BatchedBeamSearch` (``sample()`` with
``minlen = len(seq) // 2``), which returns for every sentence exactly what the literal
sample.py loop returns, whatever else is in the batch -- so a translation does not
depend on which requests it was decoded with, and equals ``groundhog-port translate``'s.
The attention matrix shown is the one of the chosen translation, teacher-forced through
the model (``create_probs_computer(return_alignment=True)``, as score.py and the paper's
Figure 3 obtain it).

Only the decoding thread (:mod:`.batcher`) calls :meth:`Engine.decode`; parsing and
formatting run in the request threads.
"""

import logging
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import SupportsFloat

import numpy as np

from ..legacy.experiment import Experiment
from ..legacy.vocab import render_translation, split_words
from ..search.batched import BatchedBeamSearch
from ..search.common import SearchFailed, length_normalized
from ..search.scoring import score_pair
from . import legacy_api
from .text import MosesText


class RequestError(Exception):
    """A request the server refuses: ``status`` (4xx/5xx) and a one-line message."""

    def __init__(self, status: int, message: str | Exception) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Limits:
    """Bounds on what one request may ask (checked before any decoding).

    ``max_steps``: the request's budget in hypothesis-steps (one hypothesis expanded by one
    decoder step).  Its first attempt at beam ``N`` on a source of ``L`` ids (EOS counted)
    expands at most ``N`` hypotheses for at most ``3 L`` steps (sample.py:60), so a request
    whose sum of ``N * 3 L`` exceeds the budget is refused before decoding; the default is
    that bound for the largest request the other defaults allow (32 sentences of 100 tokens
    + EOS at beam 50: 484,800), so every request within them is accepted.  sample.py's
    retries (the beam doubled up to 500 when nothing finished) are what the budget then
    cuts: decoding counts what each request really expands and ends its sentences past the
    budget with an error."""

    max_beam: int = 50
    max_sentences: int = 32
    max_tokens: int = 100
    max_chars: int = 2000
    max_body: int = 65536
    max_steps: int = 32 * 50 * 3 * 101


class Budget:
    """Hypothesis-steps one request may spend (shared by its sentences; decoding thread)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.spent = limit, 0

    def spend(self, rows: int) -> str | None:
        """Count ``rows`` hypotheses about to be expanded; a message once over the limit."""
        self.spent += rows
        if self.spent > self.limit:
            return (
                f"over this request's budget of {self.limit} hypothesis-steps (beam "
                "retries); ask for fewer sentences or a smaller beam"
            )
        return None


def estimated_steps(jobs: Iterable["Job"]) -> int:
    """The hypothesis-steps of the jobs' first attempts at most: ``sum(N * 3 L)``."""
    return sum(j.beam_size * 3 * len(j.source.seq) for j in jobs)


@dataclass
class Source:
    """One source sentence ready to decode."""

    text: str  # as received
    tokens: list[str]  # the words parse_input sees (tokenized unless pre-tokenized)
    seq: np.ndarray  # ids, end-of-sequence appended
    parsed: str | list[str]  # parse_input's second value ('... <eos>')


@dataclass
class Job:
    """One sentence to decode with its settings; ``best`` picks the hypothesis shown."""

    source: Source
    beam_size: int
    ignore_unk: bool = False
    normalize: bool = False
    legacy: bool = False  # the demo's choice: trans[0] (see legacy_api)
    attention: bool = False
    outcome: "Outcome | None" = None  # set by Engine.decode
    extra: dict[str, object] = field(default_factory=dict)
    budget: Budget | None = None  # the request's, shared by its jobs
    abandoned: bool = False  # the client gave up or left: stop decoding it

    @property
    def cost(self) -> int:
        """Work used to order and group jobs: beam x source length (hypothesis-steps up to
        the factor of the steps actually run)."""
        return self.beam_size * len(self.source.seq)


@dataclass
class Outcome:
    """A decoded sentence: every finished hypothesis (sample() order) and the chosen one."""

    sentences: list[str] | None = None  # hypotheses as text, raw-cost order
    raw_costs: list[float] | None = None
    costs: list[float] | None = None  # raw, or divided by the lengths (EOS counted) with normalize
    best: int | None = None
    trans: list[int] | None = None  # word ids of the chosen hypothesis, EOS included
    attention: np.ndarray | None = None  # (T, S) of the chosen hypothesis, or None
    error: str | None = None  # sample.py's message where it fails

    @property
    def translation(self) -> str:
        """The chosen hypothesis as text (``""`` where sample.py fails)."""
        if self.error:
            return ""
        assert self.sentences is not None and self.best is not None  # set with no error
        return self.sentences[self.best]


class Engine:
    """A loaded :class:`~groundhog_port.legacy.experiment.Experiment` served with fixed settings."""

    def __init__(
        self,
        experiment: Experiment,
        beam_size: int = 10,
        limits: Limits | None = None,
        pretokenized: bool = False,
        source_lang: str = "en",
        target_lang: str = "fr",
        batch_size: int = 32,
    ) -> None:
        self.exp = experiment
        self.beam_size = beam_size
        self.limits = limits or Limits()
        self.pretokenized = pretokenized
        self.text = MosesText(source_lang, target_lang)
        self.search = BatchedBeamSearch(experiment.model, batch_size=batch_size)
        self.has_attention = bool(experiment.cfg.search)
        # load the vocabularies now: a missing file is a start-up error, not a request's
        experiment.src_word2idx, experiment.src_idx2word, experiment.trg_idx2word  # noqa: B018

    def warm_up(self) -> None:
        """Decode one empty sentence, so that the first request does not pay for first-call
        set-up (allocations, kernel selection)."""
        quiet = logging.getLogger("groundhog_port.search.batched")
        was, quiet.disabled = quiet.disabled, True  # its retries of "" are expected
        try:
            self.decode([Job(self.prepare(""), 1)])
        finally:
            quiet.disabled = was

    # -- request threads ------------------------------------------------------------------
    def check_beam(self, beam_size: object) -> int:
        """``beam_size`` (as a request gave it) if it is a beam size within the limits, else
        a :class:`RequestError`."""
        if isinstance(beam_size, bool) or not isinstance(beam_size, int):
            raise RequestError(400, f"beam size must be an integer, got {beam_size!r}")
        if not 1 <= beam_size <= self.limits.max_beam:
            raise RequestError(400, f"beam size {beam_size} outside 1..{self.limits.max_beam}")
        return beam_size

    def prepare(self, text: object, pretokenized: bool | None = None) -> Source:
        """:class:`Source` of one sentence, or a :class:`RequestError` over the limits."""
        if not isinstance(text, str):
            raise RequestError(400, f"a sentence must be a string, got {type(text).__name__}")
        if len(text) > self.limits.max_chars:
            raise RequestError(
                413, f"sentence of {len(text)} characters; at most {self.limits.max_chars}"
            )
        pre = self.pretokenized if pretokenized is None else pretokenized
        tokens = split_words(text) if pre else self.text.tokenize(text)
        line = " ".join(tokens)
        tokens = split_words(line)  # what parse_input splits (ASCII whitespace)
        if len(tokens) > self.limits.max_tokens:
            raise RequestError(
                413, f"sentence of {len(tokens)} tokens; at most {self.limits.max_tokens}"
            )
        seq, parsed = self.exp.parse_source(line)
        return Source(text, tokens, seq, parsed)

    def unknown(self, source: Source) -> list[tuple[int, str]]:
        """``[(position, word)]`` of the tokens that became the state's ``unk_sym_source``."""
        unk = self.exp.state["unk_sym_source"]
        return [
            (i, w) for i, (w, idx) in enumerate(zip(source.tokens, source.seq)) if int(idx) == unk
        ]

    def legacy_answer(self, job: Job) -> str:
        """The demo's answer body for a decoded legacy job (sample_server.py:84-93)."""
        o = job.outcome
        assert o is not None  # decoded
        return legacy_api.answer(
            self.text.detokenize_legacy(o.translation),
            legacy_api.unknown_words(job.source.tokens, job.source.seq),
        )

    # -- decoding thread ------------------------------------------------------------------
    def decode(self, jobs: Sequence[Job], stop: Callable[[], None] | None = None) -> None:
        """Decode ``jobs`` (one ``ignore_unk`` value) together; sets each ``job.outcome``.

        Before every step of every sentence: a job whose client left is ended, its
        request's :class:`Budget` is charged (and the job ended past it), and ``stop()``
        (optional) may raise to end the whole call between two steps (shutdown)."""
        if not jobs:
            return
        ignore_unk = jobs[0].ignore_unk
        assert all(j.ignore_unk == ignore_unk for j in jobs)

        def watch(i: int, rows: int) -> str | None:
            if stop is not None:
                stop()
            job = jobs[i]
            if job.abandoned:
                return "abandoned: the client gave up or left"
            return job.budget.spend(rows) if job.budget is not None else None

        results = self.search.sample_many(
            [j.source.seq for j in jobs],
            [j.beam_size for j in jobs],
            ignore_unk,
            normalize=False,
            watch=watch,
        )
        i2w = self.exp.trg_idx2word
        for job, hyps in zip(jobs, results):
            if isinstance(hyps, SearchFailed):
                job.outcome = Outcome(error=str(hyps))
                continue
            raw = np.asarray(hyps.costs, dtype=np.float64)
            costs = raw
            if job.normalize:  # sample.py:153-155
                costs = length_normalized(raw, hyps.trans)
            # the demo shows trans[0]; translate picks numpy.argmin (sample.py:269)
            best = 0 if job.legacy else int(np.argmin(costs))
            trans = list(hyps.trans[best])
            o = Outcome(
                [render_translation(i2w, t) for t in hyps.trans],
                raw.tolist(),
                costs.tolist(),
                best,
                trans,
            )
            if job.attention and self.has_attention:
                a = score_pair(self.exp.model, job.source.seq, trans).alignment
                assert a is not None  # has_attention: the model aligns
                o.attention = a[:, :, 0].numpy()
            job.outcome = o

    # -- formatting -----------------------------------------------------------------------
    def result_json(self, job: Job, n_best: int | None = None) -> dict[str, object]:
        """One entry of the JSON API's ``results``."""
        src, o = job.source, job.outcome
        assert o is not None  # decoded
        unknown = self.unknown(src)
        out: dict[str, object] = {
            "source": src.text,
            "tokens": src.tokens,
            "unknown_words": [w for _, w in unknown],
            "unknown_positions": [i for i, _ in unknown],
            "error": o.error,
        }
        if o.error:
            out.update(translation="", detokenized="", cost=None, nbest=[], attention=None)
            return out
        # set by Engine.decode wherever there is no error
        assert o.sentences is not None and o.costs is not None and o.raw_costs is not None
        assert o.best is not None and o.trans is not None
        nbest = [
            {"translation": s, "cost": _num(c), "raw_cost": _num(r), "best": i == o.best}
            for i, (s, c, r) in enumerate(zip(o.sentences, o.costs, o.raw_costs))
        ]
        if n_best is not None:
            nbest = nbest[:n_best]
        out.update(
            translation=o.translation,
            detokenized=self.text.detokenize(o.translation),
            cost=_num(o.costs[o.best]),
            nbest=nbest,
            attention=None,
        )
        if o.attention is not None:
            eos_t = self.exp.cfg.null_sym_target
            i2w = self.exp.trg_idx2word
            out["attention"] = {
                "source": src.tokens + ["<eos>"],
                "target": ["<eos>" if t == eos_t else i2w[t] for t in o.trans],
                "weights": np.round(o.attention.astype(np.float64), 6).tolist(),
            }
        return out


def _num(x: SupportsFloat) -> float | str:
    """A cost for JSON: the float, or ``"inf"``/``"nan"`` (JSON has no such numbers)."""
    x = float(x)
    return x if math.isfinite(x) else str(x)
