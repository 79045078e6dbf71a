"""GroundHog's RNNencdec / RNNsearch in plain numpy float32, for any architecture its state
describes: the second implementation that ``tools/numpy_trace_producer.py`` records traces
with.

Written from the original (GroundHog 4d2433b), never from the port: every option the
network reads is read here from the state dict with the original's own lookup
(``prefix_lookup``, encdec.py:560), every weight by the name GroundHog saves it under.
What each option does, with the line it comes from:

* ``rank_n_activ`` on the low-rank word embeddings (``approx_embedder``, encdec.py:567;
  MultiLayer.fprop, ff_layers.py:275-281: ``act(W[x] + b)``); the output layer's own
  low-rank product never applies it (SoftmaxLayer's ``rank_n_activ`` defaults to the
  identity, cost_layers.py:38, and encdec.py:941/951 does not pass the state's);
* ``<prefix>_rec_gating`` / ``_rec_reseting``: whether the update / reset gate and its
  input projections exist (encdec.py:589-607, rec_layers.py:1072-1088);
  ``_rec_gater`` / ``_rec_reseter`` / ``_activ``: their activations;
* the backward encoder reads the forward encoder's embeddings (encdec.py:1330) and, having
  no ``back_enc_*`` keys in any prototype, the un-prefixed ``rec_*`` / ``activ``;
* ``forward`` / ``last_forward`` / ``backward`` / ``last_backward``: the annotation's
  components, in that order (encdec.py:1337-1345);
* ``bias_code``: the decoder's initial state ``dec_activ(c[0, -dim:] W + b)``, else zeros
  (encdec.py:847-858, 1066-1069);
* ``decoding_inputs``: the context's projections into the decoder transition
  (encdec.py:862-893); without ``search`` the context at step ``t`` is
  ``c[min(t, S - 1)]`` (PadLayer, encdec.py:515-527, and ``c_pos``, encdec.py:1019);
* ``search``: RecurrentLayerWithSearch's attention, ``exp`` then normalise, no maximum
  subtracted (encdec.py:355-372);
* ``bigram``: the previous word's readout (encdec.py:920-927, 1125-1145), multiplied by
  ``y > 0`` in the one-step functions when ``check_first_word`` (encdec.py:1127-1131);
* ``deep_out``: ``unary_activ`` (``Maxout(k)``: the maximum of each ``k`` consecutive
  units, encdec.py:541-558) then the softmax ``dec_deep_softmax`` on ``dim / maxout_part``
  units, else ``dec_softmax`` on the ``dim`` readout units (encdec.py:934-958).

Nothing else is supported: an option value or activation spelling this file does not
know raises ``KeyError`` rather than being guessed.
"""

from __future__ import annotations

import re

import numpy as np

F32 = np.float32


def activations(xp):
    """The activation spellings of the prototypes and the variants recorded with this file,
    in the array namespace ``xp`` (numpy, or ``autograd.numpy`` for the train step)."""
    identity = lambda x: x
    sigmoid = lambda x: F32(1) / (F32(1) + xp.exp(-x))
    return {
        "lambda x: x": identity,
        "lambda x:x": identity,
        "lambda x: TT.tanh(x)": xp.tanh,
        "TT.tanh": xp.tanh,
        "lambda x: TT.nnet.sigmoid(x)": sigmoid,
        "TT.nnet.sigmoid": sigmoid,
        "lambda x: x*(x>0)": lambda x: x * (x > 0),
        "lambda x: x*(x>0)*(x<1)": lambda x: x * (x > 0) * (x < 1),
        "lambda x: x*(x>-1)*(x<1)": lambda x: x * (x > -1) * (x < 1),
    }


def activation(text, xp=np):
    """The function a state's activation string names; ``Maxout(k)`` (only readouts)."""
    found = re.fullmatch(r"\s*Maxout\((\d+)\)\s*", text)
    if found:
        k = int(found.group(1))
        return lambda x: x.reshape(len(x), -1, k).max(-1)
    return activations(xp)[text.strip()]


def prefix_lookup(state, prefix, key):
    """encdec.py:560."""
    return state.get(f"{prefix}_{key}", state[key])


