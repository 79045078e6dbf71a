"""BLEU / chrF scoring (sacrebleu), our multi-bleu.perl re-implementation, line comparison.

The multi-bleu expectations are computed by hand in the comments (n-gram by n-gram), not
by running another implementation.
"""

import argparse
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundhog_port.cli.commands import bleu as bleu_cmd
from groundhog_port.errors import EXIT_INPUT, EXIT_OK, LegacyInputError
from groundhog_port.tasks.rescore import (
    compare_files,
    compare_lines,
    multi_bleu,
    multi_bleu_files,
    perl_tokens,
    read_lines,
    read_parallel,
    sacre_scores,
    unescape_moses,
)


def write(path, text):
    path.write_bytes(text.encode("utf-8"))
    return path


# ---------------------------------------------------------------------------------------
# multi-bleu.perl, by hand
# ---------------------------------------------------------------------------------------
def test_multi_bleu_two_sentences_by_hand():
    # S1 hyp "the cat sat on the mat" (6) / ref "the cat sat on a mat" (6)
    #   1-grams: the x2 (ref has 1 -> clipped 1), cat, sat, on, mat  -> 5 of 6
    #   2-grams: the cat, cat sat, sat on | on the, the mat (not in ref) -> 3 of 5
    #   3-grams: the cat sat, cat sat on | sat on the, on the mat       -> 2 of 4
    #   4-grams: the cat sat on | cat sat on the, sat on the mat        -> 1 of 3
    # S2 hyp "a dog barked" (3) / ref "the dog barked loudly" (4)
    #   1-grams: dog, barked | a -> 2 of 3; 2-grams: dog barked | a dog -> 1 of 2
    #   3-grams: a dog barked -> 0 of 1; 4-grams: none -> 0 of 0
    # corpus: p1 = 7/9, p2 = 4/7, p3 = 2/5, p4 = 1/3; c = 9, r = 6 + 4 = 10
    # BP = exp(1 - 10/9) = exp(-1/9) = 0.89484
    # BLEU = BP * (7/9 * 4/7 * 2/5 * 1/3) ** (1/4) = 0.89484 * (8/135) ** 0.25 = 0.44150
    r = multi_bleu(
        ["the cat sat on the mat", "a dog barked"],
        [["the cat sat on a mat", "the dog barked loudly"]],
    )
    assert r.correct == [7, 4, 2, 1]
    assert r.total == [9, 7, 5, 3]
    assert r.hyp_len == 9 and r.ref_len == 10
    assert r.bp == pytest.approx(math.exp(-1 / 9), rel=1e-15)
    assert r.bleu == pytest.approx(math.exp(-1 / 9) * (8 / 135) ** 0.25, rel=1e-12)
    assert (
        r.format()
        == "BLEU = 44.15, 77.8/57.1/40.0/33.3 (BP=0.895, ratio=0.900, hyp_len=9, ref_len=10)"
    )
    assert str(r) == r.format()


def test_multi_bleu_multiple_references_clipping_and_tie_to_shorter():
    # hyp "the the the cat" (4); ref A "the cat sat" (3, |4-3| = 1),
    # ref B "the the cat sat on" (5, |4-5| = 1): a tie -> the shorter, r = 3; c = 4 > r: BP = 1
    # 1-grams: "the" x3 clipped by max(ref A 1, ref B 2) = 2, "cat" 1 -> 3 of 4
    # 2-grams: "the the" x2 clipped by max(0, 1) = 1, "the cat" 1 -> 2 of 3
    # 3-grams: "the the the" 0, "the the cat" (in B) 1 -> 1 of 2
    # 4-grams: "the the the cat" -> 0 of 1  => a zero precision: BLEU = 0 (multi-bleu's log 0)
    r = multi_bleu(["the the the cat"], [["the cat sat"], ["the the cat sat on"]])
    assert (r.correct, r.total, r.ref_len) == ([3, 2, 1, 0], [4, 3, 2, 1], 3)
    assert r.bleu == 0.0
    assert (
        r.format()
        == "BLEU = 0.00, 75.0/66.7/50.0/0.0 (BP=1.000, ratio=1.333, hyp_len=4, ref_len=3)"
    )
    # the order of the reference files does not matter
    assert (
        multi_bleu(["the the the cat"], [["the the cat sat on"], ["the cat sat"]]).format()
        == r.format()
    )


