"""One lookup of files for every command (:mod:`groundhog_port.lookup`, issue 26 item 2).

Archives as users keep them: state and model in one folder, vocabularies in others (so the
state's stored ``/data/lisatmp3/...`` paths fail), the test set renamed or kept in ``../data``.
Each test fails on the code before the shared lookup: ``--data-dir`` took one folder (a
second replaced the first), ``reproduce --case`` refused ``--source/--ref``, ``parity --case``
did not look in ``../data``, the pytest plugin had no data-directory option, the file choice
was logged once per file, and "pass a data directory" did not name ``--data-dir``.
"""

import json
import logging
import shutil

import pytest

from groundhog_port.errors import LegacyInputError
from groundhog_port.harness.check import find_case as parity_find_case
from groundhog_port.legacy.loading import open_experiment
from parity_tests.support.cases import FIXTURES, REPO
from parity_tests.support.command_lines import translate_args
from parity_tests.support.inprocess import run_cli
from parity_tests.support.nested_pytest import run_pytest

F = FIXTURES / "search"
SRC_VOCABS = ("vocab.en.pkl", "ivocab.en.pkl")
TRG_VOCABS = ("vocab.fr.pkl", "ivocab.fr.pkl")


def _split_archive(tmp_path, n_lines=3):
    """exp/ (state, model, a renamed 3-line test set), src_vocab/ and trg_vocab/."""
    exp, a, b = tmp_path / "exp", tmp_path / "src_vocab", tmp_path / "trg_vocab"
    for d in (exp, a, b):
        d.mkdir()
    for name in ("search_state.pkl", "search_model.npz"):
        shutil.copy(F / name, exp / name)
    for names, d in ((SRC_VOCABS, a), (TRG_VOCABS, b)):
        for name in names:
            shutil.copy(F / name, d / name)
    for name, new in (
        ("test.en", "newstest.en"),
        ("test.fr", "newstest.fr"),
        ("trans_beam10.txt", "trans_beam10.txt"),
    ):
        lines = (F / name).read_text(encoding="utf-8").splitlines(keepends=True)[:n_lines]
        (exp / new).write_text("".join(lines), encoding="utf-8")
    return exp, a, b


def _paths_lines(stderr):
    return [ln for ln in stderr.splitlines() if "groundhog_port.paths" in ln]


def test_data_dir_is_repeatable_and_searched_in_order(tmp_path):
    exp, a, b = _split_archive(tmp_path)
    out = tmp_path / "trans.txt"
    checkpoint = dict(state=exp / "search_state.pkl", model=exp / "search_model.npz")
    places = ("--data-dir", a, "--data-dir", b)
    r = run_cli(
        *translate_args(
            exp / "newstest.en", "--trans", out, *places, beam=10, batch=None, **checkpoint
        )
    )
    assert r.returncode == 0, r.stderr
    # the archived sample.py output, byte for byte
    assert out.read_bytes() == (exp / "trans_beam10.txt").read_bytes()
    # one line per folder chosen (two folders), not one per vocabulary (three files)
    lines = _paths_lines(r.stderr)
    assert len(lines) == 2, r.stderr
    assert str(a) in lines[0] and "--data-dir 1 of 2" in lines[0]
    assert str(b) in lines[1] and "--data-dir 2 of 2" in lines[1]


def test_first_data_dir_wins(tmp_path):
    exp, a, b = _split_archive(tmp_path)
    for name in SRC_VOCABS:
        shutil.copy(F / name, b / name)
    e = open_experiment(exp / "search_state.pkl", exp / "search_model.npz", data_dir=[b, a])
    assert e.path("word_indx") == b / "vocab.en.pkl"
    e = open_experiment(exp / "search_state.pkl", exp / "search_model.npz", data_dir=[a, b])
    assert e.path("word_indx") == a / "vocab.en.pkl"
    assert e.path("word_indx_trgt") == b / "vocab.fr.pkl"


def test_missing_file_names_data_dir(tmp_path):
    exp, a, _ = _split_archive(tmp_path)
    r = run_cli(
        "score",
        "--state",
        exp / "search_state.pkl",
        exp / "search_model.npz",
        "--data-dir",
        a,
        "--mode",
        "batch",
        "--src",
        exp / "newstest.en",
        "--trg",
        exp / "newstest.fr",
    )
    assert r.returncode == 2
    err = r.stderr.strip().splitlines()[-1]
    assert "cannot find the file for 'word_indx_trgt'" in err and "--data-dir DIR" in err, err
    assert "Traceback" not in r.stderr
    # a data directory that is not one fails before anything is loaded
    from groundhog_port import lookup

    with pytest.raises(LegacyInputError, match="--data-dir"):
        lookup.data_dirs([a, tmp_path / "nope"])


def test_each_choice_logged_once_per_run(tmp_path, caplog):
    """Said once per run (``lookup.remembering``: ``main()`` opens one per command, the
    archive one per tree), and again in the next run: nothing is kept in the process."""
    from groundhog_port import lookup

    exp, a, b = _split_archive(tmp_path)
    caplog.set_level(logging.INFO, logger="groundhog_port.paths")

    def infos():
        return [
            r
            for r in caplog.records
            if r.name == "groundhog_port.paths" and r.levelno == logging.INFO
        ]

    for run in range(2):
        with lookup.remembering():
            for _ in range(2):  # a command opening the experiment twice (reproduce, archive)
                e = open_experiment(
                    exp / "search_state.pkl", exp / "search_model.npz", data_dir=[a, b]
                )
                for key in ("word_indx", "indx_word", "word_indx_trgt", "indx_word_target"):
                    e.path(key)
        assert len(infos()) == 2 * (run + 1), [r.getMessage() for r in infos()]


