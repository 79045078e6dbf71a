"""A second lab archive, kept with other common habits (issue 50), built from the shared
recordings by the test itself:

* ``runs.tar.xz``: several runs in one pack -- ``runs/search`` with its output named
  ``newstest2012.hyp.fr`` (sample.py at beam 5), ``runs/phrase`` with its output named
  ``output`` beside a ``README.txt`` holding the sample.py command (beam 10); their test set
  in the sibling folder ``runs/data`` of the same pack;
* ``zipped/run3.zip``: an RNNencdec run whose output is named ``hyp.beam5`` though it was
  made at beam 10 (the two differ on 2 of its 40 lines); its test set only in ``wmt/`` as WMT SGML;
* ``encdec-config/config.pkl``: a state under a name that says nothing;
* ``bleu/search_model_bleu21.npz``: a model named after its score;
* ``pair/``: two states and two models in one folder (``search_*``, ``search_variant_*``),
  an output of each (``search_beam5.txt``; ``variant_beam1.txt``, cut short by the crash
  in ``variant_beam1_error.txt``);
* ``detok/trans_beam10.txt``: an output detokenized by hand after sample.py;
* ``wmt/newstest2012-{src.en,ref.fr}.sgm``: the test set kept only as WMT SGML;
* ``dicts/``: the vocabularies, under the names the states store.
"""

import io
import json
import shutil
import tarfile
import zipfile

import pytest

from parity_tests.support.archive import tree_size, without_origin
from parity_tests.support.inprocess import run_cli

VOCABS = ("vocab.en.pkl", "ivocab.en.pkl", "vocab.fr.pkl", "ivocab.fr.pkl")


def _lines(path):
    return path.read_text(encoding="utf-8").splitlines()


def _text(lines):
    return "".join(ln + "\n" for ln in lines)


def sgml(lines, kind, lang):
    """``lines`` as a WMT SGML file (``<srcset>`` or ``<refset>``): the segments as
    sample.py read them (SGML text is kept as it is, as sacrebleu and Moses'
    input-from-sgm.perl read it: the Moses escapes ``&apos;`` stay)."""
    head = (
        f'<{kind} setid="newstest2012" srclang="en"'
        + (f' trglang="{lang}"' if kind == "refset" else "")
        + ">\n"
        + '<doc sysid="ref" docid="lab" genre="news" origlang="en">\n<p>\n'
    )
    segs = "".join(f'<seg id="{i}">{ln}</seg>\n' for i, ln in enumerate(lines, 1))
    return head + segs + f"</p>\n</doc>\n</{kind}>\n"


def detokenized(line):
    """A hand's detokenization: no space before punctuation, lower case."""
    for p in (" .", " ,", " !", " ?", " ;", " :"):
        line = line.replace(p, p[1:])
    return line.lower()


