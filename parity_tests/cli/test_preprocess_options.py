"""``groundhog-port preprocess``'s flags (preprocess.py's own), given on the command line
(issue 53, item 2; ``tools/flag_table.py``): each run writes what
``legacy.preprocess.preprocess`` writes with that option -- the function whose behaviour
``unit/test_preprocess.py`` pins to the original's (its quirks, its pickles, its counts) --
and not what it writes without it, so a command line that dropped the flag is seen."""

import os
import pickle

import pytest

from groundhog_port.cli.main import main
from groundhog_port.legacy import preprocess as pp
from parity_tests.support.fuzzing import run_cli_inprocess

#: a corpus where every option changes something: upper case, repeated words (n-grams, ties
#: for the dictionary order), non-ASCII characters
CORPUS = "the cat sat on the Mat\nA dog and a cat\n\nthe end é\nzebra yak xenon the cat\n"
SECOND = "the dog ran\nbig cats run\n"

#: id -> (command-line flags, the function's keywords); both beside -v 1 -p
OPTIONS = {
    "lowercase": (["-l"], dict(lowercase=True)),
    "ngram": (["-n", "2"], dict(ngram=2)),
    "char": (["-t"], dict(char=True)),
    "count": (["-c"], dict(count=True)),
    "each": (["-e"], dict(each=True)),
    "vocab": (["-v", "5"], dict(vocab=5)),
    "dict_order": (["--dict-order", "py3"], dict(dict_order="py3")),
    "split": (["-n", "2", "-s", "0.5", "--seed", "3"], dict(ngram=2, split=0.5, seed=3)),
    "seed": (["-n", "2", "-s", "0.5", "--seed", "4"], dict(ngram=2, split=0.5, seed=4)),
    "dictionary": (["-d", "words.pkl"], dict(dictionary="words.pkl")),
    "binarized_text": (["-b", "text.pkl"], dict(binarized_text="text.pkl")),
    "ivocab": (["--ivocab", "iv.pkl"], dict(ivocab="iv.pkl")),
    "h5": (["--h5", "text.h5"], dict(h5="text.h5")),
}
#: what the option is compared against: the same run without it (``seed``: another seed)
WITHOUT = {"seed": dict(ngram=2, split=0.5, seed=3), "split": dict(ngram=2)}


def _written(folder):
    """Every file a run wrote: pickles and text by bytes, .h5 files by their datasets."""
    out = {}
    for name in sorted(os.listdir(folder)):
        path = folder / name
        if name.endswith((".h5", ".hdf")):
            import h5py

            with h5py.File(path, "r") as f:
                out[name] = {k: f[k][()].tobytes() for k in f}
        elif name.endswith(".pkl"):
            with open(path, "rb") as f:
                out[name] = repr(pickle.load(f, encoding="utf-8"))
        else:
            out[name] = path.read_bytes()
    return out


def _inputs(folder):
    (folder / "a.txt").write_text(CORPUS, encoding="utf-8")
    (folder / "b.txt").write_text(SECOND, encoding="utf-8")
    return ["a.txt", "b.txt"]


def _remove_inputs(folder):
    for name in ("a.txt", "b.txt"):
        (folder / name).unlink()


def _library(folder, monkeypatch, **keywords):
    folder.mkdir()
    inputs = _inputs(folder)
    monkeypatch.chdir(folder)
    pp.preprocess(inputs, **{"vocab": 1, "pickle_text": True, **keywords})
    _remove_inputs(folder)
    return _written(folder)


@pytest.mark.parametrize("key", list(OPTIONS))
def test_the_command_line_writes_what_the_option_does(tmp_path, monkeypatch, key):
    flags, keywords = OPTIONS[key]
    cli = tmp_path / "cli"
    cli.mkdir()
    inputs = _inputs(cli)
    monkeypatch.chdir(cli)
    argv = ["preprocess", *inputs, "-v", "1", "-p", *flags]
    rc, _, err = run_cli_inprocess(main, argv, cwd=cli)
    assert rc == 0, err
    _remove_inputs(cli)
    got = _written(cli)
    assert got == _library(tmp_path / "with", monkeypatch, **keywords)
    assert got != _library(tmp_path / "without", monkeypatch, **WITHOUT.get(key, {}))
