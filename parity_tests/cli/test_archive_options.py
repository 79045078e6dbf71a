"""``groundhog-port archive``'s options, given on its command line (issue 53, item 2;
``tools/flag_table.py``), each on one small experiment (the shared ``search`` checkpoint, its
test set and the beam-1 translations sample.py wrote, 4 sentences): the report says what
the option chose."""

import json
import shutil

import numpy as np
import pytest

from parity_tests.support.archive import search_run
from parity_tests.support.inprocess import run_cli
from parity_tests.support.models import upper_cased_vocabularies

ARGS = ("--max-sentences", 4, "--plots", 0)


def _report(out):
    return json.loads((out / "report.json").read_text(encoding="utf-8"))


def _row(out):
    [e] = _report(out)["experiments"]
    [row] = e["reproduction"]
    return e, row


@pytest.fixture()
def experiment(legacy_root, tmp_path):
    return search_run(legacy_root, tmp_path / "root" / "exp")


def test_fresh_redoes_what_the_cache_holds(experiment, tmp_path):
    """A second run over the same inputs takes the result from OUT/cache; ``--fresh`` re-does
    it (and says none came from the cache)."""
    out = tmp_path / "out"
    for extra, cached in (([], 0), ([], 1), (["--fresh"], 0)):
        r = run_cli("archive", experiment.parent, "--out", out, *ARGS, *extra)
        assert r.returncode == 0, r.stderr[-2000:]
        assert len(_report(out)["from_cache"]) == cached, (extra, _report(out)["from_cache"])


def test_changes_reach_every_experiment(experiment, tmp_path):
    """``--changes "indx_word_target='...'"`` (an upper-cased target vocabulary): the outputs
    re-done are the archived ones upper-cased, so none is identical."""
    upper, _ = upper_cased_vocabularies(experiment / "ivocab.fr.pkl", tmp_path)
    out = tmp_path / "out"
    r = run_cli("archive", experiment.parent, "--out", out, *ARGS,
                "--changes", f"indx_word_target='{upper}'")  # fmt: skip
    assert r.returncode != 2, r.stderr[-2000:]
    _, row = _row(out)
    assert row["identical"] == 0 and row["compared"] == 4, row


def test_source_and_ref_name_the_test_set(experiment, tmp_path):
    """``--source S --ref R``: the outputs are compared on S and scored against R (here R is
    the archived translations themselves: BLEU 100; by default the reference would be S's
    same-stem target file, which does not exist here)."""
    src = tmp_path / "given.en"
    src.write_bytes((experiment / "test.en").read_bytes())
    ref = tmp_path / "archived_as_reference.txt"
    ref.write_bytes((experiment / "trans_beam1.txt").read_bytes())
    out = tmp_path / "out"
    r = run_cli("archive", experiment.parent, "--out", out, *ARGS, "--source", src, "--ref", ref)
    assert r.returncode == 0, r.stderr[-2000:]
    _, row = _row(out)
    assert row["bleu"]["archived_vs_reference"]["multi_bleu"] == 100.0, row


def test_snapshot_chooses_the_model(experiment, tmp_path):
    """``--snapshot 1``: the output is re-done with ``search_model1.npz`` (GroundHog's
    ``overwrite=0`` snapshot naming, mainLoop.py:230-236), here weights halved, which does
    not reproduce it; by default the snapshot whose first lines reproduce it (model0) is."""
    with np.load(experiment / "search_model.npz") as z:
        arrays = {k: z[k] for k in z.files}
    np.savez(experiment / "search_model0.npz", **arrays)
    np.savez(experiment / "search_model1.npz", **{k: v * 0.5 for k, v in arrays.items()})
    out = tmp_path / "out"
    r = run_cli("archive", experiment.parent, "--out", out, *ARGS, "--snapshot", "1")
    assert r.returncode in (0, 1), r.stderr[-2000:]
    _, row = _row(out)
    assert row.get("snapshot", "").endswith("search_model1.npz") and row["identical"] < 4, row


def test_parity_groups_choose_the_recorded_groups(legacy_root, experiment, tmp_path):
    """``--parity-groups repr``: where the experiment has a trace.h5, only its ``repr`` rows are
    compared (by default every recorded group is)."""
    shutil.copyfile(legacy_root / "search" / "trace.h5", experiment / "trace.h5")
    out = tmp_path / "out"
    r = run_cli("archive", experiment.parent, "--out", out, *ARGS, "--parity-groups", "repr")
    assert r.returncode == 0, r.stderr[-2000:]
    e, _ = _row(out)
    groups = {r["quantity"].split("/")[0] for r in e["parity"]["rows"]}
    assert groups == {"repr"}, e["parity"]


def test_device_is_used(experiment, tmp_path):
    """``--device cuda:99``: no machine here has it, so the experiment is not done (exit 1,
    its reason in the log); on the default CPU it would be."""
    out = tmp_path / "out"
    r = run_cli("archive", experiment.parent, "--out", out, *ARGS, "--device", "cuda:99")
    assert r.returncode == 1 and "--device cuda:99" in r.stderr, r.stderr[-2000:]
