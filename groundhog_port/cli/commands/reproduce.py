"""``groundhog-port reproduce``: re-translate an archived experiment and compare with its outputs.

Examples::

    groundhog-port reproduce --case legacy_traces/search
    groundhog-port reproduce --case old/run1 --data-dir old/vocab --source old/newstest.en \
        --ref old/newstest.fr
    groundhog-port reproduce --case legacy_traces/search_variant --json
    groundhog-port reproduce --state s_state.pkl --model s_model.npz --source test.en \\
        --ref test.fr --archived-trans trans_beam10_normalize.txt --beam-size 10 --normalize

Exit codes: 0 every output re-done and every compared line identical, 1 some differ or an
output was not done (said in the report), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ... import lookup
from ...errors import EXIT_MISMATCH, EXIT_OK, LegacyInputError
from ...outputs import OutputError, Progress, check_outputs, file_in, lies_inside, signals_held
from ...search.defaults import DEFAULT_BATCH_SIZE
from ...tasks import packs
from ...tasks.rescore import bleu_tokenizers

if TYPE_CHECKING:
    from ...tasks.reproduce import ArchivedFile
from ...untrusted import check_special
from .common import (
    add_case_argument,
    add_model_arguments,
    add_progress_arguments,
    experiment_reads,
    model_and_changes,
    open_from_args,
)

NAME = "reproduce"
HELP = (
    "re-translate an archived experiment (--case DIR, or --state/--model/--source/"
    "--archived-trans with its sample.py settings) and compare line by line, with BLEU"
)
logger = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_case_argument(
        p,
        "experiment folder: *_state.pkl, *_model.npz and the "
        "trans_beamN[_normalize][_ignore_unk].txt files sample.py wrote (settings "
        "read from the names; trans_holdout_beamN.txt with holdout.en/.fr); each "
        "file's test set is found by content in DIR, each --data-dir and up to three "
        "folders up (docs/archives.md), or given with --source/--ref",
    )
    add_model_arguments(p)
    p.add_argument(
        "--source",
        help="source sentences the archived file translates (with --case: "
        "replaces test.en, e.g. a renamed test set)",
    )
    p.add_argument(
        "--ref", help="reference translations, for BLEU (optional; with --case: replaces test.fr)"
    )
    p.add_argument(
        "--archived-trans",
        action="append",
        metavar="FILE",
        help="archived sample.py --trans output (repeat for several runs with the same settings)",
    )
    p.add_argument("--beam-size", type=int, help="the archived run's --beam-size (without --case)")
    p.add_argument("--normalize", action="store_true", help="the archived run used --normalize")
    p.add_argument("--ignore-unk", action="store_true", help="the archived run used --ignore-unk")
    p.add_argument(
        "--batch-size",
        type=int,
        help=f"sentences decoded at once (default {DEFAULT_BATCH_SIZE}, or more under beam 4, "
        "as translate); 1 runs the literal sample.py loop",
    )
    p.add_argument(
        "--tokenize",
        default="13a",
        choices=bleu_tokenizers(),
        help="sacrebleu tokenizer (default 13a, as `groundhog-port bleu`; 'none' for "
        "the tokenized text as it is); the multi-bleu number splits on spaces",
    )
    p.add_argument(
        "--max-diffs", type=int, default=5, help="differing lines shown per file (default 5)"
    )
    p.add_argument(
        "--save-dir",
        metavar="DIR",
        help="also write the reproduced translations there, named as the archived files",
    )
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    add_progress_arguments(p)


def _archived_files(args):
    from ...tasks.reproduce import (
        ArchivedFile,
        Settings,
        case_checkpoint,
        find_case,
        parse_trans_name,
    )

    for path in [args.source, args.ref, *(args.archived_trans or [])]:
        # a pipe (--source <(zcat x.gz)) is named as one, with what to do instead
        if path:
            check_special(path, "a test set or an archived output (pass the .gz file itself: "
                          "it is read decompressed)")  # fmt: skip
        if path and not Path(path).is_file():
            raise LegacyInputError(path, "file not found")
    if args.case:
        explicit = [name for name, v in (("--archived-trans", args.archived_trans),) if v]
        if explicit:
            raise LegacyInputError(
                None,
                "--case reads the outputs from the folder; leave out " + ", ".join(explicit),
            )
        if (args.normalize or args.ignore_unk) and args.beam_size is None:
            raise LegacyInputError(
                None, "--normalize / --ignore-unk with --case need --beam-size N too"
            )
        given = (
            Settings(args.beam_size, args.normalize, args.ignore_unk)
            if args.beam_size is not None
            else None
        )
        dirs = lookup.case_data_dirs(args.case, args.data_dir)
        state, model = case_checkpoint(args.case, args.model, args.state)
        args.model = args.model_path = None
        exp = open_from_args(args, model_path=model, state=state, data_dirs=dirs)
        # vocabularies kept once beside the experiments (wmt14/vocab/), after every other place
        exp.data_dirs = tuple(exp.data_dirs) + lookup.near_case_dirs(exp.state, args.case)
        _check_vocabularies(exp, args.case)
        case = find_case(
            args.case, dirs, args.source, args.ref, exp=exp, settings=given, model=model,
            state=state,
        )  # fmt: skip
        return exp, case.files, case.skipped, str(case.directory), state, model
    model_given = (
        (("--checkpoint", args.checkpoint),)
        if args.checkpoint
        else (("--state", args.state), ("--model", args.model))
    )
    missing = [
        n
        for n, v in (
            *model_given,
            ("--source", args.source),
            ("--archived-trans", args.archived_trans),
            ("--beam-size", args.beam_size),
        )
        if not v
    ]
    if missing:
        raise LegacyInputError(
            None,
            "give --case DIR, or --state, --model, --source, "
            "--archived-trans and --beam-size (missing: " + ", ".join(missing) + ")",
        )
    if args.beam_size < 1:
        raise LegacyInputError(None, "--beam-size must be at least 1")
    settings = Settings(args.beam_size, args.normalize, args.ignore_unk)
    for f in args.archived_trans:  # a name that says other settings than the flags: said
        named = parse_trans_name(Path(f).name)
        if named is not None and named[0] != settings:
            logger.warning(
                "%s: its name says %s, the flags %s: the flags are used",
                f, named[0].describe(), settings.describe(),
            )  # fmt: skip
    exp = open_from_args(
        args,
        model_path=args.model and Path(args.model),
        state=args.state and Path(args.state),
        data_dirs=lookup.data_dirs(args.data_dir),
    )
    ref = Path(args.ref) if args.ref else None
    if ref is None:  # the same stem in the target language, as --case takes it
        ref, why = lookup.reference_for(args.source, *lookup.languages(exp.state))
        logger.info("%s: reference %s", args.source, ref if ref else f"none ({why})")
    files = [ArchivedFile(Path(f), settings, Path(args.source), ref) for f in args.archived_trans]
    return exp, files, [], None, args.state and Path(args.state), args.model and Path(args.model)


def _check_vocabularies(exp, case):
    """The four vocabularies the state names, before any test set is looked for: one missing
    is said as such (issue 43: it was "cannot find the source of trans_beam10.txt"), with
    the pickles of the case and each --data-dir whose words and ids fit the state."""
    from ...legacy import vocab_match

    missing = []
    for key in lookup.VOCABULARY_FILE_KEYS:
        try:
            exp.path(key)
        except LegacyInputError as err:
            missing.append((key, err))
    if not missing:
        return
    folders = [case, *(d for d in exp.data_dirs if not isinstance(d, lookup.ImplicitDir))]
    fits = vocab_match.find_by_content(
        exp.state, [k for k, _ in missing], folders, lookup.languages(exp.state)
    )
    key, first = missing[0]
    names = ", ".join(f"{k} ({Path(str(exp.state.get(k))).name})" for k, _ in missing)
    hint = (
        "; files whose words and ids fit: "
        + ", ".join(f"{k}='{f.path}'" for k, f in fits.items())
        + " (give them as changes)"
        if fits
        else "; pass --data-dir DIR (the folder holding them, also when renamed: a pickle "
        "whose words and ids fit the state is named here) or the changes word_indx='FILE' ..."
    )
    raise LegacyInputError(
        first.path,
        f"vocabularies not found: {names}; {first.problem.split(': looked at')[0]}{hint}",
    )


def check_save_dir(
    save_dir: str | os.PathLike[str],
    files: Sequence[ArchivedFile],
    reads: list[tuple[str, str | os.PathLike[str] | None]],
    case: str | os.PathLike[str] | None,
) -> None:
    """Before any work: the reproduced files (named as the archived ones, inside
    ``save_dir``, no link there followed) replace nothing the run reads -- the archived
    files, the test sets, the model's files -- and nothing inside the case folder."""
    if case is not None and lies_inside(save_dir, case):
        raise OutputError(
            save_dir,
            f"lies inside the case folder {case}, which this run reads: --save-dir is never "
            "written into it (it could replace a recorded file); choose a folder outside it",
        )
    if not Path(save_dir).is_dir():
        return  # created on writing: nothing in it yet to collide with
    for f in files:
        reads += [
            ("archived", f.path),
            ("source", f.source),
            ("reference", f.reference),
            ("sample.py stdout", f.stdout),
            ("sample.py error", f.error),
        ]
    check_outputs(
        [("--save-dir", file_in(save_dir, f.name)) for f in files],
        inputs=reads,
        folders=[("the case folder", case)],
    )


