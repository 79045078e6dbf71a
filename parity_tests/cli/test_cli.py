"""The command line against the original programs' recorded outputs.

The commands run in this process (``parity_tests/support/inprocess.py``: stdout and stderr captured at
the file descriptors, the exit status ``main`` returns, warnings as a process prints them), not in a
fresh ``python -m groundhog_port`` each: importing torch again costs seconds per call.  The
exit status of a real process is checked in test_hardening.py and test_resume.py.
"""

import io
import json
import logging
import sys

import pytest

from parity_tests.support.cases import FIXTURES, assert_scores_match, case_dirs
from parity_tests.support.command_lines import sample_py_args, score_py_args
from parity_tests.support.inprocess import run_cli as cli

pytestmark = pytest.mark.usefixtures("one_thread")


def _files(case):
    return next(case.glob("*_state.pkl")), next(case.glob("*_model.npz"))


def test_translate_fixture_is_byte_identical(tmp_path):
    F = FIXTURES / "search"
    out = tmp_path / "trans.txt"
    state, model = F / "search_state.pkl", F / "search_model.npz"
    r = cli(*sample_py_args(10, state, F / "test.en", out, model, "--batch-size", 1))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == (F / "trans_beam10.txt").read_bytes()
    # sample.py's retry warnings name the sentence (line 36 needs beam 80)
    for beam in (20, 40, 80):
        assert f"test.en, line 36: Still no translations: try beam size {beam}" in r.stderr
    total = float(r.stdout.strip().rsplit(" ", 1)[1])
    # sample.py printed "Total cost of the translations: 101.85478743498564"
    assert r.stdout.startswith("Total cost of the translations: ")
    assert abs(total - 101.85478743498564) <= 1e-6 * 101.85478743498564


@pytest.mark.parametrize("case", case_dirs(), ids=lambda p: p.name)
def test_score_batch_reproduces_score_py(case):
    state, model = _files(case)
    r = cli(*score_py_args(state, model, case / "test.en", case / "test.fr"))
    assert r.returncode == 0, r.stderr
    assert_scores_match(r.stdout, (case / "scores_batch.txt").read_text())
    holdout = case / "scores_batch_holdout.txt"
    if holdout.exists() and (case / "holdout.en").exists():
        r = cli(*score_py_args(state, model, case / "holdout.en", case / "holdout.fr"))
        assert_scores_match(r.stdout, holdout.read_text())


