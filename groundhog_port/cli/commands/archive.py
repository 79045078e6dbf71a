"""``groundhog-port archive ROOT --out DIR``: re-do every experiment of a tree of old ones.

Examples::

    groundhog-port archive old_experiments --out archive_report --data-dir old/vocab
    groundhog-port archive old_experiments --out r --max-sentences 20 --parity-groups repr,pairs
    torchrun --nproc-per-node 4 -m groundhog_port archive old_experiments --out r

Writes ``DIR/report.md``, ``DIR/report.html`` (self-contained) and ``DIR/report.json``;
what it finds and re-does is described in :mod:`groundhog_port.tasks.archive`.  Rerun the same
command after an interruption: finished experiments are taken from ``DIR/cache``.

Exit codes: 0 every translation file identical, every score file within print noise,
parity passed and nothing left undone, 1 otherwise (the report says what), 2 bad input.
Score files are judged as parity's ``batch/scores`` judges scores (bounds derived for the
model, :mod:`groundhog_port.harness.tolerance`), plus half a unit of the last digit
score.py printed: such a file is "within print noise" even where lines differ as text.  Under torchrun a complete report exits 0, the
summary line saying that one process exits 1 (torchrun reports any other code as a failure).
"""

from __future__ import annotations

import argparse
import logging
import math
from pathlib import Path

from ... import contained
from ...errors import EXIT_MISMATCH, EXIT_OK, LegacyInputError
from .common import add_data_dir_argument, add_device_argument, add_progress_arguments

NAME = "archive"
HELP = (
    "re-do a whole tree of old GroundHog experiments (every *state.pkl with the sample.py / "
    "score.py outputs beside it, parity where a trace.h5 lies): one Markdown / HTML / JSON "
    "report; resumable, runs under torchrun"
)
logger = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "root",
        metavar="ROOT",
        help="the archive: a folder tree of old experiments "
        "(read only; nothing is written into it)",
    )
    p.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="where the report, the plots and the per-experiment cache go (outside ROOT)",
    )
    add_data_dir_argument(
        p,
        extra="; vocabularies are looked for there by name, test sets by content "
        "(each experiment's ../data and the whole of ROOT are searched too)",
    )
    p.add_argument(
        "--source",
        metavar="FILE",
        help="the test set's source sentences of every experiment (instead of finding the "
        "source of each trans_beamN*.txt by content)",
    )
    p.add_argument(
        "--ref",
        metavar="FILE",
        help="the reference of --source (default: the file of the same stem in the target "
        "language, newstest.en -> newstest.fr)",
    )
    p.add_argument(
        "--test-sets",
        metavar="FILE",
        help="per-experiment test sets: lines 'FOLDER SOURCE [REFERENCE]' (FOLDER relative "
        "to ROOT, FOLDER:holdout for a holdout set; files relative to FILE's folder; "
        "# comments)",
    )
    p.add_argument(
        "--changes",
        action="append",
        default=[],
        metavar="K=V",
        help="state changes of every experiment, as GroundHog's key=value "
        "(\"word_indx='dicts/en.vocab.pkl'\"; repeatable; per experiment: changes in the plan)",
    )
    p.add_argument(
        "--snapshot",
        default="auto",
        metavar="latest|all|N",
        help="GroundHog's snapshots prefix + model%%d.npz: by default each output is re-done "
        "with the newest one whose first lines reproduce it (the others get a first-lines "
        "check); latest: the newest only; all: every snapshot re-translates every output; "
        "N: model N only",
    )
    p.add_argument(
        "--plan-only",
        action="store_true",
        help="write what would be re-done, every file chosen and why, to DIR/plan.toml and "
        "stop (edit a line, then run it with --plan)",
    )
    p.add_argument(
        "--plan",
        metavar="FILE",
        help="run exactly this plan (a plan.toml of --plan-only, edited or not); "
        "experiments not in it are discovered",
    )
    p.add_argument(
        "--max-sentences",
        type=int,
        metavar="N",
        help="re-do only the first N lines of each test set / output file (default: all)",
    )
    p.add_argument(
        "--plots",
        type=int,
        default=3,
        metavar="N",
        help="attention plots of the first N test pairs per experiment (default 3; "
        "0: none; needs matplotlib)",
    )
    p.add_argument(
        "--dpi",
        type=int,
        default=100,
        metavar="N",
        help="resolution of the attention plots (PNG, embedded in report.html; default 100)",
    )
    p.add_argument(
        "--parity-groups",
        metavar="G[,G]",
        help="trace groups to compare where a trace.h5 exists (default: all)",
    )
    p.add_argument(
        "--batch-size",
        type=int,
        default=1,
        help="sentences decoded at once (default 1, the literal sample.py loop)",
    )
    p.add_argument("--tokenize", default="13a", help="sacrebleu tokenizer (default 13a)")
    add_device_argument(p)
    p.add_argument(
        "--max-memory-mib",
        type=int,
        default=contained.DEFAULT_MEMORY_MIB,
        metavar="N",
        help="each experiment is re-done in a worker process that may add at most N MiB of "
        f"address space (default {contained.DEFAULT_MEMORY_MIB}; 0: no limit); past it the "
        "experiment stops with one 'not done' line naming the file it was reading, and the "
        "others go on",
    )
    p.add_argument(
        "--max-cpu-minutes",
        type=float,
        default=contained.DEFAULT_CPU_MINUTES,
        metavar="N",
        help="CPU time of each experiment's worker in minutes (0.5: 30 s), all its threads "
        f"together (default {contained.DEFAULT_CPU_MINUTES}; 0: no limit); past it, as "
        "--max-memory-mib",
    )
    p.add_argument(
        "--fresh",
        action="store_true",
        help="ignore the cache of an earlier run and re-do everything",
    )
    add_progress_arguments(p, shown="bar")


