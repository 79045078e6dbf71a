"""GroundHog vocabularies: loading, text -> ids (``parse_input``), ids -> text.

Files (docs/recordings.md, "Files"): ``vocab.X.pkl`` is ``preprocess.py``'s dict word -> id
(Python-2 protocol 2, byte-string keys); ``ivocab.X.pkl`` is ``invert-dict.py``'s dict
id -> word (protocol 0).  Words are UTF-8 byte strings in the files and ``str`` here.
Conventions: ``<s>``/``</s>`` -> 0, ``UNK`` -> 1, words from 2 by frequency, end of
sequence = ``null_sym`` = V, and ``ivocab[0]`` is ``'</s>'`` in the recorded files.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from groundhog_port.errors import LegacyInputError, quoted
from legacy_states.unpickle import safe_load_pickle


class UnknownWordError(LegacyInputError):
    """``parse_input(..., raise_unk=True)`` met a word that maps to ``unk_sym``."""

    def __init__(self, word: str, position: int, path: object = None) -> None:
        self.word = word
        self.position = position
        super().__init__(
            path,
            f"unknown word {quoted(word)} (token {position + 1} of the sentence); "
            "the original stops with 'Unknown word' here; run with --allow-unk to map unknown words to UNK",
        )


# ---------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------


def _describe(pairs):
    return ", ".join(f"{quoted(k)}: {quoted(v)}" for k, v in pairs[:3])


def _is_id(value):
    if type(value) is int:  # nearly every id: no abstract-class check (0.06 s a vocabulary)
        return True
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _load_dict(path, what):
    data = safe_load_pickle(path)
    if not isinstance(data, dict):
        raise LegacyInputError(
            path, f"a {what} is a pickled dict, this pickle holds a {type(data).__name__}"
        )
    if not data:
        raise LegacyInputError(path, f"the {what} is empty")
    return data


@dataclass(frozen=True)
class _VocabularyKind:
    """How the messages name a kind of vocabulary file."""

    article: str  # "a" / "an", for both names below
    what: str  # "word -> id vocabulary"
    file: str  # "vocab file"
    entry: str  # what an entry maps: "text -> integer"


_WORD_TO_ID = _VocabularyKind("a", "word -> id vocabulary", "vocab file", "text -> integer")
_ID_TO_WORD = _VocabularyKind("an", "id -> word vocabulary", "ivocab file", "integer -> text")


def _word_id_entries(path, inverted: bool) -> list[tuple[str, int]]:
    """The ``(word, id)`` entries of a ``vocab`` file (word -> id) or, ``inverted``, of an
    ``ivocab`` file (id -> word), in file order; every entry must be text and an id of 0 or
    more.  A file of the other kind is refused with a message saying so."""
    kind, other = (_ID_TO_WORD, _WORD_TO_ID) if inverted else (_WORD_TO_ID, _ID_TO_WORD)
    items = list(_load_dict(path, kind.what).items())
    entries = [(word, idx) for idx, word in items] if inverted else items
    if all(_is_id(word) and isinstance(idx, str) for word, idx in entries):
        raise LegacyInputError(
            path,
            f"this is {other.article} {other.what} ({other.article} {other.file}, "
            f"e.g. {_describe(items)}); {kind.article} {kind.what} ({kind.file}) is needed here",
        )
    for (key, value), (word, idx) in zip(items, entries):
        if not isinstance(word, str) or not _is_id(idx):
            raise LegacyInputError(
                path,
                f"not {kind.article} {kind.what}: entry {quoted(key)}: "
                f"{quoted(value)} (expected {kind.entry})",
            )
        if idx < 0:
            raise _negative_id(path, idx, word)
    return entries


def load_word2idx(path: str | os.PathLike[str]) -> dict[str, int]:
    """word -> id dict from a ``vocab.*.pkl`` (``preprocess.py -d`` output).

    An id -> word dict (an ``ivocab`` file) is refused with a message saying so.
    """
    return {word: int(idx) for word, idx in _word_id_entries(path, inverted=False)}


def _negative_id(path, idx, word):
    # GroundHog would index the embedding with it (numpy wraps a negative index to another
    # word's row); the port refuses it here, where the file is known
    return LegacyInputError(
        path, f"word {quoted(word)} has the negative id {int(idx)}: vocabulary ids are 0 or more"
    )


def load_idx2word(path: str | os.PathLike[str]) -> dict[int, str]:
    """id -> word dict from an ``ivocab.*.pkl`` (``invert-dict.py`` output).

    A word -> id dict (a ``vocab`` file) is refused with a message saying so.
    """
    out = WordsById((int(idx), word) for word, idx in _word_id_entries(path, inverted=True))
    out.path = path
    return out


# ---------------------------------------------------------------------------
# text -> ids
# ---------------------------------------------------------------------------


def split_words(line: str) -> list[str]:
    """``line.split()`` as Python 2 did it on byte strings: only ASCII whitespace
    (space, \\t, \\n, \\r, \\v, \\f) separates words; a no-break space stays inside a word."""
    return [w.decode("utf-8") for w in line.encode("utf-8").split()]


def parse_input(
    state: dict[str, Any],
    word2idx: dict[str, int],
    line: str,
    raise_unk: bool = False,
    idx2word: dict[int, str] | None = None,
    unk_sym: int = -1,
    null_sym: int = -1,
) -> tuple[np.ndarray, str | list[str]]:
    """Port of ``experiments/nmt/encdec.py:1494-1515`` ``parse_input``.

    Returns ``(seq, parsed_in)``: ``seq`` is an int64 array of the word ids followed by
    ``null_sym``.  Kept legacy behaviour:

    * unknown words become ``unk_sym``; so does every id ``>= state['n_sym_source']`` --
      compared with the **source** vocabulary size even when parsing the target side
      (docs/recordings.md, "Quirks": French ids 201..319 become UNK when scoring);
    * ``unk_sym``/``null_sym`` < 0 mean ``state['unk_sym_source']``/``state['null_sym_source']``;
    * ``raise_unk`` raises (:class:`UnknownWordError`) for any token that ends up as
      ``unk_sym`` -- also a word whose id is too large, or the literal word ``UNK``;
    * with a non-empty ``idx2word`` the second value is the space-joined words of ``seq``
      with ``null_sym`` shown as ``'<eos>'`` and ``unk_sym`` as ``state['oov']``; otherwise
      (``None`` or an empty dict, as the original's ``if idx2word:``) it is the token list.

    Difference: the original writes those two entries into the caller's ``idx2word``
    (``idx2word[null_sym] = '<eos>'``, ``idx2word[unk_sym] = oov``); this port does not
    modify the caller's dict (the words returned are the same).
    """
    if unk_sym < 0:
        unk_sym = state["unk_sym_source"]
    if null_sym < 0:
        null_sym = state["null_sym_source"]
    n_sym_source = state["n_sym_source"]  # sic: also for the target side
    if not _is_id(n_sym_source):
        raise LegacyInputError(
            None, f"state['n_sym_source'] must be an integer, found {n_sym_source!r}"
        )
    words = split_words(line)
    seq = np.zeros(len(words) + 1, dtype="int64")
    for pos, word in enumerate(words):
        idx = word2idx.get(word, unk_sym)
        if idx >= n_sym_source:
            idx = unk_sym
        seq[pos] = idx
        if idx == unk_sym and raise_unk:
            raise UnknownWordError(word, pos)
    seq[-1] = null_sym
    if idx2word:
        shown = dict(idx2word)
        shown[null_sym] = "<eos>"
        shown[unk_sym] = state["oov"]
        try:
            return seq, " ".join(shown[int(i)] for i in seq)
        except KeyError as err:
            raise LegacyInputError(
                getattr(idx2word, "path", None),
                f"id {err.args[0]} (from the word -> id vocabulary) is missing "
                "from this id -> word vocabulary: the two files do not belong "
                "together",
            ) from None
    return seq, words


# ---------------------------------------------------------------------------
# ids -> text
# ---------------------------------------------------------------------------


class WordsById(dict[int, str]):
    """An id -> word dictionary that remembers the file it was read from (``path``), so
    that a missing id found later, while rendering a translation, names that file."""

    path: object = None


def target_idx2word(
    state: dict[str, Any], idx2word: dict[int, str], path: object = None
) -> dict[int, str]:
    """The output dictionary of ``LM_Model.load_dict`` (LM_model.py:221-225).

    A copy of the target ``idx2word`` with ``[null_sym_target] = '<eol>'`` and
    ``[unk_sym_target] = state['oov']`` (the original modifies the loaded dict in place);
    ``path``: the file it came from, named by the errors of :func:`indices_to_words`.
    """
    out = WordsById(idx2word)
    out.path = path
    out[state["null_sym_target"]] = "<eol>"
    out[state["unk_sym_target"]] = state["oov"]
    return out


def indices_to_words(idx2word: dict[int, str], ids: Sequence[int] | np.ndarray) -> list[str]:
    """``sample.py:137-143``: the words of ``ids`` up to (not including) the first id whose
    word is ``'<eol>'``.  Pass the dictionary from :func:`target_idx2word`.

    Index 0 is an ordinary word here (``'</s>'`` with the recorded ivocab files).
    """
    words = []
    for i in ids:
        try:
            word = idx2word[int(i)]
        except KeyError:
            raise LegacyInputError(
                getattr(idx2word, "path", None),
                f"word id {int(i)} has no entry in the target id -> word "
                "vocabulary (n_sym_target larger than the vocabulary?)",
            ) from None
        if word == "<eol>":
            break
        words.append(word)
    return words


def render_translation(idx2word_target: dict[int, str], ids: Sequence[int] | np.ndarray) -> str:
    """One line of ``sample.py --trans`` output (sample.py:156-158, 270): the words of the
    chosen hypothesis joined by single spaces, end of sequence dropped.  ``idx2word_target``
    is the dictionary from :func:`target_idx2word`."""
    return " ".join(indices_to_words(idx2word_target, ids))
