"""``groundhog-port parity``: compare the port with a recorded GroundHog/Theano trace.

Either name the files (``--state S --model M --trace T [--source F --target F]``) or a
case folder laid out like ``shared/legacy_traces/<case>`` (``--case DIR``: one
``*_state.pkl``, its ``*_model.npz``, ``trace.h5``, the test files the trace names
(``test.en``/``test.fr``) and the vocabularies).  Prints one table (quantity | n | max
abs err | max rel err | err/bound | tolerance | result; errors of the product's float32
output -- what translate, score, train and sample return -- against the recording, bounds
derived from float32 arithmetic on the float64 shadow: :mod:`groundhog_port.harness.tolerance`).
Exit 0 when every quantity passes (rows NOT COVERED because the recording cannot tell a
mechanism apart, e.g. ``ignore_unk`` where no hypothesis holds UNK, are expected: listed on
stderr, exit 0), 1 when one fails or when a row the recording holds was not compared
(unless ``--allow-uncovered``), 2 on bad input (docs/exit-codes.md).  The library behind it is :mod:`groundhog_port.harness.check`.

With ``--case``, the group ``outputs`` adds one row per printed output of the original found
in the case folder and in ``user_outputs_<case>`` (beside it, or in ``../pending_traces/``;
``--outputs DIR`` names more): the command that printed it is run through the port and what
it prints is compared token by token (:mod:`groundhog_port.cli.printed_outputs`).  The group
``continued`` continues the case's checkpoint as GroundHog did in ``continue_<case>`` (beside
it, or in ``../pending_traces/``) and compares every update's values, the batches and the
parameters after the last update (:mod:`groundhog_port.harness.groups.continued`).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from ... import lookup
from ...errors import EXIT_MISMATCH, EXIT_OK, LegacyInputError
from ...harness.names import GROUP_NAMES as GROUPS
from ...harness.trace import TraceFile
from ...outputs import Progress, check_outputs, signals_held
from .common import (
    add_case_argument,
    add_data_dir_argument,
    add_device_argument,
    add_progress_arguments,
    add_state_and_model,
    experiment_reads,
    model_and_changes,
)

NAME = "parity"
HELP = (
    "check the port against a recorded GroundHog/Theano trace (trace.h5): one row per "
    "quantity with max abs/rel error and PASS/FAIL"
)
logger = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_case_argument(
        p,
        "a case folder: *_state.pkl, *_model.npz, trace.h5, test.en, test.fr, "
        "vocabularies (the options below override what is found there)",
    )
    add_state_and_model(
        p,
        "check an exported checkpoint (groundhog-port export --format "
        "safetensors) instead of the case's or --state/--model files",
    )
    p.add_argument("--trace", help="the recorded trace (trace.h5, see docs/trace_format.md)")
    p.add_argument(
        "--source",
        help="the test source sentences the trace was recorded on "
        "(default: the trace's test_src_file next to it)",
    )
    p.add_argument(
        "--target", help="the test target sentences (default: test_trg_file next to the trace)"
    )
    add_data_dir_argument(
        p,
        extra="; with --case, DIR and DIR/../data are searched after "
        "them (vocabularies and test files)",
    )
    add_device_argument(p)
    p.add_argument(
        "--only",
        metavar="GROUP[,GROUP]",
        action="append",
        help=f"compare only these groups ({', '.join(GROUPS + CASE_GROUPS)}); repeatable",
    )
    p.add_argument(
        "--outputs",
        metavar="DIR",
        action="append",
        default=[],
        help="with --case: a further folder of the original's printed outputs "
        "(sample_*_stdout.txt, score_*_stdout.txt, trans_*.txt, interactive transcripts "
        "with interactive_stdin.txt) to compare with what the port prints; the case "
        "folder and user_outputs_<case> beside it (or in ../pending_traces/) are always "
        "read; repeatable",
    )
    p.add_argument(
        "--outputs-matching",
        metavar="GLOB",
        help="compare only the printed outputs whose file name matches GLOB "
        "(e.g. 'sample_interactive*'; an n-best row comes with its trans_*.txt)",
    )
    p.add_argument(
        "--beam-labels",
        nargs="+",
        metavar="LABEL",
        help="restrict /beam to these labels (e.g. 1 5 10_normalize 5_ignore_unk)",
    )
    p.add_argument(
        "--float64-reference",
        action="store_true",
        help="also print, per quantity, the port's own float32 noise (max |float32 - "
        "float64 shadow|), the error and the allowed bound at the worst element, "
        "and max |recorded - float64 shadow| (Theano's own error; the bounds are "
        "always derived from the float64 runs: docs/trace_format.md, Tolerances)",
    )
    p.add_argument(
        "--allow-uncovered",
        action="store_true",
        help="exit 0 even when a row the recording holds is NOT COVERED (a recorded "
        "group the port cannot compare); rows the recording cannot tell apart (e.g. "
        "ignore_unk where no hypothesis contains UNK) are expected and exit 0 without it; "
        "both are still printed",
    )
    p.add_argument(
        "--json",
        metavar="FILE",
        help="also write the report as JSON (with the worst element of every quantity)",
    )
    add_progress_arguments(p)


#: the printed-output rows (``--case`` only): :mod:`groundhog_port.cli.printed_outputs`
OUTPUTS = "outputs"
#: continued training against ``continue_<case>`` (``--case`` only):
#: :mod:`groundhog_port.harness.groups.continued`
CONTINUED = "continued"
CASE_GROUPS = (OUTPUTS, CONTINUED)


def _groups(only):
    if not only:
        return GROUPS + CASE_GROUPS
    known = GROUPS + CASE_GROUPS
    out = []
    for item in only:
        for g in item.split(","):
            g = g.strip()
            if g and g not in known:
                raise LegacyInputError(
                    None, f"--only {g}: unknown group (known: {', '.join(known)})"
                )
            if g and g not in out:
                out.append(g)
    if not out:
        raise LegacyInputError(None, "--only: no group given")
    return tuple(out)


def run(args: argparse.Namespace) -> int:
    with signals_held():  # torch loads here: a Ctrl-C waits until it has (cli/main.py says why)
        from ...harness.check import check, count_work, find_case, test_files_near
        from ...harness.groups import continued
        from ...legacy.loading import open_experiment
        from .. import printed_outputs
    model_and_changes(args)
    groups = _groups(args.only)
    if args.case:
        data_dir = lookup.case_data_dirs(args.case, args.data_dir)
        files = find_case(
            args.case,
            args.state,
            args.model,
            args.trace,
            args.source,
            args.target,
            data_dirs=data_dir,
        )
        state, model, trace = files.state, files.model, files.trace
        source, target = files.source, files.target
    else:
        needed = ("trace",) if args.checkpoint else ("state", "model", "trace")
        missing = [o for o in needed if not getattr(args, o)]
        if missing:
            raise LegacyInputError(
                None,
                "give --case DIR, or all of --state, --model (or "
                "--checkpoint) and --trace "
                f"(missing: {', '.join('--' + m for m in missing)})",
            )
        state, model, trace = args.state, args.model, args.trace
        source, target = args.source, args.target
        if source is None or target is None:
            near_src, near_trg = test_files_near(trace)
            source = source if source is not None else near_src
            target = target if target is not None else near_trg
        data_dir = args.data_dir
    # sample.py's "Still no translations: try beam size 2n" retries are expected here
    search_log = logging.getLogger("groundhog_port.search")
    search_level = search_log.level
    if not logger.isEnabledFor(logging.DEBUG):
        search_log.setLevel(logging.ERROR)
    try:
        t0 = time.perf_counter()
        if args.checkpoint:
            exp = open_experiment(
                args.checkpoint, None, args.changes, device=args.device, strict=args.strict
            )
        else:
            exp = open_experiment(
                state,
                model,
                args.changes,
                data_dir=data_dir,
                device=args.device,
                strict=args.strict,
            )
            if args.case:  # vocabularies kept once beside the cases, after every other place
                exp.data_dirs = tuple(exp.data_dirs) + lookup.near_case_dirs(exp.state, args.case)
        # the report never replaces what it checks: the trace, the model's files, the test
        # set, anything inside the case folder
        check_outputs(
            [("--json", args.json)],
            inputs=[
                ("--trace", trace),
                ("source", source),
                ("target", target),
                *experiment_reads(exp, state, model),
            ],
            folders=[("the case folder", args.case)],
        )
        printed_dirs = []
        if OUTPUTS in groups:
            if not args.case:
                if args.outputs or args.outputs_matching or (args.only and groups == (OUTPUTS,)):
                    raise LegacyInputError(
                        None, "--only outputs, --outputs and --outputs-matching need --case DIR"
                    )
            else:
                printed_dirs = printed_outputs.recording_dirs(args.case, args.outputs)
        with TraceFile(trace) as tr:
            n_printed = (
                printed_outputs.count_printed(printed_dirs, files, data_dir, args.outputs_matching)
                if printed_dirs
                else 0
            )
            progress = Progress(
                count_work(tr, groups, args.beam_labels) + n_printed,
                unit="items",
                enabled=True if args.progress else None,
            )
            report = check(
                exp,
                tr,
                groups=[g for g in groups if g not in CASE_GROUPS],
                beam_labels=args.beam_labels,
                source=source,
                target=target,
                progress=progress,
            )
            if printed_dirs:
                t1 = time.perf_counter()
                report.rows += printed_outputs.check_printed(
                    exp, files, tr, printed_dirs, data_dir, progress, args.outputs_matching
                )
                report.seconds[OUTPUTS] = time.perf_counter() - t1
            continued_dir = continued.recording_dir(args.case) if args.case else None
            if CONTINUED in groups and continued_dir is not None:
                t1 = time.perf_counter()
                report.rows += continued.check_continued(
                    files.state, files.model, continued_dir, data_dir
                )
                report.seconds[CONTINUED] = time.perf_counter() - t1
            progress.close()
    finally:
        search_log.setLevel(search_level)
    if report.n_compared == 0:
        raise LegacyInputError(
            trace, f"the trace holds nothing of the selected group(s) {', '.join(groups)}"
        )
    report.seconds["total"] = time.perf_counter() - t0
    print(report.table(float64_reference=args.float64_reference))
    sys.stdout.flush()
    if args.json:
        report.to_json(args.json)
    logger.info(
        "parity: %d quantities, %d values compared in %.1f s",
        len(report.rows),
        report.n_compared,
        report.seconds["total"],
    )
    if not report.ok:
        return EXIT_MISMATCH
    return _uncovered_status(report, args.allow_uncovered)


def _uncovered_status(report, allow_uncovered):
    """The one rule for NOT COVERED rows (docs/exit-codes.md; the pytest plugin applies the
    same, ``Report.unexpected_uncovered``): a row the recording cannot discriminate is
    expected -- said on stderr, exit 0; a row that should be covered and is not exits 1
    unless ``--allow-uncovered``."""
    unexpected = report.unexpected_uncovered
    expected = [r for r in report.uncovered if r not in unexpected]
    if expected:
        logger.info(
            "parity: %d row(s) NOT COVERED, expected: the recording cannot tell these "
            "mechanisms apart (%s)",
            len(expected),
            ", ".join(r.quantity for r in expected),
        )
    if unexpected and not allow_uncovered:
        logger.error(
            "parity: %d row(s) NOT COVERED that the recording holds: the port did not "
            "compare them (%s); pass --allow-uncovered to accept",
            len(unexpected),
            ", ".join(r.quantity for r in unexpected),
        )
        return EXIT_MISMATCH
    return EXIT_OK
