"""groundhog_port.tasks.archive.inventory: every file classified by content, within bounds.

Expectations come from outside the code under test: the recordings' own naming convention
(``*_state.pkl`` is a state...) for the shared cases -- while the classifier sees the same
files under neutral names --, numpy / h5py / pickle reading the trusted recordings whole,
line counts made here, and files this test builds with known contents.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import pickle
import random
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from types import SimpleNamespace

import h5py
import numpy as np
import pytest

from groundhog_port import budget
from groundhog_port.tasks.archive import inventory
from groundhog_port.tasks.archive.inventory import (
    Kind,
    Limits,
    classify,
    model_fits_state,
    pair_models,
    vocabulary_share,
)
from groundhog_port.tasks.archive.outputs import language_of
from parity_tests.support.memory import peak

CASES = ("search", "encdec", "phrase", "search_variant", "encdec_variant")


def expected_kind(folder: str, name: str, size: int) -> tuple[Kind, str | None]:
    """The role of a recorded file by the recordings' naming convention (MANIFEST.md)."""
    if name.endswith("_state.pkl"):
        return Kind.STATE, None
    if name.endswith("_model.npz"):
        return Kind.MODEL, None
    if name.endswith("_timing.npz"):
        return Kind.TIMING, None
    if name.startswith("vocab.") and name.endswith(".pkl"):
        return Kind.VOCABULARY, None
    if name.startswith("ivocab.") and name.endswith(".pkl"):
        return Kind.INVERSE_VOCABULARY, None
    if name.startswith("binarized_text.") and name.endswith(".pkl"):
        return Kind.PICKLE_OTHER, None  # preprocess.py's pickled list of sentences
    if name.endswith(".h5"):
        return Kind.HDF5, "trace" if name == "trace.h5" else "corpus"
    if name.endswith("_stdout.txt"):
        return (Kind.EMPTY if size == 0 else Kind.LOG), None
    if name.endswith("_error.txt") or name == "FAILURE.txt":
        return Kind.CRASH_LOG, None
    if name == "timings.txt":
        return Kind.LOG, None
    if name.startswith(("test.", "train.", "trans_", "scores_")) or name.endswith(".json"):
        return Kind.TEXT, None
    raise AssertionError(f"{folder}/{name}: a recorded file of no known role (update the test)")


def recorded_files(root: Path) -> list[Path]:
    return sorted(p for d in sorted(root.iterdir()) if d.is_dir() for p in sorted(d.iterdir()))


def last_nonblank_line(path: Path) -> str:
    return [line for line in path.read_text("utf-8").splitlines() if line.strip()][-1].strip()


# ----------------------------------------------------------------------------------------------
# the shared cases, under their names and under neutral ones
# ----------------------------------------------------------------------------------------------
def test_every_recorded_file_is_what_its_role_says_under_any_name(legacy_root, tmp_path):
    files = recorded_files(legacy_root)
    assert len(files) > 100
    for i, path in enumerate(files):
        kind, role = expected_kind(path.parent.name, path.name, path.stat().st_size)
        neutral = tmp_path / f"f{i}"  # no name fact left: the content decides
        shutil.copyfile(path, neutral)
        for p in (path, neutral):
            row = classify(p)
            assert row.kind is kind, (p, path, row)
            assert row.path == p and row.size == path.stat().st_size
            if role is not None:
                assert row.facts.role == role, (path, row.facts)


def test_state_facts_and_renamed_state(legacy_root, tmp_path):
    for case in CASES:
        src = legacy_root / case / f"{case}_state.pkl"
        with open(src, "rb") as f:
            stored = pickle.load(f, encoding="utf-8")  # trusted recording: the plain loader
        shutil.copyfile(src, tmp_path / "config.pkl")
        row = classify(tmp_path / "config.pkl")
        assert row.kind is Kind.STATE
        facts = row.facts
        for key in ("n_sym_source", "n_sym_target", "null_sym_source", "dim", "rank_n_approx"):
            assert getattr(facts, key) == stored[key], (case, key)
        assert facts.prefix == stored["prefix"] and facts.word_indx == stored["word_indx"]
        assert facts.source == tuple(stored["source"]) and facts.search == bool(stored["search"])
        assert dict(facts.stored) == stored


def test_model_and_timing_facts_are_the_headers(legacy_root, tmp_path):
    for case in CASES:
        for what, kind in (("model", Kind.MODEL), ("timing", Kind.TIMING)):
            src = legacy_root / case / f"{case}_{what}.npz"
            shutil.copyfile(src, tmp_path / "weights.bin")
            row = classify(tmp_path / "weights.bin")
            assert row.kind is kind
            with np.load(src) as z:  # numpy reading every member whole
                assert row.facts.shapes == {k: z[k].shape for k in z.files}