def test_multi_bleu_closest_reference_length():
    # hyp "a b c" (3); refs of length 4 (diff 1) and 3 (diff 0) -> r = 3, BP = 1
    # p1 = 3/3, p2 = 2/2, p3 = 1/1 (ref 2 is identical); 4-grams: total 0 -> p4 = 0 -> BLEU 0
    r = multi_bleu(["a b c"], [["a b c d"], ["a b c"]])
    assert r.ref_len == 3 and r.total == [3, 2, 1, 0]
    assert (
        r.format()
        == "BLEU = 0.00, 100.0/100.0/100.0/0.0 (BP=1.000, ratio=1.000, hyp_len=3, ref_len=3)"
    )


def test_multi_bleu_perfect_and_brevity():
    # identical 5-token sentence: every p_n = 1, BLEU = 1
    r = multi_bleu(["a b c d e"], [["a b c d e"]])
    assert (
        r.format()
        == "BLEU = 100.00, 100.0/100.0/100.0/100.0 (BP=1.000, ratio=1.000, hyp_len=5, ref_len=5)"
    )
    # hyp = first 4 of 8 ref tokens: p_n = 1 for n = 1..4 (4,3,2,1 n-grams all match)
    # BP = exp(1 - 8/4) = exp(-1) = 0.36788 -> BLEU = 36.79
    r = multi_bleu(["a b c d"], [["a b c d e f g h"]])
    assert r.bp == pytest.approx(math.exp(-1), rel=1e-15)
    assert (
        r.format()
        == "BLEU = 36.79, 100.0/100.0/100.0/100.0 (BP=0.368, ratio=0.500, hyp_len=4, ref_len=8)"
    )


def test_multi_bleu_lowercase_is_ascii_only():
    # Perl's lc on the byte strings multi-bleu reads changes A-Z only: "É" stays "É"
    assert perl_tokens("The CAT É", lowercase=True) == ["the", "cat", "É"]
    # hyp "The CAT É" vs ref "the cat é": with -lc 1-grams the, cat match, É != é -> 2 of 3,
    # 2-grams "the cat" -> 1 of 2, 3-grams 0 of 1 -> BLEU 0
    r = multi_bleu(["The CAT É"], [["the cat é"]], lowercase=True)
    assert (r.correct, r.total) == ([2, 1, 0, 0], [3, 2, 1, 0])
    assert multi_bleu(["The CAT É"], [["the cat é"]]).correct == [0, 0, 0, 0]


def test_multi_bleu_whitespace_is_ascii_whitespace():
    # Perl's split on bytes: tabs/spaces/\f/\v separate tokens, a no-break space does not
    assert perl_tokens("  a\tb\x0bc\x0cd  e ") == ["a", "b", "c", "d", "e"]
    assert perl_tokens("x\u00a0y z") == ["x\u00a0y", "z"]


def test_multi_bleu_empty_lines_and_degenerate_corpora():
    # an empty hypothesis line adds 0 to c but its closest reference length (2) to r:
    # hyp ["", "a b"], refs ["x y", "a b"]: c = 2, r = 4; p1 = 2/2, p2 = 1/1, p3 = p4 = 0 (no n-grams)
    r = multi_bleu(["", "a b"], [["x y", "a b"]])
    assert (r.hyp_len, r.ref_len) == (2, 4)
    assert (
        r.format()
        == "BLEU = 0.00, 100.0/100.0/0.0/0.0 (BP=0.368, ratio=0.500, hyp_len=2, ref_len=4)"
    )
    # all references empty: multi-bleu prints its zero line
    assert (
        multi_bleu(["a"], [[""]]).format()
        == "BLEU = 0, 0/0/0/0 (BP=0, ratio=0, hyp_len=0, ref_len=0)"
    )
    # no hypothesis tokens at all (multi-bleu.perl dies dividing by zero): reported as 0
    r = multi_bleu([""], [["a b"]])
    assert r.bleu == 0.0 and "division by zero" in r.note


def test_multi_bleu_files_perl_chop_and_unescape(tmp_path):
    ref = write(tmp_path / "ref", "c&apos; est un chat\nle chien\n")
    # last line without newline: Perl's chop drops its last character ("chien" -> "chie")
    hyp = write(tmp_path / "hyp", "c&apos; est un chat\nle chien")
    r = multi_bleu_files(hyp, [ref])
    # hyp tokens: 4 + 2 = 6; 1-grams: 4 + 1 ("le"; "chie" != "chien") = 5 of 6
    assert (r.correct[0], r.total[0]) == (5, 6)
    hyp.write_bytes(b"c&apos; est un chat\nle chien\n")
    assert multi_bleu_files(hyp, [ref]).correct[0] == 6
    # unescape turns "c&apos;" into "c'" on both sides: same counts
    assert multi_bleu_files(hyp, [ref], unescape=True).correct[0] == 6


