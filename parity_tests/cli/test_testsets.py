"""Test sets found by content, and archive's messages (issue 35, item 2 and its frictions).

An archive as people keep them (:func:`parity_tests.support.archive.build_user_archive`, copies
of the shared recordings): states and models renamed ``run3_*``, the vocabularies once in
``vocab/``, the test set once as ``data/newstest2012.{en,fr}``, a crashed run, a test set two
levels up.  ``archive ROOT --out DIR`` re-does it with nothing copied and no option, every
translation file identical to the archived one; ``reproduce --case`` on each experiment
writes the archived files byte for byte; a missing vocabulary folder or test set is one
warning per experiment whose fix, followed, works.
"""

import json
import os
import re
import shutil

import pytest

from groundhog_port import lookup
from groundhog_port.harness.check import find_case as parity_find_case
from groundhog_port.legacy.loading import open_experiment
from groundhog_port.search.scoring import batches_for, score_batch
from parity_tests.cli.test_cli_interface import ENV, probe
from parity_tests.support.archive import build_user_archive, tree_digest
from parity_tests.support.inprocess import run_cli


def _lines(path):
    return path.read_text(encoding="utf-8").splitlines()


def _not_done_warnings(stderr):
    return [ln for ln in stderr.splitlines() if ln.startswith("WARNING") and "not done" in ln]


@pytest.fixture(scope="module")
def user_archive(legacy_root, tmp_path_factory):
    root = tmp_path_factory.mktemp("archive") / "wmt14"
    experiments = build_user_archive(legacy_root, root)
    before = tree_digest(root)
    out = tmp_path_factory.mktemp("report")
    r = run_cli("archive", root, "--out", out, "--plots", "0")
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    return {
        "root": root,
        "experiments": experiments,
        "before": before,
        "run": r,
        "report": report,
        "by_folder": {e["folder"]: e for e in report["experiments"]},
    }


def test_user_archive_redone_with_nothing_copied(user_archive):
    """One ``archive ROOT --out DIR``, no --data-dir: every translation file identical (all
    its lines), the crashed run's 35 lines and its crash, exit 0, the archive untouched."""
    a, r = user_archive, user_archive["run"]
    assert r.returncode == 0, r.stderr
    assert tree_digest(a["root"]) == a["before"]
    assert sorted(a["by_folder"]) == sorted(a["experiments"])
    for folder, (_, trans) in a["experiments"].items():
        e = a["by_folder"][folder]
        assert e["not_done"] == [], e["not_done"]
        assert e["files"]["word_indx"] == "vocab/vocab.en.pkl"
        assert e["files"]["test"]["source"] == "data/newstest2012.en"
        assert e["files"]["test"]["reference"] == "data/newstest2012.fr"
        assert sorted(row["file"] for row in e["reproduction"]) == sorted(trans)
        for row in e["reproduction"]:
            archived = _lines(a["root"] / folder / row["file"])
            assert row["identical"] == row["compared"] == len(archived), (folder, row)
            assert row["source"] == "data/newstest2012.en"
    crashed = a["by_folder"]["rnnsearch_big"]["reproduction"][0]
    assert crashed["original_stopped_after"] == 35 and crashed["crash_reproduced"]
    s = a["report"]["summary"]
    assert (s["trans_files"], s["trans_files_identical"], s["not_done"]) == (6, 6, 0)


