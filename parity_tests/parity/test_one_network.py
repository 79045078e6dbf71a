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


#: what only the network may touch: its modules and weights (legacy names), and the
#: operations its layers are made of
NETWORK_ATTRIBUTES = {
    "decoder", "encoder", "backward_encoder", "output_layer", "approx_embedder",
    "input_embedder", "update_embedder", "reset_embedder", "transition", "initializer",
    "repr_readout", "hid_readout", "prev_readout", "W", "W1", "W2", "b", "A", "B", "D",
}  # fmt: skip
NETWORK_OPERATIONS = {
    "exp", "exp_", "softmax", "log_softmax", "softmax_with_bias", "tanh", "tanh_", "sigmoid",
    "theano_sigmoid", "relu", "mm", "matmul", "readout", "transition_step", "align",
    "ragged_context", "logits", "normalise",
}  # fmt: skip


def network_uses(package: str) -> list[str]:
    """``file:line: what`` for every weight or network module read and every network
    operation called in ``groundhog_port/<package>`` (by the syntax tree: docstrings and
    comments do not count)."""
    import ast

    found = []
    for path in sorted((freeze.REPO / "groundhog_port" / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = None
            if isinstance(node, ast.Attribute) and node.attr in NETWORK_ATTRIBUTES:
                name = f".{node.attr}"
            elif isinstance(node, ast.Call):
                f = node.func
                called = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
                if called in NETWORK_OPERATIONS and not (
                    isinstance(f, ast.Attribute)
                    and isinstance(f.value, ast.Name)
                    and f.value.id in ("decoding", "output")
                ):
                    name = f"{called}()"
            if name:
                found.append(f"{path.relative_to(freeze.REPO)}:{node.lineno}: {name}")
    return found


@pytest.mark.parametrize("package", ["search", "sampling"])
def test_search_and_sampling_see_the_network_only_through_its_interface(package):
    """No weight or network module is read, and no activation, exp, softmax, product or
    step of the network is computed in ``search/`` or ``sampling/``: they call
    ``model.decoding`` (and ``model.output``'s normaliser) only."""
    assert network_uses(package) == []
