"""``preprocess.py``: word counts, the vocabulary, the binarized text and n-grams.

A port of ``experiments/nmt/preprocess/preprocess.py`` (cited by line below) that computes
in memory and writes nothing until every input has been read and checked (see
:mod:`.outputs`).  Words are the byte strings Python 2 split the lines into (``str`` in
Python 2, ``bytes`` here), or single characters (``unicode``, ``str`` here) with ``-t``.

Kept legacy quirks, each where it lives:

* lines are split on single spaces, ``line.strip().split(' ')``: two spaces make an empty
  word, and an empty line is the one word ``''`` (preprocess.py:134);
* ``-l`` lowercases the *bytes* (Python 2 ``str.lower``: ASCII letters only,
  preprocess.py:129);
* without ``-v`` the dictionary is built from the counts of the *last* input file only
  (``counter.most_common()``, preprocess.py:168), with ``-v`` from all of them;
* ``-v 1`` or ``-v 2`` mean "every word" (preprocess.py:157-159);
* equally frequent words are ranked in the Counter's iteration order (``most_common``
  is a stable sort by count): Python 2's hash order by default (:mod:`.py2dict`),
  first-occurrence order with ``dict_order='py3'``;
* ``<s>`` and ``</s>`` both get index 0 (preprocess.py:169);
* count files reused from an earlier run (``-c -e`` without ``-o``) are not added to the
  combined counts (preprocess.py:117-122 only updates ``global_counter`` when counting);
* per-file outputs are named from the input's base name with ``.gz`` / ``.bz2`` / ``.txt``
  removed by ``str.rstrip`` -- which strips *characters* (``dog.gz`` -> ``do``) --
  in the current directory (preprocess.py:62-70).

Deliberate differences: a line that is not UTF-8, an empty corpus and ``-v`` below 1 are
errors (the original binarized any bytes, crashed dividing by zero on an empty corpus, and
took ``-v 0`` for "every word"); ``-n`` with ``-e`` writes each file's own n-grams (the
original wrote the whole, partly uninitialised, ``numpy.empty`` array for every file);
``-s`` draws the validation rows with ``--seed`` (the original: numpy's unseeded global
generator).
"""

from __future__ import annotations

import bz2
import gzip
import logging
import os
import pickle
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import LegacyInputError
from ...outputs import Progress
from ...untrusted import check_special, open_input
from .py2dict import Py2Dict, Py2Key

#: a dict iterating as Python 2's (:class:`Py2Dict`) or Python 3's (``dict``): word counts,
#: word -> index, index -> word (:func:`new_dict`)
WordDict = Py2Dict | dict[Any, Any]

logger = logging.getLogger("groundhog_port.legacy.preprocess")

SPECIALS = ((b"UNK", 1), (b"<s>", 0), (b"</s>", 0))


def new_dict(order: str) -> WordDict:
    """An empty dict iterating as Python 2's (``'py2'``) or Python 3's (``'py3'``)."""
    if order == "py2":
        return Py2Dict()
    if order == "py3":
        return {}
    raise ValueError(f"dict order {order!r}: expected 'py2' or 'py3'")


def base_filename(path: str) -> str:
    """``open_files`` (preprocess.py:59-77), with its ``rstrip`` quirk."""
    filename = os.path.basename(path)
    ext = filename.split(os.extsep)[-1]
    base = (
        filename.rstrip(".gz")
        if ext == "gz"
        else filename.rstrip(".bz2")
        if ext == "bz2"
        else filename
    )
    if base.split(os.extsep)[-1] == "txt":
        base = base.rstrip(".txt")  # noqa: B005 -- characters, not a suffix: the quirk
    return base


