"""Batch construction (groundhog_port.legacy.data) against GroundHog's recorded batches.

* text path (score.py --mode=batch, BatchBiTxtIterator): trace.h5 /batch_all/{b}/{x,x_mask,y,y_mask}
* training iterator (get_batch_iterator + create_padded_batch): trace.h5 /train_step/{x,...}
* .h5 scoring path (score.py --n-batches 20 on the shuffled training h5): structure only here
  (640 pairs = the 640 lines of scores_h5_train20.txt); the score comparison needs the model.
All comparisons are exact (dtype and every element).
"""

import base64
import hashlib
import pickle
from pathlib import Path

import h5py
import numpy as np
import pytest

from groundhog_port.errors import LegacyInputError
from groundhog_port.legacy import data
from groundhog_port.legacy import vocab as _vocab
from groundhog_port.legacy.data import legacy_argsort
from legacy_states.load import load_state as legacy_load_state

CASES = ("search", "encdec", "phrase", "search_variant", "encdec_variant")
ARRAYS = ("x", "x_mask", "y", "y_mask")


# --- helpers ------------------------------------------------------------------------------------


def load_state(case_dir: Path) -> dict:
    """prototype_state() updated with the case's state.pkl, as score.py/train.py build it."""
    (pkl,) = case_dir.glob("*state.pkl")
    return legacy_load_state(pkl)


def case_dir(legacy_root, case) -> Path:
    d = legacy_root / case
    if not d.is_dir():
        pytest.skip(f"case {case} not recorded under {legacy_root}")
    return d


def assert_same(got: np.ndarray, want: np.ndarray, what: str):
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    diff = np.argwhere(got != want)
    assert diff.size == 0, f"{what}: {len(diff)} elements differ, first at {diff[0].tolist()}"


@pytest.fixture(scope="module")
def train_h5(legacy_root):
    d = legacy_root / "data"
    return (
        data.read_h5_bitext(d / "binarized_text.shuffled.en.h5"),
        data.read_h5_bitext(d / "binarized_text.shuffled.fr.h5"),
    )


# --- text path: score.py --mode=batch --src test.en --trg test.fr --allow-unk ---------------------


@pytest.mark.parametrize("case", CASES)
def test_text_batches_match_trace(legacy_root, case):
    d = case_dir(legacy_root, case)
    state = load_state(d)
    w_src = _vocab.load_word2idx(d / "vocab.en.pkl")
    w_trg = _vocab.load_word2idx(d / "vocab.fr.pkl")
    batches = list(
        data.iter_text_batches(state, d / "test.en", d / "test.fr", w_src, w_trg, allow_unk=True)
    )
    with h5py.File(d / "trace.h5", "r") as f:
        recorded = f["batch_all"]
        assert len(batches) == len(recorded)
        start = 0
        for b, batch in enumerate(batches):
            for name in ARRAYS:
                assert_same(
                    getattr(batch, name),
                    recorded[f"{b}/{name}"][()],
                    f"{case} /batch_all/{b}/{name}",
                )
            n = batch.size
            assert batch.line_numbers.tolist() == list(range(start, start + n))
            start += n
        assert start == 40


def test_text_quirk_target_ids_use_n_sym_source(legacy_root):
    """QUIRK parse_input n_sym_source: French ids 201..319 are UNK (1) in text batches."""
    d = case_dir(legacy_root, "search")
    state = load_state(d)
    w_trg = _vocab.load_word2idx(d / "vocab.fr.pkl")
    assert any(state["n_sym_source"] <= i < state["null_sym_target"] for i in w_trg.values())
    for batch in data.iter_text_batches(
        state, d / "test.en", d / "test.fr", _vocab.load_word2idx(d / "vocab.en.pkl"), w_trg
    ):
        real = batch.y[batch.y_mask > 0]
        assert not ((real >= state["n_sym_source"]) & (real != state["null_sym_target"])).any()


def _write(path: Path, raw: bytes) -> Path:
    path.write_bytes(raw)
    return path


