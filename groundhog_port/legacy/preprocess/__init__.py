"""GroundHog's data preparation (``experiments/nmt/preprocess/``), file for file.

* :func:`preprocess` -- ``preprocess.py``: vocabulary, binarized text, counts, n-grams;
* :func:`invert_dict` -- ``invert-dict.py``: the index -> word vocabulary;
* :func:`pkl2hdf5` -- ``convert-pkl2hdf5.py``: binarized text -> ``.h5``;
* :func:`shuffle_hdf5` -- ``shuffle-hdf5.py``: both sides of a bitext in one random order.

Files come out in GroundHog's formats (pickles byte-identical to Python 2.7 cPickle's,
:mod:`.py2pickle`; ``.h5`` in PyTables' layout, :mod:`.h5out`).  ``dict_order`` decides how
equally frequent words are ranked and which of ``<s>`` / ``</s>`` is ``ivocab[0]``:
``'py2'`` (default) as CPython 2.7 did, which produced every archived experiment
(:mod:`.py2dict`); ``'py3'`` as the same scripts under Python 3 (insertion order), which
produced the shared recordings' vocabularies.
"""

from __future__ import annotations

import logging
import os
import pickle
import secrets
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ...errors import LegacyInputError
from ...outputs import Progress, check_outputs
from ...untrusted import open_input
from . import corpus as _corpus
from .h5out import write_bitext_side, write_carray
from .py2dict import Py2Dict
from .py2pickle import Py2Counter, as_py2_dict, dumps
from .staging import Staged

logger = logging.getLogger("groundhog_port.legacy.preprocess")

__all__ = ["preprocess", "invert_dict", "pkl2hdf5", "shuffle_hdf5", "DICT_ORDERS"]
DICT_ORDERS = ("py2", "py3")
_SPECIAL_RANK = {w: r for r, (w, _) in enumerate(_corpus.SPECIALS)}


