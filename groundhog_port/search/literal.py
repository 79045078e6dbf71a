"""Literal port of ``BeamSearch.search`` and ``sample()`` (experiments/nmt/sample.py:33-190).

This is the reference semantics; :mod:`groundhog_port.search.batched` must
return exactly what it returns.  Every kept behaviour names its original line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..model import decoding
from ..model.encdec import RNNEncoderDecoder
from .common import (
    SearchFailed,
    check_encodable,
    check_kth,
    legacy_log,
    length_normalized,
    next_costs,
    select_cheapest,
)
from .defaults import MAX_RETRY_BEAM

logger = logging.getLogger(__name__)


@dataclass
class Hypotheses:
    """Finished hypotheses sorted by raw cost, as ``search()`` returns them (sample.py:133).

    ``trans[i]`` are word ids ending with end-of-sequence; ``costs`` float64.
    """

    trans: list[list[int]]
    costs: np.ndarray


def sort_finished(fin_trans: list[list[int]], fin_costs: Sequence[float]) -> Hypotheses:
    """sample.py:133-134 sorts with ``numpy.argsort`` (quicksort).  numpy sorts up
    to 16 items by insertion sort, which is stable; a stable sort is used here for
    every size, so exact-cost ties keep collection order (documented tie rule)."""
    order = np.argsort(np.asarray(fin_costs, dtype=np.float64), kind="stable")
    return Hypotheses([fin_trans[i] for i in order], np.asarray(fin_costs, dtype=np.float64)[order])


class BeamSearch:
    """``BeamSearch`` (sample.py:33) over a :class:`~groundhog_port.model.encdec.RNNEncoderDecoder`.

    ``recorder``, if given, is called at every step with a dict of the step's
    inputs and outputs (named as in trace.h5 ``/steps``).
    """

    def __init__(
        self,
        model: RNNEncoderDecoder,
        recorder: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.model = model
        self.eos_id = model.cfg.null_sym_target
        self.unk_id = model.cfg.unk_sym_target
        self.recorder = recorder

    @torch.no_grad()
    def search(
        self,
        seq: Sequence[int] | np.ndarray,
        beam_size: int,
        ignore_unk: bool = False,
        minlen: int = 1,
    ) -> Hypotheses:
        """sample.py:47 (where ``beam_size`` is called ``n_samples``).  Raises
        :class:`SearchFailed` where the original crashed."""
        model = self.model
        device = model.device
        check_encodable(model, seq)
        src = decoding.encode(model, [seq])  # sample.py:48
        states = decoding.init_states(model, src)  # sample.py:49, (1, dim)
        fin_trans, fin_costs = [], []
        trans: list[list[int]] = [[]]
        costs = torch.zeros(1, dtype=torch.float64, device=device)
        for k in range(3 * len(seq)):  # sample.py:60, seq incl. EOS
            if beam_size == 0:
                break
            # step 0 feeds previous word 0 (sample.py:67-69)
            last_words = torch.tensor(
                [t[-1] for t in trans] if k > 0 else [0] * len(trans),
                dtype=torch.int64,
                device=device,
            )
            # next_probs (sample.py:71): the step's context is kept for next_states
            sizes = [(0, len(trans))]
            ctx = decoding.context(model, src, k, states, sizes)
            probs = decoding.probs(model, states, ctx, last_words, sizes)
            flat = next_costs(
                costs, probs, k, minlen, ignore_unk, self.eos_id, self.unk_id
            ).flatten()
            check_kth(beam_size, flat.numel())  # sample.py:82 crash
            best = select_cheapest(flat[None], [beam_size])[0]
            voc_size = probs.shape[1]
            trans_indices = best // voc_size  # Py2 integer '/' (sample.py:88)
            word_indices = best % voc_size
            new_costs = flat[best]
            gathered = decoding.reorder(states, trans_indices)
            # next_states (sample.py:104) attends again with the gathered states: a row's
            # context depends on its own state only, so the gathered contexts are the same
            new_states = decoding.advance(
                model, word_indices, gathered, decoding.reorder(ctx, trans_indices)
            )
            if self.recorder is not None:
                self.recorder(
                    dict(
                        k=k,
                        last_words=last_words,
                        states_in=states,
                        next_probs=probs,
                        flat_next_costs=flat,
                        trans_indices=trans_indices,
                        word_indices=word_indices,
                        costs=new_costs,
                        states_gathered=gathered,
                        next_states=new_states,
                    )
                )
            # finished hypotheses leave the beam and shrink it (sample.py:108-120)
            trans_prev = trans
            words, origins = word_indices.tolist(), trans_indices.tolist()
            trans, kept = [], []
            for i in range(beam_size):
                hyp = trans_prev[origins[i]] + [words[i]]
                if words[i] != self.eos_id:
                    trans.append(hyp)
                    kept.append(i)
                else:
                    fin_trans.append(hyp)
                    fin_costs.append(float(new_costs[i]))
            beam_size = len(kept)
            kept_rows = torch.tensor(kept, dtype=torch.int64, device=device)
            costs = new_costs[kept_rows]
            states = new_states[kept_rows]
        if not fin_trans:  # "dirty tricks", sample.py:122
            if ignore_unk:
                logger.warning("Did not manage without UNK")
                return self.search(seq, beam_size, False, minlen)
            if beam_size < MAX_RETRY_BEAM:
                logger.warning("Still no translations: try beam size %d", beam_size * 2)
                return self.search(seq, beam_size * 2, False, minlen)
            logger.error("Translation failed")
            # sample.py then crashes in numpy.argmin([]) (sample.py:269)
            raise SearchFailed("Translation failed (attempt to get argmin of an empty sequence)")
        return sort_finished(fin_trans, fin_costs)


@torch.no_grad()
def path_costs(
    model: RNNEncoderDecoder, seq: Sequence[int] | np.ndarray, trans: Sequence[Sequence[int]]
) -> np.ndarray:
    """The cost ``search()`` gives each hypothesis in ``trans``, recomputed along its path.

    ``sum_k -log p(trans[k] | trans[:k], seq)`` with the step functions of ``model`` (float64
    sums, the previous word 0 at step 0 as sample.py:67-69 feeds it).  With the float64
    shadow of the model (:meth:`~groundhog_port.model.encdec.RNNEncoderDecoder.float64_shadow`) this
    is the exact cost the parity bounds measure noise against (:mod:`groundhog_port.harness.tolerance`).
    """
    if not trans:
        return np.zeros(0)
    device = model.device
    lengths = torch.tensor([len(t) for t in trans], device=device)
    width = int(lengths.max())
    words = torch.zeros((len(trans), width), dtype=torch.int64, device=device)
    for i, t in enumerate(trans):
        words[i, : len(t)] = torch.as_tensor(list(t), dtype=torch.int64)
    src = decoding.encode(model, [seq])
    sizes = [(0, len(trans))]
    states = decoding.init_states(model, src).expand(len(trans), -1).contiguous()
    costs = torch.zeros(len(trans), dtype=torch.float64, device=device)
    prev = torch.zeros(len(trans), dtype=torch.int64, device=device)
    for k in range(width):
        ctx = decoding.context(model, src, k, states, sizes)
        probs = decoding.probs(model, states, ctx, prev, sizes)
        y = words[:, k]
        term = -legacy_log(probs.gather(1, y[:, None])[:, 0]).double()
        costs += torch.where(k < lengths, term, torch.zeros_like(term))
        states = decoding.advance(model, y, states, ctx)
        prev = y
    return costs.cpu().numpy()


def sample(
    beam_search: BeamSearch,
    seq: Sequence[int] | np.ndarray,
    beam_size: int,
    ignore_unk: bool = False,
    normalize: bool = False,
) -> Hypotheses:
    """``sample()`` with ``beam_search`` (sample.py:145): hypotheses and their costs.

    ``minlen = len(seq) // 2`` where ``seq`` includes end-of-sequence (Python 2
    integer division, sample.py:152).  ``--normalize`` divides each cost by the
    hypothesis length, end-of-sequence counted; the list stays in raw-cost order.
    """
    hyps = beam_search.search(seq, beam_size, ignore_unk=ignore_unk, minlen=len(seq) // 2)
    return normalized(hyps) if normalize else hyps


def normalized(hyps: Hypotheses) -> Hypotheses:
    """``--normalize`` (sample.py:153-155) of a finished list: the costs divided by the
    lengths (:func:`~groundhog_port.search.common.length_normalized`); the list stays in
    raw-cost order.  Shared by both searches."""
    return Hypotheses(hyps.trans, length_normalized(hyps.costs, hyps.trans))
