"""One network behind one interface (issue 52): an edit of the network in ``model/`` reaches
every path that computes with it.

The edit doubles the attention energies in their one definition
(:func:`groundhog_port.model.attention.energies`, the piece both attention schedules are
built from).  Every path must then change its output: the literal search (batch 1) and the
batched one (batch 32), both sampling modes, score.py's modes and one training update.  A
path with its own copy of the attention would keep its output and fail here.
"""

import pytest
import torch

from groundhog_port.model import attention
from parity_tests.support.tools import load_tool

freeze = load_tool("freeze_outputs")
CASE = freeze.REPO / "fixtures" / "search"

#: (what, how it is computed): each a section of tools/freeze_outputs.py at a batch size
PATHS = [
    ("literal search", "search", 1),
    ("batched search", "search", 32),
    ("literal sampler", "samples", 1),
    ("batched sampler", "samples", 32),
    ("score.py's modes", "score", 1),
    ("one training update", "train", 1),
]


def _doubled(real):
    def energies(p, D):
        return 2 * real(p, D)

    return energies


@pytest.mark.parametrize(("what", "section", "batch"), PATHS, ids=[p[0] for p in PATHS])
def test_doubling_the_attention_energies_changes_every_path(monkeypatch, what, section, batch):
    make = freeze.SECTIONS[section].make
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        plain = make(CASE, batch)
        monkeypatch.setattr(attention, "energies", _doubled(attention.energies))
        edited = make(CASE, batch)
    finally:
        torch.set_num_threads(before)
    changed = [k for k in plain if plain[k] != edited[k]]
    assert changed, f"{what}: no output changed when the attention energies were doubled"
