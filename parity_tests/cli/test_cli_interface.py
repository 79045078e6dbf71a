"""The frictions of a first real trial (issue 26): how the command line reads and answers.

Start-up without torch for commands that need no model, the global options before or
after the command, GroundHog's underscore spellings, unknown log levels, time stamps.
Runs that are about the process (what it imports, what it prints on stderr through the
real logging set-up) start ``python -m groundhog_port`` without torch (a fraction of a
second); the others call ``main`` in this process.
"""

import ast
import os
import re
import subprocess
import sys

import pytest
import tomllib

from groundhog_port.cli.main import COMMANDS, build_parser, main
from parity_tests.support.cases import FIXTURES, REPO
from parity_tests.support.fuzzing import run_cli_inprocess

FX = FIXTURES / "search"
ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}

#: runs main() and prints which heavy modules the run imported
IMPORTS_PROBE = """
import os
import sys
for name in os.environ.get("HIDE_MODULES", "").split():
    sys.modules[name] = None  # as if it were not installed
from groundhog_port.cli.main import main
try:
    rc = main(sys.argv[1:])
except SystemExit as exit:
    rc = exit.code
print("IMPORTED", sorted(m for m in ("torch", "numpy", "h5py", "matplotlib") if m in sys.modules))
sys.exit(rc)
"""


