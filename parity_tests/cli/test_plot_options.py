"""``plot-training``'s options, given on the command line (issue 53, item 2;
``tools/flag_table.py``): each changes the line analysis.py printed ("Average <y> is <v>
after <n> iterations for <name>", analysis.py:19-28) or the picture, and the line is
computed here from the timing file with analysis.py's formula."""

import struct

import numpy as np
import pytest

from groundhog_port.cli.main import main
from parity_tests.support.fuzzing import run_cli_inprocess

pytest.importorskip("matplotlib", reason="plot-training needs matplotlib (the plots extra)")


def _timing(legacy_root):
    return legacy_root / "search" / "search_timing.npz"


def _expected(timing, y, window, start, finish, hours, name):
    """analysis.py: the first ``step`` updates, ``[start:finish]``, the mean of the last
    ``window`` values; on the hours axis ``(last - start) * median(last window's time_step)
    / 3600``.  Returns the line's words and the mean, with its float64 rounding bound: a
    rolling mean from cumulative sums of n terms is off the direct mean by at most
    2 n eps sum|v| / window."""
    with np.load(timing) as z:
        n = min(int(z["step"]), finish)
        values = z[y][start:n].astype(np.float64)
        time_step = z["time_step"][start:n].astype(np.float64)
    assert np.isfinite(values).all()
    mean = float(np.mean(values[-window:]))
    bound = 2 * values.size * np.finfo(np.float64).eps * float(np.abs(values).sum()) / window
    if hours:
        x = f"{(n - 1 - start) * float(np.median(time_step[-window:])) / 3600.0:g} hours"
    else:
        x = f"{n - start} iterations"
    return f"after {x} for {name}", mean, bound


def _line(stdout, y):
    (line,) = [s for s in stdout.splitlines() if s.startswith(f"Average {y} is ")]
    words = line.split()
    return " ".join(words[4:]), float(words[3])


@pytest.mark.parametrize(
    "options",
    [
        dict(y="cost", window=50, start=0, finish=3000000, hours=False, name="a"),
        dict(y="log2_p_word", window=100, start=200, finish=1000, hours=False, name="b"),
        dict(y="log2_p_expl", window=20, start=100, finish=700, hours=True, name="c"),
    ],
    ids=["y-window-label", "start-finish", "hours"],
)
def test_the_printed_average_is_analysis_pys(legacy_root, tmp_path, options):
    o = options
    argv = ["plot-training", _timing(legacy_root), "--out", tmp_path / "c.svg", "--y", o["y"],
            "--window", o["window"], "--start", o["start"], "--finish", o["finish"],
            "--label", o["name"]] + (["--hours"] if o["hours"] else [])  # fmt: skip
    rc, out, err = run_cli_inprocess(main, [str(a) for a in argv])
    assert rc == 0, err
    words, mean = _line(out, o["y"])
    want_words, want_mean, bound = _expected(_timing(legacy_root), **o)
    assert words == want_words
    assert abs(mean - want_mean) <= bound, (mean, want_mean, bound)


def _png_size(path):
    """Width and height from the PNG's IHDR chunk."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize("command", ["plot-training", "score"])
def test_dpi_sets_the_pictures_pixels(legacy_root, tmp_path, command):
    """``--dpi N``: the picture is its size in inches times N pixels (8 x 5 inches for the
    training curves; the alignment plots' size depends on the sentence, so it is the ratio
    of two runs' widths that is checked)."""
    if command == "plot-training":
        sizes = []
        for dpi in (40, 80):
            out = tmp_path / f"c{dpi}.png"
            argv = ["plot-training", _timing(legacy_root), "--out", out, "--dpi", dpi]
            rc, _, err = run_cli_inprocess(main, [str(a) for a in argv])
            assert rc == 0, err
            sizes.append(_png_size(out))
        assert sizes == [(320, 200), (640, 400)]
        return
    d = legacy_root / "search"
    for name in ("test.en", "test.fr"):
        (tmp_path / name).write_text((d / name).read_text().splitlines()[0] + "\n")
    widths = []
    for dpi in (40, 80):
        argv = ["score", "--state", d / "search_state.pkl", d / "search_model.npz", "--mode",
                "txt", "--src", tmp_path / "test.en", "--trg", tmp_path / "test.fr",
                "--allow-unk", "--plot-alignment", tmp_path / f"p{dpi}", "--dpi", dpi]  # fmt: skip
        rc, _, err = run_cli_inprocess(main, [str(a) for a in argv])
        assert rc == 0, err
        widths.append(_png_size(tmp_path / f"p{dpi}" / "align_0001.png")[0])
    assert abs(widths[1] - 2 * widths[0]) <= 1, widths  # rounding to whole pixels


def test_format_chooses_the_picture_format(legacy_root, tmp_path):
    """``--format svg`` on a name without a suffix: an SVG (the default would be a PNG)."""
    out = tmp_path / "curves"
    argv = ["plot-training", _timing(legacy_root), "--out", out, "--format", "svg"]
    rc, _, err = run_cli_inprocess(main, [str(a) for a in argv])
    assert rc == 0, err
    assert out.read_bytes().lstrip().startswith(b"<?xml")


def test_tree_threshold_leaves_out_the_light_edges(tmp_path):
    """``score --plot-tree DIR --tree-threshold W``: the grConv tree of a sentence draws an
    edge for each gate weight above W and none other (tree.py's threshold, :131-151): five
    edges per node, ``w_new`` three times (into and out of its merge point), ``w_left`` and
    ``w_right`` once; counted in the SVG (one ``line2d`` group per edge)."""
    import re

    import matplotlib

    from groundhog_port.legacy.loading import open_experiment
    from groundhog_port.model.encoder import grconv_gates
    from parity_tests.support.cases import PENDING_ROOT

    case = PENDING_ROOT / "grconv"
    if not (case / "test.en").is_file():
        pytest.skip(f"the grconv recording is not at {case}")
    state, model = next(case.glob("*state.pkl")), next(case.glob("*model.npz"))
    line = (case / "test.en").read_text(encoding="utf-8").splitlines()[0]
    src, trg = tmp_path / "s.en", tmp_path / "s.fr"
    src.write_text(line + "\n", encoding="utf-8")
    trg.write_text((case / "test.fr").read_text(encoding="utf-8").splitlines()[0] + "\n")
    exp = open_experiment(state, model, data_dir=[case])
    gates = grconv_gates(exp.model, exp.parse_source(line)[0]).numpy().astype(np.float64)
    for threshold in (0.1, 0.5):
        out = tmp_path / f"t{threshold}"
        argv = ["score", "--state", state, model, "--data-dir", case, "--mode", "txt",
                "--src", src, "--trg", trg, "--allow-unk", "--plot-tree", out, "--format",
                "svg", "--tree-threshold", threshold]  # fmt: skip
        with matplotlib.rc_context({"svg.hashsalt": "fixed"}):
            rc, _, err = run_cli_inprocess(main, [str(a) for a in argv])
        assert rc == 0, err
        svg = next(out.iterdir()).read_text(encoding="utf-8")
        T = gates.shape[1]
        nodes = [gates[k - 1, t] for k in range(1, T) for t in range(k, T)]
        want = sum(3 * (w[0] > threshold) + (w[1] > threshold) + (w[2] > threshold) for w in nodes)
        assert len(re.findall(r'<g id="line2d_\d+"', svg)) == want, threshold
