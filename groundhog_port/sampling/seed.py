"""The sampler's MRG seed, derived from the state alone as GroundHog draws it.

sample.py builds the model with ONE ``numpy.random.RandomState(state['seed'])``
(sample.py:232) passed to every layer, ``skip_init=True`` (sample.py:233).  Each layer
consumes it at construction, in a fixed order:

* ``MultiLayer``, ``RecurrentLayer`` and every ``CostLayer``: ``rng.randint(int(1e6))``
  for the layer's own ``MRG_RandomStreams`` (ff_layers.py:162, rec_layers.py:973,
  cost_layers.py:131); their weights come from ``sample_zeros`` (no draw) under
  ``skip_init``;
* ``RecurrentLayerWithSearch`` (encdec.py:188) creates no stream but ALWAYS draws its
  alignment matrices ``A`` (c_dim x dim) and ``B`` (dim x dim) with
  ``sample_weights_classic`` (utils.py:107: per row ``rng.permutation(dim)`` then
  ``rng.normal(size=dim)``), ``skip_init`` or not (encdec.py:270-283) -- legacy quirk;
* ``UnaryOp``, ``ZeroLayer``, ``DropOp`` (dropout = 1) draw nothing.

The decoder's output layer (``SoftmaxLayer``, the last layer built, encdec.py:940-961)
takes ``MRG_RandomStreams(rng.randint(int(1e6)))``: that integer seeds the sampler.

Order (``RNNEncoderDecoder.build``, encdec.py:1296-1351): forward encoder, backward
encoder (always built, encdec.py:1318), decoder.  Per ``Encoder.create_layers``
(encdec.py:675): approx embedder, input embedder, update embedder (if ``rec_gating``),
reset embedder (if ``rec_reseting``), transition, representation contributor
(encdec.py:688; built although unused).  Per ``Decoder.create_layers``
(encdec.py:825): the four embedders, the transition, the initializer (if ``bias_code``),
the decoding-input layers (if ``decoding_inputs``: inputter, updater if gating,
reseter if reseting), the readouts (repr, hid, prev if ``bigram``), the softmax.

The draws go through numpy's own ``RandomState`` (its legacy streams are frozen), so
only their order and sizes are ported; the values are numpy's.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..errors import UnsupportedModelError
from ..model.config import ModelConfig, RecurrentConfig

#: the exclusive bound of the per-layer stream seeds (``rng.randint(int(1e6))``)
LAYER_SEED_BOUND = int(1e6)


def _draw_seed(rng: np.random.RandomState) -> int:
    return int(rng.randint(LAYER_SEED_BOUND))


def _sample_weights_classic(rng: np.random.RandomState, size_x: int, size_y: int) -> None:
    """The draws of ``sample_weights_classic(size_x, size_y, -1, scale, rng)`` (utils.py:107),
    values discarded (the port loads the trained weights)."""
    for _ in range(int(size_x)):
        rng.permutation(int(size_y))
        rng.normal(loc=0, scale=1.0, size=(int(size_y),))


def _encoder_draws(rng: np.random.RandomState, rec: RecurrentConfig) -> None:
    _draw_seed(rng)  # approx_embdr
    _draw_seed(rng)  # input_embdr_0
    if rec.gating:
        _draw_seed(rng)  # update_embdr_0
    if rec.reseting:
        _draw_seed(rng)  # reset_embdr_0
    _draw_seed(rng)  # transition_0 (RecurrentLayer)
    _draw_seed(rng)  # repr_contrib_0


def draws_before_softmax(rng: np.random.RandomState, cfg: ModelConfig) -> None:
    """Consume ``rng`` as building every layer before the decoder's softmax does."""
    _encoder_draws(rng, cfg.enc)
    _encoder_draws(rng, cfg.back_enc)
    dec = cfg.dec
    _draw_seed(rng)  # dec approx_embdr
    _draw_seed(rng)  # dec input_embdr_0
    if dec.gating:
        _draw_seed(rng)  # dec update_embdr_0
    if dec.reseting:
        _draw_seed(rng)  # dec reset_embdr_0
    if cfg.search:
        # RecurrentLayerWithSearch: no stream; A and B drawn even with skip_init
        _sample_weights_classic(rng, cfg.c_dim, cfg.dim)
        _sample_weights_classic(rng, cfg.dim, cfg.dim)
    else:
        _draw_seed(rng)  # transition_0 (RecurrentLayer)
    if cfg.bias_code:
        _draw_seed(rng)  # initializer_0
    if cfg.decoding_inputs:
        _draw_seed(rng)  # dec_inputter_0
        if dec.gating:
            _draw_seed(rng)  # dec_updater_0
        if dec.reseting:
            _draw_seed(rng)  # dec_reseter_0
    _draw_seed(rng)  # repr_readout
    _draw_seed(rng)  # hid_readout_0
    if cfg.bigram:
        _draw_seed(rng)  # prev_readout_0


def state_seed(state: dict[str, Any], path: str | os.PathLike[str] | None = None) -> int:
    """``state['seed']`` as ``numpy.random.RandomState`` accepts it."""
    seed = state.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**32:
        raise UnsupportedModelError(
            path,
            f"state['seed'] = {seed!r}: the sampler's seed is drawn "
            "from numpy.random.RandomState(state['seed']), which needs "
            "an int in 0..2**32-1",
        )
    return int(seed)


def derive_mrg_seed(
    state: dict[str, Any], cfg: ModelConfig, path: str | os.PathLike[str] | None = None
) -> int:
    """The ``MRG_RandomStreams`` seed of the decoder's softmax layer (the sampler's stream).

    ``cfg`` is the :class:`~groundhog_port.model.config.ModelConfig` of ``state``; it has already
    refused every option whose layers this derivation does not know (stacked encoders or
    decoders, LSTM, dropout, other recurrent layers), so each supported model gets its
    seed from exactly the draws above.  Raises :class:`UnsupportedModelError` where the
    original itself fails (a 0 seed: ``MRG_RandomStreams`` refuses it at build time).
    """
    rng = np.random.RandomState(state_seed(state, path))
    draws_before_softmax(rng, cfg)
    seed = _draw_seed(rng)
    if seed == 0:
        raise UnsupportedModelError(
            path,
            "the decoder softmax layer draws MRG seed 0 from "
            f"RandomState({state['seed']}): the original fails to "
            "build (rng_mrg.py:699 'seed should not be 0')",
        )
    return seed
