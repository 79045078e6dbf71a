"""Batches exactly as GroundHog builds them: score.py's text path and the ``.h5`` bitext path.

Two ways into a batch, both ending in the same :class:`Batch` of ``(time, batch)`` arrays
(``x``/``y`` int64, ``x_mask``/``y_mask`` float32):

* **Text** (``score.py --mode=batch`` with text files): :func:`iter_text_batches`, a port of
  ``BatchTxtIterator`` / ``BatchBiTxtIterator`` (``experiments/nmt/score.py:20-77``).  Each
  line goes through ``parse_input`` (:mod:`groundhog_port.legacy.vocab`), consecutive groups of
  ``state['bs']`` lines form a batch, padding is **0**, the mask covers the words and the
  appended ``null_sym``.
* **GroundHog h5 bitext** (``score.py`` with ``.h5`` sources, and training):
  :func:`iter_h5_batches`, a port of ``PytablesBitextFetcher.run``
  (``groundhog/datasets/TM_dataset.py:162-219``), ``PytablesBitextIterator.next``
  (``TM_dataset.py:257-262``), ``get_batch_iterator``'s homogenous-batch generator
  (``experiments/nmt/encdec.py:132-186``) and ``create_padded_batch``
  (``encdec.py:32-130``).  Padding here is **null_sym** (not 0), and ids ``>= n_sym`` become
  ``unk_sym``.

Legacy quirks kept (each named again where it lives):

* ``QUIRK parse_input n_sym_source`` -- text path only: the target side is also compared with
  ``n_sym_source`` (lives in :func:`groundhog_port.legacy.vocab.parse_input`, ``encdec.py:1504``).
* ``QUIRK h5 pad null_sym`` -- h5 batches are padded with ``null_sym`` and only the first
  padding position is masked in (``encdec.py:81-88``); text batches are padded with 0.
* ``QUIRK h5 skip long pairs`` -- the fetcher silently skips every pair with either side longer
  than ``seqlen`` (``TM_dataset.py:210-211``); they never reach a batch, not even truncated.
* ``QUIRK h5 sort ties`` -- with ``sort_k_batches > 1`` the pairs of ``sort_k_batches`` fetches
  are ordered by ``numpy.argsort(max(len_x, len_y))`` (``encdec.py:149``), numpy's default
  *unstable* quicksort.  The tie order is that of numpy 1.23.5's introsort (the numpy of the
  recordings).  Newer numpy orders ties differently (on x86 it may dispatch argsort to
  x86-simd-sort): numpy 2.4.6 on an AVX2 machine picks a different *set* of pairs for the first
  training batch of every recorded case.  :func:`legacy_argsort` therefore re-implements the
  1.23.5 algorithm in pure Python (checked against numpy 1.23.5 on ~550 random/patterned inputs
  and an input that reaches its heapsort fallback).
  ``sort_k_batches == 1`` (what score.py forces, ``score.py:116``) keeps file order.
* ``QUIRK h5 invalid pairs`` -- ``create_padded_batch`` drops columns that are "invalid"
  (both masks empty, or a sequence filling the whole width without ending in ``null_sym``;
  possible only with ``trim_batches=False``), *before* mapping ids ``>= n_sym`` to UNK
  (``encdec.py:99-125``); a batch with no valid column is skipped, and score.py's
  ``--n-batches`` counts only the batches that were yielded (``score.py:156-160``).
* ``QUIRK h5 lost tail`` -- with ``sort_k_batches > 1`` and a finite loop, pairs of a trailing
  incomplete group of fetches never form a batch (the original crashes there, see below).

Deviations (the original crashed, hung, or silently misread; the port raises
:class:`~groundhog_port.errors.LegacyInputError` naming the file instead, or ends cleanly):

* End of an ``.h5`` file with ``use_infinite_loop=False``: the fetcher's end marker ``[None]``
  is a non-empty (truthy) list, so ``PytablesBitextIterator.next`` (``TM_dataset.py:258-262``)
  indexes ``batch[1]`` and dies with ``IndexError: list index out of range`` after every batch
  had been scored (also when ``--n-batches`` equals the number of batches: score.py fetches one
  more batch before it checks the count, ``score.py:156-160``).  The port simply stops after
  the same batches.
* Source and target ``.h5`` files with different numbers of pairs: an ``assert`` in the fetcher
  *thread* (``TM_dataset.py:183``) kills the thread and the main thread waits forever on the
  queue.  The port raises.
* Text files of different lengths: the original either stops silently at the shorter file or
  fails ``assert x.shape[1] == y.shape[1]`` (``score.py:76``) in the last batch.  The port
  raises before yielding anything, naming both line counts.
* Unknown words without ``allow_unk``: ``parse_input`` raises a bare ``Exception("Unknown word
  ...")`` mid-run, after earlier batches were scored.  The port checks every line first and
  raises naming the file and the 1-based line number.
* Text lines that are not UTF-8: Python 2 read bytes and looked them up as they were (they
  became UNK); the port raises naming the line.
* ``.h5`` index rows pointing past the end of ``/phrases`` (truncated files) were silently
  clipped by the PyTables slice; the port raises.  Negative word ids (which Theano's indexing
  would have wrapped around) raise too.

Text reading (how Python 2's ``for line in open(path)`` + ``line.strip()`` saw a file):
lines end at ``\\n`` only (a lone ``\\r`` does not end a line, unlike Python 3's universal
newlines); ``strip()`` removes ASCII whitespace only (``' \\t\\n\\r\\x0b\\x0c'``, as ``str.strip``
on Py2 byte strings), so Windows ``\\r\\n`` endings lose their ``\\r`` exactly as in the original
(no deviation), and a missing final newline still yields the last line.  A UTF-8 byte-order mark
is *not* removed (Python 2 kept it: the first word becomes unknown).  An empty (or blank) line is
a sentence of just ``null_sym``, as ``parse_input`` makes it (``encdec.py:1499-1509``), with a
mask of one position -- exactly what the original scored.
"""