class NumpyGroundHog:
    """The network ``state`` describes, on ``params`` (a ``*_model.npz``'s arrays).

    With ``draw`` (a ``numpy.random.RandomState``) and no ``params``, every weight the
    computation reads is drawn on its first read instead -- N(0, 1/fan_in) matrices,
    N(0, 1) word embeddings, N(0, 0.1) biases -- so a pass over one pair yields exactly the
    arrays the original would save for this architecture (:meth:`draw_params`).  A weight of
    another shape than the architecture's raises ``ValueError`` (basic.py:176), one the
    file lacks ``KeyError`` (where the original would go on with a fresh draw, basic.py:180).
    """

    def __init__(self, state, params=None, draw=None, xp=np):
        self.state = state
        self.xp = xp  # numpy; autograd.numpy when the params are traced (train_step)
        self.p = {} if params is None else {k: self._f32(v) for k, v in params.items()}
        self.draw = draw
        self.dim = state["dim"]
        self.eos, self.unk = state["null_sym_target"], state["unk_sym_target"]
        self.search = bool(state["search"])

    def _f32(self, value):
        return value if self.xp is not np else np.asarray(value, F32)

    def _act(self, text):
        return activation(text, self.xp)

    def _w(self, name, *shape):
        if name not in self.p:
            if self.draw is None:
                raise KeyError(f"the model file has no {name!r}, which this architecture reads")
            if len(shape) == 1:
                value = self.draw.normal(0, 0.1, shape)
            elif "approx_embdr" in name:
                value = self.draw.normal(0, 1, shape)
            else:
                value = self.draw.normal(0, shape[0] ** -0.5, shape)
            self.p[name] = value.astype(F32)
        if self.p[name].shape != shape:  # as the original's Container.load (basic.py:176)
            raise ValueError(f"Shape mismatch: {shape} != {self.p[name].shape} for {name}")
        return self.p[name]

    def _opt(self, prefix, key):
        return prefix_lookup(self.state, prefix, key)

    def _embed(self, side, ids):
        """The low-rank embeddings (ff_layers.py:275-281)."""
        n = self.state["n_sym_source" if side == "enc" else "n_sym_target"]
        rank = self.state["rank_n_approx"]
        w = self._w(f"W_0_{side}_approx_embdr", n, rank)[ids]
        return self._act(self.state["rank_n_activ"])(w + self._w(f"b_0_{side}_approx_embdr", rank))

    def _signals(self, prefix, emb):
        """Input, update and reset signals of the words (encdec.py:583-607); ``None`` for a
        gate the layer does not have (``none_if_zero``)."""
        rank, dim = self.state["rank_n_approx"], self.dim
        x = emb @ self._w(f"W_0_{prefix}_input_embdr_0", rank, dim)
        x = x + self._w(f"b_0_{prefix}_input_embdr_0", dim)
        x_z = (
            emb @ self._w(f"W_0_{prefix}_update_embdr_0", rank, dim)
            if self._opt(prefix, "rec_gating")
            else None
        )
        x_r = (
            emb @ self._w(f"W_0_{prefix}_reset_embdr_0", rank, dim)
            if self._opt(prefix, "rec_reseting")
            else None
        )
        return x, x_z, x_r

    def _transition(self, prefix, h, x, x_z, x_r):
        """RecurrentLayer.step_fprop (rec_layers.py:1067-1089) and the same update in
        RecurrentLayerWithSearch (encdec.py:382-397)."""
        dim, opt = self.dim, lambda key: self._opt(prefix, key)
        if x_r is not None:
            r = self._act(opt("rec_reseter"))(
                h @ self._w(f"R_{prefix}_transition_0", dim, dim) + x_r
            )
            hr = r * h
        else:
            hr = h
        cand = self._act(opt("activ"))(hr @ self._w(f"W_{prefix}_transition_0", dim, dim) + x)
        if x_z is None:
            return cand
        z = self._act(opt("rec_gater"))(h @ self._w(f"G_{prefix}_transition_0", dim, dim) + x_z)
        return z * cand + (F32(1) - z) * h

    def _run(self, prefix, emb):
        x, x_z, x_r = self._signals(prefix, emb)
        h = np.zeros((1, self.dim), F32)
        out = []
        for t in range(len(emb)):
            h = self._transition(
                prefix,
                h,
                x[t : t + 1],
                None if x_z is None else x_z[t : t + 1],
                None if x_r is None else x_r[t : t + 1],
            )
            out.append(h[0])
        return self.xp.stack(out)

    # -- the annotations ----------------------------------------------------------------
    def encode(self, seq):
        """``c (S, c_dim)``: the components the state switches on (encdec.py:1318-1345)."""
        emb = self._embed("enc", seq)
        st = self.state
        fwd = self._run("enc", emb)
        parts = []
        if st["forward"]:
            parts.append(fwd)
        if st["last_forward"]:
            parts.append(self.xp.repeat(fwd[-1:], len(seq), 0))
        if st["backward"] or st["last_backward"]:
            bwd = self._run("back_enc", emb[::-1])[::-1]
            if st["backward"]:
                parts.append(bwd)
            if st["last_backward"]:
                parts.append(self.xp.repeat(bwd[:1], len(seq), 0))
        return self.xp.concatenate(parts, axis=1)

    @property
    def c_dim(self):
        st = self.state
        return self.dim * sum(
            bool(st[k]) for k in ("forward", "last_forward", "backward", "last_backward")
        )

    def initial_state(self, c):
        """encdec.py:1066-1069 (``init_c = c[0, -dim:]``) through the initializer."""
        dim = self.dim
        if not self.state["bias_code"]:
            return np.zeros((1, dim), F32)
        pre = c[:1, -dim:] @ self._w("W_0_dec_initializer_0", dim, dim)
        return self._act(self._opt("dec", "activ"))(pre + self._w("b_0_dec_initializer_0", dim))

    def p_from_c(self, c):
        return c @ self._w("A_dec_transition_0", self.c_dim, self.dim) if self.search else None

    # -- one decoder step ---------------------------------------------------------------
    def context(self, s, c, p_from_c, k):
        """The context at step ``k`` for the states ``s (n, dim)``: ``(ctx (n, c_dim),
        alpha (S, n) or None)``."""
        if not self.search:
            return self.xp.repeat(c[min(k, len(c) - 1)][None], len(s), 0), None
        dim = self.dim
        p = self.xp.tanh((s @ self._w("B_dec_transition_0", dim, dim))[None] + p_from_c[:, None])
        energy = self.xp.exp((p @ self._w("D_dec_transition_0", dim, 1))[..., 0])
        alpha = energy / energy.sum(0)
        return alpha.T @ c, alpha

    def probs(self, s, ctx, y_prev, one_step):
        """The readout and the softmax (encdec.py:1112-1158; cost_layers.py:961-1000);
        ``y_prev`` None: the first word in teacher forcing (Shift puts zeros there)."""
        st, dim = self.state, self.dim
        t = ctx @ self._w("W_0_dec_repr_readout", self.c_dim, dim)
        t = (
            t
            + s @ self._w("W_0_dec_hid_readout_0", dim, dim)
            + self._w("b_0_dec_hid_readout_0", dim)
        )
        if st["bigram"] and y_prev is not None:
            emb = self._embed("dec", y_prev)
            prev = emb @ self._w("W_0_dec_prev_readout_0", st["rank_n_approx"], dim)
            if one_step and st["check_first_word"]:
                prev = (y_prev > 0).astype(F32)[:, None] * prev
            t = t + prev
        if st["deep_out"]:
            t = self._act(st["unary_activ"])(t)
            name, width = "dec_deep_softmax", int(dim / st["maxout_part"])
        else:
            name, width = "dec_softmax", dim
        rank, n = st["rank_n_approx"], st["n_sym_target"]
        z = (t @ self._w(f"W1_{name}", width, rank)) @ self._w(f"W2_{name}", rank, n)
        z = z + self._w(f"b_{name}", n)
        e = self.xp.exp(z - z.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    def next_state(self, s, ctx, y):
        """The decoder transition on the words ``y`` with the context ``ctx``."""
        x, x_z, x_r = self._signals("dec", self._embed("dec", y))
        if self.state["decoding_inputs"]:
            c_dim, dim = self.c_dim, self.dim
            x = x + ctx @ self._w("W_0_dec_dec_inputter_0", c_dim, dim)
            if x_z is not None:
                x_z = x_z + ctx @ self._w("W_0_dec_dec_updater_0", c_dim, dim)
            if x_r is not None:
                x_r = x_r + ctx @ self._w("W_0_dec_dec_reseter_0", c_dim, dim)
        return self._transition("dec", s, x, x_z, x_r)

    # sample.py's two compiled functions (encdec.py:1457-1476)
    def next_probs_fn(self, c, k, p_from_c, y_prev, s):
        ctx, _ = self.context(s, c, p_from_c, k)
        return self.probs(s, ctx, y_prev, one_step=True)

    def next_states_fn(self, c, k, p_from_c, y, s):
        ctx, _ = self.context(s, c, p_from_c, k)
        return self.next_state(s, ctx, y)

    def teacher_forced(self, src, trg):
        """Teacher forcing (EVALUATION mode, encdec.py:963): per target word ``t`` the
        probability of ``trg[t]`` and the alignment ``(S,)`` (None without search)."""
        c = self.encode(src)
        p_from_c = self.p_from_c(c)
        s = self.initial_state(c)
        for t, y in enumerate(trg):
            ctx, alpha = self.context(s, c, p_from_c, t)
            prev = None if t == 0 else np.asarray([trg[t - 1]])
            p = self.probs(s, ctx, prev, one_step=False)
            yield p[0, y], None if alpha is None else alpha[:, 0]
            s = self.next_state(s, ctx, np.asarray([y]))

    def score(self, src, trg):
        """Word probabilities, alignments ``(T, S)`` (None without search) and the float32
        sum of ``log p`` of one pair."""
        probs, alphas = [], []
        for p, alpha in self.teacher_forced(src, trg):
            probs.append(p)
            if alpha is not None:
                alphas.append(alpha)
        p = np.asarray(probs, dtype=F32)
        with np.errstate(divide="ignore"):  # a probability 0 in float32: cost inf, as numpy gave
            cost = -np.log(p)
        # the probabilities come out masked as p * mask + 1 - mask (mask 1): quantised to 2**-23
        mask = np.ones_like(p)
        word_probs = p * mask + F32(1) - mask
        alignment = np.stack(alphas).astype(F32) if alphas else None
        return word_probs, alignment, F32(-cost.sum(dtype=F32))

    def nll(self, src, trg):
        """``sum_t -log p(trg[t])`` of one pair, in the namespace ``xp`` (differentiable)."""
        total = F32(0)
        for p, _ in self.teacher_forced(src, trg):
            total = total - self.xp.log(p)
        return total

    def draw_params(self):
        """Draw every weight this architecture reads (one pass over a two-word pair)."""
        eos_s, eos_t = self.state["null_sym_source"], self.state["null_sym_target"]
        self.score(np.asarray([2, 3, eos_s]), np.asarray([2, 3, eos_t]))
        return dict(self.p)


# -- sample.py's beam search, literally -----------------------------------------------------
class Failed(Exception):
    pass


def beam_search(m, seq, n_samples, ignore_unk=False, minlen=1, record=None):
    """sample.py:47-135 with numpy.argpartition; ``record`` collects the steps."""
    c = m.encode(seq)
    p_from_c = m.p_from_c(c)
    states = m.initial_state(c)
    fin_trans, fin_costs = [], []
    trans, costs = [[]], np.zeros(1)
    for k in range(3 * len(seq)):
        if n_samples == 0:
            break
        beam_size = len(trans)
        last_words = np.asarray(
            [t[-1] for t in trans] if k > 0 else np.zeros(beam_size, dtype=np.int64), dtype=np.int64
        )
        probs = m.next_probs_fn(c, k, p_from_c, last_words, states)
        with np.errstate(divide="ignore"):  # a probability 0 in float32: -inf, as numpy gave
            log_probs = np.log(probs)
        if ignore_unk:
            log_probs[:, m.unk] = -np.inf
        if k < minlen:
            log_probs[:, m.eos] = -np.inf
        next_costs = costs[:, None] - log_probs
        flat = next_costs.flatten()
        if n_samples >= flat.size:
            raise Failed(f"kth(={n_samples}) out of bounds ({flat.size})")
        best = np.argpartition(flat, n_samples)[:n_samples]
        voc = probs.shape[1]
        trans_indices, word_indices = best // voc, best % voc
        new_costs = flat[best]
        gathered = states[trans_indices]
        new_states = m.next_states_fn(c, k, p_from_c, word_indices, gathered)
        if record is not None:
            record.append(
                dict(
                    k=k,
                    n_samples=n_samples,
                    last_words=last_words,
                    states_in=states[None],
                    next_probs=probs,
                    flat_next_costs=flat,
                    best_costs_indices=best,
                    trans_indices=trans_indices,
                    word_indices=word_indices,
                    costs=new_costs,
                    states_gathered=gathered[None],
                    next_states=new_states[None],
                )
            )
        new_trans = [trans[ti] + [wi] for ti, wi in zip(trans_indices, word_indices)]
        trans, kept_costs, kept = [], [], []
        for i in range(n_samples):
            if word_indices[i] != m.eos:
                trans.append(new_trans[i])
                kept_costs.append(new_costs[i])
                kept.append(i)
            else:
                fin_trans.append(new_trans[i])
                fin_costs.append(new_costs[i])
        costs = np.asarray(kept_costs)
        states = new_states[kept]
        n_samples = len(kept)
    if not fin_trans:
        if ignore_unk:
            return beam_search(m, seq, n_samples, False, minlen, record)
        if n_samples < 500:
            return beam_search(m, seq, n_samples * 2, False, minlen, record)
        raise Failed("Translation failed")
    order = np.argsort(fin_costs)
    return [fin_trans[i] for i in order], np.asarray(fin_costs)[order]
