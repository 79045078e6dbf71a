"""``groundhog-port`` command line: one sub-command per module in :mod:`groundhog_port.cli.commands`.

Each command module exposes ``NAME``, ``HELP`` (a string literal), ``add_arguments(parser)``
and ``run(args) -> int``.  Bad input (:class:`~groundhog_port.errors.LegacyInputError`)
becomes one line on stderr and exit code 2, never a traceback.

Only the module of the command given is imported: most import torch (seconds), and
``groundhog-port --help`` or ``bleu`` need none of it.  The list of commands in ``--help``
reads each module's ``HELP`` from its source without running it (:func:`command_help`).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import gc
import importlib
import importlib.util
import logging
import re
import signal
import sys
import tokenize
from collections.abc import Collection, Sequence
from typing import NoReturn

from ..budget import DEFAULT_MIB
from ..budget import ENV as BUDGET_ENV
from ..budget import FLAG as BUDGET_FLAG
from ..errors import EXIT_INPUT, LegacyInputError, allocation_failure
from ..outputs import signals_held

# The command module (which imports torch, seconds) is imported by main() with SIGINT and
# SIGTERM held back (outputs.signals_held; commands whose module does not import torch load
# it in run(), after checking their arguments, held back in the same way:
# commands.common.open_from_args, plot-training): torch's C start-up imports
# numpy and clears any error raised meanwhile, so a KeyboardInterrupt raised inside it was
# swallowed and left numpy half-initialised (the command then went on, or failed later with "module 'numpy' has no
# attribute 'multiply'").  Held back, the signal arrives once the imports are done: one
# "interrupted" line.

COMMANDS = (
    "inspect",
    "score",
    "translate",
    "bleu",
    "reproduce",
    "parity",
    "train",
    "plot-training",
    "serve",
    "preprocess",
    "invert-dict",
    "pkl2hdf5",
    "shuffle-hdf5",
    "convert",
    "export",
    "archive",
)

#: --log-level values (logging's own names, any case)
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
#: global options that take a value (to find the command in argv before parsing)
_VALUED_GLOBALS = ("--log-level", "--threads", "--parse-budget-mib")


def _module_name(command):
    return f"groundhog_port.cli.commands.{command.replace('-', '_')}"


def command_help(command: str) -> str:
    """The ``HELP`` string of a command module, read from its source (nothing imported).

    Only the ``HELP = ...`` statement is parsed: parsing every command module's whole
    source took 0.022 s of each command's start in a fresh process (0.0045 s this way; the
    list is built for every command line)."""
    spec = importlib.util.find_spec(_module_name(command))
    assert spec is not None and spec.origin is not None  # one of COMMANDS: a module file
    origin = spec.origin
    with open(origin, encoding="utf-8") as f:
        source = f.read()
    start = source.find("\nHELP = ") + 1
    if start:
        # the statement ends at the first NEWLINE token (a parenthesised literal spans lines)
        lines = source[start:].splitlines(keepends=True)
        feed = iter(lines)
        for tok in tokenize.generate_tokens(lambda: next(feed, "")):
            if tok.type == tokenize.NEWLINE:
                node = ast.parse("".join(lines[: tok.end[0]])).body[0]
                assert isinstance(node, ast.Assign)  # "HELP = ..." at a line's start
                return ast.literal_eval(node.value)
    raise LookupError(f"{origin}: no HELP = '...' string literal")


def _log_level(text):
    level = str(text).upper()
    if level == "WARN":
        level = "WARNING"
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(
            f"unknown level {text!r} (known: {', '.join(l.lower() for l in LOG_LEVELS)}; "
            "'error' shows only errors)"
        )
    return level


def _global_options(parser, suppress=False):
    """Options every command takes, before or after its name (after it they are given with
    no default, so that one given before the command is kept)."""
    default = (lambda value: argparse.SUPPRESS) if suppress else (lambda value: value)
    parser.add_argument(
        "--log-level",
        type=_log_level,
        default=default("INFO"),
        metavar="LEVEL",
        help="debug, info (default), warning, error or critical",
    )
    parser.add_argument(
        "--log-time",
        action="store_true",
        default=default(False),
        help="start every log line with the date and time",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=default(None),
        help="torch CPU threads of one process (default 1: translate and score use more "
        "cores through --workers, which keeps its speed when another process shares the "
        "machine; N threads wait for each other at every step). Given, translate and score "
        "run one process",
    )
    parser.add_argument(
        BUDGET_FLAG,
        type=int,
        default=default(None),
        metavar="MIB",
        help="memory one input file may make a loader allocate beyond what the "
        "state declares (default: $" + BUDGET_ENV + f" or {DEFAULT_MIB}); "
        "a file over it is refused with one line naming the limit. Raise it "
        "only for genuinely huge archives (docs/hardening.md)",
    )


class Parser(argparse.ArgumentParser):
    """argparse, also taking GroundHog's underscore spelling of an option (``--beam_size``
    for ``--beam-size``), and suggesting the closest option for a misspelt one (``--beamsize``:
    "did you mean --beam-size?", the idea of Python 3.14's ``suggest_on_error``, with
    :func:`difflib.get_close_matches` on every Python)."""

    def error(self, message: str) -> NoReturn:
        prefix = "unrecognized arguments: "
        if message.startswith(prefix):
            words = message[len(prefix) :].split(" ")
            message = prefix + " ".join(self._with_suggestion(w) for w in words)
        super().error(message)

    def _with_suggestion(self, word):
        if not word.startswith("--"):
            return word
        options = sorted(o for o in self._option_string_actions if o.startswith("--"))
        close = difflib.get_close_matches(word.partition("=")[0], options, n=1, cutoff=0.7)
        return f"{word} (did you mean {close[0]}?)" if close else word

    def parse_known_args(  # type: ignore[override]  # typeshed overloads on namespace
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        args = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args([self._dashed(a) for a in args], namespace)

    def _dashed(self, arg):
        if not (isinstance(arg, str) and arg.startswith("--") and "_" in arg):
            return arg
        name, eq, value = arg.partition("=")
        dashed = name.replace("_", "-")
        if name not in self._option_string_actions and dashed in self._option_string_actions:
            return dashed + eq + value
        return arg


class CommandParser(Parser):
    """The parser of one command: options may come before, between or after its positional
    words (``train --state S MODEL --data-dir V "prefix='x_'" --max-updates 5``), as
    argparse's intermixed parsing reads them; a word it does not know is refused with this
    command's usage (the top-level parser would show its own)."""

    _intermixing = False

    def parse_known_args(  # type: ignore[override]  # typeshed overloads on namespace
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self._intermixing:  # the two passes of parse_known_intermixed_args
            return super().parse_known_args(args, namespace)
        args = sys.argv[1:] if args is None else [self._dashed(a) for a in args]
        self._intermixing = True
        try:
            namespace, extras = self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        assert namespace is not None  # argparse makes one when given none
        return namespace, extras


def selected_command(argv: Sequence[str]) -> str | None:
    """The command named in ``argv`` (the first word not an option), or None."""
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _VALUED_GLOBALS:
            skip = True
        elif not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def build_parser(commands: Collection[str] = COMMANDS) -> Parser:
    """The parser; only the modules of ``commands`` are imported and given their arguments
    (the others are listed with their help)."""
    parser = Parser(
        prog="groundhog-port",
        description="Run GroundHog (RNNsearch / RNNencdec) checkpoints in PyTorch, "
        "with the original score.py / sample.py behaviour.",
        epilog="exit codes: 0 success, 1 parity/comparison failure, 2 usage or input error, "
        "3 some sentences could not be translated",
    )
    _global_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CommandParser)
    for name in COMMANDS:
        if name not in commands:
            sub.add_parser(name, help=command_help(name))
            continue
        module = importlib.import_module(_module_name(name))
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        _global_options(p.add_argument_group("logging and threads"), suppress=True)
        p.set_defaults(_run=module.run)
    return parser


