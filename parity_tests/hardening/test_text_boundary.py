"""One boundary for every text read (issue 47, item 2): the files that were read whole and
unchecked -- ``interactive_stdin.txt`` beside a recorded transcript, ``archive --test-sets
FILE`` -- go through the bounded line reader: a byte that is not UTF-8 is one line naming
the file and the byte, a line over the limit is refused before it is held."""

import json
import shutil

import pytest

from groundhog_port.cli import printed_outputs
from groundhog_port.errors import LegacyInputError
from groundhog_port.tasks.archive import read_test_sets
from groundhog_port.untrusted import max_line_bytes, read_text


def test_interactive_stdin_not_utf8_is_one_line(legacy_root, tmp_path):
    """``interactive_stdin.txt`` with a byte 0xff beside a recorded transcript: one
    :class:`LegacyInputError` naming it and the byte (was a UnicodeDecodeError traceback);
    the recorded one reads."""
    recorded = legacy_root.parent / "pending_traces" / "user_outputs_search"
    d = tmp_path / "outputs"
    d.mkdir()
    shutil.copyfile(recorded / "sample_interactive_stdout.txt", d / "sample_interactive_stdout.txt")
    case = legacy_root / "search"
    (d / "interactive_stdin.txt").write_bytes(b"un \xff deux\n")
    with pytest.raises(LegacyInputError, match=r"interactive_stdin.txt: line 1: not valid UTF-8 "
                       r"\(byte 0xff at column 4\)"):  # fmt: skip
        printed_outputs.discover([d], case / "test.en", case / "test.fr", (), case)
    shutil.copyfile(recorded / "interactive_stdin.txt", d / "interactive_stdin.txt")
    found = printed_outputs.discover([d], case / "test.en", case / "test.fr", (), case)
    assert found and all(p.path.name == "sample_interactive_stdout.txt" for p in found)


def test_test_sets_mapping_bounded(legacy_root, tmp_path):
    """``--test-sets FILE``: a Latin-1 byte is one line naming the mapping; a line over the
    line limit is refused before it is held; a good mapping reads."""
    root = tmp_path / "root"
    (root / "exp").mkdir(parents=True)
    mapping = tmp_path / "sets.txt"
    mapping.write_bytes(b"exp caf\xe9.en\n")
    with pytest.raises(LegacyInputError, match=r"sets.txt: line 1: not valid UTF-8 \(byte 0xe9"):
        read_test_sets(mapping, root)
    mapping.write_bytes(b"# " + b"x" * (max_line_bytes() + 1) + b"\n")
    with pytest.raises(LegacyInputError, match="longer than .* bytes"):
        read_test_sets(mapping, root)
    shutil.copyfile(legacy_root / "search" / "test.en", tmp_path / "t.en")
    mapping.write_text("exp t.en  # the test set\r\n", encoding="utf-8")
    assert read_test_sets(mapping, root) == {"exp": (tmp_path / "t.en", None)}


def test_read_text_universal_newlines(tmp_path):
    """:func:`read_text` reads ``\\r\\n`` and ``\\r`` as ``\\n``, as ``Path.read_text`` did."""
    p = tmp_path / "t.txt"
    p.write_bytes(b"a\r\nb\rc\n")
    assert read_text(p) == p.read_text(encoding="utf-8") == "a\nb\nc\n"


# ---------------------------------------------------------------------------------------------
# sizes taken from content: scoring's attention, plots
# ---------------------------------------------------------------------------------------------
def test_score_of_a_pair_quadratic_in_its_length_is_refused_first(legacy_root, tmp_path):
    """One pair of 8,000 x 8,000 one-letter words (32 KB of input, within the line limit)
    would hold 64 M attention cells (+560 MiB): refused in one line before any work; a pair
    of ordinary length scores."""
    from parity_tests.support.inprocess import run_cli

    case = legacy_root / "search"
    src, trg = tmp_path / "s.en", tmp_path / "t.fr"
    src.write_text(" ".join(["a"] * 8000) + "\n", encoding="utf-8")
    trg.write_text(" ".join(["b"] * 8000) + "\n", encoding="utf-8")
    common = ("--state", case / "search_state.pkl", case / "search_model.npz")
    r = run_cli("score", "--mode", "batch", "--allow-unk", "--src", src, "--trg", trg, *common)
    assert r.returncode == 2, r.stderr[-500:]
    assert "attention weights of 1 pair(s) of 8001 x 8001 words" in r.stderr
    assert "parse budget" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("score", "--mode", "batch", "--allow-unk", "--src", case / "test.en",
                "--trg", case / "test.fr", *common)  # fmt: skip
    assert r.returncode == 0 and len(r.stdout.split()) == 40


