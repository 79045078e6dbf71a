"""The records of the inventory stage (:mod:`groundhog_port.tasks.archive.inventory`): what kind of
file each file of an archive is, and the facts read from it to say so.

Every record is a frozen dataclass; the facts of each kind are their own small record (never
a dict), so the archive pipeline reads ``row.facts.n_sym_source`` rather than a key it has to
spell.  This module holds data only: no file is read here.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any


class Kind(enum.Enum):
    """What a file holds, decided from its content only (never from its name).

    A snapshot ``prefix + model%d.npz`` is a :attr:`MODEL`: its number is a fact of its name,
    not of its content (see :func:`groundhog_port.tasks.archive.inventory.snapshot_number`).
    """

    #: a GroundHog state: a pickled dict holding several of ``prototype_state``'s keys
    STATE = "state"
    #: ``numpy.savez`` of GroundHog parameters (``W_0_enc_approx_embdr``...)
    MODEL = "model"
    #: ``MainLoop``'s ``prefix + 'timing.npz'`` (``step``, ``cost``, ``log2_p_expl``...)
    TIMING = "timing"
    #: an optimizer's accumulators: Adadelta's ``gnorm2_*`` / ``dnorm2_*``
    OPTIMIZER = "optimizer"
    #: a pickled dict word -> id (``preprocess.py -d``'s ``vocab.*.pkl``)
    VOCABULARY = "vocabulary"
    #: a pickled dict id -> word (``invert-dict.py``'s ``ivocab.*.pkl``)
    INVERSE_VOCABULARY = "inverse vocabulary"
    #: UTF-8 (or not) text: corpora, test sets, translations, scores
    TEXT = "text"
    #: a WMT SGML file: ``<srcset>``, ``<refset>``, ``<tstset>`` or ``<dataset>`` with ``<seg>``s
    SGML = "sgml"
    #: a Python traceback ending in ``SomeError: ...``
    CRASH_LOG = "crash log"
    #: other logs: ``sample.py``'s stdout, training logs, the recordings' ``timings.txt``
    LOG = "log"
    #: an HDF5 file: a binarized corpus or a trace (:class:`Hdf5Facts`)
    HDF5 = "hdf5"
    #: a tar or zip archive (told by content; a compressed tar too)
    PACK = "pack"
    #: a pickle that is none of the above (or that names code: never run)
    PICKLE_OTHER = "pickle (other)"
    #: a ``.npz`` archive that is none of the above
    NPZ_OTHER = "npz (other)"
    #: bytes that are none of the above (NUL bytes, unknown magic)
    BINARY = "binary"
    #: a file of 0 bytes
    EMPTY = "empty"
    #: a file that cannot be read or is damaged: :attr:`Row.note` says why, on one line
    UNREADABLE = "unreadable"


@dataclass(frozen=True)
class StateFacts:
    """The model-shape and data-path keys of a GroundHog state (``experiments/nmt/state.py``
    names them), as stored in the pickle (``None`` where the pickle does not hold the key:
    ``prototype_state``'s default applies then).  ``stored``: the whole pickled dict, read
    only (a state is a few KB), for :func:`~groundhog_port.tasks.archive.inventory.model_fits_state`."""

    n_sym_source: int | None
    n_sym_target: int | None
    null_sym_source: int | None
    null_sym_target: int | None
    unk_sym_source: int | None
    unk_sym_target: int | None
    dim: int | None
    rank_n_approx: int | None
    search: bool | None
    prefix: str | None
    word_indx: str | None
    indx_word: str | None
    word_indx_trgt: str | None
    indx_word_target: str | None
    source: tuple[str, ...]
    target: tuple[str, ...]
    #: the prototype whose values it shares most (``legacy_states.match_prototype``)
    prototype: str
    #: before GroundHog's ``enc_rec_*`` / ``dec_rec_*`` (``legacy_states.vintage``)
    old_vintage: bool
    stored: Mapping[str, Any]

    def __reduce__(self) -> tuple[Callable[[dict[str, Any]], StateFacts], tuple[dict[str, Any]]]:
        # a read-only view does not pickle: rebuilt from a copy (a contained worker's rows
        # come back to the run pickled, groundhog_port.contained)
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["stored"] = dict(self.stored)
        return (_state_facts, (values,))


def _state_facts(values: dict) -> StateFacts:
    return StateFacts(**{**values, "stored": MappingProxyType(values["stored"])})


@dataclass(frozen=True)
class Member:
    """One ``.npy`` member of an ``.npz`` archive, from its header only."""

    name: str
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class ModelFacts:
    """The members of an ``.npz`` archive (a model's parameters, a timing's curves, an
    optimizer's accumulators), from the zip directory and the ``.npy`` headers only."""

    members: tuple[Member, ...]
    #: holds ``*_back_*`` decoder projections (before GroundHog commit ab870f2,
    #: ``legacy.compat.is_old_model``)
    old_vintage: bool = False

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        """name -> shape."""
        return {m.name: m.shape for m in self.members}


@dataclass(frozen=True)
class VocabularyFacts:
    """A vocabulary's entries: word -> id, or id -> word when ``inverted``."""

    size: int
    inverted: bool
    #: the distinct ids are exactly ``0 .. n_ids - 1``
    ids_complete: bool
    n_ids: int
    max_id: int
    #: which of ``<s>``, ``</s>``, ``UNK`` it holds, with their ids
    specials: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class TextFacts:
    """A text file's lines: an exact count (over the whole file, streamed), and facts of a
    bounded prefix (the sample)."""

    lines: int
    #: False when the count stopped at the decompression bound (then ``lines`` is a lower bound)
    complete: bool
    encoding_ok: bool
    #: the first line (1-based) that is not UTF-8, within the prefix read
    first_bad_line: int | None
    #: whitespace-separated words per line over the sampled lines
    avg_words: float
    sample: tuple[str, ...]
    ends_with_newline: bool
    crlf: bool
    #: every non-blank sampled line is one number (``score.py``'s scores look so)
    numeric: bool
    #: decompressed bytes read for the count (compressed files), else the file's size
    bytes_counted: int


@dataclass(frozen=True)
class SgmlFacts:
    """A WMT SGML file: ``srcset``/``refset``/``tstset``/``dataset``, its ``<seg>`` count."""

    set_kind: str
    segments: int
    srclang: str | None
    trglang: str | None
    complete: bool


@dataclass(frozen=True)
class LogFacts:
    """A log's telling line: a traceback's last line, or ``sample.py``'s total cost line."""

    #: the exception line closing the last traceback (``ValueError: ...``), or None
    error: str | None
    #: ``Total cost of the translations: X`` (sample.py:276), or None
    total_cost: str | None
    lines_sampled: int


@dataclass(frozen=True)
class Hdf5Facts:
    """An HDF5 file's top-level names, read without following any link."""

    #: ``"corpus"`` (GroundHog's PyTables ``/phrases`` + ``/indices``), ``"trace"`` (a
    #: recording: ``/pairs``, ``/beam``, ``/steps``...) or ``"other"``
    role: str
    names: tuple[str, ...]


@dataclass(frozen=True)
class PackFacts:
    """A tar or zip archive (the compression, if any, is :attr:`Row.compression`)."""

    format: str


Facts = (
    StateFacts
    | ModelFacts
    | VocabularyFacts
    | TextFacts
    | SgmlFacts
    | LogFacts
    | Hdf5Facts
    | PackFacts
    | None
)


@dataclass(frozen=True)
class Row:
    """One file of the inventory: every file ends in exactly one row."""

    path: Path
    kind: Kind
    size: int
    #: ``"gzip"``, ``"bzip2"``, ``"xz"`` (by magic number) or None
    compression: str | None = None
    facts: Facts = None
    #: one line: why it is UNREADABLE, why a pickle was not opened, a bound reached
    note: str = ""


@dataclass(frozen=True)
class Pairing:
    """A model file and the state it belongs to (:func:`~groundhog_port.tasks.archive.inventory.pair_models`)."""

    model: Path
    #: the state it was paired with, None when it fits none (or cannot be told apart)
    state: Path | None
    #: every state it fits, best first
    fits: tuple[Path, ...]
    #: ``N`` of ``prefix + model%d.npz`` (mainLoop.py:233-234), None for another name
    snapshot: int | None
    why: str
