"""Commands take what users type (issue 35, item 3).

Options before or after MODEL and the changes, in every command; a usage error shows the
command's own usage; every hint that shows syntax works when followed; ``export --out DIR``;
``train`` at its ``loopIters``; ``inspect`` naming a file that is not a model.
"""

import json
import re
import shutil

import numpy as np
import pytest

from groundhog_port.cli.commands.common import model_and_changes
from groundhog_port.cli.main import build_parser, main
from legacy_states import parse_changes
from parity_tests.support.command_lines import FX, MODEL, STATE
from parity_tests.support.fuzzing import run_cli_inprocess


def _run(*argv, cwd=None):
    return run_cli_inprocess(main, ["--threads", "1", *map(str, argv)], cwd=cwd)


#: the commands that take MODEL and the changes as words (common.add_model_and_changes)
MODEL_COMMANDS = (
    "translate",
    "score",
    "serve",
    "inspect",
    "reproduce",
    "parity",
    "train",
    "export",
)


@pytest.mark.parametrize("command", MODEL_COMMANDS)
def test_options_after_the_model_and_between_the_changes(command):
    """``train --state S MODEL --data-dir V "prefix='runs/ft_'" --max-updates 5`` failed with
    "unrecognized arguments: prefix=..." and the top-level usage."""
    extra = ["--format", "onnx"] if command == "export" else []
    tail = ["OUT"] if command == "export" else []
    for form in (
        [MODEL, "--data-dir", FX, "seqlen=30", "--strict", "bs=4", *tail],
        ["seqlen=30", "--model", MODEL, "bs=4", "--data-dir", FX, *tail],
        [MODEL, "seqlen=30", "--changes", "bs=4", *tail, "--data-dir", FX],
    ):
        argv = list(map(str, [command, "--state", STATE, *extra, *form]))
        args = build_parser((command,)).parse_args(argv)
        assert model_and_changes(args) == (str(MODEL), args.changes), form
        assert parse_changes(args.changes) == {"seqlen": 30, "bs": 4}, form
        assert args.data_dir == [str(FX)], form
        if command == "export":
            assert args.outdir == "OUT", form


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--state", STATE, "--bogus"],
        ["translate", "--state", STATE, MODEL, "--beam-search", "--no-such-flag"],
        ["bleu", "--hyp", "h", "--ref", "r", "extra-word"],
    ],
)
def test_a_usage_error_shows_the_commands_own_usage(argv):
    rc, out, err = _run(*argv)
    assert rc == 2
    assert err.startswith(f"usage: groundhog-port {argv[0]} "), err
    assert f"groundhog-port {argv[0]}: error: unrecognized arguments: {argv[-1]}" in err, err


def test_train_with_options_after_the_model_and_the_changes(tmp_path, legacy_root):
    """The issue's command line, as typed: it trains (``--max-updates`` after the changes)."""
    rc, out, err = _run(
        "--log-level",
        "error",
        "train",
        "--state",
        STATE,
        MODEL,
        "--data-dir",
        legacy_root / "data",
        f"prefix='{tmp_path}/ft_'",
        "--max-updates",
        "2",
    )
    assert rc == 0, err
    with np.load(tmp_path / "ft_timing.npz") as timing:
        assert int(timing["step"]) == 2  # --max-updates 2 was read, after the changes


def test_translate_with_options_after_the_model_and_the_changes(tmp_path):
    """``translate ... MODEL --data-dir V "seqlen=30"``: the recorded sample.py output."""
    trans = tmp_path / "t.txt"
    rc, out, err = _run(
        "--log-level",
        "error",
        "translate",
        "--state",
        STATE,
        MODEL,
        "--data-dir",
        FX,
        "seqlen=30",
        "--beam-search",
        "--beam-size",
        "10",
        "--source",
        FX / "test.en",
        "--trans",
        trans,
    )
    assert rc == 0, err
    assert trans.read_text() == (FX / "trans_beam10.txt").read_text()


def test_commands_without_model_take_options_anywhere():
    """The same parsing in every command: positional words between options."""
    args = build_parser(("plot-training",)).parse_args(
        ["plot-training", "a_timing.npz", "--out", "c.png", "b_timing.npz"]
    )
    assert args.timings == ["a_timing.npz", "b_timing.npz"]
    args = build_parser(("archive",)).parse_args(["archive", "--out", "r", "ROOT", "--fresh"])
    assert (args.root, args.out, args.fresh) == ("ROOT", "r", True)


