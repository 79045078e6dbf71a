"""The stable names of an exported checkpoint, and the paper's symbol of every tensor.

An exported tensor is named by its place in the model (``encoder.transition.W``): the
attribute path of :mod:`groundhog_port.checkpoint`'s legacy table, frozen here as export
format 1 (``docs/export.md`` lists them; ``parity_tests/test_export.py`` checks the list
against this module).  Each tensor also carries its GroundHog name (the key in
``*_model.npz``) and its symbol in the paper, in LaTeX: Bahdanau, Cho & Bengio (2015),
appendix A (``\\overrightarrow{W}`` ...), for the grConv encoder Cho et al. (2014b),
"On the properties of neural machine translation", section 3.2.  The paper omits biases
("all the biases are omitted"); ``b[X]`` is the bias added with ``X``'s product.
RNNencdec models (Cho et al. 2014a) use the same symbols for the same roles.
"""
from ..checkpoint import legacy_param_table
from ..config import GRCONV

#: export format version written into the safetensors metadata and config.json
FORMAT_VERSION = 1
FORMAT_NAME = "groundhog-port-export"

#: encoder prefix -> the paper's arrow (forward / backward RNN, appendix A.2.1)
_ARROW = {"enc": "\\overrightarrow", "back_enc": "\\overleftarrow"}

#: module attribute (relative to an encoder / the decoder) -> symbol without arrow
_GRU = {"input_embedder.W": "W", "update_embedder.W": "W_z", "reset_embedder.W": "W_r",
        "transition.W": "U", "transition.G": "U_z", "transition.R": "U_r"}
#: the grConv (Cho et al. 2014b eq. 4-5): W multiplies the right child, U the left one
_GRCONV = {"transition.W": "W^r", "transition.U": "W^l", "transition.GW": "G^r",
           "transition.GU": "G^l"}
_DECODER = {"approx_embedder.W": "E (target)", "A": "U_a", "B": "W_a", "D": "v_a",
            "initializer.W": "W_s", "dec_inputter.W": "C", "dec_updater.W": "C_z",
            "dec_reseter.W": "C_r", "repr_readout.W": "C_o", "hid_readout.W": "U_o",
            "prev_readout.W": "V_o", "output_layer.W": "W_o",
            "output_layer.W1": "W_o (first factor, W_o = W1 W2)",
            "output_layer.W2": "W_o (second factor, W_o = W1 W2)"}


def _with_arrow(arrow, sym):
    base, _, sub = sym.partition("_")
    return f"{arrow}{{{base}}}" + (f"_{sub}" if sub else "")


def _weight_symbol(path, cfg):
    """Symbol of a weight matrix at module ``path`` (``encoder.transition.W`` ...)."""
    head, _, rest = path.partition(".")
    if head in ("encoder", "backward_encoder"):
        if rest == "approx_embedder.W":
            return "E (source)"   # one E for both directions, as in the paper (encdec.py:1330)
        prefix = "enc" if head == "encoder" else "back_enc"
        if cfg.enc.layer == GRCONV and head == "encoder" and rest in _GRCONV:
            return _GRCONV[rest]
        return _with_arrow(_ARROW[prefix], _GRU[rest])
    if rest in _DECODER:
        return _DECODER[rest]
    return _GRU[rest]


def symbol(path, cfg):
    """The paper's symbol of the tensor at ``path`` (a bias: ``b[<its weight's symbol>]``)."""
    if path.endswith(".Gb"):
        return "b[G]"
    if path.endswith(".b"):
        owner = path[:-1] + "W"
        if owner.endswith("output_layer.W"):
            return "b[W_o]"
        if owner == "encoder.transition.W" and cfg.enc.layer == GRCONV:
            return "b[W]"
        return f"b[{_weight_symbol(owner, cfg)}]"
    return _weight_symbol(path, cfg)


def export_table(cfg):
    """``[(export_name, legacy_name, symbol, shape)]`` for every saved parameter of ``cfg``,
    in the order of the legacy table (the order GroundHog's ``lm_model.params`` lists them)."""
    table, _ = legacy_param_table(cfg)
    return [(p.path, p.name, symbol(p.path, cfg), p.shape) for p in table]
