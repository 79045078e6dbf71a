"""Arguments every model-loading command shares, named as in sample.py / score.py."""
from ..loading import open_experiment


def add_model_arguments(parser, model_positional=True, state_required=True):
    parser.add_argument("--state", required=state_required, help="the experiment's *_state.pkl")
    if model_positional:
        parser.add_argument("model_path", help="the experiment's *_model.npz")
        parser.add_argument("changes", nargs="?", default="",
                            help="changes to the state, GroundHog syntax: \"key=value,key2='x'\" "
                                 "(parsed as literals, never evaluated)")
    parser.add_argument("--data-dir", help="where to look for vocabularies / corpora whose "
                        "stored (legacy absolute) path does not exist")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda[:N]")
    parser.add_argument("--lenient", action="store_true",
                        help="load like GroundHog's Container.load: log missing/unknown "
                             "parameters and go on (missing ones stay zero)")
    parser.add_argument("--allow-nonfinite", action="store_true",
                        help="use a model whose weights hold NaN/Inf")
    parser.add_argument("--stable-softmax", action="store_true",
                        help="DEVIATION: subtract the maximum energy in the attention softmax "
                             "(the original does not; results may differ from Theano's)")


def open_from_args(args, model_path=None, state=None):
    return open_experiment(state or args.state, model_path or args.model_path,
                           getattr(args, "changes", ""), data_dir=args.data_dir,
                           device=args.device, lenient=args.lenient,
                           allow_nonfinite=args.allow_nonfinite,
                           stable_softmax=args.stable_softmax)
