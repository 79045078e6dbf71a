"""GroundHog's preprocessing (experiments/nmt/preprocess/) against the shared data folder.

The recorded ``vocab.*.pkl``, ``ivocab.*.pkl``, ``binarized_text.*.pkl`` and ``.h5`` files
are what GroundHog's scripts made from ``train.{en,fr}`` under Python 3 (MANIFEST section 2
step 4; docs/recordings.md, "Python 2 pickles and dict order"); ``py2_preprocess_emulation.json``
records what Python 2.7 would have made.
"""

import bz2
import gzip
import json
import pickle
import subprocess

import numpy as np
import pytest

from groundhog_port.legacy import preprocess as pp
from groundhog_port.legacy.data import read_h5_bitext
from groundhog_port.legacy.preprocess.py2dict import Py2Dict, py2_hash
from parity_tests.support.cases import LEGACY_ROOT

DATA = LEGACY_ROOT / "data"
SIZES = {"en": 200, "fr": 320}  # -v of MANIFEST section 2 step 4

needs_data = pytest.mark.skipif(
    not (DATA / "train.en").is_file(), reason=f"shared data folder not found at {DATA}"
)


def cli(*args, capsys=None):
    """The command line, in-process (a subprocess would import torch again for each call)."""
    from groundhog_port.cli.main import main

    code = main([str(a) for a in args])
    err = capsys.readouterr().err if capsys else ""
    return subprocess.CompletedProcess(args, code, "", err)


def run_pipeline(tmp_path, lang, order, source=None):
    out = tmp_path / f"{lang}.{order}"
    out.mkdir()
    pp.preprocess(
        [str(source or DATA / f"train.{lang}")],
        dictionary=out / "vocab.pkl",
        binarized_text=out / "bin.pkl",
        vocab=SIZES[lang],
        pickle_text=True,
        dict_order=order,
        ivocab=out / "ivocab.pkl",
        h5=out / "bin.h5",
    )
    return out


def test_py2_hash_known_values():
    # values printed by a 64-bit CPython 2.7 (MANIFEST section 8 self-checks)
    assert py2_hash(b"a") == 12416037344
    assert py2_hash(b"abc") == 1453079729188098211
    assert py2_hash(b"") == 0 and py2_hash(-1) == -2 and py2_hash(7) == 7
    assert py2_hash("abc") == py2_hash(b"abc")  # Py2: hash(u'abc') == hash('abc')


@needs_data
@pytest.mark.parametrize("lang", ["en", "fr"])
def test_py2_dict_order_is_the_recorded_pickle_order(lang):
    """The recorded vocabularies were pickled with their items in CPython 2.7's iteration
    order; rebuilding the dict as preprocess.py filled it gives that order."""
    recorded = pickle.load(open(DATA / f"vocab.{lang}.pkl", "rb"), encoding="bytes")
    d = Py2Dict([(b"UNK", 1), (b"<s>", 0), (b"</s>", 0)])
    for word, index in sorted(recorded.items(), key=lambda kv: kv[1]):
        if word not in d:
            d[word] = index
    assert d.keys() == list(recorded)


@needs_data
@pytest.mark.parametrize("lang", ["en", "fr"])
def test_py3_order_reproduces_every_recorded_file(tmp_path, lang):
    out = run_pipeline(tmp_path, lang, "py3")
    assert (out / "vocab.pkl").read_bytes() == (DATA / f"vocab.{lang}.pkl").read_bytes()
    assert (out / "ivocab.pkl").read_bytes() == (DATA / f"ivocab.{lang}.pkl").read_bytes()
    assert (out / "bin.pkl").read_bytes() == (DATA / f"binarized_text.{lang}.pkl").read_bytes()
    ours, rec = read_h5_bitext(out / "bin.h5"), read_h5_bitext(DATA / f"binarized_text.{lang}.h5")
    for field in ("phrases", "pos", "length"):
        assert np.array_equal(getattr(ours, field), getattr(rec, field))
    import h5py

    with (
        h5py.File(out / "bin.h5", "r") as a,
        h5py.File(DATA / f"binarized_text.{lang}.h5", "r") as b,
    ):
        for node in ("/", "/phrases", "/indices"):
            assert {k: repr(v) for k, v in a[node].attrs.items()} == {
                k: repr(v) for k, v in b[node].attrs.items()
            }
        for node in ("phrases", "indices"):
            assert (a[node].dtype, a[node].chunks, a[node].maxshape) == (
                b[node].dtype,
                b[node].chunks,
                b[node].maxshape,
            )


