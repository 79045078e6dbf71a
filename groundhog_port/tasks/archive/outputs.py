"""Each translation output of an experiment: its ``sample.py`` settings, test set and model,
found by content (issue 50 items 2-3).

An output is confirmed when its first lines are what the model, with some settings, makes of
some test set's first lines (:class:`~groundhog_port.tasks.reproduce.SourceFinder`).  A
file's name (``trans_beam10_normalize.txt``, ``hyp.beam12``) or a ``README`` holding the
``sample.py`` command only orders the settings tried (:func:`settings_order`); where the
content says other settings than the name, both are said.  A text of any name beside the
state is a candidate output when its words are mostly in the target vocabulary
(:func:`language_of`); a candidate no setting confirms is not an output, unless its lines are
the re-translation's once case and spaces are ignored: it was post-processed by hand
(:func:`post_processed`), and is reported so, never as a missing input.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

from ... import lookup
from ...errors import LegacyInputError
from ...file_names import name_hint
from ...legacy.data import first_text_lines
from ...search.defaults import MAX_RETRY_BEAM
from ...untrusted import strip_compression
from .inventory import vocabulary_share

if TYPE_CHECKING:
    from ...legacy.experiment import Experiment
    from .inventory import Row


# tasks.reproduce (its Settings, its SourceFinder) imports this module: these functions take
# what they use of them as Protocols, so that no import cycle is made, even for typing
# (parity_tests/packaging/test_import_graph.py)
class Described(Protocol):
    """sample.py settings (:class:`groundhog_port.tasks.reproduce.Settings`)."""

    def describe(self) -> str: ...


_S = TypeVar("_S", bound=Described)


class Finder(Protocol):
    """What is used of :class:`groundhog_port.tasks.reproduce.SourceFinder`: its cached
    first translations and its first-lines check."""

    def _first_translations(self, path: Path, settings: Described, n: int) -> list[str | None]: ...
    def _confirm(
        self, archived: Sequence[str], settings: Described
    ) -> Callable[[Path], str | None]: ...


#: what a README's ``sample.py`` command says of an output: (beam or None, normalize,
#: ignore_unk)
Hint = tuple[int | None, bool, bool]

logger = logging.getLogger("groundhog_port.tasks.archive")

#: the share of a candidate's sampled words that must lie in the target vocabulary
TARGET_SHARE = 0.5
#: lines of a candidate sampled for its language
SAMPLE_LINES = 20


def language_of(exp: Experiment, path: Path) -> str | None:
    """``None`` when the text at ``path`` may be an output: it reads as the target language
    (most of its sampled words in the target vocabulary, more than in the source one) and is
    not the reference of a test set beside it (``newstest2012.fr`` beside
    ``newstest2012.en``); else why it is no output."""
    src_lang, trg_lang = lookup.languages(exp.state)
    name = strip_compression(path.name)
    if name.endswith("." + trg_lang):
        stem = name[: -len(trg_lang) - 1]
        beside = [p for p in path.parent.glob(f"{stem}.{src_lang}*") if p.is_file()]
        if beside:
            return f"the reference of {beside[0].name} beside it"
    lines = first_text_lines(path, SAMPLE_LINES)
    if not lines:
        return "empty"
    trg = vocabulary_share(lines, exp.trg_word2idx)
    src = vocabulary_share(lines, exp.src_word2idx)
    if trg >= TARGET_SHARE and trg >= src:
        return None
    if src >= TARGET_SHARE:
        return f"a source-language text ({src:.0%} of its words in the source vocabulary)"
    return f"a text in neither vocabulary ({trg:.0%} of its words in the target one)"


_SAMPLE_PY = re.compile(r"\bsample\.py\b")


def readme_hints(texts: Iterable[Path], row_of: Callable[[Path], Row]) -> dict[str, Hint]:
    """``{output name: (beam, normalize, ignore_unk)}`` from ``sample.py`` commands written
    in the texts of the folder (a ``README.txt``: ``python sample.py --beam-search
    --beam-size 10 ... --trans output``); only what orders the settings tried."""
    out = {}
    for p in texts:
        facts = getattr(row_of(p), "facts", None)
        for line in getattr(facts, "sample", ()):
            if not _SAMPLE_PY.search(line):
                continue
            try:
                words = shlex.split(line)
            except ValueError:
                continue
            trans = _flag(words, "--trans")
            if trans is None:
                continue
            beam = _flag(words, "--beam-size")
            out[trans.rsplit("/", 1)[-1]] = (
                int(beam) if beam and beam.isdigit() else None,
                "--normalize" in words,
                "--ignore-unk" in words,
            )
    return out


def _flag(words, name):
    for i, w in enumerate(words):
        if w == name and i + 1 < len(words):
            return words[i + 1]
        if w.startswith(name + "="):
            return w.split("=", 1)[1]
    return None


def settings_order(
    name: str,
    hints: Mapping[str, Hint],
    settings_type: Callable[[int, bool, bool], _S],
    all_settings: Sequence[_S],
) -> tuple[list[_S], _S | None, str]:
    """``(settings in the order tried, the hint's settings or None, where the hint is
    from)``: what the file's name (:func:`groundhog_port.file_names.name_hint`) or a
    README's command says first, then every other setting."""
    hint, where = hints.get(name), "a README's sample.py command"
    if hint is None:
        hint, where = name_hint(name), "its name"
    if hint is None or hint[0] is None:
        return list(all_settings), None, ""
    if hint[0] > MAX_RETRY_BEAM:  # no run of sample.py searched wider: not believed
        if lookup.say_once(("hinted beam", name, hint[0])):
            logger.warning(
                "%s: %s says beam %d, more than the %d sample.py ever searched with: not "
                "believed (its settings are matched by content)",
                name, where, hint[0], MAX_RETRY_BEAM,
            )  # fmt: skip
        return list(all_settings), None, ""
    first = settings_type(hint[0], hint[1], hint[2])
    return [first, *(s for s in all_settings if s != first)], first, where


