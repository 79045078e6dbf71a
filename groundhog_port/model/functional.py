"""The decoder's arithmetic written once, over a backend: the GRU step, the readout (deep
output), the logits and Theano's ``SoftmaxWithBias``.

Each function here is the one definition of its piece.  The port's modules run it on torch
tensors (:data:`TORCH`: :class:`~groundhog_port.model.layers.RecurrentLayer`,
:meth:`~groundhog_port.model.decoder.Decoder.readout`,
:func:`~groundhog_port.model.layers.softmax_with_bias`, so the literal and the batched
search, scoring, sampling and training); the ONNX export runs the same functions on graph
values, its :class:`Ops` appending one node per operation
(:mod:`groundhog_port.export.onnx_graphs`).  A change here changes both.

The operations are listed in :class:`Ops`; each function applies them in the order the
port's float32 arithmetic needs (same operations in the same order: the same bits).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import torch

from .activations import Activation
from .config import ModelConfig, RecurrentConfig
from .numerics import mm

#: a backend's value: a torch tensor, or the name of an ONNX graph value
Value = Any


class Ops(Protocol):
    """What the definitions below need of a backend."""

    def mm(self, x: Value, w: Value) -> Value: ...
    def affine(self, x: Value, w: Value, b: Value) -> Value:
        """``x @ w + b``."""

    def add(self, a: Value, b: Value) -> Value: ...
    def sub(self, a: Value, b: Value) -> Value: ...
    def mul(self, a: Value, b: Value) -> Value: ...
    def one_minus(self, z: Value) -> Value: ...
    def act(self, act: Activation, x: Value) -> Value: ...
    def exp(self, x: Value) -> Value: ...
    def row_max(self, x: Value) -> Value: ...
    def to_double(self, x: Value) -> Value: ...
    def row_sum(self, x: Value) -> Value: ...
    def reciprocal(self, x: Value) -> Value: ...
    def cast_like(self, x: Value, like: Value) -> Value: ...


class TorchOps:
    """The port's backend: torch tensors, products through :func:`~.numerics.mm`."""

    def mm(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return mm(x, w)

    def affine(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return mm(x, w) + b

    def add(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b

    def sub(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a - b

    def mul(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a * b

    def one_minus(self, z: torch.Tensor) -> torch.Tensor:
        return 1 - z

    def act(self, act: Activation, x: torch.Tensor) -> torch.Tensor:
        return act(x)

    def exp(self, x: torch.Tensor) -> torch.Tensor:
        return torch.exp(x)

    def row_max(self, x: torch.Tensor) -> torch.Tensor:
        return x.amax(-1, keepdim=True)

    def to_double(self, x: torch.Tensor) -> torch.Tensor:
        return x.double()

    def row_sum(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(-1, keepdim=True)

    def reciprocal(self, x: torch.Tensor) -> torch.Tensor:
        return 1.0 / x

    def cast_like(self, x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        return x.to(like.dtype)


TORCH = TorchOps()


def gru_step(
    ops: Ops,
    rec: RecurrentConfig,
    weight: Callable[[str], Value],
    x: Value,
    x_z: Value | None,
    x_r: Value | None,
    h_prev: Value,
) -> Value:
    """``RecurrentLayer.step_fprop`` (rec_layers.py:1018), without the mask::

        r   = reseter(h_prev @ R + x_r)
        h~  = activation((r * h_prev) @ W + x)
        z   = gater(h_prev @ G + x_z)
        h   = z * h~ + (1 - z) * h_prev

    ``weight(name)`` gives the layer's ``W``, ``G``, ``R``; ``x_z``/``x_r`` None without
    that gate.  GroundHog applies ``r`` before the product and keeps ``z`` for the NEW
    state (``torch.nn.GRU`` does neither)."""
    if rec.reseting and x_r is not None:
        r = ops.act(rec.reseter, ops.add(ops.mm(h_prev, weight("R")), x_r))
        h = ops.mm(ops.mul(r, h_prev), weight("W"))
    else:
        h = ops.mm(h_prev, weight("W"))
    h = ops.act(rec.activation, ops.add(h, x))
    if rec.gating and x_z is not None:
        z = ops.act(rec.gater, ops.add(ops.mm(h_prev, weight("G")), x_z))
        h = ops.add(ops.mul(z, h), ops.mul(ops.one_minus(z), h_prev))
    return h


def readout(
    ops: Ops,
    cfg: ModelConfig,
    layer: Callable[[str, Value], Value],
    ctx: Value,
    s_prev: Value,
    prev_term: Value | None,
) -> Value:
    """The output layer's input (encdec.py:1153-1190)::

        t = ctx @ C_o + s_{i-1} @ U_o + b_o  [+ prev_term]      then the maxout (deep_out)

    ``layer(name, x)`` applies the decoder's ``MultiLayer`` ``name`` (``repr_readout``,
    ``hid_readout``) to ``x``; ``prev_term`` is the bigram term or None."""
    t = ops.add(layer("repr_readout", ctx), layer("hid_readout", s_prev))
    if prev_term is not None:
        t = ops.add(t, prev_term)
    if cfg.deep_out:
        t = ops.act(cfg.unary_activ, t)  # UnaryOp(eval(unary_activ)): Maxout(k) groups
    return t


def logits(
    ops: Ops,
    weight: Callable[[str], Value],
    x: Value,
    low_rank: bool,
    T: Value | None = None,
) -> Value:
    """The output layer's logits (``SoftmaxLayer``, cost_layers.py:961)::

        z = T * (x @ W + b)          W = W1 @ W2, two products, with rank_n_approx

    ``weight(name)`` gives ``W`` (or ``W1``, ``W2``) and ``b``; ``T`` the inverse
    temperature of ``fprop(state_below, temp=T)`` (the sampler's), None for 1."""
    h = ops.mm(x, weight("W1")) if low_rank else x
    z = ops.affine(h, weight("W2" if low_rank else "W"), weight("b"))
    return z if T is None else ops.mul(z, T)


def softmax_with_bias(ops: Ops, z: Value) -> Value:
    """Theano 1.0.5's ``SoftmaxWithBias`` C kernel on float32 rows ``z``.

    ``e = exp(z - max(z))`` in float32, the row sum accumulated in double, each ``e``
    multiplied by the double ``1 / sum`` and rounded back to ``z``'s type.  The double
    accumulation matters: probabilities near 1 then round like Theano's, which keeps costs
    of near-certain words (``-log p`` ~ 1e-7) in agreement.  (In a float64 model -- the
    tolerance model's shadow -- everything stays float64.)"""
    e = ops.exp(ops.sub(z, ops.row_max(z)))
    e64 = ops.to_double(e)
    return ops.cast_like(ops.mul(e64, ops.reciprocal(ops.row_sum(e64))), z)
