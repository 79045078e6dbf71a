"""Containment (issue 51 item 2): each experiment is re-done in a worker process under a memory
and a CPU-time limit; a runaway in one experiment is one "not done" line naming the file and
the limit, and the others are re-done and the report written."""

import json
import os
import signal

import numpy as np
import pytest

from groundhog_port import contained
from parity_tests.support.archive import search_run
from parity_tests.support.inprocess import run_cli

pytestmark = pytest.mark.skipif(
    not contained.available(), reason="containment needs os.fork and the resource module"
)


# ----------------------------------------------------------------------------------------
# the worker
# ----------------------------------------------------------------------------------------
def _hog():
    contained.stage("opening the experiment")
    contained.reading("/archive/exp/bomb.txt.bz2")
    held = []
    while True:
        held.append(np.ones(1 << 20, dtype=np.uint8))


def _spin():
    contained.reading("/archive/exp/plan.toml")
    while True:
        pass


def test_a_memory_runaway_is_named_with_its_file_and_limit():
    out = contained.run(_hog, limits=contained.Limits(memory_mib=128, cpu_seconds=60))
    assert out.value is None and out.breach is not None and out.breach.limit == "memory"
    text = out.breach.text()
    assert "memory limit of 128 MiB" in text and "--max-memory-mib" in text, text
    assert "while reading /archive/exp/bomb.txt.bz2" in text, text
    assert "in 'opening the experiment'" in text, text
    # the limit is on address space: the resident peak passes it by at most what the worker
    # held mapped but not resident at its start, plus the allocator's last chunk
    assert out.peak_mib is not None and out.unresident_mib is not None
    assert 64 < out.peak_mib < 128 + out.unresident_mib + 16, (out.peak_mib, out.unresident_mib)


def test_a_cpu_runaway_is_stopped_at_its_limit():
    out = contained.run(_spin, limits=contained.Limits(memory_mib=None, cpu_seconds=1))
    assert out.breach is not None and out.breach.limit == "cpu", out
    assert "CPU-time limit of 1 s" in out.breach.text() and "plan.toml" in out.breach.text()
    assert 1.0 <= out.cpu_s < 5.0, out.cpu_s


def _value(n):
    return {"n": n, "squares": [i * i for i in range(n)]}


def _fails():
    raise ValueError("a bug, not a limit")


def _interrupted():
    raise KeyboardInterrupt


def _crashes():
    os.kill(os.getpid(), signal.SIGKILL)


def test_values_errors_and_interruptions_come_back():
    assert contained.run(_value, 4).value == {"n": 4, "squares": [0, 1, 4, 9]}
    with pytest.raises(ValueError, match="a bug, not a limit"):
        contained.run(_fails)
    with pytest.raises(KeyboardInterrupt):
        contained.run(_interrupted)
    out = contained.run(_crashes)
    assert out.breach is not None and out.breach.limit == "signal"
    assert "SIGKILL" in out.breach.text() and "out-of-memory killer" in out.breach.text()


def _matmul():
    import torch

    a = torch.ones(512, 512)
    return float((a @ a).sum())


def test_a_parent_with_a_thread_pool_gives_its_worker_one_thread():
    """torch's OpenMP pool, once used here, cannot be used by a forked child (GNU libgomp:
    its first parallel region waits forever): the worker runs with one thread.  A worker
    that waited would be stopped by the alarm here (no CPU used: no CPU limit reached)."""
    import torch

    def waited_too_long(*_):
        raise TimeoutError("the worker hung: it used the parent's thread pool")

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    alarm = signal.signal(signal.SIGALRM, waited_too_long)
    try:
        _matmul()  # the pool exists now
        signal.alarm(60)
        out = contained.run(
            _matmul,
            limits=contained.Limits(cpu_seconds=20),
            on_threaded_parent=lambda: torch.set_num_threads(1),
        )
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, alarm)
        torch.set_num_threads(threads)
    assert out.single_threaded and out.breach is None and out.value == 512.0**3


# ----------------------------------------------------------------------------------------
# archive: one experiment runs away, the others are re-done
# ----------------------------------------------------------------------------------------
def _two_experiments(legacy_root, root):
    for name in ("a", "b"):
        search_run(legacy_root, root / name)


