"""``groundhog-port archive``: a tree of old experiments re-done into one report.

The archive (:func:`archive_helpers.build_archive`) holds five experiments in different
layouts, made of the shared recordings: a whole case with a trace, vocabularies kept in
another folder with a renamed test set, a crashed sample.py run with its traceback, the
test set in a sibling ``data/`` folder next to an output whose name says nothing, and a
state without its model.  Checked: what the report says of each (values computed by the
port against the original's files, never copied in), that nothing in the archive changes,
that an interrupted and resumed run writes the same report bytes, the page in headless
Chromium, and the same report from two torchrun processes.

Cheap on purpose: the first ``MAX_SENTENCES`` lines of each test set, parity of the
``repr`` and ``pairs`` groups only.
"""

import json
import re

import pytest

from groundhog_port.harness.print_noise import last_digit
from groundhog_port.tasks import archive
from parity_tests.support.archive import (
    MAX_SENTENCES,
    build_archive,
    check_sacrebleu,
    search_run,
    tree_digest,
)
from parity_tests.support.distributed import finish, torchrun
from parity_tests.support.inprocess import run_cli

REPORTS = ("report.json", "report.md", "report.html")


def _args(root, out, vocab, *extra):
    return [
        "archive",
        root,
        "--out",
        out,
        "--data-dir",
        vocab,
        "--max-sentences",
        MAX_SENTENCES,
        "--parity-groups",
        "repr,pairs",
        *extra,
    ]


@pytest.fixture(scope="module")
def made(legacy_root, tmp_path_factory):
    """The archive, its digest before, and one uninterrupted run."""
    root = tmp_path_factory.mktemp("archive")
    vocab = build_archive(legacy_root, root)
    before = tree_digest(root)
    out = tmp_path_factory.mktemp("report")
    r = run_cli(*_args(root, out, vocab))
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    return {
        "root": root,
        "vocab": vocab,
        "before": before,
        "out": out,
        "run": r,
        "report": report,
        "by_id": {e["id"]: e for e in report["experiments"]},
    }


def test_archive_untouched(made):
    assert tree_digest(made["root"]) == made["before"]


def test_report_of_each_experiment(made):
    r, by_id = made["run"], made["by_id"]
    # exit 1: the report lists things not done (and one score file off in its last digit)
    assert r.returncode == 1, r.stderr
    assert sorted(by_id) == [
        "2015/encdec_run/encdec_",
        "2015/search/search_",
        "broken/phrase_",
        "crashed/search_variant/search_variant_",
        "phrase/phrase_",
    ]
    # a whole case: six trans files identical, both test-set score files, parity, plots
    s = by_id["2015/search/search_"]
    assert len(s["reproduction"]) == 6
    assert all(row["identical"] == row["compared"] == MAX_SENTENCES for row in s["reproduction"])
    bleu = s["reproduction"][0]["bleu"]["archived_vs_reference"]
    assert bleu["signature"].startswith("nrefs:1|case:mixed") and bleu["multi_bleu"] > 0
    assert [x["file"] for x in s["scores"]] == ["scores_batch.txt", "scores_batch_run2.txt"]
    # score.py printed 6 digits of a float32 sum whose order the port does not share: a
    # line may differ in its last digits (parity's batch/scores judges the values); the
    # report must account for every line it compared
    assert all(
        x["compared"] == MAX_SENTENCES
        and x["archived_lines"] == 40
        and x["identical"] + len(x["first_differences"]) == x["compared"]
        for x in s["scores"]
    )
    assert s["parity"]["ok"] and {row["quantity"].split("/")[0] for row in s["parity"]["rows"]} == {
        "repr",
        "pairs",
    }
    assert len(s["plots"]) == 3
    [h5] = s["not_done"]  # the training corpora are not in the archive
    assert h5["what"] == "scores_h5_train20.txt" and "--data-dir" in h5["why"]
    # vocabularies in another folder (the state's paths fail), the test set renamed
    e = by_id["2015/encdec_run/encdec_"]
    assert e["files"]["word_indx"] == "vocabularies/vocab.en.pkl"
    assert e["files"]["test"]["source"] == "2015/encdec_run/newstest.en"
    assert [row["all_identical"] for row in e["reproduction"]] == [True, True]
    assert e["not_done"] == [] and e["notes"] == [
        "no attention plots: an RNNencdec model has no attention"
    ]
    # the crashed run: 3 lines written, the port fails on the 4th with the original's message
    c = by_id["crashed/search_variant/search_variant_"]
    [row] = c["reproduction"]
    assert row["original_stopped_after"] == 3 and row["identical"] == 3 and row["crash_reproduced"]
    [log] = c["crash_logs"]
    assert log["last_line"].startswith("ValueError: kth(=") and log["status"].startswith(
        "reproduced"
    )
    # the test set in ../data; an output whose name says nothing is matched by content
    # (issue 43: re-translated at the beams people used until its first lines agree)
    p = by_id["phrase/phrase_"]
    assert p["files"]["test"]["source"] == "data/test.en"
    assert p["reproduction"][0]["all_identical"]
    final = {row["file"]: row for row in p["reproduction"]}["trans_final.txt"]
    # made at beam 10; beams 5 and 10 agree on the lines --max-sentences re-does, and no
    # more are translated to tell them apart: the first in the order tried is taken, and
    # the others that agree are named
    why = final["settings_why"]
    assert why.startswith(f"by content: its first {MAX_SENTENCES} of 40 lines (--max-sentences")
    assert "re-translated with beam 5 are" in why and "; beam 10;" in why, why
    assert final["identical"] == final["compared"] == MAX_SENTENCES
    # score.py's batch scores: its {:.5e} text of a float32 sum in another order than the
    # port's may differ in the last digits (how many lines moves with the BLAS kernels;
    # parity's batch/scores judges the values): the report accounts for every line
    [sc] = p["scores"]
    archived = (made["root"] / "phrase" / sc["file"]).read_text().split("\n")
    assert sc["compared"] == MAX_SENTENCES
    assert sc["identical"] + len(sc["first_differences"]) == MAX_SENTENCES
    assert all(
        d["archived"] == archived[d["line"] - 1] != d["reproduced"] for d in sc["first_differences"]
    )
    assert sc["all_identical"] == (sc["identical"] == MAX_SENTENCES)
    assert (sc["max_rel_diff"] > 0) == (sc["identical"] < MAX_SENTENCES)
    rows = [x for e in made["report"]["experiments"] for x in e["scores"]]
    summary = made["report"]["summary"]
    assert (
        summary["scores_files_identical"],
        summary["scores_lines_identical"],
        summary["scores_lines"],
    ) == (
        sum(x["all_identical"] for x in rows),
        sum(x["identical"] for x in rows),
        3 * MAX_SENTENCES,
    )
    assert summary["scores_max_rel_diff"] == max(x["max_rel_diff"] for x in rows)
    # the three score files lie within parity's batch/scores bounds plus the printed digit
    assert summary["scores_files_within_noise"] == 3 and all(x["within_print_noise"] for x in rows)
    assert "no *model.npz" in by_id["broken/phrase_"]["not_done"][0]["why"]