def _toy(tmp_path):
    state = {
        "bs": 2,
        "unk_sym_source": 1,
        "unk_sym_target": 1,
        "null_sym_source": 9,
        "null_sym_target": 9,
        "n_sym_source": 10,
        "n_sym_target": 10,
    }
    w = {"a": 2, "b": 3, "c": 4, "é": 5}
    return state, w


def test_text_line_endings_and_empty_lines(tmp_path):
    state, w = _toy(tmp_path)
    unix = _write(tmp_path / "u.txt", "a b\n\nc é\n".encode())
    crlf = _write(tmp_path / "w.txt", "a b\r\n\r\nc é".encode())  # CRLF, no final newline
    got = list(data.iter_text_batches(state, unix, crlf, w, w))
    ref = list(data.iter_text_batches(state, unix, unix, w, w))
    assert [b.size for b in got] == [2, 1]
    for g, r in zip(got, ref):
        for name in ARRAYS:
            assert_same(getattr(g, name), getattr(r, name), name)
    first = got[0]
    # empty line 2 -> just null_sym, mask on one position; zero padding (text path)
    assert first.x[:, 1].tolist() == [9, 0, 0] and first.x_mask[:, 1].tolist() == [1, 0, 0]
    assert first.x[:, 0].tolist() == [2, 3, 9]
    assert got[1].y[:, 0].tolist() == [4, 5, 9]


def test_text_errors(tmp_path):
    state, w = _toy(tmp_path)
    three = _write(tmp_path / "three.txt", b"a\nb\nc\n")
    two = _write(tmp_path / "two.txt", b"a\nb\n")
    with pytest.raises(LegacyInputError, match=r"3 source lines but 2 target lines"):
        data.iter_text_batches(state, three, two, w, w)
    unk = _write(tmp_path / "unk.txt", b"a\nb zzz\nc\n")
    with pytest.raises(LegacyInputError, match=r"unk\.txt: line 2: .*[Uu]nknown word"):
        data.iter_text_batches(state, three, unk, w, w, allow_unk=False)
    assert [b.size for b in data.iter_text_batches(state, three, unk, w, w)] == [2, 1]
    bad = _write(tmp_path / "bad.txt", b"a\nb \xff\xfe\nc\n")
    with pytest.raises(LegacyInputError, match=r"bad\.txt: line 2: not valid UTF-8"):
        data.iter_text_batches(state, three, bad, w, w)
    with pytest.raises(LegacyInputError, match="cannot read"):
        data.iter_text_batches(state, tmp_path / "missing.txt", two, w, w)


# --- training iterator: trace /train_step ---------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_first_training_batch_matches_trace(legacy_root, train_h5, case):
    d = case_dir(legacy_root, case)
    state = load_state(d)
    batch = data.first_training_batch(state, *train_h5)
    with h5py.File(d / "trace.h5", "r") as f:
        assert int(f["train_step"].attrs["iterator_start_offset"]) == 0
        for name in ARRAYS:
            assert_same(
                getattr(batch, name), f[f"train_step/{name}"][()], f"{case} /train_step/{name}"
            )
    assert batch.size == state["bs"]
    assert batch.line_numbers.max() < state["sort_k_batches"] * state["bs"]


def test_first_training_batch_from_state_paths(legacy_root):
    d = case_dir(legacy_root, "encdec")
    state = load_state(d)
    state["source"] = [str(legacy_root / "data" / "binarized_text.shuffled.en.h5")]
    state["target"] = [str(legacy_root / "data" / "binarized_text.shuffled.fr.h5")]
    with h5py.File(d / "trace.h5", "r") as f:
        assert_same(data.first_training_batch(state).x, f["train_step/x"][()], "x")
    state["shuffle"] = True
    with pytest.raises(LegacyInputError, match="random offset"):
        data.first_training_batch(state)


# --- .h5 scoring path: score.py --mode=batch --src/--trg shuffled h5 --allow-unk --n-batches 20 ---