@needs_data
@pytest.mark.parametrize("lang", ["en", "fr"])
def test_py2_order_reproduces_the_python2_emulation(tmp_path, lang):
    rec = json.loads((DATA / "py2_preprocess_emulation.json").read_text())[lang]
    out = run_pipeline(tmp_path, lang, "py2")
    vocab = pickle.load(open(out / "vocab.pkl", "rb"), encoding="utf-8")
    assert vocab == rec["py2_vocab"]
    py3 = pickle.load(open(DATA / f"vocab.{lang}.pkl", "rb"), encoding="utf-8")
    differing = sum(
        1 for w, i in py3.items() if vocab.get(w) != i and w not in ("UNK", "<s>", "</s>")
    )
    assert differing == rec["n_words_with_different_index"]  # 115 en, 212 fr
    assert sorted(set(vocab) - set(py3)) == rec["words_only_in_py2_vocab"]
    ivocab = pickle.load(open(out / "ivocab.pkl", "rb"), encoding="utf-8")
    assert ivocab[0] == rec["py2_ivocab0"] == "<s>"
    assert ivocab == {i: w for w, i in vocab.items() if w not in ("<s>", "</s>")} | {0: "<s>"}
    binarized = pickle.load(open(out / "bin.pkl", "rb"))
    lines = (DATA / f"train.{lang}").read_text(encoding="utf-8").split("\n")[:-1]
    assert binarized == [[vocab.get(w, 1) for w in line.strip().split(" ")] for line in lines]
    with open(out / "vocab.pkl", "rb") as f:  # a protocol-2 Python-2 pickle, str keys
        import pickletools

        ops = {op.name for op, _, _ in pickletools.genops(f.read())}
    assert "BINUNICODE" not in ops and "FRAME" not in ops and "PROTO" in ops


@needs_data
def test_the_port_loads_what_it_wrote(tmp_path):
    from groundhog_port.legacy import vocab as v

    out = run_pipeline(tmp_path, "fr", "py2")
    w2i, i2w = v.load_word2idx(out / "vocab.pkl"), v.load_idx2word(out / "ivocab.pkl")
    assert w2i["où"] >= 2 and i2w[w2i["où"]] == "où"


@needs_data
def test_pytables_reads_the_h5_as_groundhog_does(tmp_path):
    tables = pytest.importorskip(
        "tables",
        reason="PyTables (the original's HDF5 library) "
        "is not installed: pip install groundhog-port[test]",
    )
    out = run_pipeline(tmp_path, "en", "py3")
    rec = read_h5_bitext(DATA / "binarized_text.en.h5")
    with tables.open_file(str(out / "bin.h5")) as f:  # TM_dataset.py:175-181, shuffle-hdf5.py:39
        phrases, indices = f.get_node("/phrases"), f.get_node("/indices")
        assert isinstance(phrases, tables.EArray) and isinstance(indices, tables.Table)
        assert indices.title == "a table of indices and lengths"
        for i in (0, 1, 2999):
            row = indices[i]
            assert (row["pos"], row["length"]) == (rec.pos[i], rec.length[i])
            assert np.array_equal(phrases[row["pos"] : row["pos"] + row["length"]], rec.sentence(i))


