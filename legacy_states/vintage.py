"""States from before GroundHog gave the encoder and decoder their own recurrent options.

``convert_state.py:7`` ``separate_enc_dec_rec_layers`` (GroundHog commit bb60d54 of
2014-07-08): one set of ``rec_*`` options once described every recurrent layer; since then
the encoder and decoder have their own ``enc_rec_*`` / ``dec_rec_*``.  The conversion copies
``rec_layer``, ``rec_gating``, ``rec_reseting``, ``rec_gater``, ``rec_reseter`` to both.  A
state is of that vintage when the pickle names ``rec_layer`` but no ``enc_rec_*`` or
``dec_rec_*`` key (every later state holds all of them: train.py pickles the whole
prototype), and is converted before the prototype's defaults are merged in -- otherwise
those defaults, not the state's own ``rec_*``, would describe its layers.

It lives here, beside :func:`legacy_states.load_state` which applies it, so that this
package imports nothing above the foundation; :mod:`groundhog_port.legacy.compat` lists it
with the model and timing conversions.
"""

from __future__ import annotations

import logging
from typing import Any

# the logger name every vintage conversion has always logged under (users' logs show it)
logger = logging.getLogger("groundhog_port.legacy.compat")

#: the shared options the encoder and decoder each got a copy of -- convert_state.py:8-18
SHARED_REC_OPTIONS = ("rec_layer", "rec_gating", "rec_reseting", "rec_gater", "rec_reseter")

#: the end of each conversion's log line
CONVERT_HINT = "; `groundhog-port convert` writes the converted file"


def is_old_state(stored: dict[str, Any]) -> bool:
    return "rec_layer" in stored and not any(
        str(k).startswith(("enc_rec_", "dec_rec_")) for k in stored
    )


def separate_enc_dec_rec_layers(stored: dict[str, Any]) -> dict[str, Any]:
    """``convert_state.py:7``, on a copy; keys are added in the original's order."""
    out = stored.copy()
    for side in ("enc", "dec"):
        for key in SHARED_REC_OPTIONS:
            if key in stored:
                out[f"{side}_{key}"] = stored[key]
    return out


def upgrade_state(stored: dict[str, Any], path: object = None) -> dict[str, Any]:
    """The pickled state dict in today's layout (before the prototype is merged in)."""
    if not is_old_state(stored):
        return stored
    logger.info(
        "%s: old-vintage state (shared rec_* options, before GroundHog commit bb60d54): "
        "copied them to enc_rec_* and dec_rec_* in memory, as convert_state.py "
        "separate_enc_dec_rec_layers%s",
        path,
        CONVERT_HINT,
    )
    return separate_enc_dec_rec_layers(stored)