def test_search_variant_crash_line_is_empty_and_run_goes_on(tmp_path, legacy_root):
    """sample.py died on test line 36 (`hello`); the port writes an empty line, exit 3."""
    case = legacy_root / "search_variant"
    state, model = _files(case)
    out = tmp_path / "t.txt"
    r = cli(*sample_py_args(1, state, case / "test.en", out, model))
    assert r.returncode == 3, r.stderr
    lines = out.read_text(encoding="utf-8").split("\n")[:-1]
    recorded = (case / "trans_beam1.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(lines) == 40 and len(recorded) == 35
    assert lines[:35] == recorded and lines[35] == ""
    assert "line 36" in r.stderr and "kth(=512) out of bounds (321)" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("case", case_dirs(), ids=lambda p: p.name)
def test_inspect_reports_zero_missing_or_unknown(case):
    state, model = _files(case)
    r = cli("inspect", "--state", state, model, "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["checkpoint"]["problems"] == [] and rep["checkpoint"]["nonfinite"] == {}
    assert all(p["in_checkpoint"] for p in rep["parameters"])
    assert rep["architecture"]["search"] == case.name.startswith("search")
    assert (
        rep["data"]["word_indx"]["size"] == 201 and rep["data"]["indx_word_target"]["size"] == 321
    )


def test_inspect_text_report():
    F = FIXTURES / "search"
    r = cli("inspect", "--state", F / "search_state.pkl", F / "search_model.npz")
    assert r.returncode == 0, r.stderr
    assert "prototype   prototype_search_state" in r.stdout
    assert "annotation  forward + backward" in r.stdout
    assert "A_dec_transition_0" in r.stdout and "MISSING" not in r.stdout
    # the four vocabularies are found next to the state: one line says so (groundhog_port.lookup)
    resolved = [ln for ln in r.stderr.splitlines() if "groundhog_port.paths" in ln]
    assert len(resolved) == 1 and "next to the state file" in resolved[0], r.stderr
    # the training corpus is not in the fixture, and the report says that does not matter
    assert "source            NOT FOUND (the training corpus: not needed to inspect" in r.stdout


@pytest.mark.parametrize("command", ["inspect", "score", "translate", "bleu"])
def test_help(command):
    r = cli(command, "--help")
    assert r.returncode == 0 and "usage: groundhog-port " + command in r.stdout


@pytest.mark.parametrize(
    "args, problem",
    [
        (
            [
                "translate",
                "--n-samples",
                "3",
                "--state",
                FIXTURES / "search" / "search_state.pkl",
                FIXTURES / "search" / "search_model.npz",
            ],
            "batch form",
        ),
        (
            [
                "translate",
                "--beam-search",
                "--state",
                FIXTURES / "search" / "search_state.pkl",
                FIXTURES / "search" / "search_model.npz",
            ],
            "--beam-size",
        ),
        (
            ["score", "--mode", "batch", "--state", "/nonexistent/state.pkl", "m.npz"],
            "/nonexistent",
        ),
        (
            ["--threads", "0", "inspect", "--state", FIXTURES / "search" / "search_state.pkl"],
            "--threads must be at least 1",
        ),
    ],
)
def test_usage_errors_are_one_line(args, problem):
    r = cli(*args)
    assert r.returncode == 2
    assert problem in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_search_warnings_name_the_line_and_summarise(caplog):
    from groundhog_port.search.translator import SearchWarnings

    search_log = logging.getLogger("groundhog_port.search.literal")
    caplog.set_level(logging.INFO)
    with SearchWarnings("test.en") as w:
        w.first_line, w.current = 31, 5  # the literal search: sentence 5 of a chunk
        search_log.warning("Still no translations: try beam size %d", 20)
        # the batched search says which sentence of its chunk
        logging.getLogger("groundhog_port.search.batched").error(
            "Translation failed", extra={"sentence": 2}
        )
    search_log.warning("outside")  # removed on exit
    assert [r.getMessage() for r in caplog.records] == [
        "test.en, line 36: Still no translations: try beam size 20",
        "test.en, line 33: Translation failed",
        "outside",
    ]
    caplog.clear()
    with SearchWarnings("test.en (beam 10)", summarise=True) as w:
        for line, beams in ((36, (20, 40, 80)), (37, (20,))):
            w.current = line - 1
            for b in beams:
                search_log.warning("Still no translations: try beam size %d", b)
    assert caplog.records == []  # held back
    assert w.summary() == (
        "test.en (beam 10): the search's warnings (sample.py's) on 2 sentence(s): "
        "line 36 (3: 'Still no translations: try beam size 20' ... 'Still no translations: "
        "try beam size 80'), line 37 ('Still no translations: try beam size 20')"
    )


def test_progress_bar_moves_log_lines_above_itself(monkeypatch):
    from groundhog_port.outputs import Progress

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    handler = logging.StreamHandler(sys.stderr)  # as logging.basicConfig(stream=sys.stderr)
    logging.root.addHandler(handler)
    try:
        p = Progress(40, enabled=True)
        p.update(35)
        logging.getLogger("groundhog_port.test").warning("a warning")
        p.update(5)
        p.close()
    finally:
        logging.root.removeHandler(handler)
    # the bar is cleared before the record, which gets a line of its own
    pieces = err.getvalue().split("\r")
    assert "a warning\n" in pieces, pieces
    assert "40/40 [" in pieces[-1] and " sent/s]" in pieces[-1]


def test_score_txt_explains_inf_once_without_numpy_warnings(tmp_path):
    F = FIXTURES / "search"
    r = cli(
        "score",
        "--mode",
        "txt",
        "--src",
        F / "test.en",
        "--trg",
        F / "test.fr",
        "--allow-unk",
        "--state",
        F / "search_state.pkl",
        F / "search_model.npz",
    )
    assert r.returncode == 0, r.stderr
    scores = r.stdout.split()
    n_inf = scores.count("inf")
    assert len(scores) == 40 and n_inf > 0
    assert "RuntimeWarning" not in r.stderr
    notes = [ln for ln in r.stderr.splitlines() if "pairs score inf, as in the original" in ln]
    assert len(notes) == 1 and f": {n_inf} of 40 pairs score inf" in notes[0]


def test_empty_source_file_warns(tmp_path):
    F = FIXTURES / "search"
    empty = tmp_path / "empty.en"
    empty.write_text("")
    r = cli(
        "translate",
        "--beam-search",
        "--beam-size",
        2,
        "--state",
        F / "search_state.pkl",
        "--source",
        empty,
        "--trans",
        tmp_path / "t.txt",
        F / "search_model.npz",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Total cost of the translations: 0.0\n"  # as sample.py
    assert f"{empty} is empty: there is nothing to translate" in r.stderr
    assert (tmp_path / "t.txt").read_text() == ""