def test_plots_capped_in_words(tmp_path, caplog, monkeypatch):
    """A 200 x 200-word attention plot (800 bytes of input; about +1.5 GiB drawn whole) is
    drawn for the first 100 words a side, with one warning: the image is the size of a
    100-word plot.  A grConv tree longer than its cap likewise (the cap lowered to 6 here:
    the tree's drawing time grows with the square of its words)."""
    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    import numpy as np

    from groundhog_port.tasks import plots

    words = [f"w{i}" for i in range(200)]
    big = plots.plot_alignment(np.full((200, 200), 1 / 200), words, words, tmp_path / "b.png")
    cap = words[: plots.MAX_PLOT_WORDS]
    capped = np.full((plots.MAX_PLOT_WORDS, plots.MAX_PLOT_WORDS), 1 / 200)
    ref = plots.plot_alignment(capped, cap, cap, tmp_path / "ref.png")
    assert _png_size(big) == _png_size(ref)
    assert caplog.text.count("capped at 100 words a side") == 1
    monkeypatch.setattr(plots, "MAX_TREE_WORDS", 6)
    tree = plots.plot_grconv_tree(np.full((11, 12, 3), 1 / 3), words[:12], tmp_path / "t.png")
    ref = plots.plot_grconv_tree(np.full((5, 6, 3), 1 / 3), words[:6], tmp_path / "r.png")
    assert _png_size(tree) == _png_size(ref)
    assert caplog.text.count("trees are capped at 6 words") == 1


def _png_size(path):
    import struct

    data = path.read_bytes()
    return struct.unpack(">II", data[16:24])


def test_multi_bleu_bounded_on_one_long_line(tmp_path):
    """``bleu --multi-bleu`` on one line of 1 M tokens (6.8 MB): refused at the line limit
    in one line, exit 2, as the sacrebleu path refuses it (it read the whole file and took
    +675 MiB and a minute)."""
    from parity_tests.support.inprocess import run_cli

    line = (" ".join(f"w{i % 1000}" for i in range(1_000_000)) + "\n").encode()
    hyp, ref = tmp_path / "hyp.txt", tmp_path / "ref.txt"
    hyp.write_bytes(line)
    ref.write_bytes(line)
    for extra in (["--multi-bleu"], []):
        r = run_cli("bleu", "--hyp", hyp, "--ref", ref, *extra)
        assert r.returncode == 2, r.stderr[-300:]
        assert "line 1 is longer than" in r.stderr and "Traceback" not in r.stderr


def test_beam_from_a_file_name_is_capped(legacy_root, tmp_path, caplog):
    """``trans_beam7000.txt`` (a beam no sample.py run reached: some 2 GiB to search) is not
    believed: one warning, and its settings are matched by content (the recorded beam-10
    lines, which beam 5 gives too on this model: the earliest is taken) instead of
    searching at beam 7000."""
    from groundhog_port.tasks.reproduce import MAX_NAMED_BEAM, parse_trans_name
    from parity_tests.support.inprocess import run_cli

    assert MAX_NAMED_BEAM == 500 and parse_trans_name("trans_beam500.txt")[0].beam_size == 500
    case = tmp_path / "exp"
    case.mkdir()
    s = legacy_root / "search"
    for name in ("search_state.pkl", "search_model.npz", "vocab.en.pkl", "ivocab.en.pkl",
                 "vocab.fr.pkl", "ivocab.fr.pkl", "test.en", "test.fr"):  # fmt: skip
        (case / name).write_bytes((s / name).read_bytes())
    lines = (s / "trans_beam10.txt").read_bytes().splitlines(keepends=True)
    (case / "trans_beam7000.txt").write_bytes(b"".join(lines))
    r = run_cli("reproduce", "--case", case, "--json")
    assert "its name says beam 7000, more than the 500" in r.stderr
    (row,) = json.loads(r.stdout)["files"]
    assert row["settings"]["beam_size"] in (5, 10) and row["identical"] == row["compared"] == 40
