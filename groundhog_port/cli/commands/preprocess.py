"""``groundhog-port preprocess``: ``experiments/nmt/preprocess/preprocess.py``, same flags."""

from __future__ import annotations

import argparse

from ...errors import EXIT_OK
from ...legacy import preprocess as pp

NAME = "preprocess"
HELP = (
    "count words, build the vocabulary and binarize text as GroundHog's preprocess.py "
    "(same flags), writing Python-2 pickles; optionally the ivocab and .h5 too"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", nargs="+", help="the input files (.gz and .bz2 are read as such)")
    p.add_argument(
        "-b",
        "--binarized-text",
        default="binarized_text.pkl",
        help="the name of the pickled binarized text file",
    )
    p.add_argument(
        "-d",
        "--dictionary",
        default="vocab.pkl",
        help="the name of the pickled dictionary (word -> index)",
    )
    p.add_argument("-n", "--ngram", type=int, metavar="N", help="create n-grams")
    p.add_argument(
        "-v",
        "--vocab",
        type=int,
        metavar="N",
        help="limit vocabulary size to this number, which must include BOS/EOS and "
        "OOV markers (1 or 2: every word, as the original)",
    )
    p.add_argument(
        "-p", "--pickle", action="store_true", help="pickle the text as a list of lists of ints"
    )
    p.add_argument(
        "-s",
        "--split",
        type=float,
        metavar="N",
        help="create a validation set of the n-grams: >= 1 this many, < 1 this "
        "fraction (drawn with --seed)",
    )
    p.add_argument(
        "-o",
        "--overwrite",
        action="store_true",
        help="overwrite earlier created files, also forces the program not to reuse count files",
    )
    p.add_argument(
        "-e", "--each", action="store_true", help="output files for each separate input file"
    )
    p.add_argument("-c", "--count", action="store_true", help="save the word counts")
    p.add_argument("-t", "--char", action="store_true", help="character-level processing")
    p.add_argument("-l", "--lowercase", action="store_true", help="lowercase (ASCII, as Python 2)")
    p.add_argument(
        "--dict-order",
        choices=pp.DICT_ORDERS,
        default="py2",
        help="rank equally frequent words in CPython 2.7's dict order (py2, default: "
        "what every archived experiment used) or Python 3's first-occurrence "
        "order (py3)",
    )
    p.add_argument(
        "--seed",
        type=int,
        help="seed of -s's validation draw (the original used "
        "numpy's unseeded generator; default: a random seed, logged)",
    )
    p.add_argument(
        "--ivocab",
        metavar="FILE",
        help="also write the inverted dictionary, as invert-dict.py would from the -d file",
    )
    p.add_argument(
        "--h5",
        metavar="FILE",
        help="also write the binarized text as .h5, as "
        "convert-pkl2hdf5.py would from the -b file (needs -p)",
    )


def run(args: argparse.Namespace) -> int:
    pp.preprocess(
        args.input,
        dictionary=args.dictionary,
        binarized_text=args.binarized_text,
        vocab=args.vocab,
        pickle_text=args.pickle,
        ngram=args.ngram,
        split=args.split,
        overwrite=args.overwrite,
        each=args.each,
        count=args.count,
        char=args.char,
        lowercase=args.lowercase,
        dict_order=args.dict_order,
        seed=args.seed,
        ivocab=args.ivocab,
        h5=args.h5,
    )
    return EXIT_OK
