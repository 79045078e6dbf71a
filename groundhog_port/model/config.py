"""The architecture a GroundHog state describes, as one frozen dataclass.

``ModelConfig.from_state(state)`` reads the options that ``experiments/nmt/encdec.py``
reads when it builds ``RNNEncoderDecoder`` and refuses, through the single
``UNSUPPORTED`` table below, every option the original marks untested or cannot run.
Nothing here evaluates a string from the state: activations go through the
whitelist parser in :mod:`groundhog_port.model.activations`.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from legacy_states import VOCABULARY_KEYS

from ..errors import UnsupportedModelError, quoted
from .activations import Activation, parse_activation

#: state key -> (predicate telling the value is unsupported, reason).  Each entry
#: mirrors an ``assert`` or a "WARNING: untested" comment of the original.
UNSUPPORTED: dict[str, tuple[Callable[[Any], object], str]] = {
    "encoder_stack": (
        lambda v: v != 1,
        "stacked encoders are marked 'most probably doesn't work' "
        "in state.py:58 and are not ported",
    ),
    "decoder_stack": (
        lambda v: v != 1,
        "stacked decoders are marked 'most probably doesn't work' "
        "in state.py:58 (encdec.py:841 asserts 1 level with search)",
    ),
    "weight_noise": (lambda v: bool(v), "weight noise is marked 'not tested' in state.py:132"),
    "weight_noise_rec": (lambda v: bool(v), "weight noise is marked 'not tested' in state.py:132"),
    "dropout": (
        lambda v: v < 1,
        "dropout is marked 'not tested and probably does not work' in state.py:126",
    ),
    "dropout_rec": (
        lambda v: v < 1,
        "dropout is marked 'not tested and probably does not work' in state.py:126",
    ),
    "use_nce": (
        lambda v: bool(v),
        "NCE training is not ported (score/translate need the full softmax)",
    ),
    "softmax_layer": (lambda v: v != "SoftmaxLayer", "only SoftmaxLayer is ported"),
    "dim_mult": (
        lambda v: v != 1,
        "dim_mult != 1 only makes sense for LSTMLayer, which cannot run",
    ),
    "hid_mult": (lambda v: v != 1, "hid_mult != 1 gives an initial state the GRU cannot take"),
}

#: state keys read as whole numbers (layer sizes and the vocabularies): an int, not a bool
INT_KEYS = ("dim", "rank_n_approx", *VOCABULARY_KEYS)

#: state keys read as flags (besides every ``*rec_gating`` / ``*rec_reseting``): a number or
#: bool; anything else (an array, a string...) is refused before ``bool()`` sees it
FLAG_KEYS = (
    "forward",
    "backward",
    "last_forward",
    "last_backward",
    "search",
    "bigram",
    "bias_code",
    "decoding_inputs",
    "deep_out",
    "check_first_word",
)

LSTM_REASON = (
    "LSTMLayer models cannot run in the original GroundHog: prototype_phrase_lstm_state is not "
    "exported from experiments.nmt, LSTMLayer returns a 2*dim state while c_dim assumes dim "
    "(ValueError at the first step), and four of its matrices share the name Wcf_* so a saved "
    "model would hold only one of them (see phrase_lstm/FAILURE.txt)"
)


GRCONV = "RecursiveConvolutionalLayer"

GRCONV_GATES_REASON = (
    "RecursiveConvolutionalLayer ignores the gate signals (rconv_layers.py:45-48, 'NOT USED'), so "
    "the enc_update_embdr/enc_reset_embdr projections that encdec.py:596-607 builds for it are "
    "disconnected from the cost and the original fails building the training graph "
    "(theano.gradient.DisconnectedInputError); no such model can have been trained"
)


def prefix_lookup(state: dict[str, Any], prefix: str, key: str) -> Any:
    """``state[prefix_key]`` if present, else the un-prefixed default ``state[key]``.

    Mirrors ``prefix_lookup`` (encdec.py:560).  The backward encoder's prefix is
    ``back_enc`` and no prototype has ``back_enc_*`` keys, so it always runs on the
    un-prefixed ``rec_*`` / ``activ`` defaults (state.py:94 says so).
    """
    name = f"{prefix}_{key}"
    return state[name] if name in state else state[key]


@dataclass(frozen=True)
class RecurrentConfig:
    """One GRU-like ``RecurrentLayer`` (rec_layers.py:839), ``RecurrentLayerWithSearch``, or
    (encoder only) the grConv ``RecursiveConvolutionalLayer`` (rconv_layers.py:27)."""

    layer: str  # 'RecurrentLayer', 'RecurrentLayerWithSearch', 'RecursiveConvolutionalLayer'
    activation: Activation  # candidate activation ('activ')
    gating: bool  # update gate z present ('rec_gating')
    reseting: bool  # reset gate r present ('rec_reseting')
    gater: Activation  # update-gate activation ('rec_gater')
    reseter: Activation  # reset-gate activation ('rec_reseter')


@dataclass(frozen=True)
class ModelConfig:
    """Architecture of an ``RNNEncoderDecoder`` (encdec.py:1263)."""

    dim: int  # hidden units of every recurrent layer
    rank_n_approx: int  # width of the low-rank word embeddings
    rank_n_activ: Activation  # activation on the low-rank embeddings
    n_sym_source: int  # source vocabulary size (incl. end-of-sequence)
    n_sym_target: int  # target vocabulary size (incl. end-of-sequence)
    null_sym_source: int  # source end-of-sequence id
    null_sym_target: int  # target end-of-sequence id
    unk_sym_source: int
    unk_sym_target: int
    forward: bool  # annotation: every forward encoder state
    backward: bool  # annotation: every backward encoder state
    last_forward: bool  # annotation: last forward state, replicated
    last_backward: bool  # annotation: last backward state, replicated
    search: bool  # attention (RNNsearch) instead of a fixed context
    bigram: bool  # previous word enters the readout
    bias_code: bool  # initial decoder state from the annotations (else zeros)
    decoding_inputs: bool  # context enters the decoder transition
    deep_out: bool  # maxout readout + 'dec_deep_softmax'; else 'dec_softmax' on dim units
    unary_activ: Activation  # readout non-linearity (Maxout(k)) when deep_out
    maxout_part: float  # k as stored (int or float: decides Py2 '/' below)
    check_first_word: bool  # y_prev > 0 check on the previous-word readout in one-step modes
    dec_init_activ: Activation  # initializer activation: prefix_lookup('dec', 'activ')
    enc: RecurrentConfig
    back_enc: RecurrentConfig
    dec: RecurrentConfig
    needs_backward_encoder: bool  # backward or last_backward: back_enc_* parameters exist

    @property
    def n_components(self) -> int:
        return sum((self.forward, self.last_forward, self.backward, self.last_backward))

    @property
    def grconv(self) -> bool:
        """The forward encoder is the grConv (``enc_rec_layer='RecursiveConvolutionalLayer'``),
        whose scan over a one-word source (``<eos>`` alone) has 0 steps: Theano refuses it."""
        return self.enc.layer == GRCONV

    @property
    def c_dim(self) -> int:
        """Annotation width: number of components x dim (encdec.py:1345)."""
        return self.n_components * self.dim

    @property
    def softmax_in(self) -> int:
        """Width fed to the output layer.

        ``dim / maxout_part`` in Python 2 (encdec.py:943): integer division when
        ``maxout_part`` is an int (``Maxout(4)`` with ``maxout_part=4``), float
        division then ``int()`` in the initialiser when it is a float (``2.``).
        """
        if not self.deep_out:
            return self.dim
        if isinstance(self.maxout_part, int):
            return self.dim // self.maxout_part
        return int(self.dim / self.maxout_part)

    @property
    def softmax_name(self) -> str:
        """'dec_deep_softmax' with deep_out, else the hard-coded 'dec_softmax' (encdec.py:958)."""
        return "dec_deep_softmax" if self.deep_out else "dec_softmax"

    @classmethod
    def from_state(
        cls, state: dict[str, Any], path: str | os.PathLike[str] | None = None
    ) -> ModelConfig:
        """Build the config, refusing what the original cannot (or must not) run; a state
        without a key the network needs is one line naming it (an exported checkpoint's
        ``config.json`` is not completed from the prototype as a legacy state is: a hand-cut
        one raised ``KeyError: 'search'``, found by fuzzing, seed 4747578)."""
        try:
            return cls._from_state(state, path)
        except KeyError as err:
            key = err.args[0] if err.args else None
            if not isinstance(key, str) or key in state:  # not the state's: a bug, said as one
                raise
            raise UnsupportedModelError(
                path,
                f"the state has no {quoted(key)}, which every GroundHog state holds "
                "(state.py's prototype_state): a damaged or hand-cut state",
            ) from None

    @classmethod
    def _from_state(
        cls, state: dict[str, Any], path: str | os.PathLike[str] | None = None
    ) -> ModelConfig:
        for key in INT_KEYS:
            if not isinstance(state.get(key), int) or isinstance(state.get(key), bool):
                raise UnsupportedModelError(
                    path, f"state[{key!r}] must be an int, found {quoted(state.get(key))}"
                )
        for key, value in state.items():
            if key in FLAG_KEYS or key.endswith(("rec_gating", "rec_reseting")):
                if not isinstance(value, numbers.Real):
                    raise UnsupportedModelError(
                        path, f"state[{key!r}] = {quoted(value)} (expected True or False)"
                    )
            elif key.endswith("rec_layer") and not isinstance(value, str):
                raise UnsupportedModelError(
                    path,
                    f"state[{key!r}] = {quoted(value)} "
                    "(expected a layer name such as 'RecurrentLayer')",
                )
        if not isinstance(state.get("oov", ""), str):
            raise UnsupportedModelError(
                path,
                f"state['oov'] = {quoted(state['oov'])} "
                "(expected the text shown for unknown words, 'UNK')",
            )
        for key, low in (
            ("dim", 1),
            ("rank_n_approx", 0),
            ("n_sym_source", 1),
            ("n_sym_target", 1),
        ):
            if state[key] < low:
                raise UnsupportedModelError(
                    path, f"state[{key!r}] = {state[key]} (expected >= {low})"
                )
        for side in ("source", "target"):
            for key in (f"null_sym_{side}", f"unk_sym_{side}"):
                if not 0 <= state[key] < state[f"n_sym_{side}"]:
                    raise UnsupportedModelError(
                        path,
                        f"state[{key!r}] = {state[key]} is not a word id "
                        f"(expected 0 <= id < n_sym_{side} = "
                        f"{state[f'n_sym_{side}']})",
                    )
        for key in ("enc_rec_layer", "dec_rec_layer", "rec_layer"):
            if state.get(key) == "LSTMLayer":
                raise UnsupportedModelError(path, f"state[{key!r}] = 'LSTMLayer': {LSTM_REASON}")
        for key, (bad, reason) in UNSUPPORTED.items():
            try:
                refused = key in state and bool(bad(state[key]))
            except (TypeError, ValueError):
                raise UnsupportedModelError(
                    path,
                    f"state[{key!r}] = {quoted(state[key])} has the wrong type for this option",
                ) from None
            if refused:
                raise UnsupportedModelError(
                    path, f"state[{key!r}] = {quoted(state[key])} is not supported: {reason}"
                )

        def rec(prefix: str) -> RecurrentConfig:
            layer = prefix_lookup(state, prefix, "rec_layer")
            return RecurrentConfig(
                layer=layer,
                activation=parse_activation(
                    prefix_lookup(state, prefix, "activ"), f"{prefix}_activ"
                ),
                gating=bool(prefix_lookup(state, prefix, "rec_gating")),
                reseting=bool(prefix_lookup(state, prefix, "rec_reseting")),
                gater=parse_activation(
                    prefix_lookup(state, prefix, "rec_gater"), f"{prefix}_rec_gater"
                ),
                reseter=parse_activation(
                    prefix_lookup(state, prefix, "rec_reseter"), f"{prefix}_rec_reseter"
                ),
            )

        enc, back_enc, dec = rec("enc"), rec("back_enc"), rec("dec")
        for name, r in (("enc", enc), ("back_enc", back_enc)):
            allowed = ("RecurrentLayer", GRCONV) if name == "enc" else ("RecurrentLayer",)
            if r.layer not in allowed:
                raise UnsupportedModelError(
                    path,
                    f"{name} recurrent layer {quoted(r.layer)} is not "
                    f"supported (only {' or '.join(allowed)})",
                )
        if enc.layer == GRCONV and (enc.gating or enc.reseting):
            key = "enc_rec_gating" if enc.gating else "enc_rec_reseting"
            raise UnsupportedModelError(
                path, f"state[{key!r}] = True with enc_rec_layer={GRCONV!r}: {GRCONV_GATES_REASON}"
            )
        search = bool(state["search"])
        if search and dec.layer != "RecurrentLayerWithSearch":
            raise UnsupportedModelError(
                path,
                "search=True needs dec_rec_layer="
                "'RecurrentLayerWithSearch' (encdec.py:842 calls "
                "set_decoding_layers on it)",
            )
        if not search and dec.layer != "RecurrentLayer":
            raise UnsupportedModelError(
                path,
                f"dec_rec_layer={dec.layer!r} without search is "
                "not supported (the original passes it no context)",
            )
        if search and not (dec.gating and dec.reseting):
            raise UnsupportedModelError(
                path, "RecurrentLayerWithSearch asserts gating and reseting (encdec.py:209)"
            )
        unary = parse_activation(state["unary_activ"], "unary_activ")
        cfg = cls(
            dim=state["dim"],
            rank_n_approx=state["rank_n_approx"],
            rank_n_activ=parse_activation(state["rank_n_activ"], "rank_n_activ"),
            n_sym_source=state["n_sym_source"],
            n_sym_target=state["n_sym_target"],
            null_sym_source=state["null_sym_source"],
            null_sym_target=state["null_sym_target"],
            unk_sym_source=state["unk_sym_source"],
            unk_sym_target=state["unk_sym_target"],
            forward=bool(state["forward"]),
            backward=bool(state["backward"]),
            last_forward=bool(state["last_forward"]),
            last_backward=bool(state["last_backward"]),
            search=search,
            bigram=bool(state["bigram"]),
            bias_code=bool(state["bias_code"]),
            decoding_inputs=bool(state["decoding_inputs"]),
            deep_out=bool(state["deep_out"]),
            unary_activ=unary,
            maxout_part=state["maxout_part"],
            check_first_word=bool(state["check_first_word"]),
            dec_init_activ=parse_activation(prefix_lookup(state, "dec", "activ"), "dec_activ"),
            enc=enc,
            back_enc=back_enc,
            dec=dec,
            needs_backward_encoder=bool(state["backward"] or state["last_backward"]),
        )
        if cfg.n_components == 0:
            raise UnsupportedModelError(
                path,
                "no annotation component is on (forward, backward, "
                "last_forward, last_backward are all False)",
            )
        if enc.layer == GRCONV and cfg.forward and (cfg.n_components > 1 or search):
            raise UnsupportedModelError(
                path,
                f"forward=True with enc_rec_layer={GRCONV!r}: the "
                "grConv's 'forward' annotation is its root alone, one "
                "position instead of one per word (rconv_layers.py:311), "
                "which the original cannot concatenate with other "
                "components (encdec.py:1353) nor attend over; use "
                "last_forward",
            )
        if search and not cfg.decoding_inputs:
            raise UnsupportedModelError(
                path,
                "search=True with decoding_inputs=False: the "
                "original's RecurrentLayerWithSearch then has no context "
                "layers and fails",
            )
        if cfg.deep_out:
            mp = cfg.maxout_part
            if (
                not isinstance(mp, (int, float))
                or isinstance(mp, bool)
                or not math.isfinite(mp)
                or mp <= 0
            ):
                raise UnsupportedModelError(
                    path,
                    f"state['maxout_part'] = {quoted(mp)} (expected a "
                    "positive number: the readout has dim / maxout_part units)",
                )
            pieces = (unary.k or 1) if unary.name == "maxout" else 1
            if cfg.dim % pieces or cfg.dim // pieces != cfg.softmax_in:
                raise UnsupportedModelError(
                    path,
                    f"unary_activ={quoted(state['unary_activ'])} turns dim={cfg.dim} into "
                    f"{cfg.dim // pieces} units but maxout_part={quoted(cfg.maxout_part)} sizes the "
                    f"softmax for {cfg.softmax_in}: the original fails on this shape mismatch",
                )
        return cfg