def _options(args):
    from ... import lookup
    from ...harness.check import GROUPS
    from ...tasks.archive import Options

    for flag, value, least in (
        ("--max-sentences", args.max_sentences, 1),
        ("--plots", args.plots, 0),
        ("--dpi", args.dpi, 10),
        ("--batch-size", args.batch_size, 1),
        ("--max-memory-mib", args.max_memory_mib, 0),
        ("--max-cpu-minutes", args.max_cpu_minutes, 0),
    ):
        if value is not None and value < least:
            raise LegacyInputError(None, f"{flag} must be at least {least}")
    groups = None
    if args.parity_groups:
        groups = tuple(g.strip() for g in args.parity_groups.split(",") if g.strip())
        unknown = [g for g in groups if g not in GROUPS]
        if unknown or not groups:
            raise LegacyInputError(
                None, f"--parity-groups {args.parity_groups}: known groups are {', '.join(GROUPS)}"
            )
    plots = args.plots
    if plots:
        from ...tasks.plots import require_matplotlib

        try:
            require_matplotlib()  # before any experiment is loaded
        except LegacyInputError:
            logger.warning(
                "attention plots skipped: matplotlib is not installed (`pip install "
                'matplotlib`, from a checkout `pip install -e ".[plot]"`; --plots 0 asks '
                "for none)"
            )
            plots = 0
    for flag, value in (("--source", args.source), ("--ref", args.ref)):
        if value and not lookup.is_file(value):
            raise LegacyInputError(value, f"{flag}: file not found")
    if args.ref and not args.source:
        raise LegacyInputError(None, "--ref needs --source (the reference of which source?)")
    test_sets = {}
    if args.test_sets:
        from ...tasks.archive import read_test_sets

        test_sets = read_test_sets(args.test_sets, args.root)
    snapshot = args.snapshot
    if snapshot not in ("auto", "latest", "all") and not (snapshot.isdigit()):
        raise LegacyInputError(
            None, f"--snapshot {snapshot}: latest, all or a number N (modelN.npz)"
        )
    if args.plan and args.plan_only:
        raise LegacyInputError(None, "--plan-only writes a plan, --plan runs one: give one of them")
    plan = None
    if args.plan:
        from ...tasks.archive import Run, check_plan
        from ...tasks.archive import plan_file as planmod

        plan = planmod.read(args.plan)["entries"]
        check_plan(Run(Path(args.root), lookup.data_dirs(args.data_dir)), plan, args.plan)
    return Options(
        changes=tuple(args.changes),
        snapshot=snapshot,
        plan=plan,
        data_dirs=lookup.data_dirs(args.data_dir),
        source=Path(args.source) if args.source else None,
        reference=Path(args.ref) if args.ref else None,
        test_sets=test_sets,
        max_sentences=args.max_sentences,
        plots=plots,
        plot_dpi=args.dpi,
        parity_groups=groups,
        batch_size=args.batch_size,
        tokenize=args.tokenize,
        device=args.device,
    )