from __future__ import annotations

import itertools
import numbers
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

import numpy as np
from numpy.typing import ArrayLike

from legacy_states import VOCABULARY_KEYS

from ..errors import LegacyInputError, quoted
from ..untrusted import check_special, iter_sentences, reading
from .h5guard import check_dataset, check_global_heaps, check_links
from .vocab import parse_input

__all__ = [
    "Batch",
    "iter_text_batches",
    "read_text_lines",
    "read_h5_phrases",
    "read_h5_bitext",
    "H5Phrases",
    "create_padded_batch",
    "iter_h5_batches",
    "first_training_batch",
    "legacy_argsort",
]

#: ASCII whitespace as ``str.strip()`` / ``str.split()`` of Python 2 byte strings saw it.
PY2_WHITESPACE = " \t\n\r\x0b\x0c"


@dataclass
class Batch:
    """One batch in GroundHog's layout: sequences are columns, time runs down the rows.

    ``x``, ``y``: int64, ``(max_len, n)``; ``x_mask``, ``y_mask``: float32, same shapes, 1.0 on
    every word and on the appended ``null_sym``.  ``line_numbers``: int64 ``(n,)``, the 0-based
    line (text) or pair (h5) index of each column in the input files -- our bookkeeping, the
    original did not track it.
    """

    x: np.ndarray
    x_mask: np.ndarray
    y: np.ndarray
    y_mask: np.ndarray
    line_numbers: np.ndarray | None = None
    #: h5 path: the fetcher's offset after the fetches this batch came from -- the iterator's
    #: ``next_offset`` that MainLoop saves for resuming (TM_dataset.py:216, :261)
    next_offset: int | None = None

    @property
    def size(self) -> int:
        return int(self.x.shape[1])

    def as_dict(self) -> dict:
        """The dict the original iterators yield (``score.py:77``, ``encdec.py:127-128``)."""
        return {"x": self.x, "x_mask": self.x_mask, "y": self.y, "y_mask": self.y_mask}


#: state values used as whole numbers when building batches
_WHOLE_NUMBER_KEYS = frozenset({"bs", "seqlen", "sort_k_batches", *VOCABULARY_KEYS})


def _state_value(state, key):
    try:
        value = state[key]
    except KeyError:
        raise LegacyInputError(None, f"state has no '{key}' (needed to build batches)") from None
    if key in _WHOLE_NUMBER_KEYS and not (
        (isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)))
        or (isinstance(value, float) and value.is_integer())
    ):
        raise LegacyInputError(
            None,
            f"state['{key}'] = {quoted(value)} is not a whole number (needed to build batches)",
        )
    return value


# ----------------------------------------------------------------------------------------------
# Text path: score.py BatchTxtIterator / BatchBiTxtIterator
# ----------------------------------------------------------------------------------------------


