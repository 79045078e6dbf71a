"""groundhog_port.legacy.vocab against GroundHog's recordings.

* ``parse_input`` on every test line reproduces trace.h5 ``/pairs/{i}/src_ids``,
  ``/pairs/{i}/trg_ids`` (score.py's parsing, incl. the n_sym_source quirk on the target
  side) and ``/repr/{i}/seq`` + attribute ``parsed_in`` (sample.py's parsing), every case;
* ``render_translation`` turns the hypothesis sample.py chose (``/beam/{label}/{i}``,
  attribute ``best``) into exactly the line of the matching ``trans_*.txt`` file.
"""

import pickle

import h5py
import numpy as np
import pytest

from groundhog_port.errors import LegacyInputError
from groundhog_port.legacy.vocab import (
    UnknownWordError,
    indices_to_words,
    load_idx2word,
    load_word2idx,
    parse_input,
    render_translation,
    split_words,
    target_idx2word,
)
from legacy_states import load_state
from parity_tests.support.cases import CASE_DIRS, CASE_IDS

#: trace.h5 /beam label -> sample.py output file
BEAM_FILES = {
    "1": "trans_beam1.txt",
    "5": "trans_beam5.txt",
    "10": "trans_beam10.txt",
    "10_normalize": "trans_beam10_normalize.txt",
    "5_ignore_unk": "trans_beam5_ignore_unk.txt",
}


def _case(case_dir):
    state = load_state(next(case_dir.glob("*state.pkl")))
    vocab = {lang: load_word2idx(case_dir / f"vocab.{lang}.pkl") for lang in ("en", "fr")}
    ivocab = {lang: load_idx2word(case_dir / f"ivocab.{lang}.pkl") for lang in ("en", "fr")}
    return state, vocab, ivocab


def _lines(path):
    # sample.py/score.py read with open(); every line is stripped before parsing
    return path.read_text(encoding="utf-8").split("\n")


# --- loading -----------------------------------------------------------------------------------


def test_load_vocabularies(legacy_root):
    data = legacy_root / "data"
    en, fr = load_word2idx(data / "vocab.en.pkl"), load_word2idx(data / "vocab.fr.pkl")
    ien, ifr = load_idx2word(data / "ivocab.en.pkl"), load_idx2word(data / "ivocab.fr.pkl")
    # V words incl. UNK and <s>/</s> (both 0): 198 + 3 keys, ids 0..199
    assert len(en) == 201 and sorted(set(en.values())) == list(range(200))
    assert len(fr) == 321 and sorted(set(fr.values())) == list(range(320))
    assert en["<s>"] == en["</s>"] == 0 and en["UNK"] == 1 and fr["UNK"] == 1
    assert sorted(ien) == list(range(200)) and sorted(ifr) == list(range(320))
    assert ien[0] == ifr[0] == "</s>" and ifr[1] == "UNK"
    for vocab, ivocab in ((en, ien), (fr, ifr)):
        assert all(type(w) is str and type(i) is int for w, i in vocab.items())
        assert all(ivocab[i] == w for w, i in vocab.items() if w not in ("<s>", "</s>"))


def test_accented_words(legacy_root):
    data = legacy_root / "data"
    fr, ifr = load_word2idx(data / "vocab.fr.pkl"), load_idx2word(data / "ivocab.fr.pkl")
    for word in ("écoles", "où", "forêt", "île", "réveillée"):
        assert word in fr, word
        assert ifr[fr[word]] == word
    words = list(fr) + list(ifr.values())
    assert not any("Ã" in w or "Â" in w for w in words)  # no latin-1 mojibake
    assert any(not w.isascii() for w in words)


@pytest.mark.parametrize(
    "loader, other, expect",
    [
        (load_word2idx, "ivocab.fr.pkl", "this is an id -> word vocabulary"),
        (load_idx2word, "vocab.fr.pkl", "this is a word -> id vocabulary"),
    ],
)
def test_wrong_direction(legacy_root, loader, other, expect):
    path = legacy_root / "data" / other
    with pytest.raises(LegacyInputError) as err:
        loader(path)
    assert str(err.value).startswith(f"{path}: {expect}")