@pytest.mark.parametrize("case", ("search", "encdec"))
def test_h5_score_batches_structure(legacy_root, train_h5, case):
    d = case_dir(legacy_root, case)
    state = load_state(d)
    n_scores = len((d / "scores_h5_train20.txt").read_text().splitlines())
    src, trg = train_h5
    batches = list(data.iter_h5_batches(state, src, trg, n_batches=20))
    assert len(batches) == 20
    assert sum(b.size for b in batches) == n_scores == 640
    # sort_k_batches=1 in score.py: file order, consecutive pairs (none longer than seqlen here)
    assert np.concatenate([b.line_numbers for b in batches]).tolist() == list(range(640))
    for b in batches:
        assert b.x.dtype == b.y.dtype == np.int64
        assert b.x_mask.dtype == b.y_mask.dtype == np.float32
        assert b.x.shape == b.x_mask.shape and b.y.shape == b.y_mask.shape
        assert b.x.shape[1] == b.y.shape[1] == state["bs"]
        for _side, seqs, arr, mask, null in (
            ("x", src, b.x, b.x_mask, state["null_sym_source"]),
            ("y", trg, b.y, b.y_mask, state["null_sym_target"]),
        ):
            lens = seqs.length[b.line_numbers]
            assert arr.shape[0] == min(state["seqlen"], lens.max()) + 1  # trim_batches
            for j, i in enumerate(b.line_numbers):
                n = int(lens[j])
                assert arr[:n, j].tolist() == seqs.sentence(i).tolist()
                assert (arr[n:, j] == null).all()  # QUIRK h5 pad null_sym
                assert mask[:, j].tolist() == [1.0] * (n + 1) + [0.0] * (arr.shape[0] - n - 1)


def test_h5_whole_file_and_n_batches(train_h5, legacy_root):
    state = load_state(case_dir(legacy_root, "search"))
    sizes = [b.size for b in data.iter_h5_batches(state, *train_h5)]
    assert sizes == [32] * 93 + [24]  # 3000 pairs; the original crashed after the last one
    assert [b.size for b in data.iter_h5_batches(state, *train_h5, n_batches=0)] == []
    assert len(list(data.iter_h5_batches(state, *train_h5, n_batches=-1))) == 94


def test_read_h5_phrases_matches_binarized_pickle(legacy_root):
    d = legacy_root / "data"
    for lang in ("en", "fr"):
        with open(d / f"binarized_text.{lang}.pkl", "rb") as fh:
            want = pickle.load(fh, encoding="latin1")
        got = data.read_h5_phrases(d / f"binarized_text.{lang}.h5")
        assert len(got) == len(want) == 3000
        assert all(g.dtype == np.int64 and g.tolist() == list(w) for g, w in zip(got, want))


# --- synthetic h5 files: skipping, sorting, invalid pairs, errors ---------------------------------


def write_h5(path: Path, sents, phrases_dtype="<i4", index_fields=("length", "pos")):
    lengths = [len(s) for s in sents]
    pos = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.uint32) if sents else []
    flat = np.concatenate([np.asarray(s) for s in sents]) if sents else np.zeros(0)
    table = np.zeros(len(sents), dtype=[(f, "<u4") for f in index_fields])
    if "length" in index_fields:
        table["length"] = lengths
    if "pos" in index_fields:
        table["pos"] = pos
    with h5py.File(path, "w") as f:
        f.create_dataset("phrases", data=flat.astype(phrases_dtype), maxshape=(None,))
        f.create_dataset("indices", data=table)
    return path


TOY_STATE = {
    "bs": 2,
    "seqlen": 3,
    "sort_k_batches": 2,
    "trim_batches": True,
    "shuffle": False,
    "use_infinite_loop": False,
    "null_sym_source": 9,
    "null_sym_target": 8,
    "n_sym_source": 10,
    "n_sym_target": 9,
    "unk_sym_source": 1,
    "unk_sym_target": 1,
}


