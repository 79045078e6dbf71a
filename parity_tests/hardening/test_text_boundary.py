"""One boundary for every text read (issue 47, item 2): the files that were read whole and
unchecked -- ``interactive_stdin.txt`` beside a recorded transcript, ``archive --test-sets
FILE`` -- go through the bounded line reader: a byte that is not UTF-8 is one line naming
the file and the byte, a line over the limit is refused before it is held."""

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
