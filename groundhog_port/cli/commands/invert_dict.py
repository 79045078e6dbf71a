"""``groundhog-port invert-dict``: ``experiments/nmt/preprocess/invert-dict.py``."""

from __future__ import annotations

import argparse

from ...errors import EXIT_OK
from ...legacy import preprocess as pp

NAME = "invert-dict"
HELP = (
    "write the index -> word dictionary (ivocab) of a word -> index vocabulary, as invert-dict.py"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help="the dictionary to be inverted (vocab.*.pkl)")
    p.add_argument("output", help="the inverted dictionary (ivocab.*.pkl, Python-2 protocol 0)")
    p.add_argument(
        "--dict-order",
        choices=pp.DICT_ORDERS,
        default="py2",
        help="iterate the vocabulary as CPython 2.7 (py2, default: ivocab[0] is "
        "'<s>') or as the Python-3 runs (py3: '</s>')",
    )


def run(args: argparse.Namespace) -> int:
    pp.invert_dict(args.input, args.output, args.dict_order)
    return EXIT_OK
