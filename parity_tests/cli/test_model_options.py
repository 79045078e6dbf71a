"""The loading options every model command shares (``commands/common.py``:
``--lenient``, ``--allow-nonfinite``, ``--stable-softmax``, ``--device``, ``--strict``), each
given to every command that takes it, through the command line, and shown to change what
that command outputs (issue 53, item 2; ``tools/flag_table.py`` names these tests, and
``tools/mutation_sweep.py --flags`` resets each option after parsing to prove they fail).

The outputs are pinned to what the option means: ``--lenient`` is GroundHog's
``Container.load`` (a missing parameter stays zero: the output equals the strict run on the
model with that parameter zeroed); ``--allow-nonfinite`` runs a model whose NaN lies where
no input reaches (the output equals the clean model's); ``--stable-softmax`` is the softmax's
shift invariance (the same scores within float32 rounding where the original's softmax is
finite, finite scores where the original's overflows)."""

import json
import math

import numpy as np
import pytest

from groundhog_port.cli.main import main
from legacy_states.unpickle import safe_load_pickle
from parity_tests.support.cases import REPO
from parity_tests.support.fuzzing import run_cli_inprocess
from parity_tests.support.models import upper_cased_vocabularies

FX = REPO / "fixtures" / "search"
STATE = FX / "search_state.pkl"
MODEL_FILE = FX / "search_model.npz"
#: the commands that take the three loading switches, and export, which refuses two of them
LOADING = ("score", "translate", "reproduce")
N_LINES = 4


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """The first sentences of the fixture's test set, the model's arrays, and the
    translations of the clean model (what ``reproduce`` compares with)."""
    d = tmp_path_factory.mktemp("model_options")
    for name in ("test.en", "test.fr"):
        lines = (FX / name).read_text(encoding="utf-8").splitlines(True)[:N_LINES]
        (d / name).write_text("".join(lines), encoding="utf-8")
    with np.load(FX / "search_model.npz") as z:
        arrays = {k: z[k] for k in z.files}
    clean = _save(d, "clean", arrays)
    rc, _, err = _cli("translate", clean, "--beam-search", "--beam-size", "2",
                      "--source", d / "test.en", "--trans", d / "archived.txt")  # fmt: skip
    assert rc == 0, err
    return d, arrays, clean


def _save(d, name, arrays):
    path = d / f"{name}_model.npz"
    np.savez(path, **arrays)
    return path


def _cli(command, model, *extra, state=STATE):
    argv = [command, "--state", state, model, *extra]
    return run_cli_inprocess(main, [str(a) for a in argv])


def output(command, work, model, *flags):
    """``(exit status, what the command wrote, stderr)`` of ``command`` on ``model``."""
    d = work[0]
    out = d / f"{command}.out"
    out.unlink(missing_ok=True)
    if command == "score":
        extra = ["--mode", "batch", "--src", d / "test.en", "--trg", d / "test.fr",
                 "--allow-unk", "--scores", out]  # fmt: skip
    elif command == "translate":
        extra = ["--beam-search", "--beam-size", "2", "--source", d / "test.en", "--trans", out]
    else:  # reproduce: the clean model's beam-2 translations as the archived file
        saved = d / "reproduced"
        if saved.exists():
            for f in saved.iterdir():
                f.unlink()
        extra = ["--source", d / "test.en", "--archived-trans", d / "archived.txt",
                 "--beam-size", "2", "--save-dir", saved]  # fmt: skip
        out = saved / "archived.txt"
    rc, stdout, err = _cli(command, model, *extra, *flags)
    text = out.read_text(encoding="utf-8") if out.is_file() else None
    return rc, text, err


@pytest.mark.parametrize("command", LOADING)
def test_lenient_is_container_load_in_every_command(work, command):
    """A model without ``b_0_dec_hid_readout_0``: refused, and with ``--lenient`` the output
    of the strict run on the model whose ``b_0_dec_hid_readout_0`` is zero (Container.load:
    the parameter keeps its zero initial value)."""
    d, arrays, _ = work
    name = "b_0_dec_hid_readout_0"
    missing = _save(d, "missing", {k: v for k, v in arrays.items() if k != name})
    zeroed = _save(d, "zeroed", dict(arrays, **{name: np.zeros_like(arrays[name])}))
    rc, text, err = output(command, work, missing)
    assert rc == 2 and f"missing {name}" in err and text is None, err
    rc, lenient, err = output(command, work, missing, "--lenient")
    assert "LENIENT LOAD" in err and lenient is not None, err
    # reproduce exits 1: the model differs from the one that wrote the archived file
    assert (rc, lenient) == output(command, work, zeroed)[:2] and rc == (command == "reproduce")


