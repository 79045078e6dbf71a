"""The network as decoding sees it: the one interface of every search and sampler.

fairseq's generator sees its model only through ``forward_encoder`` / ``forward_decoder`` /
``reorder_incremental_state``, Sockeye's through ``encode_and_initialize`` /
``decode_step``; here, for a group of source sentences decoded together (each with its own
number of rows: hypotheses of a beam, or samples)::

    src  = encode(model, seqs)                  annotations c_b and p_from_c_b = c_b @ A,
                                                once per sentence, outside the time loop
    s    = init_states(model, src)              s_0 of each sentence, (B, dim)
    ctx  = context(model, src, k, s, sizes)     ragged attention (attention.ragged_context),
                                                or c_b[min(k, S_b - 1)] without attention
    z    = logits(model, s, ctx, y_prev, ws, T) readout (with the bigram term), then
                                                z = T * (t @ W_o + b_o)
    out  = output.normalise(z, single_rows)     softmax_with_bias in parts
    s'   = advance(model, y, s, ctx)            the GRU step with the step's context
    s'   = reorder(s', origin)                  the rows that survive, in their new order

:func:`prepare` runs one such step on a one-word source, so that every product's packed
weight (:mod:`.packed`) exists before worker processes fork and share it.

Reusing the step's context in :func:`advance` equals GroundHog's ``next_states``, which
attends again with the gathered states: a row's context depends only on its own state and
sentence (:func:`~groundhog_port.model.attention.ragged_context`).  The one-sentence
functions ``next_probs`` / ``next_states`` of
:class:`~groundhog_port.model.encdec.RNNEncoderDecoder` (what the harness replays recorded
states through) are these calls on a group of one sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from . import attention, encoder, output
from .decoder import Decoder
from .workspace import Workspace


class Network(encoder.Encoders, Protocol):
    """What this interface reads of an :class:`~groundhog_port.model.encdec.RNNEncoderDecoder`
    (named here without importing it: encdec imports this module)."""

    decoder: Decoder
    stable: bool


@dataclass
class Source:
    """A group of source sentences, encoded: ``c[b] (S_b, c_dim)`` the annotations of
    sentence ``b``; ``c_pad (S_max, B, c_dim)`` the same, zero-padded; ``p_from_c[b]
    (S_b, dim)`` = ``c[b] @ A`` (None without attention); ``lens (B,)`` the ``S_b``."""

    c: list[torch.Tensor]
    c_pad: torch.Tensor
    p_from_c: list[torch.Tensor] | None
    lens: torch.Tensor

    @classmethod
    def of(cls, model: Network, cs: Sequence[torch.Tensor]) -> Source:
        """The group of the annotations ``cs`` (one ``(S_b, c_dim)`` tensor per sentence)."""
        device = model.device
        lens = torch.tensor([c.shape[0] for c in cs], dtype=torch.int64, device=device)
        c_pad = cs[0][:, None] if len(cs) == 1 else _padded(cs, model.cfg.c_dim)
        p_pad = model.decoder.p_from_c(c_pad)  # c_pad @ A, (S_max, B, dim) or None
        p_from_c = (
            None
            if p_pad is None
            else [p_pad[: c.shape[0], b].contiguous() for b, c in enumerate(cs)]
        )
        return cls(list(cs), c_pad, p_from_c, lens)

    @classmethod
    def one(cls, c: torch.Tensor, p_from_c: torch.Tensor | None) -> Source:
        """The group of one sentence's ``c (S, c_dim)`` and ``p_from_c`` (``(S, 1, dim)`` as
        :meth:`~groundhog_port.model.encdec.RNNEncoderDecoder.p_from_c` gives it, or None)."""
        S = c.shape[0]
        p = None if p_from_c is None else [p_from_c.reshape(S, -1)]
        return cls([c], c[:, None], p, torch.tensor([S], device=c.device))


def _padded(cs: Sequence[torch.Tensor], c_dim: int) -> torch.Tensor:
    S = max(c.shape[0] for c in cs)
    c_pad = cs[0].new_zeros((S, len(cs), c_dim))
    for b, c in enumerate(cs):
        c_pad[: c.shape[0], b] = c
    return c_pad


def annotate(model: Network, seqs: Sequence[Sequence[int] | np.ndarray]) -> list[torch.Tensor]:
    """Annotations ``c (S_b, c_dim)`` of each sentence (each ending with end-of-sequence),
    equal to ``model.encode(seq)``: :func:`~groundhog_port.model.encoder.ragged_annotations`."""
    return encoder.ragged_annotations(model, seqs)


def encode(model: Network, seqs: Sequence[Sequence[int] | np.ndarray]) -> Source:
    """The :class:`Source` of ``seqs`` (each ending with end-of-sequence)."""
    return Source.of(model, annotate(model, seqs))


def init_states(model: Network, src: Source) -> torch.Tensor:
    """``s_0 (B, dim)`` of each sentence (``create_initializers``)."""
    return model.decoder.initial_state(src.c_pad)


def context(
    model: Network,
    src: Source,
    k: int,
    states: torch.Tensor,
    sizes: Sequence[tuple[int, int]],
    workspace: Workspace | None = None,
) -> torch.Tensor:
    """``ctx (R, c_dim)`` of the rows ``states (R, dim)`` at step ``k``; ``sizes``: ``(b, n_b)``
    of each sentence in row order (its ``n_b`` rows consecutive).

    With attention :func:`~groundhog_port.model.attention.ragged_context`; without,
    ``c_b[min(k, S_b - 1)]`` (``c_pos``, encdec.py:1023)."""
    if model.cfg.search:
        assert src.p_from_c is not None  # Source.of makes it for an attention model
        dec = model.decoder
        return attention.ragged_context(
            states, sizes, src.c, src.p_from_c, dec.B, dec.D, model.stable, workspace
        )
    device = states.device
    sent = torch.repeat_interleave(
        torch.tensor([b for b, _ in sizes], device=device),
        torch.tensor([n for _, n in sizes], device=device),
    )  # each row's sentence
    pos = torch.clamp(src.lens[sent], max=k + 1) - 1
    return src.c_pad[pos, sent]


def logits(
    model: Network,
    states: torch.Tensor,
    ctx: torch.Tensor,
    y_prev: torch.Tensor,
    workspace: Workspace | None = None,
    T: float | None = None,
) -> torch.Tensor:
    """The output layer's logits ``(R, V)`` of rows with previous words ``y_prev``: the
    readout ``ctx @ C_o + s @ U_o + b + [y_prev > 0] E y_prev @ V_o`` (then the maxout), then
    ``T * (t @ W_o + b_o)`` (:meth:`~groundhog_port.model.layers.SoftmaxLayer.logits`)."""
    dec = model.decoder
    emb = dec.approx_embedder(y_prev)
    t = dec.readout(states, ctx, dec.prev_word_term(y_prev, emb))
    z: torch.Tensor = dec.output_layer.logits(t, workspace, T)
    return z


def probs(
    model: Network,
    states: torch.Tensor,
    ctx: torch.Tensor,
    y_prev: torch.Tensor,
    sizes: Sequence[tuple[int, int]],
    workspace: Workspace | None = None,
    T: float | None = None,
) -> torch.Tensor:
    """``p(y | ...)`` rows ``(R, V)``: :func:`logits` through :func:`output.normalise`, each
    sentence of one row summed as a one-row call sums it."""
    z = logits(model, states, ctx, y_prev, workspace, T)
    return output.normalise(z, single_rows(sizes), workspace).probs()


def single_rows(sizes: Sequence[tuple[int, int]]) -> list[int]:
    """The rows that are their sentence's only row (:mod:`.output`'s one-row rule)."""
    out, r = [], 0
    for _, n in sizes:
        if n == 1:
            out.append(r)
        r += n
    return out


def advance(
    model: Network, y: torch.Tensor, states: torch.Tensor, ctx: torch.Tensor
) -> torch.Tensor:
    """``s_i (R, dim)`` after emitting words ``y (R,)`` from ``states`` with the step's
    contexts ``ctx``: the words' signals plus the contexts', then the GRU step."""
    return model.decoder.transition_step(y, states, ctx)


def reorder(rows: torch.Tensor, origin: torch.Tensor) -> torch.Tensor:
    """The rows of ``rows`` (states, contexts) that survive a step, in their new order
    (``origin[i]``: the row new row ``i`` extends)."""
    return rows.index_select(0, origin)


def prepare(model: Network) -> None:
    """Make every product of decoding ready before the first sentence: one step of this
    interface on a one-word source (the end-of-sequence symbol) packs each weight the
    products multiply by (:mod:`.packed`, for torch's thread count now).  Worker processes
    forked afterwards share those packed copies instead of each packing its own (issue 54,
    RNNsearch-50, two workers: the three processes' summed PSS 1,218 -> 944 MB; the time to
    the first decoded step about the same)."""
    device = model.device
    with torch.inference_mode():
        src = encode(model, [np.array([model.cfg.null_sym_source], dtype=np.int64)])
        s = init_states(model, src)
        ctx = context(model, src, 0, s, [(0, 1)])
        y = torch.zeros(1, dtype=torch.int64, device=device)
        logits(model, s, ctx, y)
        advance(model, y, s, ctx)