def read_text_lines(path: str | os.PathLike[str], part: str = "src") -> list[str]:
    """The lines of a text file as Python 2's ``for line in open(path)`` + ``.strip()`` gave them.

    Lines end at ``b'\\n'`` only; each is decoded as UTF-8 (non-UTF-8 bytes raise
    :class:`LegacyInputError` with the 1-based line number -- the Py2 original looked the raw
    bytes up and got UNK) and stripped of ASCII whitespace only, which also removes the ``\\r``
    of Windows line endings (Py2 ``str.strip()`` on bytes did the same).  No final newline: the
    last line still counts; a final newline does not start an extra empty line.  Read line
    by line under the line-length limit and the parse budget; a FIFO or device is refused
    by type, and a gzip, bzip2 or xz file read decompressed
    (:func:`groundhog_port.untrusted.iter_lines`).  A WMT SGML / XML test set (told by its
    content) gives its segments, of ``part`` in a ``<dataset>`` (``"src"``, ``"ref"``), as
    sacrebleu reads them (:func:`groundhog_port.untrusted.iter_sentences`): its markup is
    never a sentence.
    """
    return [_decoded(path, number, raw) for number, raw in iter_sentences(path, part=part)]


def first_text_lines(path: str | os.PathLike[str], n: int, part: str = "src") -> list[str]:
    """The first ``n`` lines of :func:`read_text_lines` without reading the rest of the file
    (a candidate test set may be a corpus of millions of lines), under the same line-length
    limit (a 100 MB first line is refused, not read) and decompressed the same way."""
    lines: list[str] = []
    if n <= 0:
        return lines
    for number, raw in iter_sentences(path, "a text file", whole=False, part=part):
        lines.append(_decoded(path, number, raw))
        if len(lines) >= n:
            break
    return lines


def _decoded(path, number, chunk) -> str:
    """One line of a text file as Python 2's ``line.strip()`` gave it, decoded as UTF-8."""
    try:
        text = chunk.decode("utf-8")
    except UnicodeDecodeError as err:
        raise LegacyInputError(
            path,
            f"line {number}: not valid UTF-8 (byte 0x{chunk[err.start]:02x} at column "
            f"{err.start + 1})",
        ) from None
    return text.strip(PY2_WHITESPACE)


