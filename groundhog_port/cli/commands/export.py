"""``groundhog-port export``: a loaded checkpoint in today's formats (docs/export.md).

``--format safetensors``: ``model.safetensors`` + ``config.json`` (no pickle), which
``translate`` / ``score`` / ``serve --checkpoint DIR`` and ``open_experiment(DIR)`` load
back to the same float32 weights.  ``--format onnx``: the encoder and the two functions
of one decoder step as ONNX graphs, ``config.json``, and ``beam_search.py``, a numpy
driver that runs them with onnxruntime as sample.py searched.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import EXIT_OK, LegacyInputError

if TYPE_CHECKING:
    from ...legacy.experiment import Experiment
from .common import (
    add_model_arguments,
    add_output_folder,
    experiment_reads,
    model_and_changes,
    open_from_args,
)

NAME = "export"
HELP = (
    "write a checkpoint as safetensors + config.json, or as ONNX graphs with a numpy "
    "beam-search driver (docs/export.md)"
)
FORMATS = ("safetensors", "onnx")
logger = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", required=True, choices=FORMATS, help="what to write")
    add_model_arguments(p)
    add_output_folder(
        p,
        "directory to write into (created; files of the same names replaced); "
        "last: export --format F --state S MODEL [changes] OUTDIR, or --out DIR",
    )


#: the package each format needs (the export extra), checked before anything is loaded
NEEDS = {"safetensors": "safetensors", "onnx": "onnx"}


def output_names(fmt: str) -> tuple[str, ...]:
    """The files ``export --format fmt`` writes into OUTDIR."""
    if fmt == "safetensors":
        from ...legacy.exported import CONFIG_FILE, WEIGHTS_FILE

        return (WEIGHTS_FILE, CONFIG_FILE)
    from ...export.onnx_graphs import DRIVER_FILE, GRAPH_FILES

    return (*GRAPH_FILES, "config.json", DRIVER_FILE)


def check_outdir(args: argparse.Namespace, exp: Experiment) -> None:
    """Before anything is written: no file of OUTDIR is a link (never followed there) or a
    file the export reads (``--checkpoint D D``: D's own config.json and weights)."""
    from ...outputs import check_outputs, file_in

    if not Path(args.outdir).is_dir():
        return  # created on writing: nothing in it yet to collide with
    names = output_names(args.format)
    check_outputs(
        [(f"OUTDIR's {name}", file_in(args.outdir, name)) for name in names],
        inputs=experiment_reads(exp, args.state, args.model_path),
    )


def run(args: argparse.Namespace) -> int:
    model_and_changes(args)  # OUTDIR or --out DIR
    if importlib.util.find_spec(NEEDS[args.format]) is None:
        raise LegacyInputError(
            None,
            f"export --format {args.format} needs the "
            f"{NEEDS[args.format]} package: pip install "
            "'groundhog-port[export]'",
        )
    if Path(args.outdir).exists() and not Path(args.outdir).is_dir():
        raise LegacyInputError(
            args.outdir,
            "the output folder is not a directory (usage: groundhog-port "
            "export --format F --state S MODEL [changes] --out DIR)",
        )
    if args.lenient or args.stable_softmax:
        raise LegacyInputError(
            None,
            "export writes the model as loaded strictly and computed "
            "as the original did: --lenient and --stable-softmax "
            "do not apply",
        )
    exp = open_from_args(args)
    check_outdir(args, exp)
    paths: Sequence[Path]
    if args.format == "safetensors":
        from ...legacy.exported import write_checkpoint

        paths = write_checkpoint(exp, args.outdir)
    else:
        from ...export.onnx_graphs import write_onnx

        paths = write_onnx(exp, args.outdir)
    for path in paths:
        logger.info("wrote %s", path)
    return EXIT_OK