def test_choice_said_once_per_experiment(user_archive):
    """Which file was taken and why: one line per experiment, naming every file it serves."""
    said = [ln for ln in user_archive["run"].stderr.splitlines() if "source " in ln]
    assert len(said) == 5, said
    search = next(ln for ln in said if "rnnsearch/run3_: " in ln)
    assert "trans_beam1.txt, trans_beam10_normalize.txt: source " in search
    assert "data/newstest2012.en (under the archive ROOT; 40 lines" in search
    assert "its first lines give the archived ones with beam 1" in search
    assert "reference " in search and "newstest2012.fr (the same stem" in search
    scored = next(ln for ln in said if "rnnencdec_scored/run3_: " in ln)
    assert (
        "newstest2012.en (under the archive ROOT; 40 lines, as many as scores_batch.txt" in scored
    )
    assert "scored as score.py --mode=batch --allow-unk (within print noise)" in scored
    crashed = next(ln for ln in said if "rnnsearch_big/run3_: " in ln)
    assert "40 lines, trans_beam5.txt 35: the original stopped early" in crashed
    assert "(sample_beam5_error.txt)" in crashed


def test_headline_says_within_print_noise(user_archive):
    """score.py's lines differ from the port's as text (37/40 identical as printed) but lie
    within parity's batch/scores bounds: the headline says so instead of "0/1 identical".
    The score file without a translation beside it is re-scored on the test set found by
    its content."""
    [sc] = user_archive["by_folder"]["rnnsearch"]["scores"]
    assert sc["identical"] < sc["compared"] == 40 and sc["within_print_noise"] is True
    [sc] = user_archive["by_folder"]["rnnencdec_scored"]["scores"]
    assert sc["compared"] == 40 and sc["within_print_noise"] is True
    assert "data/newstest2012.en / data/newstest2012.fr" in sc["how"]
    out = user_archive["run"].stdout
    assert "2/2 score files within print noise" in out
    assert "score files identical" not in out


def test_reproduce_case_writes_the_archived_files(user_archive, tmp_path):
    """``reproduce --case`` on each experiment, the vocabularies through --data-dir or, for
    every other one, without (the only vocab.en.pkl two levels up): exit 0, and the
    translations it writes are the archived files (the crashed one: the 35 lines the original
    wrote)."""
    root = user_archive["root"]
    for i, (folder, (_, trans)) in enumerate(user_archive["experiments"].items()):
        if not trans:
            continue
        save = tmp_path / folder
        given = ("--data-dir", root / "vocab") if i % 2 else ()
        r = run_cli("reproduce", "--case", root / folder, *given, "--save-dir", save)
        assert r.returncode == 0, r.stderr
        if not given:
            assert f"taken from {root / 'vocab'} (under ../.. (the only vocab.en.pkl" in r.stderr
        for name in trans:
            archived = (root / folder / name).read_bytes()
            written = (save / name).read_bytes()
            if folder == "rnnsearch_big":
                n = len(archived.splitlines())
                assert written.splitlines()[:n] == archived.splitlines() and n == 35
            else:
                assert written == archived, (folder, name)


def test_parity_case_finds_a_renamed_test_set(legacy_root, tmp_path):
    """``parity --case`` (and the pytest plugin, which calls the same find_case): a test set
    renamed, kept in ../data, found by the trace's recorded lines."""
    case, data = tmp_path / "search", tmp_path / "data"
    case.mkdir()
    data.mkdir()
    for p in (legacy_root / "search").iterdir():
        if p.name not in ("test.en", "test.fr"):
            shutil.copyfile(p, case / p.name)
    for lang in ("en", "fr"):
        shutil.copyfile(legacy_root / "search" / f"test.{lang}", data / f"newstest2012.{lang}")
    files = parity_find_case(case, data_dirs=lookup.case_data_dirs(case))
    assert (files.source, files.target) == (data / "newstest2012.en", data / "newstest2012.fr")
    r = run_cli("parity", "--case", case, "--only", "batch")
    assert r.returncode == 0, r.stderr
    assert "batch/scores" in r.stdout and "FAIL" not in r.stdout
    # kept elsewhere: said, with the fix; following it works
    kept = tmp_path / "kept"
    data.rename(kept)
    r = run_cli("parity", "--case", case, "--only", "batch")
    assert r.returncode == 2, r.stderr
    assert "cannot find the source of the trace's test sources (40 lines)" in r.stderr
    assert "pass --source FILE --target FILE, or --data-dir DIR (the folder holding it)" in r.stderr
    r = run_cli("parity", "--case", case, "--only", "batch", "--data-dir", kept)
    assert r.returncode == 0, r.stderr