def test_train_at_loop_iters_says_so_and_how_to_go_on(tmp_path, legacy_root):
    """Continuing a run whose ``loopIters`` is reached printed "0 updates this run, 6000 in
    all" and exited 0.  Now one line, exit 2, nothing written; the change it names goes on."""
    data = ["--data-dir", legacy_root / "data"]
    first = ["train", "--state", STATE, MODEL, *data, f"prefix='{tmp_path}/x_'", "loopIters=2"]
    rc, _, err = _run("--log-level", "error", *first)
    assert rc == 0, err
    state = tmp_path / "x_state.pkl"  # the finished run, continued from its own state
    files = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    rc, out, err = _run("--log-level", "warning", "train", "--state", state, *data)
    assert rc == 2, err
    [line] = err.strip().splitlines()
    assert "this run is at update 2, where its loopIters=2 stops training" in line, err
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == files  # nothing written
    hint = re.search(r"raise it in the changes, e\.g\. (loopIters=\d+)$", line)
    assert hint, line
    go_on = ["train", "--state", state, *data, hint.group(1), "--max-updates", "1"]
    rc, _, err = _run("--log-level", "error", *go_on)
    assert rc == 0, err
    with np.load(tmp_path / "x_timing.npz") as timing:
        assert int(timing["step"]) == 3


def _export_words(*words):
    args = build_parser(("export",)).parse_args(["export", "--format", "onnx", *map(str, words)])
    model_and_changes(args)
    return args.model, args.changes, args.outdir


def test_export_takes_out_dir_as_archive_does(tmp_path):
    """``export`` took its folder only as a last word (OUTDIR), ``archive`` as ``--out DIR``;
    both forms now, anywhere on the line, and the export loads back to sample.py's output."""
    out = tmp_path / "exported"
    rc, _, err = _run(
        "export", "--state", STATE, MODEL, "seqlen=30", "--out", out, "--format", "safetensors"
    )
    assert rc == 0, err
    trans = tmp_path / "t.txt"
    search = ["--beam-search", "--beam-size", "10", "--source", FX / "test.en", "--trans", trans]
    rc, _, err = _run("--log-level", "error", "translate", "--checkpoint", out, *search)
    assert rc == 0, err
    assert trans.read_text() == (FX / "trans_beam10.txt").read_text()
    # the positional form is kept, with or without a model word or changes
    state = ["--state", STATE]
    assert _export_words(*state, MODEL, "OUT") == (str(MODEL), [], "OUT")
    assert _export_words(*state, MODEL, "k=1", "OUT") == (str(MODEL), ["k=1"], "OUT")
    assert _export_words(*state, "--model", MODEL, "OUT") == (str(MODEL), [], "OUT")
    assert _export_words("--checkpoint", out, "k=1", "OUT") == (None, ["k=1"], "OUT")
    assert _export_words(*state, MODEL, "k=1", "--out", "D") == (str(MODEL), ["k=1"], "D")
    for words, says in (
        ([*state, MODEL, "OUT", "--out", "D"], "two output folders given: OUT and --out D"),
        ([*state, MODEL, "k=1"], "give the output folder: --out DIR"),
        ([*state, MODEL], f"one word ({MODEL}) for the model and the output folder"),
    ):
        rc, _, err = _run("export", "--format", "safetensors", *words)
        assert rc == 2 and says in err, err


# --- every hint that shows syntax works when followed --------------------------------------
# (found by grepping groundhog_port/ and legacy_states/ for messages holding a change
# ``key='...'`` / ``key=[...]`` / ``key=N``, an option line or a pip command)


def _inspect_json(*argv):
    rc, out, err = _run("--log-level", "error", "inspect", "--json", *argv)
    assert rc == 0, err
    return json.loads(out)


def _follow(hint, path):
    """The change a message shows (``key='FILE'``, ``key=['FILE']``...), FILE replaced."""
    return hint.replace("FILE", str(path)).replace("'file'", repr(str(path)))


