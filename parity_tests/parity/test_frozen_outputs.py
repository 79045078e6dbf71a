"""The frozen outputs (issue 52 step 0): today's n-best lists, samples and scores with their costs
bit for bit (``tools/freeze_outputs.py``), recomputed at batch 1 and 32 and at 1 and 2 threads.  A change
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
        freeze.case_name(c) for c in freeze.cases() if freeze.case_name(c) not in FROZEN["search"]
    ]
    if missing and not (REPO.parent / "shared").is_dir():
        pytest.skip("the shared recordings are not beside the checkout")
    assert missing == [], f"record them: python tools/freeze_outputs.py record ({missing})"


@pytest.mark.parametrize("section", sorted(freeze.SECTIONS))
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("batch", [1, 32])
def test_outputs_are_the_frozen_ones(section, threads, batch):
    """Each section (the n-best lists, the samples) of every case, literal (batch 1) and
    batched, at 1 and 2 threads: equal to the record bit for bit."""
    import torch

    make = freeze.SECTIONS[section]
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got = {
            freeze.case_name(c): make(c, batch)
            for c in freeze.cases()
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