@pytest.mark.parametrize(
    "obj, expect",
    [
        ([1, 2], "is a pickled dict"),
        ({}, "is empty"),
        ({"a": 1, "b": "c"}, "not a"),
        ({1.5: "x"}, "a dict key that is a float"),  # refused before unpickling (hash flooding)
    ],
)
def test_bad_vocab_contents(tmp_path, obj, expect):
    path = tmp_path / "v.pkl"
    path.write_bytes(pickle.dumps(obj, 2))
    for loader in (load_word2idx, load_idx2word):
        with pytest.raises(LegacyInputError, match=expect):
            loader(path)


def test_malicious_vocab_refused(tmp_path):
    marker = tmp_path / "PWNED"
    path = tmp_path / "v.pkl"
    path.write_bytes(f"(dp0\nS'a'\ncos\nsystem\n(S'touch {marker}'\ntRs.".encode())
    with pytest.raises(LegacyInputError, match="refused to unpickle os.system"):
        load_word2idx(path)
    assert not marker.exists()


# --- parse_input against the trace ------------------------------------------------------------


def _score_py_parse(state, word2idx, line, side):
    """score.py's ``parse_input`` call (score.py:62-64, --allow-unk): the UNK and end ids of
    ``side`` (``source`` or ``target``)."""
    unk_sym, null_sym = state[f"unk_sym_{side}"], state[f"null_sym_{side}"]
    return parse_input(state, word2idx, line, raise_unk=False, unk_sym=unk_sym, null_sym=null_sym)


@pytest.mark.parametrize("case_dir", CASE_DIRS, ids=CASE_IDS)
def test_parse_input_matches_trace(case_dir):
    state, vocab, ivocab = _case(case_dir)
    en, fr = _lines(case_dir / "test.en"), _lines(case_dir / "test.fr")
    with h5py.File(case_dir / "trace.h5", "r") as f:
        assert int(f.attrs["n_sym_source"]) == state["n_sym_source"]
        for i in range(40):
            pair = f[f"pairs/{i}"]
            src_line, trg_line = en[i].strip(), fr[i].strip()
            assert (pair.attrs["src_line"], pair.attrs["trg_line"]) == (src_line, trg_line)
            src, words = _score_py_parse(state, vocab["en"], src_line, "source")
            trg, _ = _score_py_parse(state, vocab["fr"], trg_line, "target")
            assert words == src_line.split()
            for got, name in ((src, "src_ids"), (trg, "trg_ids")):
                want = pair[name][()]
                assert got.dtype == want.dtype == np.int64 and np.array_equal(got, want), (i, name)
            # sample.py (sample.py:264): default unk/null = source ones, idx2word given
            seq, parsed_in = parse_input(state, vocab["en"], src_line, idx2word=ivocab["en"])
            assert np.array_equal(seq, f[f"repr/{i}/seq"][()]), i
            assert parsed_in == f[f"repr/{i}"].attrs["parsed_in"], i


def test_target_side_uses_n_sym_source(legacy_root):
    """QUIRK (encdec.py:1504, docs/recordings.md "Quirks"): target ids >= n_sym_source become UNK."""
    case_dir = CASE_DIRS[0]
    state, vocab, _ = _case(case_dir)
    high = sorted(w for w, i in vocab["fr"].items() if i >= state["n_sym_source"])
    low = sorted(w for w, i in vocab["fr"].items() if 2 <= i < state["n_sym_source"])
    assert len(high) == 119  # French ids 201..319
    seq, _ = parse_input(
        state,
        vocab["fr"],
        f"{low[0]} {high[0]} {high[-1]}",
        unk_sym=state["unk_sym_target"],
        null_sym=state["null_sym_target"],
    )
    assert seq.tolist() == [vocab["fr"][low[0]], 1, 1, 320]
    roomy = dict(state, n_sym_source=state["n_sym_target"])
    seq, _ = parse_input(roomy, vocab["fr"], high[0], unk_sym=1, null_sym=320)
    assert seq.tolist() == [vocab["fr"][high[0]], 320]