def preprocess(
    inputs: Sequence[str | os.PathLike[str]],
    dictionary: str | os.PathLike[str] = "vocab.pkl",
    binarized_text: str | os.PathLike[str] = "binarized_text.pkl",
    vocab: int | None = None,
    pickle_text: bool = False,
    ngram: int | None = None,
    split: float | None = None,
    overwrite: bool = False,
    each: bool = False,
    count: bool = False,
    char: bool = False,
    lowercase: bool = False,
    dict_order: str = "py2",
    seed: int | None = None,
    ivocab: str | os.PathLike[str] | None = None,
    h5: str | os.PathLike[str] | None = None,
) -> list[Path]:
    """``preprocess.py`` with its flags (``-d -b -v -p -n -s -o -e -c -t -l``); ``ivocab`` /
    ``h5`` also run ``invert-dict.py`` / ``convert-pkl2hdf5.py`` on the results.  Returns the
    paths written."""
    if not inputs:
        raise LegacyInputError(None, "no input files")
    if vocab is not None and vocab < 1:
        raise LegacyInputError(
            None,
            f"-v {vocab}: the vocabulary size must be at least 1 "
            "(it counts UNK, <s>/</s> and the words; the original took any "
            "-v <= 2 to mean 'every word': pass -v 1 for that)",
        )
    if ngram is not None and ngram < 1:
        raise LegacyInputError(None, f"-n {ngram}: n-grams need n >= 1")
    if split is not None and split < 0:
        raise LegacyInputError(None, f"-s {split}: the validation set size must be positive")
    if split and not ngram:
        logger.warning("-s without -n: ignored, as in the original (it splits the n-grams)")
    if h5 and not pickle_text:
        raise LegacyInputError(None, "--h5 converts the binarized text: it needs -p")
    reads = [("input", p) for p in inputs]
    # before any work: the named outputs that will be written (without -o an existing -d /
    # -b file is kept, as the original's safe_pickle did); derived names are checked below
    check_outputs(
        [
            ("-d", dictionary if overwrite else None),
            ("-b", binarized_text if pickle_text and overwrite else None),
            ("--ivocab", ivocab),
            ("--h5", h5),
        ],
        reads,
    )
    corpora = [
        _corpus.Corpus(str(p), _corpus.base_filename(str(p)), _corpus.read_lines(str(p)))
        for p in inputs
    ]
    n_lines = sum(len(c.lines) for c in corpora)
    progress = Progress(n_lines, unit="lines")
    combined = _corpus.count_words(
        corpora,
        char,
        lowercase,
        dict_order,
        reuse_counts=each and count and not overwrite,
        progress=progress,
    )
    progress.close()
    counted = combined if vocab is not None else corpora[-1].counter
    assert counted is not None  # count_words counted every corpus
    if vocab is not None and not combined and any(c.reused_counts for c in corpora):
        raise LegacyInputError(
            None,
            "every input's counts come from an earlier run's *.count.pkl, "
            "which the original leaves out of the combined counts "
            "(preprocess.py:117-122): no words to build the dictionary "
            "from; pass -o to count again",
        )
    if sum(counted.values()) == 0 or all(w in (b"", "") for w in counted):
        what = "the input files hold" if vocab is not None else f"{corpora[-1].path} holds"
        raise LegacyInputError(
            corpora[-1].path if vocab is None else None, f"empty corpus: {what} no words"
        )
    word2idx = _corpus.build_vocab(corpora, combined, vocab, dict_order)
    staged = Staged(reads)
    if each and count:
        for c in corpora:
            if not c.reused_counts:
                staged.add_bytes(
                    c.base + ".count.pkl",
                    dumps(_counter(c.counter), 2),
                    keep_existing=not overwrite,
                )
    if count:
        staged.add_bytes(
            "combined.count.pkl", dumps(_counter(combined), 2), keep_existing=not overwrite
        )
    staged.add_bytes(dictionary, dumps(word2idx, 2), keep_existing=not overwrite, flag="-d")
    if ivocab:
        staged.add_bytes(
            ivocab,
            dumps(_invert_loaded(as_py2_dict(word2idx).items(), dict_order, ivocab), 0),
            flag="--ivocab",
        )
    if ngram or pickle_text:
        progress = Progress(n_lines, unit="lines")
        sentences, ngram_counts, grams = _corpus.binarize(
            corpora, word2idx, char, lowercase, ngram, progress
        )
        progress.close()
        if ngram and len(word2idx) >= np.iinfo(np.uint16).max:
            raise LegacyInputError(
                None,
                f"-n: {len(word2idx)} words do not fit the uint16 n-gram array (preprocess.py:178)",
            )
        rng = np.random.RandomState(_seed(seed, "-s") if split and ngram else 0)
        start = 0
        for c, sents, n in zip(corpora, sentences, ngram_counts):
            if each and pickle_text:
                staged.add_bytes(c.base + ".pkl", dumps(sents, 2), keep_existing=not overwrite)
            if each and ngram:
                assert grams is not None  # binarize made them (ngram)
                _stage_ngrams(staged, grams[start : start + n], c.base, split, rng, overwrite)
            start += n
        flat = [s for sents in sentences for s in sents]
        if pickle_text:
            staged.add_bytes(binarized_text, dumps(flat, 2), keep_existing=not overwrite, flag="-b")
            if h5:
                staged.add(h5, lambda tmp: write_bitext_side(tmp, flat), flag="--h5")
        if ngram:
            _stage_ngrams(staged, grams, "combined", split, rng, overwrite)
    return staged.commit()


def _counter(counts):
    return Py2Counter(counts if isinstance(counts, Py2Dict) else Py2Dict(counts.items()))


def _stage_ngrams(staged, grams, name, split, rng, overwrite):
    """``safe_hdf`` of the n-grams, split into ``NAME_valid`` / ``NAME_train`` with ``-s``."""
    parts = [(name, grams)]
    if split:
        valid, train = _corpus.split_rows(len(grams), split, rng)
        parts = [(name + "_valid", grams[valid]), (name + "_train", grams[train])]
    for part, array in parts:
        staged.add(
            part + ".hdf",
            lambda tmp, a=array, p=part: write_carray(tmp, p.replace(".", ""), a),
            keep_existing=not overwrite,
        )


def _seed(seed, what):
    if seed is None:
        seed = secrets.randbelow(2**32)
        logger.info("%s: no --seed given, using --seed %d", what, seed)
    return seed


def _invert_loaded(items, order, where):
    """``invert-dict.py:14-18`` on a vocabulary whose pickle holds ``items`` in this order.

    ``py2``: ``cPickle.load`` rebuilt the dict by inserting the items in file order, and
    ``iteritems`` walks that dict in Python 2's order.  ``py3``: the Python-3 runs iterated
    the dict in the order ``preprocess.py`` inserted it (``UNK``, ``<s>``, ``</s>``, then the
    words by index), which is what is reconstructed here from any file order."""
    items = list(items)
    for word, index in items:
        if (
            not isinstance(word, (bytes, str))
            or isinstance(index, bool)
            or not isinstance(index, int)
        ):
            raise LegacyInputError(
                where, f"not a word -> index vocabulary: entry {word!r}: {index!r}"
            )
    if order == "py2":
        loaded = Py2Dict(items)
    else:
        loaded = dict(sorted(items, key=lambda kv: (kv[1], _SPECIAL_RANK.get(kv[0], 3))))
    return _corpus.invert(loaded, order)


