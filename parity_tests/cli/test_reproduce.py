"""``groundhog-port reproduce``: re-translating the recorded cases gives sample.py's files.

Golden data: the ``trans_*.txt`` files the original ``sample.py`` wrote.  ``search``: six
files (beam 1/5/10, beam-10 normalize, beam-5 ignore-unk, a second beam-10 run) of 40 lines;
``search_variant``: five files that stop after 35 lines because sample.py crashed on line 36
(docs/recordings.md, "Quirks") -- every line it wrote must be reproduced, and the port must fail on
line 36 with the original's message.

Runs the literal search (``--batch-size 1``, the reference semantics) on one thread: the
models are tiny and two threads competing for this machine's two cores are much slower.
"""

import io
import json
import random
import re
import sys

import pytest
import torch

from groundhog_port.cli import main as cli
from groundhog_port.tasks.reproduce import Settings, find_case, format_report, parse_trans_name
from parity_tests.support.archive import check_sacrebleu

SEARCH_FILES = [
    "trans_beam1.txt",
    "trans_beam5.txt",
    "trans_beam5_ignore_unk.txt",
    "trans_beam10.txt",
    "trans_beam10_run2.txt",
    "trans_beam10_normalize.txt",
]
VARIANT_FILES = [
    "trans_beam1.txt",
    "trans_beam5.txt",
    "trans_beam5_ignore_unk.txt",
    "trans_beam10.txt",
    "trans_beam10_normalize.txt",
]


