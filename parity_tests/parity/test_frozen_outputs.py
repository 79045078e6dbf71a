"""The frozen outputs (issue 52 step 0): today's n-best lists, samples, scores, parity rows, ONNX
graphs and driver outputs and one training update, bit for bit (``tools/freeze_outputs.py``),
recomputed at the batch sizes and thread counts each section declares.  A change
that moves the literal and batched searches together passes the comparisons between them but
not this; re-record only for a change meant to alter outputs, and say why in the commit."""

from pathlib import Path

import pytest

from parity_tests.support.tools import load_tool

REPO = Path(__file__).resolve().parents[2]


freeze = load_tool("freeze_outputs")
FROZEN = freeze.json.loads(freeze.FROZEN.read_text(encoding="utf-8"))


def test_every_case_is_frozen():
    """Each case found today is in the record (a case added to ../shared is frozen too)."""
    missing = [
        f"{name} {freeze.case_name(c)}"
        for name, sec in freeze.SECTIONS.items()
        for c in sec.cases()
        if freeze.case_name(c) not in FROZEN.get(name, {})
    ]
    if missing and not (REPO.parent / "shared").is_dir():
        pytest.skip("the shared recordings are not beside the checkout")
    assert missing == [], f"record them: python tools/freeze_outputs.py record ({missing})"


RUNS = [
    (name, threads, batch)
    for name, sec in sorted(freeze.SECTIONS.items())
    if sec.checked_by == "test_frozen_outputs"
    for threads in sec.threads
    for batch in sec.batches
]


@pytest.mark.parametrize(("section", "threads", "batch"), RUNS)
def test_outputs_are_the_frozen_ones(section, threads, batch):
    """Each section of every case at each batch size and thread count it declares (batch 1:
    the literal path; 32: the batched one): equal to the record bit for bit."""
    import torch

    sec = freeze.SECTIONS[section]
    assert section in FROZEN, f"record it: python tools/freeze_outputs.py record ({section})"
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got = {
            freeze.case_name(c): sec.make(c, batch)
            for c in sec.cases()
            if freeze.case_name(c) in FROZEN[section]
        }
    finally:
        torch.set_num_threads(before)
    assert got, "no case found"
    found = freeze.differences(
        {section: {k: v for k, v in FROZEN[section].items() if k in got}},
        section,
        got,
        f"{threads} threads, batch {batch}",
    )
    assert found == [], "\n".join(found[:10])
