"""Arguments every model-loading command shares, named as in sample.py / score.py.

The model and the changes are given the same way to every command: the model as a word
(sample.py's ``model_path``) or ``--model FILE`` (train.py's, parity's), the changes as
words after it (each GroundHog's ``"key=value,key2='x'"``, applied in turn as train.py
did) and/or ``--changes TEXT`` (repeatable); options may come before, between or after
these words (``main.CommandParser``).  A first word that reads as changes (``k=v``, not a
file) is taken as changes: ``inspect --state S "k=v"``.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import LegacyInputError
from ...file_names import VOCABULARY_FILE_KEYS

if TYPE_CHECKING:
    from ...legacy.experiment import Experiment
    from ...outputs import DigestsAhead

CHANGES_HELP = (
    "changes to the state, GroundHog syntax: \"key=value,key2='x'\" (one or several "
    "words, applied in turn; parsed as literals, never evaluated)"
)

logger = logging.getLogger(__name__)


def add_data_dir_argument(parser: argparse.ArgumentParser, extra: str = "") -> None:
    """``--data-dir DIR``, repeatable: searched in order (:mod:`groundhog_port.lookup`)."""
    parser.add_argument(
        "--data-dir",
        action="append",
        metavar="DIR",
        help="where to look for vocabularies / corpora / test sets whose stored "
        "(legacy absolute) path does not exist, after the state's own "
        "folder; repeatable, searched in the order given" + extra,
    )


def add_model_and_changes(
    parser: argparse.ArgumentParser, model_help: str = "the experiment's *_model.npz"
) -> None:
    """``MODEL`` / ``--model FILE``, ``CHANGES...`` / ``--changes TEXT``, ``--strict``."""
    parser.add_argument(
        "model_path", nargs="?", metavar="MODEL", help=f"{model_help} (or --model FILE)"
    )
    parser.add_argument("changes", nargs="*", default=[], metavar="CHANGES", help=CHANGES_HELP)
    parser.add_argument("--model", metavar="FILE", help="the same as MODEL")
    parser.add_argument(
        "--changes",
        dest="changes_option",
        action="append",
        default=[],
        metavar="TEXT",
        help="the same as CHANGES (repeatable)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="refuse changes to state keys GroundHog never reads (typos such as "
        "loopIter=50; by default a warning naming the closest key)",
    )


def _reads_as_changes(word):
    """``k=v`` or a mapping (``{'k': v}``, ``**{...}``) that is not a file's name."""
    return ("=" in word or word.lstrip().startswith(("{", "**"))) and not Path(word).exists()


def add_output_folder(parser: argparse.ArgumentParser, help: str) -> None:
    """``--out DIR`` or ``OUTDIR``, a last word after the model and the changes (export's;
    ``archive`` takes ``--out DIR``).  argparse gives such a word to the CHANGES before it:
    :func:`model_and_changes` takes it back into ``args.outdir``."""
    parser.add_argument("outdir", nargs="?", metavar="OUTDIR", help=help)
    parser.add_argument("--out", metavar="DIR", help="the same as OUTDIR")
    parser.set_defaults(_output_folder=True)


def _output_folder(args):
    """``args.outdir`` from ``--out DIR`` or the last positional word (not a change)."""
    args._output_folder = False
    words = [args.model_path] if args.model_path is not None else []
    words += args.changes
    last = words[-1] if words and not _reads_as_changes(words[-1]) else None
    if args.out is not None:
        if last is not None and len(words) > 1:
            raise LegacyInputError(None, f"two output folders given: {last} and --out {args.out}")
        args.outdir = args.out
        return
    if last is None:
        raise LegacyInputError(None, "give the output folder: --out DIR (or OUTDIR, last)")
    words.pop()
    if args.model_path is not None:
        args.model_path, words = (words[0], words[1:]) if words else (None, [])
    if args.model_path is None and not args.model and not getattr(args, "checkpoint", None):
        raise LegacyInputError(
            None, f"one word ({last}) for the model and the output folder: give MODEL --out DIR"
        )
    args.changes, args.outdir = words, last


def model_and_changes(args: argparse.Namespace) -> tuple[str | None, list[str]]:
    """Set ``args.model`` / ``args.model_path`` to the model given either way (or None) and
    ``args.changes`` to the list of change texts; returns ``(model, changes)``."""
    if getattr(args, "_output_folder", False):
        _output_folder(args)
    positional, changes = args.model_path, list(args.changes)
    if positional is not None and _reads_as_changes(positional):
        positional, changes = None, [positional, *changes]
    if positional and args.model and Path(positional) != Path(args.model):
        raise LegacyInputError(None, f"two models given: {positional} and --model {args.model}")
    args.model = args.model_path = args.model or positional
    args.changes = changes + list(args.changes_option)
    args.changes_option = []
    return args.model, args.changes


