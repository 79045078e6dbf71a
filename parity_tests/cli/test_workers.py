"""``translate --workers``: forked worker processes of one thread each (issue 54, item 1).

The output of any number of workers is byte-identical to one process's and to the literal
sample.py loop's (``--batch-size 1``), n-best lists included; ``auto`` counts the cores no
other process is using (:class:`groundhog_port.distributed.pool.FreeCores`); what the
option cannot do is refused in one line."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from groundhog_port.cli.main import main
from groundhog_port.distributed import pool
from parity_tests.support.cases import CASES, FIXTURES
from parity_tests.support.fuzzing import run_cli_inprocess

FX = FIXTURES / "search"
MODEL = ["--state", str(FX / "search_state.pkl"), str(FX / "search_model.npz")]


def _translate(tmp_path, name, *extra, beam=5):
    trans, nbest = tmp_path / f"{name}.txt", tmp_path / f"{name}.nbest"
    argv = ["translate", "--beam-search", "--beam-size", str(beam), *MODEL,
            "--source", str(FX / "test.en"), "--trans", str(trans), "--n-best", str(nbest),
            *extra]  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-m", "groundhog_port", *argv],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    return trans.read_bytes(), nbest.read_bytes(), out.stderr


@pytest.mark.parametrize("beam", [1, 10])
def test_workers_write_what_one_process_and_the_literal_loop_write(tmp_path, beam):
    one = _translate(tmp_path, "one", "--workers", "1", beam=beam)
    literal = _translate(tmp_path, "literal", "--batch-size", "1", beam=beam)
    two = _translate(tmp_path, "two", "--workers", "2", beam=beam)
    three = _translate(tmp_path, "three", "--workers", "3", "--batch-size", "4", beam=beam)
    assert one[:2] == literal[:2] == two[:2] == three[:2]
    assert "on 2 worker processes" in two[2] and "on 3 worker processes" in three[2]
    assert "worker processes" not in one[2]


@pytest.mark.parametrize("case", CASES)
def test_workers_write_what_the_literal_search_writes_on_the_shared_cases(
    tmp_path, legacy_root, case
):
    """Issue 54's acceptance on every shared case (RNNsearch, RNNencdec, the phrase model and
    the variants): ``--workers 2`` (batches of 4, so each worker decodes several) writes the
    translations and n-best list of the literal sample.py loop (one process, ``--batch-size
    1``) byte for byte, beam 5 with the case's recorded options."""
    d = legacy_root / case
    if not d.is_dir():
        pytest.skip(f"no recordings at {d}")
    state, model = next(d.glob("*_state.pkl")), next(d.glob("*_model.npz"))
    files = {}
    for name, extra in (("literal", ["--workers", "1", "--batch-size", "1"]),
                        ("workers", ["--workers", "2", "--batch-size", "4"])):  # fmt: skip
        trans, nbest = tmp_path / f"{name}.txt", tmp_path / f"{name}.nbest"
        argv = ["translate", "--state", str(state), str(model), "--beam-search", "--beam-size",
                "5", "--source", str(d / "test.en"), "--trans", str(trans), "--n-best",
                str(nbest), *extra]  # fmt: skip
        run = subprocess.run([sys.executable, "-m", "groundhog_port", *argv],
                             capture_output=True, text=True, timeout=600)  # fmt: skip
        # 3: a sentence GroundHog crashed on (search_variant's line 36, as recorded)
        assert run.returncode in (0, 3), run.stderr
        written = [p.read_bytes() if p.exists() else None for p in (trans, nbest)]
        files[name] = (run.returncode, *written, run.stderr)
    said = files["workers"][3]
    assert files["workers"][0] == 3 or "on 2 worker processes" in said, said
    assert files["workers"][:3] == files["literal"][:3]
    assert files["literal"][1].count(b"\n") == (d / "test.en").read_bytes().count(b"\n")


