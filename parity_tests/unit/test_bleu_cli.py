"""Every option of ``groundhog-port bleu`` against sacrebleu's own command line (issue 44,
item 2).

The port calls sacrebleu's Python API; what a user quotes is what ``sacrebleu REF -i HYP``
prints.  Each case runs both on the same files -- a corpus built from the shared ``search``
recording with mixed casing, Moses-escaped entities, empty lines and two references -- and
asks for the same figures: BLEU and chrF to sacrebleu's printed precision (``-w 4``) and
their signatures exactly.  ``--unescape`` has no sacrebleu flag: the CLI is given files
unescaped by Moses' own ``deescape-special-chars.perl`` rules, written here independently
of the port (:func:`moses_deescape`).  The port's ``--lowercase`` is the CLI's ``-lc`` (BLEU)
and ``--chrf-lowercase`` together.  ``--multi-bleu`` is checked against what
``multi-bleu.perl`` printed (``test_multi_bleu_reference.py``).  The table in
``docs/archives.md`` ("BLEU") maps each flag to its case here.
"""

import json
import re
import shutil
import subprocess
import sys

import pytest

from parity_tests.support.inprocess import run_cli

#: Moses' scripts/tokenizer/deescape-special-chars.perl, in its order (&amp; last)
DEESCAPE = (
    ("&bar;", "|"), ("&#124;", "|"), ("&lt;", "<"), ("&gt;", ">"), ("&bra;", "["),
    ("&ket;", "]"), ("&quot;", '"'), ("&apos;", "'"), ("&#91;", "["), ("&#93;", "]"),
    ("&amp;", "&"),
)  # fmt: skip
WIDTH = 4

CASES = {
    "default (13a)": [],
    "tokenize none": ["--tokenize", "none"],
    "tokenize intl": ["--tokenize", "intl"],
    "tokenize char": ["--tokenize", "char"],
    "tokenize zh": ["--tokenize", "zh"],
    "lowercase": ["--lowercase"],
    "unescape": ["--unescape"],
    "two references": ["two-refs"],
    "lowercase, unescape, two references, none": [
        "--lowercase",
        "--unescape",
        "two-refs",
        "--tokenize",
        "none",
    ],  # fmt: skip
}


def moses_deescape(line):
    for esc, char in DEESCAPE:
        line = line.replace(esc, char)
    return line


@pytest.fixture(scope="module")
def corpus(legacy_root, tmp_path_factory):
    """``hyp``, ``ref``, ``ref2`` and their unescaped copies: the recorded beam-10 output and
    test set, every 5th hypothesis line upper-cased (so that case matters), lines 7 and 8
    empty (in the hypothesis; line 8 in the references too), an escaped
    ``&amp; &lt; &quot; &#124;`` line, and a second reference (the recorded beam-5 output)."""
    d = tmp_path_factory.mktemp("bleu_cli")
    case = legacy_root / "search"
    hyp = case.joinpath("trans_beam10.txt").read_text(encoding="utf-8").splitlines()
    ref = case.joinpath("test.fr").read_text(encoding="utf-8").splitlines()
    ref2 = case.joinpath("trans_beam5.txt").read_text(encoding="utf-8").splitlines()
    for i in range(0, len(hyp), 5):
        hyp[i] = hyp[i].upper()
    for lines in (hyp, ref, ref2):
        lines[8] = ""
        lines[9] = "le chat &amp; le chien &lt; &quot; la &#124; maison &apos;"
    hyp[7] = ""
    files = {}
    for name, lines in (("hyp", hyp), ("ref", ref), ("ref2", ref2)):
        files[name] = d / f"{name}.txt"
        files[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
        files[name + "_u"] = d / f"{name}.unescaped.txt"
        files[name + "_u"].write_text(
            "\n".join(map(moses_deescape, lines)) + "\n", encoding="utf-8"
        )
    assert any("&apos;" in ln for ln in ref)  # the recorded French references are escaped
    return files


def _sacrebleu_cli(hyp, refs, tokenize, lowercase):
    exe = shutil.which("sacrebleu") or [sys.executable, "-m", "sacrebleu"]
    argv = [exe] if isinstance(exe, str) else exe
    argv += [*map(str, refs), "-i", str(hyp), "-m", "bleu", "chrf", "-w", str(WIDTH)]
    # the port's --lowercase is both metrics' lowercase: the CLI's -lc is BLEU's alone
    argv += ["-tok", tokenize] + (["-lc", "--chrf-lowercase"] if lowercase else [])
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return {m["name"].rstrip("0123456789"): m for m in json.loads(r.stdout)}


@pytest.mark.parametrize("case", list(CASES))
def test_bleu_flag_equals_the_sacrebleu_cli(corpus, case):
    """The port's BLEU and chrF (score and signature) for these flags are the CLI's."""
    flags = list(CASES[case])
    two = "two-refs" in flags
    flags = [f for f in flags if f != "two-refs"]
    unescape = "--unescape" in flags
    tokenize = flags[flags.index("--tokenize") + 1] if "--tokenize" in flags else "13a"
    lowercase = "--lowercase" in flags
    refs = [corpus["ref"]] + ([corpus["ref2"]] if two else [])
    argv = ["bleu", "--hyp", corpus["hyp"], *sum((["--ref", r] for r in refs), []), *flags]
    r = run_cli(*argv, "--json")
    assert r.returncode == 0, r.stderr
    port = json.loads(r.stdout)
    u = "_u" if unescape else ""
    cli = _sacrebleu_cli(
        corpus["hyp" + u], [corpus[("ref" if i == 0 else "ref2") + u] for i in range(len(refs))],
        tokenize, lowercase,
    )  # fmt: skip
    for metric in ("bleu", "chrf"):
        theirs = cli["BLEU" if metric == "bleu" else "chrF"]
        mine = port[metric]
        assert round(mine["score"], WIDTH) == pytest.approx(theirs["score"], abs=0), (metric, case)
        assert mine["signature"] == theirs["signature"], (metric, case)


def test_cases_differ_so_each_flag_is_seen(corpus):
    """The corpus makes every flag change a figure (else a dropped flag could pass)."""
    seen = {}
    for case, flags in CASES.items():
        argv = ["bleu", "--hyp", corpus["hyp"], "--ref", corpus["ref"]]
        argv += ["--ref", corpus["ref2"]] if "two-refs" in flags else []
        r = run_cli(*argv, *[f for f in flags if f != "two-refs"], "--json")
        p = json.loads(r.stdout)
        seen[case] = (round(p["bleu"]["score"], 6), round(p["chrf"]["score"], 6))
    assert len(set(seen.values())) == len(seen), seen
    assert not re.search(r"&(apos|amp|lt|quot);", corpus["hyp_u"].read_text(encoding="utf-8"))