def test_markdown_and_html_show_every_table(made):
    md = (made["out"] / "report.md").read_text(encoding="utf-8")
    page = (made["out"] / "report.html").read_text(encoding="utf-8")
    for e in made["report"]["experiments"]:
        assert f"## {e['id']}" in md
        for title, _, _rows in archive_report_tables(e):
            assert f"### {title}" in md and title.replace("(", "").split()[0] in page
    n_plots = made["report"]["summary"]["plots"]
    assert n_plots == 6 and page.count('src="data:image/png;base64,') == n_plots
    assert 'src="plots/' not in page and "http" not in page.split("<body>", 1)[1]


def archive_report_tables(result):
    from groundhog_port.tasks.archive.report import tables

    return tables(result)


def test_interrupted_and_resumed_gives_the_same_report(made, tmp_path, monkeypatch):
    out = tmp_path / "out"
    real, redone = archive.redo, tmp_path / "redone"

    def redo_then_stop(root, entry, opts, o):
        # each experiment is re-done in a forked worker: what was re-done is kept in a file
        calls = redone.read_text().split() if redone.exists() else []
        if len(calls) == 2:
            raise KeyboardInterrupt  # in the worker: the whole run stops (exit 130)
        with redone.open("a") as f:
            f.write(entry.id + "\n")
        return real(root, entry, opts, o)

    monkeypatch.setattr(archive.pipeline, "redo", redo_then_stop)
    r = run_cli(*_args(made["root"], out, made["vocab"]))
    assert r.returncode == 130 and not (out / "report.json").exists()
    monkeypatch.setattr(archive.pipeline, "redo", real)
    calls = redone.read_text().split()
    r = run_cli(*_args(made["root"], out, made["vocab"], "--progress"))
    assert r.returncode == 1, r.stderr
    assert re.search(r"5/5 \[[^]]* exp", r.stderr), r.stderr  # the bar counts experiments
    assert r.stderr.count("done before (cached") == 2 and r.stderr.count(": re-doing") == 3
    # the same report, but for saying which results came from the cache (issue 51 item 4)
    resumed = json.loads((out / "report.json").read_text(encoding="utf-8"))
    fresh = json.loads((made["out"] / "report.json").read_text(encoding="utf-8"))
    assert resumed.pop("from_cache") == sorted(calls) and fresh.pop("from_cache") == []
    assert resumed["summary"].pop("from_cache") == 2 and fresh["summary"].pop("from_cache") == 0
    assert resumed == fresh
    said = re.compile(
        r" 2 experiment results from OUT/cache, made before from the same inputs, options and "
        r"code \(--fresh re-does them\)\.|(<p>)?From OUT/cache: [^\n]*\.(</p>)?\n*"
    )
    for name in REPORTS[1:]:
        text = (out / name).read_text(encoding="utf-8")
        assert len(said.findall(text)) == 2, name
        assert said.sub("", text) == (made["out"] / name).read_text(encoding="utf-8"), name
    assert tree_digest(made["root"]) == made["before"]


