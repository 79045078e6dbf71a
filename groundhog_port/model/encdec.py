"""``RNNEncoderDecoder`` (encdec.py:1263): the model as search and scoring see it.

Searches and samplers see it only through the decoding interface
(:mod:`.decoding`); ``encode`` / ``initial_states`` / ``next_probs`` / ``next_states`` (the
four compiled functions sample.py uses) are that interface on one sentence, what the harness
replays recordings through; scoring and training see it through ``score`` and
``teacher_forced_probs``.  Everything is float32, GroundHog's ``floatX``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from . import decoding
from .config import ModelConfig
from .decoder import Decoder
from .encoder import Encoder, ragged_annotations
from .encoder import annotations as compose_annotations  # (the name clashes with __future__'s)


def looked_up(path: str) -> bool:
    """Whether the parameter at ``path`` is a word-embedding table, whose rows are looked up
    (every other matrix is the right operand of products ``x @ W``)."""
    return "approx_embedder" in path


def packed_product_weight(path: str, shape: Sequence[int]) -> bool:
    """Whether the parameter at ``path`` of ``shape`` is multiplied as ``x @ W`` through a
    packed product (:mod:`.packed`): a matrix that is not looked up, wider than the
    alignment's one column ``D`` (summed, :func:`~.attention.energy_scores`)."""
    return len(shape) == 2 and shape[1] > 1 and not looked_up(path)


