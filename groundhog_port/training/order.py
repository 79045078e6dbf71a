"""The order of ``lm_model.params``: the summation order of the global gradient norm.

``SGD_adadelta`` (SGD_adadelta.py:101) and ``LM_Model`` (LM_model.py:132) sum the squared
gradient norms in the order of ``lm_model.params``, which ``Layer.__call__`` builds while the
graph is constructed (``tensor_from_layer`` merges the parameters of layer-valued keyword
arguments in their iteration order).  Only the float32 rounding of the norm depends on it.
Under Python 3 (the recordings, docs/recordings.md, "Python 2 pickles and dict order") the order is the one below, checked
against the ``param_order`` attribute of every shared trace's ``/train_step``; Python 2
iterated those keyword dicts in hash order, so a model trained by the original under
Python 2 may have summed in another order (a float32 rounding difference of the norm).
"""

from __future__ import annotations

from ..legacy.checkpoint import legacy_param_table
from ..model.config import ModelConfig


def _ml(name: str, bias: bool = True) -> list[str]:
    return [f"W_0_{name}"] + ([f"b_0_{name}"] if bias else [])


def _encoder_block(prefix: str, with_approx: bool) -> list[str]:
    rec = [f"W_{prefix}_transition_0", f"G_{prefix}_transition_0", f"R_{prefix}_transition_0"]
    names = rec + _ml(f"{prefix}_input_embdr_0")
    if with_approx:
        names += _ml(f"{prefix}_approx_embdr")
    return names + _ml(f"{prefix}_update_embdr_0", False) + _ml(f"{prefix}_reset_embdr_0", False)


def param_order(cfg: ModelConfig) -> list[str]:
    """GroundHog's ``lm_model.params`` names for this architecture (Python-3 build order).

    Names this rule does not place (none for the prototypes' structures) follow in the
    legacy table's order, so every saved parameter appears exactly once.
    """
    sm = cfg.softmax_name
    head = ([f"W1_{sm}", f"W2_{sm}"] if cfg.rank_n_approx else [f"W_{sm}"]) + [f"b_{sm}"]
    head += _ml("dec_repr_readout", False)
    encoders = _encoder_block("enc", True) + _encoder_block("back_enc", False)
    init = _ml("dec_initializer_0")
    if cfg.search:
        dec = (
            [
                "W_dec_transition_0",
                "G_dec_transition_0",
                "R_dec_transition_0",
                "A_dec_transition_0",
                "B_dec_transition_0",
                "D_dec_transition_0",
            ]
            + _ml("dec_dec_inputter_0", False)
            + _ml("dec_dec_reseter_0", False)
            + _ml("dec_dec_updater_0", False)
            + _ml("dec_input_embdr_0")
            + _ml("dec_approx_embdr")
            + _ml("dec_update_embdr_0", False)
            + _ml("dec_reset_embdr_0", False)
            + init
        )
        rule = head + dec + encoders + _ml("dec_hid_readout_0") + _ml("dec_prev_readout_0", False)
    else:
        dec = (
            ["W_dec_transition_0", "G_dec_transition_0", "R_dec_transition_0"]
            + _ml("dec_input_embdr_0")
            + _ml("dec_approx_embdr")
            + _ml("dec_dec_inputter_0", False)
            + _ml("dec_update_embdr_0", False)
            + _ml("dec_dec_updater_0", False)
            + _ml("dec_reset_embdr_0", False)
            + _ml("dec_dec_reseter_0", False)
            + init
        )
        rule = head + encoders + _ml("dec_hid_readout_0") + dec + _ml("dec_prev_readout_0", False)
    table, _ = legacy_param_table(cfg)
    saved = [p.name for p in table]
    present = set(saved)
    ordered = [n for n in rule if n in present]
    placed = set(ordered)
    return ordered + [n for n in saved if n not in placed]