def add_state_and_model(parser: argparse.ArgumentParser, checkpoint_help: str) -> None:
    """``--state S``, ``MODEL`` / ``--model`` with the changes (:func:`add_model_and_changes`),
    or ``--checkpoint DIR`` (an export) instead of both."""
    parser.add_argument("--state", help="the experiment's *_state.pkl")
    add_model_and_changes(parser)
    parser.add_argument("--checkpoint", metavar="DIR", help=checkpoint_help)


def add_device_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda[:N]")


def add_case_argument(parser: argparse.ArgumentParser, contents: str) -> None:
    """``--case DIR``: an experiment's folder; ``contents`` says what the command finds there."""
    parser.add_argument("--case", metavar="DIR", help=contents)


def add_workers_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """``--workers N|auto`` (:mod:`groundhog_port.distributed.pool`); ``what``: what is dealt
    out to the workers, for the help."""
    parser.add_argument(
        "--workers",
        type=workers_arg,
        default=None,
        metavar="N|auto",
        help=f"{what} in N forked worker processes of one torch thread each (the model "
        "loaded once, shared), dealt out as workers come free and written in order, "
        "identical to one process; 'auto': the cores no other process is using when the "
        "command starts. Default: auto where workers can run (one plain CPU process, "
        "--threads not given), else 1",
    )


def workers_arg(text: str) -> int | str:
    """``--workers``: a whole number >= 1, or ``auto``."""
    if text == "auto":
        return text
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of workers or 'auto', got {text!r}"
        ) from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"at least 1 worker, got {n}")
    return n


def settle_workers(args: argparse.Namespace, world: object, why: str | None) -> None:
    """``args.workers`` settled before the model loads.  Not given: ``auto`` where workers
    can run, else 1 (said in the log at debug level: nothing was asked).  Given (N > 1 or
    ``auto``) where they cannot -- under torchrun, on CUDA, or ``why`` (a reason of the
    command's own, or None) -- one line.  With workers, this process keeps one thread: they
    fork from it."""
    cannot = (
        "not under torchrun (--nproc-per-node there)"
        if world
        else "not with --device cuda"
        if args.device != "cpu"
        else f"not {why}"
        if why
        else None
    )
    if args.workers is None:
        if cannot is None and args.threads is not None:
            cannot = "--threads was given: one process of that many threads"
        args.workers = "auto" if cannot is None else 1
        if cannot is not None:
            logger.debug("one process, no workers: %s", cannot)
    elif args.workers != 1 and cannot is not None:
        raise LegacyInputError(
            None, f"--workers forks CPU worker processes of one plain process: {cannot}"
        )
    if args.workers != 1:
        from ...legacy.experiment import set_threads

        set_threads(1)


def add_progress_arguments(
    parser: argparse.ArgumentParser, resume: str | None = None, shown: str = "line"
) -> None:
    """``--progress`` (the ``shown`` progress line or bar on a pipe too); with a ``resume``
    help text, ``--resume`` before it (the command continues an interrupted run)."""
    if resume:
        parser.add_argument("--resume", action="store_true", help=resume)
    parser.add_argument(
        "--progress",
        action="store_true",
        help=f"show the progress {shown} even when stderr is not a terminal",
    )


#: the switches of :func:`~groundhog_port.legacy.loading.open_experiment`, by keyword: --help
LOADING_SWITCHES = {
    "lenient": "load like GroundHog's Container.load: log missing/unknown "
    "parameters and go on (missing ones stay zero)",
    "allow_nonfinite": "use a model whose weights hold NaN/Inf",
    "stable_softmax": "DEVIATION: subtract the maximum energy in the attention softmax "
    "(the original does not; results may differ from Theano's)",
}


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    add_state_and_model(
        parser,
        "an exported checkpoint (groundhog-port export --format "
        "safetensors) instead of --state S MODEL; changes may follow",
    )
    add_data_dir_argument(parser)
    add_device_argument(parser)
    for keyword, text in LOADING_SWITCHES.items():
        parser.add_argument("--" + keyword.replace("_", "-"), action="store_true", help=text)


