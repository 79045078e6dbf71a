"""GroundHog's file names: what ``sample.py``, ``score.py`` and ``train.py`` called the files
they wrote, and the state keys naming vocabularies.  Names only ever order candidates or
say what a file was meant to be; what a file is, is read from its content
(:mod:`groundhog_port.tasks.archive`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

#: the state keys of the four vocabularies (sample.py:237-247): word -> id and id -> word,
#: source then target
VOCABULARY_FILE_KEYS = ("word_indx", "indx_word", "word_indx_trgt", "indx_word_target")


#: ``scores_batch[_holdout][_runK].txt`` / ``scores_h5_trainN[_runK].txt`` (docs/recordings.md, "Files")
SCORES_NAME = re.compile(
    r"^scores_(?:batch(?:_(?P<set>holdout))?|h5_train(?P<n>[1-9][0-9]*))"
    r"(?:_run(?P<run>[0-9]+))?\.txt$"
)


#: ``trans_[holdout_]beam<N>[_normalize][_ignore_unk][_run<K>].txt``: the recordings' names
#: for sample.py's outputs, saying their settings (docs/recordings.md, "Files")
TRANS_NAME = re.compile(
    r"^trans_(?:(?P<set>holdout)_)?beam(?P<beam>[1-9][0-9]*)"
    r"(?P<flags>(?:_normalize|_ignore_unk)*)(?:_run(?P<run>[0-9]+))?\.txt$"
)


#: test set name -> its standard (source, reference) names, as sample.py's users named them
TEST_SET_NAMES = {"test": ("test.en", "test.fr"), "holdout": ("holdout.en", "holdout.fr")}


# ----------------------------------------------------------------------------------------
# what a name says a file was written as (the one rule; content decides what it is)
# ----------------------------------------------------------------------------------------
def is_translation_name(name: str) -> bool:
    """An output sample.py ``--trans`` may have written: a ``.txt`` whose name holds
    ``trans`` (``trans.txt``, ``dev_trans.txt``, ``trans_beam10.txt``), not its printed
    output (``sample_<stem>_stdout.txt``)."""
    return "trans" in name and name.endswith(".txt") and not name.startswith("sample_")


def is_output(name: str) -> bool:
    """What sample.py / score.py may have written: a translation
    (:func:`is_translation_name`), ``scores*.txt``, a crash log ``*_error.txt``."""
    return (
        is_translation_name(name)
        or (name.startswith("scores") and name.endswith(".txt"))
        or name.endswith("_error.txt")
    )


def is_log_name(name: str) -> bool:
    """What the recordings kept beside the outputs: sample.py's printed output
    (``sample_<stem>_stdout.txt``) and MainLoop's ``timings.txt``."""
    return (name.startswith("sample_") and name.endswith("_stdout.txt")) or name == "timings.txt"


def never_a_test_set(name: str) -> bool:
    """A name no test set has: an output or a log of the original (:func:`is_output`,
    :func:`is_log_name`)."""
    return is_output(name) or is_log_name(name)


def output_kind(name: str) -> str:
    if name.endswith("_error.txt"):
        return "crash log"
    if name.startswith("scores"):
        return "scores"
    return "trans"


def snapshot_number(path: str | os.PathLike[str]) -> int | None:
    """``N`` of a snapshot named ``prefix + 'model%d.npz' % N`` (mainLoop.py:233-234), else
    None: a fact of the name, used to order candidates, never to classify."""
    m = re.search(r"model([0-9]+)\.npz$", Path(path).name)
    return int(m.group(1)) if m else None


#: ``beam12``, ``beam-12``, ``beam_12``, ``b12`` as a word of a file name
_BEAM_WORD = re.compile(r"(?:^|[^a-z])(?:beam|b)[_.-]?([1-9][0-9]{0,3})(?![0-9])", re.IGNORECASE)


def name_hint(name: str) -> tuple[int, bool, bool] | None:
    """``(beam, normalize, ignore_unk)`` a file name suggests (``hyp.beam12``,
    ``out_beam5_norm.txt``), or ``None``: a hint that orders the settings tried, never
    believed over the file's content."""
    m = _BEAM_WORD.search(name)
    if m is None:
        return None
    low = name.lower()
    return int(m.group(1)), "norm" in low, "ignore_unk" in low or "ignoreunk" in low
