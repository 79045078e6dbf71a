"""Damaged files and failing outputs: one clear error, exit 2, and nothing half-written.

* The untrusted-file guard (:mod:`groundhog_port.untrusted`): whatever h5py, numpy's zip
  reader or the unpickler raises on a damaged file -- here forced by making the library
  raise exception types nobody lists -- is one error naming the file.
* Outputs under stress (:mod:`groundhog_port.outputs`): a full disk (``RLIMIT_FSIZE``, i.e.
  ``ulimit -f``, with SIGXFSZ ignored: writes fail with EFBIG as they do with ENOSPC; and a
  real 4 KiB tmpfs where the test may mount one), a second process on the same output (the
  lock), interrupted runs (``tools/interrupt.py``, a few trials).
"""

import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from groundhog_port import outputs, together
from groundhog_port.errors import LegacyInputError
from parity_tests.support.cases import LEGACY_ROOT
from parity_tests.support.command_lines import (
    FX,
    MODEL,
    STATE,
    score_args,
    source_file,
    translate_args,
)
from parity_tests.support.forking import file_size_limit, in_child
from parity_tests.support.inprocess import journal_header, run_here

REPO = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUTF8="1")
BITEXT = LEGACY_ROOT / "data" / "binarized_text.shuffled.en.h5"

#: exception types a library may raise on bad bytes that no reader lists explicitly
UNLISTED = [
    UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
    IndexError("x"),
    AttributeError("x"),
    AssertionError("x"),
    ZeroDivisionError("x"),
    SystemError("x"),
]


def _raiser(err):
    def raise_it(*args, **kwargs):
        raise err

    return raise_it


# ---------------------------------------------------------------------------------------------
# the untrusted-file guard
# ---------------------------------------------------------------------------------------------