def _nan_where_no_input_reaches(d, arrays):
    """The source embedding row of a vocabulary word none of the sentences holds, set to
    NaN (not the end-of-sequence row: the last one, which every sentence reaches)."""
    words = set((d / "test.en").read_text(encoding="utf-8").split())
    ivocab = safe_load_pickle(FX / "ivocab.en.pkl")
    emb = arrays["W_0_enc_approx_embdr"].copy()
    row = max(i for i, w in ivocab.items() if i > 1 and w not in words)
    emb[row] = np.nan
    return _save(d, "nan", dict(arrays, W_0_enc_approx_embdr=emb))


@pytest.mark.parametrize("command", LOADING)
def test_allow_nonfinite_runs_a_model_with_nan_in_every_command(work, command):
    d, arrays, clean = work
    nan = _nan_where_no_input_reaches(d, arrays)
    rc, text, err = output(command, work, nan)
    assert rc == 2 and "NaN" in err and text is None, err
    rc, allowed, err = output(command, work, nan, "--allow-nonfinite")
    assert rc == 0, err
    assert allowed == output(command, work, clean)[1]


def _scores(text):
    return [float(x) for x in text.split()]


def test_stable_softmax_is_shift_invariant_and_finite_where_the_original_overflows(work):
    """``score``: the same scores (to float32 rounding) on the fixture's model, finite ones
    where the attention energies overflow ``exp`` in float32 (|e| > 88.7: ``D`` x 1e4)."""
    d, arrays, clean = work
    plain = _scores(output("score", work, clean)[1])
    stable = _scores(output("score", work, clean, "--stable-softmax")[1])
    # score prints 6 significant digits (%g): float32 rounding in the sum may move the last
    # one by a unit, never more
    units = [
        abs(a - b) / 10.0 ** (math.floor(math.log10(abs(a))) - 5) for a, b in zip(plain, stable)
    ]
    assert max(round(u) for u in units) <= 1, units
    big = _save(d, "big", dict(arrays, D_dec_transition_0=arrays["D_dec_transition_0"] * 1e4))
    rc, text, err = output("score", work, big)
    overflowed = rc != 0 or not all(map(math.isfinite, _scores(text)))
    rc, text, err = output("score", work, big, "--stable-softmax")
    assert rc == 0 and all(map(math.isfinite, _scores(text))), err
    assert overflowed


@pytest.mark.parametrize("command", ("translate", "reproduce"))
def test_stable_softmax_decodes_where_the_original_overflows(work, command):
    d, arrays, _ = work
    big = _save(d, "big", dict(arrays, D_dec_transition_0=arrays["D_dec_transition_0"] * 1e4))
    plain = output(command, work, big)
    rc, stable, err = output(command, work, big, "--stable-softmax")
    # reproduce exits 1: these are not the archived (clean model's) translations
    assert rc == (command == "reproduce") and stable.count("\n") == N_LINES, err
    assert all(line.strip() for line in stable.splitlines())
    assert plain[1] != stable


@pytest.mark.parametrize("flag", ("--lenient", "--stable-softmax"))
def test_export_refuses_what_would_change_the_model(work, flag, tmp_path):
    """export writes the model as loaded strictly and computed as the original did."""
    rc, _, err = _cli("export", work[2], "--format", "safetensors", "--out", tmp_path / "x", flag)
    assert rc == 2 and "do not apply" in err and not (tmp_path / "x").exists(), err


def test_export_allow_nonfinite_carries_the_nan(work, tmp_path):
    from safetensors.numpy import load_file

    d, arrays, _ = work
    nan = _nan_where_no_input_reaches(d, arrays)
    rc, _, err = _cli("export", nan, "--format", "safetensors", "--out", tmp_path / "a")
    assert rc == 2 and "NaN" in err, err
    rc, _, err = _cli(
        "export", nan, "--format", "safetensors", "--out", tmp_path / "b", "--allow-nonfinite"
    )
    assert rc == 0, err
    (weights,) = (tmp_path / "b").glob("*.safetensors")
    got = [v for v in load_file(weights).values() if np.isnan(v).any()]
    assert len(got) == 1 and np.isnan(got[0]).all(axis=-1).sum() == 1


