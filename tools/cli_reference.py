"""The command-line reference of the documentation site, generated from the argparse parsers.

`mkdocs.yml` names this file as a hook: the page ``docs/cli.md`` holds the marker
``<!-- cli-reference -->``, which is replaced at build time by every command's ``--help`` (as
``groundhog-port COMMAND --help`` prints it, at 100 columns), so the reference cannot drift from
the code.  ``parity_tests/packaging/test_docs.py`` checks the built page against the parsers.
"""

from __future__ import annotations

import os

MARKER = "<!-- cli-reference -->"
#: argparse wraps help to $COLUMNS; fixed so that the page does not depend on the terminal
COLUMNS = "100"


def command_help(name: str | None) -> str:
    """What ``groundhog-port [NAME] --help`` prints (the top level for ``None``)."""
    from groundhog_port.cli.main import COMMANDS, build_parser

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = COLUMNS
    try:
        parser = build_parser(COMMANDS if name is None else (name,))
        if name is None:
            return parser.format_help()
        sub = next(a for a in parser._actions if a.dest == "command")
        return sub.choices[name].format_help()
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def render() -> str:
    """The Markdown of the reference: the top-level help, then one section per command."""
    from groundhog_port.cli.main import COMMANDS

    parts = ["### groundhog-port\n", "```text\n" + command_help(None) + "```\n"]
    for name in COMMANDS:
        parts += [f"### {name}\n", "```text\n" + command_help(name) + "```\n"]
    return "\n".join(parts)


def on_page_markdown(markdown: str, page, config, files) -> str:  # mkdocs hook
    if MARKER in markdown:
        return markdown.replace(MARKER, render())
    return markdown
