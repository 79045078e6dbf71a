"""Read and write the project's trace files (``trace.h5``), format version 1.

A trace holds what GroundHog's compiled Theano functions computed for a set of test
sentences: teacher-forced word probabilities and scores (``/pairs``), the padded batch
scorer (``/batch``, ``/batch_all``), the encoder annotations (``/repr``), an instrumented
beam search step by step (``/steps``), the n-best lists of ``sample.py`` (``/beam``), and
in the reference recordings also the random sampler (``/sampler``) and one training
update (``/train_step``).  The layout, the dtype of every dataset and the tolerance that
applies to it are documented in ``docs/trace_format.md``; :data:`SCHEMA` and
:data:`TOLERANCES` below are the same tables in code.

Version 1 is the layout of the reference recordings in ``shared/legacy_traces/*/trace.h5``,
read exactly as they are.  Those files carry no ``format_version`` attribute; a file
without it is version 1.  :class:`TraceWriter` (and ``tools/record_theano_traces.py``)
write ``format_version = 1``.  Any other version is refused with
:class:`~groundhog_port.errors.LegacyInputError`, as is a file that is not HDF5, is
truncated, or lacks a group/dataset that is asked for, or holds one of the wrong dtype.

Reading::

    with TraceFile("search/trace.h5") as tr:
        tr.attrs["null_sym_target"]         # root attributes, plain Python values
        tr.pairs(3)["word_probs"]           # (len_trg, 1) float32
        tr.batch_all()                      # list of padded batches
        tr.repr(3)["c"]                     # (len_src, c_dim) float32
        s = tr.steps(0)                     # instrumented beam-5 search of sentence 0
        s.steps[2]["next_probs"], s.finished
        b = tr.beam("10")                   # sample.py --beam-size 10 n-best lists
        b.sentences[35].error               # 'ValueError: kth(=640) out of bounds (321)'
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .. import budget
from ..errors import LegacyInputError
from ..legacy.h5guard import check_dataset, check_global_heaps, check_links, read_attrs
from ..untrusted import check_special, load_json, max_line_bytes, reader_method, reading

try:  # h5py is a hard dependency of the port, but keep the import error readable
    import h5py
except ImportError as _err:  # pragma: no cover - environment problem
    raise ImportError("groundhog_port.harness.trace needs h5py (pip install h5py)") from _err

#: the format version this module reads and writes
FORMAT_VERSION = 1
#: versions :class:`TraceFile` accepts (a file without the attribute is version 1)
SUPPORTED_VERSIONS = (1,)

#: arrays with more elements than this are gzip-compressed (as the reference recorder did)
COMPRESS_ABOVE = 256

# --------------------------------------------------------------------------------------
# Schema: dataset name -> (dtype, allowed ndims).  Keys are the dataset's name inside its
# group kind; the group kinds are the documented path patterns.
# --------------------------------------------------------------------------------------
#: a padded batch, time-major: token ids (max len, batch) and their 0/1 masks
_BATCH: dict[str, tuple[str, tuple[int, ...]]] = {
    "x": ("int64", (2,)),
    "y": ("int64", (2,)),
    "x_mask": ("float32", (2,)),
    "y_mask": ("float32", (2,)),
}
#: an n-best list: the hypotheses concatenated, their lengths and their costs
_NBEST: dict[str, tuple[str, tuple[int, ...]]] = {
    "fin_trans_flat": ("int64", (1,)),
    "fin_trans_lengths": ("int64", (1,)),
    "fin_costs": ("float64", (1,)),
}
SCHEMA: dict[str, dict[str, tuple[str, tuple[int, ...]]]] = {
    "pairs/{i}": {
        "src_ids": ("int64", (1,)),
        "trg_ids": ("int64", (1,)),
        "word_probs": ("float32", (2,)),
        # (len_trg, len_src, 1) for search models, the dummy (1,) zeros otherwise
        "alignment": ("float32", (1, 3)),
        "score": ("float32", (1,)),
    },
    "batch_all/{b}": {**_BATCH, "scores": ("float32", (1,))},
    "repr/{i}": {
        "seq": ("int64", (1,)),
        "c": ("float32", (2,)),
        "init_states": ("float32", (2,)),
    },
    "steps/{i}/{k:03d}": {
        "last_words": ("int64", (1,)),
        "states_in": ("float32", (3,)),
        "next_probs": ("float32", (2,)),
        "flat_next_costs": ("float64", (1,)),
        "best_costs_indices": ("int64", (1,)),
        "trans_indices": ("int64", (1,)),
        "word_indices": ("int64", (1,)),
        "costs": ("float64", (1,)),
        "states_gathered": ("float32", (3,)),
        "next_states": ("float32", (3,)),
    },
    "steps/{i}": {"seq": ("int64", (1,)), **_NBEST},
    "beam/{label}/{i}": _NBEST,
    "sampler/{i}": {
        "seq": ("int64", (1,)),
        "sample_ids": ("int64", (2,)),
        "sample_neg_log_probs": ("float32", (2,)),
        "costs": ("float64", (1,)),
    },
    "train_step": _BATCH,
}
# /batch has the layout of /batch_all/{b} (it is batch 0 again, plus attribute batch_size)
SCHEMA["batch"] = SCHEMA["batch_all/{b}"]

#: bytes the harness holds per recorded float beside the file's own: its float64 copy
HELD_FLOAT_BYTES = 8
#: recorded id sequences (sentences): never longer than a line of text can make them
ID_SEQUENCES = frozenset({"seq", "src_ids", "trg_ids"})

STEP_DATASETS = tuple(SCHEMA["steps/{i}/{k:03d}"])
PAIR_DATASETS = tuple(SCHEMA["pairs/{i}"])
BATCH_DATASETS = tuple(SCHEMA["batch_all/{b}"])
REPR_DATASETS = tuple(SCHEMA["repr/{i}"])


# --------------------------------------------------------------------------------------
# Tolerances: one rule per quantity (docs/trace_format.md, section "Tolerances").
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tolerance:
    """How a recorded quantity is compared with the port's value.

    ``kind``: ``"exact"`` (==, for ids, token sequences, indices and 0/1 masks),
    ``"derived"`` (floating-point values: the float32-noise bound of
    :mod:`groundhog_port.harness.tolerance`, ``|recorded - port32| <= 2K * noise + quantum`` and
    ``|port32 - port64| <= K * noise + quantum``, the noise from the float64 probe, with
    ``noise`` naming the :class:`~groundhog_port.harness.tolerance.Kind` -- ``abs``, ``rel`` or
    ``terms`` -- and non-finite entries compared as a pattern), ``"set"`` (per-step beam
    survivors compared as sets of (hypothesis, word), their costs derived as ``noise``).
    """

    kind: str
    nonfinite_pattern: bool = False
    note: str = ""
    noise: str = ""


EXACT = Tolerance("exact")
DERIVED_ABS = Tolerance(
    "derived",
    noise="abs",
    nonfinite_pattern=True,
    note="bounded activations and single -log p terms: float32 noise "
    "independent of the value (groundhog_port.harness.tolerance.ABS)",
)
DERIVED_REL = Tolerance(
    "derived",
    noise="rel",
    nonfinite_pattern=True,
    note="probabilities and attention weights: float32 noise proportional "
    "to the value (groundhog_port.harness.tolerance.REL)",
)
DERIVED_TERMS = Tolerance(
    "derived",
    noise="terms",
    nonfinite_pattern=True,
    note="sums of per-word -log p (scores, beam costs): float32 noise "
    "proportional to the number of words (groundhog_port.harness.tolerance.TERMS)",
)
SURVIVOR_SET = Tolerance(
    "set",
    noise="abs",
    note="per-step survivors as a set of (hypothesis prefix, word); their "
    "costs as flat_next_costs; the order is numpy argpartition's and "
    "not compared",
)
#: quantity (documented path pattern) -> rule
TOLERANCES: dict[str, Tolerance] = {
    "pairs/{i}/src_ids": EXACT,
    "pairs/{i}/trg_ids": EXACT,
    "pairs/{i}/word_probs": DERIVED_ABS,
    "pairs/{i}/alignment": DERIVED_REL,
    "pairs/{i}/score": DERIVED_TERMS,
    "batch_all/{b}/x": EXACT,
    "batch_all/{b}/y": EXACT,
    "batch_all/{b}/x_mask": EXACT,
    "batch_all/{b}/y_mask": EXACT,
    "batch_all/{b}/scores": DERIVED_TERMS,
    "repr/{i}/seq": EXACT,
    "repr/{i}/c": DERIVED_ABS,
    "repr/{i}/init_states": DERIVED_ABS,
    "steps/{i}/seq": EXACT,
    "steps/{i}/{k:03d}/last_words": EXACT,
    "steps/{i}/{k:03d}/states_in": DERIVED_ABS,
    "steps/{i}/{k:03d}/next_probs": DERIVED_REL,
    "steps/{i}/{k:03d}/flat_next_costs": DERIVED_ABS,
    "steps/{i}/{k:03d}/best_costs_indices": SURVIVOR_SET,
    "steps/{i}/{k:03d}/trans_indices": SURVIVOR_SET,
    "steps/{i}/{k:03d}/word_indices": SURVIVOR_SET,
    "steps/{i}/{k:03d}/costs": SURVIVOR_SET,
    "steps/{i}/{k:03d}/states_gathered": EXACT,  # trace self-check: states_in[:, trans_indices]
    "steps/{i}/{k:03d}/next_states": DERIVED_ABS,
    "steps/{i}/fin_trans_flat": EXACT,
    "steps/{i}/fin_trans_lengths": EXACT,
    "steps/{i}/fin_costs": DERIVED_TERMS,
    "beam/{label}/{i}/fin_trans_flat": EXACT,
    "beam/{label}/{i}/fin_trans_lengths": EXACT,
    "beam/{label}/{i}/fin_costs": DERIVED_TERMS,
    "sampler/{i}/seq": EXACT,
    "sampler/{i}/sample_ids": EXACT,
    "sampler/{i}/sample_neg_log_probs": DERIVED_ABS,
    "sampler/{i}/costs": DERIVED_TERMS,
    "sampler/mrg_base_rstate_after_build": EXACT,
    "sampler/rstate_shared_before_first_call/{j}": EXACT,
    "sampler/{i}/rstate_shared_after_call/{j}_first8rows": EXACT,
    "train_step/x": EXACT,
    "train_step/y": EXACT,
    "train_step/x_mask": EXACT,
    "train_step/y_mask": EXACT,
    "train_step/params_after/{name}": DERIVED_ABS,
    "train_step/clipped_grads/{name}": DERIVED_ABS,
    "train_step/gnorm2_after/{name}": DERIVED_ABS,
    "train_step/dnorm2_after/{name}": DERIVED_ABS,
    "train_step@rval_cost": DERIVED_TERMS,
    "train_step@rval_grad_norm": DERIVED_REL,
}
TOLERANCES["batch/x"] = EXACT
TOLERANCES["batch/y"] = EXACT
TOLERANCES["batch/x_mask"] = EXACT
TOLERANCES["batch/y_mask"] = EXACT
TOLERANCES["batch/scores"] = DERIVED_TERMS

_PATTERNS = [
    (re.compile(r"^steps/\d+/\d{3}/"), "steps/{i}/{k:03d}/"),
    (
        re.compile(r"^sampler/\d+/rstate_shared_after_call/\d+_first8rows$"),
        "sampler/{i}/rstate_shared_after_call/{j}_first8rows",
    ),
    (
        re.compile(r"^sampler/rstate_shared_before_first_call/\d+(_first8rows)?$"),
        "sampler/rstate_shared_before_first_call/{j}",
    ),
    (re.compile(r"^beam/[^/]+/\d+/"), "beam/{label}/{i}/"),
    (re.compile(r"^batch_all/\d+/"), "batch_all/{b}/"),
    (re.compile(r"^(pairs|repr|steps|sampler)/\d+/"), r"\1/{i}/"),
    (
        re.compile(r"^train_step/(params_after|clipped_grads|gnorm2_after|dnorm2_after)/[^/]+$"),
        r"train_step/\1/{name}",
    ),
]


def tolerance_for(path: str) -> Tolerance:
    """The :class:`Tolerance` for a dataset path such as ``"steps/3/004/next_probs"``."""
    p = path.strip("/")
    for rx, repl in _PATTERNS:
        p = rx.sub(repl, p, count=1)
    try:
        return TOLERANCES[p]
    except KeyError:
        raise KeyError(f"no tolerance documented for trace dataset {path!r}") from None


# --------------------------------------------------------------------------------------
# Typed records
# --------------------------------------------------------------------------------------
@dataclass
class SearchSteps:
    """An instrumented ``BeamSearch.search(seq, beam_size, ignore_unk, minlen)``.

    ``steps``: one dict per call of the compiled ``next_probs`` function, in call order,
    with keys ``k`` (the step number passed to the compiled functions; it restarts at 0
    when the search was redone with a doubled beam), ``n_samples`` (the beam width asked
    of argpartition at that step) and every dataset of :data:`STEP_DATASETS`.
    ``trans``/``costs``: all finished hypotheses (each ending with ``null_sym_target``)
    sorted by cost as ``search()`` returns them; ``finished`` zips them.
    ``error``: set (and ``trans`` empty) when the recorded search raised.
    """

    index: int
    seq: np.ndarray
    minlen: int
    n_steps: int
    beam_size: int
    ignore_unk: bool
    steps: list[dict[str, Any]]
    trans: list[np.ndarray]
    costs: np.ndarray
    error: str | None = None

    @property
    def finished(self) -> list[tuple[tuple[int, ...], float]]:
        return [(tuple(int(w) for w in t), float(c)) for t, c in zip(self.trans, self.costs)]

    def survivors(self, eos: int) -> list[list[tuple[tuple[int, ...], int, float]]]:
        """Per step, the selected candidates as ``(prefix, word, cost)`` triples.

        ``prefix`` is the hypothesis being extended (its tokens so far), rebuilt from
        ``trans_indices`` and the previous step's survivors exactly as ``search()`` forms its
        beam (a survivor whose word is ``eos`` leaves the beam).  Unlike the slot indices this
        does not depend on the order argpartition returned them in, so two searches are
        compared step by step as sets of these triples (costs within the derived bound).
        """
        out = []
        beam: list[tuple[int, ...]] = [()]
        for st in self.steps:
            if int(st["k"]) == 0:
                beam = [()]  # a restarted (doubled-beam) search starts from scratch
            triples = []
            for h, w, c in zip(st["trans_indices"], st["word_indices"], st["costs"]):
                h = int(h)
                if not 0 <= h < len(beam):
                    raise LegacyInputError(
                        None,
                        f"steps/{self.index}: step k={st['k']} selects "
                        f"hypothesis {h} of a beam of {len(beam)}",
                    )
                triples.append((beam[h], int(w), float(c)))
            out.append(triples)
            beam = [p + (w,) for p, w, _ in triples if w != eos]
        return out


@dataclass
class BeamSentence:
    """``sample.sample(...)`` on one sentence: n-best list sorted by raw cost.

    ``costs`` are what ``sample()`` returns (divided by the hypothesis length incl. EOS
    when the run normalized).  ``best`` = argmin(costs), ``best_sentence`` = the line
    sample.py wrote.  When the original crashed on this sentence, ``error`` holds the
    exception (``"ValueError: kth(=512) out of bounds (321)"``) and the rest is empty.
    """

    index: int
    trans: list[np.ndarray]
    costs: np.ndarray
    best: int | None
    best_sentence: str | None
    error: str | None = None

    @property
    def finished(self) -> list[tuple[tuple[int, ...], float]]:
        return [(tuple(int(w) for w in t), float(c)) for t, c in zip(self.trans, self.costs)]


@dataclass
class BeamRun:
    """``/beam/{label}``: one sample.py configuration over every test sentence."""

    label: str
    beam_size: int
    normalize: bool
    ignore_unk: bool
    attrs: dict[str, Any]
    sentences: dict[int, BeamSentence] = field(default_factory=dict)

    @property
    def errors(self) -> dict[int, str]:
        return {i: s.error for i, s in self.sentences.items() if s.error is not None}


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------
def _plain(value: Any) -> Any:
    """HDF5 attribute value -> plain Python (str, int, float, bool, list)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        if value.dtype.kind in ("S", "O", "U"):
            return [_plain(v) for v in value.tolist()]
        return value
    return value


