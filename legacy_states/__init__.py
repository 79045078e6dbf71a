"""GroundHog's state prototypes as data, safe loading of ``*_state.pkl``, and ``changes``.

* :mod:`.prototypes` -- the five prototypes of ``experiments/nmt/state.py``,
  :data:`PROTOTYPES` and :func:`match_prototype`.
* :mod:`.unpickle` -- :func:`safe_load_pickle` for Python-2 pickles (plain data only).
* :mod:`.changes` -- :func:`parse_changes` for the ``key=value,...`` changes syntax.
* :mod:`.load` -- :func:`load_state` and :func:`resolve_path`.
* :mod:`.vintage` -- states of before GroundHog's ``enc_rec_*`` / ``dec_rec_*`` options.

It imports nothing of ``groundhog_port`` above the foundation (``errors``, ``budget``,
``untrusted``, ``lookup``): the import-linter contract in ``pyproject.toml``.
"""

from .changes import check_change_keys, known_keys, parse_changes
from .load import LIST_PATH_KEYS, load_state, load_stored_state, resolve_path
from .prototypes import (
    DATA_PATH_KEYS,
    MATCH_IGNORED_KEYS,
    PROTOTYPES,
    VOCABULARY_KEYS,
    corpus_paths,
    match_prototype,
    prototype_encdec_state,
    prototype_phrase_lstm_state,
    prototype_phrase_state,
    prototype_search_state,
    prototype_state,
    same_value,
)
from .unpickle import MAX_PICKLE_BYTES, safe_load_pickle

__all__ = [
    "DATA_PATH_KEYS",
    "VOCABULARY_KEYS",
    "LIST_PATH_KEYS",
    "check_change_keys",
    "corpus_paths",
    "known_keys",
    "MATCH_IGNORED_KEYS",
    "MAX_PICKLE_BYTES",
    "PROTOTYPES",
    "load_state",
    "load_stored_state",
    "match_prototype",
    "parse_changes",
    "prototype_encdec_state",
    "prototype_phrase_lstm_state",
    "prototype_phrase_state",
    "prototype_search_state",
    "prototype_state",
    "resolve_path",
    "safe_load_pickle",
    "same_value",
]