#: a cheap run of every command that loads a model (after ``--state S MODEL``)
RUNS = {
    "inspect": lambda d: ["--json"],
    "score": lambda d: [
        "--mode",
        "batch",
        "--src",
        d / "test.en",
        "--trg",
        d / "test.fr",
        "--allow-unk",
        "--scores",
        d / "s.txt",
    ],  # fmt: skip
    "translate": lambda d: [
        "--beam-search",
        "--beam-size",
        "1",
        "--source",
        d / "test.en",
        "--trans",
        d / "t.txt",
    ],  # fmt: skip
    "reproduce": lambda d: [
        "--source",
        d / "test.en",
        "--archived-trans",
        d / "archived.txt",
        "--beam-size",
        "2",
    ],  # fmt: skip
    "export": lambda d: ["--format", "safetensors", "--out", d / "exported"],
}


@pytest.mark.parametrize("command", [c for c in RUNS if c != "inspect"])
def test_device_is_used_by_every_command(work, command):
    """``--device cuda:99`` names a device no machine here has: one line, exit 2 (ignored, the
    command would run on the CPU)."""
    d, _, clean = work
    rc, _, err = _cli(command, clean, *RUNS[command](d), "--device", "cuda:99")
    assert rc == 2 and "cuda:99" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("command", list(RUNS))
def test_strict_refuses_a_typo_in_every_command(work, command):
    """``loopIter=5`` (for loopIters) warns and runs; with ``--strict`` it is refused."""
    d, _, clean = work
    rc, _, err = _cli(command, clean, "loopIter=5", *RUNS[command](d))
    assert rc == 0 and "did you mean 'loopIters'" in err, err
    rc, _, err = _cli(command, clean, "loopIter=5", *RUNS[command](d), "--strict")
    assert rc == 2 and "unknown state key 'loopIter'" in err, err


def _upper_vocabularies(d):
    return upper_cased_vocabularies(FX / "ivocab.fr.pkl", d)


#: the same model and changes, given the four ways every command takes them
FORMS = {
    "words": lambda model, change: [model, change],
    "--model": lambda model, change: ["--model", model, change],
    "--changes": lambda model, change: [model, "--changes", change],
    "--model --changes": lambda model, change: ["--changes", change, "--model", model],
}


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("command", ("translate", "reproduce"))
def test_model_and_changes_reach_the_output(work, command, form):
    """``indx_word_target`` changed to an upper-cased vocabulary: the words written are the
    clean model's, upper-cased (sample.py:247 maps ids to words through it)."""
    d, _, clean = work
    ivocab, _ = _upper_vocabularies(d)
    change = f"indx_word_target='{ivocab}'"
    out = d / "upper.txt"
    if command == "translate":
        extra = ["--beam-search", "--beam-size", "2", "--source", d / "test.en", "--trans", out]
    else:
        extra = ["--source", d / "test.en", "--archived-trans", d / "archived.txt",
                 "--beam-size", "2", "--save-dir", d / "upper"]  # fmt: skip
        out = d / "upper" / "archived.txt"
        if out.exists():
            out.unlink()
    argv = [command, "--state", STATE, *FORMS[form](clean, change), *extra]
    rc, _, err = run_cli_inprocess(main, [str(a) for a in argv])
    assert rc == (command == "reproduce"), err  # reproduce: not the archived words
    expected = (d / "archived.txt").read_text(encoding="utf-8").upper()
    assert out.read_text(encoding="utf-8") == expected


@pytest.mark.parametrize("form", list(FORMS))
def test_model_and_changes_reach_the_scores(work, form):
    """``word_indx_trgt`` changed to the upper-cased vocabulary: the upper-cased references
    score as the clean ones do (score.py:130 maps words to ids through it)."""
    d, _, clean = work
    _, vocab = _upper_vocabularies(d)
    trg = d / "TEST.fr"
    trg.write_text((d / "test.fr").read_text(encoding="utf-8").upper(), encoding="utf-8")
    out = d / "upper_scores.txt"
    argv = ["score", "--state", STATE, *FORMS[form](clean, f"word_indx_trgt='{vocab}'"),
            "--mode", "batch", "--src", d / "test.en", "--trg", trg, "--allow-unk",
            "--scores", out]  # fmt: skip
    rc, _, err = run_cli_inprocess(main, [str(a) for a in argv])
    assert rc == 0, err
    assert out.read_text(encoding="utf-8") == output("score", work, clean)[1]


def test_device_is_used_by_parity_and_train(legacy_root, tmp_path):
    """The same for the commands that take a case or train: ``cuda:99`` is refused in one line."""
    runs = {
        "parity": ["parity", "--case", legacy_root / "search", "--only", "repr"],
        "train": [
            "train",
            "--state",
            STATE,
            "--data-dir",
            legacy_root / "data",
            f"prefix='{tmp_path}/t_'",
            "--max-updates",
            "1",
        ],  # fmt: skip
    }
    for command, argv in runs.items():
        rc, _, err = run_cli_inprocess(main, [str(a) for a in argv + ["--device", "cuda:99"]])
        assert rc == 2 and "cuda:99" in err and len(err.strip().splitlines()) == 1, (command, err)