def _sorted_int_keys(group) -> list[int]:
    return sorted(int(k) for k in group.keys() if k.isdigit())


def split_flat(flat: np.ndarray, lengths: np.ndarray, where: str = "") -> list[np.ndarray]:
    """Undo the ``fin_trans_flat``/``fin_trans_lengths`` concatenation."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size and (lengths.min() < 0 or int(lengths.sum()) != len(flat)):
        raise LegacyInputError(
            None,
            f"{where}: fin_trans_lengths sum to {int(lengths.sum())} "
            f"but fin_trans_flat has {len(flat)} entries",
        )
    bounds: np.ndarray | list[int] = np.cumsum(lengths)[:-1] if lengths.size else []
    return (
        [np.asarray(p, dtype=np.int64) for p in np.split(np.asarray(flat), bounds)]
        if lengths.size
        else []
    )


def join_flat(trans: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate hypotheses into ``(fin_trans_flat, fin_trans_lengths)`` (int64)."""
    seqs = [np.asarray(t, dtype=np.int64).ravel() for t in trans]
    lengths = np.asarray([len(s) for s in seqs], dtype=np.int64)
    flat = np.concatenate(seqs) if seqs else np.zeros((0,), dtype=np.int64)
    return flat.astype(np.int64), lengths


# --------------------------------------------------------------------------------------
# Reader
# --------------------------------------------------------------------------------------
#: every public reader method runs inside the untrusted-file guard: whatever h5py raises on
#: a damaged file (or converting a malformed attribute value raises) is one error naming it
_damage_is_input_error = reader_method("unreadable or damaged trace file")