def test_missing_model_is_the_only_thing_not_done(legacy_root, tmp_path):
    root = tmp_path / "wmt14"
    build_user_archive(legacy_root, root, missing_model=True, only=("rnnencdec",))
    r = run_cli("archive", root, "--out", tmp_path / "r", "--max-sentences", "2")
    assert r.returncode == 1, r.stderr
    [warning] = _not_done_warnings(r.stderr)
    assert "missing/run1_: not done: everything: no *model.npz beside the state" in warning
    assert "2/2 translation files identical" in r.stdout and "1 not done" in r.stdout
    assert "no score files" in r.stdout


def test_one_warning_per_cause_and_each_hint_works(legacy_root, tmp_path):
    """The vocabularies, then the test set, kept outside ROOT: one warning per experiment
    (not one per file and check), and following each fix it gives makes the run pass."""
    top = tmp_path / "kept"
    root = top / "wmt14"
    build_user_archive(legacy_root, root, only=("rnnsearch", "rnnencdec"))
    (root / "vocab").rename(top / "vocab")
    (root / "data").rename(top / "data")
    run = lambda *extra: run_cli(
        "archive", root, "--out", tmp_path / "r", "--max-sentences", "2", "--plots", "0", *extra
    )
    r = run()
    warnings = _not_done_warnings(r.stderr)
    assert r.returncode == 1 and len(warnings) == 2, r.stderr
    for w in warnings:
        assert "vocabularies not found: vocab.en.pkl, ivocab.en.pkl, vocab.fr.pkl" in w
        # the three ways to say where: a folder, the state's keys, the plan's lines
        assert "pass --data-dir DIR, the folder holding them, --changes \"word_indx='FILE'," in w
        assert w.endswith('word_indx = "PATH", indx_word = "PATH", word_indx_trgt = "PATH", '
                          'indx_word_target = "PATH" in the plan')  # fmt: skip
    vocab = ("--data-dir", top / "vocab")
    r = run(*vocab)
    warnings = _not_done_warnings(r.stderr)
    assert r.returncode == 1 and len(warnings) == 2, r.stderr
    search = next(w for w in warnings if "rnnsearch/run3_" in w)
    # the score file's test set is the same cause: named in the same line
    assert "not done: trans_beam1.txt, trans_beam10_normalize.txt, scores_batch.txt: " in search
    assert "no text file there has 40 lines or more" in search
    fix = re.search(r"pass --source FILE --ref FILE .*, a line '(.*)' in --test-sets FILE", search)
    assert fix and fix.group(1) == "rnnsearch SOURCE REFERENCE" and "--data-dir DIR" in search
    src, ref = top / "data" / "newstest2012.en", top / "data" / "newstest2012.fr"
    mapping = tmp_path / "test_sets.txt"
    mapping.write_text(
        "# FOLDER SOURCE [REFERENCE]\n"
        "rnnsearch kept/data/newstest2012.en kept/data/newstest2012.fr\n"
        f"rnnencdec {src}  # the reference: the same stem in .fr\n",
        encoding="utf-8",
    )
    for extra in (
        ("--data-dir", top / "data"),
        ("--source", src, "--ref", ref),
        ("--test-sets", mapping),
    ):
        r = run(*vocab, *extra)
        assert r.returncode == 0 and _not_done_warnings(r.stderr) == [], (extra, r.stderr)
        assert "4/4 translation files identical" in r.stdout


