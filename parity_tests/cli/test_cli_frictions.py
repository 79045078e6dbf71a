"""The command-line frictions of issue 43, item 6, each as a user met it: ``plot-training``
options in any order, a state key that is a flag named with its flag, a misspelt option with
its suggestion, a FIFO named as a FIFO by every command, ``reproduce`` naming the settings a
file name implies and the reference beside the source, ``archive --dpi/--format``.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from groundhog_port.cli.main import COMMANDS, main
from parity_tests.support.cases import FIXTURES, LEGACY_ROOT
from parity_tests.support.fuzzing import run_cli_inprocess

SEARCH = LEGACY_ROOT / "search"
REPO = Path(__file__).resolve().parents[2]


def _run(*argv, cwd=None):
    return run_cli_inprocess(main, ["--threads", "1", *map(str, argv)], cwd=cwd)


def _need(path):
    if not path.exists():
        pytest.skip(f"recorded case file {path} not found (set GROUNDHOG_LEGACY_TRACES)")
    return path


# ---------------------------------------------------------------------------------------
# plot-training: options in any order
# ---------------------------------------------------------------------------------------
@pytest.fixture
def two_timings(tmp_path):
    timing = _need(SEARCH / "search_timing.npz")
    pytest.importorskip("matplotlib")
    a, b = tmp_path / "a_timing.npz", tmp_path / "b_timing.npz"
    shutil.copy(timing, a)
    shutil.copy(timing, b)
    return a, b


@pytest.fixture
def plotted(monkeypatch):
    """What ``tasks.curves.plot`` was called with (the real plot still runs)."""
    from groundhog_port.tasks import curves

    calls = []
    real = curves.plot

    def spy(paths, out, labels=None, **kw):
        calls.append(([str(p) for p in paths], labels))
        return real(paths, out, labels=labels, **kw)

    monkeypatch.setattr(curves, "plot", spy)
    return calls


@pytest.mark.parametrize(
    "form",
    [
        "--out c.png --labels a b A B",  # the issue's: --labels swallows the files
        "A B --out c.png --labels a b",  # the documented form
        "--label a --out c.png A --label b B",  # one --label per file
    ],
)
def test_plot_training_takes_options_in_any_order(tmp_path, two_timings, plotted, form):
    """``--out c.png --labels a b a.npz b.npz`` said "the following arguments are required:
    timings" on main; now the four words after --labels are 2 labels then 2 files."""
    words = {"A": two_timings[0], "B": two_timings[1], "c.png": tmp_path / "c.png"}
    rc, out, err = _run("plot-training", *(words.get(w, w) for w in form.split()))
    assert rc == 0, err
    assert plotted == [([str(two_timings[0]), str(two_timings[1])], ["a", "b"])]
    assert (tmp_path / "c.png").stat().st_size > 1000


@pytest.mark.parametrize(
    "form, says",
    [
        ("--out c.png --labels a b c A B", "no timing file is left"),
        ("A --out c.png --labels a b B", "3 labels (a b"),
        ("A B --out c.png --labels a b --label c", "not both"),
    ],
)
def test_plot_training_ambiguous_labels_are_one_line(tmp_path, two_timings, form, says):
    words = {"A": two_timings[0], "B": two_timings[1], "c.png": tmp_path / "c.png"}
    rc, out, err = _run("plot-training", *(words.get(w, w) for w in form.split()))
    assert rc == 2
    [line] = err.strip().splitlines()
    assert says in line and " error: " in line, err
    assert not (tmp_path / "c.png").exists()


# ---------------------------------------------------------------------------------------
# a state key that is an option, a misspelt option
# ---------------------------------------------------------------------------------------
def _translate(tmp_path, *extra):
    _need(SEARCH / "trace.h5")
    source = tmp_path / "t.en"
    source.write_text("".join((SEARCH / "test.en").read_text().splitlines(True)[:2]))
    return _run(
        "translate",
        "--state",
        SEARCH / "search_state.pkl",
        SEARCH / "search_model.npz",
        "--source",
        source,
        "--trans",
        tmp_path / "out.txt",
        "--beam-search",
        "--beam-size",
        "10",
        *extra,
    )


@pytest.mark.parametrize(
    "change, use",
    [
        ("beam_size=5", "give --beam-size 5"),
        ("beam-size=5", "give --beam-size 5"),
        ("normalize=True", "give --normalize"),
        ("--changes=seqlen=50,ignore_unk=True", "give --ignore-unk"),
    ],
)
def test_a_state_key_that_is_an_option_names_the_option(tmp_path, change, use):
    """``beam_size=5`` among the changes warned "no known key is close" and ran at beam 10;
    now one line naming the option to give, exit 2, nothing written."""
    rc, out, err = _translate(tmp_path, change)
    assert rc == 2, err
    [line] = err.strip().splitlines()
    assert use in line and "is not a state key but the option" in line, line
    assert not (tmp_path / "out.txt").exists()


