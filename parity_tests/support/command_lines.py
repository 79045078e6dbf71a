"""The ``groundhog-port`` command lines the tests run again and again, built in one place.

:func:`translate_args` is sample.py's beam search (``--beam-search --beam-size B``) and
:func:`score_args` score.py (``--mode txt|batch``), on the bundled search fixture unless told
otherwise; what a test varies comes last (``*extra``: ``--trans F``, ``--resume``, ...).  The
values are passed as given (a caller that needs strings passes strings); the runners turn
them into ``str``.  Nothing here imports pytest: :mod:`parity_tests.support.fuzzing` (and
``tools/fuzz.py`` through it) builds its command lines here too.
"""

from pathlib import Path

FX = Path(__file__).resolve().parents[2] / "fixtures" / "search"
STATE, MODEL = FX / "search_state.pkl", FX / "search_model.npz"


def translate_args(src, *extra, beam=5, batch=1, state=STATE, model=MODEL, changes=()):
    """``translate --state STATE MODEL [CHANGES] --beam-search --beam-size BEAM
    [--batch-size BATCH] --source SRC EXTRA...`` (``batch=None``: no ``--batch-size``, the
    command's default)."""
    argv = ["translate", "--state", state, model, *changes, "--beam-search", "--beam-size", beam]
    if batch is not None:
        argv += ["--batch-size", batch]
    return [*argv, "--source", src, *extra]


def score_args(mode, src, trg, *extra, state=STATE, model=MODEL, changes=()):
    """``score --state STATE MODEL [CHANGES] --mode MODE --src SRC [--trg TRG] EXTRA...``
    (``trg=None``: no ``--trg``)."""
    argv = ["score", "--state", state, model, *changes, "--mode", mode, "--src", src]
    if trg is not None:
        argv += ["--trg", trg]
    return [*argv, *extra]


def sample_py_args(beam, state, source, trans, model, *extra):
    """``translate`` given sample.py's own command line, in its order (the model last):
    ``--beam-search --beam-size BEAM --state STATE --source SOURCE --trans TRANS EXTRA MODEL``,
    as the recorded ``trans_beam*.txt`` were made -- the port takes it unchanged."""
    options = ["--beam-search", "--beam-size", beam, "--state", state, "--source", source]
    return ["translate", *options, "--trans", trans, *extra, model]


def score_py_args(state, model, src, trg):
    """``score`` given score.py's own command line, in its order (the model last):
    ``--mode=batch --src SRC --trg TRG --allow-unk --state STATE MODEL``, as the recorded
    ``scores_batch*.txt`` were made -- the port takes it unchanged."""
    pair = ["--src", src, "--trg", trg, "--allow-unk"]
    return ["score", "--mode=batch", *pair, "--state", state, model]


def source_file(path, numbers):
    """``path`` made a source file of the fixture's test.en lines ``numbers`` (1-based, in
    that order, each with its newline); returns ``path``."""
    lines = (FX / "test.en").read_text(encoding="utf-8").split("\n")
    path.write_text("".join(lines[i - 1] + "\n" for i in numbers), encoding="utf-8")
    return path