def test_data_dir_count_names_only_the_given_ones(tmp_path):
    """``(--data-dir 1 of 3)`` was printed for one --data-dir (the case folder and its
    ../data were counted)."""
    case, data, given = tmp_path / "case", tmp_path / "data", tmp_path / "vocab"
    for d in (case, data, given):
        d.mkdir()
    dirs = lookup.case_data_dirs(case, [given])
    labels = [where for _, where in lookup.candidates("vocab.en.pkl", None, dirs)]
    assert labels == [
        "--data-dir",
        "in the experiment folder",
        "in the experiment folder's ../data",
    ]
    two = lookup.case_data_dirs(case, [given, data])
    labels = [where for _, where in lookup.candidates("vocab.en.pkl", None, two)]
    assert labels == ["--data-dir 1 of 2", "--data-dir 2 of 2", "in the experiment folder"]


def test_root_typo_says_no_such_folder(tmp_path):
    r = run_cli("archive", tmp_path / "wmt41", "--out", tmp_path / "r")
    assert r.returncode == 2 and "wmt41: no such folder (ROOT)" in r.stderr, r.stderr
    assert "no experiment" not in r.stderr


def test_archive_without_matplotlib_skips_plots_with_one_warning(legacy_root, tmp_path):
    root = tmp_path / "wmt14"
    build_user_archive(legacy_root, root, only=("rnnsearch",))
    out = tmp_path / "r"
    r, _ = probe(
        "archive",
        root,
        "--out",
        out,
        "--max-sentences",
        "2",
        env={**ENV, "HIDE_MODULES": "matplotlib"},
    )
    assert r.returncode == 0, r.stderr
    skipped = [ln for ln in r.stderr.splitlines() if "plots" in ln]
    assert (
        len(skipped) == 1 and "attention plots skipped: matplotlib is not installed" in skipped[0]
    )
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["summary"]["plots"] == 0 and report["summary"]["trans_files_identical"] == 2


def test_print_noise_is_parity_bound(legacy_root):
    """The archive's "within print noise" is parity's batch/scores bound plus half a unit of
    the printed digit: score.py's own file passes, a line moved by 5 units of its last printed
    digit (far beyond float32 noise on 10-word sentences) does not."""
    from groundhog_port.harness.print_noise import PrintNoise

    case = legacy_root / "search"
    exp = open_experiment(case / "search_state.pkl", case / "search_model.npz", data_dir=case)
    archived = _lines(case / "scores_batch.txt")
    batches = list(batches_for(exp, case / "test.en", case / "test.fr", True))

    def judge(lines):
        noise, first = PrintNoise(exp), 0
        for b in batches:
            n = len(score_batch(exp.model, b).cost)
            noise.add(b, lines[first : first + n], first)
            first += n
        return noise.ok()

    assert judge(archived)
    mantissa, exponent = archived[0].split("e")
    moved = f"{float(mantissa) + 5e-5:.5f}e{exponent}"
    assert not judge([moved, *archived[1:]])