def test_the_default_is_auto_unless_threads_are_given(tmp_path):
    """No ``--workers``: ``auto`` for the beam search of a file and for score's batches (the
    log line of the count); with ``--threads`` one process of that many threads; where
    workers cannot run (``--verbose``) one process, not an error."""
    default = _translate(tmp_path, "default", beam=1)
    assert "--workers auto:" in default[2] and "cores free" in default[2], default[2]
    threads = _translate(tmp_path, "threads", "--threads", "1", beam=1)
    assert "--workers auto" not in threads[2] and "worker processes" not in threads[2]
    assert default[:2] == threads[:2]
    _, said = _score(tmp_path, "default", FX / "test.en", FX / "test.fr")
    assert "--workers auto:" in said, said
    argv = ["translate", "--beam-search", "--beam-size", "1", *MODEL,
            "--source", str(FX / "test.en"), "--trans", str(tmp_path / "v.txt"), "--verbose"]  # fmt: skip
    rc, _, err = run_cli_inprocess(main, argv)
    assert rc == 0 and "--workers" not in err, err


def test_workers_auto_counts_the_free_cores(tmp_path):
    out = _translate(tmp_path, "auto", "--workers", "auto")
    assert "--workers auto:" in out[2] and "cores free" in out[2], out[2]


@pytest.mark.parametrize(
    "extra, said",
    [
        (["--workers", "2", "--verbose"], "not with --verbose"),
        (["--workers", "0"], "at least 1 worker"),
        (["--workers", "many"], "expected a number of workers or 'auto'"),
    ],
)
def test_what_workers_cannot_do_is_refused(tmp_path, extra, said):
    argv = ["translate", "--beam-search", "--beam-size", "2", *MODEL,
            "--source", str(FX / "test.en"), "--trans", str(tmp_path / "t.txt"), *extra]  # fmt: skip
    rc, _, err = run_cli_inprocess(main, argv)
    assert rc == 2 and said in err, err
    assert not (tmp_path / "t.txt").exists()


def test_workers_without_a_source_file_is_refused():
    rc, _, err = run_cli_inprocess(main, ["translate", *MODEL, "--workers", "2"])
    assert rc == 2 and "--workers applies to the beam search of a --source file" in err, err


