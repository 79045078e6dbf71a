"""Forward / backward encoders and the annotation composition (encdec.py:659, :1296).

Annotations ``c`` (the paper's ``h_j``) are the concatenation, in this order, of
the components the state switches on::

    forward        h->_j                         (T, batch, dim)
    last_forward   h->_T replicated over j
    backward       h<-_j
    last_backward  h<-_1 (backward state after reading the whole sentence), replicated

so ``c_dim = n_components * dim``.

With ``enc_rec_layer='RecursiveConvolutionalLayer'`` (the grConv of Cho et al. 2014b) the
forward encoder's output is not one state per word but the root of the gated pyramid,
one vector per sentence (rconv_layers.py:311): ``last_forward`` replicates it over the
source positions (encdec.py:1339/1375), and ``forward`` alone is that single position.

No ``from __future__ import annotations`` here: that import binds the name ``annotations``,
which is this module's function (Python 3.10 evaluates these annotations as they are).
"""

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import torch
from torch import nn

from . import functional
from .config import GRCONV, ModelConfig, RecurrentConfig
from .layers import IDENTITY, MultiLayer, RecurrentLayer, RecursiveConvolutionalLayer


class Encoder(nn.Module):
    """One direction: embedders + a ``RecurrentLayer`` (``Encoder.build_encoder``, encdec.py:705).

    Words go through the (shared) low-rank ``approx_embedder`` and then three
    projections feeding the input, update-gate and reset-gate signals; the
    gate projections have no learned bias (``learn_bias=False``, encdec.py:599).
    A grConv encoder has only the input projection (its gates come from the layer
    itself; the config refuses the gate embedders it would leave unused).
    """

    def __init__(self, cfg: ModelConfig, rec: RecurrentConfig, with_approx_embedder: bool) -> None:
        super().__init__()
        if with_approx_embedder:
            self.approx_embedder = MultiLayer(cfg.n_sym_source, cfg.rank_n_approx, cfg.rank_n_activ)
        self.input_embedder = MultiLayer(cfg.rank_n_approx, cfg.dim, IDENTITY)
        self.update_embedder = (
            MultiLayer(cfg.rank_n_approx, cfg.dim, IDENTITY, learn_bias=False)
            if rec.gating
            else None
        )
        self.reset_embedder = (
            MultiLayer(cfg.rank_n_approx, cfg.dim, IDENTITY, learn_bias=False)
            if rec.reseting
            else None
        )
        self.rec = rec
        self.grconv = rec.layer == GRCONV
        self.transition = (
            RecursiveConvolutionalLayer(cfg.dim, rec)
            if self.grconv
            else RecurrentLayer(cfg.dim, rec)
        )

    def forward(
        self, approx_embeddings: torch.Tensor, mask: torch.Tensor | None, h0: torch.Tensor
    ) -> torch.Tensor:
        """Hidden states ``(T, batch, dim)`` of this direction over ``approx_embeddings``,
        or for grConv the roots ``(1, batch, dim)`` (encdec.py:766 passes the mask to both)."""
        # (:func:`~groundhog_port.model.functional.word_signals`; grConv has no gates)
        x, x_z, x_r = functional.word_signals(self.rec, self._layer, approx_embeddings)
        if self.grconv:
            roots: torch.Tensor = self.transition(x, mask)
            return roots
        assert isinstance(self.transition, RecurrentLayer)
        return self.transition.scan(x, x_z, x_r, h0, mask)

    def _layer(self, name: str, x: torch.Tensor) -> torch.Tensor:
        """The ``MultiLayer`` ``name`` of this encoder applied to ``x``."""
        y: torch.Tensor = getattr(self, name)(x)
        return y


class Encoders(Protocol):
    """What the functions below read of an
    :class:`~groundhog_port.model.encdec.RNNEncoderDecoder` (named here without importing
    it: encdec imports this module)."""

    cfg: ModelConfig
    encoder: Encoder
    backward_encoder: Encoder | None

    @property
    def dtype(self) -> torch.dtype: ...

    @property
    def device(self) -> torch.device: ...


