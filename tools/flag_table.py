"""Every option of every command, with the test that shows it matters: ``docs/flags.md``
(issue 53, item 2).

The options are read from the parsers, never typed in: every command of
``groundhog_port.cli.main.build_parser`` (its options and positional words), the global
options, and the exported driver ``export/beam_search.py``.  Each needs one row of
:data:`EVIDENCE`:

* **test**: pytest node ids (under ``parity_tests/``) in which the option changes an output
  a user sees and that output is pinned (to a recording, a derivation, sacrebleu's CLI, the
  original's code path cited in the test).  ``python tools/mutation_sweep.py --flags`` proves
  each row: its "option ignored" mutation resets the option to its default right after the
  parser ran (:func:`ignored_patch`: the value never reaches the code), and one of the named
  tests must then fail;
* **inert**: why the option cannot change an output (``--progress`` draws on stderr only);
* **untested**: no test shows it yet (issue 53 stays open while any row is): what one needs.

``parity_tests/packaging/test_flag_table.py`` fails when an option has no row (a flag added to
a parser without its test), when a row names an option no parser has, when a named test
does not exist or does not give the option, or when ``docs/flags.md`` is not what this writes.

    python tools/flag_table.py --write         # docs/flags.md
    python tools/flag_table.py --missing       # the options without a row
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))

from flag_evidence import EVIDENCE, T  # noqa: E402  (the rows: a long table of their own)

DOC = REPO / "docs" / "flags.md"
TESTS = REPO / "parity_tests"
#: the exported driver's name in the table (it is run as ``python beam_search.py``)
DRIVER = "beam_search.py"
#: what a row of the global options is keyed by
GLOBAL = "groundhog-port"


class Flag(NamedTuple):
    """One option of one parser: ``command`` (:data:`GLOBAL` for the global options,
    :data:`DRIVER` for the exported driver), ``name`` (its first long option string, or the
    metavar of a positional word), ``options`` (all its option strings), ``dest`` and
    ``default``."""

    command: str
    name: str
    options: tuple[str, ...]
    dest: str
    default: object

    @property
    def key(self) -> str:
        return f"{self.command} {self.name}"


def _name(action: argparse.Action) -> str:
    longs = [o for o in action.option_strings if o.startswith("--")]
    if longs or action.option_strings:
        return (longs or action.option_strings)[0]
    return str(action.metavar or action.dest).upper()


def _flags_of(command: str, parser: argparse.ArgumentParser, skip: set[str]) -> list[Flag]:
    out = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.dest in skip:
            continue
        default = parser.get_default(action.dest)
        out.append(Flag(command, _name(action), tuple(action.option_strings), action.dest, default))
    return out


def all_flags() -> list[Flag]:
    """Every option of every parser, in the parsers' order."""
    from groundhog_port.cli.main import COMMANDS, build_parser
    from groundhog_port.export import beam_search

    top = build_parser(COMMANDS)
    out = _flags_of(GLOBAL, top, {"command"})
    globals_ = {f.dest for f in out}
    sub = next(a for a in top._actions if a.dest == "command")
    for name in COMMANDS:
        out += _flags_of(name, sub.choices[name], globals_)
    return out + _flags_of(DRIVER, beam_search.build_parser(), set())


# ----------------------------------------------------------------------------------------
# the "option ignored" mutation
# ----------------------------------------------------------------------------------------
_MAIN_PARSE = "        args = parser.parse_args(argv)\n"
_DRIVER_PARSE = "    args = p.parse_args(argv)\n"


def ignored_patch(flag: Flag) -> tuple[str, str, str]:
    """``(file under groundhog_port/, old, new)``: the option reset to its parser's default
    right after parsing, so that what the user gave never reaches the command."""
    note = f"  # mutation: {flag.key} ignored\n"
    if flag.command == DRIVER:
        new = _DRIVER_PARSE + f"    args.{flag.dest} = p.get_default({flag.dest!r}){note}"
        return "export/beam_search.py", _DRIVER_PARSE, new
    if flag.command == GLOBAL:
        reset = f"        args.{flag.dest} = parser.get_default({flag.dest!r}){note}"
    else:
        reset = (
            f"        if args.command == {flag.command!r}:{note}"
            f"            args.{flag.dest} = next(a for a in parser._actions if a.dest == "
            f'"command").choices[{flag.command!r}].get_default({flag.dest!r})\n'
        )
    return "cli/main.py", _MAIN_PARSE, _MAIN_PARSE + reset


