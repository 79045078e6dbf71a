"""The network's arithmetic written once, over a backend: a layer (``MultiLayer``: the
embeddings and every projection), the word and context signals, the GRU step, the grConv
level, the readout (deep output) with its bigram term, the logits and Theano's
``SoftmaxWithBias`` (the attention's pieces are in :mod:`.attention`, over the same backend).

Each function here is the one definition of its piece.  The port's modules run it on torch
tensors (:data:`TORCH`: :mod:`~groundhog_port.model.layers`,
:class:`~groundhog_port.model.encoder.Encoder`, :class:`~groundhog_port.model.decoder.Decoder`,
so the literal and the batched search, scoring, sampling and training); the ONNX export runs
the same functions on graph values, its :class:`Ops` appending one node per operation
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

    def mm(self, x: Value, w: Value) -> Value:
        """``x @ w`` as GroundHog's ``utils.dot`` (utils.py:169): integer ``x`` picks rows of
        ``w`` (an embedding lookup)."""

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
    def left_neighbours(self, level: Value) -> Value:
        """Each position's left neighbour along axis 0: a zero row, then ``level[:-1]``."""

    def columns(self, x: Value, n: int) -> list[Value]:
        """The ``n`` columns of ``x``'s last axis, each kept as a ``(..., 1)`` axis."""

    def positive(self, ids: Value, like: Value) -> Value:
        """``ids > 0`` as a column ``(n, 1)`` of 0 and 1 in ``like``'s float type."""


class TorchOps:
    """The port's backend: torch tensors, products through :func:`~.numerics.mm`."""

    def mm(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        if x.dtype in (torch.int64, torch.int32):
            return w[x]
        return mm(x, w)

    def affine(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self.mm(x, w) + b

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

    def left_neighbours(self, level: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.zeros_like(level[:1]), level[:-1]])

    def columns(self, x: torch.Tensor, n: int) -> list[torch.Tensor]:
        return [x[..., i : i + 1] for i in range(n)]

    def positive(self, ids: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        return (ids > 0).to(like.dtype)[:, None]


TORCH = TorchOps()


def dense(
    ops: Ops, weight: Callable[[str], Value], x: Value, act: Activation, bias: bool = True
) -> Value:
    """One ``MultiLayer`` (ff_layers.py:28, fprop :247; GroundHog's models give it one layer)::

        y = act(x @ W + b)             x @ W by utils.dot: word ids pick rows of W

    ``weight(name)`` gives ``W`` and ``b``.  ``bias=False``: the layer's ``b`` is a zero
    that was never learnt (``learn_bias=False``), left out (the ONNX graphs leave it out;
    the port adds its zero)."""
    h = ops.affine(x, weight("W"), weight("b")) if bias else ops.mm(x, weight("W"))
    return ops.act(act, h)


#: ``layer(name, x)``: the ``MultiLayer`` ``name`` of an encoder or the decoder applied to ``x``
Layer = Callable[[str, Value], Value]


def word_signals(
    rec: RecurrentConfig, layer: Layer, emb: Value
) -> tuple[Value, Value | None, Value | None]:
    """A recurrent layer's inputs from word embeddings ``emb`` (encdec.py:703-735, :1097)::

        x = input_embedder(emb),  x_z = update_embedder(emb),  x_r = reset_embedder(emb)

    ``x_z`` only with ``rec.gating``, ``x_r`` only with ``rec.reseting`` (else None)."""
    return (
        layer("input_embedder", emb),
        layer("update_embedder", emb) if rec.gating else None,
        layer("reset_embedder", emb) if rec.reseting else None,
    )


def context_signals(
    ops: Ops,
    cfg: ModelConfig,
    layer: Layer,
    x: Value,
    x_z: Value | None,
    x_r: Value | None,
    ctx: Value,
) -> tuple[Value, Value | None, Value | None]:
    """The decoder's signals plus the context's contributions (``decoding_inputs``,
    encdec.py:861-896, :1100)::

        x += dec_inputter(ctx),  x_z += dec_updater(ctx),  x_r += dec_reseter(ctx)"""
    if cfg.decoding_inputs:
        x = ops.add(x, layer("dec_inputter", ctx))
        if x_z is not None:
            x_z = ops.add(x_z, layer("dec_updater", ctx))
        if x_r is not None:
            x_r = ops.add(x_r, layer("dec_reseter", ctx))
    return x, x_z, x_r


def prev_word_term(
    ops: Ops, cfg: ModelConfig, layer: Layer, y_prev: Value, emb_prev: Value
) -> Value | None:
    """The readout's bigram term in the one-step modes (encdec.py:1153):
    ``prev_readout(emb(y_{i-1}))``, None without ``bigram``.

    Legacy quirk kept: with ``check_first_word`` it is multiplied by ``(y_prev > 0)``, so it
    vanishes at the first step (y_prev = 0) and after any word of index 0."""
    if not cfg.bigram:
        return None
    term = layer("prev_readout", emb_prev)
    if cfg.check_first_word:
        term = ops.mul(ops.positive(y_prev, term), term)
    return term


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


def grconv_level(
    ops: Ops, rec: RecurrentConfig, weight: Callable[[str], Value], level: Value
) -> tuple[Value, Value]:
    """One level up the grConv (``RecursiveConvolutionalLayer.step_fprop``,
    rconv_layers.py:196-250, without the mask): ``(new level, gates)``::

        left  = (0, h_1, ..., h_{T-1})          each position's left child
        h~    = activation(h @ W + left @ U + b)
        w     = softmax_with_bias(left @ GU + h @ GW + Gb)      (new, left, right)
        h'    = w_new * h~ + w_left * left + w_right * h

    ``weight(name)`` gives the layer's ``W``, ``U``, ``b``, ``GW``, ``GU``, ``Gb`` (``W``
    multiplies the right child ``h_t``, ``U`` the left one ``h_{t-1}``)."""
    left = ops.left_neighbours(level)
    new = ops.act(
        rec.activation,
        ops.add(ops.add(ops.mm(level, weight("W")), ops.mm(left, weight("U"))), weight("b")),
    )
    gates = softmax_with_bias(
        ops, ops.add(ops.add(ops.mm(left, weight("GU")), ops.mm(level, weight("GW"))), weight("Gb"))
    )
    w_new, w_left, w_right = ops.columns(gates, 3)
    out = ops.add(ops.add(ops.mul(new, w_new), ops.mul(left, w_left)), ops.mul(level, w_right))
    return out, gates


def readout(
    ops: Ops,
    cfg: ModelConfig,
    layer: Layer,
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