def open_from_args(
    args: argparse.Namespace,
    model_path: str | os.PathLike[str] | None = None,
    state: str | os.PathLike[str] | None = None,
    data_dirs: Sequence[str | os.PathLike[str]] | None = None,
    pack: bool = False,
) -> Experiment:
    """The experiment the command's arguments name (``data_dirs`` replaces ``--data-dir``;
    ``pack``: :func:`~groundhog_port.legacy.loading.open_experiment`'s)."""
    from ...outputs import signals_held

    with signals_held():  # torch loads here for the lighter commands: cli.py says why
        from ...legacy.loading import open_experiment
    model, changes = model_and_changes(args)
    if getattr(args, "checkpoint", None):
        if args.state or model:
            raise LegacyInputError(
                None, "--checkpoint DIR replaces --state S MODEL (give only changes after it)"
            )
        state, model_path = args.checkpoint, None  # exported: no model file
    else:
        state = state or args.state
        model_path = model_path or model
        if not (state and model_path):
            raise LegacyInputError(
                None,
                "give --state S and MODEL (the *_state.pkl and "
                "*_model.npz; MODEL as a word or --model FILE), or "
                "--checkpoint DIR",
            )
    return open_experiment(
        state,
        model_path,
        changes,
        data_dir=args.data_dir if data_dirs is None else data_dirs,
        device=args.device,
        strict=args.strict,
        pack=pack,
        **{keyword: getattr(args, keyword) for keyword in LOADING_SWITCHES},
    )


def run_fingerprint(
    args: argparse.Namespace,
    exp: Experiment,
    command: str,
    vocabularies: Iterable[str],
    *,
    digests: DigestsAhead | None = None,
    **settings: object,
) -> dict[str, object]:
    """What makes a resumable output (:class:`~groundhog_port.outputs.Journal`): the
    digests of the state, the model and the ``vocabularies`` (state keys) the run reads,
    the changes, the options that change numbers, and ``settings`` (the command's own:
    inputs' digests, beam size...).  ``--resume`` refuses a journal whose fingerprint
    differs.  ``digests``: the files' digests started before the model loaded
    (:func:`digests_ahead`)."""
    from ...outputs import file_digest

    if digests is not None:
        file_digest = digests.get

    state, model, changes = args.state, args.model_path, " ".join(args.changes)
    weights = getattr(exp, "weights_path", None)  # an ExportedExperiment's
    if weights is not None:
        # an exported checkpoint: its config.json holds the state and the vocabularies
        state, model, vocabularies = exp.state_path, weights, ()
    fp = {
        "command": command,
        "state": file_digest(state),
        "model": file_digest(model),
        "changes": changes,
        "device": args.device,
        "lenient": args.lenient,
        "stable_softmax": args.stable_softmax,
    }
    for key in vocabularies:
        fp[key] = file_digest(exp.path(key))
    fp.update(settings)
    return fp


def digests_ahead(args: argparse.Namespace) -> DigestsAhead:
    """The digests :func:`run_fingerprint` will need of the state and the model given
    (``--state S MODEL``), computed while the model loads."""
    from ...outputs import DigestsAhead

    return DigestsAhead([args.state, args.model_path])


def source_fingerprint(
    args: argparse.Namespace,
    exp: Experiment,
    command: str,
    lines: Iterable[str],
    *,
    digests: DigestsAhead | None = None,
    **settings: object,
) -> dict[str, object]:
    """:func:`run_fingerprint` of a ``translate`` run (either search) over the source
    ``lines``: their digest and the two vocabularies the run reads."""
    from ...outputs import text_digest

    return run_fingerprint(
        args,
        exp,
        command,
        ("word_indx", "indx_word_target"),
        digests=digests,
        source=text_digest(lines),
        **settings,
    )


#: the vocabularies a state names (every one a command may read)


def experiment_reads(
    exp: Experiment,
    state: str | os.PathLike[str] | None = None,
    model: str | os.PathLike[str] | None = None,
) -> list[tuple[str, str | os.PathLike[str] | None]]:
    """``[(what, path)]``: every file opening ``exp`` read or a command may read of it -- the
    state and the model (``state``/``model``: as given; an exported checkpoint's
    ``config.json`` and weights), and each vocabulary the state names that exists.  What
    :func:`groundhog_port.outputs.check_outputs` protects from the command's outputs."""
    weights = getattr(exp, "weights_path", None)  # an ExportedExperiment's
    if weights is not None:
        out = [("--checkpoint", exp.state_path), ("--checkpoint", weights)]
    else:
        out = [("--state", state or exp.state_path), ("model", model)]
        for key in VOCABULARY_FILE_KEYS:
            try:
                out.append((f"{key} vocabulary", exp.path(key)))
            except LegacyInputError:
                pass  # not found: nothing there to protect
    return out
