"""The claims table of docs/fidelity.md (issue 53, item 4): every row says byte-identical or
within which bound, and names a command that checks it; each command parses with the port's
own parser (a renamed flag or group fails here), its placeholders filled with a case."""

import re
import shlex

from groundhog_port.cli.main import build_parser
from parity_tests.support.cases import REPO

CLAIMS = ("byte-identical", "within bound", "sacrebleu's own figure")


def _rows():
    text = (REPO / "docs" / "fidelity.md").read_text(encoding="utf-8")
    table = text.split("| what the user gets | claim | bound | checked by |", 1)[1]
    rows = []
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def test_every_claim_names_a_command_that_parses(tmp_path):
    rows = _rows()
    assert len(rows) >= 10
    for what, claim, bound, command in rows:
        assert claim in CLAIMS, what
        assert (bound == "-") == (claim != "within bound"), what
        (cmd,) = re.findall(r"`groundhog-port ([^`]+)`", command)
        argv = [
            {"DIR": str(tmp_path), "ROOT": str(tmp_path), "OUT": str(tmp_path / "o")}.get(w, w)
            for w in shlex.split(cmd)
        ]
        assert _problems(argv) == [], command


def _problems(argv):
    """What is wrong with ``groundhog-port ARGV``: a flag the parser lacks (it exits), a
    word taken as a model or a state change (the table's commands give neither), a parity
    group that does not exist."""
    from groundhog_port.cli.commands.parity import CASE_GROUPS, GROUPS

    try:
        args = build_parser().parse_args(argv)
    except SystemExit:
        return ["does not parse"]
    words = [getattr(args, "model_path", None), *getattr(args, "changes", [])]
    out = [f"stray word {w!r}" for w in words if w is not None]
    groups = ",".join(getattr(args, "only", None) or []).split(",")
    out += [f"no group {g!r}" for g in groups if g and g not in (*GROUPS, *CASE_GROUPS)]
    return out


def test_a_stale_command_fails():
    """The check can fail: a flag, a group or a second group given as a word is named."""
    assert _problems(["parity", "--case", "x", "--onyl", "repr"]) == ["does not parse"]
    assert _problems(["parity", "--case", "x", "--only", "beams"]) == ["no group 'beams'"]
    assert _problems(["parity", "--case", "x", "--only", "repr", "pairs"]) == ["stray word 'pairs'"]