def test_holdout_hints_name_what_serves_a_holdout_set(legacy_root, tmp_path):
    """A holdout translation whose source is kept elsewhere: the hints say what works for a
    holdout set (--data-dir; ``FOLDER:holdout`` in --test-sets), not --source (which serves
    the test set only), and each works."""
    search = legacy_root / "search"
    root = tmp_path / "root"
    case, held = root / "exp", tmp_path / "held"
    case.mkdir(parents=True)
    held.mkdir()
    for name in ("search_state.pkl", "search_model.npz", "trans_beam10.txt", "test.en", "test.fr"):
        shutil.copyfile(search / name, case / name)
    for name in ("vocab.en.pkl", "ivocab.en.pkl", "vocab.fr.pkl", "ivocab.fr.pkl"):
        shutil.copyfile(search / name, case / name)
    # lines 21-30: sample.py translates each line on its own (its first lines are not test.en's)
    for src, dst in (
        ("trans_beam10.txt", case / "trans_holdout_beam10.txt"),
        ("test.en", held / "holdout2014.en"),
        ("test.fr", held / "holdout2014.fr"),
    ):
        dst.write_text("".join(_lines_kept(search / src)[20:30]), encoding="utf-8")
    r = run_cli("reproduce", "--case", case)
    [skipped] = [ln for ln in r.stderr.splitlines() if "skipped" in ln]
    # an output not done exits 1, as archive does (issue 50, item 6)
    assert r.returncode == 1 and "trans_holdout_beam10.txt: skipped: " in skipped, r.stderr
    assert r.stdout.splitlines()[-1].startswith("NOT ALL DONE: 1/2 outputs re-done"), r.stdout
    assert skipped.endswith("; pass --data-dir DIR (the folder holding it)")
    r = run_cli("reproduce", "--case", case, "--data-dir", held, "--json")
    assert r.returncode == 0, r.stderr
    files = {f["file"]: f for f in json.loads(r.stdout)["files"]}
    assert files["trans_holdout_beam10.txt"]["source"] == str(held / "holdout2014.en")
    assert files["trans_holdout_beam10.txt"]["identical"] == 10
    out = tmp_path / "r"
    archive = ("archive", root, "--out", out, "--max-sentences", "2", "--plots", "0")
    r = run_cli(*archive)
    [warning] = _not_done_warnings(r.stderr)
    assert r.returncode == 1 and "trans_holdout_beam10.txt: its test set: " in warning
    assert (
        "pass a line 'exp:holdout SOURCE REFERENCE' in --test-sets FILE, --data-dir DIR (the "
        'folder holding it), or source = "PATH" in the plan' in warning
    )
    mapping = tmp_path / "sets.txt"
    mapping.write_text("exp:holdout held/holdout2014.en held/holdout2014.fr\n", encoding="utf-8")
    r = run_cli(*archive, "--test-sets", mapping)
    assert r.returncode == 0 and "2/2 translation files identical" in r.stdout, r.stderr


def _lines_kept(path):
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


@pytest.mark.parametrize("through", ["the folder", "a link to it"])
def test_links_outside_the_archive_are_one_warning_whose_fix_works(legacy_root, tmp_path, through):
    """An experiment of symlinks into another tree (issue 40 reads none of them unless
    asked): one warning naming the folder they lead to, not one per file; passing that
    folder with --data-dir, as it says, re-does it, as does the folder as the links name it.

    The folder named is where the links really lead (``os.path.realpath``: what the archive
    compares with ROOT and each --data-dir), whatever links lie on the way -- also when the
    shared recordings are themselves reached through a link (issue 50, item 8: the test
    expected the path as the links spell it and failed when ``../shared`` was a link)."""
    shared = legacy_root
    if through == "a link to it":  # the recordings reached through a link, as ../shared may be
        shared = tmp_path / "shared_link"
        shared.symlink_to(legacy_root.resolve(), target_is_directory=True)
    root = tmp_path / "linked"
    d = root / "rnnencdec"
    d.mkdir(parents=True)
    case = shared / "encdec"
    for name in ("encdec_state.pkl", "encdec_model.npz", "trans_beam5.txt", "test.en", "test.fr"):
        (d / name).symlink_to(case / name)
    args = ("archive", root, "--out", tmp_path / "r", "--max-sentences", "2", "--plots", "0")
    r = run_cli(*args)
    [warning] = _not_done_warnings(r.stderr)
    assert r.returncode == 1 and "trans_beam5.txt, encdec_state.pkl, encdec_model.npz" in warning
    real = os.path.realpath(case)
    assert f"through links into {real}, outside the archive: not read" in warning
    assert "(pass that folder with --data-dir to have it read); nothing of the" in warning
    named = re.search(r"through links into (.+?), outside the archive", warning).group(1)
    for data_dir in dict.fromkeys((named, str(case))):  # the fix as said, and as linked
        r = run_cli(*args, "--data-dir", data_dir)
        assert r.returncode == 0 and _not_done_warnings(r.stderr) == [], (data_dir, r.stderr)
