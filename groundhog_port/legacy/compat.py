"""Checkpoints from before GroundHog renamed or merged some of their contents.

``experiments/nmt/compat/`` holds three one-off converters for files written by earlier
versions of the code.  The port recognises the model and state vintages when it loads a
file, converts in memory and logs one line saying so; ``groundhog-port convert`` writes the
converted files (a timing file is converted there only: it is read as it is, as
``MainLoop`` read it).  Each conversion is the original function, ported:

* model (``convert_model.py:6`` ``merge_state_projections``, GroundHog commit ab870f2 of
  2014-08-06): the decoder once took the forward and backward encoder summaries through
  separate ``(dim, dim)`` projections, the backward ones named ``*_back_*``; since then it
  takes their concatenation through one ``(2 dim, dim)`` matrix.  The conversion stacks
  each ``W_0_dec_back_X`` under ``W_0_dec_X`` (``numpy.vstack``) and drops it, for ``X`` in
  ``dec_inputter_0``, ``dec_reseter_0``, ``dec_updater_0``, ``repr_readout``;
* state (``convert_state.py:7`` ``separate_enc_dec_rec_layers``, commit bb60d54 of
  2014-07-08): the shared ``rec_*`` options copied to ``enc_rec_*`` and ``dec_rec_*``
  before the prototype's defaults are merged in; ported in :mod:`legacy_states.vintage`,
  beside the state loading that applies it, and re-exported here;
* timing (``convert_timing.py:6`` ``rename_costs``, commit 36831a7 of 2014-07-25):
  ``cost2_p_expl`` / ``cost2_p_word`` were renamed ``log2_p_expl`` / ``log2_p_word``.

Anything else unknown is still refused by strict loading (the conversions only rename or
stack what they name).  Where the original's function would fail on an incomplete file
(a ``*_back_*`` matrix without its forward one), the port says so instead.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

import numpy as np

from legacy_states.vintage import (
    CONVERT_HINT,
    SHARED_REC_OPTIONS,
    is_old_state,
    separate_enc_dec_rec_layers,
    upgrade_state,
)

from ..errors import LegacyInputError

logger = logging.getLogger(__name__)

__all__ = [
    "BACK_PROJECTIONS",
    "SHARED_REC_OPTIONS",
    "TIMING_RENAMES",
    "is_old_model",
    "is_old_state",
    "is_old_timing",
    "merge_state_projections",
    "rename_costs",
    "separate_enc_dec_rec_layers",
    "upgrade_model",
    "upgrade_state",
]

#: (merged name, old backward name) -- convert_model.py:7-18
BACK_PROJECTIONS = tuple(
    (f"W_0_dec_{x}", f"W_0_dec_back_{x}")
    for x in ("dec_inputter_0", "dec_reseter_0", "dec_updater_0", "repr_readout")
)
#: old timing name -> new -- convert_timing.py:7-10
TIMING_RENAMES = {"cost2_p_expl": "log2_p_expl", "cost2_p_word": "log2_p_word"}


def is_old_model(arrays: Mapping[str, object]) -> bool:
    return any(back in arrays for _, back in BACK_PROJECTIONS)


def merge_state_projections(
    arrays: Mapping[str, np.ndarray], path: str | os.PathLike[str] | None = None
) -> dict[str, np.ndarray]:
    """``convert_model.py:6``: a new dict, each ``*_back_*`` projection stacked under its
    forward one.  Pairs whose backward matrix is absent are left alone (a decoder without
    gates has no updater / reseter)."""
    out = dict(arrays)
    for merged, back in BACK_PROJECTIONS:
        if back not in out:
            continue
        if merged not in out:
            raise LegacyInputError(
                path,
                f"old-vintage model holds {back} but not {merged}: "
                "cannot merge the decoder projections",
            )
        fwd, bwd = out[merged], out.pop(back)
        if fwd.ndim != 2 or bwd.ndim != 2 or fwd.shape[1] != bwd.shape[1]:
            raise LegacyInputError(
                path,
                f"old-vintage model: {merged} {fwd.shape} and {back} {bwd.shape} cannot be stacked",
            )
        out[merged] = np.vstack([fwd, bwd])
    return out


def upgrade_model(
    arrays: dict[str, np.ndarray], path: str | os.PathLike[str] | None = None
) -> dict[str, np.ndarray]:
    """The model arrays in today's layout; one log line when they were converted."""
    if not is_old_model(arrays):
        return arrays
    names = [back for _, back in BACK_PROJECTIONS if back in arrays]
    out = merge_state_projections(arrays, path)
    logger.info(
        "%s: old-vintage model (separate *_back_* decoder projections, before GroundHog "
        "commit ab870f2): stacked %s into the forward ones in memory, as "
        "convert_model.py merge_state_projections%s",
        path,
        ", ".join(names),
        CONVERT_HINT,
    )
    return out


def is_old_timing(arrays: Mapping[str, object]) -> bool:
    return any(old in arrays for old in TIMING_RENAMES)


def rename_costs(
    arrays: Mapping[str, np.ndarray], path: str | os.PathLike[str] | None = None
) -> dict[str, np.ndarray]:
    """``convert_timing.py:6``, on a copy."""
    out = dict(arrays)
    for old, new in TIMING_RENAMES.items():
        if old in out:
            if new in out:
                raise LegacyInputError(
                    path,
                    f"holds both {old} and {new}: which one is the training curve is ambiguous",
                )
            out[new] = out.pop(old)
    return out
