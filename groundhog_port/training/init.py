"""A new model's weights (``RNNEncoderDecoder(state, rng, skip_init=False)``).

Same distributions as GroundHog, not its random stream: the original draws every matrix
from one ``numpy.random.RandomState(state['seed'])`` in graph-construction order (with
per-row permutations), which is not reproduced.  What is kept (utils.py:107-141,
encdec.py:640-681):

* recurrent matrices ``W``/``G``/``R`` of the transitions: ``rec_weight_init_fn``
  (``sample_weights_orth``: the ``U`` of the SVD of a Gaussian matrix, times
  ``rec_weight_scale``);
* every other matrix: ``weight_init_fn`` (``sample_weights_classic``: dense Gaussian with
  standard deviation ``weight_scale``);
* biases: ``init_bias`` = ``bias_scale`` (0) everywhere.
"""
import numpy as np
import torch

from ..checkpoint import legacy_param_table
from ..errors import LegacyInputError

SUPPORTED = {"weight_init_fn": ("sample_weights_classic",),
             "rec_weight_init_fn": ("sample_weights_orth", "sample_weights_classic")}


def _classic(rng, shape, scale):
    return rng.normal(0.0, scale, size=shape)


def _orth(rng, shape, scale):
    u, _, _ = np.linalg.svd(rng.normal(0.0, scale, size=shape))
    return u * scale


def initialize(model, state):
    for key, ok in SUPPORTED.items():
        if state.get(key) not in ok:
            raise LegacyInputError(None, f"state[{key!r}] = {state.get(key)!r}: a new model can be "
                                         f"initialised with {' or '.join(ok)} only")
    rng = np.random.RandomState(state["seed"])
    table, _ = legacy_param_table(model.cfg)
    fns = {"sample_weights_classic": _classic, "sample_weights_orth": _orth}
    for p in table:
        recurrent = p.name.split("_")[0] in ("W", "G", "R") and "transition" in p.name
        if len(p.shape) == 1:
            value = np.zeros(p.shape)
        elif recurrent:
            value = fns[state["rec_weight_init_fn"]](rng, p.shape, state["rec_weight_scale"])
        else:
            value = fns[state["weight_init_fn"]](rng, p.shape, state["weight_scale"])
        with torch.no_grad():
            model.get_parameter(p.path).copy_(torch.as_tensor(value, dtype=torch.float32))