def probe(*argv, env=ENV, script=IMPORTS_PROBE):
    r = subprocess.run(
        [sys.executable, "-c", script, *map(str, argv)],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    imported = re.search(r"IMPORTED (\[.*\])", r.stdout)
    return r, ast.literal_eval(imported.group(1)) if imported else None


def test_help_and_bleu_do_not_import_torch():
    """Friction 6: ``--help`` took 7 s and ``bleu`` 5.5 s, all of it importing torch for
    every command module (tools/bench_startup.py measures the time)."""
    r, imported = probe("--help")
    assert r.returncode == 0 and "translate" in r.stdout and "bleu" in r.stdout, r.stderr
    assert "torch" not in imported
    r, imported = probe("bleu", "--hyp", FX / "trans_beam10.txt", "--ref", FX / "test.fr")
    assert r.returncode == 0 and "BLEU = " in r.stdout, r.stderr
    assert "torch" not in imported


#: ``python -m groundhog_port`` with an ``atexit`` handler that runs last (handlers run last
#: registered first) and says whether the objects alive at exit were frozen
EXIT_PROBE = """
import atexit, gc, runpy, sys
atexit.register(lambda: print("FROZEN", gc.get_freeze_count() > 0))
sys.argv[0] = "groundhog-port"
runpy.run_module("groundhog_port", run_name="__main__")
"""


def test_the_executable_leaves_without_the_last_collection():
    """``python -m groundhog_port`` and the console script leave through ``cli.main.run``:
    the objects alive at exit frozen, so that the interpreter's exit does not walk torch's
    objects once more (0.3 s of every run's 0.43 s exit), ``atexit`` handlers still run and
    the command's exit code is kept."""
    bleu = ("bleu", "--hyp", FX / "trans_beam10.txt", "--ref", FX / "test.fr")
    for argv, code in ((bleu, 0), ((), 2)):
        r, _ = probe(*argv, script=EXIT_PROBE)
        assert r.returncode == code, r.stderr
        assert "FROZEN True" in r.stdout, (argv, r.stdout[-300:])
    with open(REPO / "pyproject.toml", "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    assert scripts["groundhog-port"] == "groundhog_port.cli.main:run"


def test_command_list_reads_every_modules_help():
    """The help of the command list is read from each module's source without importing
    it; it must be what the module says."""
    import importlib

    from groundhog_port.cli.main import command_help

    for name in COMMANDS:
        module = importlib.import_module(f"groundhog_port.cli.commands.{name.replace('-', '_')}")
        assert command_help(name) == module.HELP


def test_global_options_after_the_command():
    """Friction 7: ``--log-level`` after the command was 'unrecognized'."""
    parser = build_parser()
    args = parser.parse_args(
        ["bleu", "--hyp", "h", "--ref", "r", "--log-level", "error", "--log-time", "--threads", "2"]
    )
    assert (args.log_level, args.log_time, args.threads) == ("ERROR", True, 2)
    args = parser.parse_args(["--log-level", "debug", "bleu", "--hyp", "h", "--ref", "r"])
    assert (args.log_level, args.log_time, args.threads) == ("DEBUG", False, None)


def test_unknown_log_level_is_refused():
    """Friction 7: ``--log-level quiet`` silently became INFO."""
    for argv in (["--log-level", "quiet", "bleu"], ["bleu", "--log-level", "quiet"]):
        rc, out, err = run_cli_inprocess(main, [*argv, "--hyp", "h", "--ref", "r"])
        assert rc == 2
        assert "unknown level 'quiet'" in err and "warning" in err and "error" in err


def test_groundhog_underscore_spelling_of_options():
    """Friction 7: ``--beam_size 10`` gave "unrecognized arguments: --beam_size <model path>"."""
    parser = build_parser()
    common = ["translate", "--state", "s.pkl", "m.npz", "--beam-search"]
    assert parser.parse_args(common + ["--beam_size", "10"]).beam_size == 10
    assert parser.parse_args(common + ["--beam_size=7", "--ignore_unk"]).beam_size == 7
    assert parser.parse_args(common + ["--log_level", "error"]).log_level == "ERROR"


def test_log_time_stamps_log_lines(tmp_path):
    """Friction 11: log lines carried no time."""
    hyp = tmp_path / "h.txt"
    hyp.write_text("a b c\n")
    ref = tmp_path / "r.txt"
    ref.write_text("a b c\nd e\n")
    argv = ["bleu", "--multi-bleu", "--hyp", hyp, "--ref", ref]  # warns: line counts differ
    stamp = r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} WARNING "
    for before in (True, False):
        r, _ = probe(*(["--log-time", *argv] if before else [*argv, "--log-time"]))
        warnings = [line for line in r.stderr.splitlines() if "WARNING" in line]
        assert r.returncode == 0 and warnings, r.stderr
        assert all(re.match(stamp, line) for line in warnings), r.stderr
    r, _ = probe(*argv)
    assert re.match(r"^WARNING ", r.stderr), r.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_takes_the_global_options(command):
    rc, out, err = run_cli_inprocess(main, [command, "--help"])
    assert rc == 0 and "--log-level" in out and "--log-time" in out, err


def test_score_txt_writes_its_scores_file(tmp_path):
    """Friction 4: ``score --mode txt --scores F`` printed the scores and left F unwritten
    (as score.py did), without a word."""
    model = ["--state", FX / "search_state.pkl", FX / "search_model.npz"]
    txt = [
        "--log-level",
        "error",
        "score",
        "--mode",
        "txt",
        "--src",
        FX / "test.en",
        "--trg",
        FX / "test.fr",
        "--allow-unk",
        *model,
    ]
    rc, printed, err = run_cli_inprocess(main, list(map(str, txt)))
    assert rc == 0 and len(printed.splitlines()) == 40, err
    out = tmp_path / "scores.txt"
    rc, stdout, err = run_cli_inprocess(main, list(map(str, txt + ["--scores", out])))
    assert rc == 0, err
    assert out.read_text() == printed and stdout == ""
    rc, stdout, err = run_cli_inprocess(main, list(map(str, txt + ["--scores", out, "--verbose"])))
    assert rc == 0 and out.read_text() == printed and "Alignment:" in stdout
    assert not [line for line in stdout.splitlines() if line in printed.splitlines()]
    rc, _, err = run_cli_inprocess(
        main, list(map(str, ["score", "--mode", "interact", "--scores", out, *model]))
    )
    assert rc == 2 and "--scores FILE works with --mode batch and txt" in err


MODEL_FILES = [FX / "search_state.pkl", FX / "search_model.npz"]


def _inspect(*argv):
    return run_cli_inprocess(main, ["--log-level", "warning", "inspect", "--json", *map(str, argv)])


def test_unknown_state_keys_in_changes_are_named_with_the_closest_key():
    """Friction 3: ``loopIter=50``, ``word_indxx=...``, ``dimm=64`` passed silently."""
    state, model = MODEL_FILES
    rc, out, err = _inspect("--state", state, model, "loopIter=50,dimm=64,word_indxx='v.pkl'")
    assert rc == 0, err
    for typo, known in (("loopIter", "loopIters"), ("dimm", "dim"), ("word_indxx", "word_indx")):
        assert f"unknown state key {typo!r} in the changes (did you mean {known!r}?)" in err
    rc, out, err = _inspect("--state", state, model, "dimm=64", "--strict")
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "unknown state key 'dimm'" in err and "'dim'" in err
    # train applies the changes to its prototype and checks them the same way, before any work
    rc, _, err = run_cli_inprocess(
        main,
        list(map(str, ["train", "--state", state, "loopIter=5", "--strict", "--data-dir", FX])),
    )
    assert rc == 2 and "unknown state key 'loopIter'" in err and "'loopIters'" in err, err
    # keys GroundHog reads beyond the prototypes, and prefix_lookup's, are no typos
    rc, out, err = _inspect(
        "--state", state, model, "dec_rec_weight_scale=1.,loopIters=3", "--strict"
    )
    assert rc == 0 and "unknown" not in err, err


def test_model_and_changes_the_same_way_in_every_command():
    """Friction 11 (the model positional in some commands, --model in others; changes one
    string, words or --changes) and friction 7 (``inspect --state S "k=v"`` took k=v for a
    model path)."""
    from groundhog_port.cli.commands.common import model_and_changes

    state, model = map(str, MODEL_FILES)
    for command in (
        "translate",
        "score",
        "serve",
        "inspect",
        "reproduce",
        "parity",
        "train",
        "export",
    ):
        tail = ["OUT"] if command == "export" else []
        extra = ["--format", "onnx"] if command == "export" else []
        forms = [
            [model, "seqlen=30,bs=4", *tail],
            ["--model", model, "seqlen=30", "bs=4", *tail],
            [model, "--changes", "seqlen=30", "--changes", "bs=4", *tail],
            ["--model", model, "--changes=seqlen=30,bs=4", *tail],
        ]
        if command == "export":  # argparse cannot find a last positional after options
            forms[2] = ["--changes", "seqlen=30", "--changes", "bs=4", model, *tail]
        for form in forms:
            args = build_parser().parse_args([command, "--state", state, *extra, *form])
            got_model, changes = model_and_changes(args)
            assert got_model == model, (command, form)
            from legacy_states import parse_changes

            assert parse_changes(changes) == {"seqlen": 30, "bs": 4}, (command, form)
    args = build_parser().parse_args(["inspect", "--state", state, "seqlen=30"])
    assert model_and_changes(args) == (None, ["seqlen=30"])
    args = build_parser().parse_args(["inspect", "--state", state, "{'seqlen': 30}"])
    assert model_and_changes(args) == (None, ["{'seqlen': 30}"])
    rc, out, err = _inspect("--state", state, "seqlen=30")
    assert rc == 0 and '"checkpoint"' not in out, err
    rc, out, err = _inspect("--state", state, model, "--model", str(FX / "other_model.npz"))
    assert rc == 2 and "two models given" in err


def test_messages_say_what_is_wrong_and_how_to_fix_it(tmp_path, legacy_root):
    """Friction 7: swapped --state and model gave "truncated or corrupt pickle (persistent
    IDs ...)"; "pass a data directory" never named --data-dir; a missing prefix folder said
    to give a prefix that was given."""
    state, model = MODEL_FILES
    rc, _, err = _inspect("--state", model, state)
    assert rc == 2 and "--state and MODEL look swapped" in err, err
    rc, _, err = _inspect("--state", state, state)
    assert rc == 2 and "a *_state.pkl given for the model?" in err, err
    moved = tmp_path / "search_state.pkl"
    moved.write_bytes(state.read_bytes())  # the vocabularies are not next to it
    rc, out, err = _inspect("--state", moved)
    assert rc == 0, err
    assert "pass --data-dir DIR" in out
    train = ["--log-level", "error", "train", "--state", state, "--data-dir", legacy_root / "data"]
    rc, _, err = run_cli_inprocess(main, list(map(str, train + [f"prefix='{tmp_path}/no/x_'"])))
    assert rc == 2 and "of the prefix given in the changes does not exist: create it" in err
    assert "give prefix=" not in err
    rc, _, err = run_cli_inprocess(main, list(map(str, train)))
    assert rc == 2 and "stored in the state does not exist" in err and "give prefix=" in err


def test_missing_matplotlib_is_said_before_anything_is_loaded(tmp_path):
    """Friction 10: ``--plot-alignment`` without matplotlib failed after 8 s of loading
    (torch and the model); now before torch is imported, let alone a file read."""
    env = {**ENV, "HIDE_MODULES": "matplotlib onnx"}
    missing = tmp_path / "missing"
    for argv, says in (
        (
            [
                "score",
                "--state",
                missing,
                missing,
                "--mode",
                "txt",
                "--src",
                missing,
                "--trg",
                missing,
                "--plot-alignment",
                tmp_path / "plots",
            ],
            "need matplotlib",
        ),
        (["plot-training", missing, "--out", tmp_path / "c.png"], "need matplotlib"),
        (
            ["export", "--format", "onnx", "--state", missing, missing, tmp_path / "out"],
            "needs the onnx package",
        ),
    ):
        r, imported = probe(*argv, env=env)
        assert r.returncode == 2 and says in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
        assert "torch" not in imported, argv[0]