def test_parse_input_unknown_words_and_raise_unk(legacy_root):
    state, vocab, ivocab = _case(CASE_DIRS[0])
    seq, parsed = parse_input(state, vocab["en"], "the giraffe sleeps", idx2word=ivocab["en"])
    assert (
        seq[1] == 1 and seq[-1] == 200 and parsed.split()[1] == "UNK" and parsed.endswith(" <eos>")
    )
    with pytest.raises(UnknownWordError) as err:
        parse_input(state, vocab["en"], "the giraffe sleeps", raise_unk=True)
    assert "run with --allow-unk" in str(err.value)
    assert err.value.word == "giraffe" and err.value.position == 1 and "'giraffe'" in str(err.value)
    assert isinstance(err.value, LegacyInputError)
    # the literal word UNK also maps to unk_sym and is refused, as in the original
    with pytest.raises(UnknownWordError):
        parse_input(state, vocab["en"], "UNK", raise_unk=True)
    seq, words = parse_input(state, vocab["en"], "the cat", raise_unk=True)
    assert words == ["the", "cat"] and seq[-1] == 200


def test_parse_input_does_not_mutate_idx2word(legacy_root):
    state, vocab, ivocab = _case(CASE_DIRS[0])
    before = dict(ivocab["en"])
    _, parsed = parse_input(state, vocab["en"], "hello world", idx2word=ivocab["en"])
    assert parsed == "UNK UNK <eos>"
    assert ivocab["en"] == before and 200 not in ivocab["en"]


def test_parse_input_edge_cases(legacy_root):
    state, vocab, ivocab = _case(CASE_DIRS[0])
    seq, words = parse_input(state, vocab["en"], "   ")
    assert seq.tolist() == [200] and words == []
    # an empty idx2word is falsy in the original's `if idx2word:` -> the token list comes back
    _, words = parse_input(state, vocab["en"], "the cat", idx2word={})
    assert words == ["the", "cat"]
    with pytest.raises(LegacyInputError, match="n_sym_source"):
        parse_input(dict(state, n_sym_source=None), vocab["en"], "the")


def test_split_words_is_python2_split():
    # Python 2 split bytes on ASCII whitespace only; U+00A0 stays inside the word
    assert split_words("a\u00a0b\tc\r\nd  é") == ["a\u00a0b", "c", "d", "é"]


# --- ids -> text --------------------------------------------------------------------------------


def _hypotheses(group):
    flat, lengths = group["fin_trans_flat"][()], group["fin_trans_lengths"][()]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return [flat[s : s + n] for s, n in zip(starts, lengths)]


@pytest.mark.parametrize("case_dir", CASE_DIRS, ids=CASE_IDS)
def test_render_translation_matches_trans_files(case_dir):
    state, _, ivocab = _case(case_dir)
    i2w = target_idx2word(state, ivocab["fr"])
    checked = 0
    with h5py.File(case_dir / "trace.h5", "r") as f:
        for label, name in BEAM_FILES.items():
            lines = _lines(case_dir / name)
            assert lines[-1] == ""  # one "\n"-terminated line per translated sentence
            for i in range(40):
                group = f[f"beam/{label}/{i}"]
                if "best" not in group.attrs:  # sample.py crashed here (search_variant, line 36)
                    assert "error" in group.attrs and len(lines) - 1 == i
                    break
                hyps = _hypotheses(group)
                best = hyps[int(group.attrs["best"])]
                assert best[-1] == state["null_sym_target"]
                line = render_translation(i2w, best)
                assert line == lines[i] == group.attrs["best_sentence"], (label, i)
                checked += 1
                # every other hypothesis renders too (no unknown ids)
                assert all(isinstance(render_translation(i2w, h), str) for h in hyps)
            else:
                assert len(lines) - 1 == 40
    assert checked >= 5 * 35


def test_target_idx2word_and_indices_to_words(legacy_root):
    state, _, ivocab = _case(CASE_DIRS[0])
    before = dict(ivocab["fr"])
    i2w = target_idx2word(state, ivocab["fr"])
    assert ivocab["fr"] == before  # the original modified it in place (LM_model.py:224-225)
    assert i2w[320] == "<eol>" and i2w[1] == "UNK" and i2w[0] == "</s>"
    assert indices_to_words(i2w, [5, 0, 1, 320, 7]) == [i2w[5], "</s>", "UNK"]
    assert render_translation(i2w, [5, 0, 320]) == f"{i2w[5]} </s>"
    assert render_translation(i2w, [320]) == ""
    assert render_translation(i2w, np.array([7, 8], dtype=np.int64)) == f"{i2w[7]} {i2w[8]}"
    with pytest.raises(LegacyInputError, match="word id 999"):
        render_translation(i2w, [999, 320])