def test_vocabulary_facts(legacy_root, tmp_path):
    for lang in ("en", "fr"):
        with open(legacy_root / "data" / f"vocab.{lang}.pkl", "rb") as f:
            w2i = pickle.load(f, encoding="utf-8")
        with open(legacy_root / "data" / f"ivocab.{lang}.pkl", "rb") as f:
            i2w = pickle.load(f, encoding="utf-8")
        v, iv = (classify(legacy_root / "data" / f"{p}vocab.{lang}.pkl").facts for p in ("", "i"))
        assert (v.size, v.inverted, v.n_ids) == (len(w2i), False, len(set(w2i.values())))
        assert (iv.size, iv.inverted, iv.n_ids) == (len(i2w), True, len(i2w))
        assert v.ids_complete == (sorted(set(w2i.values())) == list(range(len(set(w2i.values())))))
        assert dict(v.specials) == {s: w2i[s] for s in ("<s>", "</s>", "UNK") if s in w2i}
    (tmp_path / "holey").write_bytes(pickle.dumps({"a": 0, "b": 2, "c": 3}, 2))
    facts = classify(tmp_path / "holey").facts  # id 1 missing: not complete
    assert (facts.ids_complete, facts.n_ids, facts.max_id) == (False, 3, 3)


def test_text_log_and_crash_facts(legacy_root):
    test_en = legacy_root / "search" / "test.en"
    with open(test_en, "rb") as f:
        n = sum(1 for _ in f)
    assert n == 40
    facts = classify(test_en).facts
    assert (facts.lines, facts.complete, facts.encoding_ok, facts.ends_with_newline) == (
        40,
        True,
        True,
        True,
    )
    first = test_en.read_text("utf-8").splitlines()
    assert list(facts.sample) == first[:20]
    assert facts.avg_words == pytest.approx(sum(len(x.split()) for x in first[:20]) / 20)
    assert classify(legacy_root / "search" / "scores_batch.txt").facts.numeric
    assert not facts.numeric
    err = legacy_root / "search_variant" / "sample_beam5_error.txt"
    row = classify(err)
    assert row.kind is Kind.CRASH_LOG and row.facts.error == last_nonblank_line(err)
    out = legacy_root / "search" / "sample_beam5_stdout.txt"
    assert classify(out).facts.total_cost == last_nonblank_line(out)


def test_hdf5_names_are_the_files_top_level(legacy_root):
    for path in (
        legacy_root / "search" / "trace.h5",
        legacy_root / "data" / "binarized_text.en.h5",
    ):
        with h5py.File(path, "r") as f:
            assert classify(path).facts.names == tuple(sorted(f.keys()))


# ----------------------------------------------------------------------------------------------
# built files
# ----------------------------------------------------------------------------------------------
def test_compressed_text_counts_the_decompressed_lines(legacy_root, tmp_path):
    data = (legacy_root / "search" / "test.en").read_bytes()
    for name, pack, kind in (
        ("a", gzip.compress, "gzip"),
        ("b", bz2.compress, "bzip2"),
        ("c", lzma.compress, "xz"),
    ):
        (tmp_path / name).write_bytes(pack(data))
        row = classify(tmp_path / name)
        assert (row.kind, row.compression, row.facts.lines) == (Kind.TEXT, kind, 40)
        (tmp_path / f"{name}2").write_bytes(pack(data) + pack(data))  # two members, `cat`
        assert classify(tmp_path / f"{name}2").facts.lines == 80, kind


def test_packs_by_content(legacy_root, tmp_path):
    src = legacy_root / "search" / "test.en"
    for mode, name in (("w:gz", "p1"), ("w:xz", "p2"), ("w", "p3")):
        with tarfile.open(tmp_path / name, mode) as t:
            t.add(src, "test.en")
    with zipfile.ZipFile(tmp_path / "p4", "w") as z:
        z.write(src, "test.en")
    expected = {"p1": ("tar", "gzip"), "p2": ("tar", "xz"), "p3": ("tar", None)}
    expected["p4"] = ("zip", None)
    for name, (fmt, comp) in expected.items():
        row = classify(tmp_path / name)
        assert (row.kind, row.facts.format, row.compression) == (Kind.PACK, fmt, comp), name


SGML = """<refset setid="newstest2012" srclang="any" trglang="fr">
<doc sysid="ref" docid="d1" genre="news" origlang="en">
{segs}
</doc>
</refset>
"""