def test_multi_bleu_equals_sacrebleu_on_the_archived_translations(legacy_root):
    # single reference, all precisions > 0: multi-bleu and sacrebleu (tokenize none) agree
    case = legacy_root / "search"
    r = multi_bleu_files(case / "trans_beam10.txt", [case / "test.fr"])
    hyps, refs = read_parallel(case / "trans_beam10.txt", [case / "test.fr"])
    s = sacre_scores(hyps, refs, tokenize="none", chrf=False)["bleu"]
    assert r.score == pytest.approx(s.score, rel=1e-12)
    assert (r.hyp_len, r.ref_len) == (s.details["sys_len"], s.details["ref_len"])
    assert r.format().startswith("BLEU = %.2f, " % s.score)


WORDS = st.sampled_from(["a", "b", "c", "d", "the", "cat"])
SENT = st.lists(WORDS, min_size=1, max_size=12).map(" ".join)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 5).flatmap(
        lambda n: st.tuples(
            st.lists(SENT, min_size=n, max_size=n),
            st.lists(st.lists(SENT, min_size=n, max_size=n), min_size=1, max_size=3),
        )
    )
)
def test_multi_bleu_matches_unsmoothed_sacrebleu(data):
    # Same definition (clipping by max ref count, closest ref length with ties to the shorter,
    # BP, geometric mean, 0 if a precision is 0) -> same number as sacrebleu without smoothing.
    from sacrebleu.metrics import BLEU

    hyps, refs = data
    ours = multi_bleu(hyps, refs)
    theirs = BLEU(tokenize="none", smooth_method="none").corpus_score(hyps, refs)
    assert ours.score == pytest.approx(theirs.score, rel=1e-9, abs=1e-9)
    assert (ours.hyp_len, ours.ref_len) == (theirs.sys_len, theirs.ref_len)


# ---------------------------------------------------------------------------------------
# reading, escapes, sacrebleu
# ---------------------------------------------------------------------------------------
def test_unescape_moses():
    assert (
        unescape_moses("c&apos; est &quot;x&quot; &lt;a&gt; &#124; &#91;b&#93;")
        == 'c\' est "x" <a> | [b]'
    )
    # &amp; last: an escaped escape stays an escape
    assert unescape_moses("&amp;lt; &amp;") == "&lt; &"
    assert unescape_moses("plain") == "plain"


def test_read_lines_splits_on_newline_only(tmp_path):
    p = write(tmp_path / "f", "a\u2028b\r\nc\x1cd\n\ne\n")
    assert read_lines(p) == ["a\u2028b", "c\x1cd", "", "e"]
    assert read_lines(write(tmp_path / "g", "")) == []


def test_read_errors_are_legacy_input_errors(tmp_path):
    with pytest.raises(LegacyInputError, match="file not found"):
        read_lines(tmp_path / "missing")
    bad = tmp_path / "bad"
    bad.write_bytes(b"ok\n\xff\xfe\n")
    with pytest.raises(LegacyInputError, match="line 2: not valid UTF-8"):
        read_lines(bad)


def test_line_count_mismatch(tmp_path):
    hyp = write(tmp_path / "hyp", "a\nb\nc\n")
    ref = write(tmp_path / "ref", "a\nb\n")
    with pytest.raises(LegacyInputError) as err:
        read_parallel(hyp, [ref])
    assert str(err.value).startswith(
        f"{ref}: 2 reference lines but the hypothesis file {hyp} has 3 lines"
    )


def test_sacre_scores_signature_and_lowercase():
    out = sacre_scores(["The cat sat on the mat ."], [["the cat sat on the mat ."]])
    assert out["bleu"].signature.startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert out["chrf"].name.startswith("chrF")
    low = sacre_scores(["The cat sat on the mat ."], [["the cat sat on the mat ."]], lowercase=True)
    assert low["bleu"].score == pytest.approx(100.0)
    assert "case:lc" in low["bleu"].signature
    assert low["bleu"].score > out["bleu"].score


# ---------------------------------------------------------------------------------------
# the CLI command
# ---------------------------------------------------------------------------------------
def run_cmd(argv):
    parser = argparse.ArgumentParser()
    bleu_cmd.add_arguments(parser)
    return bleu_cmd.run(parser.parse_args(argv))