def _load_raw(path, what):
    """A plain-data pickle with Python 2's ``str`` kept as ``bytes`` (no globals allowed)."""
    from legacy_states import MAX_PICKLE_BYTES

    class _Plain(pickle.Unpickler):
        def find_class(self, module, name):
            raise pickle.UnpicklingError(f"refused to unpickle {module}.{name}: plain data only")

    try:
        size = Path(path).stat().st_size
        if size > MAX_PICKLE_BYTES:
            raise LegacyInputError(path, f"{size} bytes: larger than any {what}")
        with open_input(path, what) as f:
            return _Plain(f, encoding="bytes").load()
    except FileNotFoundError:
        raise LegacyInputError(path, "no such file") from None
    except (
        OSError,
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        IndexError,
        KeyError,
        AttributeError,
        RecursionError,
        MemoryError,
        UnicodeDecodeError,
    ) as err:
        raise LegacyInputError(
            path, f"not a readable {what} pickle ({type(err).__name__}: {err})"
        ) from None


def invert_dict(
    src: str | os.PathLike[str], dst: str | os.PathLike[str], dict_order: str = "py2"
) -> list[Path]:
    """``invert-dict.py SRC DST``."""
    from .. import vocab as _vocab

    reads = [("INPUT", src)]
    check_outputs([("OUTPUT", dst)], reads)  # before any work: never over the input
    _vocab.load_word2idx(src)  # the port's checks: a word -> index dict, UTF-8 words
    raw = _load_raw(src, "vocabulary")
    staged = Staged(reads)
    staged.add_bytes(dst, dumps(_invert_loaded(raw.items(), dict_order, src), 0), flag="OUTPUT")
    return staged.commit()


def pkl2hdf5(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> list[Path]:
    """``convert-pkl2hdf5.py SRC DST``: a pickled list of id lists -> one ``.h5`` side."""
    from legacy_states import safe_load_pickle

    reads = [("INPUT", src)]
    check_outputs([("OUTPUT", dst)], reads)  # before any work: never over the input
    raw = safe_load_pickle(src)  # the port's hardened loader: plain data, size and depth limits
    if not isinstance(raw, list) or not all(
        isinstance(s, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in s)
        for s in raw
    ):
        raise LegacyInputError(
            src,
            "not a binarized text (expected a pickled list of lists of "
            "word ids, preprocess.py -p output)",
        )
    staged = Staged(reads)
    staged.add(dst, lambda tmp: _write_side(tmp, raw, src), flag="OUTPUT")
    paths = staged.commit()
    logger.info("processed %d phrases", len(raw))
    return paths


def _write_side(tmp, sentences, src):
    try:
        write_bitext_side(tmp, sentences)
    except ValueError as err:
        raise LegacyInputError(src, str(err)) from None


def shuffle_hdf5(
    src_in: str | os.PathLike[str],
    trg_in: str | os.PathLike[str],
    src_out: str | os.PathLike[str],
    trg_out: str | os.PathLike[str],
    seed: int | None = None,
) -> tuple[list[Path], np.ndarray]:
    """``shuffle-hdf5.py``: both sides reordered by one permutation, pairs kept together.
    Returns ``(paths, order)``; ``order[k]`` is the input pair at output row ``k``."""
    from ..data import H5Phrases, read_h5_bitext

    reads = [("SOURCE_INPUT", src_in), ("TARGET_INPUT", trg_in)]
    outputs = [("SOURCE_OUTPUT", src_out), ("TARGET_OUTPUT", trg_out)]
    check_outputs(outputs, reads)  # before any work: never over an input
    src, trg = read_h5_bitext(src_in), read_h5_bitext(trg_in)
    if len(src) != len(trg):
        raise LegacyInputError(
            trg_in,
            f"{len(trg)} sentences, but {src_in} has {len(src)}: not two sides of one bitext",
        )
    logger.info("Data len: %d", len(src))
    order = _corpus.shuffle_order(len(src), _seed(seed, "shuffle-hdf5"))
    staged = Staged(reads)
    for side, (flag, out) in zip((src, trg), outputs):

        def write(tmp: Path, s: H5Phrases = side) -> None:
            write_bitext_side(tmp, [s.sentence(int(i)) for i in order])

        staged.add(out, write, flag=flag)
    paths = staged.commit()
    logger.info("processed %d phrase pairs", len(order))
    return paths, order