def _pack_text(seqs: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """``BatchTxtIterator._pack`` (``score.py:29-37``): zero padding, mask over each sequence
    (its words and the appended null_sym), transposed to (time, batch)."""
    num = len(seqs)
    max_len = max(len(s) for s in seqs)
    x = np.zeros((num, max_len), dtype=np.int64)
    x_mask = np.zeros((num, max_len), dtype=np.float32)
    for i, seq in enumerate(seqs):
        x[i, : len(seq)] = seq
        x_mask[i, : len(seq)] = 1.0
    return np.ascontiguousarray(x.T), np.ascontiguousarray(x_mask.T)


def _parse_lines(path, lines, state, word2idx, raise_unk, unk_sym, null_sym):
    """``parse_input`` on every line (``score.py:46-48``); its errors (e.g. ``UnknownWordError``,
    where the original raised a bare ``Exception("Unknown word ...")``) get the file and the
    1-based line number."""
    seqs = []
    for number, line in enumerate(lines, start=1):
        try:
            seq, _ = parse_input(
                state, word2idx, line, raise_unk=raise_unk, unk_sym=unk_sym, null_sym=null_sym
            )
        except LegacyInputError as err:
            raise LegacyInputError(path, f"line {number}: {err.problem}") from None
        seqs.append([int(i) for i in seq])
    return seqs


def iter_text_batches(
    state: dict[str, Any],
    # None is no file (a TypeError when read); allowed in the type only because
    # search.scoring.batches_for passes its optional paths without narrowing them
    src_path: str | os.PathLike[str] | None,
    trg_path: str | os.PathLike[str] | None,
    word2idx_src: dict[str, int],
    word2idx_trg: dict[str, int],
    allow_unk: bool = True,
    bs: int | None = None,
) -> Iterator[Batch]:
    """Batches of ``score.py --mode=batch --src TXT --trg TXT`` (``BatchBiTxtIterator``,
    ``score.py:56-77``, built at ``score.py:141-143`` with ``batch_size=state['bs']`` and
    ``raise_unk=not --allow-unk``).

    Both files are read, parsed and checked *before* the first batch is returned (the original
    failed lazily, mid-run); the returned iterator then yields :class:`Batch` objects of
    ``bs`` consecutive line pairs (the last one may be smaller), zero padded, with
    ``line_numbers`` = 0-based line indices.  Source lines are parsed with
    ``unk_sym_source``/``null_sym_source``, target lines with ``unk_sym_target``/
    ``null_sym_target`` -- both through ``parse_input``, so the target side keeps
    ``QUIRK parse_input n_sym_source`` (target ids ``>= n_sym_source`` become UNK, and without
    ``allow_unk`` they raise as unknown words).
    """
    batch_size = int(_state_value(state, "bs") if bs is None else bs)
    if batch_size < 1:
        raise LegacyInputError(None, f"batch size must be positive, got {batch_size}")
    if src_path is None or trg_path is None:  # os.stat(None) raised this TypeError before
        raise TypeError("iter_text_batches: a text file for each side is needed, got None")
    src_lines = read_text_lines(src_path)
    trg_lines = read_text_lines(trg_path, part="ref")
    if len(src_lines) != len(trg_lines):
        raise LegacyInputError(
            src_path,
            f"{len(src_lines)} source lines but {len(trg_lines)} target lines in "
            f"{trg_path}; score.py needs one target line per source line",
        )
    raise_unk = not allow_unk
    xs = _parse_lines(
        src_path,
        src_lines,
        state,
        word2idx_src,
        raise_unk,
        _state_value(state, "unk_sym_source"),
        _state_value(state, "null_sym_source"),
    )
    ys = _parse_lines(
        trg_path,
        trg_lines,
        state,
        word2idx_trg,
        raise_unk,
        _state_value(state, "unk_sym_target"),
        _state_value(state, "null_sym_target"),
    )
    return _text_batches(xs, ys, batch_size)


def _text_batches(xs, ys, batch_size) -> Iterator[Batch]:
    for start in range(0, len(xs), batch_size):
        stop = min(start + batch_size, len(xs))
        x, x_mask = _pack_text(xs[start:stop])
        y, y_mask = _pack_text(ys[start:stop])
        yield Batch(x, x_mask, y, y_mask, np.arange(start, stop, dtype=np.int64))


# ----------------------------------------------------------------------------------------------
# GroundHog .h5 bitexts (PyTables: /phrases Int32 EArray, /indices table of (length, pos))
# ----------------------------------------------------------------------------------------------


@dataclass
class H5Phrases:
    """One side of a GroundHog bitext, read whole: ``phrases`` (int64, all sentences
    concatenated), ``pos`` and ``length`` (int64, one row per sentence)."""

    path: str
    phrases: np.ndarray
    pos: np.ndarray
    length: np.ndarray

    def __len__(self) -> int:
        return int(self.length.shape[0])

    def sentence(self, i: int) -> np.ndarray:
        """``data[pos:pos + length].astype('int64')`` (``TM_dataset.py:212-213``)."""
        p = int(self.pos[i])
        return self.phrases[p : p + int(self.length[i])]


_H5_LAYOUT = (
    "expected GroundHog's PyTables layout (convert-pkl2hdf5.py): a 1-D integer "
    "'/phrases' array and an '/indices' table with integer columns 'pos' and 'length'"
)


def read_h5_bitext(path: str | os.PathLike[str]) -> H5Phrases:
    """Read one ``.h5`` side (the ``table_name='/phrases'``, ``index_name='/indices'`` nodes that
    ``PytablesBitextFetcher`` opens, ``TM_dataset.py:175-181``) with h5py, checking the layout.

    Raises :class:`LegacyInputError` naming the file when it is not HDF5, lacks a node, has a
    non-integer phrase array, an index table without ``pos``/``length``, a row that points past
    the end of ``/phrases`` (truncated file), negative ids, or cannot be read.
    """
    try:
        import h5py
    except ImportError as err:  # pragma: no cover - h5py is a dependency
        raise LegacyInputError(path, f"reading .h5 bitexts needs h5py ({err})") from None
    check_special(path, "an .h5 bitext")  # HDF5 would block in open() on a FIFO
    # every h5py call on the file runs inside the guard: a damaged file can make h5py raise
    # anything (issue 17: a UnicodeDecodeError for a field name of '/indices')
    with reading(path, "cannot read the data (truncated or damaged file?)"):
        try:
            handle = h5py.File(path, "r")
        except FileNotFoundError:
            raise LegacyInputError(path, "no such file") from None
        except OSError as err:
            raise LegacyInputError(
                path, f"not a readable HDF5 file ({err}); {_H5_LAYOUT}"
            ) from None
        with handle:
            check_global_heaps(path)
            check_links(handle, path)
            for name in ("phrases", "indices"):
                if name not in handle or not isinstance(handle[name], h5py.Dataset):
                    raise LegacyInputError(path, f"no dataset '/{name}'; {_H5_LAYOUT}")
            ph, ix = handle["phrases"], handle["indices"]
            if ph.ndim != 1 or ph.dtype.kind not in "iu":
                raise LegacyInputError(
                    path,
                    f"'/phrases' is {ph.ndim}-D {ph.dtype}, not a 1-D integer array; {_H5_LAYOUT}",
                )
            names = ix.dtype.names or ()
            if ix.ndim != 1 or "pos" not in names or "length" not in names:
                raise LegacyInputError(
                    path,
                    f"'/indices' has dtype {ix.dtype}, not a table with columns 'pos' and "
                    f"'length'; {_H5_LAYOUT}",
                )
            for col in ("pos", "length"):
                if ix.dtype[col].kind not in "iu":
                    raise LegacyInputError(
                        path,
                        f"'/indices' column '{col}' is {ix.dtype[col]}, not an integer; "
                        f"{_H5_LAYOUT}",
                    )
            # the loader holds int64 copies: of /phrases, and of both /indices columns
            check_dataset(ix, path, "'/indices'", loader_itemsize=16)
            check_dataset(ph, path, "'/phrases'", loader_itemsize=8)
            table = ix[()]
            phrases = ph[()].astype(np.int64)
    pos = table["pos"].astype(np.int64)
    length = table["length"].astype(np.int64)
    if pos.size and (pos.min() < 0 or length.min() < 0):
        raise LegacyInputError(path, "'/indices' holds negative positions or lengths")
    ends = pos + length
    if ends.size and ends.max() > phrases.shape[0]:
        row = int(np.argmax(ends > phrases.shape[0]))
        raise LegacyInputError(
            path,
            f"'/indices' row {row} (pos {int(pos[row])}, length {int(length[row])}) points "
            f"past the end of '/phrases' ({phrases.shape[0]} ids): truncated file?",
        )
    if phrases.size and phrases.min() < 0:
        at = int(np.argmin(phrases))
        raise LegacyInputError(
            path, f"'/phrases' holds a negative word id ({int(phrases[at])} at position {at})"
        )
    return H5Phrases(str(path), phrases, pos, length)


def read_h5_phrases(path: str | os.PathLike[str]) -> list[np.ndarray]:
    """Every sentence of a GroundHog ``.h5`` file, in file order, as int64 arrays (no EOS)."""
    side = read_h5_bitext(path)
    return [side.sentence(i) for i in range(len(side))]


#: the sequences of one side of a batch: lists of ids or int arrays (no end of sequence)
Sequences = Sequence[Sequence[int] | np.ndarray]


@overload
def create_padded_batch(
    state: dict[str, Any], x_seqs: Sequences, y_seqs: Sequences, return_dict: Literal[False] = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None: ...
@overload
def create_padded_batch(
    state: dict[str, Any], x_seqs: Sequences, y_seqs: Sequences, return_dict: Literal[True]
) -> dict[str, np.ndarray] | None: ...
def create_padded_batch(
    state: dict[str, Any], x_seqs: Sequences, y_seqs: Sequences, return_dict: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | dict[str, np.ndarray] | None:
    """Port of ``create_padded_batch`` (``experiments/nmt/encdec.py:32-130``).

    ``x_seqs``/``y_seqs`` are the sequences themselves (the original took ``[seqs]`` and used
    only element 0).  Returns ``(X, Xmask, Y, Ymask)`` (or the dict with ``return_dict``), or
    ``None`` when no column is valid.

    * width: ``min(seqlen, longest) + 1`` with ``trim_batches`` (``encdec.py:58-62``), else
      ``seqlen``; longer sequences are cut to the width;
    * ``QUIRK h5 pad null_sym``: every position after a sequence holds ``null_sym``, the mask
      covers the sequence and the first ``null_sym`` only (``encdec.py:72-97``);
    * ``QUIRK h5 invalid pairs``: columns with both masks empty or a sequence that fills the
      width without ending in ``null_sym`` are dropped (``encdec.py:99-121``), then ids
      ``>= n_sym_source``/``n_sym_target`` become ``unk_sym_source``/``unk_sym_target``
      (``encdec.py:124-125``; the invalidity test sees the ids before that mapping).
    """
    out = _padded_batch(state, x_seqs, y_seqs)
    if out is None:
        return None
    X, Xmask, Y, Ymask, _ = out
    if return_dict:
        return {"x": X, "x_mask": Xmask, "y": Y, "y_mask": Ymask}
    return X, Xmask, Y, Ymask


def _pad_side(seqs, width: int, n: int, null_sym: int) -> tuple[np.ndarray, np.ndarray]:
    """One side of the batch, ``(width, n)`` ids and mask (encdec.py:73-88 for the source,
    91-97 for the target): ``null_sym`` after each sequence, the mask over the sequence
    and its first ``null_sym``; slices past the width are clipped by numpy, i.e. sequences
    are cut."""
    ids = np.zeros((width, n), dtype=np.int64)
    mask = np.zeros((width, n), dtype=np.float32)
    for idx, seq in enumerate(seqs):
        ids[: len(seq), idx] = seq[:width]
        if len(seq) < width:
            ids[len(seq) :, idx] = null_sym
        mask[: len(seq), idx] = 1.0
        if len(seq) < width:
            mask[len(seq), idx] = 1.0
    return ids, mask


def _padded_batch(state, x_seqs, y_seqs):
    """create_padded_batch, also returning the kept column indices."""
    seqlen = int(_state_value(state, "seqlen"))
    null_src = int(_state_value(state, "null_sym_source"))
    null_trg = int(_state_value(state, "null_sym_target"))
    x_seqs = [np.asarray(s, dtype=np.int64) for s in x_seqs]
    y_seqs = [np.asarray(s, dtype=np.int64) for s in y_seqs]
    mx = my = seqlen
    if _state_value(state, "trim_batches"):
        mx = min(seqlen, max(len(s) for s in x_seqs)) + 1
        my = min(seqlen, max(len(s) for s in y_seqs)) + 1
    if mx < 1 or my < 1:
        raise LegacyInputError(None, f"batch width {min(mx, my)} < 1 (state seqlen={seqlen})")
    n = len(x_seqs)
    X, Xmask = _pad_side(x_seqs, mx, n, null_src)
    Y, Ymask = _pad_side(y_seqs, my, n, null_trg)
    # encdec.py:99-113: QUIRK h5 invalid pairs
    null_inputs = np.zeros(n)
    for idx in range(n):
        if Xmask[:, idx].sum() == 0 and Ymask[:, idx].sum() == 0:
            null_inputs[idx] = 1
        if Xmask[-1, idx] and X[-1, idx] != null_src:
            null_inputs[idx] = 1
        if Ymask[-1, idx] and Y[-1, idx] != null_trg:
            null_inputs[idx] = 1
    keep = (1.0 - null_inputs).nonzero()[0]
    X, Y, Xmask, Ymask = X[:, keep], Y[:, keep], Xmask[:, keep], Ymask[:, keep]
    if len(keep) <= 0:
        return None
    # encdec.py:124-125: unknown words
    X[X >= int(_state_value(state, "n_sym_source"))] = int(_state_value(state, "unk_sym_source"))
    Y[Y >= int(_state_value(state, "n_sym_target"))] = int(_state_value(state, "unk_sym_target"))
    return X, Xmask, Y, Ymask, keep


def legacy_argsort(keys: ArrayLike) -> np.ndarray:
    """``numpy.argsort(keys)`` (default kind ``'quicksort'``) exactly as numpy 1.23.5 ordered
    ties, for 1-D integer keys (``QUIRK h5 sort ties``).

    Pure-Python port of numpy 1.23's ``aquicksort_`` (``numpy/core/src/npysort/quicksort.cpp``):
    introsort on an index array -- median-of-3 pivot, Hoare partition that stops on keys equal to
    the pivot, the larger partition pushed on a stack, insertion sort once a partition has at most
    16 elements (``pr - pl <= SMALL_QUICKSORT = 15``), heapsort (``aheapsort_``) below the depth
    limit ``2 * floor(log2(n))``.  numpy 2 on x86 sends the same call to x86-simd-sort, which
    orders ties differently.  Meant for the few thousand keys of ``sort_k_batches * bs``.
    """
    v = [int(k) for k in np.asarray(keys).ravel()]
    num = len(v)
    tosort = list(range(num))
    if num < 2:
        return np.asarray(tosort, dtype=np.int64)
    SMALL_QUICKSORT = 15
    stack: list[int] = []
    depth_stack: list[int] = []
    pl, pr = 0, num - 1
    cdepth = (num.bit_length() - 1) * 2  # npy_get_msb(num) * 2
    while True:
        if cdepth < 0:
            # depth limit reached (checked only when a partition is taken up): heapsort it
            _legacy_aheapsort(v, tosort, pl, pr - pl + 1)
        else:
            while pr - pl > SMALL_QUICKSORT:
                # median of three
                pm = pl + ((pr - pl) >> 1)
                if v[tosort[pm]] < v[tosort[pl]]:
                    tosort[pm], tosort[pl] = tosort[pl], tosort[pm]
                if v[tosort[pr]] < v[tosort[pm]]:
                    tosort[pr], tosort[pm] = tosort[pm], tosort[pr]
                if v[tosort[pm]] < v[tosort[pl]]:
                    tosort[pm], tosort[pl] = tosort[pl], tosort[pm]
                vp = v[tosort[pm]]
                pi, pj = pl, pr - 1
                tosort[pm], tosort[pj] = tosort[pj], tosort[pm]
                # Hoare partition; both scans stop on keys equal to the pivot
                while True:
                    pi += 1
                    while v[tosort[pi]] < vp:
                        pi += 1
                    pj -= 1
                    while vp < v[tosort[pj]]:
                        pj -= 1
                    if pi >= pj:
                        break
                    tosort[pi], tosort[pj] = tosort[pj], tosort[pi]
                pk = pr - 1
                tosort[pi], tosort[pk] = tosort[pk], tosort[pi]
                # push the larger partition on the stack, go on with the smaller one
                if pi - pl < pr - pi:
                    stack += [pi + 1, pr]
                    pr = pi - 1
                else:
                    stack += [pl, pi - 1]
                    pl = pi + 1
                cdepth -= 1
                depth_stack.append(cdepth)
            # insertion sort of the small partition
            for pi in range(pl + 1, pr + 1):
                vi = tosort[pi]
                vp = v[vi]
                pj = pi
                while pj > pl and vp < v[tosort[pj - 1]]:
                    tosort[pj] = tosort[pj - 1]
                    pj -= 1
                tosort[pj] = vi
        if not stack:
            break
        pr = stack.pop()
        pl = stack.pop()
        cdepth = depth_stack.pop()
    return np.asarray(tosort, dtype=np.int64)


def _legacy_aheapsort(v, tosort, start, n):
    """numpy 1.23 ``aheapsort_`` on ``tosort[start:start + n]`` (1-based heap indexing)."""

    def a_get(i):
        return tosort[start + i - 1]

    def a_set(i, val):
        tosort[start + i - 1] = val

    def sift_down(tmp, i, n):
        j = i << 1
        while j <= n:
            if j < n and v[a_get(j)] < v[a_get(j + 1)]:
                j += 1
            if v[tmp] < v[a_get(j)]:
                a_set(i, a_get(j))
                i = j
                j += j
            else:
                break
        a_set(i, tmp)

    for l in range(n >> 1, 0, -1):
        sift_down(a_get(l), l, n)
    while n > 1:
        tmp = a_get(n)
        a_set(n, a_get(1))
        n -= 1
        sift_down(tmp, 1, n)


def _fetches(
    src: H5Phrases,
    trg: H5Phrases,
    batch_size: int,
    max_len: int,
    use_infinite_loop: bool,
    start_offset: int,
) -> Iterator[list[int]]:
    """``PytablesBitextFetcher.run`` (``TM_dataset.py:168-219``): pair indices of up to
    ``batch_size`` consecutive pairs, skipping pairs with a side longer than ``max_len``
    (``QUIRK h5 skip long pairs``); the last fetch of a finite pass may be short; after it the
    original queued its end marker (here: the generator ends)."""
    data_len = len(src)
    offset = start_offset
    fits = (src.length <= max_len) & (trg.length <= max_len)
    if use_infinite_loop and not fits.any():
        # the original thread would spin forever without queueing anything
        raise LegacyInputError(
            src.path,
            f"no pair has both sides within seqlen={max_len} "
            f"(with {trg.path}); training would hang",
        )
    while True:
        last_batch = False
        picked: list[int] = []
        while len(picked) < batch_size:
            if offset == data_len:
                if use_infinite_loop:
                    offset = 0
                else:
                    last_batch = True
                    break
            here = offset
            offset += 1
            if not fits[here]:
                continue
            picked.append(here)
        if picked:
            yield picked
        if last_batch:
            return


def _open_pair(src_h5, trg_h5) -> tuple[H5Phrases, H5Phrases]:
    src = src_h5 if isinstance(src_h5, H5Phrases) else read_h5_bitext(src_h5)
    trg = trg_h5 if isinstance(trg_h5, H5Phrases) else read_h5_bitext(trg_h5)
    if len(src) != len(trg):
        raise LegacyInputError(
            src.path,
            f"{len(src)} sentences but {len(trg)} in {trg.path}; a bitext needs one "
            f"target sentence per source sentence",
        )
    return src, trg


def iter_h5_batches(
    state: dict[str, Any],
    # None: as iter_text_batches says (search.scoring.batches_for)
    src_h5: str | os.PathLike[str] | H5Phrases | None,
    trg_h5: str | os.PathLike[str] | H5Phrases | None,
    n_batches: int | None = None,
    *,
    sort_k_batches: int | None = 1,
    use_infinite_loop: bool = False,
    start_offset: int = 0,
    bs: int | None = None,
) -> Iterator[Batch]:
    """Batches of GroundHog's bitext iterator (``get_batch_iterator``, ``encdec.py:132-186``).

    Defaults are what ``score.py --mode=batch --src X.h5 --trg Y.h5`` gives it
    (``score.py:116-118``, ``score.py:134-147``): ``sort_k_batches=1`` (file order, no sort),
    ``shuffle=False``, ``use_infinite_loop=False``, ``start(0)``; ``n_batches`` is
    ``--n-batches`` (``None`` or negative: all).  For training pass
    ``sort_k_batches=state['sort_k_batches']`` (``None`` means that) and
    ``use_infinite_loop=state['use_infinite_loop']``.

    Per group: ``sort_k_batches`` fetches of ``bs`` pairs each (``TM_dataset.py:198-213``),
    concatenated; with ``sort_k_batches > 1`` ordered by :func:`legacy_argsort` of
    ``max(len_x, len_y)`` (``encdec.py:145-150``); cut into ``sort_k_batches`` slices of ``bs``
    and each padded by :func:`create_padded_batch`; empty results are skipped
    (``encdec.py:151-156``).  ``line_numbers`` are the 0-based pair indices in the files.
    ``src_h5``/``trg_h5``: paths or :class:`H5Phrases` already read.
    """
    batch_size = int(_state_value(state, "bs") if bs is None else bs)
    if sort_k_batches is None:
        sort_k_batches = _state_value(state, "sort_k_batches")
    k_batches = int(sort_k_batches)
    if batch_size < 1 or k_batches < 1:
        raise LegacyInputError(
            None, f"bs ({batch_size}) and sort_k_batches ({k_batches}) must be positive"
        )
    max_len = int(_state_value(state, "seqlen"))
    src, trg = _open_pair(src_h5, trg_h5)
    if not 0 <= start_offset <= len(src):
        raise LegacyInputError(src.path, f"start offset {start_offset} outside 0..{len(src)}")
    for key in ("trim_batches", *VOCABULARY_KEYS):  # refused before the first batch
        _state_value(state, key)
    batches = _h5_batches(
        state, src, trg, batch_size, k_batches, max_len, use_infinite_loop, start_offset
    )
    if n_batches is not None and n_batches >= 0:
        # score.py:156-160 -- `i` counts the batches the iterator yielded
        batches = itertools.islice(batches, n_batches)
    return batches


def _h5_batches(
    state, src, trg, batch_size, k_batches, max_len, use_infinite_loop, start_offset
) -> Iterator[Batch]:
    fetches = _fetches(src, trg, batch_size, max_len, use_infinite_loop, start_offset)
    while True:
        group = list(itertools.islice(fetches, k_batches))
        if len(group) < k_batches:
            # QUIRK h5 lost tail: the original died here (IndexError on its truthy end marker),
            # losing the fetches of this incomplete group.
            return
        pairs = np.asarray(list(itertools.chain(*group)), dtype=np.int64)
        x = [src.sentence(i) for i in pairs]
        y = [trg.sentence(i) for i in pairs]
        if k_batches > 1:
            lens = np.maximum(src.length[pairs], trg.length[pairs])
            order = legacy_argsort(lens)
        else:
            order = np.arange(len(pairs))
        # full fetches stop right after their last pick; a short one ran to the end of the data
        next_offset = int(pairs[-1]) + 1 if len(group[-1]) == batch_size else len(src)
        for k in range(k_batches):
            indices = order[k * batch_size : (k + 1) * batch_size]
            out = _padded_batch(state, [x[i] for i in indices], [y[i] for i in indices])
            if out is None:
                continue
            X, Xmask, Y, Ymask, keep = out
            yield Batch(X, Xmask, Y, Ymask, pairs[indices][keep], next_offset)


def first_training_batch(
    state: dict[str, Any],
    src_h5: str | os.PathLike[str] | H5Phrases | None = None,
    trg_h5: str | os.PathLike[str] | H5Phrases | None = None,
) -> Batch:
    """The first batch train.py's trainer consumes: ``get_batch_iterator(state)`` started at
    offset 0 (``mainLoop`` starts at ``next_offset=-1``, which the fetcher turns into 0 unless
    ``shuffle``), with the state's ``sort_k_batches``, ``bs``, ``seqlen``, ``trim_batches``,
    ``use_infinite_loop`` -- i.e. the first batch of the sorted first ``sort_k_batches * bs``
    pairs that fit ``seqlen``.  ``src_h5``/``trg_h5`` default to ``state['source'][0]`` /
    ``state['target'][0]``.
    """
    if src_h5 is None:
        src_h5 = _state_value(state, "source")[0]
    if trg_h5 is None:
        trg_h5 = _state_value(state, "target")[0]
    if _state_value(state, "shuffle"):
        # TM_dataset.py:187-190 draws a random start only for start_offset == -1; train.py's
        # first start passes -1, so a shuffled run starts at numpy.random.randint(data_len).
        raise LegacyInputError(
            None,
            "state['shuffle'] is True: GroundHog started training at a "
            "random offset (numpy's global RNG); not reproducible",
        )
    batches = iter_h5_batches(
        state,
        src_h5,
        trg_h5,
        sort_k_batches=None,
        use_infinite_loop=bool(_state_value(state, "use_infinite_loop")),
    )
    for batch in batches:
        return batch
    raise LegacyInputError(src_h5, "no training batch: no pair fits seqlen")
