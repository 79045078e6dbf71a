"""``groundhog-port plot-training``: training curves of experiments from their ``*_timing.npz``
(what ``experiments/nmt/analysis.py``'s ``load_n_show_timings`` showed)."""

from ...errors import EXIT_OK
from ...outputs import check_outputs, signals_held
from ...tasks import plots

NAME = "plot-training"
HELP = "plot training curves (rolling mean of log2_p_expl, ...) from *_timing.npz files"


def add_arguments(p):
    p.add_argument("timings", nargs="+", help="one or more *_timing.npz files")
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
    p.add_argument("--labels", nargs="+", help="legend entries (default: the file names)")


def run(args):
    # the picture never replaces a timing file it plots
    check_outputs([("--out", args.out)], inputs=[("timings", t) for t in args.timings])
    plots.require_matplotlib()  # before the timing files and torch are loaded
    with signals_held():  # torch loads here: a Ctrl-C waits until it has (cli.py says why)
        from ...tasks.curves import plot
    for line in plot(
        args.timings,
        args.out,
        labels=args.labels,
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
