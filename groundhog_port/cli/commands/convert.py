"""``groundhog-port convert``: ``experiments/nmt/compat/convert_{model,state,timing}.py``."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

import numpy as np

import legacy_states

from ...errors import EXIT_OK, LegacyInputError
from ...legacy import compat
from ...legacy.preprocess.py2dict import Py2Dict
from ...legacy.preprocess.py2pickle import dumps
from ...legacy.preprocess.staging import Staged
from ...outputs import check_outputs, signals_held

NAME = "convert"
HELP = (
    "write an old-vintage GroundHog file (*_model.npz with *_back_* decoder projections, "
    "*_state.pkl with shared rec_* options, *_timing.npz with cost2_p_* keys) in today's layout"
)
logger = logging.getLogger("groundhog_port.legacy.compat")

#: keys only a timing file holds (mainLoop.save's timings, convert_timing.py)
TIMING_MARKERS = (
    frozenset(compat.TIMING_RENAMES)
    | frozenset(compat.TIMING_RENAMES.values())
    | {"next_offset", "time_step", "grad_norm"}
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "input",
        help="the file to convert: *_state.pkl, *_model.npz or *_timing.npz "
        "(the kind is read from the contents)",
    )
    p.add_argument("output", nargs="?", help="where to write the converted file")
    p.add_argument(
        "--in-place",
        action="store_true",
        help="replace INPUT (the original scripts' default); only once the converted "
        "file is complete",
    )


def _py2_strings(value):
    """State strings were Python-2 byte strings: write them as such."""
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, list):
        return [_py2_strings(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_py2_strings(v) for v in value)
    if isinstance(value, dict):
        return {_py2_strings(k): _py2_strings(v) for k, v in value.items()}
    return value


def convert_state(path: str | os.PathLike[str]) -> tuple[bool, bytes | None]:
    """``(converted, bytes)``: the pickled dict (``cPickle.load`` order) with
    ``separate_enc_dec_rec_layers`` applied, as ``cPickle.dump`` (protocol 0) writes it."""
    stored = legacy_states.safe_load_pickle(path)
    if not isinstance(stored, dict):
        raise LegacyInputError(
            path,
            f"a GroundHog state is a pickled dict, this pickle holds a {type(stored).__name__}",
        )
    if not compat.is_old_state(stored):
        return False, None
    new = compat.separate_enc_dec_rec_layers(stored)
    d = Py2Dict(_py2_strings(stored).items())  # the dict cPickle.load rebuilt
    for k, v in new.items():
        if k not in stored:
            d[k.encode()] = _py2_strings(v)
    try:
        return True, dumps(d, 0)
    except (TypeError, ValueError) as err:
        raise LegacyInputError(
            path, f"cannot write this state as a Python-2 pickle ({err})"
        ) from None


def _savez(arrays):
    def write(tmp):
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)

    return write


def run(args: argparse.Namespace) -> int:
    with signals_held():  # torch loads here: a Ctrl-C waits until it has (cli/main.py says why)
        from ...legacy import checkpoint
    src = Path(args.input)
    if args.in_place == bool(args.output):
        raise LegacyInputError(None, "give an OUTPUT file, or --in-place to replace the input")
    dst = src if args.in_place else Path(args.output)
    reads = [] if args.in_place else [("INPUT", src)]
    try:
        check_outputs([("OUTPUT", dst)], reads)  # before any work
    except LegacyInputError as err:
        raise LegacyInputError(
            err.path, err.problem + " (or give --in-place to replace it on purpose)"
        ) from None
    try:
        magic = src.read_bytes()[:4]
    except OSError as err:
        raise LegacyInputError(src, f"cannot read ({err.strerror or err})") from None
    staged = Staged(reads)
    if magic != b"PK\x03\x04":
        kind = "state"
        old, data = convert_state(src)
        if old:
            assert data is not None  # convert_state writes every state it converts
            staged.add_bytes(dst, data)
    else:
        raw = checkpoint.read_npz_arrays(
            src, "timing" if src.name.endswith("timing.npz") else "model"
        )
        if set(raw) & TIMING_MARKERS:
            kind = "timing"
            old = compat.is_old_timing(raw)
            if old:
                staged.add(dst, _savez(compat.rename_costs(raw, src)))
        else:
            kind = "model"
            old = compat.is_old_model(raw)
            if old:
                staged.add(dst, _savez(compat.upgrade_model(raw, src)))
    if not old:
        logger.info(
            "%s: a %s file already in today's layout: nothing to convert, nothing written",
            src,
            kind,
        )
        return EXIT_OK
    staged.commit()
    logger.info("wrote the converted %s file %s", kind, dst)
    return EXIT_OK
