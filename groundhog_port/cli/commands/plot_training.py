"""``groundhog-port plot-training``: training curves of experiments from their ``*_timing.npz``
(what ``experiments/nmt/analysis.py``'s ``load_n_show_timings`` showed)."""

from __future__ import annotations

import argparse

from ...errors import EXIT_OK, LegacyInputError
from ...outputs import check_outputs, signals_held
from ...tasks import plots

NAME = "plot-training"
HELP = "plot training curves (rolling mean of log2_p_expl, ...) from *_timing.npz files"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "timings",
        nargs="*",
        help="one or more *_timing.npz files (before or after the options: with --labels "
        "before them, the words after --labels are split as N labels then N files)",
    )
    p.add_argument("--out", required=True, help="the picture to write (.png, .pdf or .svg)")
    p.add_argument(
        "--format",
        choices=plots.FORMATS,
        help="picture format (default: the suffix of --out, else png)",
    )
    p.add_argument(
        "--dpi",
        type=int,
        default=plots.DPI,
        help=f"dots per inch (default {plots.DPI}; 300 for print)",
    )
    p.add_argument(
        "--y",
        default="log2_p_expl",
        help="the key to plot: log2_p_expl (-log2 p per sentence, bits), log2_p_word "
        "(per word), cost (the batch's summed -ln p, nats), grad_norm, ...",
    )
    p.add_argument("--window", type=int, default=100, help="rolling-mean window in updates (100)")
    p.add_argument("--start", type=int, default=0, help="first update shown")
    p.add_argument("--finish", type=int, default=3000000, help="last update shown")
    p.add_argument("--hours", action="store_true", help="hours on the x axis instead of updates")
    p.add_argument(
        "--labels",
        nargs="+",
        metavar="LABEL",
        help="legend entries, one per timing file, in their order (default: the file names)",
    )
    p.add_argument(
        "--label",
        action="append",
        metavar="LABEL",
        help="one legend entry; repeat it, once per timing file, in their order (instead of "
        "--labels)",
    )


def timings_and_labels(args: argparse.Namespace) -> tuple[list[str], list[str] | None]:
    """The timing files and their labels as the user meant them: ``--labels`` takes every word
    after it, so ``--labels a b a.npz b.npz`` holds the files too; with no file left over, its
    words are N labels then N files.  Anything else ambiguous is one line (exit 2), never a
    guess."""
    timings, labels = list(args.timings), args.labels
    if args.label and labels:
        raise LegacyInputError(None, "give --label (repeated) or --labels, not both")
    if args.label:
        labels = list(args.label)
    elif labels and not timings:
        if len(labels) % 2:
            raise LegacyInputError(
                None,
                f"--labels took all {len(labels)} words after it and no timing file is left: "
                "give one label per file (N labels then N files), put --labels after the "
                "files, or use --label LABEL once per file",
            )
        n = len(labels) // 2
        labels, timings = labels[:n], labels[n:]
    if not timings:
        raise LegacyInputError(None, "no timing file given (one or more *_timing.npz)")
    if labels is not None and len(labels) != len(timings):
        raise LegacyInputError(
            None,
            f"{len(labels)} labels ({' '.join(labels)}) for {len(timings)} timing files "
            f"({' '.join(timings)}): give one per file, or use --label LABEL once per file",
        )
    return timings, labels


def run(args: argparse.Namespace) -> int:
    timings, labels = timings_and_labels(args)
    # the picture never replaces a timing file it plots
    check_outputs([("--out", args.out)], inputs=[("timings", t) for t in timings])
    plots.require_matplotlib()  # before the timing files and torch are loaded
    with signals_held():  # torch loads here: a Ctrl-C waits until it has (cli.py says why)
        from ...tasks.curves import plot
    for line in plot(
        timings,
        args.out,
        labels=labels,
        y=args.y,
        hours=args.hours,
        fmt=args.format,
        dpi=args.dpi,
        start=args.start,
        finish=args.finish,
        window=args.window,
    ):
        print(line)
    return EXIT_OK