def directions(
    model: Encoders,
    x: torch.Tensor,
    x_rev: torch.Tensor,
    x_mask: torch.Tensor | None = None,
    x_rev_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The states of both encoders, each in its reading order (encdec.py:1322-1337).

    ``x (T, batch)`` word ids and ``x_rev`` the same sentences read backward (with their
    masks, or None): forward ``(T, batch, dim)`` (grConv: the roots ``(1, batch, dim)``) and
    backward ``(T, batch, dim)`` over ``x_rev``, or None without a backward encoder.  A
    GroundHog quirk kept here: the backward encoder embeds with the FORWARD encoder's
    ``approx_embedder`` (encdec.py:1330); its own approx embedder is created by the
    original but plays no part, is never saved, and is not built here.
    """
    h0 = x.new_zeros((x.shape[1], model.cfg.dim), dtype=model.dtype)
    forward = model.encoder(model.encoder.approx_embedder(x), x_mask, h0)
    if not model.cfg.needs_backward_encoder:
        return forward, None
    assert model.backward_encoder is not None  # built when the config needs it
    backward = model.backward_encoder(model.encoder.approx_embedder(x_rev), x_rev_mask, h0)
    return forward, backward


def compose(
    cfg: ModelConfig, forward: torch.Tensor, backward: torch.Tensor | None, length: int
) -> torch.Tensor:
    """``c (length, batch, c_dim)``: the components the config switches on, concatenated in
    the order of the module docstring (encdec.py:1339-1381).  ``forward`` and ``backward``
    (or None) are in SOURCE order: ``backward[j]`` is the backward state at word ``j``."""
    parts: list[torch.Tensor] = []
    if cfg.forward:
        parts.append(forward)
    if cfg.last_forward:
        parts.append(forward[-1:].expand(length, -1, -1))
    if backward is not None:
        if cfg.backward:
            parts.append(backward)
        if cfg.last_backward:
            parts.append(backward[:1].expand_as(backward))
    return torch.cat(parts, dim=-1)


def annotations(
    model: Encoders, x: torch.Tensor, x_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """``c`` for a batch ``x`` of word ids ``(T, batch)`` (mask ``(T, batch)`` or None).

    The backward encoder reads ``x[::-1]`` with ``x_mask[::-1]`` (so in a padded batch it
    starts on padding and keeps its zero state there): :func:`directions`, then
    :func:`compose`.
    """
    forward, backward = directions(
        model, x, x.flip(0), x_mask, None if x_mask is None else x_mask.flip(0)
    )
    return compose(model.cfg, forward, None if backward is None else backward.flip(0), x.shape[0])


def ragged_annotations(
    model: Encoders, seqs: Sequence[Sequence[int] | np.ndarray]
) -> list[torch.Tensor]:
    """Decoding's schedule: annotations ``c (S_b, c_dim)`` of each sentence of a group, each
    equal to :func:`annotations` of that sentence alone.

    The sentences run as one padded batch without a mask: forward states at real positions
    only see earlier (real) words, and the backward encoder reads each sentence reversed
    *within its own length* (padding after it), so it never starts on padding.  (Teacher
    forcing's :func:`annotations` of a masked batch reads ``x[::-1]``, starting on padding
    that the mask holds at the zero state.)  A grConv root depends on the sentence's length
    (its pyramid stops there): those sentences are encoded one by one."""
    device = model.device
    if model.encoder.grconv:
        return [
            annotations(model, torch.as_tensor(np.asarray(s), device=device)[:, None])[:, 0]
            for s in seqs
        ]
    lens = [len(s) for s in seqs]
    S, B = max(lens), len(seqs)
    x = torch.zeros((S, B), dtype=torch.int64)
    x_rev = torch.zeros((S, B), dtype=torch.int64)
    for b, s in enumerate(seqs):
        t = torch.as_tensor(np.asarray(s), dtype=torch.int64)
        x[: len(s), b] = t
        x_rev[: len(s), b] = t.flip(0)  # reversed within its own length
    forward, backward = directions(model, x.to(device), x_rev.to(device))
    out = []
    for b, n in enumerate(lens):
        bw = None if backward is None else backward[:n, b : b + 1].flip(0)
        out.append(compose(model.cfg, forward[:n, b : b + 1], bw, n)[:, 0].contiguous())
    return out


@torch.no_grad()
def grconv_gates(model: Encoders, seq: Sequence[int] | np.ndarray) -> torch.Tensor:
    """The gating coefficients of the grConv over one sentence ``seq`` (word ids, ``<eos>``
    included): ``(T - 1, T, 3)`` float32, level ``k`` (1-based, row ``k - 1``) at position
    ``t`` = (w_new, w_left, w_right) of the node summarising words ``t-k .. t``.

    What ``experiments/nmt/tree.py`` steps through (tree.py:79-83, 125: ``proj_x`` then
    ``step_fprop(None, h, return_gates=True)`` once per level, no mask).  Positions
    ``t < k`` reach past the first word (zeros on the left) and are not part of the tree.
    """
    enc = model.encoder
    if not enc.grconv:
        raise ValueError(
            "the gating tree exists only for enc_rec_layer='RecursiveConvolutionalLayer'"
        )
    assert isinstance(enc.transition, RecursiveConvolutionalLayer)
    x = torch.as_tensor(seq, dtype=torch.int64, device=model.device)[:, None]
    h = enc.input_embedder(enc.approx_embedder(x))
    gates = [g[:, 0] for _, g in enc.transition.climb(h)]
    return torch.stack(gates) if gates else h.new_zeros((0, len(seq), 3))