@dataclass
class Scores:
    """What ``score.py`` and ``create_probs_computer`` return for a batch.

    ``cost (n,)`` is ``cost_per_sample`` (the score printed is ``-cost``);
    ``word_probs (T, n)``; ``alignment (T, S, n)`` or None without search;
    ``token_costs (T, n)``: ``-log p`` of every position before masking (the parity
    bounds use it to recognise costs of subnormal probabilities).
    """

    cost: torch.Tensor
    word_probs: torch.Tensor
    alignment: torch.Tensor | None
    token_costs: torch.Tensor | None = None

    def cpu(self) -> Scores:
        """The same scores as CPU tensors."""

        def on_cpu(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.cpu()

        return Scores(
            self.cost.cpu(), self.word_probs.cpu(), on_cpu(self.alignment), on_cpu(self.token_costs)
        )


class RNNEncoderDecoder(nn.Module):
    def __init__(self, cfg: ModelConfig, stable_softmax: bool = False) -> None:
        super().__init__()
        self.cfg = cfg
        self.stable = stable_softmax
        self.encoder = Encoder(cfg, cfg.enc, with_approx_embedder=True)
        self.backward_encoder = (
            Encoder(cfg, cfg.back_enc, with_approx_embedder=False)
            if cfg.needs_backward_encoder
            else None
        )
        self.decoder = Decoder(cfg)

    @property
    def dtype(self) -> torch.dtype:
        """float32 (GroundHog's ``floatX``); float64 for :meth:`float64_shadow` copies."""
        return self.decoder.hid_readout.b.dtype

    def float64_shadow(self) -> RNNEncoderDecoder:
        """A float64 copy computing the same functions from the same (float32) weights.

        Every step function, the legacy quirks included, runs in double precision, so its
        results are the exact values up to ~1e-16: the reference the float32 rounding noise
        of the port (and of Theano) is measured against (:mod:`groundhog_port.harness.tolerance`,
        ``groundhog-port parity --float64-reference``).
        """
        import copy

        shadow = copy.deepcopy(self)
        return shadow.double()

    def float32_probe(self, seed: int = 0, backward: bool = False) -> RNNEncoderDecoder:
        """The float64 shadow with every weight perturbed as float32 arithmetic perturbs it.

        Backward error analysis: a float32 dot product over ``n`` terms returns the exact
        dot product of weights each perturbed relatively by at most ``n * 2**-24``; with
        independent roundings the typical perturbation is ``sqrt(n) * 2**-24``.  Every
        weight ``w`` here becomes ``w * (1 + 2**-24 * sqrt(n) * z)``, ``z ~ N(0, 1)`` (fixed
        ``seed``), ``n`` its matrix's fan-in (GroundHog's ``x.dot(W)``: ``W.shape[0]``; 1 for
        biases and the word-embedding lookups).  ``backward``: ``n = max(W.shape)`` (a
        gradient also sums over the fan-out).  ``|probe - shadow|`` is the size of a float32
        implementation's error on this model and input, measured without any float32 run
        (:mod:`groundhog_port.harness.tolerance`).
        """
        import math

        probe = self.float64_shadow()
        gen = torch.Generator(device="cpu").manual_seed(int(seed))
        u = 2.0**-24
        with torch.no_grad():
            for name, p in probe.named_parameters():
                if p.dim() == 2 and not looked_up(name):
                    n = max(p.shape) if backward else p.shape[0]
                else:
                    n = 1
                z = torch.randn(p.shape, generator=gen, dtype=torch.float64)
                p.mul_(1.0 + u * math.sqrt(n) * z.to(p.device))
        return probe

    @property
    def device(self) -> torch.device:
        return self.decoder.hid_readout.b.device

    # -- the four functions of sample.py's BeamSearch -------------------------------------
    @torch.no_grad()
    def encode(self, seq: Sequence[int] | np.ndarray) -> torch.Tensor:
        """Annotations ``c (S, c_dim)`` of one sentence (``create_representation_computer``)."""
        return ragged_annotations(self, [seq])[0]

    @torch.no_grad()
    def initial_states(self, c: torch.Tensor) -> torch.Tensor:
        """``s_0`` as ``(1, dim)`` (``create_initializers``); ``c (S, c_dim)``."""
        return self.decoder.initial_state(c[:, None])

    @torch.no_grad()
    def next_probs(
        self,
        c: torch.Tensor,
        p_from_c: torch.Tensor | None,
        step: int,
        y_prev: torch.Tensor,
        s_prev: torch.Tensor,
    ) -> torch.Tensor:
        """``create_next_probs_computer`` (encdec.py:1457): ``p(y_i | y_<i, x)`` rows
        ``(n, V)`` for states ``s_prev`` of one sentence's ``c (S, c_dim)``: the decoding
        interface (:mod:`.decoding`) on a group of that one sentence."""
        src, sizes = decoding.Source.one(c, p_from_c), [(0, s_prev.shape[0])]
        ctx = decoding.context(self, src, step, s_prev, sizes)
        return decoding.probs(self, s_prev, ctx, y_prev, sizes)

    @torch.no_grad()
    def next_states(
        self,
        c: torch.Tensor,
        p_from_c: torch.Tensor | None,
        step: int,
        y: torch.Tensor,
        s_prev: torch.Tensor,
    ) -> torch.Tensor:
        """``create_next_states_computer`` (encdec.py:1466): ``s_i (n, dim)`` after emitting
        words ``y`` from states ``s_prev`` -- attending again with ``s_prev``, as GroundHog's
        compiled function does (the batched paths reuse the step's context: the same bits)."""
        src, sizes = decoding.Source.one(c, p_from_c), [(0, s_prev.shape[0])]
        ctx = decoding.context(self, src, step, s_prev, sizes)
        return decoding.advance(self, y, s_prev, ctx)

    def p_from_c(self, c: torch.Tensor) -> torch.Tensor | None:
        """``c @ A`` for one sentence's ``c (S, c_dim)`` -> ``(S, 1, dim)``, or None."""
        return self.decoder.p_from_c(c[:, None])

    # -- teacher forcing (training, scoring) ---------------------------------------------
    def teacher_forced_probs(
        self,
        x: torch.Tensor,
        x_mask: torch.Tensor | None,
        y: torch.Tensor,
        y_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        """``p(y_t = w | y_<t, x)`` of every word ``w`` at every target position, ``(T, n, V)``,
        of a ``(time, batch)`` batch: the output layer on the teacher-forced readouts
        (differentiable: what training's cost reads)."""
        c = compose_annotations(self, x, x_mask)
        readouts, _ = self.decoder.teacher_forced_readouts(c, x_mask, y, y_mask, self.stable)
        probs: torch.Tensor = self.decoder.output_layer(readouts)
        return probs

    # -- scoring ----------------------------------------------------------------------
    @torch.no_grad()
    def score(
        self,
        x: torch.Tensor,
        x_mask: torch.Tensor | None,
        y: torch.Tensor,
        y_mask: torch.Tensor | None,
    ) -> Scores:
        """Teacher-forced costs of a ``(time, batch)`` batch, as ``SoftmaxLayer.get_cost``.

        ``cost_t = -log(p_t[y_t])`` from the float32 probability (cost_layers.py:1132),
        so an underflowed probability gives ``inf``.  Legacy quirk kept: padded target
        positions (id 0, mask 0) are still scored and then multiplied by the mask, so
        ``inf * 0 = nan`` poisons the sentence sum exactly as in score.py
        (docs/recordings.md, "Non-finite scores").  ``word_probs = exp(-cost)``, masked to 1 outside.
        """
        c = compose_annotations(self, x, x_mask)
        readouts, alignment = self.decoder.teacher_forced_readouts(
            c, x_mask, y, y_mask, self.stable
        )
        p_target = self.decoder.output_layer.target_probs(readouts, y)
        cost = token_costs = -torch.log(p_target)
        word_probs = torch.exp(-cost)
        if y_mask is not None:
            word_probs = word_probs * y_mask + 1 - y_mask
            cost = cost * y_mask
        return Scores(cost.sum(0), word_probs, alignment, token_costs)
