"""The binary formats of the inventory (:mod:`.inventory`): what a zip (an ``.npz``: a
model, a timing or an optimizer file; or a pack), an HDF5 file (a corpus or a trace) and a
pickle (a state, a vocabulary) hold, each read by the format's own bounded reader -- the
``.npz`` by its zip directory and ``.npy`` headers only, HDF5 with every link visited and
none followed, pickles only through the safe unpickler.  Each returns the file's
:class:`~.kinds.Row`; :func:`.inventory.classify` turns what they raise into an
``UNREADABLE`` row."""

from __future__ import annotations

import re
from pathlib import Path
from types import MappingProxyType
from typing import Any, BinaryIO

from ...errors import LegacyInputError
from .kinds import (
    Hdf5Facts,
    Kind,
    Member,
    ModelFacts,
    PackFacts,
    Row,
    StateFacts,
    VocabularyFacts,
)

# ----------------------------------------------------------------------------------------------
# zip / .npz
# ----------------------------------------------------------------------------------------------
#: the keys of MainLoop's timings (mainLoop.py:132-148), and their old names (convert_timing.py)
TIMING_KEYS = frozenset(
    "step next_offset cost grad_norm log2_p_word log2_p_expl time_step whole_time lr "
    "validcost validppl testcost testppl fulltraincost fulltrainppl cost2_p_word "
    "cost2_p_expl".split()
)
#: GroundHog's parameter names: ``W_0_enc_approx_embdr``, ``W1_dec_deep_softmax``,
#: ``b_0_back_enc_input_embdr_0``, ``D_dec_transition_0`` (the legacy table's names)
_PARAM_NAME = re.compile(r"^[A-Za-z]+\d*(?:_\d+)?_(?:back_)?(?:enc|dec)_\w+$")
_OPTIMIZER_NAME = re.compile(r"^(?:gnorm2|dnorm2)_")


def zip_row(path: Path, size: int, f: BinaryIO) -> Row:
    import zipfile

    from ...legacy.npzguard import check_directory, read_members

    check_directory(path)  # the directory zipfile parses whole, charged to the budget
    f.seek(0)
    with zipfile.ZipFile(f) as zf:
        names = zf.namelist()
        if not names or not all(n.endswith(".npy") for n in names):
            return Row(path, Kind.PACK, size, facts=PackFacts("zip"))
        # headers only: nothing is decompressed past a member's .npy header, so no allowance
        # is charged for the data (the whole of a 400 MB model costs its directory)
        members, _ = read_members(zf, path, "archive", None, allowance=1 << 62)
    facts = ModelFacts(
        tuple(Member(m.name, m.shape, str(m.dtype)) for m in members.values()),
        old_vintage=any(n.startswith("W_0_dec_back_") for n in members),
    )
    keys = list(members)
    if 2 * sum(bool(_OPTIMIZER_NAME.match(k)) for k in keys) > len(keys):
        kind = Kind.OPTIMIZER
    elif len(TIMING_KEYS.intersection(keys)) >= 3:
        kind = Kind.TIMING
    elif 2 * sum(bool(_PARAM_NAME.match(k)) for k in keys) > len(keys):
        kind = Kind.MODEL
    else:
        kind = Kind.NPZ_OTHER
    return Row(path, kind, size, facts=facts)


# ----------------------------------------------------------------------------------------------
# HDF5
# ----------------------------------------------------------------------------------------------
#: top-level groups of a recording (docs/trace_format.md)
TRACE_GROUPS = frozenset(("pairs", "beam", "steps", "batch", "batch_all", "sampler", "repr"))


def hdf5_row(path: Path, size: int) -> Row:
    import h5py

    from ...legacy.h5guard import check_links
    from ...untrusted import reading

    with reading(path, "damaged HDF5 file"), h5py.File(path, "r") as f:
        check_links(f, path)  # every link visited, none followed: soft/external refused
        names = tuple(sorted(f.keys()))
        classes = {n: f.get(n, getclass=True) for n in names}
    datasets = {n for n, c in classes.items() if c is h5py.Dataset}
    groups = {n for n, c in classes.items() if c is h5py.Group}
    if {"phrases", "indices"} <= datasets:
        # TM_dataset's PyTables /phrases + /indices (preprocess/convert-pkl2hdf5.py)
        role = "corpus"
    elif len(TRACE_GROUPS & groups) >= 2:
        role = "trace"
    else:
        role = "other"
    return Row(path, Kind.HDF5, size, facts=Hdf5Facts(role, names))