class _OpenTrace:
    """An open ``trace.h5`` (``self._f``), closed by :meth:`close` or at the end of ``with``."""

    _f: h5py.File

    def close(self):
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class TraceFile(_OpenTrace):
    """Typed, read-only access to a ``trace.h5`` (format version 1).

    Opening checks that the file is readable HDF5 and of a supported version; every other
    check (presence, dtype, rank of what is asked for) happens on access and fails with
    :class:`LegacyInputError` naming the file and the dataset.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        check_special(self.path, "a trace")  # HDF5 would block in open() on a FIFO
        if not self.path.is_file():
            raise LegacyInputError(self.path, "trace file not found")
        with reading(self.path, "not a readable HDF5 trace file"):  # not HDF5, truncated
            self._f = h5py.File(self.path, "r")
        try:
            with reading(self.path, "unreadable trace file"):
                check_global_heaps(self.path)
                check_links(self._f, self.path)
                raw = (
                    read_attrs(self._f, self.path, "/", ["format_version"])["format_version"]
                    if "format_version" in self._f.attrs
                    else None
                )
                version = 1 if raw is None else _plain(raw)
                if isinstance(version, np.ndarray) and version.size == 1:
                    version = version.item()
                try:
                    version = int(version)
                except (TypeError, ValueError):
                    raise LegacyInputError(
                        self.path, f"format_version attribute {raw!r} is not an integer"
                    ) from None
                if version not in SUPPORTED_VERSIONS:
                    raise LegacyInputError(
                        self.path,
                        f"unsupported trace format version {version} "
                        f"(this reader knows version(s) {', '.join(map(str, SUPPORTED_VERSIONS))})",
                    )
                self.format_version = version
                self.attrs: dict[str, Any] = {
                    k: _plain(v) for k, v in read_attrs(self._f, self.path, "/").items()
                }
        except BaseException:
            self._f.close()
            raise

    # -- plumbing ---------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"TraceFile({str(self.path)!r}, version={self.format_version})"

    def _err(self, where: str, problem: str) -> LegacyInputError:
        return LegacyInputError(self.path, f"/{where}: {problem}")

    def _group(self, where: str):
        try:
            obj = self._f[where]
        except KeyError:
            raise self._err(where, "group missing from trace") from None
        except OSError as err:
            raise self._err(where, f"unreadable ({_one_line(err)})") from None
        if not isinstance(obj, h5py.Group):
            raise self._err(where, "expected a group, found a dataset")
        return obj

    @_damage_is_input_error
    def has(self, where: str) -> bool:
        try:
            return where.strip("/") in self._f
        except OSError:
            return False

    def _read(self, group, name: str, kind: str, where: str, optional: bool = False):
        spec = SCHEMA[kind].get(name)
        full = f"{where}/{name}"
        if name not in group:
            if optional:
                return None
            raise self._err(full, "dataset missing from trace")
        ds = group[name]
        if not isinstance(ds, h5py.Dataset):
            raise self._err(full, "expected a dataset, found a group")
        if spec is not None:
            dtype, ndims = spec
            if ds.dtype != np.dtype(dtype):
                raise self._err(full, f"dtype {ds.dtype}, the format says {dtype}")
            if ds.ndim not in ndims:
                raise self._err(
                    full, f"{ds.ndim}-d, the format says {' or '.join(str(n) for n in ndims)}-d"
                )
        # the harness holds a float64 copy of every float it compares (and the tolerance
        # arrays beside it): the ratio rule and the budget charge that, not the file's dtype
        extra = HELD_FLOAT_BYTES if ds.dtype.kind == "f" else 0
        check_dataset(ds, self.path, f"/{full}", loader_itemsize=extra)
        held = int(ds.size or 0) * (int(ds.dtype.itemsize) + extra)
        budget.check(self.path, f"/{full} ({tuple(ds.shape)} of {ds.dtype}, as compared)", held)
        if name in ID_SEQUENCES and ds.ndim == 1 and ds.shape[0] > max_line_bytes() + 1:
            raise self._err(
                full,
                f"{ds.shape[0]} ids: longer than any sentence a line can hold "
                f"({max_line_bytes()} bytes, the line-length limit)",
            )
        try:
            return ds[()]
        except OSError as err:
            raise self._err(full, f"unreadable ({_one_line(err)})") from None

    def _nbest(self, group, kind: str, where: str) -> tuple[list[np.ndarray], np.ndarray]:
        """The n-best list stored in ``group`` (the :data:`_NBEST` datasets): the
        hypotheses split from ``fin_trans_flat`` by ``fin_trans_lengths``, and ``fin_costs``."""
        flat, lengths, costs = (self._read(group, n, kind, where) for n in _NBEST)
        trans = _split_checked(self, flat, lengths, where)
        if len(trans) != len(costs):
            raise self._err(where, f"{len(trans)} hypotheses but {len(costs)} fin_costs")
        return trans, costs

    def _attr(self, obj, name: str, where: str, optional: bool = False, default=None):
        if name not in obj.attrs:
            if optional:
                return default
            raise self._err(where, f"attribute {name!r} missing")
        return _plain(read_attrs(obj, self.path, f"/{where}", [name])[name])

    def _indices(self, top: str) -> list[int]:
        if not self.has(top):
            return []
        return _sorted_int_keys(self._group(top))

    # -- /pairs -------------------------------------------------------------------------
    @_damage_is_input_error
    def pair_indices(self) -> list[int]:
        return self._indices("pairs")

    @_damage_is_input_error
    def pairs(self, i: int) -> dict[str, Any]:
        """``/pairs/{i}``: ``src_ids``, ``trg_ids``, ``word_probs``, ``alignment``, ``score``
        (arrays) and ``src_line``, ``trg_line`` (str)."""
        where = f"pairs/{int(i)}"
        g = self._group(where)
        out = {n: self._read(g, n, "pairs/{i}", where) for n in PAIR_DATASETS}
        out["src_line"] = self._attr(g, "src_line", where)
        out["trg_line"] = self._attr(g, "trg_line", where)
        for ids, line in (("src_ids", "src_line"), ("trg_ids", "trg_line")):
            # a word or a character is at least one byte of its line, and end-of-sentence
            most = len(str(out[line]).encode("utf-8", "surrogatepass")) + 1
            if len(out[ids]) > most:
                raise self._err(
                    f"{where}/{ids}",
                    f"{len(out[ids])} ids for a {line} of {most - 1} bytes: more ids than "
                    "the line has words (damaged or hostile trace)",
                )
        return out

    # -- /batch, /batch_all -------------------------------------------------------------
    @_damage_is_input_error
    def batch(self) -> dict[str, Any]:
        """``/batch``: the first padded batch (same as ``batch_all()[0]``) + ``batch_size``."""
        g = self._group("batch")
        out = {n: self._read(g, n, "batch", "batch") for n in BATCH_DATASETS}
        out["batch_size"] = self._attr(g, "batch_size", "batch", optional=True)
        return out

    @_damage_is_input_error
    def batch_all(self) -> list[dict[str, np.ndarray]]:
        """``/batch_all/{b}`` for b = 0, 1, ...: ``x``, ``y`` (time, batch) int64, ``x_mask``,
        ``y_mask`` float32, ``scores`` (batch,) float32 -- what score.py --mode=batch printed."""
        top = self._group("batch_all")
        keys = _sorted_int_keys(top)
        if keys != list(range(len(keys))):
            raise self._err("batch_all", f"batch groups {keys} are not numbered 0..n-1")
        out = []
        for b in keys:
            where = f"batch_all/{b}"
            g = self._group(where)
            out.append({n: self._read(g, n, "batch_all/{b}", where) for n in BATCH_DATASETS})
        return out

    # -- /repr --------------------------------------------------------------------------
    @_damage_is_input_error
    def repr_indices(self) -> list[int]:
        return self._indices("repr")

    @_damage_is_input_error
    def repr(self, i: int) -> dict[str, Any]:
        """``/repr/{i}``: ``seq`` int64, ``c`` (len_src, c_dim) float32, ``init_states``
        (levels, dim) float32, ``parsed_in`` (str)."""
        where = f"repr/{int(i)}"
        g = self._group(where)
        out = {n: self._read(g, n, "repr/{i}", where) for n in REPR_DATASETS}
        out["parsed_in"] = self._attr(g, "parsed_in", where, optional=True)
        return out

    # -- /steps -------------------------------------------------------------------------
    @_damage_is_input_error
    def steps_indices(self) -> list[int]:
        return self._indices("steps")

    @property
    @_damage_is_input_error
    def steps_attrs(self) -> dict[str, Any]:
        g = self._group("steps")
        return {k: _plain(v) for k, v in read_attrs(g, self.path, "/steps").items()}

    @_damage_is_input_error
    def steps(self, i: int) -> SearchSteps:
        """``/steps/{i}``: the instrumented beam search of sentence i (:class:`SearchSteps`)."""
        top = self._group("steps")
        beam_size = self._attr(top, "beam_size", "steps")
        ignore_unk = bool(self._attr(top, "ignore_unk", "steps", optional=True, default=False))
        where = f"steps/{int(i)}"
        g = self._group(where)
        step_keys = sorted(k for k in g.keys() if re.fullmatch(r"\d{3,}", k))
        steps = []
        for key in step_keys:
            sw = f"{where}/{key}"
            sg = g[key]
            if not isinstance(sg, h5py.Group):
                raise self._err(sw, "expected a step group")
            st: dict[str, Any] = {
                "k": int(self._attr(sg, "k", sw)),
                "n_samples": int(self._attr(sg, "n_samples", sw)),
            }
            for n in STEP_DATASETS:
                st[n] = self._read(sg, n, "steps/{i}/{k:03d}", sw)
            steps.append(st)
        error = self._attr(g, "error", where, optional=True)
        n_steps = int(self._attr(g, "n_steps", where, optional=True, default=len(steps)))
        if n_steps != len(steps):
            raise self._err(where, f"attribute n_steps={n_steps} but {len(steps)} step groups")
        seq = self._read(g, "seq", "steps/{i}", where)
        if error is None:
            trans, costs = self._nbest(g, "steps/{i}", where)
        else:
            trans, costs = [], np.zeros((0,), dtype=np.float64)
        return SearchSteps(
            index=int(i),
            seq=seq,
            minlen=int(self._attr(g, "minlen", where)),
            n_steps=n_steps,
            beam_size=int(beam_size),
            ignore_unk=ignore_unk,
            steps=steps,
            trans=trans,
            costs=costs,
            error=error,
        )

    # -- /beam --------------------------------------------------------------------------
    @_damage_is_input_error
    def beam_labels(self) -> list[str]:
        if not self.has("beam"):
            return []
        return sorted(self._group("beam").keys(), key=_label_key)

    @_damage_is_input_error
    def beam(self, label: str | int) -> BeamRun:
        """``/beam/{label}``: every sentence's n-best list (:class:`BeamRun`).

        ``label`` is ``"1"``, ``"5"``, ``"10"``, ``"1_normalize"``, ``"5_ignore_unk"``, ...
        A sentence on which the original crashed is a group with only an ``error``
        attribute; it is returned as a :class:`BeamSentence` with ``error`` set.
        """
        label = str(label)
        where = f"beam/{label}"
        g = self._group(where)
        attrs = {k: _plain(v) for k, v in read_attrs(g, self.path, f"/{where}").items()}
        run = BeamRun(
            label=label,
            beam_size=int(self._attr(g, "beam_size", where)),
            normalize=bool(self._attr(g, "normalize", where, optional=True, default=False)),
            ignore_unk=bool(self._attr(g, "ignore_unk", where, optional=True, default=False)),
            attrs=attrs,
        )
        for i in _sorted_int_keys(g):
            sw = f"{where}/{i}"
            sg = g[str(i)]
            error = self._attr(sg, "error", sw, optional=True)
            if error is not None:
                run.sentences[i] = BeamSentence(
                    i, [], np.zeros((0,), dtype=np.float64), None, None, error
                )
                continue
            trans, costs = self._nbest(sg, "beam/{label}/{i}", sw)
            best = self._attr(sg, "best", sw, optional=True)
            run.sentences[i] = BeamSentence(
                i,
                trans,
                costs,
                None if best is None else int(best),
                self._attr(sg, "best_sentence", sw, optional=True),
            )
        return run

    # -- /sampler, /train_step (reference recordings only; read-only in version 1) --------
    @_damage_is_input_error
    def sampler(self) -> dict[str, Any]:
        """``/sampler``: group attrs, ``mrg_base_rstate_after_build`` and per call ``{i}``
        a dict of ``seq``, ``sample_ids``, ``sample_neg_log_probs``, ``costs`` + attrs."""
        g = self._group("sampler")
        out: dict[str, Any] = {
            "attrs": {k: _plain(v) for k, v in read_attrs(g, self.path, "/sampler").items()},
            "calls": {},
        }
        if "mrg_base_rstate_after_build" in g:
            ds = g["mrg_base_rstate_after_build"]
            check_dataset(ds, self.path, "/sampler/mrg_base_rstate_after_build")
            out["mrg_base_rstate_after_build"] = ds[()]
        for i in _sorted_int_keys(g):
            where = f"sampler/{i}"
            cg = g[str(i)]
            call = {n: self._read(cg, n, "sampler/{i}", where) for n in SCHEMA["sampler/{i}"]}
            call["attrs"] = {
                k: _plain(v) for k, v in read_attrs(cg, self.path, f"/{where}").items()
            }
            if isinstance(call["attrs"].get("sentences"), str):
                call["sentences"] = load_json(
                    call["attrs"]["sentences"], self.path, f"/{where} attribute sentences"
                )
            if "rstate_shared_after_call" in cg:
                call["rstate_after"] = self._rstates(
                    cg["rstate_shared_after_call"], f"{where}/rstate_shared_after_call"
                )
            out["calls"][i] = call
        if "rstate_shared_before_first_call" in g:
            out["rstate_before"] = self._rstates(
                g["rstate_shared_before_first_call"], "sampler/rstate_shared_before_first_call"
            )
        return out

    def _rstates(self, group, where: str) -> dict[int, dict[str, Any]]:
        """MRG state matrices ``{j}`` (full, int32 (n, 6)) or ``{j}_first8rows`` (their first
        rows): ``{j: {"rows", "full", "sha256", "full_shape", "used_by_sample_fn"}}``."""
        out: dict[int, dict[str, Any]] = {}
        for name in group.keys():
            m = re.fullmatch(r"(\d+)(_first8rows)?", name)
            if m is None:
                raise self._err(
                    f"{where}/{name}", "unexpected dataset name (expected {j} or {j}_first8rows)"
                )
            ds = group[name]
            check_dataset(ds, self.path, f"/{where}/{name}")
            if ds.dtype != np.int32 or ds.ndim != 2 or ds.shape[1] != 6:
                raise self._err(
                    f"{where}/{name}", f"expected int32 (n, 6), found {ds.dtype} {ds.shape}"
                )
            attrs = {k: _plain(v) for k, v in read_attrs(ds, self.path, f"/{where}/{name}").items()}
            shape = attrs.get("full_shape")
            out[int(m.group(1))] = {
                "rows": ds[()],
                "full": m.group(2) is None,
                "sha256": attrs.get("sha256"),
                "full_shape": None if shape is None else tuple(int(x) for x in np.ravel(shape)),
                "used_by_sample_fn": attrs.get("used_by_sample_fn"),
            }
        return out

    @_damage_is_input_error
    def train_step(self) -> dict[str, Any]:
        """``/train_step``: the batch, ``rval_*``/JSON attrs and the per-parameter tensors."""
        g = self._group("train_step")
        out: dict[str, Any] = {
            n: self._read(g, n, "train_step", "train_step") for n in SCHEMA["train_step"]
        }
        attrs = {k: _plain(v) for k, v in read_attrs(g, self.path, "/train_step").items()}
        for k in ("changed_params", "param_order"):
            if isinstance(attrs.get(k), str):
                attrs[k] = load_json(attrs[k], self.path, f"/train_step attribute {k}")
        out["attrs"] = attrs
        for sub in ("params_after", "clipped_grads", "gnorm2_after", "dnorm2_after"):
            sg = self._group(f"train_step/{sub}")
            out[sub] = {}
            for name in sg.keys():
                check_dataset(sg[name], self.path, f"/train_step/{sub}/{name}")
                out[sub][name] = sg[name][()]
        return out

    # -- whole-file check ---------------------------------------------------------------
    @_damage_is_input_error
    def validate(self) -> None:
        """Read every documented record once (raises :class:`LegacyInputError` on the first
        problem).  Used by tests and by ``groundhog-port inspect``-style checks."""
        for i in self.pair_indices():
            self.pairs(i)
        if self.has("batch_all"):
            self.batch_all()
        if self.has("batch"):
            self.batch()
        for i in self.repr_indices():
            self.repr(i)
        for i in self.steps_indices():
            self.steps(i)
        for label in self.beam_labels():
            self.beam(label)


def _split_checked(tf: TraceFile, flat, lengths, where) -> list[np.ndarray]:
    try:
        return split_flat(flat, lengths, where)
    except LegacyInputError as err:
        raise LegacyInputError(tf.path, err.problem) from None


def _label_key(label: str):
    m = re.match(r"(\d+)(.*)", label)
    return (int(m.group(1)), m.group(2)) if m else (10**9, label)


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def parse_beam_label(label: str) -> dict[str, Any]:
    """``"10_normalize"`` -> ``{"beam_size": 10, "normalize": True, "ignore_unk": False}``."""
    m = re.fullmatch(r"(\d+)((?:_normalize|_ignore_unk)*)", str(label))
    if not m or int(m.group(1)) < 1:
        raise ValueError(f"bad beam label {label!r} (expected N, N_normalize, N_ignore_unk)")
    flags = m.group(2)
    return {
        "beam_size": int(m.group(1)),
        "normalize": "_normalize" in flags,
        "ignore_unk": "_ignore_unk" in flags,
    }


# --------------------------------------------------------------------------------------
# Writer
# --------------------------------------------------------------------------------------
class TraceWriter(_OpenTrace):
    """Write a version-1 trace with the layout :class:`TraceFile` reads.

    ``TraceWriter(path, case="search", null_sym_target=320, ...)`` creates the file (it
    must not exist unless ``overwrite=True``) and stores ``format_version = 1`` plus the
    given root attributes.  Arrays are stored with the documented dtype; arrays of more
    than 256 elements are gzip-compressed (shuffle filter), as in the reference files.
    """

    def __init__(
        self, path: str | os.PathLike[str], overwrite: bool = False, **root_attrs: object
    ) -> None:
        self.path = Path(path)
        if self.path.exists() and not overwrite:
            raise LegacyInputError(self.path, "refusing to overwrite an existing trace file")
        self._f = h5py.File(self.path, "w")
        self._f.attrs["format_version"] = np.int64(FORMAT_VERSION)
        self.set_attrs("/", **root_attrs)

    # -- low level ----------------------------------------------------------------------
    def set_attrs(self, where: str, **attrs: object) -> None:
        obj = self._f.require_group(where) if where not in ("/", "") else self._f
        for k, v in attrs.items():
            if v is None:
                continue
            obj.attrs[k] = _attr_value(v)

    def _ds(self, group, name: str, value, dtype: str):
        arr = np.ascontiguousarray(np.asarray(value, dtype=dtype))
        if name in group:
            del group[name]
        if arr.size > COMPRESS_ABOVE:
            group.create_dataset(name, data=arr, compression="gzip", shuffle=True)
        else:
            group.create_dataset(name, data=arr)

    def _fill(self, group, kind: str, values: dict[str, Any]):
        for name, (dtype, _) in SCHEMA[kind].items():
            if name not in values or values[name] is None:
                raise ValueError(f"{group.name}: {name} is required")
            self._ds(group, name, values[name], dtype)

    # -- groups ---------------------------------------------------------------------------
    def write_pair(
        self,
        i: int,
        *,
        src_ids: ArrayLike,
        trg_ids: ArrayLike,
        word_probs: ArrayLike,
        alignment: ArrayLike,
        score: ArrayLike,
        src_line: str,
        trg_line: str,
    ) -> None:
        g = self._f.require_group(f"pairs/{int(i)}")
        self._fill(
            g,
            "pairs/{i}",
            dict(
                src_ids=src_ids,
                trg_ids=trg_ids,
                word_probs=word_probs,
                alignment=alignment,
                score=np.atleast_1d(score),
            ),
        )
        self.set_attrs(g.name, src_line=src_line, trg_line=trg_line)

    def write_batch(
        self,
        b: int,
        *,
        x: ArrayLike,
        y: ArrayLike,
        x_mask: ArrayLike,
        y_mask: ArrayLike,
        scores: ArrayLike,
        batch_size: int | None = None,
    ) -> None:
        """``/batch_all/{b}``; batch 0 is also written to ``/batch`` (with ``batch_size``)."""
        values = dict(x=x, y=y, x_mask=x_mask, y_mask=y_mask, scores=scores)
        g = self._f.require_group(f"batch_all/{int(b)}")
        self._fill(g, "batch_all/{b}", values)
        if int(b) == 0:
            g0 = self._f.require_group("batch")
            self._fill(g0, "batch", values)
            self.set_attrs(
                "batch", batch_size=batch_size if batch_size is not None else np.shape(x)[1]
            )

    def write_repr(
        self,
        i: int,
        *,
        seq: ArrayLike,
        c: ArrayLike,
        init_states: ArrayLike,
        parsed_in: str | None = None,
    ) -> None:
        g = self._f.require_group(f"repr/{int(i)}")
        self._fill(g, "repr/{i}", dict(seq=seq, c=c, init_states=init_states))
        self.set_attrs(g.name, parsed_in=parsed_in)

    def write_steps(
        self,
        i: int,
        *,
        steps: Sequence[dict[str, Any]],
        seq: ArrayLike,
        minlen: int,
        fin_trans: Sequence[Sequence[int]] = (),
        fin_costs: ArrayLike = (),
        beam_size: int = 5,
        ignore_unk: bool = False,
        error: str | None = None,
    ) -> None:
        """``/steps/{i}``: one ``{k:03d}`` group per entry of ``steps`` (dicts with ``k``,
        ``n_samples`` and the :data:`STEP_DATASETS`), then ``seq``, the finished hypotheses
        and costs (absent when ``error`` is given)."""
        self.set_attrs("steps", beam_size=int(beam_size), ignore_unk=bool(ignore_unk))
        g = self._f.require_group(f"steps/{int(i)}")
        for n, st in enumerate(steps):
            sg = g.require_group(f"{n:03d}")
            self._fill(sg, "steps/{i}/{k:03d}", st)
            self.set_attrs(sg.name, k=int(st["k"]), n_samples=int(st["n_samples"]))
        self._ds(g, "seq", seq, "int64")
        if error is None:
            flat, lengths = join_flat(fin_trans)
            self._ds(g, "fin_trans_flat", flat, "int64")
            self._ds(g, "fin_trans_lengths", lengths, "int64")
            self._ds(g, "fin_costs", np.asarray(fin_costs, dtype=np.float64).reshape(-1), "float64")
        self.set_attrs(g.name, minlen=int(minlen), n_steps=len(steps), error=error)

    def write_beam(
        self,
        label: str,
        i: int,
        *,
        fin_trans: Sequence[Sequence[int]] = (),
        fin_costs: ArrayLike = (),
        best: int | None = None,
        best_sentence: str | None = None,
        error: str | None = None,
        **group_attrs: object,
    ) -> None:
        """``/beam/{label}/{i}``; ``error`` writes the crash record (a group with only an
        ``error`` attribute).  ``group_attrs`` (``beam_size``, ``normalize``,
        ``ignore_unk``, ``seconds_total``, ``seconds_per_sentence``) go on ``/beam/{label}``;
        ``beam_size``/``normalize``/``ignore_unk`` default to what the label says."""
        label = str(label)
        top = f"beam/{label}"
        if top not in self._f:
            self.set_attrs(top, **parse_beam_label(label))
        self.set_attrs(top, **group_attrs)
        g = self._f.require_group(f"{top}/{int(i)}")
        if error is not None:
            self.set_attrs(g.name, error=error)
            return
        flat, lengths = join_flat(fin_trans)
        self._fill(
            g,
            "beam/{label}/{i}",
            dict(
                fin_trans_flat=flat,
                fin_trans_lengths=lengths,
                fin_costs=np.asarray(fin_costs, dtype=np.float64).reshape(-1),
            ),
        )
        if best is None and len(lengths):
            best = int(np.argmin(np.asarray(fin_costs, dtype=np.float64)))
        self.set_attrs(
            g.name, best=None if best is None else int(best), best_sentence=best_sentence
        )


def _attr_value(v):
    if isinstance(v, bool):
        return np.bool_(v)
    if isinstance(v, int):
        return np.int64(v)
    if isinstance(v, float):
        return np.float64(v)
    if isinstance(v, (list, tuple)) and v and all(isinstance(s, str) for s in v):
        return np.array([s.encode("utf-8") for s in v])
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v)
    return v
