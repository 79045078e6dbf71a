"""The options every command takes (``cli/main.py``'s global options), given on the command
line (issue 53, item 2; ``tools/flag_table.py``)."""

from parity_tests.support.inprocess import run_cli


def test_parse_budget_mib_bounds_what_a_file_may_take(tmp_path, monkeypatch):
    """``--parse-budget-mib 1``: a 3 MiB text file is refused in one line naming the limit
    (the default, 256 MiB, reads it).  The flag sets the process's budget: restored after
    (monkeypatch), or every later test of this process would run under 1 MiB."""
    from groundhog_port import budget

    monkeypatch.setattr(budget, "_chosen_mib", budget._chosen_mib)
    text = tmp_path / "big.txt"
    line = "the cat sat on the mat " * 20 + "\n"
    text.write_text(line * (3 * 2**20 // len(line)), encoding="utf-8")
    r = run_cli("bleu", "--hyp", text, "--ref", text)
    assert r.returncode == 0, r.stderr
    r = run_cli("--parse-budget-mib", "1", "bleu", "--hyp", text, "--ref", text)
    assert r.returncode == 2 and "budget" in r.stderr and "Traceback" not in r.stderr, r.stderr