def test_state_keys_are_still_changes(tmp_path):
    """A real state key is no option: it is applied, and the run goes on."""
    rc, out, err = _translate(tmp_path, "seqlen=50")
    assert rc == 0, err
    assert len((tmp_path / "out.txt").read_text().splitlines()) == 2


@pytest.mark.parametrize(
    "command, words, suggested",
    [
        ("translate", ["--beamsize", "5"], "--beam-size"),
        ("translate", ["--normalise"], "--normalize"),
        ("reproduce", ["--archive-trans=x"], "--archived-trans"),
        ("plot-training", ["a.npz", "--out", "c.png", "--window-size", "3"], "--window"),
    ],
)
def test_a_misspelt_option_gets_the_closest_one(command, words, suggested):
    rc, out, err = _run(command, *words)
    assert rc == 2
    assert f"(did you mean {suggested}?)" in err and "unrecognized arguments" in err, err


def _single_file_reproduce(source, archived, *flags):
    from parity_tests.support.inprocess import run_cli

    fx = FIXTURES / "search"
    return run_cli(
        "reproduce", "--state", fx / "search_state.pkl", "--model", fx / "search_model.npz",
        "--source", source, "--archived-trans", archived, *flags,
    )  # fmt: skip


def test_reproduce_names_a_pipe_as_a_pipe(tmp_path):
    """``reproduce --source <(zcat x.gz)`` (a FIFO) says it is one and what to do, instead
    of "file not found"."""
    import os

    fifo = tmp_path / "fd63"
    os.mkfifo(fifo)
    r = _single_file_reproduce(fifo, FIXTURES / "search" / "trans_beam10.txt", "--beam-size", "10")
    assert r.returncode == 2 and "is a FIFO (named pipe)" in r.stderr
    assert "pass the .gz file itself" in r.stderr and "file not found" not in r.stderr


def test_reproduce_single_file_takes_the_same_stem_reference_and_names_flag_mismatch():
    """Without --ref the reference is ``test.fr`` beside ``test.en`` (BLEU against it is
    printed, not "archived-ref -"); ``trans_beam10.txt`` reproduced with --beam-size 5
    --normalize is said: its name says beam 10."""
    r = _single_file_reproduce(
        FIXTURES / "search" / "test.en", FIXTURES / "search" / "trans_beam10.txt", "--beam-size", "5",
        "--normalize",
    )  # fmt: skip
    assert "archived-ref -" not in r.stdout and "archived-ref 33.30" in r.stdout, r.stdout
    assert "trans_beam10.txt: its name says beam 10, the flags beam 5, normalize" in r.stderr


def test_archive_dpi_sets_the_plots_resolution(tmp_path):
    """``archive --dpi 200`` draws its attention plots at twice the pixels of ``--dpi 100``."""
    import struct

    from parity_tests.support.inprocess import run_cli

    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    root = tmp_path / "root" / "exp"
    root.mkdir(parents=True)
    for p in (FIXTURES / "search").iterdir():
        shutil.copyfile(p, root / p.name)
    sizes = []
    for dpi in ("100", "200"):
        out = tmp_path / f"out{dpi}"
        r = run_cli("archive", root.parent, "--out", out, "--plots", "1", "--max-sentences",
                    "2", "--dpi", dpi)  # fmt: skip
        assert r.returncode in (0, 1), r.stderr[-1500:]
        (png,) = (out / "plots").rglob("*.png")
        sizes.append(struct.unpack(">II", png.read_bytes()[16:24]))
    (w1, h1), (w2, h2) = sizes
    assert abs(w2 - 2 * w1) <= 2 and abs(h2 - 2 * h1) <= 2, sizes


# ---------------------------------------------------------------------------------------
# --help imports no torch (speed: tools/bench_startup.py; no timed test)
# ---------------------------------------------------------------------------------------
HELP_IMPORTS = """
import sys
from groundhog_port.cli.main import main
try:
    main([{argv}])
except SystemExit as exit:
    assert exit.code == 0, exit.code
print(sorted(m for m in ("torch", "matplotlib", "safetensors", "onnx") if m in sys.modules))
"""


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_imports_no_torch(command):
    """``translate/inspect/parity/reproduce/train/convert --help`` imported torch for a
    help text (14-19 s under load); now no command's --help, nor building its parser, loads
    torch (or matplotlib).  A fresh interpreter: this one has torch loaded."""
    argv = ", ".join(repr(w) for w in ([command] if command else []) + ["--help"])
    run = subprocess.run(
        [sys.executable, "-c", HELP_IMPORTS.format(argv=argv)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == "[]", run.stdout[-500:]
