"""One network behind one interface (issue 52): an edit of the network in ``model/`` reaches
every path that computes with it.

The edit doubles the attention energies in their one definition
(:func:`groundhog_port.model.attention.energies`, the piece every attention schedule is
built from).  Every path must then change its output: the literal search (batch 1) and the
batched one (batch 32), both sampling modes, score.py's modes, one training update and the
ONNX export (its graphs and the driver's translations).  A path with its own copy of the
attention would keep its output and fail here.
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
    # the driver's translations, not only the graphs' bytes
    ("the ONNX graphs run by their driver", "onnx", 1),
]


def _doubled(real):
    def energies(ops, p, D):  # tanh(p) @ (D + D): each energy doubled exactly, on any backend
        return real(ops, p, ops.add(D, D))

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
    if section == "onnx":
        assert any(k.startswith("driver/") for k in changed), changed


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


#: the ONNX operators the network's own arithmetic is made of (attention, GRU gates,
#: readout, softmax): emitted by the graph backend's primitive operations only
NETWORK_NODES = {
    "Exp", "Tanh", "Sigmoid", "Softmax", "ReduceSum", "ReduceMax", "Div", "Relu", "Neg", "Where",
    "Greater", "Split",
}  # fmt: skip
#: the backend: ``GraphOps``' methods and ``activation`` (``GraphOps.act``)
GRAPH_BACKEND = {"GraphOps", "activation"}
#: names of what must be defined in ``model/`` only
NETWORK_DEFINITIONS = (
    "attention", "attend", "align", "energ", "gru", "readout", "softmax", "logit", "dense",
    "embed", "signals", "prev_word", "level",
)  # fmt: skip


def export_definitions() -> list[str]:
    """``file:line: what`` for every network piece defined in ``groundhog_port/export``: a
    function named for one, or a node of the network's arithmetic emitted outside the graph
    backend (by the syntax tree)."""
    import ast

    found = []
    for path in sorted((freeze.REPO / "groundhog_port" / "export").rglob("*.py")):
        where = path.relative_to(freeze.REPO)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        backend = [
            node
            for node in tree.body
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name in GRAPH_BACKEND
        ]
        inside = {id(n) for b in backend for n in ast.walk(b)}
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and any(
                word in node.name.lower() for word in NETWORK_DEFINITIONS
            ):
                found.append(f"{where}:{node.lineno}: def {node.name}")
            if (
                isinstance(node, ast.Call)
                and id(node) not in inside
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "op"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value in NETWORK_NODES
            ):
                found.append(f"{where}:{node.lineno}: {node.args[0].value} node")
    return found


def test_export_defines_no_attention_gru_readout_or_softmax():
    """The ONNX graphs run ``model/``'s definitions on graph values (``GraphOps``):
    ``export/`` defines no attention, GRU step, readout, logits or softmax of its own."""
    assert export_definitions() == []
