"""``groundhog-port translate`` without ``--beam-search``: sample.py's sampling mode.

Interactive (no ``--source``; ``--batch-size 1`` the literal sampler, otherwise the batched
one with the same draws), as sample.py:283-300: the prompts ``Input Sequence:``,
``How many samples?``, ``Inverse Temperature?``, then ``Parsed Input: ...`` and the lines
``sample(..., verbose=True)`` prints (sample.py:184-187): one line per sample in
``numpy.argsort(costs)`` order (least probable first), ``"{i}: {-cost} {word probs}
{sentence}"``, then an empty line.  Successive inputs continue one MRG stream, as in one sample.py
process.

Batch (the port's addition; the original only samples interactively): every line of
``--source`` gets ``--n-samples`` samples at inverse temperature ``--alpha``, written to
``--trans`` as ``i ||| sentence ||| cost`` (``i`` the 0-based source line, ``cost`` what
``sample()`` returns: the sample's log-probability, divided by its word count with
``--normalize``), one line per sample, in sample order.  ``--seed`` replaces the stream
seed derived from the state (:mod:`groundhog_port.sampling.seed`).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import EXIT_OK, EXIT_PARTIAL, LegacyInputError
from ..legacy.data import read_text_lines
from ..legacy.longlines import warn_long_lines
from ..outputs import Journal, Progress, check_outputs, signals_held

if TYPE_CHECKING:
    import numpy as np

    from ..legacy.experiment import Experiment
    from ..sampling.sampler import Sampler

logger = logging.getLogger(__name__)

BEAM_ONLY = (("beam_size", "--beam-size"), ("ignore_unk", "--ignore-unk"), ("n_best", "--n-best"))


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("random sampling (without --beam-search)")
    g.add_argument(
        "--n-samples",
        type=int,
        help="samples per source line (batch form; the interactive form asks)",
    )
    g.add_argument(
        "--alpha",
        type=float,
        help="inverse temperature of the batch form (default 1.0; the interactive form asks)",
    )
    g.add_argument(
        "--seed",
        type=int,
        help="MRG31k3p stream seed (1..2147462578), instead of the one GroundHog "
        "draws from state['seed'] for the decoder's softmax layer",
    )


def run(args: argparse.Namespace) -> int:
    with signals_held():  # torch loads here: a Ctrl-C waits until it has (cli/main.py says why)
        from ..sampling.mrg import M2
        from ..sampling.sampler import Sampler
    for attr, flag in BEAM_ONLY:
        if getattr(args, attr, None):
            raise LegacyInputError(None, f"{flag} only applies with --beam-search")
    if args.seed is not None and not 0 < args.seed < M2:
        raise LegacyInputError(None, f"--seed must be in 1..{M2 - 1}")
    if bool(args.source) != bool(args.trans):
        raise LegacyInputError(None, "--source and --trans go together")
    if args.batch_size < 1:
        raise LegacyInputError(None, "--batch-size must be at least 1")
    if args.source:
        if args.n_samples is None or args.n_samples < 1:
            raise LegacyInputError(None, "--n-samples N (N >= 1) is required with --source")
    elif args.n_samples is not None or args.alpha is not None:
        raise LegacyInputError(
            None,
            "--n-samples / --alpha belong to the batch form "
            "(--source F --trans F); the interactive form asks for them",
        )
    check_outputs(
        [("--trans", args.trans)],
        inputs=[("--source", args.source), ("--state", args.state), ("model", args.model_path)],
    )
    from .commands.common import experiment_reads, open_from_args

    exp = open_from_args(args)
    check_outputs(  # again with every file opening the model read (vocabularies...)
        [("--trans", args.trans)],
        inputs=[("--source", args.source), *experiment_reads(exp, args.state, args.model_path)],
    )
    sampler = Sampler(exp, mrg_seed=args.seed)
    logger.info(
        "MRG31k3p stream seed %d (%s)",
        sampler.mrg_seed,
        "--seed" if args.seed is not None else "derived from state['seed']",
    )
    if not args.source:
        return interact(exp, sampler, args.normalize, args.batch_size)
    return batch(exp, sampler, args)


def interact(exp: Experiment, sampler: Sampler, normalize: bool, batch_size: int = 1) -> int:
    """sample.py:283-300 with a sampler: ``batch_size`` 1 the literal ``Sampler.sample``, more
    the batched sampler (``Sampler.sample_many``: the same draws, translate's default)."""
    from ..sampling.draw import SamplingFailed

    while True:
        try:
            seqin = input("Input Sequence: ")
            n_samples = int(input("How many samples? "))
            alpha = float(input("Inverse Temperature? "))
            # unstripped, as sample.py:290 passed raw_input's line (a Python 3 strip()
            # would also drop a trailing U+00A0 that Python 2's split() keeps in the word)
            seq, parsed_in = exp.parse_source(seqin)
            print("Parsed Input:", parsed_in)
        except EOFError:
            return EXIT_OK
        except (ValueError, LegacyInputError) as err:
            print("Exception while parsing your input:")
            print(f"{type(err).__name__}: {err}", file=sys.stderr)
            continue
        try:
            if batch_size > 1:
                [samples] = sampler.sample_many([seq], n_samples, alpha, normalize, batch_size)
                if isinstance(samples, SamplingFailed):
                    raise samples
            else:
                samples = sampler.sample(seq, n_samples, alpha, normalize)
        except SamplingFailed as err:
            # sample.py dies here (the call is outside its try): the port says so and goes on
            print(f"Sampling failed: {err} (the original sample.py stops here)", file=sys.stderr)
            continue
        for line in samples.verbose_lines():
            print(line)


def _complete_sentences(n_samples):
    """Journal ``keep``: whole source lines only (their ``n_samples`` records)."""

    def keep(records):
        return len(records) - len(records) % n_samples

    return keep


def format_line(i: int, sentence: str, cost: float | np.float32) -> str:
    return f"{i} ||| {sentence} ||| {str(cost)}"  # str: the float32's own shortest repr


def batch_fingerprint(
    args: argparse.Namespace, exp: Experiment, lines: Sequence[str], mrg_seed: int | None
) -> dict[str, object]:
    """What the batch form's ``--trans`` depends on (``--resume`` checks it)."""
    from .commands.common import source_fingerprint

    return source_fingerprint(
        args,
        exp,
        "translate (random sampling)",
        lines,
        n_samples=args.n_samples,
        alpha=1.0 if args.alpha is None else args.alpha,
        seed=mrg_seed,
        normalize=args.normalize,
    )


def batch(exp: Experiment, sampler: Sampler, args: argparse.Namespace) -> int:
    from ..sampling.draw import SamplingFailed
    from ..search.translator import crashed_lines

    n, alpha = args.n_samples, 1.0 if args.alpha is None else args.alpha
    lines = read_text_lines(args.source)
    warn_long_lines(args.source, lines, exp.state)
    fingerprint = batch_fingerprint(args, exp, lines, sampler.mrg_seed)
    seqs = [exp.parse_source(line)[0] for line in lines]  # bad input: before any file is made
    journal = Journal(
        args.trans, resume=args.resume, keep=_complete_sentences(n), fingerprint=fingerprint
    )
    # resume: the lines kept end with a complete source line; the stream is advanced by
    # their draws (which do not depend on the values drawn)
    done = int(journal.done_records[-1]) + 1 if journal.done_records else 0
    for seq in seqs[:done]:
        sampler.skip(seq, n)
    if done:
        logger.info("resuming %s after source line %d of %d", args.trans, done, len(lines))
    progress = Progress(len(lines), enabled=True if args.progress else None)
    progress.update(done)
    failed = []
    try:
        step = 1 if args.batch_size == 1 else 4 * args.batch_size
        for start in range(done, len(lines), step):
            chunk = seqs[start : start + step]
            results = sampler.sample_many(chunk, n, alpha, args.normalize, args.batch_size)
            for i, r in enumerate(results, start):
                if isinstance(r, SamplingFailed):
                    logger.error(
                        "line %d of %s: the original sample_fn fails here (%s); no samples written",
                        i + 1,
                        args.source,
                        r,
                    )
                    failed.append(i + 1)
                    continue
                if args.verbose:
                    print("Parsed Input:", exp.parse_source(lines[i])[1])
                    for line in r.verbose_lines():
                        print(line)
                for sentence, cost in zip(r.sentences, r.costs):
                    journal.append(format_line(i, sentence, cost), str(i))
            journal.flush()
            progress.update(len(chunk))
    except BaseException:
        journal.close_unfinished()
        raise
    progress.close()
    journal.commit()
    if failed:
        logger.error("%s", crashed_lines(failed, "line(s) could not be sampled"))
        return EXIT_PARTIAL
    logger.info("%d lines x %d samples, %.1f lines/s", len(lines), n, progress.rate())
    return EXIT_OK