@needs_data
def test_compressed_inputs_give_the_same_files(tmp_path):
    raw = (DATA / "train.en").read_bytes()
    (tmp_path / "train.en.gz").write_bytes(gzip.compress(raw))
    (tmp_path / "train.en.bz2").write_bytes(bz2.compress(raw))
    plain = run_pipeline(tmp_path, "en", "py2")
    for name in ("train.en.gz", "train.en.bz2"):
        out = tmp_path / ("out_" + name)
        out.mkdir()
        pp.preprocess(
            [str(tmp_path / name)],
            dictionary=out / "v.pkl",
            binarized_text=out / "b.pkl",
            vocab=200,
            pickle_text=True,
        )
        assert (out / "v.pkl").read_bytes() == (plain / "vocab.pkl").read_bytes()
        assert (out / "b.pkl").read_bytes() == (plain / "bin.pkl").read_bytes()


@needs_data
@pytest.mark.parametrize("order,first", [("py3", "</s>"), ("py2", "<s>")])
def test_invert_dict_command(tmp_path, order, first):
    r = cli("invert-dict", "--dict-order", order, DATA / "vocab.en.pkl", tmp_path / "iv.pkl")
    assert r.returncode == 0, r.stderr
    iv = pickle.load(open(tmp_path / "iv.pkl", "rb"), encoding="utf-8")
    assert iv[0] == first
    if order == "py3":
        assert (tmp_path / "iv.pkl").read_bytes() == (DATA / "ivocab.en.pkl").read_bytes()


@needs_data
def test_pkl2hdf5_command(tmp_path):
    r = cli("pkl2hdf5", DATA / "binarized_text.fr.pkl", tmp_path / "fr.h5")
    assert r.returncode == 0, r.stderr
    ours, rec = read_h5_bitext(tmp_path / "fr.h5"), read_h5_bitext(DATA / "binarized_text.fr.h5")
    assert all(
        np.array_equal(getattr(ours, f), getattr(rec, f)) for f in ("phrases", "pos", "length")
    )


def _pairs(src, trg):
    return [(tuple(src.sentence(i)), tuple(trg.sentence(i))) for i in range(len(src))]


@needs_data
def test_shuffle_is_a_pair_preserving_permutation(tmp_path):
    src_in, trg_in = DATA / "binarized_text.en.h5", DATA / "binarized_text.fr.h5"
    outs = [tmp_path / "s.en.h5", tmp_path / "s.fr.h5"]
    r = cli("shuffle-hdf5", "--seed", 1234, src_in, trg_in, *outs)
    assert r.returncode == 0, r.stderr
    before = _pairs(read_h5_bitext(src_in), read_h5_bitext(trg_in))
    after = _pairs(*map(read_h5_bitext, outs))
    assert sorted(after) == sorted(before) and after != before
    # the order shuffle-hdf5.py gives after numpy.random.seed(1234)
    np.random.seed(1234)
    idxs = np.arange(len(before))
    np.random.shuffle(idxs)
    assert after == [before[i] for i in idxs]
    # the recorded training files (unseeded original) pass the same check
    recorded = _pairs(
        read_h5_bitext(DATA / "binarized_text.shuffled.en.h5"),
        read_h5_bitext(DATA / "binarized_text.shuffled.fr.h5"),
    )
    assert sorted(recorded) == sorted(before)


def test_shuffle_refuses_sides_of_different_lengths(tmp_path, capsys):
    from groundhog_port.legacy.preprocess.h5out import write_bitext_side

    write_bitext_side(tmp_path / "a.h5", [[2, 3], [4]])
    write_bitext_side(tmp_path / "b.h5", [[5]])
    r = cli(
        "shuffle-hdf5",
        "--seed",
        0,
        tmp_path / "a.h5",
        tmp_path / "b.h5",
        tmp_path / "x.h5",
        tmp_path / "y.h5",
        capsys=capsys,
    )
    assert r.returncode == 2 and "not two sides of one bitext" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.h5", "b.h5"]


