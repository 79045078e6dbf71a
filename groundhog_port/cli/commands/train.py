"""``groundhog-port train``: GroundHog's ``experiments/nmt/train.py`` (continue or start training).

``train.py --state S --proto NAME changes...`` built ``state = NAME(); update(S);
update(changes)`` (train.py:66-74); so does this command.  Files go to ``state['prefix']``
(``<prefix>model.npz``, ``<prefix>state.pkl``, ``<prefix>timing.npz``), saved at the start,
every ``saveFreq`` minutes and at the end, the three files replaced together; while it runs
``<prefix>train.lock`` is locked, and a second run on the same prefix refuses to start.
With ``reload`` (the default) and an existing ``<prefix>model.npz`` the run resumes from it
and its timings -- run the same command again after an interruption.  Otherwise ``--model M`` starts from an existing checkpoint (e.g. an
archived ``*_model.npz``: continue training or fine-tune on new corpora given as
``source=['new.en.h5'] target=['new.fr.h5']``), and without it a new model is drawn as
GroundHog drew it (``RandomState(state['seed'])`` in construction order,
:mod:`groundhog_port.training.init`).

Continuing a trained model restarts Adadelta from zero accumulators, as GroundHog did; the
command says so with a warning.  ``--keep-accumulators`` (a documented deviation, off by
default) saves them in ``<prefix>adadelta.npz`` with every checkpoint and takes them back
when the run is resumed (or from beside ``--model``).
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import legacy_states

from ... import lookup
from ...errors import EXIT_OK, LegacyInputError
from ...outputs import check_outputs, run_lock, signals_held
from .common import (
    add_data_dir_argument,
    add_device_argument,
    add_model_and_changes,
    model_and_changes,
)

NAME = "train"
HELP = (
    "train or continue training a model as GroundHog's train.py (SGD_adadelta, saving "
    "every saveFreq minutes, resumable)"
)
logger = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state", help="a *_state.pkl to start from (train.py --state)")
    p.add_argument(
        "--proto",
        default="prototype_state",
        help="the prototype the state is applied on (train.py --proto; default "
        f"prototype_state; one of {', '.join(legacy_states.PROTOTYPES)})",
    )
    add_model_and_changes(
        p,
        "start from this *_model.npz (when <prefix>model.npz does not "
        "exist yet); without it a new model is initialised",
    )
    add_data_dir_argument(p)
    add_device_argument(p)
    p.add_argument(
        "--max-updates", type=int, help="stop (and save) after this many updates of this run"
    )
    p.add_argument(
        "--keep-accumulators",
        action="store_true",
        help="DEVIATION from GroundHog (which restarts Adadelta from zero on every run): "
        "save Adadelta's accumulators in <prefix>adadelta.npz with each checkpoint "
        "and continue from them when resuming (or from the adadelta.npz beside --model)",
    )


def build_state(args: argparse.Namespace) -> tuple[dict[str, Any], frozenset[str]]:
    if args.proto not in legacy_states.PROTOTYPES:
        raise LegacyInputError(
            None,
            f"--proto {args.proto}: unknown prototype (known: "
            f"{', '.join(legacy_states.PROTOTYPES)})",
        )
    state = legacy_states.PROTOTYPES[args.proto]()
    if args.state:
        stored = legacy_states.load_stored_state(args.state)
        if not isinstance(stored, dict):
            raise LegacyInputError(args.state, "a GroundHog state is a pickled dict")
        state.update(stored)
    changes = legacy_states.parse_changes(args.changes)
    legacy_states.check_change_keys(changes, state, args.strict)
    state.update(changes)
    return state, frozenset(changes)


def run(args: argparse.Namespace) -> int:
    with signals_held():  # torch loads here: a Ctrl-C waits until it has (cli/main.py says why)
        from ...legacy.experiment import auto_threads, resolve_device
        from ...model.config import ModelConfig
        from ...training.files import finish_checkpoint
    model_and_changes(args)
    state, explicit = build_state(args)
    finished = finish_checkpoint(str(state["prefix"]))
    if finished:
        logger.warning(
            "the last save was stopped between its renames (killed?): completed it (%s)",
            ", ".join(str(p) for p in finished),
        )
        state, explicit = build_state(args)  # --state may be one of the files replaced
    cfg = ModelConfig.from_state(state, args.state)
    auto_threads()
    device = resolve_device(args.device)
    where = Path(args.state) if args.state else Path("state.pkl")
    dirs = lookup.data_dirs(args.data_dir)
    corpora = [
        legacy_states.resolve_path(state, k, where, dirs, explicit=k in explicit)
        for k in ("source", "target")
    ]
    prefix = str(state["prefix"])
    folder = Path(prefix + "x").parent
    if not folder.is_dir():
        raise LegacyInputError(
            prefix,
            f"the folder {folder} of the prefix "
            + (
                "given in the changes does not exist: create it first"
                if "prefix" in explicit
                else "stored in the state does not exist: create it, or give "
                "prefix='folder/name_' in the changes"
            ),
        )
    lock = Path(prefix + "train.lock")
    check_prefix_outputs(args, prefix, lock, corpora)
    with run_lock(
        lock,
        f"another training run is writing the {prefix}* checkpoint ({lock.name} "
        "is locked); wait for it to finish or give another prefix",
    ):
        return _train(args, state, cfg, device, corpora, prefix)


def check_prefix_outputs(
    args: argparse.Namespace, prefix: str, lock: Path, corpora: Sequence[Path]
) -> None:
    """Before anything is loaded: the checkpoint files (and the lock, removed at the end)
    are none of the files training reads -- the corpora, and ``--model`` unless it is this
    prefix's own model (continuing one's own checkpoint, and the state it was saved with,
    is what ``reload`` does)."""
    from ...training import files

    own = Path(prefix + "model.npz")
    reads = [("source corpus", corpora[0]), ("target corpus", corpora[1])]
    if args.model and not (own.exists() and os.path.samefile(own, args.model)):
        reads.append(("--model", args.model))
    check_outputs(
        [
            ("the checkpoint", own),
            ("the checkpoint", files.accumulators_path(own)),
            ("the checkpoint", Path(prefix + "state.pkl")),
            ("the checkpoint", Path(prefix + "timing.npz")),
            ("the lock", lock),
        ],
        inputs=reads,
    )


def _train(args, state, cfg, device, corpora, prefix):
    from ...legacy import checkpoint
    from ...model.encdec import RNNEncoderDecoder
    from ...training import files
    from ...training.adadelta import SGDAdadelta
    from ...training.init import initialize
    from ...training.loop import MainLoop, new_timings

    if args.max_updates is not None and args.max_updates < 0:
        raise LegacyInputError(None, "--max-updates must be >= 0")
    model = RNNEncoderDecoder(cfg)
    own = Path(prefix + "model.npz")
    start = None  # the model file training continues from
    if state.get("reload") and own.is_file():
        checkpoint.load_into(model, own)
        timing = Path(prefix + "timing.npz")
        timings = (
            files.load_timings(timing, SGDAdadelta.RETURN_NAMES)
            if timing.is_file()
            else new_timings(state)
        )
        start = own
        logger.info("resuming from %s at update %d", own, int(timings["step"]))
        _check_not_finished(state, int(timings["step"]), own)
    elif args.model:
        checkpoint.load_into(model, args.model)
        timings = new_timings(state)
        start = Path(args.model)
        logger.info("starting from %s", args.model)
    else:
        drawn = initialize(model, state)
        timings = new_timings(state)
        logger.info(
            "new model (%s): drawn as GroundHog drew it from RandomState(seed=%s), %d "
            "draws in construction order",
            args.proto,
            state["seed"],
            len(drawn.log),
        )
    model.to(device)
    loop = MainLoop(
        model,
        state,
        timings,
        corpora[0],
        corpora[1],
        max_updates=args.max_updates,
        keep_accumulators=args.keep_accumulators,
    )
    if start is not None:
        _restart_or_carry(
            loop, start, int(timings["step"]), args.keep_accumulators, resumed=start == own
        )
    n = loop.run()
    logger.info("%d updates this run, %d in all; saved under %s", n, loop.step, prefix)
    return EXIT_OK


def _check_not_finished(state, step, own):
    """A resumed run already at ``loopIters`` would make no update (GroundHog's loop test,
    mainLoop.py:282, fails at once) and only save the same checkpoint again: refused with
    how to go on (exit 2, nothing written)."""
    limit = state["loopIters"]
    if isinstance(limit, (int, float)) and not isinstance(limit, bool) and step >= limit:
        more = int(step + max(limit, 1))
        raise LegacyInputError(
            own,
            f"this run is at update {step}, where its loopIters={limit:g} stops training: "
            f"nothing to do. To go on, raise it in the changes, e.g. loopIters={more}",
        )


def _restart_or_carry(loop, start, step, keep, resumed):
    """Continued training from ``start`` (this run's own checkpoint at update ``step`` when
    ``resumed``, else ``--model``): take the accumulators saved beside it
    (``--keep-accumulators``) or say loudly that Adadelta restarts from zero, as in GroundHog
    (not for a checkpoint saved before any update: its accumulators were zero)."""
    from ...training import files
    from ...training.adadelta import restart_step

    acc = files.accumulators_path(start)
    if keep and acc is not None and acc.is_file():
        expected = {k: tuple(a.shape) for k, a in loop.algo.accumulators().items()}
        arrays = files.load_accumulators(acc, {**expected, "step": ()})
        saved = int(arrays["step"]) if "step" in arrays else None
        if resumed and saved != step:
            raise LegacyInputError(
                acc,
                f"holds the Adadelta accumulators of update {saved}, but "
                f"{start.name} is at update {step}; remove it to restart "
                "Adadelta from zero",
            )
        loop.algo.set_accumulators(arrays, acc)
        logger.info(
            "Adadelta accumulators of update %d carried over from %s (--keep-accumulators, "
            "a deviation from GroundHog)",
            step,
            acc,
        )
        return
    if resumed and step == 0:
        return
    why = (
        f"--keep-accumulators: no {acc.name if acc else 'adadelta.npz'} beside {start} (GroundHog "
        "never wrote one); they are saved from now on"
        if keep
        else "--keep-accumulators carries them across saves (<prefix>adadelta.npz, a deviation "
        "from GroundHog, off by default)"
    )
    logger.warning(
        "continuing training from %s: Adadelta restarts from ZERO accumulators, as GroundHog's "
        "train.py did (it never saved them). The first updates move every weight by about "
        "sqrt(adaeps/(1-adarho)) = %.1e whatever its gradient, which can wreck a converged model "
        "(GroundHog continuing search_variant: cost 7.9 -> 1756 and NaN within 15 updates). %s",
        start,
        restart_step(loop.state),
        why,
    )
