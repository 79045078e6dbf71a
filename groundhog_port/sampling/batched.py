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

from ..model import decoding
from ..model.encdec import RNNEncoderDecoder
from ..model.workspace import Workspace
from ..search.common import legacy_log
from .draw import Draw, check_call, multinomial_from_uniform


class BatchedSampler:
    """``draw_many`` over an :class:`~groundhog_port.model.encdec.RNNEncoderDecoder`:
    ``batch_size`` sentences decoded together."""

    def __init__(self, model: RNNEncoderDecoder, batch_size: int = 32) -> None:
        self.model = model
        self.batch_size = int(batch_size)
        self.workspace = Workspace(model.device)

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
                self.workspace.release()
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
        model, device = self.model, self.model.device
        B = len(seqs)
        src = decoding.encode(model, seqs)
        ids = [np.zeros((s, n), dtype=np.int64) for s in steps]
        nlp = [np.zeros((s, n), dtype=np.float32) for s in steps]
        # rows: sentence b's n samples, sentences in order
        states = decoding.init_states(model, src).repeat_interleave(n, 0)
        active = list(range(B))
        y = torch.zeros(B * n, dtype=torch.int64, device=device)
        k = 0
        while active:
            sizes = [(b, n) for b in active]
            ctx = decoding.context(model, src, k, states, sizes, self.workspace)
            probs = decoding.probs(model, states, ctx, y, sizes, self.workspace, T)
            u = np.concatenate([unis[b][k] for b in active])
            word = multinomial_from_uniform(probs.cpu().numpy(), u)
            y = torch.as_tensor(word, device=device)
            logp = (-legacy_log(probs.gather(1, y[:, None])[:, 0])).cpu().numpy()
            for r, b in enumerate(active):
                ids[b][k] = word[r * n : (r + 1) * n]
                nlp[b][k] = logp[r * n : (r + 1) * n]
            states = decoding.advance(model, y, states, ctx)
            k += 1
            keep = [r for r, b in enumerate(active) if k < steps[b]]
            if len(keep) < len(active):
                rows = (
                    torch.cat([torch.arange(r * n, (r + 1) * n, device=device) for r in keep])
                    if keep
                    else torch.zeros(0, dtype=torch.int64, device=device)
                )
                states, y = decoding.reorder(states, rows), decoding.reorder(y, rows)
                active = [active[r] for r in keep]
        return [Draw(i, l) for i, l in zip(ids, nlp)]
