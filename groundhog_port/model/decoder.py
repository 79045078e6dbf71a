"""The decoder (``Decoder``, encdec.py:803): initial state, transition, readout.

Pure step functions shared by teacher-forced scoring and by search, in the paper's
symbols (Bahdanau et al. 2015, appendix A.2.2; the legacy-name table,
:func:`groundhog_port.legacy.checkpoint.paper_symbol`, maps each to its GroundHog weight):
s = decoder state, y = target word, c = annotations (the paper's ``h_j``), E the target
embedding; row vectors, ``x @ W`` as GroundHog orients its weights::

    s_0      = tanh(c_1[-dim:] @ W_s + b[W_s])              (zeros when bias_code=False)
    ctx_i    = attention(s_{i-1}, c)                         (search)  |  c[min(i, S-1)]  (encdec)
    s_i      = GRU(s_{i-1}, E y_i @ W + ctx_i @ C)           (gates likewise: W_z, C_z, U_z; W_r, C_r, U_r)
    t_i      = ctx_i @ C_o + s_{i-1} @ U_o + b[U_o] + [y_{i-1} > 0] * E y_{i-1} @ V_o
    p(y_i)   = softmax(maxout(t_i) @ W_o + b[W_o])           (W_o = W1 @ W2 when rank_n_approx > 0)

Step order as in GroundHog's beam search (``RNNEncoderDecoder.next_probs`` /
``next_states`` compose these pieces): ``next_probs`` reads out from the *previous*
state ``s_{i-1}``, the context attended with ``s_{i-1}`` and the previous word;
``next_states`` then computes ``s_i`` from the chosen word.
"""

from __future__ import annotations

import torch
from torch import nn

from . import attention, functional
from .config import ModelConfig
from .layers import IDENTITY, MultiLayer, RecurrentLayer, SoftmaxLayer, _param


