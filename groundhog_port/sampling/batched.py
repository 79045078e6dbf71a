"""Sampling many sentences at once, with exactly the draws of one sentence at a time.

sample.py samples its sentences one after the other from ONE MRG stream.  How far a
sentence's calls advance the stream depends only on how many uniforms they draw
(``n_steps * n_samples``), never on their values, so the uniforms of every sentence are
drawn first, in sentence order, from the continuing stream
(:meth:`~groundhog_port.sampling.mrg.StateMatrix.uniform`); then the sentences are decoded
together -- every sample of every sentence one row of one tensor, sentences grouped by
length -- each row with its own sentence's uniforms.

The rows' numbers are those of :func:`~groundhog_port.sampling.sampler.draw_sentence`
bit for bit, for the reasons :mod:`groundhog_port.search.batched` gives (row-invariant
matrix products, the batched search's attention on each sentence's own pairs, per-row
softmax normalisers), so the drawn words -- a comparison of a double running sum with
the uniform -- are the same too (``parity_tests/parity/test_sampling.py`` checks it).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ..model.encdec import RNNEncoderDecoder
from ..search.batched import BatchedBeamSearch
from ..search.common import legacy_log
from .draw import Draw, check_call, multinomial_from_uniform, output_probs


class BatchedSampler:
    """``draw_many`` over an :class:`~groundhog_port.model.encdec.RNNEncoderDecoder`:
    ``batch_size`` sentences decoded together."""

    def __init__(self, model: RNNEncoderDecoder, batch_size: int = 32) -> None:
        self.model = model
        self.batch_size = int(batch_size)
        # the batched search's encoder and attention (same bits as the one-sentence path)
        self._search = BatchedBeamSearch(model, batch_size=self.batch_size)

    def draw_many(
        self,
        seqs: Sequence[Sequence[int] | np.ndarray],
        n_samples: int,
        n_steps: Sequence[int],
        T: float,
        unis: Sequence[Sequence[np.ndarray]],
    ) -> list[Draw]:
        """One :class:`Draw` per sentence, in input order.

        ``n_steps[i]``: sentence ``i``'s steps; ``unis[i]``: its ``n_steps[i]`` float32
        arrays of ``n_samples`` uniforms (drawn in sentence order from one stream).
        """
        for s in n_steps:
            check_call(n_samples, s)
        seqs = [np.asarray(s, dtype=np.int64) for s in seqs]
        order = sorted(range(len(seqs)), key=lambda i: (len(seqs[i]), i))
        out: list[Draw | None] = [None] * len(seqs)
        with torch.inference_mode():
            try:
                for g in range(0, len(order), self.batch_size):
                    group = order[g : g + self.batch_size]
                    draws = self._group(
                        [seqs[i] for i in group],
                        n_samples,
                        [n_steps[i] for i in group],
                        T,
                        [unis[i] for i in group],
                    )
                    for i, d in zip(group, draws):
                        out[i] = d
            finally:
                self._search.release_buffers()
        done = [d for d in out if d is not None]
        assert len(done) == len(out)  # every sentence is in a group
        return done

    def _group(
        self,
        seqs: Sequence[Sequence[int] | np.ndarray],
        n: int,
        steps: Sequence[int],
        T: float,
        unis: Sequence[Sequence[np.ndarray]],
    ) -> list[Draw]:
        model, cfg = self.model, self.model.cfg
        dec, device = model.decoder, model.device
        B = len(seqs)
        cs = self._search.encode(seqs)
        lens = torch.tensor([c.shape[0] for c in cs], dtype=torch.int64, device=device)
        c_pad = torch.zeros((int(lens.max()), B, cfg.c_dim), dtype=model.dtype, device=device)
        for b, c in enumerate(cs):
            c_pad[: c.shape[0], b] = c
        p_pad = dec.p_from_c(c_pad)
        p_from_c = (
            None
            if p_pad is None
            else [p_pad[: c.shape[0], b].contiguous() for b, c in enumerate(cs)]
        )
        ids = [np.zeros((s, n), dtype=np.int64) for s in steps]
        nlp = [np.zeros((s, n), dtype=np.float32) for s in steps]
        # rows: sentence b's n samples, sentences in order
        states = dec.initial_state(c_pad).repeat_interleave(n, 0)
        active = list(range(B))
        row_sent = torch.arange(B, device=device).repeat_interleave(n)
        y = torch.zeros(B * n, dtype=torch.int64, device=device)
        k = 0
        while active:
            rows_of = {b: n for b in active}
            ctx = self._search.context(
                k, states, row_sent, active, rows_of, cs, c_pad, p_from_c, lens
            )
            emb = dec.approx_embedder(y)
            probs = output_probs(model, dec.readout(states, ctx, dec.prev_word_term(y, emb)), T)
            u = np.concatenate([unis[b][k] for b in active])
            word = multinomial_from_uniform(probs.cpu().numpy(), u)
            y = torch.as_tensor(word, device=device)
            logp = (-legacy_log(probs.gather(1, y[:, None])[:, 0])).cpu().numpy()
            for r, b in enumerate(active):
                ids[b][k] = word[r * n : (r + 1) * n]
                nlp[b][k] = logp[r * n : (r + 1) * n]
            states = dec.transition_step(y, states, ctx)
            k += 1
            keep = [r for r, b in enumerate(active) if k < steps[b]]
            if len(keep) < len(active):
                rows = (
                    torch.cat([torch.arange(r * n, (r + 1) * n, device=device) for r in keep])
                    if keep
                    else torch.zeros(0, dtype=torch.int64, device=device)
                )
                states, row_sent, y = states[rows], row_sent[rows], y[rows]
                active = [active[r] for r in keep]
        return [Draw(i, l) for i, l in zip(ids, nlp)]
