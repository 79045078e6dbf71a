"""Reading a GroundHog ``*_state.pkl`` the way ``sample.py`` / ``score.py`` do, and finding
the data files it names.

The original builds its state in three steps (sample.py:225-228, score.py:111-114)::

    state = prototype_state()
    state.update(cPickle.load(open(state_path)))
    state.update(eval("dict({})".format(changes)))

:func:`load_state` does the same with the safe unpickler and the literal-only changes
parser.  Paths inside a state are those of the machine it was trained on
(``/data/lisatmp3/...``); :func:`resolve_path` finds the file by its name next to the state
file or in a data directory when the stored path does not exist, and says which file it used.
"""

from __future__ import annotations

import logging
from pathlib import Path

from groundhog_port.compat import upgrade_state
from groundhog_port.errors import LegacyInputError

from .changes import parse_changes
from .prototypes import DATA_PATH_KEYS, prototype_state
from .unpickle import safe_load_pickle

logger = logging.getLogger("groundhog_port.paths")

#: data-path keys whose value is a one-element list (state.py:12-15)
LIST_PATH_KEYS = ("source", "target")


def load_state(path, changes: str = "", data_dir=None) -> dict:
    """``prototype_state()``, updated with the pickled dict, then with ``changes``.

    Returns a plain dict holding exactly what the original would hold (nothing added).
    ``data_dir`` is only checked to be a directory here, so that a wrong ``--data-dir``
    fails early; paths are resolved on demand by :func:`resolve_path`.
    """
    path = Path(path)
    if data_dir is not None and not Path(data_dir).is_dir():
        raise LegacyInputError(data_dir, "data directory does not exist or is not a directory")
    stored = safe_load_pickle(path)
    if not isinstance(stored, dict):
        raise LegacyInputError(path, f"a GroundHog state is a pickled dict, this pickle holds a "
                                     f"{type(stored).__name__}")
    bad_keys = [k for k in stored if not isinstance(k, str)]
    if bad_keys:
        raise LegacyInputError(path, f"state keys must be strings, found {bad_keys[:5]!r}")
    state = prototype_state()
    state.update(upgrade_state(stored, path))  # an old vintage, converted in memory
    state.update(parse_changes(changes))
    return state


def _stored_path(state, key, state_path):
    if key not in DATA_PATH_KEYS:
        raise ValueError(f"{key!r} is not a data-path key ({', '.join(DATA_PATH_KEYS)})")
    value = state.get(key)
    if key in LIST_PATH_KEYS:
        # GroundHog keeps these as singleton lists "for backward compatibility"
        if not isinstance(value, (list, tuple)) or len(value) != 1:
            raise LegacyInputError(state_path, f"state[{key!r}] must be a one-element list of paths, "
                                               f"found {value!r}")
        value = value[0]
    if value is None:
        raise LegacyInputError(state_path, f"state[{key!r}] is not set (None): give it in the changes, "
                                           f"e.g. {key}=" + ("['file']" if key in LIST_PATH_KEYS else "'file'"))
    if not isinstance(value, str) or not value:
        raise LegacyInputError(state_path, f"state[{key!r}] is not a path: {value!r}")
    return value


def _is_file(path: Path) -> bool:
    """``path.is_file()``, False also when the name cannot be looked up at all (too long,
    a NUL byte...): such a state value names no usable file."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def resolve_path(state: dict, key: str, state_path, data_dir=None, explicit: bool = False) -> Path:
    """The file to use for data-path ``key`` of ``state``.

    ``explicit`` (the key was given in the changes): the path is used as given, relative to
    the working directory like the original, and must exist.  Otherwise: the stored path if
    it is a file; else a file of the same name next to ``state_path``; else one in
    ``data_dir``.  The choice is logged on logger ``groundhog_port.paths``; when nothing is
    found, :class:`LegacyInputError` lists every place looked at.
    """
    value = _stored_path(state, key, state_path)
    stored = Path(value)
    if explicit:
        if _is_file(stored):
            logger.info("%s: using %s (given in the changes)", key, stored)
            return stored
        raise LegacyInputError(stored, f"file for {key!r} given in the changes does not exist")
    if _is_file(stored):
        logger.info("%s: using %s (the path stored in the state)", key, stored)
        return stored
    candidates = [(Path(state_path).parent / stored.name, "next to the state file")]
    if data_dir is not None:
        candidates.append((Path(data_dir) / stored.name, "in the data directory"))
    for candidate, where in candidates:
        if _is_file(candidate):
            logger.info("%s: %s does not exist; using %s (%s)", key, stored, candidate, where)
            return candidate
    looked = [str(stored)] + [str(c) for c, _ in candidates]
    hint = "" if data_dir is not None else "; pass a data directory or give the path in the changes"
    raise LegacyInputError(state_path, f"cannot find the file for {key!r}: looked at {', '.join(looked)}{hint}")