def test_the_lookup_hint_gives_a_change_that_works(tmp_path, legacy_root):
    """ "give the path in the changes (source='FILE')" led to "state['source'] must be a
    one-element list of paths" (also in inspect): the hint now shows each key's own form."""
    state = tmp_path / "search_state.pkl"
    shutil.copy(STATE, state)  # nothing beside it: no file of the state is found
    data = legacy_root / "data"
    rep = _inspect_json("--state", state)
    changes = []
    for entry in rep["data"].values():
        [hint] = re.findall(r"give the path in the changes \((.+?)\)$", entry["error"])
        name = re.search(r"looked at \S+/([^/,]+),", entry["error"]).group(1)
        changes.append(_follow(hint, data / name))
    assert "source=['FILE']" in rep["data"]["source"]["error"]
    rep = _inspect_json("--state", state, *changes)
    for key, entry in rep["data"].items():
        assert "error" not in entry, (key, entry)
        assert entry["path"].startswith(str(data)), (key, entry)
    # the form users type from the old hint says which form to give, and that one works
    rep = _inspect_json("--state", state, f"source='{data / 'binarized_text.shuffled.en.h5'}'")
    error = rep["data"]["source"]["error"]
    assert "must be a one-element list of paths" in error and "source=['FILE']" in error
    # translate, following the vocabularies' hints, gives sample.py's recorded output
    trans = tmp_path / "t.txt"
    search = ["--beam-search", "--beam-size", "10", "--source", FX / "test.en", "--trans", trans]
    rc, _, err = _run(
        "--log-level", "error", "translate", "--state", state, MODEL, *changes[:4], *search
    )
    assert rc == 0, err
    assert trans.read_text() == (FX / "trans_beam10.txt").read_text()


def test_the_other_hints_with_syntax_work_when_followed(tmp_path, legacy_root):
    """Each message that shows what to type, typed as shown."""
    data = legacy_root / "data"
    corpus = data / "binarized_text.shuffled.en.h5"
    # a data key set to None: "give it in the changes, e.g. source=['file']"
    vocab = data / "vocab.en.pkl"
    rep = _inspect_json("--state", STATE, "source=[None]", "word_indx=None")
    hints = [
        re.findall(r"e\.g\. (\w+=\[?'file'\]?)$", rep["data"][key]["error"])
        for key in ("source", "word_indx")
    ]
    assert hints == [["source=['file']"], ["word_indx='file'"]]
    changes = [_follow(hints[0][0], corpus), _follow(hints[1][0], vocab)]
    rep = _inspect_json("--state", STATE, "source=[None]", "word_indx=None", *changes)
    assert rep["data"]["source"] == {"path": str(corpus)}
    assert rep["data"]["word_indx"]["path"] == str(vocab)
    # changes that do not parse: "e.g. seqlen=50,prefix='x_'"
    rc, _, err = _run("inspect", "--state", STATE, "seqlen=50 prefix=x")
    assert rc == 2, err
    [example] = re.findall(r"e\.g\. (\S+)\)$", err.strip())
    _inspect_json("--state", STATE, example)  # exit 0
    assert parse_changes(example) == {"seqlen": 50, "prefix": "x_"}
    # a path whose quotes the shell ate: "strings are quoted: prefix='runs/x_' (in a shell,
    # quote the whole word: "prefix='runs/x_'")"
    for typed, meant in (
        ("prefix=runs/x_", {"prefix": "runs/x_"}),
        ("source=[a.h5]", {"source": ["a.h5"]}),
    ):
        rc, _, err = _run("inspect", "--state", STATE, typed)
        assert rc == 2, err
        [word] = re.findall(r'in a shell, quote the whole word: "(.+)"\)$', err.strip())
        assert parse_changes(word) == meant
        _inspect_json("--state", STATE, word)  # exit 0
    # a typo in a key: "did you mean 'loopIters'?"
    rc, _, err = _run("inspect", "--state", STATE, "loopIter=50")
    [key] = re.findall(r"did you mean '(\w+)'\?", err)
    rc, _, err = _run("inspect", "--state", STATE, f"{key}=50", "--strict")
    assert rc == 0 and "unknown" not in err, err
    # a prefix folder that does not exist: "give prefix='folder/name_' in the changes"
    train = ["--log-level", "error", "train", "--state", STATE, MODEL, "--data-dir", data]
    rc, _, err = _run(*train, "--max-updates", "0")
    [hint] = re.findall(r"give (prefix='folder/name_') in the changes", err)
    rc, _, err = _run(*train, hint.replace("folder", str(tmp_path)), "--max-updates", "0")
    assert rc == 0 and (tmp_path / "name_model.npz").is_file(), err
    # --state and MODEL swapped: "(--state S_state.pkl S_model.npz)", typed in that order
    for swapped in ([MODEL, STATE], [STATE, STATE]):
        rc, _, err = _run("inspect", "--state", *swapped)
        assert rc == 2 and "--state S_state.pkl S_model.npz" in err, err
    assert _inspect_json("--state", STATE, MODEL)["checkpoint"]["problems"] == []