def run(args: argparse.Namespace) -> int:
    case = Path(args.case) if args.case else None
    if case is not None and case.is_file() and packs.is_pack(case.name):
        # a run kept as run7.tar.gz: re-done from a private unpacked copy; its test set is
        # looked for inside the pack, beside it and in each --data-dir
        with packs.case_folder(case) as (folder, up), lookup.fenced(up.folder):
            for member, why in up.skipped:
                logger.warning("%s: %s: %s", case, member, why)
            args.case = str(folder)
            args.data_dir = [*(args.data_dir or []), str(case.parent)]
            return _run(args, shown=f"{case}/{folder.relative_to(up.folder).as_posix()}")
    return _run(args)


def _run(args, shown=None):
    with signals_held():  # torch loads here: a Ctrl-C waits until it has (cli/main.py says why)
        from ...tasks.reproduce import format_report, reproduce, sentences_to_translate
    model_and_changes(args)
    if args.batch_size is not None and args.batch_size < 1:
        raise LegacyInputError(None, "--batch-size must be at least 1")
    exp, files, skipped, case, state, model = _archived_files(args)
    if args.checkpoint:
        state, model = exp.state_path, exp.weights_path
    if args.save_dir:
        check_save_dir(args.save_dir, files, experiment_reads(exp, state, model), case)
    progress = Progress(
        sentences_to_translate(files), unit="sent", enabled=True if args.progress else None
    )
    report = reproduce(
        exp,
        files,
        batch_size=args.batch_size,
        max_diffs=args.max_diffs,
        tokenize=args.tokenize,
        progress=progress.update,
        save_dir=args.save_dir,
    )
    progress.close()
    report.update(
        {
            "case": shown or case,
            "state": str(state),
            "model": str(model),
            "skipped": skipped,
            "tokenize": args.tokenize,
            # every output found: re-done and identical, or not; an output not done (its
            # test set or settings not found) is never "all identical" (issue 50, item 6)
            "outputs": len(files) + len(skipped),
            "not_done": len(skipped),
            "all_identical": report["all_identical"] and not skipped,
        }
    )
    logger.info(
        "%d sentences, %.1f sentences/s", report["sentences"], report["sentences_per_second"]
    )
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
    else:
        print(format_report(report))
    return EXIT_OK if report["all_identical"] else EXIT_MISMATCH
