"""Awkward inputs through the command line: what each one does, and that none leaks a traceback.

Text inputs (empty lines, lines longer than ``seqlen``, very long lines, non-UTF-8 bytes,
Windows line endings, no final newline, source/target files of different lengths), weights
holding NaN/Inf, and bad arguments or files for every command.  Exit codes: 0 success,
1 parity/comparison failure, 2 usage or input error, 3 some sentences could not be
translated.

Most runs call ``groundhog_port.cli.main.main`` in this process with stdout/stderr captured
(:func:`parity_tests.support.fuzzing.run_cli_inprocess`: the command's code path, without the
interpreter start-up); those that measure memory or need the exit status of a real process
run ``python -m groundhog_port``.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

from groundhog_port.cli.main import COMMANDS, main
from parity_tests.support.command_lines import FX, MODEL, STATE, score_args, translate_args
from parity_tests.support.fuzzing import run_cli_inprocess

ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUTF8="1")
#: sentences of test.en the fixture model translates at once (no beam doubling)
FAST = ["he is expensive .", "these gardens love the trains .", "he wants my friend ."]


pytestmark = pytest.mark.usefixtures("one_thread")


def cli(*argv):
    rc, out, err = run_cli_inprocess(main, ["--log-level", "WARNING", *map(str, argv)])
    assert "Traceback" not in err, err
    return rc, out, err


def translate(src, out, *extra):
    return cli(*translate_args(src, "--trans", out, *extra))


def score(mode, src, trg, *extra):
    return cli(*score_args(mode, src, trg, "--allow-unk", *extra))


def one_error_line(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and " error: " in lines[0], err
    return lines[0]


def write(path, data):
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


# ---------------------------------------------------------------------------------------------
# empty lines
# ---------------------------------------------------------------------------------------------
def test_translate_empty_line(tmp_path):
    """GroundHog's spec for an empty source line: ``parse_input`` gives ``[null_sym]``
    (encdec.py:1499-1509), so ``sample()`` searches with ``len(seq) = 1``: ``minlen = 0`` and
    ``3 * len(seq) = 3`` steps (sample.py:60, 152).  A hypothesis must end within those 3
    steps, so the translation has at most 2 words; if none ended, sample.py would double the
    beam (up to 500) and then crash in ``numpy.argmin([])`` -- the port would write an empty
    line and exit 3.  With the fixture model: ``c&apos; est`` (cost 4.0249), exit 0, and the
    lines around it are translated as if it were not there."""
    src = write(tmp_path / "src.en", f"{FAST[0]}\n\n{FAST[1]}\n")
    rc, out, err = translate(src, tmp_path / "out.fr", "--verbose", "--n-best", tmp_path / "nb")
    assert rc == 0, err
    lines = (tmp_path / "out.fr").read_text(encoding="utf-8").split("\n")
    assert len(lines) == 4 and lines[3] == ""
    assert lines[1] == "c&apos; est"
    assert "Parsed Input: <eos>" in out
    nbest = [l.split(" ||| ") for l in (tmp_path / "nb").read_text(encoding="utf-8").splitlines()]
    empty = [n for n in nbest if n[0] == "1"]
    assert empty and all(len(n[1].split()) <= 2 for n in empty)
    alone_rc, _, _ = translate(
        write(tmp_path / "a.en", f"{FAST[0]}\n{FAST[1]}\n"), tmp_path / "a.fr"
    )
    assert alone_rc == 0
    assert (tmp_path / "a.fr").read_text(encoding="utf-8").split("\n")[:2] == [lines[0], lines[2]]


def test_score_empty_line(tmp_path):
    """score.py on an empty pair scores ``[null_sym]`` against ``[null_sym]`` (one target
    word: the end of sentence).  txt mode prints ``-sum(log p)`` of the float32 word
    probabilities, batch mode the padded scorer's log-probability: both one line per pair,
    in order; the other pairs are unaffected."""
    src = write(tmp_path / "s.en", f"{FAST[0]}\n\n{FAST[2]}\n")
    trg = write(tmp_path / "s.fr", "il est cher .\n\nil veut mon ami .\n")
    rc, out_txt, err = score("txt", src, trg)
    assert rc == 0, err
    costs = [float(x) for x in out_txt.split()]
    rc, out_batch, err = score("batch", src, trg)
    assert rc == 0, err
    vals = [float(x) for x in out_batch.split()]
    assert len(vals) == 3 and vals[1] < 0
    # txt mode's cost -sum(log p) is the batch scorer's log-probability negated (other
    # float32 summation, printed to 5 digits) where the padded batch is finite (pair 1 is
    # nan there: padding underflow, docs/recordings.md); the empty pair gets a positive cost
    # in txt mode (today +inf, while the batch scorer's log-probability stays finite)
    assert len(costs) == 3 and costs[1] > 0 and not np.isnan(costs[1])
    assert np.isfinite(costs[0]) and costs[0] > 0 and np.isfinite(vals[2])
    np.testing.assert_allclose(costs[2], -vals[2], rtol=1e-4)
    rc, both, _ = score(
        "batch",
        write(tmp_path / "n.en", f"{FAST[0]}\n{FAST[2]}\n"),
        write(tmp_path / "n.fr", "il est cher .\nil veut mon ami .\n"),
    )
    assert both.split() == [out_batch.split()[0], out_batch.split()[2]]


# ---------------------------------------------------------------------------------------------
# long and very long lines
# ---------------------------------------------------------------------------------------------
def test_lines_longer_than_seqlen_are_named(tmp_path):
    long_line = " ".join(["the cat is black ."] * 6)  # 30 words, seqlen is 20
    src = write(tmp_path / "src.en", f"{FAST[0]}\n{long_line}\n")
    rc, out, err = translate(src, tmp_path / "out.fr")
    assert rc == 0, err
    assert f"{src}: line 2 has 30 words, more than seqlen=20" in err
    assert "line 1 " not in err
    assert len((tmp_path / "out.fr").read_text(encoding="utf-8").splitlines()) == 2
    trg = write(
        tmp_path / "trg.fr", "il est cher .\n" + " ".join(["le chat est noir ."] * 5) + "\n"
    )
    for mode in ("txt", "batch"):
        rc, out, err = score(mode, src, trg)
        assert rc == 0, err
        assert f"{src}: line 2 has 30 words" in err and f"{trg}: line 2 has 25 words" in err


def _measured(argv):
    """``python -m groundhog_port ARGV`` in a fresh process; (rc, stdout, stderr, peak MiB)."""
    code = (
        "import resource, sys\n"
        "from groundhog_port.cli.main import main\n"
        "rc = main(sys.argv[1:])\n"
        "sys.stdout.flush()\n"
        "print('PEAK_RSS_KIB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
        "sys.exit(rc)\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, "--log-level", "WARNING", *map(str, argv)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )


def test_very_long_lines_bounded_memory(tmp_path):
    """A thousand words and more: a warning naming the line, and memory that stays small
    (the search keeps beam x words attention weights per step; the scorer one pass).  Time
    grows with the square of the length (the attention normaliser adds position by position,
    groundhog_port/model/numerics.py), so the sizes here are kept to a few seconds."""
    rng = np.random.RandomState(0)
    words = "the cat is black and he wants my friend .".split()
    long_src = " ".join(rng.choice(words, 1000))
    long_trg = " ".join(rng.choice("le chat est noir et il veut mon ami .".split(), 1200))
    src = write(tmp_path / "long.en", f"{FAST[0]}\n{long_src}\n")
    trg = write(tmp_path / "long.fr", f"il est cher .\n{long_trg}\n")
    short = write(tmp_path / "long400.en", " ".join(rng.choice(words, 400)) + "\n")
    runs = {
        "score": _measured(score_args("batch", src, trg, "--allow-unk")),
        "translate": _measured(translate_args(short, "--trans", tmp_path / "t.fr", beam=1)),
    }
    for name, p in runs.items():
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, f"{name}: {err}"
        assert "Traceback" not in err
        peak_mib = int(err.rsplit("PEAK_RSS_KIB", 1)[1].split()[0]) // 1024
        assert peak_mib < 1500, f"{name}: peak RSS {peak_mib} MiB"
        if name == "score":
            assert f"{src}: line 2 has 1000 words" in err and f"{trg}: line 2 has 1200 words" in err
            assert len(out.split()) == 2
        else:
            assert f"{short}: line 1 has 400 words" in err


# ---------------------------------------------------------------------------------------------
# bytes and line endings
# ---------------------------------------------------------------------------------------------
def test_non_utf8_input_is_one_error_naming_the_line(tmp_path):
    src = write(tmp_path / "latin1.en", b"he is expensive .\nthe caf\xe9 is black .\n")
    trg = write(tmp_path / "ok.fr", "il est cher .\nle café est noir .\n")
    for rc, _, err in (
        translate(src, tmp_path / "o.fr"),
        score("txt", src, trg),
        score("batch", src, trg),
        score("batch", trg, src),
    ):
        assert rc == 2
        line = one_error_line(err)
        assert str(src) in line and "line 2: not valid UTF-8 (byte 0xe9 at column 8)" in line
    assert not (tmp_path / "o.fr").exists() and not (tmp_path / "o.fr.partial").exists()


@pytest.mark.parametrize("variant", ["crlf", "no-final-newline", "crlf-no-final-newline"])
def test_line_endings_do_not_change_results(variant, tmp_path):
    """Python 2's ``line.strip()`` removed the ``\\r`` of Windows line endings and read a last
    line without newline: same translations, same total cost, same scores."""

    def mangle(text):
        data = text.encode("utf-8")
        if "crlf" in variant:
            data = data.replace(b"\n", b"\r\n")
        if "no-final-newline" in variant:
            data = data.rstrip(b"\r\n")
        return data

    src_text = f"{FAST[0]}\n{FAST[2]}\n"
    trg_text = "il est cher .\nil veut mon ami .\n"
    results = []
    for tag, conv in (("plain", lambda t: t.encode()), ("mangled", mangle)):
        src = write(tmp_path / f"{tag}.en", conv(src_text))
        trg = write(tmp_path / f"{tag}.fr", conv(trg_text))
        rc, out, err = translate(src, tmp_path / f"{tag}.out")
        assert rc == 0, err
        results.append(
            (
                (tmp_path / f"{tag}.out").read_bytes(),
                out,
                score("batch", src, trg)[1],
                score("txt", src, trg)[1],
            )
        )
    assert results[0] == results[1]
    assert b"\r" not in results[1][0]


def test_score_files_of_different_lengths(tmp_path):
    src = write(tmp_path / "three.en", "\n".join(FAST) + "\n")
    trg = write(tmp_path / "two.fr", "il est cher .\nil veut mon ami .\n")
    for mode in ("batch", "txt"):
        rc, out, err = score(mode, src, trg)
        assert rc == 2 and out == ""
        line = one_error_line(err)
        assert "3 source lines but 2 target lines" in line and str(src) in line and str(trg) in line
    rc, out, err = score("batch", src, trg, "--scores", tmp_path / "scores.txt")
    assert rc == 2 and not (tmp_path / "scores.txt").exists()


# ---------------------------------------------------------------------------------------------
# weights with NaN / Inf
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def nan_model(tmp_path_factory):
    with np.load(MODEL) as z:
        arrays = dict(z)
    arrays["b_dec_deep_softmax"][5] = np.nan
    arrays["W_0_enc_approx_embdr"][3, 2] = np.inf
    path = tmp_path_factory.mktemp("nan") / "nan_model.npz"
    np.savez(path, **arrays)
    return path


def test_inspect_flags_nonfinite_weights(nan_model):
    rc, out, err = cli("inspect", "--state", STATE, nan_model)
    assert rc == 2
    assert "NONFINITE   b_dec_deep_softmax: 1 NaN/Inf values" in out
    assert "NONFINITE   W_0_enc_approx_embdr: 1 NaN/Inf values" in out
    assert "2 problem(s), listed above" in one_error_line(err)
    rc, out, err = cli("inspect", "--state", STATE, MODEL)
    assert rc == 0 and "NONFINITE" not in out and err == ""


def test_translate_and_score_refuse_nonfinite_unless_allowed(nan_model, tmp_path):
    src = write(tmp_path / "s.en", f"{FAST[0]}\n")
    trg = write(tmp_path / "s.fr", "il est cher .\n")
    for rc, out, err in (
        cli(*translate_args(src, "--trans", tmp_path / "o.fr", model=nan_model)),
        cli(*score_args("batch", src, trg, model=nan_model)),
        cli(*score_args("txt", src, trg, model=nan_model)),
    ):
        assert rc == 2 and out == ""
        line = one_error_line(err)
        assert "non-finite weights (NaN/Inf)" in line and "--allow-nonfinite" in line
        assert str(nan_model) in line
    assert not (tmp_path / "o.fr").exists()
    # allowed: runs to the end (NaN costs: nothing finishes, empty lines, as the original
    # would compute), no traceback
    rc, out, err = cli(
        *translate_args(src, "--trans", tmp_path / "o.fr", "--allow-nonfinite", model=nan_model)
    )
    assert rc in (0, 3), err
    assert (tmp_path / "o.fr").exists()
    rc, out, err = cli(*score_args("batch", src, trg, "--allow-nonfinite", model=nan_model))
    assert rc == 0 and out.strip() == "nan"


# ---------------------------------------------------------------------------------------------
# exit codes and bad arguments for every command
# ---------------------------------------------------------------------------------------------
def test_usage_errors_exit_2():
    assert cli()[0] == 2  # no command: help, exit 2
    assert cli("frobnicate")[0] == 2
    for command in COMMANDS:
        rc, out, err = cli(command, "--no-such-option")
        assert rc == 2, command
        assert "usage: groundhog-port" in err and " error: " in err.strip().splitlines()[-1]
        assert "Traceback" not in err
        assert cli(command, "--help")[0] == 0


def test_usage_error_exit_status_of_the_process():
    r = subprocess.run(
        [sys.executable, "-m", "groundhog_port", "translate", "--beam-size", "x"],
        capture_output=True,
        text=True,
        env=ENV,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "invalid int value: 'x'" in r.stderr


def _bad_invocations(tmp):
    missing = tmp / "missing"
    directory = tmp
    garbage = write(tmp / "garbage.bin", b"\x00\x01garbage")
    src = write(tmp / "s.en", f"{FAST[0]}\n")
    return {
        "inspect: missing state": ["inspect", "--state", missing],
        "inspect: state is a directory": ["inspect", "--state", directory, MODEL],
        "inspect: model is garbage": ["inspect", "--state", STATE, garbage],
        "score: missing model": score_args("batch", src, src, model=missing),
        "score: missing source": score_args("txt", missing, src),
        "score: --src without --trg": score_args("batch", src, None),
        "score: --resume without --scores": score_args("batch", src, src, "--resume"),
        "score: garbage .h5": score_args(
            "batch", write(tmp / "g.en.h5", b"junk"), write(tmp / "g.fr.h5", b"junk")
        ),
        "translate: sampling without --n-samples": [
            "translate",
            "--state",
            STATE,
            MODEL,
            "--source",
            src,
            "--trans",
            tmp / "o",
        ],
        "translate: --beam-size 0": translate_args(src, "--trans", tmp / "o", beam=0, batch=None),
        "translate: output directory missing": translate_args(
            src, "--trans", missing / "o.txt", batch=None
        ),
        "translate: state is garbage": translate_args(
            src, "--trans", tmp / "o", batch=None, state=garbage
        ),
        "translate: bad changes": translate_args(
            src, "--trans", tmp / "o", batch=None, changes=["dim=__import__('os')"]
        ),
        "translate: --device cuda:7": translate_args(
            src, "--trans", tmp / "o", "--device", "cuda:7", batch=None
        ),
        "bleu: missing hypothesis": ["bleu", "--hyp", missing, "--ref", src],
        "bleu: different lengths": ["bleu", "--hyp", src, "--ref", write(tmp / "two", "a\nb\n")],
        "reproduce: missing case": ["reproduce", "--case", missing],
        "parity: missing case": ["parity", "--case", missing],
    }


def test_bad_files_and_arguments_exit_2_with_one_line(tmp_path):
    failures = []
    for name, argv in _bad_invocations(tmp_path).items():
        if argv[0] not in COMMANDS:
            continue
        rc, out, err = cli(*argv)
        lines = err.strip().splitlines()
        if rc != 2 or len(lines) != 1 or " error: " not in lines[0]:
            failures.append(f"{name}: exit {rc}, stderr {err!r}")
    assert not failures, "\n".join(failures)


def test_inspect_json_with_values_json_cannot_hold(tmp_path):
    """A state may hold numpy scalars/arrays, sets, complex numbers: ``inspect --json``
    still prints one JSON object."""
    import json
    import pickle

    import legacy_states

    state = legacy_states.safe_load_pickle(STATE)
    state.update(
        hookFreq=np.array([1, 2]), loopIters={1, 2}, cutoff=complex(1, 2), seed=np.int64(5)
    )
    p = tmp_path / "odd_state.pkl"
    p.write_bytes(pickle.dumps(state, protocol=2))
    rc, out, err = cli("inspect", "--state", p, MODEL, "--json", "--data-dir", FX)
    assert rc == 0, err
    rep = json.loads(out)
    differs = rep["differs_from_prototype"]
    assert differs["hookFreq"] == [1, 2] and differs["loopIters"] == [1, 2]
    assert differs["cutoff"] == "(1+2j)" and differs["seed"] == 5


def test_output_path_is_a_directory(tmp_path):
    src = write(tmp_path / "s.en", f"{FAST[0]}\n")
    for argv in (["--trans", tmp_path], ["--trans", tmp_path / "o.fr", "--n-best", tmp_path]):
        rc, _, err = cli(*translate_args(src, *argv))
        assert rc == 2 and "is a directory" in one_error_line(err)
    rc, _, err = score(
        "batch", src, write(tmp_path / "t.fr", "il est cher .\n"), "--scores", tmp_path
    )
    assert rc == 2 and "is a directory" in one_error_line(err)
