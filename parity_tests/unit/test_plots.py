"""``score --mode txt --plot-alignment DIR``: one attention heatmap per pair (Figure 3 of
Bahdanau et al.: reference (target) words down, source words across, grayscale, white = 1).

The picture tests need matplotlib (the ``plot`` extra) and skip without it; the error path
for a missing matplotlib is tested everywhere by hiding the module.
"""

import html
import sys

import numpy as np
import pytest

from groundhog_port.cli import main as cli
from groundhog_port.legacy.data import read_text_lines
from groundhog_port.tasks import plots
from parity_tests.support.command_lines import score_args
from parity_tests.support.models import legacy_files

CELL_PX = round(plots.CELL_INCHES * plots.DPI)
MPL_REASON = 'matplotlib is not installed (from a checkout: pip install -e ".[plot]")'


def _needs_matplotlib():
    pytest.importorskip("matplotlib", reason=MPL_REASON)
    import matplotlib.image

    return matplotlib.image


pytestmark = pytest.mark.usefixtures("one_thread")


def _longest_runs(mask):
    """Length of the longest run of True along the last axis, per row."""
    best = np.zeros(mask.shape[0], dtype=int)
    cur = np.zeros(mask.shape[0], dtype=int)
    for j in range(mask.shape[1]):
        cur = np.where(mask[:, j], cur + 1, 0)
        best = np.maximum(best, cur)
    return best


def heatmap_box(img):
    """(top, left, height_px, width_px) of the heatmap in an RGB(A) float image.

    The heatmap sits in the axes frame (black lines), so its height is the longest vertical
    run of dark pixels (the frame's left and right sides) and its width the longest
    horizontal one; label glyphs only make short runs.
    """
    dark = img[..., :3].mean(-1) < 0.5
    col_runs = _longest_runs(dark.T)  # per column, vertical runs
    row_runs = _longest_runs(dark)  # per row, horizontal runs
    h, w = int(col_runs.max()), int(row_runs.max())
    left = int(np.argmax(col_runs == h))
    top = int(np.argmax(row_runs == w))
    return top, left, h, w


def _score_txt_argv(root, case, *extra):
    d = root / case
    state, model = legacy_files(d)
    txt = score_args(
        "txt", d / "test.en", d / "test.fr", "--allow-unk", *extra, state=state, model=model
    )
    return [str(a) for a in ("--log-level", "WARNING", *txt)]


