"""Reading a GroundHog ``*_state.pkl`` the way ``sample.py`` / ``score.py`` do, and finding
the data files it names.

The original builds its state in three steps (sample.py:225-228, score.py:111-114)::

    state = prototype_state()
    state.update(cPickle.load(open(state_path)))
    state.update(eval("dict({})".format(changes)))

:func:`load_state` does the same with the safe unpickler and the literal-only changes
parser.  Paths inside a state are those of the machine it was trained on
(``/data/lisatmp3/...``); :func:`resolve_path` finds the file by its name next to the state
file or in the data directories when the stored path does not exist, and says which file it
used (:mod:`groundhog_port.lookup`, the one lookup every command shares).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from groundhog_port import lookup
from groundhog_port.errors import LegacyInputError, quoted
from groundhog_port.untrusted import open_input

from .changes import check_change_keys, parse_changes
from .prototypes import DATA_PATH_KEYS, prototype_state
from .unpickle import safe_load_pickle
from .vintage import upgrade_state

#: data-path keys whose value is a one-element list (state.py:12-15)
LIST_PATH_KEYS = ("source", "target")


def load_state(
    path: str | os.PathLike[str],
    changes: str | list[str] = "",
    data_dir: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    strict: bool = False,
) -> dict[str, Any]:
    """``prototype_state()``, updated with the pickled dict, then with ``changes`` (a text or
    a list of texts, :func:`parse_changes`).

    Returns a plain dict holding exactly what the original would hold (nothing added).
    Keys of the changes that GroundHog never reads are warned about (an error with
    ``strict``): :func:`check_change_keys`.
    ``data_dir`` (one folder or a list) is only checked to be directories here, so that a wrong ``--data-dir``
    fails early; paths are resolved on demand by :func:`resolve_path`.
    """
    path = Path(path)
    lookup.data_dirs(data_dir)  # a wrong --data-dir fails before any loading
    stored = load_stored_state(path)
    if not isinstance(stored, dict):
        raise LegacyInputError(
            path,
            f"a GroundHog state is a pickled dict, this pickle holds a {type(stored).__name__}",
        )
    bad_keys = [k for k in stored if not isinstance(k, str)]
    if bad_keys:
        raise LegacyInputError(path, f"state keys must be strings, found {bad_keys[:5]!r}")
    state = prototype_state()
    state.update(upgrade_state(stored, path))  # an old vintage, converted in memory
    parsed = parse_changes(changes)
    check_change_keys(parsed, state, strict)
    state.update(parsed)
    return state


def load_stored_state(path: str | os.PathLike[str]) -> Any:
    """What a ``*_state.pkl`` holds (:func:`safe_load_pickle`); a model file given in its
    place (a zip archive, as numpy.savez writes) is named as such."""
    try:
        with open_input(path, "a state") as f:  # a FIFO or device refused by type
            magic = f.read(4)
    except OSError:
        magic = b""  # safe_load_pickle says what is wrong with the path
    if magic == b"PK\x03\x04":
        raise LegacyInputError(
            path,
            "is a .npz archive (a *_model.npz?), not a pickled state: "
            "--state and MODEL look swapped (--state S_state.pkl "
            "S_model.npz)",
        )
    return safe_load_pickle(path)


def _stored_path(state, key, state_path):
    if key not in DATA_PATH_KEYS:
        raise ValueError(f"{key!r} is not a data-path key ({', '.join(DATA_PATH_KEYS)})")
    value = state.get(key)
    if key in LIST_PATH_KEYS:
        # GroundHog keeps these as singleton lists "for backward compatibility"
        if not isinstance(value, (list, tuple)) or len(value) != 1:
            raise LegacyInputError(
                state_path,
                f"state[{key!r}] must be a one-element list of paths, found {quoted(value)}"
                f" (in the changes: {key}=['FILE'])",
            )
        value = value[0]
    if value is None:
        raise LegacyInputError(
            state_path,
            f"state[{key!r}] is not set (None): give it in the changes, "
            f"e.g. {key}=" + ("['file']" if key in LIST_PATH_KEYS else "'file'"),
        )
    if not isinstance(value, str) or not value:
        raise LegacyInputError(state_path, f"state[{key!r}] is not a path: {quoted(value)}")
    return value


def resolve_path(
    state: dict[str, Any],
    key: str,
    state_path: str | os.PathLike[str],
    data_dir: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    explicit: bool = False,
) -> Path:
    """The file to use for data-path ``key`` of ``state``, found by
    :func:`groundhog_port.lookup.find_stored`: the stored path, else the same name next to
    ``state_path``, else in each of ``data_dir`` (one folder or a list, in order).

    ``explicit`` (the key was given in the changes): the path is used as given, relative to
    the working directory like the original, and must exist.  When nothing is found,
    :class:`LegacyInputError` lists every place looked at.
    """
    return lookup.find_stored(
        _stored_path(state, key, state_path),
        key,
        state_path,
        lookup.data_dirs(data_dir, check=False),
        explicit=explicit,
        change=f"{key}=['FILE']" if key in LIST_PATH_KEYS else None,
    )
