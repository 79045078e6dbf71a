"""``groundhog-port parity``'s own options, given on its command line (issue 53, item 2;
``tools/flag_table.py``): each changes which recording is compared with what, and so the
report -- the rows it holds, their columns, the exit status."""

import json
import shutil

import pytest

from groundhog_port.cli.main import main
from parity_tests.support.cases import LEGACY_ROOT, PENDING_ROOT
from parity_tests.support.fuzzing import run_cli_inprocess

CASE = LEGACY_ROOT / "search"
OUTPUTS = PENDING_ROOT / "user_outputs_search"


def _parity(*argv):
    return run_cli_inprocess(main, ["parity", *map(str, argv)])


@pytest.fixture()
def case():
    if not (CASE / "trace.h5").is_file():
        pytest.skip(f"the shared search recording is not at {CASE}")
    return CASE


def test_outputs_folder_and_matching(case, tmp_path):
    """``--outputs DIR --outputs-matching GLOB``: the printed outputs of that folder (and of
    the one found beside the case) whose name matches, and only those, are compared (one row
    each, where each folder holds 7)."""
    if not (OUTPUTS / "sample_beam5_verbose_stdout.txt").is_file():
        pytest.skip(f"the printed outputs are not at {OUTPUTS}")
    mine = tmp_path / "my_outputs"  # a folder of the user's: only --outputs leads there
    shutil.copytree(OUTPUTS, mine)
    report = tmp_path / "r.json"
    rc, out, err = _parity("--case", case, "--outputs", mine, "--outputs-matching",
                           "sample_beam5_verbose*", "--only", "outputs", "--json", report)  # fmt: skip
    assert rc == 0, out[-2000:] + err
    rows = [r["quantity"] for r in json.loads(report.read_text())["rows"]]
    assert sorted(q.split(" (")[0] for q in rows) == [
        "outputs/my_outputs/sample_beam5_verbose_stdout.txt",
        "outputs/user_outputs_search/sample_beam5_verbose_stdout.txt",  # found beside the case
    ], rows


def test_float64_reference_adds_the_noise_columns(case):
    """``--float64-reference``: the report also shows, per quantity, the port's own float32
    noise and Theano's distance from the float64 shadow."""
    plain = _parity("--case", case, "--only", "repr")
    wide = _parity("--case", case, "--only", "repr", "--float64-reference")
    assert plain[0] == wide[0] == 0, plain[2] + wide[2]
    assert len(wide[1].splitlines()[0]) > len(plain[1].splitlines()[0])
    assert "float64" in wide[1] and "float64" not in plain[1]


def test_source_and_target_name_the_test_set(case, tmp_path):
    """``--source`` / ``--target``: the test files the recording's ids are compared with (the
    original's parse of its test set, ``pairs/src_ids`` / ``trg_ids``): the recorded files,
    elsewhere and renamed, pass; the same lines in another order fail."""
    sets = tmp_path / "sets"
    sets.mkdir()
    for name, side in (("test.en", "src"), ("test.fr", "trg")):
        lines = (case / name).read_text(encoding="utf-8").splitlines(True)
        (sets / f"{side}.txt").write_text("".join(lines), encoding="utf-8")
        (sets / f"{side}_reversed.txt").write_text("".join(lines[::-1]), encoding="utf-8")
    argv = ["--case", case, "--only", "pairs"]
    rc, out, err = _parity(*argv, "--source", sets / "src.txt", "--target", sets / "trg.txt")
    assert rc == 0, out[-2000:] + err
    for flag, side in (("--source", "src"), ("--target", "trg")):
        rc, out, err = _parity(*argv, flag, sets / f"{side}_reversed.txt")
        assert rc == 1 and f"pairs/{side}_ids" in out and "FAIL" in out, out[-2000:] + err


def test_checkpoint_is_compared_with_the_recording(case, tmp_path):
    """``--checkpoint DIR``: an export of the recorded model passes the recording's rows."""
    out = tmp_path / "x"
    rc, _, err = run_cli_inprocess(main, ["export", "--format", "safetensors", "--state",
                                          str(case / "search_state.pkl"),
                                          str(case / "search_model.npz"), "--out", str(out)])  # fmt: skip
    assert rc == 0, err
    rc, text, err = _parity("--checkpoint", out, "--trace", case / "trace.h5", "--only", "repr")
    assert rc == 0, text[-2000:] + err
