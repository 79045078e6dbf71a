"""One ``SGD_adadelta`` update in plain numpy float32: the train step's second implementation.

The network is :class:`numpy_groundhog.NumpyGroundHog` run on ``autograd.numpy`` (HIPS
autograd: numpy's own float32 kernels, differentiated in reverse), so that no torch and no
groundhog_port code computes a number here.  What it computes, from the original:

* the cost: the sum over the batch's target words of ``-log p`` (``SoftmaxLayer.get_cost``
  with ``sum_over_time``, cost_layers.py:1088-1155; ``CostLayer.get_grads`` differentiates
  that scalar), each sentence taught its own target (the batch's masks must be all ones:
  the stand-in has no padding);
* the gradients' norm ``sqrt(sum_p sum(g_p ** 2))``, clipped to ``cutoff`` when it exceeds
  it (SGD_adadelta.py:101-114);
* Adadelta from zero accumulators (:125, :137-151): ``gnorm2 = (1 - rho) g ** 2``,
  ``step = sqrt(eps) / sqrt(gnorm2 + eps) * g``, ``p - step``, ``dnorm2 = (1 - rho) step ** 2``
  (``rho``, ``1 - rho``, ``eps`` float32 constants, as Theano made them).

Used by ``parity_tests/parity/test_cancellation.py``: a sum that cancels exactly (uniform
attention) leaves this implementation's own rounding, uncorrelated with the port's.
"""

from __future__ import annotations

import numpy as np
from numpy_groundhog import F32, NumpyGroundHog


def train_step(state, params, x, x_mask, y, y_mask):
    """``{"cost", "grad_norm", "clipped_grads", "gnorm2_after", "dnorm2_after",
    "params_after"}`` of one update on the batch ``x (S, n)``, ``y (T, n)``; the arrays by
    legacy name."""
    import autograd.numpy as anp
    from autograd import value_and_grad

    if not (np.all(np.asarray(x_mask) == 1) and np.all(np.asarray(y_mask) == 1)):
        raise ValueError("the numpy train step takes batches without padding (masks all 1)")
    x, y = np.asarray(x), np.asarray(y)
    params = {k: np.asarray(v, F32) for k, v in params.items()}

    def cost(p):
        m = NumpyGroundHog(state, p, xp=anp)
        total = F32(0)
        for j in range(x.shape[1]):
            total = total + m.nll(x[:, j], y[:, j])
        return total

    value, grads = value_and_grad(cost)(params)
    grads = {k: np.asarray(g, F32) for k, g in grads.items()}
    norm = np.sqrt(sum(F32(np.sum(g * g, dtype=np.float64)) for g in grads.values()))
    cutoff = F32(state["cutoff"])
    if state["cutoff"] > 0 and norm >= cutoff:
        grads = {k: g * cutoff / norm for k, g in grads.items()}
    rho, eps = F32(state["adarho"]), F32(state["adaeps"])
    one_minus_rho = F32(1.0 - float(state["adarho"]))
    gnorm2 = {k: rho * F32(0) + one_minus_rho * g * g for k, g in grads.items()}
    steps = {k: np.sqrt(eps) / np.sqrt(gnorm2[k] + eps) * g for k, g in grads.items()}
    return {
        "cost": F32(value),
        "grad_norm": F32(norm),
        "clipped_grads": grads,
        "gnorm2_after": gnorm2,
        "dnorm2_after": {k: one_minus_rho * s * s for k, s in steps.items()},
        "params_after": {k: params[k] - s for k, s in steps.items()},
    }
