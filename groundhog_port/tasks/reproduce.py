"""Re-translating an archived experiment and comparing with what the original wrote.

An archived GroundHog experiment is a folder as ``train.py`` and ``sample.py`` left it::

    search_state.pkl  search_model.npz  test.en  test.fr
    trans_beam1.txt  trans_beam5.txt  trans_beam10.txt          sample.py --beam-size N
    trans_beam10_normalize.txt                                  ... --normalize
    trans_beam5_ignore_unk.txt                                  ... --ignore-unk
    trans_beam10_run2.txt                                       a second run, same settings
    trans_holdout_beam10.txt  (with holdout.en / holdout.fr)    another test set
    sample_beam10_stdout.txt  sample_beam5_error.txt            sample.py's stdout / crash

The settings of each recorded run are read from its file name (:func:`parse_trans_name`),
its test set found by content wherever it is kept (:class:`SourceFinder`, docs/archives.md).
:func:`reproduce` translates the source once per distinct (source, settings) with the
port and reports, per archived file, how many lines are identical, the first differing
lines, BLEU (sacrebleu and Moses' multi-bleu.perl number) of the archived and the
reproduced translations against the reference and against each other, and the total
cost (``sample.py``'s "Total cost of the translations").

A trans file shorter than its source means the original crashed (``search_variant``:
``sample.py`` died on line 36, docs/recordings.md, "The retry can crash sample.py"): only
the lines it wrote are compared, and the report says "the original stopped after N lines"
and whether the port fails on the next line too (:class:`~groundhog_port.search.common.
SearchFailed` with the original's message).
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import lookup
from ..errors import LegacyInputError
from ..file_names import TEST_SET_NAMES, TRANS_NAME, is_translation_name
from ..legacy.data import first_text_lines, read_text_lines
from ..outputs import atomic_output, file_in
from ..search import defaults
from ..search.defaults import MAX_RETRY_BEAM
from ..search.translator import SearchWarnings, Translation, Translator, render, total_cost
from ..untrusted import read_tail
from .rescore import compare_lines, multi_bleu, read_lines, sacre_scores

if TYPE_CHECKING:
    from ..legacy.experiment import Experiment

logger = logging.getLogger(__name__)

#: sample.py:276 ``print "Total cost of the translations: {}".format(total_cost)``
TOTAL_COST = re.compile(r"Total cost of the translations: (\S+)")


@dataclass(frozen=True)
class Settings:
    """The ``sample.py`` flags that decide a translation file."""

    beam_size: int
    normalize: bool = False
    ignore_unk: bool = False

    def describe(self) -> str:
        flags = [f"beam {self.beam_size}"]
        if self.normalize:
            flags.append("normalize")
        if self.ignore_unk:
            flags.append("ignore-unk")
        return ", ".join(flags)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class ArchivedFile:
    """One recorded ``sample.py --trans`` output and what it was made from."""

    path: Path
    settings: Settings
    source: Path
    reference: Path | None = None
    stdout: Path | None = None  # sample.py's stdout ("Total cost of the translations: X")
    error: Path | None = None  # the original's traceback when it crashed

    @property
    def name(self) -> str:
        return self.path.name


@dataclass
class Case:
    """An archived experiment folder (see the module docstring)."""

    directory: Path
    state: Path
    model: Path
    files: list[ArchivedFile]
    skipped: list[dict] = field(default_factory=list)  # [{"file", "reason"}]


#: the largest beam a file name is believed: sample.py doubles a failing beam while it is
#: below 500 (:data:`groundhog_port.search.defaults.MAX_RETRY_BEAM`), so no run of it searched
#: wider; a name saying more (``trans_beam7000.txt``: some 2 GiB to search) is matched by
#: content like a name that says nothing
MAX_NAMED_BEAM = MAX_RETRY_BEAM


def parse_trans_name(name: str) -> tuple[Settings, str, int] | None:
    """``(settings, test_set, run)`` from a trans file name, or ``None`` if it is not one
    (or says a beam over :data:`MAX_NAMED_BEAM`: warned once per run).

    >>> parse_trans_name("trans_beam10_normalize.txt")
    (Settings(beam_size=10, normalize=True, ignore_unk=False), 'test', 1)
    """
    m = TRANS_NAME.match(name)
    if not m:
        return None
    if int(m.group("beam")) > MAX_NAMED_BEAM:
        if lookup.say_once(("named beam", name)):
            logger.warning(
                "%s: its name says beam %s, more than the %d sample.py ever searched with: "
                "not believed (its settings are matched by content)",
                name, m.group("beam"), MAX_NAMED_BEAM,
            )  # fmt: skip
        return None
    flags = m.group("flags")
    settings = Settings(int(m.group("beam")), "_normalize" in flags, "_ignore_unk" in flags)
    return settings, m.group("set") or "test", int(m.group("run") or 1)


class SourceFinder:
    """The test set of each archived ``trans_*.txt`` of one experiment, found by content
    (:func:`groundhog_port.lookup.find_source`): a candidate is confirmed when its
    first lines, translated with the file's settings, give the archived first lines.  The
    translations are cached per (candidate, settings); a test set chosen for one file is
    tried first for the next ones, and each choice is logged once (:meth:`announce`).

    ``source``/``reference``: given for the ``test`` set (``--source/--ref``), used as given;
    ``by_name``: ``{"test": test.en path or None, ...}``, taken unconfirmed as a last resort;
    ``fix``: what the error of a test set not found ends with (text, or a function of the
    test set's name: ``--source`` serves the ``test`` set only); ``opener``: instead of
    ``exp``, a function giving the experiment each time it is needed (``archive`` holds one
    snapshot open at a time, :class:`groundhog_port.tasks.archive.inputs.Opened`), with
    ``langs`` its languages and ``words`` its target vocabulary (id -> word).
    """

    def __init__(
        self,
        exp: Experiment | None,
        places: Sequence[lookup.Place],
        near: str | os.PathLike[str],
        source: str | os.PathLike[str] | None = None,
        reference: str | os.PathLike[str] | None = None,
        by_name: Mapping[str, Path | None] | None = None,
        fix: str | Callable[[str], str] = "",
        opener: Callable[[], Experiment] | None = None,
        langs: tuple[str, str] | None = None,
        words: dict[int, str] | None = None,
    ) -> None:
        self._exp, self._opener, self._words = exp, opener, words
        self.places, self.near = places, Path(near)
        self.source = Path(source) if source else None
        self.reference = Path(reference) if reference else None
        self.by_name = by_name or {}
        self.fix = fix
        self.langs = langs or (lookup.languages(exp.state) if exp is not None else ("en", "fr"))
        self._searches: dict = {}  # (path, beam, ignore_unk) -> search results, in order
        self.chosen: dict = {}  # (source, reference) -> (first choice, [archived file names])

    @property
    def exp(self) -> Experiment:
        if self._opener is not None:
            return self._opener()
        assert self._exp is not None  # given when no opener is
        return self._exp

    def _first_translations(self, path, settings, n):
        """The translations of the first ``n`` lines of ``path`` with ``settings`` (``None``
        where the search failed).  One search serves ``--normalize`` and not: the flag only
        rescales the finished list (sample.py:153-155), so settings that differ in it alone
        share the searches, which halves the cost of trying every setting."""
        key = (str(path), settings.beam_size, settings.ignore_unk)
        have = self._searches.get(key, [])
        if len(have) < n:  # the model is opened only to translate
            exp = self.exp
            if self._words is None:
                self._words = exp.trg_idx2word
            translator = Translator(
                exp,
                settings.beam_size,
                ignore_unk=settings.ignore_unk,
                batch_size=1,
                warnings=SearchWarnings(str(path), summarise=True),
            )
            lines = first_text_lines(path, n)[len(have) :]
            seqs = [exp.parse_source(line)[0] for line in lines]
            have = self._searches[key] = have + translator.searches(seqs, len(have) + 1)
        if self._words is None:
            self._words = self.exp.trg_idx2word
        out = [render(r, self._words, settings.normalize) for r in have[:n]]
        return [None if t.error is not None else t.line for t in out]

    def _confirm(self, archived, settings):
        n = min(lookup.CONFIRM_LINES, len(archived))

        def confirm(path):
            try:  # the first line alone first: most candidates differ there
                got = self._first_translations(path, settings, 1)
                if got[:1] == archived[:1]:
                    got = self._first_translations(path, settings, n)
            except LegacyInputError as err:
                return err.problem
            for i, (a, b) in enumerate(zip(archived[:n], got + [None] * n)):
                if a != b:
                    return f"line {i + 1} translates to {b!r}, archived {a!r}"
            return None

        return confirm

    def find(
        self,
        path: str | os.PathLike[str],
        settings: Settings,
        test_set: str,
        error_log: Path | None = None,
        by_name: bool = True,
        reuse_only: bool = False,
        note: bool = True,
    ) -> lookup.TestSetChoice:
        """The test set of archived file ``path`` (its settings, its test set's name).
        ``by_name``: take the standard name unconfirmed when nothing confirms;
        ``reuse_only``: try only the test sets chosen before (a cheap first pass);
        ``note=False``: the choice is not kept (:meth:`note` it once it is taken)."""
        path = Path(path)
        if test_set == "test" and self.source is not None:
            ref, why = (
                (self.reference, "given")
                if self.reference
                else lookup.reference_for(self.source, *self.langs)
            )
            choice = lookup.TestSetChoice(
                self.source,
                ref,
                f"source {self.source} (given), reference "
                + (f"{ref} ({why})" if ref else f"none ({why})"),
            )
        else:
            archived = read_lines(path)
            if not archived:
                raise LegacyInputError(path, "empty: nothing tells which test set it translates")
            confirm = self._confirm(archived, settings)
            how = f"with {settings.describe()}"
            # a test set chosen for another file of the experiment first: one choice, one line
            reused: lookup.TestSetChoice | None = next(
                (
                    c
                    for c, _ in self.chosen.values()
                    if (lookup.line_count(c.source) or 0) >= len(archived)
                    and confirm(c.source) is None
                ),
                None,
            )
            if reused is None and reuse_only:
                raise LegacyInputError(path, "no test set chosen before gives its first lines")
            if reused is None:
                reused = lookup.find_source(
                    len(archived),
                    confirm,
                    self.places,
                    self.near,
                    path.name,
                    how,
                    self.langs,
                    crashed=error_log.name if error_log else None,
                    by_name=self.by_name.get(test_set) if by_name else None,
                    fix=self.fix(test_set) if callable(self.fix) else self.fix,
                )
            choice = reused
        if note:
            self.note(choice, path.name)
        return choice

    def note(self, choice: lookup.TestSetChoice, name: str) -> None:
        """``choice`` serves the archived file ``name`` (said by :meth:`announce`)."""
        _, names = self.chosen.setdefault((choice.source, choice.reference), (choice, []))
        if name not in names:
            names.append(name)

    def announce(self, prefix: str = "") -> None:
        """One INFO line per chosen test set, naming the files it serves and why (the why of
        the first file it was confirmed for)."""
        for first, names in self.chosen.values():
            logger.info("%s%s: %s", prefix, ", ".join(names), first.why)


def case_checkpoint(
    directory: str | os.PathLike[str],
    model: str | os.PathLike[str] | None = None,
    state: str | os.PathLike[str] | None = None,
) -> tuple[Path, Path]:
    """``(state, model)`` of an experiment folder, by content (issue 50): its GroundHog
    state, whatever its name (``config.pkl``), or ``state`` (a name in the folder, or a
    path) where the folder holds several; ``model`` when given (a name is looked for in the
    folder), else the model beside it whose parameters fit the state
    (:func:`groundhog_port.tasks.archive.pairing.pair_models`): ``prefix + model.npz``, else
    the only one, else the newest snapshot ``prefix + model%d.npz``."""
    from .archive.inventory import Kind, classify
    from .archive.pairing import pair_models

    directory = Path(directory)
    if not directory.is_dir():
        raise LegacyInputError(directory, "not a directory")
    rows = [classify(p) for p in sorted(directory.iterdir()) if p.is_file()]
    states = [r for r in rows if r.kind is Kind.STATE]
    if state is not None:
        given = Path(state) if Path(state).is_file() else directory / state
        if not given.is_file():
            raise LegacyInputError(given, "--state: file not found (nor in the --case folder)")
        chosen = classify(given)
        if chosen.kind is not Kind.STATE:
            raise LegacyInputError(given, f"--state: not a GroundHog state ({chosen.kind.value})")
        states = [chosen]
    if len(states) != 1:
        names = ", ".join(r.path.name for r in states)
        raise LegacyInputError(
            directory,
            f"several GroundHog states ({names}): give --state NAME, one of them"
            if states
            else "no GroundHog state (a pickle of state.py's keys) in this folder",
        )
    found = states[0].path
    if model is not None:
        given = Path(model)
        if not given.is_file() and (directory / given).is_file():
            given = directory / given
        if not given.is_file():
            raise LegacyInputError(given, "--model: file not found (nor in the --case folder)")
        return found, given
    all_states = [r for r in rows if r.kind is Kind.STATE] or states
    pairings = pair_models(all_states, [r for r in rows if r.kind is Kind.MODEL])
    mine = [p for p in pairings if p.state == found]
    if not mine:
        seen = "; ".join(f"{p.model.name}: {p.why}" for p in pairings) or "none"
        raise LegacyInputError(
            directory, f"no model beside {found.name} fits it ({seen[:500]}); give --model NAME"
        )
    prefix = found.name[: -len("state.pkl")] if found.name.endswith("state.pkl") else None
    named = [p for p in mine if prefix is not None and p.model.name == f"{prefix}model.npz"]
    if named:
        return found, named[0].model
    if len(mine) == 1:
        return found, mine[0].model
    snaps = sorted((p for p in mine if p.snapshot is not None), key=lambda p: p.snapshot or 0)
    if snaps:
        logger.info(
            "%s: the newest of %d snapshots (%s; --model NAME takes another)",
            snaps[-1].model, len(snaps), ", ".join(p.model.name for p in snaps),
        )  # fmt: skip
        return found, snaps[-1].model
    raise LegacyInputError(
        directory,
        f"several models fit {found.name} ({', '.join(p.model.name for p in mine)}): "
        "give --model NAME",
    )


#: the sample.py settings an output whose name says none is matched against (issue 43):
#: the beams people used, each without and with --normalize / --ignore-unk
INFER_BEAMS = (1, 5, 10, 12, 20)


def inferable_settings() -> list[Settings]:
    """Every setting tried for an output of any name, in order."""
    return [Settings(b, n, u) for b in INFER_BEAMS for n in (False, True) for u in (False, True)]


def find_case(
    directory: str | os.PathLike[str],
    data_dirs: Sequence[Path] = (),
    source: str | os.PathLike[str] | None = None,
    reference: str | os.PathLike[str] | None = None,
    exp: Experiment | None = None,
    settings: Settings | None = None,
    model: str | os.PathLike[str] | None = None,
    state: str | os.PathLike[str] | None = None,
) -> Case:
    """The state, model and archived translation files of an experiment folder, each file
    with its test set found by content (:class:`SourceFinder`, places: :func:`case_places`).

    ``source``/``reference`` replace the test set of the ``trans_beamN*`` files (not the
    holdout ones); ``exp``: the opened experiment (opened here when not given); ``settings``:
    those of the files whose names say none (``--beam-size`` ...; else they are matched by
    content, :func:`inferable_settings`); ``model``: ``--model`` (a snapshot); ``state``:
    ``--state`` (a folder of several states).  Besides the ``trans*`` files, every text of
    any name in the folder whose words are in the target vocabulary is a candidate output,
    kept where some setting gives its first lines (issue 50; else it is not this state's).
    """
    from .archive.inventory import Kind, classify
    from .archive.outputs import language_of

    directory = Path(directory)
    state, model = case_checkpoint(directory, model, state)
    if exp is None:
        from ..legacy.loading import open_experiment

        exp = open_experiment(state, model, "", data_dirs)
    finder = SourceFinder(
        exp,
        lookup.case_places(directory, data_dirs),
        directory,
        source,
        reference,
        {
            name: lookup.find_named(src, directory, data_dirs)
            for name, (src, _) in TEST_SET_NAMES.items()
        },
        fix=lambda test_set: (
            "; pass --source FILE (and --ref FILE), or --data-dir DIR (the folder holding it)"
            if test_set == "test"
            else "; pass --data-dir DIR (the folder holding it)"
        ),
    )
    files, skipped = [], []
    keyed = []
    names = sorted(p for p in directory.iterdir() if is_translation_name(p.name))
    names.sort(key=lambda p: parse_trans_name(p.name) is None)  # named ones first
    candidates = []
    for p in sorted(directory.iterdir()):
        if p in names or not p.is_file():
            continue
        row = classify(p)
        if row.kind is Kind.TEXT and not getattr(row.facts, "numeric", False):
            try:
                if language_of(exp, p) is None:
                    candidates.append(p)
            except LegacyInputError:  # no vocabulary to tell: said where it is needed
                break
    given_settings = settings
    for path in [*names, *candidates]:
        parsed = parse_trans_name(path.name)
        if parsed is None:
            inferred = _infer(finder, path, given_settings)
            if isinstance(inferred, str) and path in candidates:
                logger.info("%s: not an output of %s (%s)", path, state.name, inferred)
                continue
            if isinstance(inferred, str):
                skipped.append({"file": path.name, "reason": inferred})
                continue
            settings, choice = inferred
            logger.info("%s: %s (by content)", path.name, settings.describe())
            files.append(ArchivedFile(path, settings, choice.source, choice.reference))
            keyed.append((True, settings.beam_size, settings.normalize, settings.ignore_unk, 1))
            continue
        settings, test_set, run = parsed
        stem = path.name[len("trans_") : -len(".txt")]
        stdout = directory / f"sample_{stem}_stdout.txt"
        crash_log = directory / f"sample_{stem}_error.txt"
        error = crash_log if crash_log.is_file() else None
        try:
            choice = finder.find(path, settings, test_set, error)
        except LegacyInputError as err:
            skipped.append({"file": path.name, "reason": err.problem})
            continue
        files.append(
            ArchivedFile(
                path,
                settings,
                choice.source,
                choice.reference,
                stdout if stdout.is_file() else None,
                error,
            )
        )
        keyed.append(
            (test_set != "test", settings.beam_size, settings.normalize, settings.ignore_unk, run)
        )
    files = [f for _, f in sorted(zip(keyed, files), key=lambda kf: kf[0])]
    finder.announce()
    for s in skipped:
        logger.warning("%s: skipped: %s", directory / s["file"], s["reason"])
    if not files:
        raise LegacyInputError(
            directory,
            "no archived translation file (trans_beamN*.txt) with its source"
            + (f" ({len(skipped)} skipped, said above)" if skipped else ""),
        )
    return Case(directory, state, model, files, skipped)


def _infer(finder, path, given=None):
    """``(settings, test set choice)`` of an output whose name says no settings: ``given``
    (``--beam-size`` ...), else the first of :func:`inferable_settings` whose first lines
    give the archived ones (the test sets chosen before tried first); else why not (text)."""
    from .archive.outputs import disambiguate

    tried = [given] if given is not None else inferable_settings()
    for reuse_only in (True, False):
        for s in tried:
            try:
                choice = finder.find(path, s, "test", by_name=False, reuse_only=reuse_only)
            except LegacyInputError:
                continue
            if given is None:  # several settings may give the first lines: more lines decide
                order = [s, *(x for x in inferable_settings() if x != s)]
                s = disambiguate(finder, read_lines(path), choice.source, order)[0]
            return s, choice
    said = (
        f"with {given.describe()} (the flags)"
        if given is not None
        else f"with any of beams {', '.join(map(str, INFER_BEAMS))}, with and without "
        "--normalize / --ignore-unk"
    )
    return (
        f"the name does not say the sample.py settings and no test set's first lines give "
        f"its first lines {said}; pass --beam-size N (--normalize, --ignore-unk) and --source FILE"
    )


def original_total_cost(stdout_path: str | os.PathLike[str] | None) -> float | None:
    """The "Total cost of the translations" sample.py printed, or ``None``."""
    if stdout_path is None:
        return None
    # the last MiB: sample.py prints the line last (a FIFO or device is refused by type)
    m = TOTAL_COST.search(read_tail(stdout_path, "sample.py's output").decode("utf-8", "replace"))
    return float(m.group(1)) if m else None


def original_error(error_path: str | os.PathLike[str] | None) -> str | None:
    """The last line of the original's traceback (``ValueError: kth(=640) ...``), or ``None``."""
    if error_path is None:
        return None
    text = read_tail(error_path, "a crash log").decode("utf-8", "replace")  # the last MiB
    lines = [ln.strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln]
    return lines[-1] if lines else None


def effective_batch_size(batch_size: int) -> int:
    """``batch_size``, or 1 (the literal search) when the batched search is not part of this
    build; both searches return the same translations."""
    if batch_size > 1:
        try:
            importlib.import_module("groundhog_port.search.batched")
        except ImportError as err:
            logger.warning(
                "the batched beam search (groundhog_port.search.batched) is not "
                "available (%s): using the literal search, --batch-size 1",
                err,
            )
            return 1
    return batch_size


def bleu_pair(
    hyps: Sequence[str], refs: Sequence[str], tokenize: str = "13a"
) -> dict[str, float | str] | None:
    """sacrebleu BLEU and multi-bleu.perl's number of ``hyps`` against one reference set."""
    if not hyps:
        return None
    sacre = sacre_scores(hyps, [refs], tokenize=tokenize, chrf=False)["bleu"]
    mb = multi_bleu(hyps, [refs])
    return {
        "sacrebleu": sacre.score,
        "signature": sacre.signature,
        "multi_bleu": mb.score,
        "multi_bleu_text": mb.format(),
    }


def compare_archived(
    archived: Sequence[str],
    source_lines: Sequence[str],
    translations: Sequence[Translation],
    reference: Sequence[str] | None = None,
    max_diffs: int = 5,
    tokenize: str = "13a",
) -> dict[str, Any]:  # a JSON-able report
    """The report for one archived file given the port's translations of its whole source.

    ``archived``: the archived lines (may be fewer than the source: the original crashed);
    ``translations``: :class:`~groundhog_port.search.translator.Translation` per source line;
    ``reference``: reference lines or ``None``.  A line the port could not translate never
    counts as identical.
    """
    n = len(archived)
    reproduced = [t.line for t in translations]
    shown = [None if t.error is not None else t.line for t in translations[:n]]
    cmp = compare_lines(archived, shown, max_diffs=max_diffs)
    diffs = []
    for d in cmp["first_differences"]:
        i = d["line"] - 1
        entry = {
            "line": d["line"],
            "source": source_lines[i],
            "archived": d["archived"],
            "reproduced": reproduced[i],
        }
        if translations[i].error is not None:
            entry["port_error"] = translations[i].error
        diffs.append(entry)
    report = {
        "source_lines": len(source_lines),
        "archived_lines": n,
        "compared": n,
        "identical": cmp["identical"],
        "different": n - cmp["identical"],
        "percent_identical": cmp["percent_identical"],
        "all_identical": cmp["identical"] == n,
        "original_stopped_after": n if n < len(source_lines) else None,
        "first_differences": diffs,
        "port_failed_lines": [
            {"line": i + 1, "error": t.error}
            for i, t in enumerate(translations)
            if t.error is not None
        ],
        "total_cost": total_cost(translations),
        "total_cost_compared": total_cost(translations[:n]),
    }
    refs = None if reference is None else reference[:n]
    report["bleu_lines"] = n
    report["bleu"] = {
        "archived_vs_reference": bleu_pair(archived, refs, tokenize) if refs else None,
        "reproduced_vs_reference": bleu_pair(reproduced[:n], refs, tokenize) if refs else None,
        "archived_vs_reproduced": bleu_pair(archived, reproduced[:n], tokenize),
    }
    return report


def sentences_to_translate(files: list[ArchivedFile]) -> int:
    """How many sentences :func:`reproduce` translates (each distinct source and settings once)."""
    return sum(
        len(read_text_lines(source))
        for source in {(f.source, f.settings): f.source for f in files}.values()
    )


def reproduce(
    exp: Experiment,
    files: list[ArchivedFile],
    batch_size: int | None = 1,
    max_diffs: int = 5,
    tokenize: str = "13a",
    progress: Callable[[int], None] | None = None,
    save_dir: str | os.PathLike[str] | None = None,
    max_lines: int | None = None,
) -> dict[str, Any]:  # a JSON-able report
    """Translate each distinct (source, settings) once and compare with every archived file.

    ``batch_size``: sentences decoded at once, ``None``: translate's default at each
    file's beam (:func:`~groundhog_port.search.defaults.batch_size`).
    ``max_lines``: only the first lines of each source (and of its archived files and
    reference) -- a cheap check of a large archive; ``None``: all of them.

    Returns ``{"files": [per-file report], "all_identical", "sentences", "seconds",
    "sentences_per_second"}``; ``progress(n)`` is called after every ``n`` translated
    sentences.  Raises :class:`LegacyInputError` for an archived file longer than its source
    or a reference of another length than the source.
    """
    sources, archived, refs = {}, {}, {}
    for f in files:
        if f.source not in sources:
            sources[f.source] = read_text_lines(f.source)[:max_lines]
        lines = read_lines(f.path)[:max_lines]
        if len(lines) > len(sources[f.source]):
            raise LegacyInputError(
                f.path, f"{len(lines)} lines but its source {f.source} has {len(sources[f.source])}"
            )
        archived[f.path] = lines
        if f.reference is not None and f.reference not in refs:
            refs[f.reference] = read_lines(f.reference, part="ref")[:max_lines]
            if len(refs[f.reference]) != len(sources[f.source]):
                raise LegacyInputError(
                    f.reference,
                    f"{len(refs[f.reference])} reference lines "
                    f"but the source {f.source} has {len(sources[f.source])}",
                )
    done, seconds, sentences, sizes = {}, {}, 0, {}
    batched: bool | None = None  # whether this build has the batched search (asked once)
    start = time.monotonic()
    for f in files:
        key = (f.source, f.settings)
        if key in done:
            continue
        t0 = time.monotonic()
        s = f.settings
        size = defaults.batch_size(s.beam_size, batch_size)
        if size > 1 and batched is None:  # its warning once per call, not once per file
            batched = effective_batch_size(size) > 1
        sizes[key] = size = size if batched is not False else 1
        # sample.py's per-sentence retry warnings, summarised once per file and message
        warnings = SearchWarnings(f"{f.source} ({s.describe()})", summarise=True)
        translator = Translator(
            exp,
            s.beam_size,
            ignore_unk=s.ignore_unk,
            normalize=s.normalize,
            batch_size=size,
            warnings=warnings,
        )
        lines = sources[f.source]
        step = size
        out = []
        for i in range(0, len(lines), step):
            seqs = [exp.parse_source(line)[0] for line in lines[i : i + step]]
            out.extend(translator.translate_seqs(seqs, first_line=i + 1))
            if progress is not None:
                progress(len(seqs))
        if warnings.summary() is not None:
            logger.warning("%s", warnings.summary())
        for i, t in enumerate(out):
            if t.error is not None:
                logger.info(
                    "%s, line %d (%s): the original sample.py fails here: %s",
                    f.source,
                    i + 1,
                    f.settings.describe(),
                    t.error,
                )
        done[key] = out
        seconds[key] = time.monotonic() - t0
        sentences += len(lines)
    reports = []
    for f in files:
        key = (f.source, f.settings)
        out = done[key]
        r: dict[str, Any] = {
            "file": f.name,
            "archived": str(f.path),
            "source": str(f.source),
            "reference": str(f.reference) if f.reference else None,
            "settings": f.settings.as_dict(),
            "batch_size": sizes[key],
            "seconds": seconds.pop(key, 0.0),
        }
        r.update(
            compare_archived(
                archived[f.path],
                sources[f.source],
                out,
                None if f.reference is None else refs.get(f.reference),
                max_diffs,
                tokenize,
            )
        )
        r["archived_total_cost"] = original_total_cost(f.stdout)
        stopped = r["original_stopped_after"]
        if stopped is not None:
            port_error = out[stopped].error
            orig = original_error(f.error)
            r["original_error"] = orig
            r["port_error_on_next_line"] = port_error
            # the original's crash is reproduced when the port fails on the line where it died
            # (with the same message, where the original's traceback is archived)
            r["crash_reproduced"] = port_error is not None and (orig is None or port_error in orig)
        if save_dir is not None:
            Path(save_dir).mkdir(parents=True, exist_ok=True)
            # complete or absent; a link inside the folder is never followed
            with atomic_output(file_in(save_dir, f.name)) as fh:
                fh.writelines(t.line + "\n" for t in out)
        reports.append(r)
    elapsed = time.monotonic() - start
    return {
        "files": reports,
        "all_identical": all(r["all_identical"] for r in reports),
        "sentences": sentences,
        "seconds": elapsed,
        "sentences_per_second": sentences / elapsed if elapsed > 0 else 0.0,
    }


# ----------------------------------------------------------------------------------------------
# Text report
# ----------------------------------------------------------------------------------------------
def _fmt_bleu(b):
    if b is None:
        return "-"
    return f"{b['sacrebleu']:.2f} (multi-bleu {b['multi_bleu']:.2f})"


def _side_by_side(diffs, width=60):
    """``line N: archived | reproduced`` rows, the archived column padded to one width."""
    if not diffs:
        return []

    def show(s):
        return "<no line>" if s is None else (s if s else "<empty>")

    col = min(width, max(len(show(d["archived"])) for d in diffs))
    col = max(col, len("archived"))
    num = max(len(str(d["line"])) for d in diffs)
    rows = [f"    {' ' * (num + 7)}{'archived'.ljust(col)} | reproduced"]
    for d in diffs:
        rep = show(d["reproduced"])
        if "port_error" in d:
            rep = f"<search failed: {d['port_error']}>"
        rows.append(
            f"    line {str(d['line']).rjust(num)}: {show(d['archived']).ljust(col)} | {rep}"
        )
    return rows


#: why "archived-ref 23.66 (multi-bleu 15.68)" are two numbers, and which to quote
BLEU_NOTE = (
    "BLEU X (multi-bleu Y): X is sacrebleu ({signature}), whose tokenizer re-splits the "
    "already tokenized text (Moses escapes such as &apos; become '&', 'apos', ';' and "
    "punctuation is split off), so it counts more, shorter n-grams; Y is what Moses' "
    "multi-bleu.perl prints, splitting on whitespace only, as the 2014-2015 papers "
    "did.  Quote X with its signature; compare Y with numbers from that time."
)


def format_report(report: Mapping[str, Any]) -> str:
    """The human-readable report of :func:`reproduce` (plus ``case``/``skipped`` if set)."""
    out = []
    if report.get("case"):
        out.append(f"case {report['case']}")
    for r in report["files"]:
        s = Settings(**r["settings"])
        head = (
            f"{r['file']} ({s.describe()}): {r['identical']}/{r['compared']} lines identical "
            f"({r['percent_identical']:.1f}%)"
        )
        out.append(head)
        if r["original_stopped_after"] is not None:
            line = (
                f"  the original stopped after {r['original_stopped_after']} lines "
                f"(source: {r['source_lines']})"
            )
            if r.get("original_error"):
                line += f"; it died with: {r['original_error']}"
            out.append(line)
            if r["crash_reproduced"]:
                out.append(
                    f"  the port fails on line {r['original_stopped_after'] + 1} too: "
                    f"{r['port_error_on_next_line']}"
                )
            else:
                out.append(
                    f"  the port translates line {r['original_stopped_after'] + 1}"
                    + (
                        f" (error: {r['port_error_on_next_line']})"
                        if r["port_error_on_next_line"]
                        else ""
                    )
                    + ": the original's crash is not reproduced"
                )
        if r["first_differences"]:
            out.append(
                f"  first differing lines ({len(r['first_differences'])} of {r['different']}):"
            )
            out.extend(_side_by_side(r["first_differences"]))
        b = r["bleu"]
        scope = "" if r["original_stopped_after"] is None else f" (first {r['bleu_lines']} lines)"
        out.append(
            f"  BLEU{scope}: archived-ref {_fmt_bleu(b['archived_vs_reference'])}; "
            f"reproduced-ref {_fmt_bleu(b['reproduced_vs_reference'])}; "
            f"archived-reproduced {_fmt_bleu(b['archived_vs_reproduced'])}"
        )
        cost = f"  total cost {r['total_cost']!r}"
        if r["original_stopped_after"] is not None:
            cost += f" (first {r['compared']} lines: {r['total_cost_compared']!r})"
        if r["archived_total_cost"] is not None:
            a = r["archived_total_cost"]
            rel = abs(r["total_cost"] - a) / abs(a) if a else abs(r["total_cost"] - a)
            cost += f"; the original printed {a!r} (relative difference {rel:.1e})"
        out.append(cost)
    signature = next(
        (b["signature"] for r in report["files"] for b in r["bleu"].values() if b), None
    )
    if signature:
        out.append(BLEU_NOTE.format(signature=signature))
    out.append(headline(report))
    return "\n".join(out)


def headline(report: Mapping[str, Any]) -> str:
    """The last line of :func:`format_report`: the outputs re-done, identical, differing and
    not done (each not done one above it with why: ``not done FILE: why``), the lines.  It
    says "all identical" only when every output found was re-done and is identical; an
    output not done says "NOT ALL DONE" (issue 50: one skipped output and one identical
    said "all identical: 1/1 files")."""
    skipped = report.get("skipped", [])
    lines = [f"not done {s['file']}: {s['reason']}" for s in skipped]
    redone = len(report["files"])
    same = sum(bool(r["all_identical"]) for r in report["files"])
    differ = redone - same
    compared = sum(r["compared"] for r in report["files"])
    ident = sum(r["identical"] for r in report["files"])
    verdicts = (["DIFFERENCES"] if differ else []) + (["NOT ALL DONE"] if skipped else [])
    not_done = f"{len(skipped)} not done" + (
        f" ({', '.join(s['file'] for s in skipped)}: why above)" if skipped else ""
    )
    lines.append(
        f"{', '.join(verdicts) or 'all identical'}: {redone}/{redone + len(skipped)} outputs "
        f"re-done, {same} identical, {differ} differing, {not_done}; {ident}/{compared} "
        f"compared lines identical; {report['sentences']} sentences translated in "
        f"{report['seconds']:.1f} s ({report['sentences_per_second']:.1f} sentences/s)"
    )
    return "\n".join(lines)
