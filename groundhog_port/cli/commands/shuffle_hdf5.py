"""``groundhog-port shuffle-hdf5``: ``experiments/nmt/preprocess/shuffle-hdf5.py``."""

from __future__ import annotations

import argparse

from ...errors import EXIT_OK
from ...legacy import preprocess as pp

NAME = "shuffle-hdf5"
HELP = "shuffle the two sides of a bitext (.h5) in one random order, pairs kept together"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source_input", help="the source input HDF5 file")
    p.add_argument("target_input", help="the target input HDF5 file")
    p.add_argument("source_output", help="the source output HDF5 file")
    p.add_argument("target_output", help="the target output HDF5 file")
    p.add_argument(
        "--seed",
        type=int,
        help="seed: the order shuffle-hdf5.py gives after "
        "numpy.random.seed(SEED) (the original was unseeded; default: a random "
        "seed, logged)",
    )


def run(args: argparse.Namespace) -> int:
    pp.shuffle_hdf5(
        args.source_input, args.target_input, args.source_output, args.target_output, args.seed
    )
    return EXIT_OK
