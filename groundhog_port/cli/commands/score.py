"""``groundhog-port score``: score.py's flags and output, byte for byte.

The model's modules (torch: seconds to import) are imported by the functions that score,
after :func:`run` has checked the arguments and the optional dependencies (matplotlib);
torch itself loads in :func:`~groundhog_port.cli.commands.common.open_from_args`.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np

from ...distributed import pool
from ...distributed import world as distributed
from ...errors import EXIT_OK, LegacyInputError
from ...legacy.data import read_text_lines
from ...legacy.longlines import warn_long_lines
from ...outputs import (
    DigestsAhead,
    atomic_output,
    check_outputs,
    file_digest,
    file_in,
    write_failure,
)
from ...tasks import plots

if TYPE_CHECKING:
    from ...legacy.experiment import Experiment
from .common import (
    add_model_arguments,
    add_progress_arguments,
    add_workers_argument,
    digests_ahead,
    experiment_reads,
    open_from_args,
    run_fingerprint,
    settle_workers,
)

NAME = "score"
HELP = "score sentence pairs as GroundHog's score.py did (--mode batch|txt|interact)"
logger = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p)
    p.add_argument("--src", help="source phrases (text, or GroundHog .h5 with --trg .h5)")
    p.add_argument("--trg", help="target phrases")
    p.add_argument(
        "--scores",
        metavar="FILE",
        help="save the scores to FILE (default: standard output); --mode batch "
        "and txt (score.py's txt mode ignored --scores and printed them: "
        "--verbose's word probabilities and alignments still go to the output)",
    )
    p.add_argument(
        "--print-probs",
        action="store_true",
        help="print probabilities instead of log-probabilities",
    )
    p.add_argument("--allow-unk", action="store_true", help="allow unknown words in the input")
    p.add_argument(
        "--mode",
        default="interact",
        choices=("batch", "txt", "interact"),
        help="processing mode (default interact, as score.py)",
    )
    p.add_argument("--n-batches", type=int, default=-1, help="score only the first n batches")
    p.add_argument(
        "--verbose",
        action="store_true",
        help="txt mode: print word probabilities and the alignment table",
    )
    p.add_argument(
        "--y-noise",
        type=float,
        help="probability of replacing a target word by a random word (as score.py, "
        "numpy's unseeded global generator)",
    )
    add_progress_arguments(
        p, resume="with --scores: continue an interrupted run (whole batches are kept)"
    )
    add_workers_argument(p, "--mode batch: the batches scored")
    p.add_argument(
        "--plot-alignment",
        metavar="DIR",
        help="txt mode: write one attention heatmap per pair to DIR (as Figure 3 "
        "of Bahdanau et al., with a colour bar; RNNsearch models; needs "
        "matplotlib: the plot extra)",
    )
    p.add_argument(
        "--plot-tree",
        metavar="DIR",
        help="txt mode: write the grConv gating tree of each source sentence to DIR "
        "(as experiments/nmt/tree.py draws it; enc_rec_layer="
        "'RecursiveConvolutionalLayer' models; needs matplotlib: the plot extra)",
    )
    p.add_argument(
        "--format",
        choices=plots.FORMATS,
        help="--plot-alignment / --plot-tree: picture format (default png)",
    )
    p.add_argument(
        "--dpi",
        type=int,
        help=f"--plot-alignment / --plot-tree: dots per inch (default {plots.DPI}; 300 for print)",
    )
    p.add_argument(
        "--tree-threshold",
        type=float,
        default=0.1,
        metavar="W",
        help="--plot-tree: leave out edges of weight <= W (tree.py's 'Threshold'; default 0.1)",
    )


def run(args: argparse.Namespace) -> int:
    # the machine's load is sampled over the loading of the model (--workers auto)
    free = pool.FreeCores() if args.workers in ("auto", None) else None
    for flag, value in (("--plot-alignment", args.plot_alignment), ("--plot-tree", args.plot_tree)):
        if value:
            if args.mode != "txt":
                raise LegacyInputError(None, f"{flag} works with --mode txt")
            plots.require_matplotlib()
    if (args.format or args.dpi) and not (args.plot_alignment or args.plot_tree):
        raise LegacyInputError(None, "--format and --dpi apply to --plot-alignment / --plot-tree")
    if args.dpi is not None and not 10 <= args.dpi <= 2400:
        raise LegacyInputError(None, f"--dpi {args.dpi}: expected 10..2400")
    if args.mode == "interact" and args.scores:
        raise LegacyInputError(
            None, "--scores FILE works with --mode batch and txt (interact prints every score)"
        )
    if args.resume and args.mode != "batch":
        raise LegacyInputError(None, "--resume works with --mode batch")
    if distributed.world_from_env() and args.mode != "batch":
        raise LegacyInputError(None, "under torchrun only --mode batch is sharded")
    check_outputs(
        [("--scores", args.scores)],
        inputs=[
            ("--src", args.src),
            ("--trg", args.trg),
            ("--state", args.state),
            ("model", args.model_path),
        ],
    )
    world, args.device = distributed.setup(args.device, args.threads)
    why = None
    if args.y_noise:
        why = "with --y-noise (score.py draws it from numpy's global generator, in batch order)"
    elif args.mode != "batch":
        why = f"with --mode {args.mode} (only batch is dealt out)"
    settle_workers(args, world, why)  # before the model loads: workers fork from one thread
    # beside the model's loading; joined by batch_fingerprint, before any worker forks
    digests = digests_ahead(args) if args.mode == "batch" and args.scores else None
    exp = open_from_args(args, pack=True)  # the products' weights packed during the read
    args.workers = pool.workers(args.workers, free)
    check_outputs(  # again with every file opening the model read (vocabularies...)
        [("--scores", args.scores)],
        inputs=[
            ("--src", args.src),
            ("--trg", args.trg),
            *experiment_reads(exp, args.state, args.model_path),
        ],
    )
    if args.mode == "batch":
        return batch_mode(exp, args, world, digests)
    if args.mode == "txt":
        return txt_mode(exp, args)
    return interact_mode(exp, args)


def batch_fingerprint(
    args: argparse.Namespace, exp: Experiment, digests: DigestsAhead | None = None
) -> dict[str, object]:
    """What ``--scores`` depends on (``--resume`` checks it).  Without ``--src/--trg`` the
    corpora are the state's (its digest covers their names)."""
    corpora = {"src": file_digest(args.src), "trg": file_digest(args.trg)} if args.src else {}
    return run_fingerprint(
        args,
        exp,
        "score --mode batch",
        ("word_indx", "word_indx_trgt"),
        digests=digests,
        **corpora,
        allow_unk=args.allow_unk,
        print_probs=args.print_probs,
        n_batches=args.n_batches,
        y_noise=args.y_noise,
    )


