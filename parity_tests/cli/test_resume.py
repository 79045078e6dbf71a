"""Interrupted runs: nothing half-written, and ``--resume`` finishes them byte for byte.

``translate`` and ``score --mode batch --scores F`` write ``F.partial`` (+ ``F.partial.journal``)
and rename it to ``F`` only at the end (:class:`groundhog_port.outputs.Journal`).  Each test
starts the command on the bundled fixture, kills it (SIGKILL, and once SIGINT) once some
lines are in ``F.partial``, checks that ``F`` does not exist, reruns with ``--resume`` and
compares with an uninterrupted run: same bytes, same ``Total cost`` line.  The interrupted
command is a real process (killed, or stopped by SIGINT); the uninterrupted reference and the
``--resume`` runs, which are not about the process boundary, run in this process
(``inprocess.run_cli``, one thread), sparing a torch import each.
"""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from parity_tests.support.command_lines import FX, MODEL, score_args, source_file, translate_args
from parity_tests.support.inprocess import interrupted_here, run_here

ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUTF8="1")
#: test.en lines the fixture model translates without doubling its beam (fast, steady)
FAST_LINES = (1, 2, 3, 4, 5, 6, 18, 21, 22, 25)


def start(*argv):
    return subprocess.Popen(
        [sys.executable, "-m", "groundhog_port", "--log-level", "INFO", *map(str, argv)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )


def finish(proc, timeout=300):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def interrupt_after(proc, partial, n_lines, sig, timeout=300):
    """Send ``sig`` once ``partial`` holds ``n_lines`` complete lines; wait for the end."""
    deadline = time.monotonic() + timeout
    while True:
        if partial.exists() and partial.read_bytes().count(b"\n") >= n_lines:
            proc.send_signal(sig)
            break
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(
                f"finished (exit {proc.returncode}) before {n_lines} lines were written:\n{err}"
            )
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no {n_lines} lines in {partial} after {timeout}s")
        time.sleep(0.01)
    return finish(proc)


def check_interrupted(rc, err, sig, out_path):
    partial = out_path.with_name(out_path.name + ".partial")
    journal = out_path.with_name(out_path.name + ".partial.journal")
    assert not out_path.exists(), "the final file exists after an interruption"
    assert partial.exists() and journal.exists()
    if sig == signal.SIGKILL:
        assert rc == -signal.SIGKILL
    else:
        assert rc == 130, err
        assert err.strip().splitlines()[-1].endswith("interrupted")
        assert "Traceback" not in err
    return partial.read_bytes().count(b"\n")


N_LINES = 60


class Reference:
    """An uninterrupted run, made once (when first needed) and shared by the tests of this
    module."""

    def __init__(self, args, out_path):
        self.args, self.out_path = args, out_path
        self._result = None

    def result(self):
        if self._result is None:
            self._result = run_here(*self.args, "--trans", self.out_path)
            assert self._result[0] == 0, self._result[2]
        return self._result


@pytest.fixture(scope="module")
def translate_case(tmp_path_factory):
    d = tmp_path_factory.mktemp("resume")
    src = source_file(d / "src.en", FAST_LINES * (N_LINES // len(FAST_LINES)))
    args = translate_args(src)
    return args, Reference(args, d / "ref.fr")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_translate_resume(sig, translate_case, tmp_path):
    args, reference = translate_case
    out_path = tmp_path / "out.fr"
    rc, _, err = interrupt_after(
        start(*args, "--trans", out_path), out_path.with_name("out.fr.partial"), 8, sig
    )
    kept = check_interrupted(rc, err, sig, out_path)
    assert kept < N_LINES, "the run was not interrupted midway"

    rc, out, err = run_here(*args, "--trans", out_path, "--resume")
    _, out_ref, _ = reference.result()
    ref_path = reference.out_path
    assert rc == 0, err
    assert "resuming" in err and f"of {N_LINES} lines" in err
    assert out_path.read_bytes() == ref_path.read_bytes()
    total = [l for l in out.splitlines() if l.startswith("Total cost of the translations: ")]
    assert total and total == [l for l in out_ref.splitlines() if l.startswith("Total cost")]
    assert not out_path.with_name("out.fr.partial").exists()
    assert not out_path.with_name("out.fr.partial.journal").exists()


def test_score_batch_resume(tmp_path):
    """``--mode batch --scores F``: whole batches are kept (``bs=8`` here, so many batches)."""
    src, trg = tmp_path / "big.en", tmp_path / "big.fr"
    src.write_bytes((FX / "test.en").read_bytes() * 15)  # 600 pairs, 75 batches
    trg.write_bytes((FX / "test.fr").read_bytes() * 15)
    args = score_args("batch", src, trg, "--allow-unk", changes=["bs=8"])
    ref_path, out_path = tmp_path / "ref.scores", tmp_path / "out.scores"
    rc, _, err = interrupt_after(
        start(*args, "--scores", out_path),
        out_path.with_name("out.scores.partial"),
        20,
        signal.SIGKILL,
    )
    kept = check_interrupted(rc, err, signal.SIGKILL, out_path)
    assert kept < 600, "the run was not interrupted midway"
    rc_ref, _, err_ref = run_here(*args, "--scores", ref_path)
    assert rc_ref == 0, err_ref

    rc, out, err = run_here(*args, "--scores", out_path, "--resume")
    assert rc == 0, err
    assert "resuming" in err
    assert out_path.read_bytes() == ref_path.read_bytes()
    assert len(out_path.read_bytes().splitlines()) == 600
    assert not out_path.with_name("out.scores.partial").exists()


def test_resume_after_damaged_partial_files(tmp_path, monkeypatch):
    """A kill can leave a last line cut anywhere, even inside a UTF-8 character, and a
    journal may be damaged: ``--resume`` keeps the complete, readable prefix and goes on.
    (The journals begin with the run's fingerprint line, taken from a real interrupted run.)"""
    import json

    src = source_file(tmp_path / "s.en", FAST_LINES[:4])
    out = tmp_path / "o.fr"
    from groundhog_port.search.translator import Translator

    rc, _, err = interrupted_here(
        monkeypatch, Translator, "translate_seqs", 1, *translate_args(src, "--trans", out)
    )
    assert rc == 130, err
    header = out.with_name("o.fr.partial.journal").read_text(encoding="utf-8").split("\n")[0]
    assert header.startswith("#fingerprint {")
    record = json.dumps({"cost": 1.5, "error": None, "nbest": [["kept line", 1.5]]})
    cases = {
        # two whole lines (the second's record is damaged) and half of "é"
        "cut character, damaged record": (
            b"kept line\nsecond\ncaf\xc3",
            f"{record}\n{{not json\n",
            1,
        ),
        "cut character": (b"kept line\ncaf\xc3", f"{record}\n", 1),
        "empty journal": (b"kept line\n", "", 0),
    }
    for name, (partial, journal, kept) in cases.items():
        out.with_name("o.fr.partial").write_bytes(partial)
        out.with_name("o.fr.partial.journal").write_text(header + "\n" + journal, encoding="utf-8")
        rc, stdout, err = run_here(
            *translate_args(src, "--trans", out, "--resume"), log_level="WARNING"
        )
        assert rc == 0 and "Traceback" not in err, f"{name}: {err}"
        got = out.read_text(encoding="utf-8").split("\n")
        assert len(got) == 5 and got[4] == "", name
        assert (got[0] == "kept line") == (kept == 1), name
        total = float(stdout.split(": ")[1])
        assert total > 0, name
        out.unlink()


# ---------------------------------------------------------------------------------------------
# fingerprints (issue 25, item 4) and no empty leftovers (issue 26, friction 8)
# ---------------------------------------------------------------------------------------------


def _one_error(err, *words):
    errors = [l for l in err.splitlines() if "error:" in l]
    assert len(errors) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in errors[0], err
    return errors[0]


def test_resume_checks_the_fingerprint(monkeypatch, tmp_path):
    """A run of 6 lines stopped after 3; then: without ``--resume`` the partial is reported
    (exit 2, kept); ``--resume`` with another source, beam, ``--normalize`` or changes is
    refused, naming what differs (the partial untouched); the same command resumes and
    gives the uninterrupted run's bytes."""
    from groundhog_port.search.translator import Translator

    src = source_file(tmp_path / "a.en", FAST_LINES[:6])
    other = source_file(tmp_path / "b.en", FAST_LINES[4:10])
    out = tmp_path / "o.fr"
    args = translate_args(src, "--trans", out)
    rc, _, err = interrupted_here(monkeypatch, Translator, "translate_seqs", 3, *args)
    assert rc == 130, err
    partial = out.with_name("o.fr.partial")
    kept = partial.read_bytes()
    journal = out.with_name("o.fr.partial.journal").read_bytes()
    assert kept.count(b"\n") == 3

    rc, _, err = run_here(*args)
    assert rc == 2
    _one_error(err, "3 complete lines", "--resume")
    changed = tmp_path / "changed_model.npz"  # the same shapes, one weight changed
    with np.load(MODEL) as arrays:
        weights = dict(arrays)
    first = sorted(weights)[0]
    weights[first] = weights[first] + np.float32(1e-3)
    np.savez(changed, **weights)
    refusals = {
        "source": translate_args(other, "--trans", out),
        "model sha256:": translate_args(src, "--trans", out, model=changed),
        "beam_size 5 (now 6)": translate_args(src, "--trans", out, beam=6),
        "normalize False (now True)": translate_args(src, "--trans", out, "--normalize"),
        "changes '' (now 'bs=4')": translate_args(src, "--trans", out, changes=["bs=4"]),
    }
    for what, argv in refusals.items():
        rc, _, err = run_here(*argv, "--resume")
        assert rc == 2, what
        line = _one_error(err, "--resume", "another run", what)
        assert line.count("(now") == 1, line  # only what differs is named
        assert partial.read_bytes() == kept and not out.exists()
        assert out.with_name("o.fr.partial.journal").read_bytes() == journal

    rc, _, err = run_here(*args, "--resume")
    assert rc == 0, err
    rc_ref, _, err_ref = run_here(*translate_args(src, "--trans", tmp_path / "ref.fr"))
    assert rc_ref == 0, err_ref
    assert out.read_bytes() == (tmp_path / "ref.fr").read_bytes()


def test_digests_ahead_are_the_files_digests(tmp_path):
    """The state's and model's digests, computed on a thread while the model loads (issue
    54), are ``file_digest``'s; a file not given is digested when asked; a file that cannot
    be read raises where the digest is asked for."""
    import hashlib

    from groundhog_port import outputs
    from groundhog_port.errors import LegacyInputError

    big, small = tmp_path / "big", tmp_path / "small"
    big.write_bytes(b"x" * 3_000_000)
    small.write_bytes(b"y")
    ahead = outputs.DigestsAhead([big, None, tmp_path / "missing"])
    assert ahead.get(big) == "sha256:" + hashlib.sha256(b"x" * 3_000_000).hexdigest()
    assert ahead.get(str(big)) == outputs.file_digest(big)
    assert ahead.get(small) == "sha256:" + hashlib.sha256(b"y").hexdigest()
    with pytest.raises(LegacyInputError, match="cannot read"):
        ahead.get(tmp_path / "missing")


def test_score_resume_checks_the_fingerprint(monkeypatch, tmp_path):
    """``score --mode batch --scores F --resume`` with another target file is refused."""
    from groundhog_port.search import scoring as score  # the score command imports it when it runs

    src, trg = tmp_path / "s.en", tmp_path / "s.fr"
    src.write_bytes((FX / "test.en").read_bytes())
    trg.write_bytes((FX / "test.fr").read_bytes())
    other = tmp_path / "o.fr"
    other.write_bytes((FX / "test.fr").read_bytes().replace(b" .", b" !", 1))
    out = tmp_path / "scores"
    args = score_args("batch", src, None, "--allow-unk", "--scores", out, changes=["bs=8"])
    rc, _, err = interrupted_here(monkeypatch, score, "score_batch", 2, *args, "--trg", trg)
    assert rc == 130, err
    assert out.with_name("scores.partial").read_bytes().count(b"\n") == 16
    rc, _, err = run_here(*args, "--trg", other, "--resume")
    assert rc == 2
    _one_error(err, "another run", "trg sha256:")
    rc, _, err = run_here(*args, "--trg", trg, "--resume")
    assert rc == 0 and "resuming" in err, err


def test_failed_runs_leave_no_empty_partials(monkeypatch, tmp_path):
    """Issue 26, friction 8: a run that fails before its first line (interrupted at once, or
    bad input met after the output was opened) leaves no empty ``X.partial`` and journal,
    even next to a finished X, which stays as it was."""
    from groundhog_port.search.translator import Translator

    src = source_file(tmp_path / "a.en", FAST_LINES[:2])
    out = tmp_path / "o.fr"
    out.write_text("finished\n")
    args = translate_args(src, "--trans", out)
    rc, _, err = interrupted_here(monkeypatch, Translator, "translate_seqs", 0, *args)
    assert rc == 130, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.en", "o.fr"]
    unknown = tmp_path / "u.fr"
    unknown.write_text("zzzunknownword\n" * 40)
    scores = tmp_path / "sc"
    rc, _, err = run_here(*score_args("batch", FX / "test.en", unknown, "--scores", scores))
    assert rc == 2, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.en", "o.fr", "u.fr"]
    assert out.read_text() == "finished\n"