def test_print_probs_prints_exp_of_the_scores_in_float32(work):
    """``score --print-probs``: score.py:172 prints ``numpy.exp(scores)`` of the float32
    scores with ``{:.5e}``: the plain file's log-probabilities, exponentiated in float32
    (underflowing to 0 below ~-103, as the original's did).  The plain values are printed to
    6 digits: exp's relative error is then at most half a unit of their 6th digit (to
    first order; the second order, and float32 exp's own rounding, stay below 2**-23), plus
    half a unit of the 6th digit printed."""
    d, _, clean = work
    logs = _scores(output("score", work, clean)[1])
    probs = _scores(output("score", work, clean, "--print-probs")[1])
    for x, p in zip(logs, probs, strict=True):
        want = float(np.exp(np.float32(x)))
        slack = 0.5 * 10.0 ** (math.floor(math.log10(abs(x))) - 5) + 0.5e-5 + 2.0**-23
        assert abs(p - want) <= want * slack or (want < 1e-40 and p < 1e-40), (x, p)
    assert logs != probs


@pytest.mark.parametrize("form", list(FORMS))
def test_inspect_shows_the_changes_and_the_models_arrays(work, form):
    """``inspect``: the changes applied to the state as train.py applied them (the change is
    among the keys that differ from the prototype) and every array of the model found."""
    argv = ["inspect", "--json", "--state", STATE, *FORMS[form](work[2], "seqlen=33")]
    rc, out, err = run_cli_inprocess(main, [str(a) for a in argv])
    assert rc == 0, err
    report = json.loads(out)
    assert report["differs_from_prototype"]["seqlen"] == 33
    assert report["parameters"] and all(p["in_checkpoint"] for p in report["parameters"])


def test_parity_takes_the_model_and_changes_and_strict(legacy_root):
    """``parity``: the recording passes with its own state; with ``bias_code=False`` GroundHog
    builds no initializer (encdec.py:850), so the checkpoint's initializer arrays are
    unknown: refused; a typo is a warning, or refused with ``--strict``."""
    d = legacy_root / "search"
    explicit = ["--state", d / "search_state.pkl", "--model", d / "search_model.npz",
                "--trace", d / "trace.h5"]  # fmt: skip
    for head, tail in (([], ["--case", d]), (explicit, []), ([d / "search_model.npz"], [])):
        if head and head[0] == d / "search_model.npz":  # MODEL as a word
            head = ["--state", d / "search_state.pkl", head[0], "--trace", d / "trace.h5"]
        tried = (([], 0), (["bias_code=False"], 2), (["--changes", "bias_code=False"], 2),
                 (["loopIter=5"], 0))  # fmt: skip
        for changes, want in tried:
            argv = ["parity", *head, *changes, *tail, "--only", "repr"]
            rc, out, err = run_cli_inprocess(main, [str(a) for a in argv])
            assert rc == want, (argv, out[-800:], err)
            assert (want == 2) == ("unknown parameter W_0_dec_initializer_0" in err), err
    argv = ["parity", "--case", d, "loopIter=5", "--only", "repr", "--strict"]
    rc, _, err = run_cli_inprocess(main, [str(a) for a in argv])
    assert rc == 2 and "unknown state key 'loopIter'" in err, err


@pytest.mark.parametrize("form", list(FORMS) + ["OUTDIR"])
def test_export_carries_the_model_and_changes(work, form, tmp_path):
    """``export --format safetensors``: the checkpoint it writes holds the changed state --
    ``translate --checkpoint`` from it writes the clean model's words upper-cased -- in the
    folder given as ``--out DIR`` or as the last word."""
    d, _, clean = work
    ivocab, _ = _upper_vocabularies(d)
    change = f"indx_word_target='{ivocab}'"
    out = tmp_path / "exported"
    if form == "OUTDIR":
        tail = [clean, change, out]
    else:
        tail = [*FORMS[form](clean, change), "--out", out]
    rc, _, err = _cli_argv(["export", "--format", "safetensors", "--state", STATE, *tail])
    assert rc == 0, err
    trans = tmp_path / "t.txt"
    rc, _, err = _cli_argv(["translate", "--checkpoint", out, "--beam-search", "--beam-size",
                            "2", "--source", d / "test.en", "--trans", trans])  # fmt: skip
    assert rc == 0, err
    assert trans.read_text(encoding="utf-8") == (d / "archived.txt").read_text().upper()