def batch_mode(
    exp: Experiment,
    args: argparse.Namespace,
    world: distributed.World | None = None,
    digests: DigestsAhead | None = None,
) -> int:
    """score.py:132-188: one ``{:.5e}`` line per pair (the log-probability, or with
    ``--print-probs`` the probability), in batch order."""
    if (args.src is None) != (args.trg is None):
        raise LegacyInputError(
            None,
            "--src and --trg go together (or leave both out to score "
            "the training corpora named in the state)",
        )
    if args.resume and not args.scores:
        raise LegacyInputError(None, "--resume needs --scores FILE")
    if args.src and not (str(args.src).endswith(".h5") and str(args.trg).endswith(".h5")):
        for path, part in ((args.src, "src"), (args.trg, "ref")):  # text: the .h5 path skips
            lines = read_text_lines(path, part)  # long pairs itself
            warn_long_lines(path, lines, exp.state, "scoring it", "score.py")
    from ...distributed import runner
    from ...search.scoring import batches_for

    if world:
        if args.y_noise:
            raise LegacyInputError(
                None,
                "--y-noise draws from numpy's unseeded global generator: "
                "it cannot be sharded reproducibly; run it in one process",
            )
        if not args.scores:
            raise LegacyInputError(
                None, "under torchrun, score --mode batch needs --scores FILE (rank 0 writes it)"
            )
    fingerprint = batch_fingerprint(args, exp, digests) if args.scores else None
    return runner.score(
        exp,
        runner.Output(args.scores or "-", args.resume, fingerprint, args.progress),
        lambda: batches_for(exp, args.src, args.trg, args.allow_unk, args.n_batches),
        world=world,
        print_probs=args.print_probs,
        y_noise=args.y_noise,
        workers=args.workers,
    )