def test_said_once_per_run_and_walked_once_per_run(tmp_path, caplog):
    """A name over the largest beam sample.py searched is warned once per run; a folder's
    walk is remembered within a run (a file added later is not seen) and forgotten after."""
    from groundhog_port import lookup
    from groundhog_port.tasks.reproduce import parse_trans_name

    caplog.set_level(logging.WARNING)
    for run in range(2):
        with lookup.remembering():
            assert parse_trans_name("trans_beam7000.txt") is None
            assert parse_trans_name("trans_beam7000.txt") is None
        said = [r for r in caplog.records if "more than the" in r.getMessage()]
        assert len(said) == run + 1
    (tmp_path / "a.txt").write_text("a\n")
    with lookup.remembering() as memo:
        assert lookup.files_named(tmp_path, "b.txt") == []
        (tmp_path / "b.txt").write_text("b\n")
        assert lookup.files_named(tmp_path, "b.txt") == []  # walked once per run
        assert memo.walks
    assert lookup.files_named(tmp_path, "b.txt") == [tmp_path / "b.txt"]


def test_reproduce_case_takes_source_and_ref(tmp_path):
    exp, a, b = _split_archive(tmp_path)
    r = run_cli(
        "reproduce",
        "--case",
        exp,
        "--data-dir",
        a,
        "--data-dir",
        b,
        "--source",
        exp / "newstest.en",
        "--ref",
        exp / "newstest.fr",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    [f] = rep["files"]
    assert f["file"] == "trans_beam10.txt" and f["identical"] == 3 and f["all_identical"]
    assert f["source"] == str(exp / "newstest.en") and f["reference"] == str(exp / "newstest.fr")
    # without --source the renamed test set is found by content (issue 35), said once
    r = run_cli("reproduce", "--case", exp, "--data-dir", a, "--data-dir", b, "--json")
    assert r.returncode == 0, r.stderr
    [f] = json.loads(r.stdout)["files"]
    assert f["source"] == str(exp / "newstest.en") and f["reference"] == str(exp / "newstest.fr")
    assert r.stderr.count(f"source {exp / 'newstest.en'} (in the experiment folder") == 1


def _case_without_test_files(legacy_root, tmp_path):
    """A copy of the search case whose test files sit only in ``../data``."""
    case, data = tmp_path / "search", tmp_path / "data"
    case.mkdir()
    data.mkdir()
    for p in (legacy_root / "search").iterdir():
        if p.name not in ("test.en", "test.fr"):
            (case / p.name).symlink_to(p)
    for name in ("test.en", "test.fr"):
        (data / name).symlink_to(legacy_root / "search" / name)
    return case, data


def test_parity_case_looks_in_sibling_data(legacy_root, tmp_path):
    case, data = _case_without_test_files(legacy_root, tmp_path)
    r = run_cli("parity", "--case", case, "--only", "batch")  # needs test.en and test.fr
    assert r.returncode == 0, r.stdout + r.stderr
    assert "batch/scores" in r.stdout and "PASS" in r.stdout
    from groundhog_port import lookup

    files = parity_find_case(case, data_dirs=lookup.case_data_dirs(case))
    assert files.source == data / "test.en" and files.target == data / "test.fr"


def test_pytest_plugin_takes_a_data_dir(legacy_root, tmp_path):
    """``--legacy-data-dir``: ``kept/`` finds its vocabularies in ``vocab/``; ``lost/``, whose
    vocabularies are nowhere, fails with the lookup's one line (no traceback).  One pytest
    run for both (each run imports torch)."""
    vocab = tmp_path / "vocab"
    vocab.mkdir()
    for name in ("kept", "lost"):
        (tmp_path / name).mkdir()
    for p in (legacy_root / "search").iterdir():
        if "vocab" in p.name:
            (vocab / p.name).symlink_to(p)
        else:
            for name in ("kept", "lost"):
                (tmp_path / name / p.name).symlink_to(p)
    # lost/'s state names other vocabulary files: none of the places holds them
    state = (legacy_root / "search" / "search_state.pkl").read_bytes()
    (tmp_path / "lost" / "search_state.pkl").unlink()
    (tmp_path / "lost" / "search_state.pkl").write_bytes(
        state.replace(b"vocab.en.pkl", b"vocab.xx.pkl")
    )
    out = run_pytest(
        REPO / "parity_tests" / "parity" / "test_legacy_cases.py",
        "-k",
        "repr",
        "--legacy-case",
        tmp_path / "kept",
        "--legacy-case",
        tmp_path / "lost",
        "--legacy-data-dir",
        vocab,
        "-rA",
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert (
        "PASSED parity_tests/parity/test_legacy_cases.py::test_parity[kept-repr]" in out.stdout
    ), out.stdout
    assert "1 failed, 1 passed" in out.stdout, out.stdout
    # the failure section is the lookup's message, on one line
    section = out.stdout.split("test_parity[lost-repr] _", 1)[1].split("=" * 10, 1)[0]
    [line] = [ln for ln in section.splitlines() if ln.strip() and not ln.startswith("_")]
    assert line.startswith("lost: ") and "cannot find the file for 'word_indx'" in line, section
    assert "vocab.xx.pkl" in line and str(vocab) in line, section
    assert "--legacy-data-dir DIR" in line and "--data-dir DIR" in line, section