def disambiguate(
    finder: Finder,
    archived: Sequence[str],
    source: Path,
    order: Sequence[_S],
    redone: int | None = None,
) -> tuple[_S, str, list[str]]:
    """``(settings, what agrees, the others that give the first lines)``: of the settings
    in ``order`` whose first :data:`~groundhog_port.lookup.CONFIRM_LINES` lines give the
    archived ones, the earliest that gives every line re-done, else the one that agrees
    longest (the earliest on a tie: a name's settings come first, so names only break ties).

    Each is checked doubling its lines until one differs, and the next is tried only when
    it does: the common case, the first one right, costs one translation of the output (the
    others are named as agreeing on the first lines, not checked further).  ``redone``: the
    lines the run re-does (``--max-sentences``), or ``None`` for all: no more are checked,
    since settings agreeing on every line re-done give the same verdict."""
    end = len(archived) if redone is None else min(len(archived), max(redone, 1))
    k = min(lookup.CONFIRM_LINES, len(archived))
    alive = [s for s in order if finder._confirm(archived, s)(source) is None]

    def agreement(s):
        n = k
        while n < end:
            m = min(2 * n, end)
            got = finder._first_translations(source, s, m) + [None] * m
            differs = next((i for i in range(n, m) if got[i] != archived[i]), None)
            if differs is not None:
                return differs  # the lines before it agree
            n = m
        return n

    best, best_n = alive[0], -1
    for s in alive:
        n = agreement(s)
        if n > best_n:
            best, best_n = s, n
        if n >= end:
            break
    if best_n < len(archived):
        text = f"its first {best_n} of {len(archived)} lines"
        if best_n == end:
            text += f" (--max-sentences {redone}: no more lines checked)"
    else:
        text = f"all {best_n} lines"
    return best, text, [s.describe() for s in alive if s != best]


def _bare(line):
    return "".join(line.lower().split())


def post_processed(
    finder: Finder,
    archived: Sequence[str],
    order: Iterable[_S],
    places: Sequence[lookup.Place],
    near: str | os.PathLike[str],
    name: str,
    langs: tuple[str, str],
) -> tuple[lookup.TestSetChoice, _S, str] | None:
    """``(choice, settings, how)`` where the archived lines are the re-translation's with
    case and spaces changed by hand (detokenized, lower-cased), else ``None``."""
    n = min(lookup.CONFIRM_LINES, len(archived))
    if n == 0:
        return None
    for s in order:

        def confirm(path, s=s):
            try:
                got = finder._first_translations(path, s, n)
            except LegacyInputError as err:
                return err.problem
            for i, (a, b) in enumerate(zip(archived[:n], got + [None] * n)):
                if b is None or _bare(a) != _bare(b):
                    return f"line {i + 1} differs beyond case and spaces"
            return None

        try:
            choice = lookup.find_source(
                len(archived), confirm, places, near, name, f"with {s.describe()}", langs
            )
        except LegacyInputError:
            continue
        # confirmed above: every one of these lines was translated (none is None)
        got = cast("list[str]", finder._first_translations(choice.source, s, n))
        how = []
        if any("".join(a.split()) != "".join(b.split()) for a, b in zip(archived, got)):
            how.append("lower-cased")
        if any(a.split() != b.split() for a, b in zip(archived, got)) and any(
            a.lower().split() != b.lower().split() for a, b in zip(archived, got)
        ):
            how.insert(0, "detokenized")
        return choice, s, " and ".join(how) or "re-spaced"
    return None