def read_lines(path: str) -> list[bytes]:
    """The lines of a text, ``.gz`` or ``.bz2`` corpus as Python 2 iterated a file: split
    after each ``\\n`` only (no universal newlines), the last line with or without one.
    Every line must be UTF-8."""
    ext = os.path.basename(path).split(os.extsep)[-1]
    opener = gzip.open if ext == "gz" else bz2.open if ext == "bz2" else open
    check_special(path, "a corpus")  # a FIFO or device by type, before any open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise LegacyInputError(path, "no such file") from None
    except IsADirectoryError:
        raise LegacyInputError(path, "is a directory, expected a corpus file") from None
    except (OSError, EOFError, ValueError) as err:  # bad gzip/bz2 data, unreadable file
        raise LegacyInputError(path, f"cannot read ({type(err).__name__}: {err})") from None
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    for number, line in enumerate(lines, 1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as err:
            raise LegacyInputError(
                path,
                f"line {number} is not UTF-8 (byte 0x{line[err.start]:02x} "
                f"at column {err.start + 1}); GroundHog's corpora are "
                "UTF-8 text",
            ) from None
    return lines


def tokens(line: bytes, char: bool, lowercase: bool) -> list:
    """preprocess.py:128-134 / 191-196."""
    if lowercase:
        line = line.lower()  # Python 2 str.lower: ASCII only
    if char:
        return list(line.strip().decode("utf-8"))
    return line.strip().split(b" ")


def in_order(counts: Mapping[Py2Key, int], order: str) -> WordDict:
    """Counts gathered in a Python-3 dict, as the ``order`` dict that counted them.

    A CPython 2.7 dict's layout depends only on the sequence of *new* keys inserted
    (updating a present key moves nothing), i.e. on the first-occurrence order a Python-3
    dict keeps: re-inserting the keys in that order gives Python 2's table exactly, and
    the counting itself runs at C speed (``collections.Counter``)."""
    return Py2Dict(counts.items()) if order == "py2" else dict(counts)


def most_common(
    counter: Py2Dict | Mapping[Py2Key, int], n: int | None = None
) -> list[tuple[Py2Key, int]]:
    """``Counter.most_common(n)``: by count, ties in the counter's iteration order
    (``heapq.nlargest`` / ``sorted`` are stable here)."""
    ranked = sorted(counter.items(), key=lambda kv: -kv[1])
    return ranked if n is None else ranked[:n]


def load_count_file(path: str, order: str) -> WordDict:
    """A ``*.count.pkl`` (a pickled ``collections.Counter``) of an earlier run, read with
    a loader that builds nothing but a Counter's dict."""

    class _Loader(pickle.Unpickler):
        def find_class(self, module, name):
            if (module, name) == ("collections", "Counter"):
                return lambda mapping=(): mapping
            raise pickle.UnpicklingError(f"refused to unpickle {module}.{name}")

    try:
        with open_input(path, "a word-count pickle") as f:
            raw = _Loader(f, encoding="bytes").load()
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError) as err:
        raise LegacyInputError(path, f"not a readable word-count pickle ({err})") from None
    if not isinstance(raw, dict) or not all(isinstance(v, int) for v in raw.values()):
        raise LegacyInputError(path, "not a word-count pickle (expected a Counter of words)")
    counter = new_dict(order)
    if isinstance(counter, Py2Dict):  # order "py2". Counter(d) on an empty Counter:
        # dict.update(d) = PyDict_Merge
        counter.merge_from(Py2Dict(raw.items()))
    else:
        counter.update(raw)
    return counter


@dataclass
class Corpus:
    """One input file: its name, base name, lines and (when counted) word counts."""

    path: str
    base: str
    lines: list[bytes]
    counter: WordDict | None = None  # set by count_words
    reused_counts: bool = False


@dataclass
class Result:
    """What preprocessing computed, before anything is written."""

    vocab: WordDict  # word -> index, the specials first
    combined: WordDict | None  # combined word counts
    corpora: list = field(default_factory=list)
    binarized: list = field(default_factory=list)  # per corpus: list of id lists
    ngrams: np.ndarray | None = None
    ngram_counts: list = field(default_factory=list)  # per corpus: rows of n-grams


def count_words(
    corpora: Sequence[Corpus],
    char: bool,
    lowercase: bool,
    order: str,
    reuse_counts: bool,
    progress: Progress | None = None,
) -> WordDict:
    """Part I and II of ``create_dictionary`` (preprocess.py:108-153)."""
    combined: Counter[Py2Key] = Counter()
    for c in corpora:
        count_file = c.base + ".count.pkl"
        if reuse_counts and os.path.isfile(count_file):
            logger.info("Loading word counts for %s from %s", os.path.basename(c.path), count_file)
            logger.warning(
                "as in the original, the reused counts of %s are not added to the "
                "combined counts (preprocess.py:117-122); pass -o to count again",
                os.path.basename(c.path),
            )
            c.counter, c.reused_counts = load_count_file(count_file, order), True
        else:
            logger.info("Counting words in %s", os.path.basename(c.path))
            counter: Counter[Py2Key] = Counter()
            for line in c.lines:
                words = tokens(line, char, lowercase)
                counter.update(words)
                combined.update(words)
                if progress:
                    progress.update()
            c.counter = in_order(counter, order)
        logger.info(
            "%d unique words in %d sentences with a total of %d words.",
            len(c.counter),
            len(c.lines),
            sum(c.counter.values()),
        )
    ordered = in_order(combined, order)
    logger.info(
        "Total: %d unique words in %d sentences with a total of %d words.",
        len(ordered),
        sum(len(c.lines) for c in corpora),
        sum(ordered.values()),
    )
    return ordered


