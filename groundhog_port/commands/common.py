"""Arguments every model-loading command shares, named as in sample.py / score.py."""
from ..errors import LegacyInputError
from ..loading import open_experiment


def add_data_dir_argument(parser, extra=""):
    """``--data-dir DIR``, repeatable: searched in order (:mod:`groundhog_port.lookup`)."""
    parser.add_argument("--data-dir", action="append", metavar="DIR",
                        help="where to look for vocabularies / corpora / test sets whose stored "
                             "(legacy absolute) path does not exist, after the state's own "
                             "folder; repeatable, searched in the order given" + extra)


def add_model_arguments(parser, model_positional=True, state_required=True):
    parser.add_argument("--state", required=state_required and not model_positional,
                        help="the experiment's *_state.pkl")
    if model_positional:
        parser.add_argument("model_path", nargs="?", help="the experiment's *_model.npz")
        parser.add_argument("changes", nargs="?", default="",
                            help="changes to the state, GroundHog syntax: \"key=value,key2='x'\" "
                                 "(parsed as literals, never evaluated)")
        parser.add_argument("--checkpoint", metavar="DIR",
                            help="an exported checkpoint (groundhog-port export --format "
                                 "safetensors) instead of --state S MODEL; changes may follow")
    add_data_dir_argument(parser)
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda[:N]")
    parser.add_argument("--lenient", action="store_true",
                        help="load like GroundHog's Container.load: log missing/unknown "
                             "parameters and go on (missing ones stay zero)")
    parser.add_argument("--allow-nonfinite", action="store_true",
                        help="use a model whose weights hold NaN/Inf")
    parser.add_argument("--stable-softmax", action="store_true",
                        help="DEVIATION: subtract the maximum energy in the attention softmax "
                             "(the original does not; results may differ from Theano's)")


def open_from_args(args, model_path=None, state=None, data_dirs=None):
    """The experiment the command's arguments name (``data_dirs`` replaces ``--data-dir``)."""
    changes = getattr(args, "changes", "")
    if getattr(args, "checkpoint", None):
        positional = getattr(args, "model_path", None)
        if args.state or getattr(args, "model", None) or (positional and changes):
            raise LegacyInputError(None, "--checkpoint DIR replaces --state S MODEL (give "
                                         "only changes after it)")
        # the one positional after --checkpoint is the changes; no model path: exported
        state, model_path, changes = args.checkpoint, None, positional or changes
    else:
        state = state or args.state
        model_path = model_path or getattr(args, "model_path", None)
        if not (state and model_path):
            raise LegacyInputError(None, "give --state S and MODEL (the *_state.pkl and "
                                         "*_model.npz), or --checkpoint DIR")
    return open_experiment(state, model_path, changes,
                           data_dir=args.data_dir if data_dirs is None else data_dirs,
                           device=args.device, lenient=args.lenient,
                           allow_nonfinite=args.allow_nonfinite,
                           stable_softmax=args.stable_softmax)


def run_fingerprint(args, exp, command, vocabularies, **settings):
    """What makes a resumable output (:class:`~groundhog_port.outputs.Journal`): the
    digests of the state, the model and the ``vocabularies`` (state keys) the run reads,
    the changes, the options that change numbers, and ``settings`` (the command's own:
    inputs' digests, beam size...).  ``--resume`` refuses a journal whose fingerprint
    differs."""
    from ..outputs import file_digest
    state, model, changes = args.state, args.model_path, getattr(args, "changes", "") or ""
    if getattr(exp, "weights_path", None) is not None:
        # an exported checkpoint: its config.json holds the state and the vocabularies
        state, model, vocabularies = exp.state_path, exp.weights_path, ()
        changes = changes or (args.model_path or "")
    fp = {"command": command, "state": file_digest(state),
          "model": file_digest(model), "changes": changes,
          "device": args.device, "lenient": args.lenient, "stable_softmax": args.stable_softmax}
    for key in vocabularies:
        fp[key] = file_digest(exp.path(key))
    fp.update(settings)
    return fp