_CHANGE_KEY = re.compile(r"(?:^|[,(\s])([A-Za-z_][\w-]*)\s*=(?!=)\s*([^,\s]*)")


def _flags_in_changes(parser, args):
    """A change whose key is no state key but an option of this command (``beam_size=5``,
    ``beam-size=5``, ``normalize=True`` given to ``translate``): GroundHog would add it to the
    state and never read it, so the run would go on at the option's default.  One line naming
    the option to use, exit 2."""
    if not args.changes:
        return
    import legacy_states

    command = next(a for a in parser._actions if a.dest == "command").choices[args.command]
    flags = command._option_string_actions
    known = legacy_states.known_keys()
    for text in args.changes:
        try:
            pairs = list(legacy_states.parse_changes(text).items())
        except LegacyInputError:  # "beam-size=5" does not parse: its keys, as written
            pairs = [(k, v or None) for k, v in _CHANGE_KEY.findall(text) if "-" in k]
        for key, value in pairs:
            flag = "--" + key.replace("_", "-")
            if key in known or flag not in flags:
                continue
            action = flags[flag]
            if action.nargs == 0:  # a switch
                use = f"leave out {flag}" if value in (False, "False") else f"give {flag}"
            else:
                use = f"give {flag} {'VALUE' if value is None else value}"
            raise LegacyInputError(
                None,
                f"changes: {key!r} is not a state key but the option {flag} of "
                f"{args.command}: {use} (as a change it would be added to the state and "
                "never read)",
            )