def _add(tf, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tf.addfile(info, io.BytesIO(data))


def build_lab(legacy, root):
    """The tree of the module docstring; returns ``{experiment folder: {output: how}}``, how
    being ``identical`` or ``post-processed``."""
    root.mkdir(parents=True)
    src, ref = _lines(legacy / "search" / "test.en"), _lines(legacy / "search" / "test.fr")
    dicts = root / "dicts"
    dicts.mkdir()
    for v in VOCABS:
        shutil.copyfile(legacy / "search" / v, dicts / v)
    wmt = root / "wmt"
    wmt.mkdir()
    (wmt / "newstest2012-src.en.sgm").write_text(sgml(src, "srcset", "en"), encoding="utf-8")
    (wmt / "newstest2012-ref.fr.sgm").write_text(sgml(ref, "refset", "fr"), encoding="utf-8")
    # several runs in one .tar.xz, their test set in a sibling folder of the pack
    with tarfile.open(root / "runs.tar.xz", "w:xz") as tf:
        for case, out_name, trans in (
            ("search", "newstest2012.hyp.fr", "trans_beam5.txt"),
            ("phrase", "output", "trans_beam10.txt"),
        ):
            d = legacy / case
            for name in (f"{case}_state.pkl", f"{case}_model.npz", *VOCABS):
                _add(tf, f"runs/{case}/{name}", (d / name).read_bytes())
            _add(tf, f"runs/{case}/{out_name}", (d / trans).read_bytes())
        readme = (
            "translated with\n  THEANO_FLAGS=device=cpu python sample.py --beam-search "
            "--beam-size 10 --state phrase_state.pkl --source ../data/test.en --trans output "
            "phrase_model.npz\n"
        )
        _add(tf, "runs/phrase/README.txt", readme.encode())
        _add(tf, "runs/data/test.en", _text(src).encode())
        _add(tf, "runs/data/test.fr", _text(ref).encode())
    # an RNNencdec run kept as .zip; its output named for a beam it was not made with
    (root / "zipped").mkdir()
    with zipfile.ZipFile(root / "zipped" / "run3.zip", "w") as zf:
        d = legacy / "encdec"
        for name in ("encdec_state.pkl", "encdec_model.npz"):
            zf.write(d / name, f"run3/{name}")
        zf.write(d / "trans_beam10.txt", "run3/hyp.beam5")
    # a state named config.pkl
    d, e = legacy / "encdec_variant", root / "encdec-config"
    e.mkdir()
    shutil.copyfile(d / "encdec_variant_state.pkl", e / "config.pkl")
    shutil.copyfile(d / "encdec_variant_model.npz", e / "encdec_variant_model.npz")
    shutil.copyfile(d / "trans_beam5.txt", e / "trans_beam5.txt")
    # a model named after its score
    d, e = legacy / "search", root / "bleu"
    e.mkdir()
    shutil.copyfile(d / "search_state.pkl", e / "search_state.pkl")
    shutil.copyfile(d / "search_model.npz", e / "search_model_bleu21.npz")
    shutil.copyfile(d / "trans_beam10.txt", e / "trans_beam10.txt")
    # score.py's output under a name of the lab's own, beside a log of numbers that is not
    shutil.copyfile(d / "scores_batch.txt", e / "bleu21.scores")
    (e / "losses.log").write_text(_text(f"{i / 8:.5e}" for i in range(40)), encoding="utf-8")
    # two states and two models in one folder
    e = root / "pair"
    e.mkdir()
    for case in ("search", "search_variant"):
        for name in (f"{case}_state.pkl", f"{case}_model.npz"):
            shutil.copyfile(legacy / case / name, e / name)
    shutil.copyfile(legacy / "search" / "trans_beam5.txt", e / "search_beam5.txt")
    shutil.copyfile(legacy / "search_variant" / "trans_beam1.txt", e / "variant_beam1.txt")
    shutil.copyfile(
        legacy / "search_variant" / "sample_beam1_error.txt", e / "variant_beam1_error.txt"
    )
    # an output post-processed by hand
    e = root / "detok"
    e.mkdir()
    for name in ("search_state.pkl", "search_model.npz"):
        shutil.copyfile(legacy / "search" / name, e / name)
    trans = _lines(legacy / "search" / "trans_beam10.txt")
    (e / "trans_beam10.txt").write_text(_text(map(detokenized, trans)), encoding="utf-8")
    return {
        "runs.tar.xz/runs/search": {"newstest2012.hyp.fr": "identical"},
        "runs.tar.xz/runs/phrase": {"output": "identical"},
        "zipped/run3.zip/run3": {"hyp.beam5": "identical"},
        "encdec-config": {"trans_beam5.txt": "identical"},
        "bleu": {"trans_beam10.txt": "identical", "bleu21.scores": "within print noise"},
        "pair": {"search_beam5.txt": "identical", "variant_beam1.txt": "identical"},
        "detok": {"trans_beam10.txt": "post-processed"},
    }


@pytest.fixture(scope="module")
def lab(legacy_root, tmp_path_factory):
    root = tmp_path_factory.mktemp("habits") / "lab"
    outputs = build_lab(legacy_root, root)
    out = tmp_path_factory.mktemp("habits_out")
    r = run_cli("archive", root, "--out", out, "--plots", "0")
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    return {"root": root, "outputs": outputs, "run": r, "out": out, "report": report}


def test_every_output_is_redone_with_no_option_but_out(lab):
    rep = lab["report"]
    by: dict = {}  # a folder of two states holds two experiments
    for e in rep["experiments"]:
        by.setdefault(e["folder"], []).append(e)
    problems = []
    for folder, outputs in lab["outputs"].items():
        if folder not in by:
            problems.append(f"{folder}: no experiment in the report")
            continue
        rows = {row["file"]: row for e in by[folder] for row in e["reproduction"] + e["scores"]}
        e = {"not_done": [x for e in by[folder] for x in e["not_done"]]}
        for name, how in outputs.items():
            row = rows.get(name)
            if row is None:
                problems.append(f"{folder}/{name}: not re-done ({e['not_done']})")
            elif how == "identical" and not row["identical"] == row["compared"] > 0:
                problems.append(f"{folder}/{name}: {row['identical']}/{row['compared']}")
            elif how == "within print noise" and not row["within_print_noise"]:
                problems.append(f"{folder}/{name}: not within print noise ({row})")
            elif how == "post-processed" and "post-processed" not in row.get("status", ""):
                problems.append(f"{folder}/{name}: not said post-processed ({row})")
    assert problems == [], "\n".join(problems)


def test_every_file_and_member_has_one_row(lab):
    """The inventory: as many rows as files and pack members, each once, each with a role."""
    inv = lab["report"]["inventory"]
    assert len(inv) == tree_size(lab["root"]) == lab["report"]["summary"]["files"]
    assert len({a["file"] for a in inv}) == len(inv)
    roles = {a["file"]: a["role"] for a in inv}
    assert roles["encdec-config/config.pkl"] == "the state of experiment encdec-config/config"
    assert roles["bleu/search_model_bleu21.npz"] == "the model of experiment bleu/search_"
    readme = roles["runs.tar.xz/runs/phrase/README.txt"]
    # no candidate output: its words are in neither vocabulary (never re-translated)
    assert readme.startswith("not an output of experiment"), readme
    assert "a text in neither vocabulary" in readme, readme
    assert "test set of experiment" in roles["runs.tar.xz/runs/data/test.en"]
    assert "test set of experiment" in roles["wmt/newstest2012-src.en.sgm"]
    assert roles["detok/trans_beam10.txt"].endswith("differs: post-processed (detokenized)")
    assert roles["pair/variant_beam1_error.txt"].startswith(
        "a crash log of experiment pair/search_variant_: reproduced"
    )
    assert roles["runs.tar.xz"].startswith("a pack, unpacked")
    assert roles["bleu/bleu21.scores"] == "a score file of experiment bleu/search_, re-scored"
    assert roles["bleu/losses.log"] == (
        "not an output of experiment bleu/search_: numbers, but no test set's batch scores "
        "(score.py --mode=batch --allow-unk) give its first lines"
    )
    md = (lab["out"] / "report.md").read_text(encoding="utf-8")
    assert "## Inventory: every file and pack member" in md


def test_names_only_order_what_the_content_decides(lab):
    """hyp.beam5 was made at beam 10: its lines are believed, both said; each output of the
    folder of two states is its own state's; the post-processed output is reported with the
    BLEU of archived against re-done, never as a missing input."""
    by = {
        (e["folder"], row["file"]): (e, row)
        for e in lab["report"]["experiments"]
        for row in e["reproduction"]
    }
    e, row = by[("zipped/run3.zip/run3", "hyp.beam5")]
    assert row["settings"]["beam_size"] == 10
    assert "its name says beam 5, its lines say beam 10" in row["settings_why"]
    assert by[("pair", "search_beam5.txt")][0]["id"] == "pair/search_"
    assert by[("pair", "variant_beam1.txt")][0]["id"] == "pair/search_variant_"
    e, row = by[("runs.tar.xz/runs/phrase", "output")]
    assert row["settings"]["beam_size"] == 10 and "README" in row["settings_why"]
    e, row = by[("detok", "trans_beam10.txt")]
    assert row["status"] == "differs: post-processed (detokenized)"
    # every line differs, yet sacrebleu's 13a tokenizer splits the punctuation off again:
    # the hand's detokenizing changed nothing BLEU sees
    assert row["identical"] == 0 < row["compared"]
    assert abs(row["bleu"]["archived_vs_reproduced"]["sacrebleu"] - 100) < 1e-9
    assert "not re-done" not in lab["run"].stdout
    assert (
        "9 outputs re-done (8 identical or within print noise, 1 differs), 0 not done"
        in lab["run"].stdout
    )


@pytest.mark.parametrize(
    "folder, extra, output",
    [
        ("encdec-config", (), "trans_beam5.txt"),  # a state named config.pkl
        ("bleu", (), "trans_beam10.txt"),  # a model named search_model_bleu21.npz
        ("pair", ("--state", "search_state.pkl"), "search_beam5.txt"),  # two states
        ("pair", ("--state", "search_variant_state.pkl"), "variant_beam1.txt"),
    ],
)
def test_reproduce_case_finds_state_model_and_outputs_by_content(lab, folder, extra, output):
    """``reproduce --case`` takes a state of any name, the model that fits it, ``--state``
    where the folder holds two, and an output of any name (it said "found none", "expected
    exactly one state file", and refused --state)."""
    root = lab["root"]
    args = ("reproduce", "--case", root / folder, "--data-dir", root / "wmt", "--json", *extra)
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr[-2000:]
    [f] = json.loads(r.stdout)["files"]
    assert f["file"] == output and f["identical"] == f["compared"] > 0


def test_reproduce_case_asks_which_of_two_states(lab):
    r = run_cli("reproduce", "--case", lab["root"] / "pair", "--data-dir", lab["root"] / "wmt")
    assert r.returncode == 2
    assert (
        "several GroundHog states (search_state.pkl, search_variant_state.pkl): give --state"
        in r.stderr
    )


def test_messages_name_pack_members_as_the_report_does(legacy_root, tmp_path):
    """A packed run whose test set is nowhere: the reason names the pack's files as
    ``run.tar.gz/run/...`` (it named the temporary folder the pack was unpacked into, gone
    after the run)."""
    root = tmp_path / "lab"
    root.mkdir()
    d = legacy_root / "encdec"
    with tarfile.open(root / "run.tar.gz", "w:gz") as tf:
        for name in ("encdec_state.pkl", "encdec_model.npz", *VOCABS, "trans_beam5.txt"):
            tf.add(d / name, f"run/{name}")
    r = run_cli("archive", root, "--out", tmp_path / "out", "--plots", "0")
    assert r.returncode == 1, r.stderr[-2000:]
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    [e] = report["experiments"]
    text = json.dumps(e["not_done"])
    # packs.private_folder's temporary folders are named so
    assert "run.tar.gz/run" in text and "groundhog-port-packs-" not in text, text


def test_an_unreadable_text_is_one_line_never_the_end_of_the_run(legacy_root, tmp_path):
    """A text with a 70,000-byte line beside a state (of any name: a candidate output; or a
    named one) is one line of its experiment, the rest re-done (the whole archive stopped
    with exit 2: "line 1 is longer than 65536 bytes", found by fuzzing)."""
    root = tmp_path / "lab"
    for exp in ("a", "b"):
        d = root / exp
        d.mkdir(parents=True)
        for name in ("encdec_state.pkl", "encdec_model.npz", *VOCABS, "test.en", "test.fr"):
            shutil.copyfile(legacy_root / "encdec" / name, d / name)
        shutil.copyfile(legacy_root / "encdec" / "trans_beam5.txt", d / "trans_beam5.txt")
    (root / "a" / "notes.txt").write_text("x" * 70_000 + "\n", encoding="utf-8")
    (root / "b" / "trans_beam1.txt").write_text("y" * 70_000 + "\n", encoding="utf-8")
    out = tmp_path / "out"
    r = run_cli("archive", root, "--out", out, "--plots", "0")
    assert r.returncode == 1, r.stderr[-2000:]
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    by = {e["folder"]: e for e in report["experiments"]}
    for exp in ("a", "b"):
        [row] = by[exp]["reproduction"]
        assert row["file"] == "trans_beam5.txt" and row["identical"] == row["compared"] == 40
    assert "trans_beam1.txt" in json.dumps(by["b"]["not_done"])
    roles = {a["file"]: a["role"] for a in report["inventory"]}
    assert roles["a/notes.txt"].startswith("not an output of experiment a/encdec_: unreadable")


def test_plan_only_then_plan_gives_the_same_report(lab, tmp_path):
    """The documented round trip on this lab too: its packed runs, its outputs and score
    file of any name, its two states in one folder, its post-processed output."""
    planned = tmp_path / "planned"
    r = run_cli("archive", lab["root"], "--out", planned, "--plan-only", "--plots", "0")
    assert r.returncode == 0, r.stderr[-2000:]
    out = tmp_path / "run"
    r = run_cli(
        "archive", lab["root"], "--out", out, "--plan", planned / "plan.toml", "--plots", "0"
    )
    assert r.returncode == lab["run"].returncode, r.stderr[-2000:]
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert without_origin(report) == without_origin(lab["report"])
    assert report["inventory"] == lab["report"]["inventory"]
