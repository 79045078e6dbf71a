"""Files replaced together (groundhog_port/together.py): a training checkpoint is one whole
checkpoint after a failed write, and -- through the rename journal -- after a process killed
between its renames, once :func:`finish_together` has run (``train`` runs it on start)."""

from __future__ import annotations

import os
import signal

import pytest

from groundhog_port import together
from groundhog_port.outputs import OutputError
from parity_tests.support.forking import file_size_limit, in_child

NAMES = ("m.npz", "s.pkl", "t.npz")


def _old_checkpoint(folder):
    paths = [folder / n for n in NAMES]
    for p in paths:
        p.write_bytes(b"old " + p.name.encode())
    return paths


def _write(paths, sizes):
    together.write_together(
        [(p, lambda f, n=n: f.write(b"x" * n)) for p, n in zip(paths, sizes)],
        "the old checkpoint is left as it was",
    )


def _killed_after_renames(k, paths, sizes):
    """In a child: ``_write`` whose process is SIGKILLed right after its ``k``-th rename
    of a partial file (the journal's own rename not counted)."""

    def child():
        real = os.replace
        count = [0]

        def replace(src, dst):
            real(src, dst)
            if str(src).endswith(".partial") and not str(dst).endswith(together.JOURNAL_SUFFIX):
                count[0] += 1
                if count[0] == k:
                    os.kill(os.getpid(), signal.SIGKILL)

        os.replace = replace
        _write(paths, sizes)

    _, status = in_child(child)
    return os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def test_files_replaced_together_or_not_at_all(tmp_path):
    """Past ``ulimit -f`` in the last file none of the three is replaced and no partial file
    (nor journal) is left; then all three are."""
    paths = _old_checkpoint(tmp_path)

    def limited():
        file_size_limit(1000)
        _write(paths, [10, 10, 5000])

    msg, _ = in_child(limited)
    assert msg.startswith(f"OutputError {tmp_path}/t.npz.partial: cannot write"), msg
    assert msg.endswith("the old checkpoint is left as it was"), msg
    assert [p.read_bytes() for p in paths] == [b"old " + p.name.encode() for p in paths]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(NAMES)
    _write(paths, [1, 2, 3])
    assert [p.read_bytes() for p in paths] == [b"x", b"xx", b"xxx"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(NAMES)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_killed_between_renames_then_finished(tmp_path, k):
    """SIGKILL after the ``k``-th rename leaves the journal and the partial files still to
    rename; :func:`finish_together` makes the three files the new ones (the save was complete
    on disk before the first rename), and removes the journal."""
    paths = _old_checkpoint(tmp_path)
    assert _killed_after_renames(k, paths, [1, 2, 3])
    new = [b"x", b"xx", b"xxx"]
    assert [p.read_bytes() for p in paths[:k]] == new[:k]  # split: the window this closes
    assert together.journal_of(paths[-1]).exists()
    assert sorted(p.name for p in tmp_path.glob("*.partial")) == [n + ".partial" for n in NAMES[k:]]
    assert together.finish_together(paths[-1]) == [p.resolve() for p in paths[k:]]
    assert [p.read_bytes() for p in paths] == new
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(NAMES)
    assert together.finish_together(paths[-1]) == []  # nothing left: no journal


def test_killed_before_the_journal_keeps_the_old_files(tmp_path):
    """Killed while the partial files are written (before the journal): nothing is
    renamed, and finishing finds no journal; the next save writes over the partial files."""
    paths = _old_checkpoint(tmp_path)

    def child():
        together.write_together(
            [
                (paths[0], lambda f: f.write(b"x")),
                (paths[1], lambda f: os.kill(os.getpid(), signal.SIGKILL)),
            ],
            "",
        )

    _, status = in_child(child)
    assert os.WTERMSIG(status) == signal.SIGKILL
    assert together.finish_together(paths[1]) == []
    assert [p.read_bytes() for p in paths] == [b"old " + p.name.encode() for p in paths]
    _write(paths, [1, 2, 3])
    assert [p.read_bytes() for p in paths] == [b"x", b"xx", b"xxx"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(NAMES)


@pytest.mark.parametrize(
    "journal", [b"../m.npz\n", b"m.npz\n\n", b"", b"\xff\xfe\n", b"t.npz.together\n"]
)
def test_a_journal_not_written_here_is_refused(tmp_path, journal):
    """A journal naming a path outside its folder, an empty line, nothing, undecodable
    bytes or another journal: one error, nothing renamed."""
    paths = _old_checkpoint(tmp_path)
    (tmp_path / "m.npz.partial").write_bytes(b"new")
    together.journal_of(paths[-1]).write_bytes(journal)
    with pytest.raises(OutputError, match="is not a rename journal this program wrote"):
        together.finish_together(paths[-1])
    assert paths[0].read_bytes() == b"old m.npz"


def test_files_in_two_folders_are_not_replaced_together(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(ValueError, match="in one folder"):
        together.write_together(
            [(tmp_path / "a", lambda f: None), (tmp_path / "d" / "b", lambda f: None)], ""
        )