@pytest.mark.skipif(not BITEXT.is_file(), reason=f"no .h5 bitext at {BITEXT}")
@pytest.mark.parametrize("err", UNLISTED, ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("where", ["File.__getitem__", "Dataset.__getitem__", "Dataset.dtype"])
def test_any_h5py_failure_is_one_error(where, err, monkeypatch):
    import h5py

    from groundhog_port.legacy.data import read_h5_bitext

    cls, name = where.split(".")
    monkeypatch.setattr(
        getattr(h5py, cls), name, property(_raiser(err)) if name == "dtype" else _raiser(err)
    )
    with pytest.raises(LegacyInputError) as info:
        read_h5_bitext(BITEXT)
    assert info.value.path == str(BITEXT) and type(err).__name__ in str(info.value)


@pytest.mark.skipif(not (LEGACY_ROOT / "encdec" / "trace.h5").is_file(), reason="no recorded trace")
@pytest.mark.parametrize("err", UNLISTED, ids=lambda e: type(e).__name__)
def test_any_trace_failure_is_one_error(err, monkeypatch):
    import h5py

    from groundhog_port.harness.trace import TraceFile

    path = LEGACY_ROOT / "encdec" / "trace.h5"
    with TraceFile(path) as tf:
        monkeypatch.setattr(h5py.Group, "__getitem__", _raiser(err))
        monkeypatch.setattr(h5py.Group, "__contains__", _raiser(err))
        for method in (tf.pair_indices, lambda: tf.pairs(0), tf.validate, lambda: tf.has("x")):
            with pytest.raises(LegacyInputError) as info:
                method()
            assert info.value.path == str(path)


@pytest.mark.parametrize("err", UNLISTED, ids=lambda e: type(e).__name__)
def test_any_npz_or_pickle_failure_is_one_error(err, monkeypatch):
    import legacy_states.unpickle
    from groundhog_port.legacy import checkpoint, npzguard

    # the member's data reader, as checkpoint.read_npz_arrays calls it
    monkeypatch.setattr(npzguard, "read_array", _raiser(err))
    with pytest.raises(LegacyInputError, match=type(err).__name__) as info:
        checkpoint.read_npz(MODEL)
    assert info.value.path == str(MODEL)
    monkeypatch.setattr(legacy_states.unpickle, "_finish", _raiser(err))
    with pytest.raises(LegacyInputError, match=type(err).__name__) as info:
        legacy_states.safe_load_pickle(STATE)
    assert info.value.path == str(STATE)


def test_memory_errors_are_not_hidden():
    """A MemoryError is a bug to prevent (sizes are checked first), not an input error."""
    from groundhog_port.untrusted import reading

    with pytest.raises(MemoryError):
        with reading("f.h5"):
            raise MemoryError()
    with pytest.raises(LegacyInputError, match=r"^f\.h5: damaged \(KeyError: 'x'\)$"):
        with reading("f.h5", "damaged"):
            raise KeyError("x")


# ---------------------------------------------------------------------------------------------
# the output API, in-process
# ---------------------------------------------------------------------------------------------


def test_journal_on_a_full_disk_keeps_a_resumable_prefix(tmp_path):
    out = tmp_path / "o.txt"

    def fill():
        file_size_limit(1000)
        j = outputs.Journal(out)
        for i in range(10**4):
            j.append(f"line {i} é", f"record {i}")

    msg, _ = in_child(fill)
    assert msg.startswith("OutputError ") and "cannot write" in msg and "--resume" in msg, msg
    assert not out.exists()
    j = outputs.Journal(out, resume=True)
    n = len(j.done_lines)
    assert n > 10 and j.done_lines == [f"line {i} é" for i in range(n)]
    assert j.done_records == [f"record {i}" for i in range(n)]
    j.append("last", "r")
    j.commit()
    assert out.read_text(encoding="utf-8").splitlines()[-2:] == [f"line {n - 1} é", "last"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.txt"]


def test_atomic_output_never_leaves_a_half_file(tmp_path):
    out = tmp_path / "r.json"
    out.write_text("old\n")

    def write():
        file_size_limit(1000)
        outputs.atomic_write_text(out, "x" * 5000)

    msg, _ = in_child(write)
    assert msg.startswith("OutputError ") and "left as it was" in msg, msg
    assert out.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    outputs.atomic_write_text(out, "new\n")
    assert out.read_text() == "new\n"


def test_second_writer_is_refused(tmp_path):
    out = tmp_path / "o.txt"
    j = outputs.Journal(out)
    j.append("a", "1")
    for second in (
        lambda: outputs.Journal(out, resume=True),
        lambda: outputs.atomic_write_text(out, "b\n"),
    ):
        with pytest.raises(outputs.OutputBusyError, match="another process is writing it"):
            second()
    j.append("b", "2")
    j.commit()
    assert out.read_text() == "a\nb\n"


def test_run_lock_refuses_a_second_run(tmp_path):
    lock = tmp_path / "s_train.lock"
    with outputs.run_lock(lock, "busy"):
        with pytest.raises(outputs.OutputBusyError, match="busy"):
            with outputs.run_lock(lock, "busy"):
                pass
        together.write_together([(tmp_path / "m", lambda f: f.write(b"m"))], "")  # its saves
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]  # the lock file is gone
    with outputs.run_lock(lock, "busy"):  # and can be taken again
        pass


# ---------------------------------------------------------------------------------------------
# the commands
# ---------------------------------------------------------------------------------------------


def _src(folder, n=6):
    """``folder/s.en``: the first ``n`` lines of the fixture's test.en."""
    return source_file(folder / "s.en", range(1, n + 1))


def _run(*argv, limit=None):
    """The command in a fresh process, under ``ulimit -f LIMIT`` bytes if given."""
    p = subprocess.run(
        [sys.executable, "-m", "groundhog_port", "--log-level", "WARNING", *map(str, argv)],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=REPO,
        preexec_fn=(lambda: file_size_limit(limit)) if limit else None,
        timeout=600,
    )
    return p.returncode, p.stdout, p.stderr


def _run_here(*argv):
    """The command in this process on one thread (``inprocess.run_here``): for the runs that
    need no process of their own (references, ``--resume``, a refused second writer), sparing
    a torch import each."""
    return run_here(*argv, log_level="WARNING", cwd=REPO)


def _one_error_line(err, *words):
    lines = [l for l in err.splitlines() if "error:" in l]  # besides warnings (long lines...)
    assert len(lines) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in lines[0], err


def test_translate_on_a_full_disk_then_resume(tmp_path):
    """``--trans`` and ``--n-best`` past ``ulimit -f``: exit 2, one line, nothing renamed
    into place, partial and journal kept; ``--resume`` (limit lifted) finishes the job with
    the bytes of an uninterrupted run."""
    args = _translate_args(_src(tmp_path))
    ref = tmp_path / "ref"
    ref.mkdir()
    rc, ref_out, err = _run_here(*args, "--trans", ref / "t", "--n-best", ref / "n")
    assert rc == 0, err
    out = tmp_path / "t"
    # the limit: the journal's fingerprint line, then the translations and records of a
    # couple of lines (300 bytes; the whole run needs more than twice that)
    rc, _, err = _run(
        *args,
        "--trans",
        out,
        "--n-best",
        tmp_path / "n",
        limit=len(journal_header(*args, "--trans", out)) + 300,
    )
    assert rc == 2
    _one_error_line(err, "cannot write", "--resume")
    assert not out.exists() and not (tmp_path / "n").exists()
    assert (tmp_path / "t.partial").exists() and (tmp_path / "t.partial.journal").exists()
    rc, res_out, err = _run_here(*args, "--trans", out, "--n-best", tmp_path / "n", "--resume")
    assert rc == 0, err
    assert out.read_bytes() == (ref / "t").read_bytes()
    assert (tmp_path / "n").read_bytes() == (ref / "n").read_bytes()
    assert res_out.splitlines()[-1] == ref_out.splitlines()[-1]  # Total cost of the translations
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n", "ref", "s.en", "t"]


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 4 KiB tmpfs (root only): a real ENOSPC.  Yields (directory, grow())."""
    d = tmp_path / "tmpfs"
    d.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    if (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(d)], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("mount -t tmpfs is not permitted here")
    try:
        yield d, lambda: subprocess.run(["mount", "-o", "remount,size=1m", str(d)], check=True)
    finally:
        subprocess.run(["umount", str(d)], capture_output=True)


def test_n_best_on_a_full_tmpfs_then_resume(tiny_tmpfs, tmp_path):
    """The translations fit, the n-best list does not (ENOSPC): the translations are not
    renamed into place either, and ``--resume`` after space is freed writes both."""
    d, grow = tiny_tmpfs
    args = _translate_args(
        _src(tmp_path, 12), "--trans", tmp_path / "t", "--n-best", d / "n", beam=10
    )
    rc, _, err = _run_here(*args)
    assert rc == 2
    _one_error_line(err, "No space left on device", "--resume", "t.partial")
    assert not (tmp_path / "t").exists() and (tmp_path / "t.partial.journal").exists()
    assert list(d.iterdir()) == []
    grow()
    rc, _, err = _run_here(*args, "--resume")
    assert rc == 0, err
    assert (tmp_path / "t").read_text().count("\n") == 12 and (d / "n").stat().st_size > 4096


def test_score_on_a_full_disk_then_resume(tmp_path):
    args = score_args("batch", FX / "test.en", FX / "test.fr", "--allow-unk", changes=["bs=4"])
    rc, _, err = _run_here(*args, "--scores", tmp_path / "ref")
    assert rc == 0, err
    out = tmp_path / "s"
    # the journal's fingerprint line and 100 bytes: 25 of its 40 records ("b 4", 4 bytes)
    rc, _, err = _run(
        *args, "--scores", out, limit=len(journal_header(*args, "--scores", out)) + 100
    )
    assert rc == 2
    _one_error_line(err, "cannot write", "--resume")
    assert not out.exists() and (tmp_path / "s.partial").stat().st_size > 0
    rc, _, err = _run_here(*args, "--scores", out, "--resume")
    assert rc == 0, err
    assert out.read_bytes() == (tmp_path / "ref").read_bytes()


def test_plots_on_a_full_disk(tmp_path):
    pytest.importorskip("matplotlib")
    src, trg = tmp_path / "s.en", tmp_path / "s.fr"
    for name, path in (("test.en", src), ("test.fr", trg)):
        path.write_bytes(b"".join((FX / name).read_bytes().splitlines(True)[:2]))
    rc, _, err = _run(
        *score_args("txt", src, trg, "--allow-unk", "--plot-alignment", tmp_path / "plots"),
        limit=2000,
    )
    assert rc == 2
    _one_error_line(err, "cannot write", "left as it was")
    assert list((tmp_path / "plots").iterdir()) == []


def test_second_process_on_the_same_output_is_refused(tmp_path):
    """A process holds the lock on ``F.partial`` (as a running translate does): a second
    command pointed at ``F`` refuses at once and leaves the first one's file alone."""
    out = tmp_path / "t"
    with _held_by_another_process("j = outputs.Journal(sys.argv[1]); j.append('first', '{}')", out):
        for resume in ([], ["--resume"]):
            rc, _, err = _run_here(
                *_translate_args(_src(tmp_path, 1), "--trans", out, *resume, beam=2)
            )
            assert rc == 2
            _one_error_line(err, "another process is writing it")
        assert (tmp_path / "t.partial").read_text() == "first\n"


@contextmanager
def _held_by_another_process(code, path):
    """A second process runs ``code`` (``sys`` and ``outputs`` imported, ``sys.argv[1]`` is
    ``path``: it takes the lock of a running command) and holds on until the block ends."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import sys; from groundhog_port import outputs; {code}; print('ready', flush=True); "
            "sys.stdin.read()",
            str(path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=ENV,
        cwd=REPO,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        yield
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)


@pytest.fixture
def read_only_dir(tmp_path):
    """A folder nothing can be written into: a read-only tmpfs (root, where mounting is
    permitted: root ignores permission bits), else a folder without write permission."""
    d = tmp_path / "ro"
    d.mkdir()
    if os.geteuid() != 0:
        d.chmod(0o555)
        yield d
        d.chmod(0o755)
        return
    if (
        shutil.which("mount") is None
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(d)], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip(
            "running as root (permission bits do not stop root) and mount -t tmpfs "
            "-o ro is not permitted here"
        )
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], capture_output=True)


def test_read_only_target(read_only_dir, tmp_path):
    """``--trans``, ``--n-best`` and ``--scores`` into a read-only folder: exit 2, one line
    naming the file, nothing written (a read-only target fails before any work is done)."""
    src = _src(tmp_path, 2)
    for argv in (
        _translate_args(src, "--trans", read_only_dir / "t", beam=2),
        _translate_args(src, "--trans", tmp_path / "t", "--n-best", read_only_dir / "n", beam=2),
        score_args(
            "batch", FX / "test.en", FX / "test.fr", "--allow-unk", "--scores", read_only_dir / "s"
        ),
    ):
        rc, _, err = _run_here(*argv)
        assert rc == 2, err
        _one_error_line(err, str(read_only_dir), "cannot write", "not writable")
        assert list(read_only_dir.iterdir()) == []


TRAIN = ["train", "--state", STATE, "--model", MODEL, "--data-dir", LEGACY_ROOT / "data"]


def _timing_step(path):
    with np.load(path) as t:
        return int(t["step"])


@pytest.mark.skipif(not BITEXT.is_file(), reason=f"no .h5 corpus at {BITEXT}")
def test_training_checkpoint_on_a_full_disk(tmp_path):
    """A checkpoint save past ``ulimit -f`` (the model file is ~175 KiB): exit 2, one line,
    the checkpoint saved before is left byte for byte, no partial file or lock is left;
    once space is freed the same command resumes from that checkpoint."""
    args = [*TRAIN, f"prefix='{tmp_path}/s_'", "--max-updates", 1]
    rc, _, err = _run_here(*args)
    assert rc == 0, err
    names = ["s_model.npz", "s_state.pkl", "s_timing.npz"]
    before = {n: (tmp_path / n).read_bytes() for n in names}
    assert _timing_step(tmp_path / "s_timing.npz") == 1
    rc, _, err = _run(*args, limit=100_000)
    assert rc == 2
    _one_error_line(
        err, "cannot write", "the checkpoint of", "is left as it was", "run the same command again"
    )
    assert {n: (tmp_path / n).read_bytes() for n in names} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == names
    rc, _, err = _run_here(*args)
    assert rc == 0, err
    assert _timing_step(tmp_path / "s_timing.npz") == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == names


@pytest.mark.skipif(not BITEXT.is_file(), reason=f"no .h5 corpus at {BITEXT}")
def test_training_into_a_read_only_folder(read_only_dir):
    rc, _, err = _run_here(*TRAIN, f"prefix='{read_only_dir}/s_'", "--max-updates", 1)
    assert rc == 2
    _one_error_line(err, str(read_only_dir), "cannot write", "not writable")
    assert list(read_only_dir.iterdir()) == []


def test_second_training_run_on_the_same_prefix_is_refused(tmp_path):
    """A run holds ``<prefix>train.lock`` (here a process standing in for it): a second
    ``train`` on the prefix refuses at once, before loading anything."""
    lock = tmp_path / "s_train.lock"
    with _held_by_another_process("l = outputs.run_lock(sys.argv[1], 'busy'); l.__enter__()", lock):
        rc, _, err = _run_here(*TRAIN, f"prefix='{tmp_path}/s_'", "--max-updates", 1)
        assert rc == 2
        _one_error_line(err, "another training run is writing", "s_train.lock")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["s_train.lock"]


def _two_interruption_trials(commands, seed):
    """``tools/interrupt.py --trials 2 --commands COMMANDS --seed SEED``, both trials at once
    (``--jobs 2``): every trial passes."""
    argv = ["--trials", "2", "--commands", commands, "--seed", str(seed), "--jobs", "2"]
    p = subprocess.run(
        [sys.executable, str(REPO / "tools" / "interrupt.py"), *argv],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=900,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "2 trials" in p.stdout


def test_a_few_interruptions():
    """tools/interrupt.py, 2 trials (the figures of the long runs are in docs/hardening.md),
    both at once (``--jobs 2``)."""
    _two_interruption_trials("translate,score", 17)


@pytest.mark.skipif(not BITEXT.is_file(), reason=f"no .h5 corpus at {BITEXT}")
def test_a_few_training_interruptions():
    """tools/interrupt.py on ``train``: the checkpoint on disk is always one whole checkpoint
    (the uninterrupted run's model of its update), and running again finishes the run."""
    _two_interruption_trials("train", 3)


def test_checkpoint_style_binary_output(tmp_path):
    """What a training command does with a checkpoint: ``np.savez`` into ``atomic_output``."""
    path = tmp_path / "m_model.npz"
    arrays = {"W_0_enc_approx_embdr": np.arange(6, dtype=np.float32).reshape(2, 3)}
    with outputs.atomic_output(path, binary=True) as f:
        np.savez(f, **arrays)
    with np.load(path) as npz:
        assert npz["W_0_enc_approx_embdr"].tolist() == arrays["W_0_enc_approx_embdr"].tolist()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m_model.npz"]


# ---------------------------------------------------------------------------------------------
# output targets (issue 25, item 3): nothing that is not a regular file of this run is renamed
# over; links are written through, streams streamed, clashes refused
# ---------------------------------------------------------------------------------------------


def _translate_args(src, *extra, beam=3):
    """The beam search of these tests: beam 3 unless told, the default batch size."""
    return translate_args(src, *extra, beam=beam, batch=None)


@pytest.fixture(scope="module")
def reference_trans(tmp_path_factory):
    """``(source, its translation bytes, stdout)`` of a plain run into a regular file."""
    d = tmp_path_factory.mktemp("targets")
    src = _src(d, n=4)
    rc, out, err = _run_here(*_translate_args(src), "--trans", d / "ref")
    assert rc == 0, err
    return src, (d / "ref").read_bytes(), out


def test_symlinked_outputs_are_written_through(reference_trans, tmp_path):
    """``--trans LINK --n-best LINK2``: each link stays a link and its target (in another
    folder) gets the output; the partial files live beside the target and are gone."""
    src, ref, _ = reference_trans
    there = tmp_path / "there"
    there.mkdir()
    (there / "t.txt").write_text("old text\n")
    (tmp_path / "link").symlink_to(there / "t.txt")
    (tmp_path / "nlink").symlink_to(there / "dangling")  # a link to a file to be made
    rc, _, err = _run_here(
        *_translate_args(src), "--trans", tmp_path / "link", "--n-best", tmp_path / "nlink"
    )
    assert rc == 0, err
    assert (tmp_path / "link").is_symlink() and (tmp_path / "nlink").is_symlink()
    assert (there / "t.txt").read_bytes() == ref
    assert (there / "dangling").read_text().startswith("0 ||| ")
    assert sorted(p.name for p in there.iterdir()) == ["dangling", "t.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "nlink", "there"]


def test_fifo_output_is_streamed(reference_trans, tmp_path):
    """``--trans FIFO``: the lines go down the pipe (no partial file, no rename); the FIFO
    is still a FIFO afterwards."""
    import stat
    import threading

    src, ref, _ = reference_trans
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    rc, _, err = _run_here(*_translate_args(src), "--trans", fifo)
    reader.join(30)
    assert rc == 0, err
    assert got == [ref]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]
    rc, _, err = _run_here(*_translate_args(src), "--trans", fifo, "--resume")
    _one_error_line(err, "--resume", "streamed")
    assert rc == 2 and stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_character_device_output_is_streamed(tmp_path):
    """A character device (a /dev/null made with mknod inside the test's folder, so that a
    failure never replaces the machine's own) is written, never renamed over."""
    import stat

    dev = tmp_path / "null"
    try:
        os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, OSError) as err:
        pytest.skip(f"cannot make a device node here ({err})")
    outputs.atomic_write_text(dev, "text\n")
    with outputs.atomic_output(dev, binary=True) as f:
        f.write(b"bytes")
    journal = outputs.Journal(dev)
    journal.append("line", "record")
    journal.commit()
    assert stat.S_ISCHR(os.lstat(dev).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]


def test_dev_stdout_is_streamed(reference_trans, tmp_path):
    """``--trans NAME`` where NAME is standard output: the translations arrive on stdout,
    the Total cost line goes to stderr, and NAME is what it was.  The failing case runs on
    a link of the test's own (``tmp/stdout -> /proc/self/fd/1``, which the old code renamed
    over as it did the machine's /dev/stdout as root), in this process (its descriptor 1
    captured); ``-`` too; the real ``/dev/stdout`` only in a process of its own whose stdout
    is a pipe, and only once :func:`outputs.output_target` says it is streamed, so that this
    test can never replace the machine's /dev/stdout, whatever the code under test does."""
    import stat

    src, ref, out_ref = reference_trans
    own = tmp_path / "stdout"
    own.symlink_to("/proc/self/fd/1")
    before = os.lstat("/dev/stdout")
    for target in (own, "-"):
        rc, out, err = _run_here(*_translate_args(src), "--trans", target)
        assert rc == 0, err
        assert out.encode() == ref, target
        assert out_ref.strip() in err
        assert own.is_symlink() and os.readlink(own) == "/proc/self/fd/1"
    assert outputs.output_target("/dev/stdout").stream  # the guard (see above)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "groundhog_port",
            "--log-level",
            "WARNING",
            *map(str, _translate_args(src)),
            "--trans",
            "/dev/stdout",
        ],
        capture_output=True,
        env=ENV,
        cwd=REPO,
        timeout=600,
    )  # stdout: a pipe
    assert p.returncode == 0, p.stderr
    assert p.stdout == ref
    assert out_ref.strip() in p.stderr.decode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stdout"]
    after = os.lstat("/dev/stdout")
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert stat.S_ISLNK(after.st_mode) or stat.S_ISCHR(after.st_mode)