def test_cli_bleu_text_and_json(tmp_path, capsys):
    hyp = write(tmp_path / "hyp", "the cat sat on the mat\na dog barked\n")
    ref = write(tmp_path / "ref", "the cat sat on a mat\nthe dog barked loudly\n")
    assert run_cmd(["--hyp", str(hyp), "--ref", str(ref)]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith("BLEU = ") and "signature: nrefs:1|" in out and "chrF2 = " in out

    assert run_cmd(["--hyp", str(hyp), "--ref", str(ref), "--multi-bleu"]) == EXIT_OK
    assert capsys.readouterr().out == (
        "BLEU = 44.15, 77.8/57.1/40.0/33.3 (BP=0.895, ratio=0.900, hyp_len=9, ref_len=10)\n"
    )

    assert (
        run_cmd(
            [
                "--hyp",
                str(hyp),
                "--ref",
                str(ref),
                "--ref",
                str(ref),
                "--json",
                "--tokenize",
                "none",
            ]
        )
        == EXIT_OK
    )
    data = json.loads(capsys.readouterr().out)
    assert data["bleu"]["signature"].startswith("nrefs:2|case:mixed|eff:no|tok:none|")
    assert data["lines"] == 2 and "chrf" in data

    assert run_cmd(["--hyp", str(hyp), "--ref", str(ref), "--multi-bleu", "--json"]) == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert data["multi_bleu"]["score"] == pytest.approx(44.150346, abs=1e-6)


def test_cli_bleu_errors(tmp_path):
    hyp = write(tmp_path / "hyp", "a\nb\n")
    ref = write(tmp_path / "ref", "a\n")
    with pytest.raises(LegacyInputError):
        run_cmd(["--hyp", str(hyp), "--ref", str(ref)])
    with pytest.raises(LegacyInputError, match="does not apply to --multi-bleu"):
        run_cmd(["--hyp", str(hyp), "--ref", str(hyp), "--multi-bleu", "--tokenize", "13a"])


def test_cli_bleu_through_main(tmp_path, capsys):
    from groundhog_port.cli import main as cli

    hyp = write(tmp_path / "hyp", "a\nb\n")
    ref = write(tmp_path / "ref", "a\n")
    assert cli.main(["bleu", "--hyp", str(hyp), "--ref", str(ref)]) == EXIT_INPUT
    assert "reference lines but the hypothesis file" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------
# archived vs reproduced
# ---------------------------------------------------------------------------------------
def test_compare_lines():
    same = compare_lines(["a", "b"], ["a", "b"])
    assert same["all_identical"] and same["identical"] == 2 and same["percent_identical"] == 100.0
    assert same["first_differences"] == []

    d = compare_lines(["a", "b", "c", "d"], ["a", "x", "c"])
    assert (d["identical"], d["different"], d["missing"], d["extra"]) == (2, 1, 1, 0)
    assert d["percent_identical"] == 50.0 and not d["all_identical"]
    assert d["first_differences"] == [
        {"line": 2, "archived": "b", "reproduced": "x"},
        {"line": 4, "archived": "d", "reproduced": None},
    ]
    e = compare_lines(["a"], ["a", "z"])
    assert e["extra"] == 1 and e["first_differences"] == [
        {"line": 2, "archived": None, "reproduced": "z"}
    ]
    assert len(compare_lines(list("abcdef"), list("uvwxyz"), max_diffs=3)["first_differences"]) == 3
    assert compare_lines([], [])["all_identical"]


def test_compare_files_archived_run2(legacy_root):
    # the two archived sample.py runs of search are identical line for line
    case = legacy_root / "search"
    r = compare_files(case / "trans_beam10.txt", case / "trans_beam10_run2.txt")
    assert r["all_identical"] and r["identical"] == 40


def test_multi_bleu_unequal_line_counts_as_the_perl_script(tmp_path, capsys):
    # sentence 2 has only ref1: its length 2 is the closest; sentence 3 has no reference at
    # all: multi-bleu.perl's initial closest length 9999 is added (r = 1 + 2 + 9999)
    r = multi_bleu(["a", "b c", "d"], [["a"], ["a", "b c"]])
    assert (r.hyp_len, r.ref_len) == (4, 10002)
    assert (r.correct[0], r.total[0]) == (3, 4)
    # through the CLI: the line, exit 0; an empty hypothesis file is where the script dies
    hyp = write(tmp_path / "hyp", "a\n")
    ref = write(tmp_path / "ref", "a\nb\n")
    assert run_cmd(["--hyp", str(hyp), "--ref", str(ref), "--multi-bleu"]) == EXIT_OK
    assert capsys.readouterr().out.startswith(
        "BLEU = 0.00, 100.0/0.0/0.0/0.0 (BP=1.000, ratio=1.000, hyp_len=1, ref_len=1)"
    )
    write(hyp, "\n")
    with pytest.raises(LegacyInputError, match="multi-bleu.perl dies here"):
        run_cmd(["--hyp", str(hyp), "--ref", str(ref), "--multi-bleu"])
