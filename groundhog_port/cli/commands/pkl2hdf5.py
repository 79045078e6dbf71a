"""``groundhog-port pkl2hdf5``: ``experiments/nmt/preprocess/convert-pkl2hdf5.py``."""

from __future__ import annotations

import argparse

from ...errors import EXIT_OK
from ...legacy import preprocess as pp

NAME = "pkl2hdf5"
HELP = "convert a binarized text pickle to GroundHog's .h5 layout (/phrases, /indices)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help="pickle file (preprocess -p output)")
    p.add_argument("output", help="output HDF5 file")


def run(args: argparse.Namespace) -> int:
    pp.pkl2hdf5(args.input, args.output)
    return EXIT_OK