# ----------------------------------------------------------------------------------------------
# pickles
# ----------------------------------------------------------------------------------------------
#: keys every GroundHog state holds (train.py pickles the whole prototype: state.py:1-214);
#: a pickled dict with at least :data:`STATE_MIN_KEYS` of them is a state
STATE_KEYS = frozenset(
    "dim seqlen bs prefix null_sym_source null_sym_target n_sym_source n_sym_target "
    "unk_sym_source unk_sym_target rank_n_approx word_indx indx_word source target "
    "enc_rec_layer dec_rec_layer rec_layer search last_forward last_backward bias_code "
    "deep_out maxout_part algo lr".split()
)
STATE_MIN_KEYS = 6
_SPECIALS = ("<s>", "</s>", "UNK")


def pickle_row(path: Path, size: int, max_bytes: int) -> Row:
    from legacy_states.unpickle import safe_load_pickle

    if size > max_bytes:
        note = f"a pickle of {size} bytes: not opened (over the {max_bytes} bytes read)"
        return Row(path, Kind.PICKLE_OTHER, size, note=note)
    try:
        data = safe_load_pickle(path, max_bytes=max_bytes)
    except LegacyInputError as err:
        if "refused to unpickle" in err.problem:  # names code: a pickle, never run
            return Row(path, Kind.PICKLE_OTHER, size, note=err.problem)
        raise
    if isinstance(data, dict) and data:
        vocab = _vocabulary_facts(data)
        if vocab is not None:
            kind = Kind.INVERSE_VOCABULARY if vocab.inverted else Kind.VOCABULARY
            return Row(path, kind, size, facts=vocab)
        keys = {k for k in data if isinstance(k, str)}
        if len(keys) == len(data) and len(STATE_KEYS & keys) >= STATE_MIN_KEYS:
            return Row(path, Kind.STATE, size, facts=_state_facts(data))
    what = type(data).__name__ + (f" of {len(data)}" if hasattr(data, "__len__") else "")
    return Row(path, Kind.PICKLE_OTHER, size, note=f"holds a {what}")


def _is_id(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _vocabulary_facts(data: dict[Any, Any]) -> VocabularyFacts | None:
    if all(isinstance(k, str) and _is_id(v) for k, v in data.items()):
        inverted, ids, words = False, set(data.values()), data
    elif all(_is_id(k) and isinstance(v, str) for k, v in data.items()):
        inverted, ids = True, set(data)
        words = {}
        for i, w in data.items():
            words.setdefault(w, i)
    else:
        return None
    return VocabularyFacts(
        size=len(data),
        inverted=inverted,
        ids_complete=min(ids) == 0 and max(ids) == len(ids) - 1,
        n_ids=len(ids),
        max_id=max(ids),
        specials=tuple((s, words[s]) for s in _SPECIALS if s in words),
    )


def _state_facts(stored: dict[str, Any]) -> StateFacts:
    from legacy_states import match_prototype
    from legacy_states.vintage import is_old_state

    def num(key: str) -> int | None:
        v = stored.get(key)
        return v if _is_id(v) else None

    def text(key: str) -> str | None:
        v = stored.get(key)
        return v if isinstance(v, str) else None

    def paths(key: str) -> tuple[str, ...]:
        v = stored.get(key)
        v = [v] if isinstance(v, str) else v if isinstance(v, (list, tuple)) else []
        return tuple(p for p in v if isinstance(p, str))

    search = stored.get("search")
    try:
        prototype = match_prototype(stored)[0]
    except Exception:  # noqa: BLE001 - odd values: the prototype is a hint only
        prototype = ""
    return StateFacts(
        n_sym_source=num("n_sym_source"),
        n_sym_target=num("n_sym_target"),
        null_sym_source=num("null_sym_source"),
        null_sym_target=num("null_sym_target"),
        unk_sym_source=num("unk_sym_source"),
        unk_sym_target=num("unk_sym_target"),
        dim=num("dim"),
        rank_n_approx=num("rank_n_approx"),
        search=bool(search) if isinstance(search, (bool, int)) else None,
        prefix=text("prefix"),
        word_indx=text("word_indx"),
        indx_word=text("indx_word"),
        word_indx_trgt=text("word_indx_trgt"),
        indx_word_target=text("indx_word_target"),
        source=paths("source"),
        target=paths("target"),
        prototype=prototype,
        old_vintage=is_old_state(stored),
        stored=MappingProxyType(dict(stored)),
    )