def test_sgml_segments_counted_past_the_prefix(tmp_path):
    segs = "\n".join(f'<seg id="{i}">phrase numéro {i} .</seg>' for i in range(1, 1001))
    (tmp_path / "newstest2012-ref.fr.sgm").write_text(SGML.format(segs=segs), "utf-8")
    path = tmp_path / "newstest2012-ref.fr.sgm"
    # a prefix shorter than the file: the count must go on past it
    for limits in (Limits(), Limits(prefix_bytes=256)):
        row = classify(path, limits)
        assert row.kind is Kind.SGML
        facts = row.facts
        assert (facts.set_kind, facts.segments, facts.srclang, facts.trglang) == (
            "ref",
            1000,
            "any",
            "fr",
        )


def test_empty_binary_bad_encoding(tmp_path):
    (tmp_path / "e").write_bytes(b"")
    assert classify(tmp_path / "e").kind is Kind.EMPTY
    (tmp_path / "r").write_bytes(random.Random(0).randbytes(4096))
    assert classify(tmp_path / "r").kind is Kind.BINARY
    (tmp_path / "t").write_bytes(b"un\r\ndeux\r\ntrois caf\xe9\r\nquatre")
    facts = classify(tmp_path / "t").facts
    assert (facts.lines, facts.encoding_ok, facts.first_bad_line, facts.crlf) == (4, False, 3, True)
    assert facts.ends_with_newline is False