def build_vocab(
    corpora: Sequence[Corpus], combined: WordDict, vocab_size: int | None, order: str
) -> WordDict:
    """Part III of ``create_dictionary`` (preprocess.py:155-172)."""
    total = sum(combined.values())
    if vocab_size is not None:
        if vocab_size <= 2:
            logger.info("Building a dictionary with all unique words")
            vocab_size = len(combined) + 2
        vocab_count = most_common(combined, vocab_size - 2)
        logger.info(
            "Creating dictionary of %s most common words, covering %2.1f%% of the text.",
            vocab_size,
            100.0 * sum(n for _, n in vocab_count) / total,
        )
    else:
        logger.info("Creating dictionary of all words")
        last = corpora[-1].counter
        assert last is not None  # count_words counted it
        vocab_count = most_common(last)  # the last file's counts: a quirk
    vocab = new_dict(order)
    word: Py2Key
    for word, index in SPECIALS:  # the literal {'UNK': 1, '<s>': 0, '</s>': 0}
        vocab[word] = index
    for i, (word, _) in enumerate(vocab_count):
        vocab[word] = i + 2
    return vocab


def binarize(
    corpora: Sequence[Corpus],
    vocab: WordDict,
    char: bool,
    lowercase: bool,
    ngram: int | None,
    progress: Progress | None = None,
) -> tuple[list[list[list[int]]], list[int], np.ndarray | None]:
    """``binarize`` (preprocess.py:176-256) without the writing: per-corpus id lists, and
    the n-gram rows (``[0]*(n-1) + ids + [0]`` windows) when ``ngram``."""
    per_corpus, counts, blocks = [], [], []
    lookup = dict(vocab.items())  # the same mapping; only the lookups get faster
    for c in corpora:
        logger.info("Binarizing %s.", os.path.basename(c.path))
        sentences = []
        for line in c.lines:
            ids = [lookup.get(w, 1) for w in tokens(line, char, lowercase)]
            if progress:
                progress.update()
            sentences.append(ids)
            if ngram:
                padded = np.asarray([0] * (ngram - 1) + ids + [0], dtype=np.int64)
                blocks.append(np.lib.stride_tricks.sliding_window_view(padded, ngram))
        per_corpus.append(sentences)
        counts.append(sum(len(s) + 1 for s in sentences))
    grams = None
    if ngram:
        grams = (np.concatenate(blocks) if blocks else np.zeros((0, ngram), np.int64)).astype(
            np.uint16
        )
    return per_corpus, counts, grams


def invert(vocab: WordDict, order: str) -> WordDict:
    """``invert-dict.py``: index -> word, the word iterated last winning a shared index."""
    ivocab = new_dict(order)
    for word, index in vocab.items():
        ivocab[index] = word
    return ivocab


def split_rows(
    n_rows: int, split: float, rng: np.random.RandomState
) -> tuple[np.ndarray, np.ndarray]:
    """``-s``: (validation rows, training rows) as preprocess.py:217-233 / 243-254 choose
    them (``choice(n, rows, replace=False)``, then the rest in order)."""
    rows = int(split) if split >= 1 else int(n_rows * split)
    logger.info(
        "Saving training set (%d samples) and validation set (%d samples).", n_rows - rows, rows
    )
    valid = rng.choice(n_rows, rows, replace=False)
    return valid, np.setdiff1d(np.arange(n_rows), valid, True)


def shuffle_order(n: int, seed: int | None) -> np.ndarray:
    """``shuffle-hdf5.py:51-52`` (``idxs = arange(n); numpy.random.shuffle(idxs)``) with the
    global generator replaced by ``RandomState(seed)``: the order the original gives after
    ``numpy.random.seed(seed)``."""
    idxs = np.arange(n)
    np.random.RandomState(seed).shuffle(idxs)
    return idxs
