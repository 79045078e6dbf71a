"""The training cost as GroundHog builds it, and the properties ``LM_Model`` reports.

``Decoder.build_decoder`` in EVALUATION mode (encdec.py:1190) calls
``SoftmaxLayer.train(state_below=readout, target=y, mask=y_mask)``; ``get_cost``
(cost_layers.py:1088-1155) then computes, on the flattened ``(T * batch)`` readout::

    cost_t      = -log(p_t[y_t]) * y_mask_t          (float32 probability: no log-softmax)
    cost        = sum_t cost_t                       (sum_over_time with a 2-D readout:
                                                      ``cost.sum()``, cost_layers.py:1146)
    cost_per_sample = sum over time of cost_t        (one value per sentence)

and ``CostLayer.get_grads`` differentiates ``cost.mean()`` of that scalar, i.e. the SUM of
the token negative log-likelihoods of the batch (not a mean over sentences or words).
``LM_Model.__init__`` (LM_model.py:122-139) adds the reported properties::

    grad_norm   = sqrt(sum_p |dcost/dp|^2)            (computed in adadelta.py)
    log2_p_word = cost / sum(y_mask) / log(2)
    log2_p_expl = mean(cost_per_sample) / log(2)

Legacy quirks kept: padded target positions are scored and multiplied by the mask, so a
probability that underflows to 0 there gives ``inf * 0 = nan`` (cost and gradients), as in
Theano; Theano's ``Sum`` accumulates float32 in float64 (``CAReduceDtype`` acc_dtype), which
the sums below do too.  ``weight_noise``/``dropout`` are refused by
:class:`~groundhog_port.model.config.ModelConfig` (marked untested in state.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..model.encdec import RNNEncoderDecoder

#: ``numpy.float32(numpy.log(2))``, the ``scale`` of LM_model.py:127-130
LOG2 = np.float32(np.log(2))


@dataclass
class Cost:
    """``cost`` (scalar, differentiable), ``cost_per_sample (batch,)``, ``n_words`` (scalar)."""

    cost: torch.Tensor
    cost_per_sample: torch.Tensor
    n_words: torch.Tensor

    def properties(self) -> dict[str, float]:
        """``log2_p_word`` and ``log2_p_expl`` as float32 numbers (LM_model.py:135-138)."""
        dt = self.cost.dtype
        cost = self.cost.detach()
        scale = torch.tensor(LOG2, dtype=dt, device=cost.device)
        per = self.cost_per_sample.detach()
        mean = (per.sum(dtype=torch.float64) / per.numel()).to(dt)
        return {
            "log2_p_word": float(cost / self.n_words / scale),
            "log2_p_expl": float(mean / scale),
        }


def sum_acc64(x: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Theano's float32 ``Sum``: accumulated in float64, rounded back to the input dtype."""
    out = x.sum(dtype=torch.float64) if dim is None else x.sum(dim, dtype=torch.float64)
    return out.to(x.dtype)


def training_cost(
    model: RNNEncoderDecoder,
    x: torch.Tensor,
    x_mask: torch.Tensor,
    y: torch.Tensor,
    y_mask: torch.Tensor,
) -> Cost:
    """The differentiable training cost of a ``(time, batch)`` batch (tensors on the model's
    device; ``x``/``y`` int64, masks in the model's float dtype)."""
    probs = model.teacher_forced_probs(x, x_mask, y, y_mask)
    p_target = probs.gather(-1, y[..., None])[..., 0]  # (T, batch)
    cost = -torch.log(p_target) * y_mask
    return Cost(sum_acc64(cost), sum_acc64(cost, 0), sum_acc64(y_mask))