# ----------------------------------------------------------------------------------------
# the evidence
# ----------------------------------------------------------------------------------------
def _test_source(node: str) -> str | None:
    """The source of the test function a pytest node id names (its parameters dropped), with
    its decorators and the module-level tables it names."""
    path, _, name = node.partition("::")
    name = name.split("[", 1)[0]
    file = TESTS / path
    if not file.is_file():
        return None
    text = file.read_text(encoding="utf-8")
    lines = text.splitlines()
    module = ast.parse(text)
    for fn in module.body:
        if isinstance(fn, ast.FunctionDef) and fn.name == name:
            first = min([fn.lineno] + [d.lineno for d in fn.decorator_list])  # with its parameters
            used = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
            # and the module's tables it uses (``FORMS``: the argument lists it is run with)
            tables = [
                "\n".join(lines[a.lineno - 1 : a.end_lineno])
                for a in module.body
                if isinstance(a, ast.Assign)
                and any(isinstance(x, ast.Name) and x.id in used for x in a.targets)
            ]
            return "\n".join([*lines[first - 1 : fn.end_lineno], *tables])
    return None


def spellings(flag: Flag) -> tuple[str, ...]:
    """How a test gives the option: one of its option strings (GroundHog's underscore form
    too); a positional word has none (nothing to look for: the mutation sweep proves it)."""
    return flag.options + tuple(
        "--" + o[2:].replace("-", "_") for o in flag.options if "-" in o[2:]
    )


def _given(spelling: str) -> str:
    """A pattern for ``spelling`` as a whole word (``-b`` is not found in ``-bx``)."""
    return r"(?<![\w-])" + re.escape(spelling) + r"(?![\w-])"


def problems() -> list[str]:
    """Every way the table is wrong: an option without a row, a row without an option, a
    test row naming a test that does not exist or never mentions the option."""
    flags = {f.key: f for f in all_flags()}
    out = [f"{k}: no row in tools/flag_evidence.py" for k in flags if k not in EVIDENCE]
    out += [f"{k}: no parser has this option" for k in EVIDENCE if k not in flags]
    for key, (kind, what) in EVIDENCE.items():
        if kind != T or key not in flags:
            continue
        for node in what:
            source = _test_source(node)
            if source is None:
                out.append(f"{key}: {node} does not exist")
            elif flags[key].options and not any(
                re.search(_given(s), source) for s in spellings(flags[key])
            ):
                out.append(f"{key}: {node} never gives {' / '.join(spellings(flags[key]))}")
    return out


def _counts() -> dict[str, int]:
    kinds = [EVIDENCE.get(f.key, ("MISSING",))[0] for f in all_flags()]
    return {k: kinds.count(k) for k in set(kinds)}


def table() -> str:
    lines = [
        "# Command-line options",
        "",
        "Every option of every command (`groundhog-port COMMAND`, the global options, the",
        "exported driver `beam_search.py`), read from the parsers, with the **test** in which it",
        "changes an output that is pinned, or why it is **inert** (cannot change an output).",
        "Generated by `python tools/flag_table.py --write`;",
        "`parity_tests/packaging/test_flag_table.py` fails when an option has no row.",
        "`python tools/mutation_sweep.py --flags` proves the test rows: each option is reset to",
        'its default right after parsing ("option ignored") and a named test must fail.',
        "",
        "Rows: "
        + ", ".join(f"{n} {kind}" for kind, n in sorted(_counts().items()))
        + f" (of {len(all_flags())} options).",
        "",
        "| command | option | default | evidence |",
        "|---|---|---|---|",
    ]
    for f in all_flags():
        kind, what = EVIDENCE.get(f.key, ("MISSING", "no row"))
        shown = ", ".join(f"`{n}`" for n in what) if kind == T else str(what)
        # a path in this checkout (the driver's own folder) is shown relative to it
        shown_default = repr(f.default).replace(str(REPO) + "/", "")
        default = "-" if f.default is None else f"`{shown_default}`"
        lines.append(
            f"| {f.command} | `{f.name}` | {default.replace('|', '/')} "
            f"| {kind}: {shown.replace('|', '/')} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--write", action="store_true", help=f"write {DOC.relative_to(REPO)}")
    p.add_argument("--missing", action="store_true", help="list the table's problems only")
    args = p.parse_args(argv)
    found = problems()
    if args.missing:
        print("\n".join(found))
    elif args.write:
        DOC.write_text(table(), encoding="utf-8")
    else:
        sys.stdout.write(table())
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
