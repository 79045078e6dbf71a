"""``groundhog-port translate``: sample.py's flags, its output files, and more."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...distributed import pool
from ...distributed import world as distributed
from ...errors import EXIT_OK, LegacyInputError
from ...legacy.data import read_text_lines
from ...legacy.longlines import warn_long_lines
from ...outputs import DigestsAhead, check_outputs, signals_held
from ...search.defaults import DEFAULT_BATCH_SIZE, GROUP_ROWS, batch_size
from .. import sample as sampling_cli

if TYPE_CHECKING:
    from ...legacy.experiment import Experiment
    from ...search.translator import Translator
from .common import (
    add_model_arguments,
    add_progress_arguments,
    add_workers_argument,
    digests_ahead,
    experiment_reads,
    open_from_args,
    settle_workers,
    source_fingerprint,
)

NAME = "translate"
HELP = (
    "translate as GroundHog's sample.py did: beam search (--beam-search --beam-size N "
    "--source F --trans F) or random sampling (without --beam-search: interactive, or "
    "--source F --n-samples N --alpha A --trans F)"
)
logger = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p)
    p.add_argument(
        "--beam-search",
        action="store_true",
        help="use beam search; without it, sample randomly as sample.py does "
        "(Theano's MRG31k3p stream, draw for draw)",
    )
    p.add_argument("--beam-size", type=int, help="beam size")
    p.add_argument("--ignore-unk", action="store_true", help="never produce the unknown word")
    p.add_argument("--source", help="file of source sentences, one per line")
    p.add_argument("--trans", help="file to write the translations to")
    p.add_argument(
        "--normalize",
        action="store_true",
        help="choose by cost divided by the hypothesis length (EOS counted)",
    )
    p.add_argument("--verbose", action="store_true", help="print parsed inputs and translations")
    p.add_argument(
        "--n-best",
        metavar="FILE",
        help="also write every finished hypothesis with its cost (Moses n-best format)",
    )
    p.add_argument(
        "--batch-size",
        type=int,
        help=f"sentences decoded at once (default {DEFAULT_BATCH_SIZE}; a beam search under "
        f"beam 4 takes {GROUP_ROWS} hypotheses' worth: {GROUP_ROWS} sentences at beam 1); "
        "1 runs the literal sample.py loop; every size gives identical output",
    )
    add_workers_argument(p, "beam search of --source")
    add_progress_arguments(
        p, resume="continue an interrupted run from the lines already in TRANS.partial"
    )
    sampling_cli.add_arguments(p)


def run(args: argparse.Namespace) -> int:
    # the machine's load is sampled over the import of torch (--workers auto)
    free = pool.FreeCores() if args.workers in ("auto", None) else None
    with signals_held():  # torch loads here: a Ctrl-C waits until it has (cli/main.py says why)
        from ...distributed import runner
        from ...search.translator import SearchWarnings, Translator
    if args.workers not in (None, 1) and not (args.beam_search and args.source):
        raise LegacyInputError(
            None, "--workers applies to the beam search of a --source file (--beam-search)"
        )
    if not args.beam_search:
        if args.batch_size is None:  # sampling keeps its 32 sentences
            args.batch_size = DEFAULT_BATCH_SIZE
        return sampling_cli.run(args)
    for flag, value in (
        ("--n-samples", args.n_samples),
        ("--alpha", args.alpha),
        ("--seed", args.seed),
    ):
        if value is not None:
            raise LegacyInputError(
                None, f"{flag} only applies to random sampling (without --beam-search)"
            )
    if args.beam_size is None or args.beam_size < 1:
        raise LegacyInputError(None, "--beam-size N (N >= 1) is required with --beam-search")
    args.batch_size = batch_size(args.beam_size, args.batch_size)
    if args.batch_size < 1:
        raise LegacyInputError(None, "--batch-size must be at least 1")
    if bool(args.source) != bool(args.trans):
        raise LegacyInputError(None, "--source and --trans go together")
    check_outputs(
        [("--trans", args.trans), ("--n-best", args.n_best)],
        inputs=[("--source", args.source), ("--state", args.state), ("model", args.model_path)],
    )
    world, args.device = distributed.setup(args.device, args.threads)
    if world and (args.verbose or not args.source):
        raise LegacyInputError(
            None,
            "under torchrun, translate needs --source and --trans "
            "and does not take --verbose (only rank 0 writes)",
        )
    settle_workers(
        args,
        world,
        "with --verbose (their printed lines would interleave)"
        if args.verbose
        else "without --source (lines typed one by one)"
        if not args.source
        else None,
    )
    digests = digests_ahead(args) if args.source else None  # beside the model's loading
    workers = pool.workers(args.workers, free) if args.source else 1
    # the products' weights packed while the model file is read, for this process's threads
    # (one with workers: they fork from it)
    exp = open_from_args(args, pack=True)
    # again with every file opening the model read (the vocabularies the state names, an
    # exported checkpoint's files): none may be an output
    check_outputs(
        [("--trans", args.trans), ("--n-best", args.n_best)],
        inputs=[("--source", args.source), *experiment_reads(exp, args.state, args.model_path)],
    )
    if not args.source:
        return interact(
            exp,
            Translator(
                exp,
                args.beam_size,
                ignore_unk=args.ignore_unk,
                normalize=args.normalize,
                batch_size=args.batch_size,
            ),
        )
    translator = Translator(
        exp,
        args.beam_size,
        ignore_unk=args.ignore_unk,
        normalize=args.normalize,
        batch_size=args.batch_size,
        warnings=SearchWarnings(args.source),
    )
    lines = read_text_lines(args.source)
    if not lines:
        logger.warning(
            "%s is empty: there is nothing to translate (%s will be empty too)",
            args.source,
            args.trans,
        )
    warn_long_lines(args.source, lines, exp.state)
    return runner.translate(
        exp,
        translator,
        lines,
        runner.Output(
            args.trans, args.resume, beam_fingerprint(args, exp, lines, digests), args.progress
        ),
        source=args.source,
        world=world,
        n_best=args.n_best,
        verbose=args.verbose,
        workers=workers,
    )


def beam_fingerprint(
    args: argparse.Namespace,
    exp: Experiment,
    lines: Sequence[str],
    digests: DigestsAhead | None = None,
) -> dict[str, object]:
    """What a beam-search ``--trans`` depends on (``--resume`` checks it); the batch size
    and the number of processes do not change a line."""
    return source_fingerprint(
        args,
        exp,
        "translate --beam-search",
        lines,
        digests=digests,
        beam_size=args.beam_size,
        normalize=args.normalize,
        ignore_unk=args.ignore_unk,
    )


def interact(exp: Experiment, translator: Translator) -> int:
    """sample.py's interactive loop (sample.py:283): every hypothesis with its cost."""
    while True:
        try:
            line = input("Input Sequence: ")
        except EOFError:
            return EXIT_OK
        # unstripped, as sample.py:290 passed raw_input's line (a Python 3 strip() would
        # also drop a trailing U+00A0 that Python 2's split() keeps in the word)
        seq, parsed_in = exp.parse_source(line)
        print("Parsed Input:", parsed_in)
        [t] = translator.translate_seqs([seq])
        if t.error is not None:
            print(f"Search failed: {t.error}", file=sys.stderr)
        for sentence, cost in t.nbest:
            print(f"{cost}: {sentence}")
