"""GroundHog's layers, each a small module holding its legacy-named weights.

Weights keep GroundHog's ``(in, out)`` orientation: every affine map is ``x @ W + b``.
Parameters are registered under their role (``W``, ``b``, ``W1`` ...); the
legacy names they load from live in ONE table, :mod:`groundhog_port.checkpoint`.
"""
import torch
from torch import nn

from .activations import parse_activation
from .numerics import mm

#: ``'lambda x:x'``, the activation of every projection GroundHog builds without one
IDENTITY = parse_activation("lambda x:x", "identity")


def _param(*shape):
    return nn.Parameter(torch.zeros(*shape, dtype=torch.float32), requires_grad=False)


def affine_or_lookup(x, W):
    """``utils.dot`` (groundhog/utils/utils.py:169): integer input indexes rows of ``W``
    (an embedding lookup), float input is multiplied."""
    if x.dtype in (torch.int64, torch.int32):
        return W[x]
    return mm(x, W)


class MultiLayer(nn.Module):
    """One-layer ``MultiLayer`` (groundhog/layers/ff_layers.py:28, fprop :247).

    ``y = act(x @ W + b)``, or with ``rank_n_approx`` the factorised
    ``y = act(rank_n_activ(x @ W1) @ W2 + b)``.

    With ``learn_bias=False`` the bias is not a parameter: it is never saved and
    keeps its initial value ``init_bias(n, bias_scale) = zeros`` (utils.py:143),
    but GroundHog still adds it in fprop.  It is kept here as a zero buffer.
    """

    def __init__(self, n_in, n_out, activation, rank_n_approx=0, rank_n_activ=None,
                 learn_bias=True):
        super().__init__()
        self.activation = activation
        self.rank_n_activ = rank_n_activ
        if rank_n_approx:
            self.W1 = _param(n_in, rank_n_approx)
            self.W2 = _param(rank_n_approx, n_out)
        else:
            self.W = _param(n_in, n_out)
        if learn_bias:
            self.b = _param(n_out)
        else:
            self.register_buffer("b", torch.zeros(n_out, dtype=torch.float32))

    def forward(self, x):
        if hasattr(self, "W1"):
            emb = mm(self.rank_n_activ(affine_or_lookup(x, self.W1)), self.W2)
        else:
            emb = affine_or_lookup(x, self.W)
        return self.activation(emb + self.b)


class RecurrentLayer(nn.Module):
    """GroundHog's gated recurrent layer (rec_layers.py:839, step_fprop).

    With reset gate ``r`` and update gate ``z``::

        r   = reseter(h_prev @ R + x_r)
        h~  = activation((r * h_prev) @ W + x)
        z   = gater(h_prev @ G + x_z)
        h   = z * h~ + (1 - z) * h_prev
        h   = m * h + (1 - m) * h_prev        (where a mask m is given)

    Note GroundHog applies ``r`` before the matrix product and keeps ``z`` for the
    *new* state: ``torch.nn.GRU`` does neither, so it is not used.
    """

    def __init__(self, dim, rec):
        super().__init__()
        self.rec = rec
        self.W = _param(dim, dim)
        if rec.gating:
            self.G = _param(dim, dim)
        if rec.reseting:
            self.R = _param(dim, dim)

    def step(self, x, x_z, x_r, h_prev, mask=None):
        """One step; ``x_z``/``x_r`` are None when there is no such gate."""
        if self.rec.reseting and x_r is not None:
            r = self.rec.reseter(mm(h_prev, self.R) + x_r)
            h = self.rec.activation(mm(r * h_prev, self.W) + x)
        else:
            h = self.rec.activation(mm(h_prev, self.W) + x)
        if self.rec.gating and x_z is not None:
            z = self.rec.gater(mm(h_prev, self.G) + x_z)
            h = z * h + (1 - z) * h_prev
        if mask is not None:
            mask = mask[:, None]
            h = mask * h + (1 - mask) * h_prev
        return h

    def scan(self, x, x_z, x_r, h0, mask=None):
        """Run over time: inputs ``(T, batch, dim)``, mask ``(T, batch)``; returns ``(T, batch, dim)``."""
        h, out = h0, []
        for t in range(x.shape[0]):
            h = self.step(x[t], None if x_z is None else x_z[t], None if x_r is None else x_r[t],
                          h, None if mask is None else mask[t])
            out.append(h)
        return torch.stack(out)


class SoftmaxLayer(nn.Module):
    """Output layer (groundhog/layers/cost_layers.py:878, fprop).

    ``p = softmax(rank_n_activ(x @ W1) @ W2 + b)`` (``rank_n_activ`` is the
    CostLayer default ``lambda x: x``; the decoder never passes another).

    GroundHog wrote ``exp(x) / sum(exp(x))`` (utils.py:78) but Theano's optimizer
    rewrote that graph into ``SoftmaxWithBias``, which subtracts the row maximum:
    the recordings hold the max-subtracted result, so that is what is computed here
    (MANIFEST section 10).  Probabilities stay float32, so tiny ones underflow to
    exactly 0 as they did in Theano.
    """

    def __init__(self, n_in, n_out, rank_n_approx):
        super().__init__()
        if rank_n_approx:
            self.W1 = _param(n_in, rank_n_approx)
            self.W2 = _param(rank_n_approx, n_out)
        else:
            self.W = _param(n_in, n_out)
        self.b = _param(n_out)

    def preactivation(self, x):
        if hasattr(self, "W1"):
            return mm(mm(x, self.W1), self.W2) + self.b
        return mm(x, self.W) + self.b

    def forward(self, x):
        return softmax_with_bias(self.preactivation(x))


def softmax_with_bias(z):
    """Theano 1.0.5's ``SoftmaxWithBias`` C kernel on float32 rows ``z``.

    ``e = exp(z - max(z))`` in float32, the row sum accumulated in double, each
    ``e`` multiplied by the double ``1 / sum`` and rounded back to float32.  The
    double accumulation matters: probabilities near 1 then round like Theano's,
    which keeps costs of near-certain words (``-log p`` ~ 1e-7) in agreement.
    (In a float64 model -- the tolerance model's shadow -- everything stays float64.)
    """
    e = torch.exp(z - z.amax(-1, keepdim=True))
    e64 = e.double()
    return (e64 * (1.0 / e64.sum(-1, keepdim=True))).to(z.dtype)