def txt_mode(exp: Experiment, args: argparse.Namespace) -> int:
    """score.py:206-242: per pair ``-sum(log(word_probs))`` (float32, printed as numpy prints it);
    with ``--verbose`` the word probabilities and the alignment table first."""
    from ...model.encoder import grconv_gates
    from ...search.scoring import parse_pair, score_pair

    if not (args.src and args.trg):
        raise LegacyInputError(None, "--mode txt needs --src and --trg")
    src_lines, trg_lines = read_text_lines(args.src), read_text_lines(args.trg, "ref")
    warn_long_lines(args.src, src_lines, exp.state, "scoring it", "score.py")
    warn_long_lines(args.trg, trg_lines, exp.state, "scoring it", "score.py")
    if len(src_lines) != len(trg_lines):
        raise LegacyInputError(
            args.src,
            f"{len(src_lines)} source lines but {len(trg_lines)} target lines in {args.trg}",
        )
    plot_dir = None
    if args.plot_alignment:
        if not exp.cfg.search:
            raise LegacyInputError(
                args.state,
                "--plot-alignment: this model has no attention "
                "(search=False, an RNNencdec): there is no alignment to plot",
            )
        plot_dir = _output_dir(args.plot_alignment)
    tree_dir = None
    if args.plot_tree:
        if not exp.model.encoder.grconv:
            raise LegacyInputError(
                args.state,
                "--plot-tree: this model's encoder is not the "
                "grConv (enc_rec_layer='RecursiveConvolutionalLayer'): it "
                "has no gating tree",
            )
        tree_dir = _output_dir(args.plot_tree)
    fmt, dpi = args.format or "png", args.dpi or plots.DPI
    # the pictures are files this command names inside the user's folders: a link there is
    # never followed (it could lead to an input); all checked before the first pair
    reads = [
        ("--src", args.src),
        ("--trg", args.trg),
        *experiment_reads(exp, args.state, args.model_path),
    ]
    for folder, name in ((plot_dir, plots.plot_file_name), (tree_dir, plots.tree_file_name)):
        if folder is not None:
            for n in range(1, len(src_lines) + 1):
                path = file_in(folder, name(n, len(src_lines), fmt))
                if path.exists():
                    check_outputs([("a picture", path)], reads)
    n_inf = 0
    # log(0) of an underflowed probability is score.py's inf, explained once below
    with (
        np.printoptions(precision=3, linewidth=150, suppress=True),
        np.errstate(divide="ignore"),
        _scores_output(args.scores) as scores,
    ):
        for n, (src_line, trg_line) in enumerate(zip(src_lines, trg_lines), start=1):
            (src_seq, src_words), (trg_seq, trg_words) = parse_pair(
                exp, src_line, trg_line, args.allow_unk
            )
            s = score_pair(exp.model, src_seq, trg_seq)
            probs = s.word_probs.numpy()
            if args.verbose:
                print("Probs: ", probs.flatten())
                if s.alignment is not None:
                    print_alignment(s.alignment.numpy()[:, :, 0], src_line, src_words, trg_words)
            cost = -np.sum(np.log(probs))
            n_inf += bool(np.isinf(cost))
            print(cost, file=scores)
            if plot_dir is not None:
                assert s.alignment is not None  # --plot-alignment is refused without search
                plots.plot_alignment(
                    s.alignment.numpy()[:, :, 0],
                    # parse_input gives the words as a list (no idx2word); its type: str | list
                    cast("list[str]", src_words) + ["<eos>"],
                    cast("list[str]", trg_words) + ["<eos>"],
                    file_in(plot_dir, plots.plot_file_name(n, len(src_lines), fmt)),
                    title=f"{Path(args.src).name}, line {n}",
                    fmt=fmt,
                    dpi=dpi,
                )
            if tree_dir is not None:
                plots.plot_grconv_tree(
                    grconv_gates(exp.model, src_seq).numpy(),
                    cast("list[str]", src_words) + ["<eos>"],
                    file_in(tree_dir, plots.tree_file_name(n, len(src_lines), fmt)),
                    args.tree_threshold,
                    title=f"{Path(args.src).name}, line {n}",
                    fmt=fmt,
                    dpi=dpi,
                )
    if n_inf:
        logger.warning(INF_NOTE, n_inf, len(src_lines), exp.cfg.n_sym_source)
    if not src_lines:
        logger.warning("%s is empty: there is nothing to score", args.src)
    return EXIT_OK


def _scores_output(path):
    """Where txt mode's scores go: ``--scores FILE`` (whole, or not at all), else stdout."""
    return atomic_output(path) if path else contextlib.nullcontext(sys.stdout)


def _output_dir(path):
    """A folder for plots, created if needed; a failure is one error line."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise write_failure(path, err) from None
    return path


#: why txt mode prints inf (docs/archives.md, "Scores of inf"); fidelity.md lists both quirks
INF_NOTE = (
    "%d of %d pairs score inf, as in the original: a word's float32 probability "
    "underflowed to 0 and score.py prints -sum(log p) (score.py:240).  Usually that word "
    "is UNK, which the model almost never predicts; score.py's parse_input also turns "
    "every target word with an id >= n_sym_source (%d) into UNK (encdec.py:1504).  See "
    "docs/archives.md, 'Scores of inf'"
)


def print_alignment(
    alignment: np.ndarray, src_line: str, src_words: Sequence[str], trg_words: Sequence[str]
) -> None:
    """score.py:227-235: one row of attention weights per target word, then the source word
    each target word attended to most (``<eos>`` past the last word)."""
    print("Alignment:".ljust(20), src_line, "<eos>")
    for i, word in enumerate(trg_words):
        print(f"{word.ljust(20)}{alignment[i]}")
    print("Generated by:")
    for i, word in enumerate(trg_words):
        j = int(np.argmax(alignment[i]))
        print("{} <--- {}".format(word, src_words[j] if j < len(src_words) else "<eos>"))


def interact_mode(exp: Experiment, args: argparse.Namespace) -> int:
    """score.py:189-205: read a source and a target line, print ids, probabilities, cost."""
    from ...search.scoring import parse_pair, score_pair

    while True:
        try:
            src_line = input("Source sequence: ")
            trg_line = input("Target sequence: ")
        except EOFError:
            return EXIT_OK
        try:
            (src_seq, _), (trg_seq, _) = parse_pair(exp, src_line, trg_line, args.allow_unk)
        except LegacyInputError as err:
            print(f"error: {err}", file=sys.stderr)
            continue
        print("Binarized source: ", src_seq)
        print("Binarized target: ", trg_seq)
        probs = score_pair(exp.model, src_seq, trg_seq).word_probs.numpy()
        print(f"Probs: {probs}, cost: {-np.sum(np.log(probs))}")