def test_outputs_that_would_destroy_something_are_refused(reference_trans, tmp_path):
    """One line, exit 2, every file as it was: ``--trans`` equal to ``--source`` (also
    through a link), ``--trans X --n-best X`` (not "another process is writing it"), a
    directory, ``score --scores`` equal to ``--src``."""
    src, _, _ = reference_trans
    kept = src.read_bytes()
    (tmp_path / "to_src").symlink_to(src)
    x = tmp_path / "x"
    cases = [
        (["--trans", src], ["--source input"]),
        (["--trans", tmp_path / "to_src"], ["--source input"]),
        (["--trans", x, "--n-best", x], ["named for both --trans and --n-best"]),
        (["--trans", tmp_path], ["is a directory"]),
    ]
    for extra, words in cases:
        rc, _, err = _run_here(*_translate_args(src), *extra)
        assert rc == 2, err
        _one_error_line(err, *words)
        assert "another process" not in err
    rc, _, err = _run_here(*score_args("batch", src, src, "--scores", src))
    assert rc == 2
    _one_error_line(err, "--src input")
    assert src.read_bytes() == kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["to_src"]


def test_fuzz_target_outputs_every_layout(tmp_path):
    """``tools/fuzz.py``'s ``outputs`` target, each layout once (commands in turn, every other
    one with ``--resume``), and the case it found: ``--resume`` over a partial file of
    another run whose records this command cannot read was silently overwritten (the
    fingerprint was only checked when some line was kept)."""
    from parity_tests.support import fuzzing as F

    fx = F.Fixtures()
    src = b"\n".join(fx.read(fx.text_files[0]).split(b"\n")[:2]) + b"\n"
    trg = b"\n".join(fx.read(fx.text_files[1]).split(b"\n")[:2]) + b"\n"
    cases = [
        (
            layout,
            "translate" if layout == "two-outputs" else ("translate", "sample", "score")[i % 3],
            i % 2 == 1,
        )
        for i, layout in enumerate(F.OUTPUT_LAYOUTS)
    ]
    cases += [("partial-of-another-run", command, True) for command in ("translate", "score")]
    for k, (layout, command, resume) in enumerate(cases):
        opts = {"layout": layout, "command": command, "extra": ["--resume"] if resume else []}
        if layout == "two-outputs":
            opts["second"] = "--n-best"
        case = F.Case(
            "outputs", f"{command} {layout}", {"source.txt": src, "target.txt": trg}, opts
        )
        result = F.run_case(fx, case, tmp_path / str(k))
        assert result.outcome not in F.FAILURES, (case.label, resume, result)


@pytest.mark.parametrize("via", ["/proc/self/root", "/proc/self/cwd"])
def test_output_named_through_proc_is_compared_by_inode(legacy_root, tmp_path, via):
    """``--trans /proc/self/root/<the source>`` (or through ``/proc/self/cwd``) reaches the
    input itself: refused before any work (one line, exit 2), the source keeps its bytes
    (the name was streamed to unchecked and the input truncated)."""
    from parity_tests.support.inprocess import run_cli

    case = legacy_root / "search"
    src = tmp_path / "src.en"
    src.write_bytes((case / "test.en").read_bytes())
    before = src.read_bytes()
    name = f"{via}{src}" if via.endswith("root") else f"{via}/src.en"
    r = run_cli(
        "translate", "--beam-search", "--beam-size", "2", "--source", src, "--trans", name,
        "--state", case / "search_state.pkl", case / "search_model.npz", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert "is the --source input of this run" in r.stderr
    assert src.read_bytes() == before
