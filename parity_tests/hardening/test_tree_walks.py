"""Archive trees that are deep or oddly named (issue 47, "Archive trees and the content lookup").

A folder nested some 1,100 levels deep (legal on Linux) made Python 3.11's recursive
``os.walk`` raise ``RecursionError``; a name whose bytes are not UTF-8 (copied from a Latin-1
machine) made the report writer raise ``UnicodeEncodeError``.  The walk is iterative and
bounded in depth (:func:`groundhog_port.lookup.walk`), and every name is shown escaped.
Expected translations are the original's recorded ones.
"""

import json
import os
import shutil

import pytest

from groundhog_port import lookup
from parity_tests.support.deep import make_chain, remove_tree
from parity_tests.support.inprocess import run_cli

N = 4
FILES = ("search_state.pkl", "search_model.npz", "vocab.en.pkl", "ivocab.en.pkl",
         "vocab.fr.pkl", "ivocab.fr.pkl")  # fmt: skip


def _experiment(legacy_root, folder):
    """The shared ``search`` case on its first N sentences, in ``folder`` (bytes or str)."""
    folder = os.fsencode(folder)
    os.makedirs(folder)
    case = legacy_root / "search"
    for name in FILES:
        shutil.copyfile(case / name, os.path.join(folder, os.fsencode(name)))
    for name in ("test.en", "test.fr", "trans_beam10.txt"):
        lines = (case / name).read_bytes().splitlines(keepends=True)[:N]
        with open(os.path.join(folder, os.fsencode(name)), "wb") as f:
            f.write(b"".join(lines))


def _report(out):
    return json.loads((out / "report.json").read_text(encoding="utf-8"))


@pytest.fixture
def deep(tmp_path):
    """``make(folder)``: a chain of 1,100 folders under ``folder``, removed after the test
    (pytest's own clean-up would recurse through it: parity_tests/support/deep.py)."""
    made = []

    def make(folder):
        made.append(folder)
        return make_chain(folder, 1100)

    yield make
    for folder in made:
        remove_tree(folder)


def test_walk_is_iterative_and_bounded(tmp_path, caplog, deep):
    """1,100 nested folders: walked without recursion down to the depth bound, the rest
    named once in a warning."""
    deep(tmp_path / "tree")
    seen = [folder for folder, _, _ in lookup.walk(tmp_path / "tree")]
    assert len(seen) == lookup.MAX_WALK_DEPTH + 1
    assert "not searched" in caplog.text and caplog.text.count("not searched") == 1


def test_archive_with_a_deep_folder(legacy_root, tmp_path, deep):
    """``archive`` on a tree holding a folder 1,100 levels deep: the experiment beside it
    re-done identically, exit 0, the deep folder named as not searched."""
    root = tmp_path / "lab"
    _experiment(legacy_root, root / "exp")
    deep(root / "scratch")
    out = tmp_path / "out"
    r = run_cli("archive", root, "--out", out, "--plots", "0")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "not searched" in r.stderr and "RecursionError" not in r.stderr
    report = _report(out)
    (e,) = report["experiments"]
    assert [(row["identical"], row["compared"]) for row in e["reproduction"]] == [(N, N)]
    # the folder not entered is a row of the inventory, never left out in silence
    [row] = [x for x in report["inventory"] if x["role"].startswith("not walked: more than")]
    assert row["file"].startswith("scratch/") and row["file"].count("/") == lookup.MAX_WALK_DEPTH


def test_archive_with_names_that_are_not_utf8(legacy_root, tmp_path):
    """An experiment folder named ``r\\xe9sultats`` in Latin-1 bytes and a stray file
    ``\\xff\\xfe.txt``: re-done, the report written with the names escaped."""
    root = tmp_path / "lab"
    _experiment(legacy_root, os.path.join(os.fsencode(root), b"r\xe9sultats"))
    with open(os.path.join(os.fsencode(root), b"\xff\xfe.txt"), "wb") as f:
        f.write(b"stray\n")
    out = tmp_path / "out"
    r = run_cli("archive", root, "--out", out, "--plots", "0")
    assert r.returncode == 0, r.stderr[-2000:]
    (e,) = _report(out)["experiments"]
    assert e["id"] == "r\\xe9sultats/search_"
    assert [(row["identical"], row["compared"]) for row in e["reproduction"]] == [(N, N)]
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "r\\xe9sultats" in html and "\udce9" not in html


def test_nothing_above_root_or_through_a_folder_link_is_read(legacy_root, tmp_path):
    """An experiment at ROOT's top whose test set lies only in ROOT/../data, or only in a
    folder that a link under ROOT leads to: neither is read, translated or scored (the
    experiment is "not done", saying where it looked); the same tree with the test set
    inside ROOT is re-done."""
    outside = tmp_path / "data"
    linked = tmp_path / "elsewhere"
    root = tmp_path / "root"
    _experiment(legacy_root, root)
    for name in ("test.en", "test.fr"):
        for folder in (outside, linked):
            folder.mkdir(exist_ok=True)
            (folder / name).write_bytes((root / name).read_bytes())
        (root / name).unlink()
    (root / "corpora").symlink_to(linked, target_is_directory=True)
    out = tmp_path / "out"
    r = run_cli("archive", root, "--out", out, "--plots", "0")
    assert r.returncode == 1, r.stderr[-2000:]
    (e,) = _report(out)["experiments"]
    assert e["reproduction"] == [] and e["not_done"], e
    text = json.dumps(e)
    assert str(outside) not in text and "elsewhere" not in text
    (root / "corpora").unlink()
    shutil.copytree(linked, root / "corpora")
    r = run_cli("archive", root, "--out", tmp_path / "out2", "--plots", "0")
    assert r.returncode == 0, r.stderr[-2000:]


def test_parity_json_of_a_case_whose_name_is_not_utf8(legacy_root, tmp_path):
    """``parity --case r\\xe9sultats --json FILE``: written with the name escaped (was a
    ``UnicodeEncodeError`` traceback, round five)."""
    case = os.path.join(os.fsencode(tmp_path), b"r\xe9sultats")
    shutil.copytree(os.fsencode(legacy_root / "search"), case)
    out = tmp_path / "parity.json"
    r = run_cli("parity", "--case", os.fsdecode(case), "--json", out, "--only", "repr")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    report = json.loads(out.read_text(encoding="utf-8"))
    assert "r\\xe9sultats" in report["trace"] and "\udce9" not in out.read_text("utf-8")