def test_damaged_files_are_unreadable_with_a_reason(legacy_root, tmp_path):
    for src in (
        legacy_root / "search" / "search_state.pkl",
        legacy_root / "search" / "vocab.en.pkl",
        legacy_root / "search" / "search_model.npz",
        legacy_root / "search" / "trace.h5",
    ):
        data = src.read_bytes()
        cut = tmp_path / f"cut_{src.name}"
        cut.write_bytes(data[: len(data) // 2])
        row = classify(cut)
        assert row.kind is Kind.UNREADABLE and row.note and "\n" not in row.note, (src, row)
    data = gzip.compress((legacy_root / "search" / "test.en").read_bytes() * 50)
    (tmp_path / "cut.gz").write_bytes(data[: len(data) // 2])
    row = classify(tmp_path / "cut.gz")
    assert row.kind is Kind.UNREADABLE and "gzip" in row.note


class _Payload:
    def __init__(self, target: Path):
        self.target = target

    def __reduce__(self):
        return (os.mkdir, (str(self.target),))


def test_a_pickle_that_would_run_code_is_not_run(tmp_path):
    # the payload works: the plain unpickler runs it
    pickle.loads(pickle.dumps(_Payload(tmp_path / "proof")))
    assert (tmp_path / "proof").is_dir()
    for protocol in (0, 2):
        target = tmp_path / f"pwned{protocol}"
        (tmp_path / f"evil{protocol}").write_bytes(pickle.dumps(_Payload(target), protocol))
        row = classify(tmp_path / f"evil{protocol}")
        assert row.kind in (Kind.PICKLE_OTHER, Kind.UNREADABLE), row
        assert "mkdir" in row.note
        assert not target.exists()


def test_hdf5_links_are_never_followed(tmp_path):
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f["phrases"] = np.arange(3)
    with h5py.File(tmp_path / "c.h5", "w") as f:
        f["indices"] = np.arange(3)
        f["phrases"] = h5py.ExternalLink("other.h5", "/phrases")
    row = classify(tmp_path / "c.h5")
    assert row.kind is Kind.UNREADABLE and "external link" in row.note, row


# ----------------------------------------------------------------------------------------------
# bounds
# ----------------------------------------------------------------------------------------------


def test_a_50_mb_text_in_bounded_memory_with_its_exact_count(tmp_path):
    path = tmp_path / "big"
    line = b"the small red cat sits on the mat .\n"
    with open(path, "wb") as f:
        block = line * 20_000
        while f.tell() < 50 << 20:
            f.write(block)
        f.write(b"a last line without newline")
    with open(path, "rb") as f:  # counted here, independently
        n = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 22), b"")) + 1
    row, held = peak(lambda: classify(path))
    assert row.kind is Kind.TEXT and row.facts.lines == n and row.facts.complete
    assert held < 4 << 20, held


def test_a_model_is_read_by_its_headers_only(tmp_path):
    big = tmp_path / "m"
    np.savez(big, W_0_enc_approx_embdr=np.zeros((4096, 4096), np.float32))  # 64 MiB
    row, held = peak(lambda: classify(Path(str(big) + ".npz")))
    assert row.kind is Kind.MODEL and row.facts.shapes == {"W_0_enc_approx_embdr": (4096, 4096)}
    assert held < 1 << 20, held


def _bomb(path: Path, piece: bytes, copies: int) -> int:
    member = gzip.compress(piece, 9)
    with open(path, "wb") as f:
        for _ in range(copies):  # gzip members one after another: one stream, cheap to build
            f.write(member)
    return len(piece) * copies


def test_a_gzip_bomb_is_not_decompressed_past_the_bound(tmp_path, monkeypatch):
    given = []
    real = inventory._inflate

    def counting(*args):
        for piece in real(*args):
            given.append(len(piece))
            yield piece

    monkeypatch.setattr(inventory, "_inflate", counting)
    text = tmp_path / "yes.gz"
    whole = _bomb(text, b"yes\n" * (1 << 18), 1024)  # 1 GiB of "yes\n"
    bound = 64 << 20
    row, held = peak(lambda: classify(text, Limits(decompressed_bytes=bound)))
    assert row.kind is Kind.TEXT and row.compression == "gzip"
    assert not row.facts.complete and "bound" in row.note
    assert row.facts.lines == row.facts.bytes_counted // 4 < whole // 4
    assert sum(given) <= bound and held < 4 << 20, (sum(given), held)
    given.clear()
    zeros = tmp_path / "zeros.gz"
    _bomb(zeros, bytes(1 << 20), 1024)  # 1 GiB of NUL bytes
    row, held = peak(lambda: classify(zeros))
    assert (row.kind, row.compression) == (Kind.BINARY, "gzip")
    assert sum(given) <= Limits().prefix_bytes + inventory.CHUNK and held < 4 << 20
    # the default bound is the parse budget
    assert Limits().decompressed_bytes is None and budget.budget_bytes() == 256 << 20


def test_classify_imports_no_torch(legacy_root):
    code = (
        "import sys; from groundhog_port.tasks.archive.inventory import classify\n"
        f"for p in {[str(p) for p in recorded_files(legacy_root)]!r}: classify(p)\n"
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


# ----------------------------------------------------------------------------------------------
# pairing
# ----------------------------------------------------------------------------------------------
def test_renamed_states_and_models_pair_by_content(legacy_root, tmp_path):
    files = {
        "config.pkl": "search/search_state.pkl",
        "other.pkl": "search_variant/search_variant_state.pkl",
        "a.npz": "search_variant/search_variant_model.npz",
        "b.npz": "search/search_model.npz",
    }
    for name, src in files.items():
        shutil.copyfile(legacy_root / src, tmp_path / name)
    rows = {name: classify(tmp_path / name) for name in files}
    states, models = [rows["config.pkl"], rows["other.pkl"]], [rows["a.npz"], rows["b.npz"]]
    got = {p.model.name: p.state.name for p in pair_models(states, models)}
    assert got == {"a.npz": "other.pkl", "b.npz": "config.pkl"}


def test_an_encdec_model_does_not_fit_a_search_state(legacy_root):
    state = classify(legacy_root / "search" / "search_state.pkl").facts
    encdec = classify(legacy_root / "encdec" / "encdec_model.npz").facts
    with np.load(legacy_root / "encdec" / "encdec_model.npz") as z:
        names = set(z.files)
    why = model_fits_state(state, encdec)
    assert why is not None and why.split()[0] in names | {"A_dec_transition_0"}, why
    assert (
        model_fits_state(
            dict(state.stored), classify(legacy_root / "search" / "search_model.npz").facts
        )
        is None
    )
    pairing = pair_models(
        [classify(legacy_root / "search" / "search_state.pkl")],
        [classify(legacy_root / "encdec" / "encdec_model.npz")],
    )[0]
    assert (
        pairing.state is None
        and pairing.why.startswith("fits no state")
        and "search_state" in pairing.why
    )


def test_an_old_vintage_model_fits_by_its_stacked_shapes(legacy_root, tmp_path):
    with np.load(legacy_root / "search" / "search_model.npz") as z:
        arrays = {k: z[k] for k in z.files}
    merged = arrays.pop("W_0_dec_dec_inputter_0")  # (2 dim, dim): forward rows, then backward
    half = merged.shape[0] // 2
    arrays["W_0_dec_dec_inputter_0"], arrays["W_0_dec_back_dec_inputter_0"] = (
        merged[:half],
        merged[half:],
    )
    np.savez(tmp_path / "old.npz", **arrays)
    row = classify(tmp_path / "old.npz")
    assert row.kind is Kind.MODEL and row.facts.old_vintage
    state = classify(legacy_root / "search" / "search_state.pkl").facts
    assert model_fits_state(state, row.facts) is None


def test_identical_shapes_tie_broken_by_prefix_and_snapshots_newest_first(legacy_root, tmp_path):
    with open(legacy_root / "search" / "search_state.pkl", "rb") as f:
        stored = pickle.load(f, encoding="utf-8")
    shutil.copyfile(legacy_root / "search" / "search_state.pkl", tmp_path / "search_state.pkl")
    stored["prefix"] = "/somewhere/else/search_b_"
    (tmp_path / "settings.pkl").write_bytes(pickle.dumps(stored, 2))
    model = legacy_root / "search" / "search_model.npz"
    names = ["search_model2.npz", "search_b_model3.npz", "model.npz", "search_model.npz"]
    names += ["search_model10.npz"]
    for name in names:
        shutil.copyfile(model, tmp_path / name)
    states = [classify(tmp_path / "search_state.pkl"), classify(tmp_path / "settings.pkl")]
    pairings = pair_models(states, [classify(tmp_path / n) for n in names])
    got = [(p.model.name, p.state.name if p.state else None) for p in pairings]
    assert got == [
        ("search_model.npz", "search_state.pkl"),
        ("search_model10.npz", "search_state.pkl"),
        ("search_model2.npz", "search_state.pkl"),
        ("search_b_model3.npz", "settings.pkl"),
        ("model.npz", None),
    ]
    assert len(pairings[-1].fits) == 2 and "names do not tell" in pairings[-1].why
    assert [p.snapshot for p in pairings] == [None, 10, 2, 3, None]


def test_vocabulary_share_tells_source_from_target(legacy_root):
    with open(legacy_root / "data" / "vocab.en.pkl", "rb") as f:
        en = pickle.load(f, encoding="utf-8")
    with open(legacy_root / "data" / "vocab.fr.pkl", "rb") as f:
        fr = pickle.load(f, encoding="utf-8")
    lines = (legacy_root / "data" / "test.en").read_text("utf-8").splitlines()
    tokens = [t for line in lines for t in line.split()]
    assert vocabulary_share(lines, en) == pytest.approx(sum(t in en for t in tokens) / len(tokens))
    assert vocabulary_share(lines, en) > 0.8 > vocabulary_share(lines, fr)
    assert vocabulary_share([], en) == 0.0


def test_only_a_target_language_text_is_a_candidate_output(legacy_root, tmp_path):
    """A text of any name beside a state is a candidate output only when most of its words
    are in the target vocabulary (issue 50 item 3): the recorded test set's source side is a
    source-language text, a README holding the sample.py command is in neither vocabulary,
    sample.py's output and a target-language text alone are candidates, the reference
    beside its source is not."""
    case = legacy_root / "search"

    def vocab(name):
        with open(case / name, "rb") as f:
            return pickle.load(f, encoding="utf-8")

    exp = SimpleNamespace(
        state={}, src_word2idx=vocab("vocab.en.pkl"), trg_word2idx=vocab("vocab.fr.pkl")
    )
    # the reference beside its source is no candidate; alone, a target-language text is
    assert language_of(exp, case / "test.fr") == "the reference of test.en beside it"
    alone = tmp_path / "newstest.fr"
    alone.write_bytes((case / "test.fr").read_bytes())
    assert language_of(exp, alone) is None
    assert language_of(exp, case / "trans_beam5.txt") is None
    assert language_of(exp, case / "test.en").startswith("a source-language text")
    readme = tmp_path / "README.txt"
    readme.write_text(
        "translated with\n  THEANO_FLAGS=device=cpu python sample.py --beam-search "
        "--beam-size 10 --state phrase_state.pkl --source ../data/test.en --trans output "
        "phrase_model.npz\n",
        encoding="utf-8",
    )
    assert language_of(exp, readme).startswith("a text in neither vocabulary")


def test_a_model_of_other_sizes_is_refused_on_a_shape(legacy_root):
    # the phrase model holds the same names as the search encoder's, of other sizes
    with np.load(legacy_root / "phrase" / "phrase_model.npz") as z:
        phrase = {k: z[k].shape for k in z.files}
    with np.load(legacy_root / "search" / "search_model.npz") as z:
        search = {k: z[k].shape for k in z.files}
    differing = {k for k in phrase.keys() & search.keys() if phrase[k] != search[k]}
    assert differing
    state = classify(legacy_root / "search" / "search_state.pkl").facts
    why = model_fits_state(state, classify(legacy_root / "phrase" / "phrase_model.npz").facts)
    name = why.split()[0]
    assert name in differing and f"is {phrase[name]}, the state says {search[name]}" in why, why