def test_h5_skip_long_sort_and_unk(tmp_path):
    src = write_h5(tmp_path / "s.h5", [[2, 3], [2, 3, 4, 5], [4], [5, 6, 7], [], [12, 2]])
    trg = write_h5(tmp_path / "t.h5", [[3], [3], [4, 4, 4], [2], [2, 2], [8]])
    st = dict(TOY_STATE)
    # pair 1 is too long (4 > seqlen 3): skipped; fetches [0, 2] and [3, 4]; pair 5 is lost in
    # the incomplete trailing group (QUIRK h5 lost tail)
    batches = list(data.iter_h5_batches(st, src, trg, sort_k_batches=2))
    lens = [2, 3, 3, 2]  # max(len_x, len_y) of pairs 0, 2, 3, 4
    order = legacy_argsort(lens)
    assert [b.line_numbers.tolist() for b in batches] == [[0, 4], [2, 3]]
    assert order.tolist() == [0, 3, 1, 2]
    b = batches[0]
    assert b.x.tolist() == [[2, 9], [3, 9], [9, 9]]
    assert b.x_mask.tolist() == [[1, 1], [1, 0], [1, 0]]
    assert b.y.tolist() == [[3, 2], [8, 2], [8, 8]]
    # sort_k_batches=1 (score.py): file order, the last fetch is short; source id 12 >=
    # n_sym_source -> unk_sym_source (1); target id 8 (< n_sym_target) is kept as it is
    batches = list(data.iter_h5_batches(st, src, trg))
    assert [b.line_numbers.tolist() for b in batches] == [[0, 2], [3, 4], [5]]
    assert batches[2].x[:, 0].tolist() == [1, 2, 9] and batches[2].y[:, 0].tolist() == [8, 8]


def test_create_padded_batch_without_trim():
    st = dict(TOY_STATE, trim_batches=False)
    X, Xm, Y, Ym = data.create_padded_batch(st, [[2, 3, 4], [2]], [[5], [5]])
    # QUIRK h5 invalid pairs: the first source fills the width without null_sym -> dropped
    assert X.tolist() == [[2], [9], [9]] and Xm.tolist() == [[1], [1], [0]]
    assert Y.tolist() == [[5], [8], [8]]
    assert data.create_padded_batch(st, [[2, 3, 4]], [[5]]) is None
    # a sequence that ends in null_sym at the last position is valid (checked before unk mapping)
    out = data.create_padded_batch(st, [[2, 3, 9]], [[5]], return_dict=True)
    assert out["x"][:, 0].tolist() == [2, 3, 9] and out["x_mask"][:, 0].tolist() == [1, 1, 1]


def test_h5_errors(tmp_path):
    good = write_h5(tmp_path / "good.h5", [[2, 3], [4]])
    st = dict(TOY_STATE)
    other = write_h5(tmp_path / "three.h5", [[2], [3], [4]])
    with pytest.raises(LegacyInputError, match=r"good\.h5: 2 sentences but 3"):
        list(data.iter_h5_batches(st, good, other))
    text = _write(tmp_path / "text.h5", b"not hdf5 at all\n")
    with pytest.raises(LegacyInputError, match=r"text\.h5: not a readable HDF5 file"):
        data.read_h5_phrases(text)
    with pytest.raises(LegacyInputError, match="no such file"):
        data.read_h5_phrases(tmp_path / "absent.h5")
    floats = write_h5(tmp_path / "f.h5", [[2.0, 3.0]], phrases_dtype="<f4")
    with pytest.raises(LegacyInputError, match=r"f\.h5: '/phrases' is 1-D float32"):
        data.read_h5_phrases(floats)
    nopos = write_h5(tmp_path / "nopos.h5", [[2]], index_fields=("length",))
    with pytest.raises(LegacyInputError, match="not a table with columns"):
        data.read_h5_phrases(nopos)
    with h5py.File(tmp_path / "empty.h5", "w") as f:
        f.create_dataset("phrases", data=np.zeros(3, "<i4"))
    with pytest.raises(LegacyInputError, match=r"no dataset '/indices'"):
        data.read_h5_phrases(tmp_path / "empty.h5")
    short = write_h5(tmp_path / "short.h5", [[2, 3], [4, 5, 6]])
    with h5py.File(short, "r+") as f:
        f["phrases"].resize((3,))
    with pytest.raises(LegacyInputError, match=r"row 1 .* points past the end"):
        data.read_h5_phrases(short)
    neg = write_h5(tmp_path / "neg.h5", [[2, -3]])
    with pytest.raises(LegacyInputError, match="negative word id"):
        data.read_h5_phrases(neg)


