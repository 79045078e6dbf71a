"""Every command-line option accounted for (issue 53, item 2): ``docs/flags.md`` is generated
by ``tools/flag_table.py`` from the parsers, and every option in it has a test in which it
changes a pinned output, or the reason it cannot change one.  A flag added to a parser
without a row fails here."""

import argparse
import importlib.util
import textwrap

import pytest

from parity_tests.support.cases import REPO


@pytest.fixture(scope="module")
def table():
    spec = importlib.util.spec_from_file_location("flag_table", REPO / "tools" / "flag_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_option_has_a_row_and_every_row_an_option(table):
    """No option of any parser lacks a row; no row names an option that is gone; every test
    row names tests that exist and give the option."""
    assert table.problems() == []


def test_a_flag_added_without_a_test_fails(table, monkeypatch):
    """The check can fail: a new option on ``translate``'s parser is named as missing."""
    from groundhog_port.cli.commands import translate

    add = translate.add_arguments

    def with_new_flag(parser):
        add(parser)
        parser.add_argument("--brand-new", action="store_true")

    monkeypatch.setattr(translate, "add_arguments", with_new_flag)
    assert table.problems() == ["translate --brand-new: no row in tools/flag_evidence.py"]


def test_a_row_whose_test_never_gives_the_option_fails(table, monkeypatch):
    """A test row must name a test that gives the option: pointing ``--n-best`` at a test
    of another option is named."""
    rows = dict(table.EVIDENCE)
    other = rows["bleu --lowercase"][1]
    rows["translate --n-best"] = (table.T, other)
    monkeypatch.setattr(table, "EVIDENCE", rows)
    assert table.problems() == [f"translate --n-best: {other[0]} never gives --n-best / --n_best"]


def test_the_ignored_patch_resets_the_option(table):
    """The mutation sweep's "option ignored" patch applies once, compiles, and makes the parsed
    value the default whatever was given (run on main.py's parse step, here with a parser of
    one command)."""
    flags = {f.key: f for f in table.all_flags()}
    for key in (
        "translate --beam-size",
        "groundhog-port --log-level",
        "beam_search.py --normalize",
    ):
        rel, old, new = table.ignored_patch(flags[key])
        source = (REPO / "groundhog_port" / rel).read_text(encoding="utf-8")
        assert source.count(old) == 1, key
        compile(source.replace(old, new), rel, "exec")
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("translate").add_argument("--beam-size", type=int, default=7)
    scope = {"parser": parser, "argv": ["translate", "--beam-size", "3"]}
    exec(textwrap.dedent(table.ignored_patch(flags["translate --beam-size"])[2]), scope)
    assert scope["args"].beam_size == 7


def test_docs_table_is_generated(table):
    """``docs/flags.md`` is what the tool writes (run ``python tools/flag_table.py --write``)."""
    assert (REPO / "docs" / "flags.md").read_text(encoding="utf-8") == table.table()