def _limits(args) -> contained.Limits:
    """Each experiment's worker limits (:mod:`groundhog_port.contained`); 0: none."""
    return contained.Limits(
        memory_mib=args.max_memory_mib or None,
        cpu_seconds=math.ceil(args.max_cpu_minutes * 60) or None,
    )


def run(args: argparse.Namespace) -> int:
    from ... import lookup
    from ...tasks import archive

    root = Path(args.root)
    if not root.is_dir():
        raise LegacyInputError(
            root, "no such folder (ROOT)" if not root.exists() else "not a folder (ROOT)"
        )
    opts = _options(args)
    archive.check_out_dir(args.root, args.out)
    tree = archive.Run(root, opts.data_dirs, limits=_limits(args))
    with lookup.remembering(tree.memo):  # the run's walks, line counts, what was said
        return _run(args, opts, tree)


def _run(args, opts, tree):
    from ...distributed import world as distributed
    from ...outputs import Progress
    from ...tasks import archive
    from ...tasks.archive import report as archive_report

    if args.plan_only:
        if not archive.discover(tree):
            raise LegacyInputError(args.root, "no experiment (*state.pkl) in this folder tree")
        path = archive.write_plan(tree, args.out, opts)
        print(f"Plan: {path} (run it with --plan {path})")
        return EXIT_OK
    world, opts.device = distributed.setup(
        args.device, args.threads
    )  # cuda:LOCAL_RANK under torchrun
    with archive.unpacked(tree) as packed:
        if opts.plan is not None:  # a packed experiment's id, now that the packs are open
            archive.check_plan(tree, opts.plan, args.plan, packed)
        n = len(archive.discover(tree)) + len(packed) if not world or world.is_root else 0
        if n == 0 and (not world or world.is_root):
            raise LegacyInputError(
                args.root, "no experiment (*state.pkl, or a packed run) in this folder tree"
            )
        root_rank = world is None or world.is_root
        progress = Progress(
            n if not world else (n + world.size - 1) // world.size,
            unit="exp",
            enabled=(True if args.progress else None) if root_rank else False,
        )
        try:
            entries, results = archive.redo_tree(
                tree, args.out, opts, world, progress, args.fresh, packed
            )
        finally:
            progress.close()
        if results is not None:  # every file and pack member, with its role
            inventory = [a.as_dict() for a in archive.account(tree, results, tree.skipped)]
    if world is not None and not world.is_root:
        distributed.finish(world)
        return EXIT_OK
    report = archive_report.build(args.root, opts.key(), results, inventory, tree.from_cache)
    paths = archive_report.write(report, args.out)
    if world is not None:
        distributed.finish(world)
    s = report["summary"]
    # score files: judged by parity's batch/scores bounds (harness.print_noise.PrintNoise)
    good = (
        s["trans_files_identical"] == s["trans_files"]
        and s["not_done"] == 0
        and s["parity_passed"] == s["parity_checked"]
        and s["scores_files_within_noise"] == s["scores_files"]
    )
    # under torchrun a complete report exits 0 with a note: torchrun turns exit 1 into a
    # "FAILED" block (distributed.EXIT_NOTE)
    code, note = (EXIT_OK, "") if good else distributed.exit_with_note(world, EXIT_MISMATCH)
    print(f"{archive_report.summary_text(s)} Report: {', '.join(str(p) for p in paths)}{note}")
    return code
