"""``score --mode batch`` on GroundHog ``.h5`` corpora: parity with score.py on the training
bitext, the throughput / progress report, and ``--resume`` after an interruption.

Golden data: ``<case>/scores_h5_train20.txt``, score.py's stdout for the first 20 batches of
``data/binarized_text.shuffled.{en,fr}.h5`` (``"{:.5e}"`` per pair).
"""

import logging
import math
import re

import numpy as np
import pytest

from groundhog_port.cli import main as cli
from parity_tests.support.command_lines import score_args
from parity_tests.support.inprocess import journal_header
from parity_tests.support.models import legacy_files

H5_SRC = "data/binarized_text.shuffled.en.h5"
H5_TRG = "data/binarized_text.shuffled.fr.h5"
N_PAIRS = 3000
BS = 32
#: |port - recorded| <= REL * |recorded| + ABS + half a unit of the last printed digit
REL, ABS = 1e-5, 1e-5


#: small matrices: one thread is much faster than two threads competing for 2 cores
pytestmark = pytest.mark.usefixtures("one_thread")


def _score_argv(root, case, out, *extra):
    state, model = legacy_files(root / case)
    argv = score_args(
        "batch", root / H5_SRC, root / H5_TRG, "--scores", out, *extra, state=state, model=model
    )
    return [str(a) for a in argv]


def _read_scores(path):
    return [float(x) for x in path.read_text().split()]


def _check_close(port, recorded_lines):
    """Compare printed ``{:.5e}`` numbers; the non-finite pattern must be identical."""
    assert len(port) == len(recorded_lines)
    bad, worst = [], 0.0
    for i, (a, text) in enumerate(zip(port, recorded_lines)):
        b = float(text)
        if not math.isfinite(b) or not math.isfinite(a):
            if not (str(a) == str(b)):  # nan == nan, -inf == -inf
                bad.append((i + 1, a, text))
            continue
        exp10 = int(text.lower().split("e")[1])
        half_ulp = 0.5 * 10.0 ** (exp10 - 5)
        err = abs(a - b)
        worst = max(worst, err / (REL * abs(b) + ABS + half_ulp))
        if err > REL * abs(b) + ABS + half_ulp:
            bad.append((i + 1, a, text))
    assert not bad, (
        f"{len(bad)} of {len(port)} scores differ (line, port, recorded); first: "
        f"{bad[:5]}; worst error / tolerance {worst:.3g}"
    )
    return worst


@pytest.mark.parametrize("case", ["search", "encdec"])
def test_first_20_batches_match_score_py(legacy_root, tmp_path, case):
    golden = legacy_root / case / "scores_h5_train20.txt"
    if not golden.is_file():
        pytest.skip(f"{golden} not recorded")
    out = tmp_path / "scores.txt"
    assert cli.main(_score_argv(legacy_root, case, out, "--n-batches", "20")) == 0
    port = _read_scores(out)
    recorded = golden.read_text().split()
    assert len(port) == 20 * BS
    _check_close(port, recorded)
    assert [math.isnan(x) for x in port] == [text == "nan" for text in recorded]


@pytest.fixture(scope="module")
def full_run(legacy_root, tmp_path_factory, one_thread):
    """One uninterrupted run over the whole training bitext (search case)."""
    out = tmp_path_factory.mktemp("h5") / "full.txt"
    assert cli.main(_score_argv(legacy_root, "search", out)) == 0
    return out


def test_whole_corpus_progress_and_throughput(legacy_root, tmp_path, full_run, caplog, capsys):
    lines = full_run.read_text().splitlines()
    assert len(lines) == N_PAIRS
    assert all(re.fullmatch(r"-?\d\.\d{5}e[+-]\d\d|nan|-?inf", x) for x in lines)
    assert not full_run.with_name("full.txt.partial").exists()
    out = tmp_path / "s.txt"
    with caplog.at_level(logging.INFO):
        assert (
            cli.main(_score_argv(legacy_root, "search", out, "--n-batches", "3", "--progress")) == 0
        )
    err = capsys.readouterr().err
    assert f"{3 * BS}/{3 * BS} [" in err  # the progress bar knows the total
    assert re.search(r"[\d.]+ pairs/s\]", err)
    assert any(
        re.fullmatch(
            rf"scored {3 * BS} pairs( on \d worker processes)?, [\d.]+ pairs/s", r.getMessage()
        )
        for r in caplog.records
    )
    assert out.read_text().splitlines() == lines[: 3 * BS]


def _interrupted(root, path, lines, k, last_fragment="-1.23"):
    """What the Journal of ``_score_argv(root, "search", path)`` leaves after an interruption
    while writing line ``k + 1``: its fingerprint line, ``k`` complete lines with their
    ``"batch size"`` records, and half a line."""
    partial = path.with_name(path.name + ".partial")
    journal = path.with_name(path.name + ".partial.journal")
    partial.write_text("".join(line + "\n" for line in lines[:k]) + last_fragment)
    journal.write_text(
        journal_header(*_score_argv(root, "search", path))
        + "".join(f"{i // BS} {BS}\n" for i in range(k))
    )
    return partial, journal


def test_resume_is_byte_identical(legacy_root, tmp_path, full_run, caplog):
    lines = full_run.read_text().splitlines()
    out = tmp_path / "scores.txt"
    k = 5 * BS + 7  # inside batch 6: that batch is scored again
    partial, journal = _interrupted(legacy_root, out, lines, k)
    with caplog.at_level(logging.INFO):
        assert cli.main(_score_argv(legacy_root, "search", out, "--resume")) == 0
    assert out.read_bytes() == full_run.read_bytes()
    assert not partial.exists() and not journal.exists()
    msgs = [r.getMessage() for r in caplog.records]
    assert any(f"after {5 * BS} of {N_PAIRS} pairs (5 batches)" in m for m in msgs), msgs
    assert any(f"scored {N_PAIRS - 5 * BS} pairs (and kept {5 * BS} " in m for m in msgs), msgs


def test_resume_keeps_whole_batches_only(legacy_root, tmp_path, full_run):
    """Kept lines are not recomputed (marked here), the partly written batch is."""
    lines = full_run.read_text().splitlines()
    marked = [f"KEPT{i}" for i in range(len(lines))]
    out = tmp_path / "scores.txt"
    k = 3 * BS + 20
    _interrupted(legacy_root, out, marked, k)
    assert cli.main(_score_argv(legacy_root, "search", out, "--resume")) == 0
    got = out.read_text().splitlines()
    assert got[: 3 * BS] == marked[: 3 * BS]
    assert got[3 * BS :] == lines[3 * BS :]


def test_resume_without_partial_starts_over(legacy_root, tmp_path, full_run):
    out = tmp_path / "scores.txt"
    assert cli.main(_score_argv(legacy_root, "search", out, "--resume", "--n-batches", "2")) == 0
    assert out.read_text().splitlines() == full_run.read_text().splitlines()[: 2 * BS]


def test_resume_needs_scores_file(legacy_root, capsys):
    argv = _score_argv(legacy_root, "search", "x")
    i = argv.index("--scores")
    del argv[i : i + 2]
    assert cli.main(argv + ["--resume"]) == 2
    assert "--resume needs --scores" in capsys.readouterr().err


def test_non_finite_pattern_helper():
    with pytest.raises(AssertionError):
        _check_close([float("nan")], ["-1.00000e+00"])
    with pytest.raises(AssertionError):
        _check_close([-1.0002], ["-1.00000e+00"])
    _check_close([float("nan"), -1.000004], ["nan", "-1.00000e+00"])
    assert np.isclose(_check_close([-1.0], ["-1.00000e+00"]), 0.0)