@pytest.mark.parametrize("rows,cols", [(3, 7), (9, 2), (5, 5)])
def test_heatmap_shape_and_colours(tmp_path, rows, cols):
    image = _needs_matplotlib()
    a = np.zeros((rows, cols))
    a[rows - 1, cols - 1] = 1.0  # one white cell, bottom right
    src = [f"s{j}" for j in range(cols - 1)] + ["<eos>"]
    trg = [f"t{i}" for i in range(rows - 1)] + ["<eos>"]
    path = plots.plot_alignment(a, src, trg, tmp_path / "a.png")
    img = image.imread(path)
    top, left, h, w = heatmap_box(img)
    # rows = target length, columns = source length (square cells, +-2 px of frame)
    assert abs(h - rows * CELL_PX) <= 2 and abs(w - cols * CELL_PX) <= 2, (h, w)
    inner = img[top + 3 : top + h - 3, left + 3 : left + w - 3, :3]
    assert inner[: CELL_PX // 2, : CELL_PX // 2].max() < 0.05  # 0 is black
    assert inner[-(CELL_PX // 2) :, -(CELL_PX // 2) :].min() > 0.95  # 1 is white
    assert np.allclose(inner[..., 0], inner[..., 1]) and np.allclose(inner[..., 1], inner[..., 2])


def test_plot_rejects_mismatched_labels(tmp_path):
    _needs_matplotlib()
    with pytest.raises(ValueError, match="alignment of shape"):
        plots.plot_alignment(np.zeros((2, 3)), ["a", "b"], ["x", "y"], tmp_path / "a.png")


@pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning")
def test_score_txt_writes_one_png_per_pair(legacy_root, tmp_path, capsys):
    image = _needs_matplotlib()
    out = tmp_path / "plots"
    assert cli.main(_score_txt_argv(legacy_root, "search", "--plot-alignment", str(out))) == 0
    scores = capsys.readouterr().out.split()
    src = read_text_lines(legacy_root / "search" / "test.en")
    trg = read_text_lines(legacy_root / "search" / "test.fr")
    assert len(scores) == len(src) == 40  # the scores are still printed
    pngs = sorted(out.glob("*.png"))
    assert [p.name for p in pngs] == [plots.plot_file_name(i, 40) for i in range(1, 41)]
    for p, s, t in zip(pngs, src, trg):
        img = image.imread(p)
        assert img.ndim == 3 and img.shape[2] in (3, 4)
        _, _, h, w = heatmap_box(img)
        n_trg, n_src = len(t.split()) + 1, len(s.split()) + 1  # <eos> on both sides
        assert round(h / CELL_PX) == n_trg, (p.name, h, n_trg)
        assert round(w / CELL_PX) == n_src, (p.name, w, n_src)


def test_encdec_has_no_alignment(legacy_root, tmp_path, capsys):
    _needs_matplotlib()
    out = tmp_path / "plots"
    assert cli.main(_score_txt_argv(legacy_root, "encdec", "--plot-alignment", str(out))) == 2
    cap = capsys.readouterr()
    assert "no attention" in cap.err and "no alignment to plot" in cap.err
    assert cap.out == "" and not out.exists()


def test_plot_needs_txt_mode(legacy_root, tmp_path, capsys):
    argv = _score_txt_argv(legacy_root, "search", "--plot-alignment", str(tmp_path / "p"))
    argv[argv.index("txt")] = "batch"
    assert cli.main(argv) == 2
    assert "--plot-alignment works with --mode txt" in capsys.readouterr().err


def test_missing_matplotlib_is_a_clear_error_before_any_work(tmp_path, monkeypatch, capsys):
    # hide matplotlib whether or not it is installed
    for name in (
        "matplotlib",
        "matplotlib.figure",
        "matplotlib.backends",
        "matplotlib.backends.backend_agg",
    ):
        monkeypatch.setitem(sys.modules, name, None)
    out = tmp_path / "plots"
    # the model and corpus do not exist: the matplotlib check must come first
    argv = [
        "score",
        "--state",
        str(tmp_path / "none_state.pkl"),
        str(tmp_path / "none.npz"),
        "--mode",
        "txt",
        "--src",
        "a",
        "--trg",
        "b",
        "--plot-alignment",
        str(out),
    ]
    assert cli.main(argv) == 2
    cap = capsys.readouterr()
    assert "matplotlib" in cap.err and "pip install matplotlib" in cap.err
    assert cap.out == "" and not out.exists()


def _svg_text(path):
    return path.read_text(encoding="utf-8")


def test_attention_plot_is_paper_ready(tmp_path):
    """Issue 26, friction 9: PNG only at a fixed 100 dpi, no colour bar or axis titles.
    Now PDF and SVG too, any dpi (the heatmap's cells scale with it), axis titles and a
    colour bar of the weights."""
    image = _needs_matplotlib()
    import matplotlib

    a = np.full((3, 4), 0.25)
    src, trg = ["le", "chat", "noir", "<eos>"], ["the", "cat", "<eos>"]
    path = plots.plot_alignment(a, src, trg, tmp_path / "a.png", dpi=300)
    _, _, h, w = heatmap_box(image.imread(path))
    cell = round(plots.CELL_INCHES * 300)
    assert abs(h - 3 * cell) <= 3 and abs(w - 4 * cell) <= 3, (h, w)
    assert (
        plots.plot_alignment(a, src, trg, tmp_path / "a.pdf", fmt="pdf")
        .read_bytes()
        .startswith(b"%PDF")
    )
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # text as <text>, searchable
        svg = _svg_text(plots.plot_alignment(a, src, trg, tmp_path / "a.svg", fmt="svg"))
    for text in (
        "source words",
        "reference words",
        "attention weight",
        "0.00",
        "1.00",
        "chat",
    ):
        assert f">{text}<" in svg, text


def test_score_plots_take_format_and_dpi(legacy_root, tmp_path, capsys):
    _needs_matplotlib()
    out = tmp_path / "plots"
    argv = _score_txt_argv(
        legacy_root, "search", "--plot-alignment", str(out), "--format", "svg", "--dpi", "150"
    )
    argv[argv.index("--src") + 1] = str(tmp_path / "two.en")
    argv[argv.index("--trg") + 1] = str(tmp_path / "two.fr")
    for name, test in (("two.en", "test.en"), ("two.fr", "test.fr")):
        lines = (legacy_root / "search" / test).read_text().splitlines()[:2]
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    import matplotlib

    with matplotlib.rc_context({"svg.fonttype": "none"}):  # text as <text>, searchable
        assert cli.main(argv) == 0
    assert sorted(p.name for p in out.iterdir()) == ["align_0001.svg", "align_0002.svg"]
    assert all(p.read_text().lstrip().startswith("<?xml") for p in out.iterdir())
    # issue 35: the rows are the reference's words (--trg), not words the model generated
    svg = _svg_text(out / "align_0001.svg")
    assert ">reference words<" in svg and "generated" not in svg
    for word in (tmp_path / "two.fr").read_text().splitlines()[0].split()[:3]:
        assert f">{html.escape(word)}<" in svg, word
    assert cli.main(_score_txt_argv(legacy_root, "search", "--dpi", "300")) == 2
    assert "--format and --dpi apply to --plot-alignment" in capsys.readouterr().err


def test_training_curves_label_and_count_what_they_show(legacy_root, tmp_path):
    """Friction 9: the y axis said "log_2 likelihood" whatever the key, NaN costs were dropped
    without a note (search_variant's log2_p_expl is NaN at 1406 updates from 4087: the rolling
    mean was NaN from there and the curve stopped), and the count was an index."""
    _needs_matplotlib()
    import matplotlib

    from groundhog_port.tasks.curves import plot
    from groundhog_port.training.files import load_timings

    timing = legacy_root / "search_variant" / "search_variant_timing.npz"
    tm = load_timings(timing)
    values = tm["log2_p_expl"][: int(tm["step"])].astype(np.float64)
    nan = np.flatnonzero(~np.isfinite(values))
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        [line] = plot([timing], tmp_path / "c.svg", window=100)
    expected = float(np.mean(values[np.isfinite(values)][-100:]))
    assert line.startswith("Average log2_p_expl is ")
    assert abs(float(line.split()[3]) - expected) < 1e-9
    assert f"after {int(tm['step'])} iterations" in line
    assert (
        f"({nan.size} non-finite values of log2_p_expl left out, the first at iteration {nan[0]})"
    ) in line
    assert nan.size == 1406 and nan[0] == 4087  # the recording, as the issue says
    svg = _svg_text(tmp_path / "c.svg")
    assert (
        "-log2 p per sentence (bits), rolling mean of 100" in svg and "log_2 likelihood" not in svg
    )
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        plot([timing], tmp_path / "cost.pdf", y="cost", dpi=300)
        plot([timing], tmp_path / "cost.svg", y="cost")
    assert (tmp_path / "cost.pdf").read_bytes().startswith(b"%PDF")
    assert "-ln p of the batch" in _svg_text(tmp_path / "cost.svg")