@pytest.mark.parametrize("runaway", ["memory", "cpu"])
def test_a_runaway_experiment_leaves_the_others_done(legacy_root, tmp_path, monkeypatch, runaway):
    """Experiment ``b``'s state pickle is read by a parser that runs away (patched into its
    worker only): ``b`` is one "not done" line naming the pickle and the limit, ``a`` is
    re-done, the report is written and nothing of ``b`` is cached (the next run tries
    again)."""
    from groundhog_port import untrusted
    from groundhog_port.tasks import archive

    root, out = tmp_path / "root", tmp_path / "out"
    _two_experiments(legacy_root, root)
    real_redo, real_open = archive.redo, untrusted.open_input

    def runaway_open(path, what="an input"):
        if os.path.basename(path) == "search_state.pkl":
            contained.reading(path)
            if runaway == "memory":
                held = []
                while True:
                    held.append(np.ones(1 << 20, dtype=np.uint8))
            while True:
                pass
        return real_open(path, what)

    def redo_b_runs_away(run, entry, opts, o):
        if entry.id.startswith("b/"):  # in b's worker only: the parent and a's worker read it whole
            untrusted.open_input = runaway_open
        return real_redo(run, entry, opts, o)

    monkeypatch.setattr(archive.pipeline, "redo", redo_b_runs_away)
    limit = ["--max-memory-mib", "256"] if runaway == "memory" else ["--max-cpu-minutes", "0.02"]
    r = run_cli("archive", root, "--out", out, "--plots", "0", "--max-sentences", "3", *limit)
    assert r.returncode == 1, r.stderr[-3000:]
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    a, b = report["experiments"]
    assert a["not_done"] == [], a["not_done"]
    assert [x["all_identical"] for x in a["reproduction"]] == [True]
    (line,) = b["not_done"]
    assert line["what"] == "everything (the experiment stopped part way)"
    said = {"memory": "memory limit of 256 MiB", "cpu": "CPU-time limit of 2 s"}[runaway]
    assert said in line["why"] and "while reading b/search_state.pkl" in line["why"], line
    assert report["summary"]["not_done"] == 1
    assert (out / "report.md").is_file() and (out / "report.html").is_file()
    cached = {p.name for p in (out / "cache").iterdir()}
    assert len(cached) == 1, cached  # a's result only


def test_what_a_worker_learnt_comes_back_to_the_run(legacy_root, tmp_path):
    """The walks, line counts and messages said once in an experiment's worker are the
    run's afterwards: the next experiment neither redoes nor repeats them."""
    from groundhog_port import lookup
    from groundhog_port.tasks import archive
    from groundhog_port.tasks.archive.pipeline import redo_contained

    root = tmp_path / "root"
    _two_experiments(legacy_root, root)
    run = archive.Run(root)
    opts = archive.Options(max_sentences=2, plots=0)
    with lookup.remembering(run.memo):
        entry = archive.discover(run)[0]
        mark = run.mark()
        result, whole = redo_contained(run, entry, opts, tmp_path / "out", contained.Limits())
    assert whole and result["reproduction"], result
    learnt = run.learnt_since(mark)
    counted = {os.path.basename(k[0]) for k, _ in learnt["memo.line_counts"]}
    assert {"test.en", "test.fr"} <= counted, counted
    assert learnt["memo.said"] or learnt["memo.announced"], learnt


@pytest.mark.parametrize("runaway", ["memory", "cpu"])
def test_a_runaway_while_classifying_is_one_unreadable_row(
    legacy_root, tmp_path, monkeypatch, runaway
):
    """The files of ROOT are classified in a worker too: a reader that runs away on one file
    makes that file one UNREADABLE row naming the limit (the worker's other rows are made
    again in a new one); the experiments are still found."""
    from groundhog_port.tasks import archive
    from groundhog_port.tasks.archive import inventory

    root = tmp_path / "root"
    _two_experiments(legacy_root, root)
    (root / "a" / "bomb.txt").write_text("boom\n", encoding="utf-8")
    real = inventory._classify

    def runs_away(path, size, limits):
        if path.name == "bomb.txt":
            contained.reading(path)
            held = []
            while True:
                if runaway == "memory":
                    held.append(np.ones(1 << 20, dtype=np.uint8))
        return real(path, size, limits)

    monkeypatch.setattr(inventory, "_classify", runs_away)
    limits = (256, 60) if runaway == "memory" else (None, 1)
    run = archive.Run(root, limits=contained.Limits(*limits))
    found = archive.discover(run)
    assert [e.id for e in found] == ["a/search_", "b/search_"]
    row = run.rows[str(root / "a" / "bomb.txt")]
    said = {"memory": "memory limit of 256 MiB", "cpu": "CPU-time limit of 1 s"}[runaway]
    assert row.kind is inventory.Kind.UNREADABLE and said in row.note, row
    assert run.rows[str(root / "b" / "test.en")].kind is not inventory.Kind.UNREADABLE
