"""torchrun: two CPU processes (gloo) give byte-identical outputs to one process.

Each test starts ``python -m torch.distributed.run --nproc-per-node 2 -m groundhog_port ...``
on the bundled fixture model and compares the files with a single-process run of the same
command (in the test's own process); one kills a worker mid-run and checks that the job fails without a complete-looking
output and that ``--resume`` finishes it identically.
"""

import os
import signal
import time
from pathlib import Path

import pytest
import torch

from groundhog_port.distributed.world import world_from_env
from groundhog_port.errors import LegacyInputError
from parity_tests.support.cases import FIXTURES, REPO
from parity_tests.support.distributed import finish, torchrun
from parity_tests.support.inprocess import interrupted_here, run_cli

F = FIXTURES / "search"
MODEL = [f"--state={F / 'search_state.pkl'}", str(F / "search_model.npz")]


def single(*argv):
    """The single-process run the torchrun outputs are compared with: in this process, on
    one thread as each torchrun worker (``inprocess.run_cli``; the reference is not about
    the process boundary, and a fresh interpreter costs seconds of importing torch)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return run_cli(*argv, cwd=REPO)
    finally:
        torch.set_num_threads(threads)


def translate_args(trans, *extra):
    return [
        "translate",
        "--beam-search",
        "--beam-size",
        "5",
        "--source",
        F / "test.en",
        "--trans",
        trans,
        *extra,
        *MODEL,
    ]


def test_translate_two_processes_identical(tmp_path):
    one = single(*translate_args(tmp_path / "one.txt", "--n-best", tmp_path / "one.nbest"))
    assert one.returncode == 0, one.stderr
    rc, out, err = finish(
        torchrun(
            *translate_args(
                tmp_path / "two.txt", "--batch-size", "3", "--n-best", tmp_path / "two.nbest"
            )
        )
    )
    assert rc == 0, err
    assert (tmp_path / "two.txt").read_bytes() == (tmp_path / "one.txt").read_bytes()
    assert (tmp_path / "two.nbest").read_bytes() == (tmp_path / "one.nbest").read_bytes()
    # the summary line is rank 0's, once, and equal to the single run's
    assert out.count("Total cost of the translations:") == 1
    assert out.strip() == one.stdout.strip()
    assert "2 processes, backend gloo" in err
    assert not list(tmp_path.glob("*.partial*"))


def test_score_h5_two_processes_identical(legacy_root, tmp_path):
    data = legacy_root / "data"
    args = [
        "score",
        "--mode",
        "batch",
        "--src",
        data / "binarized_text.shuffled.en.h5",
        "--trg",
        data / "binarized_text.shuffled.fr.h5",
        "--allow-unk",
        "--n-batches",
        "7",
    ]
    one = single(*args, "--scores", tmp_path / "one.txt", *MODEL)
    assert one.returncode == 0, one.stderr
    rc, _, err = finish(torchrun(*args, "--scores", tmp_path / "two.txt", *MODEL))
    assert rc == 0, err
    text = (tmp_path / "two.txt").read_text()
    assert text == (tmp_path / "one.txt").read_text()
    assert len(text.splitlines()) == 7 * 32


def test_sentences_the_original_crashed_on_give_the_single_process_outcome(legacy_root, tmp_path):
    """Issue 26, friction 1: with a sentence sample.py crashed on (search_variant, beam 1,
    line 36) one process writes the complete output and exits 3; torchrun printed a
    ChildFailedError "FAILED" block with a traceback and exited 1.  Now: the same output,
    one summary line saying what one process exits, exit 0 (torchrun cannot pass 3 on)."""
    case = legacy_root / "search_variant"
    args = [
        "translate",
        "--beam-search",
        "--beam-size",
        "1",
        "--source",
        case / "test.en",
        "--batch-size",
        "4",
        f"--state={case / 'search_variant_state.pkl'}",
        case / "search_variant_model.npz",
    ]
    one = single(*args, "--trans", tmp_path / "one.txt")
    assert one.returncode == 3, one.stderr
    rc, out, err = finish(torchrun(*args, "--trans", tmp_path / "two.txt"))
    assert rc == 0, err
    assert (tmp_path / "two.txt").read_bytes() == (tmp_path / "one.txt").read_bytes()
    assert out.strip() == one.stdout.strip()
    summary = [line for line in err.splitlines() if "could not be translated" in line]
    assert len(summary) == 1 and "one process exits 3 here" in summary[0], err
    assert "lines 36" in summary[0]
    assert "FAILED" not in err and "Traceback" not in err and "ChildFailedError" not in err


def _worker_pids(launcher_pid):
    """RANK -> pid of the worker processes torchrun started."""
    found = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) != launcher_pid:
                continue
            env = dict(
                kv.split("=", 1) for kv in (d / "environ").read_text().split("\0") if "=" in kv
            )
        except (OSError, ValueError, IndexError):
            continue
        if "RANK" in env:
            found[int(env["RANK"])] = int(d.name)
    return found


def test_dead_rank_fails_then_resume_finishes(tmp_path):
    src = tmp_path / "src.en"
    src.write_text((F / "test.en").read_text() * 2)  # 80 lines: killed after 16, mid-run
    args = [
        "translate",
        "--beam-search",
        "--beam-size",
        "5",
        "--source",
        src,
        "--batch-size",
        "2",
        "--progress",
    ]
    out = tmp_path / "two.txt"
    proc = torchrun(*args, "--trans", out, *MODEL)
    partial = out.with_name("two.txt.partial")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if partial.exists() and partial.read_text().count("\n") >= 16:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    pids = _worker_pids(proc.pid)
    assert set(pids) == {0, 1}, pids
    os.kill(pids[1], signal.SIGKILL)
    rc, _, err = finish(proc)
    assert rc != 0
    assert not out.exists(), "a run with a dead rank left a complete-looking output"
    assert partial.exists()
    assert "Signal 9 (SIGKILL)" in err or "exitcode" in err
    # --resume keeps every complete line, as one process does, not whole units (of 4 x 2
    # lines): cut to 13 lines, the run resumes after line 13 and deals out units from there
    journal = out.with_name("two.txt.partial.journal")
    partial.write_bytes(b"".join(partial.read_bytes().splitlines(True)[:13]))
    journal.write_bytes(b"".join(journal.read_bytes().splitlines(True)[:14]))  # + fingerprint
    rc, _, err = finish(torchrun(*args, "--trans", out, "--resume", *MODEL))
    assert rc == 0, err
    assert f"resuming {out} after 13 of 80 lines" in err
    one = single(*args, "--trans", tmp_path / "one.txt", *MODEL)
    assert one.returncode == 0, one.stderr
    assert out.read_bytes() == (tmp_path / "one.txt").read_bytes()


def test_world_from_env():
    assert world_from_env({}) is None
    assert world_from_env({"WORLD_SIZE": "1", "RANK": "0"}) is None
    w = world_from_env({"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"})
    assert (w.rank, w.size, w.local_rank, w.local_size, w.is_root) == (3, 4, 1, 2, False)
    with pytest.raises(LegacyInputError, match="inconsistent"):
        world_from_env({"WORLD_SIZE": "2", "RANK": "2"})
    with pytest.raises(LegacyInputError, match="integers"):
        world_from_env({"WORLD_SIZE": "two", "RANK": "0"})


def test_unsharded_command_refused_under_torchrun(monkeypatch):
    """The environment torchrun gives a worker (in this process: the refusal reads only the
    environment, and no process group is started before it)."""
    for k, v in {
        "WORLD_SIZE": "2",
        "RANK": "0",
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "2",
    }.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("MASTER_ADDR", raising=False)  # were it not refused: an error, not a wait
    r = single("score", "--mode", "txt", "--src", F / "test.en", "--trg", F / "test.fr", *MODEL)
    assert r.returncode == 2
    assert "only --mode batch is sharded" in r.stderr


def test_resume_of_another_run_is_refused_on_every_rank(tmp_path, monkeypatch):
    """Issue 25, item 4 under torchrun: rank 0 refuses a journal of another run (another
    beam) with one line naming it, the other rank is told and leaves (no hang), and the
    partial files are as they were."""
    from groundhog_port.search.translator import Translator

    src = tmp_path / "src.en"
    src.write_text("".join((F / "test.en").read_text().splitlines(True)[:8]))
    out = tmp_path / "o.txt"
    args = [
        "translate",
        "--beam-search",
        "--source",
        src,
        "--batch-size",
        "1",
        "--trans",
        out,
        *MODEL,
    ]
    # unit of 4 lines (4 x batch size): interrupted after 4 lines, one whole unit is kept
    rc, _, err = interrupted_here(
        monkeypatch, Translator, "translate_seqs", 4, *args, "--beam-size", "5"
    )
    assert rc == 130, err
    partial = out.with_name("o.txt.partial")
    kept = partial.read_bytes()
    assert kept.count(b"\n") == 4
    rc, _, err = finish(torchrun(*args, "--beam-size", "6", "--resume"), timeout=300)
    assert rc != 0
    errors = [l for l in err.splitlines() if "error:" in l]
    assert len(errors) == 1 and "beam_size 5 (now 6)" in errors[0], err
    assert partial.read_bytes() == kept and not out.exists()