def configure_logging(level: str, log_time: bool) -> None:
    logging.basicConfig(
        level=getattr(logging, level),
        stream=sys.stderr,
        format=("%(asctime)s " if log_time else "") + "%(levelname)s %(name)s: %(message)s",
    )


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled as Ctrl-C is: the partial output is kept for ``--resume``."""


def _on_sigterm(signum, frame):
    raise Terminated()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread (main() called from a thread): leave it
        pass
    argv = sys.argv[1:] if argv is None else list(argv)
    name = "groundhog-port"
    try:  # a signal while the command module is imported is an interruption too
        with signals_held():
            command = selected_command(argv)
            parser = build_parser((command,) if command else ())
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return EXIT_INPUT
        name = f"groundhog-port {args.command}"
        if hasattr(args, "changes_option"):  # the model and changes, given either way
            from .commands.common import model_and_changes

            model_and_changes(args)
            _flags_in_changes(parser, args)
        configure_logging(args.log_level, args.log_time)
        from ..distributed.world import SHARDED_COMMANDS, world_from_env
        from ..lookup import remembering

        if args.threads is not None:
            from ..legacy.experiment import set_threads

            set_threads(args.threads)
        if args.parse_budget_mib is not None:
            from ..budget import set_budget_mib

            set_budget_mib(args.parse_budget_mib)
        if args.command not in SHARDED_COMMANDS and world_from_env():
            raise LegacyInputError(
                None,
                f"'{args.command}' does not run under torchrun; only "
                f"{', '.join(SHARDED_COMMANDS)} are sharded",
            )
        with remembering():  # file choices said once per run, also when main() runs again
            return args._run(args)
    except LegacyInputError as err:
        print(f"{name}: error: {err}", file=sys.stderr)
        return EXIT_INPUT
    except (MemoryError, RuntimeError) as err:
        problem = allocation_failure(err)
        if problem is None:
            raise
        print(f"{name}: error: {problem}", file=sys.stderr)
        return EXIT_INPUT
    except Terminated:
        print(f"{name}: terminated", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return 130


def run() -> NoReturn:
    """The ``groundhog-port`` executable (and ``python -m groundhog_port``): :func:`main`,
    then the interpreter's exit without its last garbage collection.

    At exit Python tears the modules down and then collects every object still alive
    (``Py_FinalizeEx``); after ``import torch`` that collection walks torch's hundreds of
    thousands of objects: 0.30 s of a 0.43 s exit on this project's 2-core machine (median
    of 8, 2026-12-07: 0.43 s, 0.13 s with ``gc.freeze()``, 0.02 s with ``os._exit``),
    paid by every command after its work is done.  ``gc.freeze()`` moves every live object
    into the permanent generation, which collections skip.  Nothing else changes: objects
    are still freed by reference counting as the modules go, ``atexit`` handlers and
    thread joins run, streams are flushed and closed; only cyclic garbage left at exit
    stays unfinalised, which Python does not promise to finalise either.  (``os._exit``
    would skip all of that.)  Not in :func:`main`, which tests and embedders call in a
    process that goes on."""
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    run()