def test_export_from_a_checkpoint_and_with_data_dir(work, tmp_path):
    """``--checkpoint``: an export re-exported writes the same weights; ``--data-dir``: a
    state moved away from its vocabularies is exported once told where they are."""
    d, _, clean = work
    first, second = tmp_path / "a", tmp_path / "b"
    assert (
        _cli_argv(["export", "--format", "safetensors", "--state", STATE, clean, "--out", first])[0]
        == 0
    )
    rc, _, err = _cli_argv(
        ["export", "--format", "safetensors", "--checkpoint", first, "--out", second]
    )
    assert rc == 0, err
    from safetensors.numpy import load_file

    (a,), (b,) = first.glob("*.safetensors"), second.glob("*.safetensors")
    ta, tb = load_file(a), load_file(b)
    assert sorted(ta) == sorted(tb) and all(np.array_equal(ta[k], tb[k]) for k in ta)
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / STATE.name).write_bytes(STATE.read_bytes())
    argv = ["export", "--format", "safetensors", "--state", alone / STATE.name, clean]
    rc, _, err = _cli_argv([*argv, "--out", tmp_path / "c"])
    assert rc == 2 and "vocab" in err, err
    rc, _, err = _cli_argv([*argv, "--out", tmp_path / "d", "--data-dir", FX])
    assert rc == 0, err


def _cli_argv(argv):
    return run_cli_inprocess(main, [str(a) for a in argv])


@pytest.mark.parametrize("form", list(FORMS))
def test_train_takes_the_model_and_changes(work, form, legacy_root, tmp_path):
    """``train``: the changes name where it writes (``prefix``), the model is where it starts:
    one update moves no weight of it by more than Adadelta's first step allows,
    ``sqrt(adaeps / (1 - adarho))`` = sqrt(1e-6 / 0.05) = 4.5e-3 (SGD_adadelta.py: the
    first update is ``-sqrt(eps) g / sqrt((1 - rho) g^2 + eps)``), reached where g^2 >> eps,
    plus the float32 rounding of the updated weight (one spacing at the largest one)."""
    change = f"prefix='{tmp_path}/ft_'"
    argv = ["train", "--state", STATE, *FORMS[form](MODEL_FILE, change),
            "--data-dir", legacy_root / "data", "--max-updates", "1"]  # fmt: skip
    rc, _, err = _cli_argv(argv)
    assert rc == 0, err
    with np.load(tmp_path / "ft_model.npz") as after, np.load(MODEL_FILE) as before:
        moved = max(float(np.abs(after[k] - before[k]).max()) for k in before.files)
        largest = max(float(np.abs(before[k]).max()) for k in before.files)
    rounding = float(np.spacing(np.float32(largest + 1)))
    assert 0 < moved <= (1e-6 / 0.05) ** 0.5 + rounding


def test_train_strict_refuses_a_typo(legacy_root, tmp_path):
    argv = ["train", "--state", STATE, MODEL_FILE, f"prefix='{tmp_path}/t_'", "loopIter=5",
            "--data-dir", legacy_root / "data", "--max-updates", "1"]  # fmt: skip
    rc, _, err = _cli_argv([*argv, "--strict"])
    assert rc == 2 and "unknown state key 'loopIter'" in err, err
    rc, _, err = _cli_argv(argv)
    assert rc == 0 and "did you mean 'loopIters'" in err, err


def test_log_level_hides_the_info_lines():
    """``--log-level warning``: the INFO lines (where the vocabularies were found) are gone."""
    argv = ["inspect", "--state", STATE, MODEL_FILE]
    assert "INFO " in _cli_argv(argv)[2]
    rc, _, err = _cli_argv(["--log-level", "warning", *argv])
    assert rc == 0 and "INFO " not in err, err


@pytest.mark.parametrize("command", ["inspect", "translate"])
def test_data_dir_finds_the_vocabularies_of_a_moved_state(work, command, tmp_path):
    """A state copied away from its vocabularies (their stored paths are the lab's, which do
    not exist here): ``translate`` refuses in one line naming the vocabulary, ``inspect``
    reports it NOT FOUND; with ``--data-dir`` both find it."""
    d, _, clean = work
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / STATE.name).write_bytes(STATE.read_bytes())
    argv = [command, "--state", alone / STATE.name, clean]
    if command == "translate":
        argv += RUNS[command](d)
    rc, out, err = _cli_argv(argv)
    if command == "inspect":
        assert rc == 0 and "word_indx         NOT FOUND" in out, out
    else:
        assert rc == 2 and "vocab" in err, err
    rc, out, err = _cli_argv([*argv, "--data-dir", FX])
    assert rc == 0 and "NOT FOUND: cannot find the file for 'word_indx'" not in out, out + err