def cli_run_quiet(argv):
    """``groundhog-port reproduce --batch-size 1 ARGV`` in this process, on one thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return cli.main(["--log-level", "WARNING", "reproduce", "--batch-size", "1", *argv])
    finally:
        torch.set_num_threads(before)


def _run(argv, capsys):
    rc = cli_run_quiet(argv)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


@pytest.fixture(scope="module")
def search_text(legacy_root, tmp_path_factory):
    """``reproduce --case search`` (text report) and the reproduced files it saved."""
    cap = _ModuleCapture()
    save = tmp_path_factory.mktemp("reproduced")
    with cap:
        rc = cli_run_quiet(
            ["--case", str(legacy_root / "search"), "--save-dir", str(save), "--progress"]
        )
    return rc, cap.out, cap.err, save


@pytest.fixture(scope="module")
def variant_json(legacy_root):
    cap = _ModuleCapture()
    with cap:
        rc = cli_run_quiet(["--case", str(legacy_root / "search_variant"), "--json"])
    return rc, json.loads(cap.out)


class _ModuleCapture:
    """stdout/stderr capture usable in module-scoped fixtures (capsys is function-scoped)."""

    def __enter__(self):
        self._saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = self._out, self._err = io.StringIO(), io.StringIO()
        return self

    def __exit__(self, *exc):
        sys.stdout, sys.stderr = self._saved
        self.out, self.err = self._out.getvalue(), self._err.getvalue()


# ------------------------------------------------------------------------------------------
# the recorded cases
# ------------------------------------------------------------------------------------------
def test_search_every_file_identical(search_text, legacy_root):
    rc, out, err, save = search_text
    assert rc == 0, out
    for name in SEARCH_FILES:
        assert re.search(
            rf"^{re.escape(name)} \([^)]*\): 40/40 lines identical \(100\.0%\)$", out, re.M
        ), out
        # the saved reproduction is byte-identical to what sample.py wrote
        assert (save / name).read_bytes() == (legacy_root / "search" / name).read_bytes()
    assert out.count("BLEU: archived-ref ") == len(SEARCH_FILES)
    assert "archived-reproduced 100.00 (multi-bleu 100.00)" in out
    assert "the original printed" in out  # its "Total cost" line
    assert re.search(
        r"all identical: 6/6 outputs re-done, 6 identical, 0 differing, 0 not done; "
        r"240/240 compared lines identical; "
        r"200 sentences translated",
        out,
    )  # run2 reuses beam 10
    assert "200/200 [" in err and " sent/s]" in err  # the progress bar (tqdm)
    # once, why sacrebleu and multi-bleu differ and which to quote
    assert (
        out.count("BLEU X (multi-bleu Y): X is sacrebleu (nrefs:1|case:mixed|eff:no|tok:13a|") == 1
    )
    assert "Quote X with its signature" in out


def test_search_variant_every_written_line_identical(variant_json):
    rc, report = variant_json
    assert rc == 0
    files = {r["file"]: r for r in report["files"]}
    assert sorted(files) == sorted(VARIANT_FILES)
    for r in files.values():
        assert (r["compared"], r["identical"], r["percent_identical"]) == (35, 35, 100.0)
        assert r["all_identical"] and r["original_stopped_after"] == 35
        assert r["source_lines"] == 40
        # sample.py died on line 36 (kth out of bounds); the port fails there the same way
        assert r["crash_reproduced"], r
        assert re.fullmatch(r"kth\(=\d+\) out of bounds \(321\)", r["port_error_on_next_line"])
        assert r["port_error_on_next_line"] in r["original_error"]
        assert [f["line"] for f in r["port_failed_lines"]] == [36]
        assert r["bleu_lines"] == 35
    text = format_report(report)
    assert text.count("the original stopped after 35 lines") == 5
    assert text.count("the port fails on line 36 too") == 5
    assert "BLEU (first 35 lines): archived-ref" in text


def test_json_report_fields(variant_json):
    _, report = variant_json
    for key in (
        "files",
        "all_identical",
        "sentences",
        "seconds",
        "sentences_per_second",
        "case",
        "state",
        "model",
        "skipped",
    ):
        assert key in report
    assert report["all_identical"] is True and report["sentences"] == 200
    r = report["files"][0]
    for key in (
        "file",
        "archived",
        "source",
        "reference",
        "settings",
        "batch_size",
        "source_lines",
        "archived_lines",
        "compared",
        "identical",
        "different",
        "percent_identical",
        "all_identical",
        "original_stopped_after",
        "first_differences",
        "port_failed_lines",
        "total_cost",
        "total_cost_compared",
        "archived_total_cost",
        "bleu",
    ):
        assert key in r, key
    assert r["settings"] == {"beam_size": 1, "normalize": False, "ignore_unk": False}
    b = r["bleu"]
    for pair in ("archived_vs_reference", "reproduced_vs_reference", "archived_vs_reproduced"):
        assert set(b[pair]) == {"sacrebleu", "signature", "multi_bleu", "multi_bleu_text"}
    assert b["archived_vs_reference"]["sacrebleu"] == b["reproduced_vs_reference"]["sacrebleu"]
    assert b["archived_vs_reproduced"]["sacrebleu"] == pytest.approx(100.0)
    assert b["archived_vs_reproduced"]["multi_bleu_text"].startswith("BLEU = 100.00,")
    assert r["archived_total_cost"] is None  # the crashed run printed no total


# ------------------------------------------------------------------------------------------
# a changed archived file
# ------------------------------------------------------------------------------------------
def _search_files_argv(d, archived, *extra):
    """``reproduce`` of the search case ``d`` named file by file (not ``--case``), with
    ``archived`` as the archived beam-10 translations."""
    model = ["--state", str(d / "search_state.pkl"), "--model", str(d / "search_model.npz")]
    settings = ["--archived-trans", str(archived), "--beam-size", "10"]
    return [*model, "--source", str(d / "test.en"), *extra, *settings]


def test_changed_line_exit_1_side_by_side(legacy_root, tmp_path, capsys):
    d = legacy_root / "search"
    lines = (d / "trans_beam10.txt").read_text(encoding="utf-8").splitlines()
    original = lines[6]
    lines[6] = "le chat mange une pomme ."
    changed = tmp_path / "trans_beam10.txt"
    changed.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    argv = _search_files_argv(d, changed, "--ref", str(d / "test.fr"))
    rc, out, _ = _run(argv, capsys)
    assert rc == 1
    assert "39/40 lines identical (97.5%)" in out
    row = next(x for x in out.splitlines() if x.strip().startswith("line 7:"))
    assert re.search(rf"line 7: le chat mange une pomme \. +\| {re.escape(original)}$", row), row
    assert out.splitlines()[-1].startswith(
        "DIFFERENCES: 1/1 outputs re-done, 0 identical, 1 differing, 0 not done; 39/40"
    )
    rc, out, _ = _run(argv + ["--json"], capsys)
    assert rc == 1
    [r] = json.loads(out)["files"]
    assert r["first_differences"] == [
        {
            "line": 7,
            "source": (d / "test.en").read_text(encoding="utf-8").splitlines()[6],
            "archived": "le chat mange une pomme .",
            "reproduced": original,
        }
    ]


# ------------------------------------------------------------------------------------------
# settings from file names, bad input
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name,expected",
    [
        ("trans_beam1.txt", (Settings(1), "test", 1)),
        ("trans_beam10_normalize.txt", (Settings(10, normalize=True), "test", 1)),
        ("trans_beam5_ignore_unk.txt", (Settings(5, ignore_unk=True), "test", 1)),
        ("trans_beam10_run2.txt", (Settings(10), "test", 2)),
        ("trans_holdout_beam10.txt", (Settings(10), "holdout", 1)),
        ("trans_beam12_normalize_ignore_unk.txt", (Settings(12, True, True), "test", 1)),
        ("trans_beam0.txt", None),
        ("trans.txt", None),
        ("trans_beam10.txt.bak", None),
        ("scores_batch.txt", None),
    ],
)
def test_parse_trans_name(name, expected):
    assert parse_trans_name(name) == expected


def _case_copy(legacy_root, tmp_path, names):
    d = tmp_path / "case"
    d.mkdir()
    src = legacy_root / "search"
    for p in src.iterdir():
        if not p.name.startswith("trans") or p.name in names:
            (d / p.name).symlink_to(p)
    return d


def test_find_case_skips_what_it_cannot_run(legacy_root, tmp_path):
    d = _case_copy(legacy_root, tmp_path, ["trans_beam10.txt"])
    (d / "trans_holdout_beam10.txt").write_text("x\n")  # no holdout.en here
    (d / "trans_something.txt").write_text("x\n")
    case = find_case(d)
    assert [f.name for f in case.files] == ["trans_beam10.txt"]
    assert case.files[0].stdout is not None and case.files[0].reference is not None
    assert {s["file"] for s in case.skipped} == {"trans_holdout_beam10.txt", "trans_something.txt"}


def test_an_output_not_done_is_never_all_identical(legacy_root, tmp_path, capsys):
    """Issue 50, item 6: a case whose one output is re-done identical and whose other output
    (``trans.txt``: the lines of ``trans_beam1.txt`` shuffled, so that no setting gives its
    first lines) cannot be matched says NOT ALL DONE with the counts and why, exit 1 (it
    said "all identical: 1/1 files", exit 0)."""
    src, d = legacy_root / "search", tmp_path / "case"
    d.mkdir()
    for name in ("search_state.pkl", "search_model.npz", "vocab.en.pkl", "vocab.fr.pkl",
                 "ivocab.en.pkl", "ivocab.fr.pkl", "test.en", "test.fr", "trans_beam1.txt"):  # fmt: skip
        (d / name).write_bytes((src / name).read_bytes())
    lines = (src / "trans_beam1.txt").read_text(encoding="utf-8").splitlines()
    shuffled = lines[:]
    random.Random(50).shuffle(shuffled)
    assert shuffled[:3] != lines[:3]
    (d / "trans.txt").write_text("".join(x + "\n" for x in shuffled), encoding="utf-8")
    rc, out, err = _run(["--case", str(d), "--json"], capsys)
    assert rc == 1, err
    report = json.loads(out)
    assert [r["file"] for r in report["files"]] == ["trans_beam1.txt"]
    assert report["files"][0]["identical"] == 40
    assert [s["file"] for s in report["skipped"]] == ["trans.txt"]
    assert (report["outputs"], report["not_done"], report["all_identical"]) == (2, 1, False)
    text = format_report(report).splitlines()
    assert text[-1].startswith(
        "NOT ALL DONE: 1/2 outputs re-done, 1 identical, 0 differing, 1 not done "
        "(trans.txt: why above); 40/40 compared lines identical"
    ), text[-1]
    assert text[-2].startswith("not done trans.txt: the name does not say the sample.py settings")
    assert not any("all identical" in line for line in text)


def test_holdout_file_uses_holdout_source(legacy_root, tmp_path):
    d = _case_copy(legacy_root, tmp_path, [])
    (d / "holdout.en").write_text("the cat .\n")
    (d / "holdout.fr").write_text("le chat .\n")
    (d / "trans_holdout_beam10.txt").write_text("le chat .\n")
    [f] = find_case(d).files
    assert f.source.name == "holdout.en" and f.reference.name == "holdout.fr"


def test_bad_input_exit_2(legacy_root, tmp_path, capsys):
    rc, _, err = _run(["--case", str(tmp_path / "missing")], capsys)
    assert rc == 2 and "not a directory" in err
    # --beam-size etc. serve the outputs whose names say no settings (issue 43); the state
    # and the outputs still come from the folder
    # --state picks one of several states of the folder (issue 50): a name not there says so
    rc, _, err = _run(["--case", str(legacy_root / "search"), "--state", "x.pkl"], capsys)
    assert rc == 2 and "--state: file not found (nor in the --case folder)" in err
    rc, _, err = _run(["--beam-size", "3"], capsys)
    assert rc == 2 and "missing: --state, --model, --source, --archived-trans" in err
    d = legacy_root / "search"
    too_long = tmp_path / "trans_beam10.txt"
    too_long.write_text(
        (d / "trans_beam10.txt").read_text(encoding="utf-8") + "extra\n", encoding="utf-8"
    )
    rc, _, err = _run(_search_files_argv(d, too_long), capsys)
    assert rc == 2 and "41 lines but its source" in err


@pytest.mark.parametrize("tokenize", ["none", "char"])
def test_the_bleu_tokenizer_given_is_the_one_used(legacy_root, capsys, tokenize):
    """``reproduce --tokenize T``: every sacrebleu figure is sacrebleu's own
    ``corpus_bleu(..., tokenize=T)`` on the same lines (its signature says ``tok:T``), and
    the two tokenizers give different figures here (the option is not ignored)."""
    d = legacy_root / "search"
    model = ["--state", str(d / "search_state.pkl"), "--model", str(d / "search_model.npz")]
    argv = [*model, "--source", str(d / "test.en"), "--archived-trans", str(d / "trans_beam1.txt")]
    argv += ["--beam-size", "1", "--ref", str(d / "test.fr"), "--tokenize", tokenize, "--json"]
    rc, out, _ = _run(argv, capsys)
    assert rc == 0
    [r] = json.loads(out)["files"]
    hyp = (d / "trans_beam1.txt").read_text(encoding="utf-8").splitlines()
    ref = (d / "test.fr").read_text(encoding="utf-8").splitlines()
    check_sacrebleu(r["bleu"]["archived_vs_reference"], hyp, ref, tokenize)