def test_out_inside_the_archive_refused(made):
    r = run_cli(*_args(made["root"], made["root"] / "report", made["vocab"]))
    assert r.returncode == 2 and "outside" in r.stderr
    assert tree_digest(made["root"]) == made["before"]


def test_page_in_headless_chromium(made, browser):
    from selenium.webdriver.common.by import By

    browser.get((made["out"] / "report.html").as_uri())
    sections = browser.find_elements(By.CSS_SELECTOR, "section.experiment")
    assert [s.get_attribute("data-id") for s in sections] == [
        e["id"] for e in made["report"]["experiments"]
    ]
    from groundhog_port.tasks.archive.report import overview

    # the overview table first ((title, header, rows): one row per experiment), then each
    # experiment's own
    expected = sum(len(archive_report_tables(e)) for e in made["report"]["experiments"])
    tables = browser.find_elements(By.TAG_NAME, "table")
    # ... and the inventory last (issue 50: every file of the archive, one row each)
    assert len(tables) == expected + 2 and all(t.is_displayed() for t in tables)
    assert tables[0].get_attribute("class") == "overview"
    assert tables[-1].get_attribute("class") == "inventory"
    # every row of every table is there (the files table of each experiment included)
    rows = sum(len(t.find_elements(By.TAG_NAME, "tr")) - 1 for t in tables)
    assert rows == len(overview(made["report"])[2]) + len(made["report"]["inventory"]) + sum(
        len(r) for e in made["report"]["experiments"] for _, _, r in archive_report_tables(e)
    )
    imgs = browser.find_elements(By.CSS_SELECTOR, "img.attention")
    assert len(imgs) == made["report"]["summary"]["plots"]
    for img in imgs:
        assert img.is_displayed()
        assert browser.execute_script(
            "return arguments[0].complete && arguments[0].naturalWidth > 0", img
        ), img.get_attribute("alt")


def test_two_torchrun_processes_same_report(made, tmp_path):
    out = tmp_path / "out"
    rc, stdout, err = finish(torchrun(*_args(made["root"], out, made["vocab"])))
    # one process exits 1 (things not done); torchrun would print a FAILED block for it
    assert rc == 0 and "FAILED" not in err and "Traceback" not in err, err[-3000:]
    [summary] = [ln for ln in stdout.splitlines() if "5 experiments:" in ln]
    assert "one process exits 1 here, this torchrun job exits 0" in summary
    for name in REPORTS:
        assert (out / name).read_bytes() == (made["out"] / name).read_bytes(), name


@pytest.mark.parametrize(
    "a, b, agree",
    [
        ("-5.04937e+01", "-5.04936e+01", True),
        ("-5.04937e+01", "-5.04935e+01", False),
        ("9.99999e-01", "1.00000e+00", True),
        ("1.00000e+00", "1.00002e+00", False),
    ],
)
def test_last_digit(a, b, agree):
    """One unit of the last digit of score.py's ``{:.5e}`` numbers."""
    assert (abs(float(a) - float(b)) <= last_digit(a, b)) == agree


@pytest.mark.parametrize("tokenize", ["none", "char"])
def test_the_bleu_tokenizer_given_is_the_one_used(legacy_root, tmp_path, tokenize):
    """``archive --tokenize T``: the report's sacrebleu figure of an output is sacrebleu's own
    ``corpus_bleu(..., tokenize=T)`` on the lines compared (its signature says ``tok:T``),
    and the two tokenizers differ here (the option reaches the figures)."""
    exp = search_run(legacy_root, tmp_path / "root" / "exp")
    out = tmp_path / "out"
    r = run_cli("archive", exp.parent, "--out", out, "--max-sentences", 4, "--plots", 0,
                "--tokenize", tokenize)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    [e] = json.loads((out / "report.json").read_text(encoding="utf-8"))["experiments"]
    [row] = e["reproduction"]
    hyp = (exp / "trans_beam1.txt").read_text(encoding="utf-8").splitlines()[:4]
    ref = (exp / "test.fr").read_text(encoding="utf-8").splitlines()[:4]
    check_sacrebleu(row["bleu"]["archived_vs_reference"], hyp, ref, tokenize)