def test_h5_truncated_file(legacy_root, tmp_path):
    raw = (legacy_root / "data" / "binarized_text.en.h5").read_bytes()
    cut = _write(tmp_path / "cut.h5", raw[: len(raw) // 2])
    with pytest.raises(LegacyInputError, match=r"cut\.h5: "):
        data.read_h5_phrases(cut)


# --- numpy 1.23.5 argsort emulation (QUIRK h5 sort ties) ------------------------------------------

# numpy 1.23.5 np.argsort (sha256 of the int64 result), computed with numpy 1.23.5 itself
NP123_TIES_640 = "598d6c178b5217ba553f9dd42519bb8a6630677383747d8b2e1b642b392c421c"
NP123_TIES_640_HEAD = [33, 569, 30, 170, 181, 486, 519, 190, 57, 194, 56, 104]
# a McIlroy "antiqsort" input of 200 keys that drives numpy's introsort into its heapsort branch
ADVERSARY_200 = (
    "AIECgAR/Bn4IfQp8DHsOehB5EngUdxZ2GHUadBwfx8XGxMPCwcC/vr28u7q5uLe2tbSzsrGwr66trKuqqainpqWko6K"
    "hoJ+enZybmpmYl5aVlJOSkZCPjo2Mi4qJiIeGhYSDAQMFBwkLDQ8RExUXGRsdc3JxcG9ubWxramloZ2ZlZGNiYWBfXl"
    "1cW1pZWFdWVVRTUlFQT05NTEtKSUhHRkVEQ0JBQD8+PTw7Ojk4NzY1NDMyMTAvLi0sKyopKCcmJSQjIiEggh4="
)
NP123_ADVERSARY_200 = "1fd1539283a8961d0b569ace2a3fe19c25014cd63949199729fd05439b27b156"


def _sha(order):
    return hashlib.sha256(np.asarray(order, dtype="<i8").tobytes()).hexdigest()


def test_legacy_argsort_matches_numpy_1_23_ties():
    keys = np.random.RandomState(0).randint(0, 13, 640).astype(np.int64)
    order = legacy_argsort(keys)
    assert order[:12].tolist() == NP123_TIES_640_HEAD
    assert _sha(order) == NP123_TIES_640


def test_legacy_argsort_heapsort_branch(monkeypatch):
    keys = np.frombuffer(base64.b64decode(ADVERSARY_200), dtype=np.uint8).astype(np.int64)
    calls = []
    real = data._legacy_aheapsort
    monkeypatch.setattr(data, "_legacy_aheapsort", lambda *a: (calls.append(a[3]), real(*a)))
    order = legacy_argsort(keys)
    assert calls, "the adversarial input should reach the depth limit"
    assert _sha(order) == NP123_ADVERSARY_200


@pytest.mark.parametrize("n", [0, 1, 2, 15, 16, 17, 18, 100, 641])
def test_legacy_argsort_sorts(n):
    rng = np.random.RandomState(n)
    for high in (1, 3, 1000):
        keys = rng.randint(0, high, n)
        order = legacy_argsort(keys)
        assert sorted(order.tolist()) == list(range(n))
        assert (np.diff(keys[order]) >= 0).all()


@pytest.mark.parametrize("pack", ["gzip", "bz2", "lzma"])
def test_a_compressed_text_named_without_a_suffix_is_read_by_its_content(
    legacy_root, tmp_path, pack
):
    """A test set compressed by a lab but kept as ``test.en`` (no ``.gz``): told by its magic
    number, read decompressed -- the same lines as the plain file, never its compressed bytes
    decoded (or refused) as UTF-8."""
    import importlib

    plain = legacy_root / "search" / "test.en"
    packed = tmp_path / "test.en"
    packed.write_bytes(importlib.import_module(pack).compress(plain.read_bytes()))
    assert data.read_text_lines(packed) == data.read_text_lines(plain)