def test_free_cores_subtracts_the_others_busy_time(monkeypatch):
    """``present - round((machine busy - own CPU) / elapsed)``, at least 1: the arithmetic,
    on a machine of 4 cores whose other processes kept 2.6 busy over the sample."""
    clock = iter([100.0, 101.0])
    busy = iter([50.0, 53.0])  # the machine: 3 core-seconds in 1 s
    own = iter([7.0, 7.4])  # of which this process 0.4
    monkeypatch.setattr(pool.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(pool.time, "process_time", lambda: next(own))
    monkeypatch.setattr(pool, "_machine_busy_s", lambda: next(busy))
    monkeypatch.setattr(pool, "cores_present", lambda: 4)
    assert pool.FreeCores().count() == 4 - 3  # round(2.6) = 3 busy


def test_free_cores_sees_a_busy_loop():
    """A busy child process on this machine takes a core off the count."""
    present = pool.cores_present()
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        free = pool.FreeCores()
        time.sleep(0.5)
        assert free.count() <= max(1, present - 1)
    finally:
        busy.kill()
        busy.wait()


WORKER_KILLED = """
import multiprocessing, os, signal, sys, time
from groundhog_port.distributed import pool

def unit(u):  # unit 3's worker is SIGKILLed (the OOM killer, an operator) before it is done
    if u == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.05)
    return u

try:
    list(pool.imap_in_workers(2, unit, list(range(12))))
except pool.WorkerLost as err:
    gone = time.monotonic() + 5  # the executor's own thread may be reaping them too
    while multiprocessing.active_children() and time.monotonic() < gone:
        time.sleep(0.05)
    print(f"{err} | children {len(multiprocessing.active_children())}")
"""


def test_a_worker_that_dies_is_one_error_not_a_hang():
    """A worker killed with its unit unfinished: :class:`pool.WorkerLost` at once, saying what
    to do, with no worker left behind (``multiprocessing.Pool`` waited for that unit forever:
    a ``--workers 3`` run hung in CI).  In a child process so that a hang fails the test."""
    p = subprocess.run(
        [sys.executable, "-c", WORKER_KILLED], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    said, children = p.stdout.strip().split(" | ")
    assert said.startswith("a worker process died before its work was done") and "--resume" in said
    assert children == "children 0"


PARENT_KILLED = """
import os, sys, time
from groundhog_port.distributed import pool

def unit(u):  # each worker says its pid, then works long past its parent's death
    print(os.getpid(), flush=True)
    time.sleep(60)
    return u

for _ in pool.imap_in_workers(2, unit, [0, 1]):
    pass
"""


def _process_state(pid):
    """``(state letter, start time)`` of a process from ``/proc/PID/stat``; ``(None, None)``
    once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return None, None
    return fields[0], fields[19]  # stat's 3rd and 22nd fields


def test_a_parent_killed_outright_takes_its_workers_with_it():
    """``kill -9`` of the command (the OOM killer, an operator): its workers die too
    (``PR_SET_PDEATHSIG``), instead of running on and holding its stdout open -- a caller
    reading it to the end (a test harness, a pipeline) waited for them (a resume test hung
    10 minutes on a quiet machine, where ``--workers auto`` forked two)."""
    import os
    import select
    import signal

    proc = subprocess.Popen(
        [sys.executable, "-c", PARENT_KILLED], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    workers = [int(proc.stdout.readline()) for _ in range(2)]
    started = {pid: _process_state(pid)[1] for pid in workers}

    def alive(pid):
        # its state letter while it runs or sleeps; gone, a zombie, or another process
        # that took its pid: not alive
        state, start = _process_state(pid)
        return state not in (None, "Z", "X") and start == started[pid]

    try:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, "a worker still holds the pipe 30 s after its parent was killed"
        assert proc.stdout.read() == ""  # end of file: no worker holds the pipe any more
        # a dying process closes its files before it becomes a zombie (CI once saw a worker
        # still "R" right after the end of file): give the exits a few seconds to finish
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in workers if alive(pid)], "a worker outlived its parent"
    finally:
        for pid in workers:  # a worker that outlived its parent is not left running
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _score(tmp_path, name, src, trg, *extra):
    scores = tmp_path / f"{name}.txt"
    argv = ["score", "--mode", "batch", *MODEL, "--src", str(src), "--trg", str(trg),
            "--scores", str(scores), "--allow-unk", *extra]  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-m", "groundhog_port", *argv], capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr
    return scores.read_bytes(), out.stderr


def test_score_workers_write_what_one_process_writes(tmp_path, legacy_root):
    """``score --mode batch --workers 2``: score.py's batches dealt out, the file identical
    to one process's, for text pairs and for GroundHog's .h5 corpora."""
    data = legacy_root / "data"
    for src, trg in (
        (FX / "test.en", FX / "test.fr"),
        (data / "binarized_text.shuffled.en.h5", data / "binarized_text.shuffled.fr.h5"),
    ):
        (one, _), (two, said) = (
            _score(tmp_path, "one", src, trg, "--workers", "1"),
            _score(tmp_path, "two", src, trg, "--workers", "2"),
        )
        assert one == two and one.count(b"\n") > 10
        assert "on 2 worker processes" in said, said


@pytest.mark.parametrize(
    "extra, said",
    [
        (["--mode", "batch", "--y-noise", "0.5"], "not with --y-noise"),
        (["--mode", "txt"], "not with --mode txt"),
    ],
)
def test_what_score_workers_cannot_do_is_refused(tmp_path, extra, said):
    argv = ["score", *MODEL, "--src", str(FX / "test.en"), "--trg", str(FX / "test.fr"),
            "--scores", str(tmp_path / "s.txt"), "--workers", "2", *extra]  # fmt: skip
    rc, _, err = run_cli_inprocess(main, argv)
    assert rc == 2 and said in err, err
