"""``groundhog-port`` command line: one sub-command per module in :mod:`groundhog_port.commands`.

Each command module exposes ``NAME``, ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int``.  Bad input (:class:`~groundhog_port.errors.LegacyInputError`)
becomes one line on stderr and exit code 2, never a traceback.
"""
import argparse
import importlib
import logging
import signal
import sys

from .errors import EXIT_INPUT, LegacyInputError
from .outputs import signals_held

# Everything that imports torch (seconds) is imported by main(), with SIGINT and SIGTERM held
# back (outputs.signals_held): torch's C start-up imports numpy and clears any error raised
# meanwhile, so a KeyboardInterrupt raised inside it was swallowed and left numpy
# half-initialised (the command then went on, or failed later with "module 'numpy' has no
# attribute 'multiply'").  Held back, the signal arrives once the imports are done: one
# "interrupted" line.

COMMANDS = ("inspect", "score", "translate", "bleu", "reproduce", "parity", "train",
            "plot-training", "serve", "preprocess", "invert-dict", "pkl2hdf5", "shuffle-hdf5",
            "convert")


def build_parser():
    from .loading import SMALL_MODEL_DIM
    parser = argparse.ArgumentParser(
        prog="groundhog-port",
        description="Run GroundHog (RNNsearch / RNNencdec) checkpoints in PyTorch, "
        "with the original score.py / sample.py behaviour.",
        epilog="exit codes: 0 success, 1 parity/comparison failure, 2 usage or input error, "
        "3 some sentences could not be translated",
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    parser.add_argument("--threads", type=int,
                        help="torch CPU threads (default: 1 for models with dim < "
                             f"{SMALL_MODEL_DIM}, where more threads only add synchronisation; "
                             "torch's default otherwise)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"groundhog_port.commands.{name.replace('-', '_')}")
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled as Ctrl-C is: the partial output is kept for ``--resume``."""


def _on_sigterm(signum, frame):
    raise Terminated()


def main(argv=None):
    try:
        signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread (main() called from a thread): leave it
        pass
    name = "groundhog-port"
    try:  # a signal while the command modules are imported is an interruption too
        with signals_held():
            parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return EXIT_INPUT
        name = f"groundhog-port {args.command}"
        logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.INFO),
                            format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
        from .distributed import SHARDED_COMMANDS, world_from_env  # loaded by build_parser
        from .loading import set_threads
        if args.threads is not None:
            set_threads(args.threads)
        if args.command not in SHARDED_COMMANDS and world_from_env():
            raise LegacyInputError(None, f"'{args.command}' does not run under torchrun; only "
                                   f"{' and '.join(SHARDED_COMMANDS)} are sharded")
        return args._run(args)
    except LegacyInputError as err:
        print(f"{name}: error: {err}", file=sys.stderr)
        return EXIT_INPUT
    except Terminated:
        print(f"{name}: terminated", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return 130

if __name__ == "__main__":
    sys.exit(main())