class Decoder(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        dim, rank, c_dim, rec = cfg.dim, cfg.rank_n_approx, cfg.c_dim, cfg.dec
        self.approx_embedder = MultiLayer(cfg.n_sym_target, rank, cfg.rank_n_activ)
        self.input_embedder = MultiLayer(rank, dim, IDENTITY)
        self.update_embedder = (
            MultiLayer(rank, dim, IDENTITY, learn_bias=False) if rec.gating else None
        )
        self.reset_embedder = (
            MultiLayer(rank, dim, IDENTITY, learn_bias=False) if rec.reseting else None
        )
        self.transition = RecurrentLayer(dim, rec)
        if cfg.search:
            # the alignment matrices of RecurrentLayerWithSearch (encdec.py:244)
            self.A = _param(c_dim, dim)
            self.B = _param(dim, dim)
            self.D = _param(dim, 1)
        # _create_initialization_layers (encdec.py:847): ZeroLayer without bias_code
        self.initializer = MultiLayer(dim, dim, cfg.dec_init_activ) if cfg.bias_code else None

        # _create_decoding_layers (encdec.py:861): context -> input / update / reset signals
        def ctx_layer(on: bool) -> MultiLayer | None:
            return MultiLayer(c_dim, dim, IDENTITY, learn_bias=False) if on else None

        self.dec_inputter = ctx_layer(cfg.decoding_inputs)
        self.dec_updater = ctx_layer(cfg.decoding_inputs and rec.gating)
        self.dec_reseter = ctx_layer(cfg.decoding_inputs and rec.reseting)
        # _create_readout_layers (encdec.py:897)
        self.repr_readout = MultiLayer(c_dim, dim, IDENTITY, learn_bias=False)
        self.hid_readout = MultiLayer(dim, dim, IDENTITY)
        self.prev_readout = (
            MultiLayer(rank, dim, IDENTITY, learn_bias=False) if cfg.bigram else None
        )
        self.output_layer = SoftmaxLayer(cfg.softmax_in, cfg.n_sym_target, rank)

    # -- pieces -----------------------------------------------------------------------
    def initial_state(self, c: torch.Tensor) -> torch.Tensor:
        """``s_0`` from the first annotation's last ``dim`` columns; ``c (S, n, c_dim)``."""
        init_c = c[0, :, -self.cfg.dim :]
        if self.initializer is None:
            return torch.zeros_like(init_c)
        s0: torch.Tensor = self.initializer(init_c)
        return s0

    def signals(
        self, y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """Word embedding and its input / update / reset contributions
        (:func:`~groundhog_port.model.functional.word_signals`)."""
        emb = self.approx_embedder(y)
        return (emb, *functional.word_signals(self.cfg.dec, self._layer, emb))

    def p_from_c(self, c: torch.Tensor) -> torch.Tensor | None:
        return attention.precompute_p_from_c(c, self.A) if self.cfg.search else None

    def context(
        self,
        s_prev: torch.Tensor,
        c: torch.Tensor,
        p_from_c: torch.Tensor | None,
        step: int,
        c_mask: torch.Tensor | None = None,
        stable: bool = False,
        c_rows: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(ctx, alpha)`` at target position ``step``; ``alpha`` is None without search
        (``c_rows``: see :func:`~groundhog_port.model.attention.align`).

        Without search GroundHog uses ``c[min(step, S - 1)]`` (``c_pos``, encdec.py:1023;
        ``PadLayer`` does the same for whole sequences, encdec.py:516).
        """
        if self.cfg.search:
            assert p_from_c is not None  # the search model's p_from_c
            return attention.align(s_prev, c, p_from_c, self.B, self.D, c_mask, stable, c_rows)
        ctx = c[min(step, c.shape[0] - 1)]
        return ctx.expand(s_prev.shape[0], -1), None

    def context_signals(
        self, x: torch.Tensor, x_z: torch.Tensor | None, x_r: torch.Tensor | None, ctx: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """Word signals plus the context's contributions (``decoding_inputs``,
        :func:`~groundhog_port.model.functional.context_signals`)."""
        return functional.context_signals(functional.TORCH, self.cfg, self._layer, x, x_z, x_r, ctx)

    def transition_step(
        self, y: torch.Tensor, s_prev: torch.Tensor, ctx: torch.Tensor
    ) -> torch.Tensor:
        """``s_i`` after emitting words ``y (n,)`` from states ``s_prev`` with contexts
        ``ctx``: the words' signals plus the contexts' contributions, then the GRU step."""
        _, x, x_z, x_r = self.signals(y)
        x, x_z, x_r = self.context_signals(x, x_z, x_r, ctx)
        return self.transition.step(x, x_z, x_r, s_prev)

    def readout(
        self, s_prev: torch.Tensor, ctx: torch.Tensor, prev_term: torch.Tensor | None
    ) -> torch.Tensor:
        """Output layer input: ``repr(ctx) + hid(s_prev) + prev_term``, then the maxout
        (:func:`~groundhog_port.model.functional.readout`, the one definition the ONNX export
        reads too)."""
        t: torch.Tensor = functional.readout(
            functional.TORCH, self.cfg, self._layer, ctx, s_prev[..., : self.cfg.dim], prev_term
        )
        return t

    def _layer(self, name: str, x: torch.Tensor) -> torch.Tensor:
        """The ``MultiLayer`` ``name`` of this decoder applied to ``x``."""
        y: torch.Tensor = getattr(self, name)(x)
        return y

    def prev_word_term(self, y_prev: torch.Tensor, emb_prev: torch.Tensor) -> torch.Tensor | None:
        """Bigram term in the one-step modes (encdec.py:1153;
        :func:`~groundhog_port.model.functional.prev_word_term`: the ``y_prev > 0`` quirk)."""
        term: torch.Tensor | None = functional.prev_word_term(
            functional.TORCH, self.cfg, self._layer, y_prev, emb_prev
        )
        return term

    # -- teacher forcing (EVALUATION mode, encdec.py:963) -------------------------------
    def teacher_forced_readouts(
        self,
        c: torch.Tensor,
        c_mask: torch.Tensor | None,
        y: torch.Tensor,
        y_mask: torch.Tensor | None,
        stable: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The output layer's inputs ``(T, n, softmax_in)`` of every target position, and
        the alignments ``(T, S, n)`` (None without search); ``c (S, n, c_dim)``, ``y (T, n)``,
        masks ``(S, n)`` / ``(T, n)``.  The output layer turns them into the probabilities
        of every word, ``(T, n, n_sym_target)``, or of the target words alone, ``(T, n)``
        (:meth:`~groundhog_port.model.layers.SoftmaxLayer.target_probs`: what scoring needs).

        Only the recurrence runs step by step: the readout's products read states and
        contexts that the loop has already produced, so they run once over all ``T * n``
        rows afterwards, and so do the context signals of RNNencdec, whose contexts are
        known in advance (:func:`~groundhog_port.model.numerics.mm` makes a row's result
        independent of the row count, so this is the step-by-step arithmetic).  The
        previous-word term is ``Shift``-ed by one position with zeros first (no ``y > 0``
        check in this mode, encdec.py:1159).
        """
        s = self.initial_state(c)
        emb, x, x_z, x_r = self.signals(y)
        T = y.shape[0]

        def at(a: torch.Tensor | None, t: int) -> torch.Tensor | None:
            return None if a is None else a[t]

        states: list[torch.Tensor] = []
        contexts: list[torch.Tensor] = []
        alphas: list[torch.Tensor] = []
        if self.cfg.search:
            p_from_c = self.p_from_c(c)
            # one batch-major copy of c for the contexts of all steps (attention.align)
            c_rows = c.transpose(0, 1).contiguous() if c.shape[1] > 1 else None
        else:
            # RNNencdec: the contexts do not depend on the states, so their products
            # run once over all T * n rows, before the recurrence
            contexts = [self.context(s, c, None, t)[0] for t in range(T)]
            x, x_z, x_r = self.context_signals(x, x_z, x_r, torch.stack(contexts))
        for t in range(T):
            states.append(s)
            signals = x[t], at(x_z, t), at(x_r, t)
            if self.cfg.search:
                ctx, alpha = self.context(s, c, p_from_c, t, c_mask, stable, c_rows)
                contexts.append(ctx)
                if alpha is not None:  # always, with search
                    alphas.append(alpha)
                signals = self.context_signals(*signals, ctx)
            s = self.transition.step(*signals, s, at(y_mask, t))
        s_prev = torch.stack(states)
        prev = None
        if self.prev_readout is not None:
            prev = torch.cat(
                [torch.zeros_like(s_prev[:1, :, : self.cfg.dim]), self.prev_readout(emb[:-1])]
            )
        readouts = self.readout(s_prev, torch.stack(contexts), prev)
        return readouts, (torch.stack(alphas) if self.cfg.search else None)