def test_the_pip_hints_name_extras_that_exist():
    """``pip install 'groundhog-port[export]'`` and ``pip install -e ".[plot]"``: the extras
    the messages name are in pyproject.toml and hold the package the message is about."""
    tomllib = pytest.importorskip("tomllib")
    from groundhog_port.cli.commands import export
    from parity_tests.support.cases import REPO

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    source = (REPO / "groundhog_port/cli/commands/export.py").read_text()
    [extra] = re.findall(r"groundhog-port\[(\w+)\]", source)
    for package in export.NEEDS.values():
        assert any(d.startswith(package) for d in extras[extra]), (extra, package)
    [extra] = set(re.findall(r'\.\[(\w+)\]"', (REPO / "groundhog_port/tasks/plots.py").read_text()))
    assert any(d.startswith("matplotlib") for d in extras[extra])


def test_the_readme_names_every_extra():
    """``export`` asks for the ``export`` extra, which the README never named."""
    tomllib = pytest.importorskip("tomllib")
    from parity_tests.support.cases import REPO

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    readme = (REPO / "README.md").read_text()
    named = set(re.findall(r'pip install -e "\.\[(\w+)\]"', readme))
    assert named == set(project["optional-dependencies"]), named


def test_inspect_names_a_file_that_is_not_a_model(tmp_path, legacy_root):
    """A timing file given as the model gave "56 problem(s)"; each file of an experiment
    given in the model's place is now named, with where the model is."""
    data = legacy_root / "data"
    train = ["--log-level", "error", "train", "--keep-accumulators", "--state", STATE, MODEL]
    rc, _, err = _run(*train, "--data-dir", data, f"prefix='{tmp_path}/x_'", "--max-updates", "0")
    assert rc == 0, err
    rc, _, err = _run("--log-level", "error", "export", "--format", "safetensors", "--state",
                      STATE, MODEL, "--out", tmp_path / "exported")  # fmt: skip
    assert rc == 0, err
    beside = f"give the experiment's *_model.npz: {tmp_path / 'x_model.npz'}"
    for model, says in (
        (tmp_path / "x_timing.npz", f"is a training timing file (*_timing.npz: step, next_offset, cost... per update), not a model; {beside}"),
        (tmp_path / "x_adadelta.npz", f"is Adadelta's accumulators (*_adadelta.npz, train --keep-accumulators), not a model; {beside}"),
        (legacy_root / "search" / "search_timing.npz", "is a training timing file"),
        (tmp_path / "x_state.pkl", "it is a pickle: a *_state.pkl given for the model?"),
        (FX / "vocab.en.pkl", "it is a pickle: a vocabulary given for the model?"),
        (legacy_root / "search" / "trace.h5", "it is an HDF5 file (a trace.h5 or a binarized corpus?)"),
        (data / "binarized_text.shuffled.en.h5", "it is an HDF5 file"),
        (FX / "test.en", "it is a text file (a test set or a translation?)"),
        (tmp_path / "exported" / "model.safetensors", "it is a safetensors file (an export: "),
        (tmp_path / "exported", "is a directory, expected a *_model.npz file (it holds an export: "),
    ):  # fmt: skip
        rc, out, err = _run("--log-level", "error", "inspect", "--state", STATE, model)
        assert rc == 2 and err.count("\n") == 1, err
        assert f"groundhog-port inspect: error: {model}: " in err and says in err, err
    # what the messages say to give works
    assert _inspect_json("--state", STATE, tmp_path / "x_model.npz")["checkpoint"]["problems"] == []
    rc, _, err = _run("--log-level", "error", "translate", "--checkpoint", tmp_path / "exported",
                      "--beam-search", "--beam-size", "2", "--source", FX / "test.en",
                      "--trans", tmp_path / "t.txt")  # fmt: skip
    assert rc == 0, err
