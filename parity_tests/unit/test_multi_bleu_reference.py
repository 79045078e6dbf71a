"""``bleu --multi-bleu`` against what Moses' multi-bleu.perl printed, on 54 corpora.

``../shared/reference_outputs/multi_bleu/NNN/`` holds ``hyp.txt``, the reference file(s)
(the stem ``ref``, or ``ref0``, ``ref1``, ...), ``args.txt`` (the script's arguments),
``stdout.txt`` (exactly what it printed) and ``exit_code.txt``.  The corpora include
several references, ``-lc``, empty lines, tabs, no final newline, clipped counts, the
recorded ``trans_beam{1,10}.txt`` of the shared cases and hypothesis files with more or
fewer lines than the references (where the port prints the script's line and warns).
"""

import json
import os
from pathlib import Path

import pytest

from groundhog_port.cli import main as cli
from parity_tests.support.cases import REPO

ROOT = Path(
    os.environ.get(
        "GROUNDHOG_MULTI_BLEU_OUTPUTS", REPO.parent / "shared" / "reference_outputs" / "multi_bleu"
    )
)


def reference_cases():
    index = ROOT / "index.json"
    if not index.is_file():
        return [
            pytest.param(
                None,
                marks=pytest.mark.skip(
                    reason=f"multi-bleu.perl reference outputs not found at {ROOT} "
                    "(set GROUNDHOG_MULTI_BLEU_OUTPUTS)"
                ),
            )
        ]
    return [pytest.param(c["case"], id=c["case"]) for c in json.loads(index.read_text())]


def perl_arguments(case_dir):
    """``bleu`` arguments for multi-bleu.perl's ``args.txt``: ``[-lc] STEM``, where the script
    reads STEM0, STEM1, ... while they exist, then STEM itself if it exists."""
    args = (case_dir / "args.txt").read_text().split()
    out = []
    if args[0] == "-lc":
        out.append("--lowercase")
        args = args[1:]
    stem = args[0]
    refs = []
    while (case_dir / f"{stem}{len(refs)}").exists():
        refs.append(f"{stem}{len(refs)}")
    if (case_dir / stem).exists():
        refs.append(stem)
    for r in refs:
        out += ["--ref", r]
    return out, refs


@pytest.mark.parametrize("case", reference_cases())
def test_multi_bleu_prints_what_the_perl_script_printed(case, monkeypatch, capsys, caplog):
    d = ROOT / case
    monkeypatch.chdir(d)
    args, refs = perl_arguments(d)
    rc = cli.main(["bleu", "--multi-bleu", "--hyp", "hyp.txt", *args])
    out = capsys.readouterr().out
    assert out == (d / "stdout.txt").read_text()
    assert rc == int((d / "exit_code.txt").read_text())
    # where the line counts differ the line is printed with a warning naming both counts
    hyp_lines = (d / "hyp.txt").read_bytes().count(b"\n")
    for r in refs:
        ref_lines = (d / r).read_bytes().count(b"\n")
        if ref_lines != hyp_lines:
            assert (
                f"{r}: {ref_lines} lines, but the hypothesis file hyp.txt has {hyp_lines}"
                in caplog.text
            )