@pytest.mark.parametrize(
    "content,flags,message",
    [
        (b"a b\n\xe9t\xe9\n", ["-v", "10"], "line 2 is not UTF-8"),
        (b"", ["-v", "10"], "empty corpus"),
        (b"\n\n", ["-v", "10"], "empty corpus"),
        (b"a b c\n", ["-v", "0"], "-v 0: the vocabulary size must be at least 1"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    tmp_path, monkeypatch, capsys, content, flags, message
):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "c.txt").write_bytes(content)
    out = tmp_path / "out"
    out.mkdir()
    r = cli(
        "preprocess",
        "-d",
        out / "v.pkl",
        "-b",
        out / "b.pkl",
        "-p",
        "-c",
        "-e",
        "--ivocab",
        out / "iv.pkl",
        "--h5",
        out / "b.h5",
        *flags,
        tmp_path / "in" / "c.txt",
        capsys=(monkeypatch.chdir(out), capsys)[1],
    )
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in r.stderr
    assert list(out.iterdir()) == []


def test_quirks_counts_ngrams_and_char_mode(tmp_path, monkeypatch):
    """Single-space splitting (an empty line is the word ''), ASCII-only -l, the -c Counter
    pickles, -n windows padded with 0, and -t characters as unicode."""
    corpus = tmp_path / "c.txt"
    corpus.write_bytes("b a\n\nA  É\n".encode())
    monkeypatch.chdir(tmp_path)

    def run(name, **flags):
        """``-v 1 -p`` on the corpus into ``v<name>.pkl`` / ``b<name>.pkl``."""
        files = dict(dictionary=f"v{name}.pkl", binarized_text=f"b{name}.pkl")
        pp.preprocess([str(corpus)], vocab=1, pickle_text=True, **files, **flags)

    run("", count=True, lowercase=True, ngram=2)
    vocab = pickle.load(open("v.pkl", "rb"), encoding="utf-8")
    # counts: a 2, b 1, '' 2 (the empty line and the double space), 'É' 1 (not lowercased)
    assert (
        vocab["a"] == 2
        and vocab[""] == 3
        and set(vocab) == {"UNK", "<s>", "</s>", "a", "", "b", "É"}
    )
    assert pickle.load(open("b.pkl", "rb")) == [[vocab["b"], 2], [3], [2, 3, vocab["É"]]]
    counts = pickle.load(open("combined.count.pkl", "rb"), encoding="utf-8")
    assert type(counts).__name__ == "Counter" and counts == {"a": 2, "b": 1, "": 2, "É": 1}
    import h5py

    with h5py.File("combined.hdf", "r") as f:
        grams = f["combined"][()]
    assert grams.dtype == np.uint16 and grams.shape == (6 + 3, 2)  # words + one EOS per line
    assert grams[:3].tolist() == [[0, vocab["b"]], [vocab["b"], 2], [2, 0]]
    run("c", char=True)
    vc = pickle.load(open("vc.pkl", "rb"), encoding="utf-8")
    assert set(vc) == {"UNK", "<s>", "</s>", "a", "b", " ", "A", "É"}
    with open("vc.pkl", "rb") as f:
        assert b"X\x02\x00\x00\x00\xc3\x89" in f.read()  # BINUNICODE u'É', as Python 2


def test_reused_count_files_are_left_out_of_the_combined_counts(tmp_path, monkeypatch):
    """preprocess.py:117-122: a ``*.count.pkl`` of an earlier ``-e -c`` run is loaded (a
    Python-2 ``Counter`` pickle) but, as in the original, not added to the combined counts."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "one.txt").write_text("x y\n")
    (tmp_path / "two.txt").write_text("z z\n")
    pp.preprocess(["one.txt"], dictionary="v1.pkl", each=True, count=True)
    assert pickle.load(open("one.count.pkl", "rb"), encoding="utf-8") == {"x": 1, "y": 1}
    pp.preprocess(["one.txt", "two.txt"], dictionary="v2.pkl", vocab=1, each=True, count=True)
    assert set(pickle.load(open("v2.pkl", "rb"), encoding="utf-8")) == {"UNK", "<s>", "</s>", "z"}
    pp.preprocess(
        ["one.txt", "two.txt"], dictionary="v3.pkl", vocab=1, each=True, count=True, overwrite=True
    )
    assert set(pickle.load(open("v3.pkl", "rb"), encoding="utf-8")) == {
        "UNK",
        "<s>",
        "</s>",
        "x",
        "y",
        "z",
    }
