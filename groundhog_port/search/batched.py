"""Batched beam search: many sentences at once, exactly what the literal search returns.

:class:`BatchedBeamSearch` decodes a group of sentences together -- one padded
source batch, every live hypothesis of every sentence as one row of one tensor --
and returns, for each sentence, the finished list of
:meth:`groundhog_port.search.literal.BeamSearch.search` (same hypotheses, same
order, bitwise-identical float64 costs) or the :class:`SearchFailed` it raises.

Why the numbers are the same, piece by piece:

* every matrix product goes through :func:`~groundhog_port.model.numerics.mm` (or the same
  ``torch.mm`` call on the same zero-padded rows), whose rows do not depend on the
  other rows; elementwise kernels (``exp``, ``tanh``, the Theano sigmoid, ``log``)
  do not depend on where a value sits;
* encoder: the padded batch runs without a mask.  Forward states at real positions
  only see earlier (real) words; the backward encoder reads each sentence reversed
  *within its own length* (padding after it), so it never starts on padding.  The
  states at real positions are those of ``model.encode(seq)``;
* attention is computed on the real (hypothesis, source position) pairs only, a
  sentence's ``n x S`` pairs together; for the normaliser they are laid in an
  ``(S_max, rows)`` grid whose other cells are exactly 0 (written, never a product
  with a mask: ``exp`` may overflow and ``inf * 0`` is NaN) and summed with
  :func:`~groundhog_port.model.numerics.sum_positions` (``acc + 0 == acc``); the context
  of a sentence's hypotheses is :func:`~groundhog_port.model.attention.weighted_context`
  on that sentence's own ``(S, n)`` weights, as in the literal search;
* the output layer is the same :func:`~groundhog_port.model.numerics.mm` as the literal
  search's (column blocks of the output matrix, single-threaded tasks), written into a
  reused buffer; the softmax normaliser is the same float64 ``sum`` over the same
  contiguous rows;
* the attention context of a hypothesis does not depend on its beam, so the context
  computed for ``next_probs`` is reused for ``next_states`` (the literal search
  recomputes it from the gathered states and gets the same bits);
* selection: see :meth:`BatchedBeamSearch._select` -- a float32 prefilter keeps,
  per row, the ``n + 1`` most probable words; the exact float64 costs of those
  candidates go through :func:`~groundhog_port.search.common.select_cheapest`,
  and the result is used only when it *provably* equals selection over the full
  ``(rows, V)`` matrix; otherwise that sentence's step is redone on the full
  matrix exactly as the literal search does it.

Retries (``ignore_unk`` dropped, beam doubled) restart the sentence from step 0 in
a later group, as sample.py:122-131 restarts the search.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..model import decoding, output
from ..model.encdec import RNNEncoderDecoder
from ..model.output import CHUNK, Normalised
from ..model.workspace import Workspace
from .common import (
    SearchFailed,
    check_encodable,
    check_kth,
    legacy_log,
    next_costs,
    select_cheapest,
)
from .defaults import MAX_RETRY_BEAM
from .literal import Hypotheses, normalized, sort_finished

logger = logging.getLogger(__name__)

#: the message of literal.BeamSearch.search when the beam reached MAX_RETRY_BEAM
TRANSLATION_FAILED = "Translation failed (attempt to get argmin of an empty sequence)"


@dataclass
class _Job:
    """One attempt of ``search(seq, beam_size, ignore_unk, minlen)`` for input sentence ``index``."""

    index: int
    beam_size: int
    ignore_unk: bool
    minlen: int


class BatchedBeamSearch:
    """``search_many`` / ``sample_many`` over an :class:`~groundhog_port.model.encdec.RNNEncoderDecoder`.

    ``batch_size``: most sentences decoded together; ``max_rows``: most hypotheses
    (rows of the ``(rows, V)`` probability matrix) a group starts with -- a sentence
    whose beam alone is larger still runs, alone.
    """

    def __init__(
        self, model: RNNEncoderDecoder, batch_size: int = 64, max_rows: int = 2048
    ) -> None:
        self.model = model
        self.cfg = model.cfg
        self.eos_id = model.cfg.null_sym_target
        self.unk_id = model.cfg.unk_sym_target
        self.batch_size = int(batch_size)
        self.max_rows = int(max_rows)
        self.workspace = Workspace(model.device)
        self._watch: Callable[[int, int], str | None] | None = None
        #: counters of the last call (steps, rows, prefilter fallbacks), for tools
        self.stats: dict[str, Any] = {}

    # -- public API ---------------------------------------------------------------------
    def search_many(
        self,
        seqs: Sequence[Sequence[int] | np.ndarray],
        beam_size: int | Sequence[int],
        ignore_unk: bool = False,
        minlens: Sequence[int] | None = None,
        watch: Callable[[int, int], str | None] | None = None,
    ) -> list[Hypotheses | SearchFailed]:
        """``BeamSearch.search(seq, beam_size, ignore_unk, minlen)`` (sample.py's ``n_samples``) for every ``seq``.

        ``minlens``: one per sentence (default 1, ``search()``'s default).  Returns a list
        in input order of :class:`Hypotheses` or :class:`SearchFailed` instances.

        ``watch(index, rows)`` (optional) is called before every step for every sentence
        still searched, with the hypotheses it is about to expand: a message returned ends
        that sentence with ``SearchFailed(message)`` (its rows leave the batch as a failed
        sentence's do, so the others' results are unchanged); an exception raised stops
        the whole call between two steps (a server shutting down).
        """
        arrays = [np.asarray(s, dtype=np.int64).reshape(-1) for s in seqs]
        if minlens is None:
            minlens = [1] * len(arrays)
        if isinstance(beam_size, (int, np.integer)):
            beam_size = [int(beam_size)] * len(seqs)
        if not len(minlens) == len(beam_size) == len(seqs):
            raise ValueError(
                f"{len(seqs)} sentences, {len(beam_size)} beam sizes, {len(minlens)} minlens"
            )
        if any(len(s) == 0 for s in seqs):
            raise ValueError("empty source sentence (parse_input always appends end-of-sequence)")
        if any(n < 1 for n in beam_size):
            # sample.py would retry a beam of 0 forever (0 * 2 < 500)
            raise ValueError(f"beam sizes must be >= 1, got {min(beam_size)}")
        jobs = [
            _Job(i, int(n), bool(ignore_unk), int(m))
            for i, (n, m) in enumerate(zip(beam_size, minlens))
        ]
        self._watch = watch
        with torch.inference_mode():
            try:
                return self._run(arrays, jobs)
            finally:
                self.release_buffers()

    def sample_many(
        self,
        seqs: Sequence[Sequence[int] | np.ndarray],
        beam_size: int | Sequence[int],
        ignore_unk: bool = False,
        normalize: bool = False,
        watch: Callable[[int, int], str | None] | None = None,
    ) -> list[Hypotheses | SearchFailed]:
        """``literal.sample`` for every ``seq``: ``minlen = len(seq) // 2``; with
        ``normalize`` the costs are divided by the hypothesis lengths (EOS included).
        ``watch``: see :meth:`search_many`."""
        seqs = [np.asarray(s, dtype=np.int64) for s in seqs]
        results = self.search_many(seqs, beam_size, ignore_unk, [len(s) // 2 for s in seqs], watch)
        if not normalize:
            return results
        return [normalized(r) if isinstance(r, Hypotheses) else r for r in results]

    # -- driver -------------------------------------------------------------------------
    def _run(
        self, seqs: Sequence[np.ndarray], jobs: Sequence[_Job]
    ) -> list[Hypotheses | SearchFailed]:
        self.stats = dict(steps=0, row_steps=0, fallbacks=0, groups=0, rows_by_length={})
        results: list[Hypotheses | SearchFailed | None] = [None] * len(seqs)
        encoded: dict[int, torch.Tensor] = {}
        pending: list[_Job] = []
        for job in jobs:
            try:
                check_encodable(self.model, seqs[job.index])
                pending.append(job)
            except SearchFailed as err:
                results[job.index] = err
        while pending:
            retries: list[_Job] = []
            for group in self._groups(pending, seqs):
                missing = [j.index for j in group if j.index not in encoded]
                if missing:
                    for i, c in zip(missing, self.encode([seqs[i] for i in missing])):
                        encoded[i] = c
                for job, outcome in zip(group, self._decode(group, seqs, encoded)):
                    if isinstance(outcome, _Job):
                        retries.append(outcome)
                    else:
                        results[job.index] = outcome
            pending = retries
        done = [r for r in results if r is not None]
        assert len(done) == len(results)  # every job ended in hypotheses or a failure
        return done

    def _groups(self, jobs: Sequence[_Job], seqs: Sequence[np.ndarray]) -> Iterator[list[_Job]]:
        """Jobs sorted by source length, cut into ``round(len(jobs) / batch_size)`` groups
        (at least one) of even sizes, each cut again where it would exceed ``max_rows``
        hypotheses (unless one sentence alone does).

        Even sizes, not ``batch_size`` and a remainder: a step streams the whole output
        matrix whatever its rows, and a group lasts as long as its longest sentence, so a
        small last group pays that for few rows.  Measured (issue 54, 40 sentences at
        beam 1, one thread, full size): groups of 32 + 8 decoded in 10.6 s, 20 + 20 in
        8.5 s, one of 40 in 6.9 s.  So a group holds at most ``ceil(3/2 * batch_size)``
        sentences, and at least ``floor(3/4 * batch_size)`` when there are several."""
        order = sorted(jobs, key=lambda j: (len(seqs[j.index]), j.index))
        n_groups = max(1, round(len(order) / self.batch_size))
        bounds = [len(order) * g // n_groups for g in range(n_groups + 1)]
        for lo, hi in zip(bounds, bounds[1:]):
            group: list[_Job] = []
            rows = 0
            for job in order[lo:hi]:
                if group and rows + job.beam_size > self.max_rows:
                    yield group
                    group, rows = [], 0
                group.append(job)
                rows += job.beam_size
            if group:
                yield group

    def release_buffers(self) -> None:
        """Drop the workspace's scratch tensors (after a run: they can be large)."""
        self.workspace.release()

    def encode(self, seqs: Sequence[Sequence[int] | np.ndarray]) -> list[torch.Tensor]:
        """Annotations ``c (S_b, c_dim)`` of each sentence, equal to ``model.encode(seq)``."""
        return decoding.annotate(self.model, seqs)

    # -- one group ----------------------------------------------------------------------
    def _decode(
        self, jobs: Sequence[_Job], seqs: Sequence[np.ndarray], encoded: dict[int, torch.Tensor]
    ) -> list[Hypotheses | SearchFailed | _Job]:
        """Decode ``jobs`` together; per job a Hypotheses, a SearchFailed or a retry _Job."""
        model = self.model
        device = model.device
        B = len(jobs)
        self.stats["groups"] += 1
        cs = [encoded[j.index] for j in jobs]
        src = decoding.Source.of(model, cs)
        steps = [3 * c.shape[0] for c in cs]  # sample.py:60, seq incl. EOS
        n = [j.beam_size for j in jobs]
        fin_trans: list[list[list[int]]] = [[] for _ in jobs]
        fin_costs: list[list[float]] = [[] for _ in jobs]
        outcome: list[Hypotheses | SearchFailed | _Job | None] = [None] * B

        # rows: the live hypotheses, grouped by sentence in beam-slot order
        states = decoding.init_states(model, src)  # (B, dim)
        row_sent = torch.arange(B, device=device)
        last_words = torch.zeros(B, dtype=torch.int64, device=device)
        costs = torch.zeros(B, dtype=torch.float64, device=device)
        hist = torch.zeros((B, 0), dtype=torch.int64, device=device)
        active = list(range(B))  # sentences with rows, in row order
        rows_of = {b: 1 for b in active}

        k = 0
        while active:
            # kth crash (sample.py:82) before anything else of the step
            failed = []
            for b in active:
                try:
                    check_kth(n[b], rows_of[b] * self.cfg.n_sym_target)
                    stop = self._watch(jobs[b].index, rows_of[b]) if self._watch else None
                    if stop:
                        raise SearchFailed(stop)
                except SearchFailed as err:
                    outcome[b] = err
                    failed.append(b)
            if failed:
                keep = ~torch.isin(row_sent, torch.tensor(failed, device=device))
                states, row_sent, last_words = states[keep], row_sent[keep], last_words[keep]
                costs, hist = costs[keep], hist[keep]
                active = [b for b in active if b not in failed]
                if not active:
                    break
            self.stats["steps"] += 1
            self.stats["row_steps"] += states.shape[0]
            by_len = self.stats["rows_by_length"]
            for b in active:
                by_len[len(cs[b])] = by_len.get(len(cs[b]), 0) + rows_of[b]

            sizes = [(b, rows_of[b]) for b in active]
            ctx = decoding.context(model, src, k, states, sizes, self.workspace)
            z = decoding.logits(model, states, ctx, last_words, self.workspace)
            parts = output.normalise(z, decoding.single_rows(sizes), self.workspace, chunk_max=True)
            sel_sent, sel_row, sel_word, sel_cost = self._select(
                k, parts, costs, row_sent, active, rows_of, n, jobs
            )

            # finished hypotheses leave the beam (sample.py:108-120)
            is_eos = sel_word == self.eos_id
            if bool(is_eos.any()):
                fin = is_eos.nonzero()[:, 0]
                f_sent = sel_sent[fin].tolist()
                f_hist = torch.cat([hist[sel_row[fin]], sel_word[fin, None]], 1).tolist()
                f_cost = sel_cost[fin].tolist()
                for b, t, c in zip(f_sent, f_hist, f_cost):
                    fin_trans[b].append(t)
                    fin_costs[b].append(c)
            alive = ~is_eos
            alive_rows = torch.zeros(B, dtype=torch.int64, device=device)
            alive_rows.index_add_(0, sel_sent[alive], torch.ones_like(sel_sent[alive]))
            n_alive = alive_rows.tolist()
            ended = []
            for b in active:
                n[b] = n_alive[b]
                if n[b] == 0 or k + 1 >= steps[b]:
                    ended.append(b)
                    outcome[b] = self._finish(jobs[b], fin_trans[b], fin_costs[b])
            active = [b for b in active if b not in ended]
            if ended:
                alive &= ~torch.isin(sel_sent, torch.tensor(ended, device=device))
            keep = alive.nonzero()[:, 0]
            origin = sel_row[keep]
            row_sent, last_words, costs = sel_sent[keep], sel_word[keep], sel_cost[keep]
            hist = torch.cat([hist[origin], last_words[:, None]], 1)
            rows_of = {b: n[b] for b in active}
            if active:
                states = decoding.advance(
                    model,
                    last_words,
                    decoding.reorder(states, origin),
                    decoding.reorder(ctx, origin),
                )
            k += 1
        ended_all = [o for o in outcome if o is not None]
        assert len(ended_all) == B  # every sentence ended
        return ended_all

    def _finish(
        self, job: _Job, fin_trans: list[list[int]], fin_costs: list[float]
    ) -> Hypotheses | SearchFailed | _Job:
        """End of one attempt: sorted hypotheses, a retry, or the failure (sample.py:122-133)."""
        if fin_trans:
            return sort_finished(fin_trans, fin_costs)
        which = {"sentence": job.index}  # for translate.SearchWarnings
        if job.ignore_unk:
            logger.warning("Did not manage without UNK", extra=which)
            return _Job(job.index, job.beam_size, False, job.minlen)
        if job.beam_size < MAX_RETRY_BEAM:
            logger.warning(
                "Still no translations: try beam size %d", job.beam_size * 2, extra=which
            )
            return _Job(job.index, job.beam_size * 2, False, job.minlen)
        logger.error("Translation failed", extra=which)
        return SearchFailed(TRANSLATION_FAILED)

    # -- selection -----------------------------------------------------------------
    def _candidates(
        self, e: torch.Tensor, chunk_max: torch.Tensor | None, m: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``m`` words of largest ``e`` per row: ``(R, m)`` word ids and float32 values,
        largest first.

        With a large vocabulary the row is cut into chunks of CHUNK words: every word
        outside the ``m`` chunks of largest maximum is <= each of those maxima, so the
        ``m`` largest of the chunks' words are ``m`` largest words of the row.
        """
        if chunk_max is None or m >= chunk_max.shape[1]:
            vals, words = torch.topk(e, m, dim=1)
            return words, vals
        R, V = e.shape
        top_chunks = torch.topk(chunk_max, m, dim=1).indices  # (R, m)
        words = (top_chunks[:, :, None] * CHUNK + torch.arange(CHUNK, device=e.device)).flatten(
            1
        )  # (R, m * CHUNK)
        inside = words < V
        vals = torch.gather(e, 1, torch.where(inside, words, torch.zeros_like(words)))
        # the last chunk is short: its missing words get -1 < any exp (>= 0)
        vals = torch.where(inside, vals, torch.full_like(vals, -1.0))
        vals, pos = torch.topk(vals, m, dim=1)
        return torch.gather(words, 1, pos), vals

    def _select(
        self,
        k: int,
        parts: Normalised,
        costs: torch.Tensor,
        row_sent: torch.Tensor,
        active: list[int],
        rows_of: dict[int, int],
        n: list[int],
        jobs: Sequence[_Job],
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The survivors of step ``k`` for every active sentence, as the literal search picks them.

        Per row the ``m = n_b + 3`` words of highest probability are candidates (cost
        is a non-increasing function of the probability, forbidden words aside); their
        exact costs go through ``select_cheapest``.  Let ``T`` be the ``n_b``-th cost
        chosen.  If ``T < inf`` and, in every row of the sentence whose words are not
        all candidates, the least probable candidate *without* the minlen/UNK masks
        costs more than ``T``, then every non-candidate costs more than ``T`` (or is a
        forbidden word: ``inf``), is beaten by ``n_b`` candidates, and the selection is
        the one over the full matrix, with the same order and ties.  Otherwise the step
        of that sentence is redone on its full ``(rows, V)`` cost matrix.

        ``parts``: the step's output softmax in parts (:func:`~groundhog_port.model.output.normalise`).
        Returns, in sentence order then ``select_cheapest`` order: sentence, row, word,
        float64 cost of each survivor.
        """
        e, chunk_max = parts.e, parts.chunk_max
        device = e.device
        V = self.cfg.n_sym_target
        R = e.shape[0]
        n_act = [n[b] for b in active]
        # n + 1 candidates besides the (at most two) words the masks may forbid
        m = min(max(n_act) + 3, V)
        words, vals = self._candidates(e, chunk_max, m)
        mth = vals[:, -1]  # least probable candidate
        words, order = torch.sort(words, dim=1)  # flat-index order
        vals = torch.gather(vals, 1, order)
        cand_logp = legacy_log(parts.scaled(vals))  # == legacy_log(probs) there
        mth_cost = costs - legacy_log(parts.scaled(mth[:, None])[:, 0]).double()
        logp = cand_logp
        iu = torch.tensor([jobs[b].ignore_unk for b in active], device=device)
        no_eos = torch.tensor([k < jobs[b].minlen for b in active], device=device)
        # sentence slot of each row: sentences are active[0], active[1], ... in row order
        counts = torch.tensor([rows_of[b] for b in active], device=device)
        slot = torch.repeat_interleave(torch.arange(len(active), device=device), counts)
        if bool(iu.any()) or bool(no_eos.any()):
            forbid = ((words == self.unk_id) & iu[slot][:, None]) | (
                (words == self.eos_id) & no_eos[slot][:, None]
            )
            logp = logp.masked_fill(forbid, -float("inf"))
        cand_cost = costs[:, None] - logp.double()  # (R, m)

        # one row of candidates per sentence, NaN-padded at the end
        starts = torch.cumsum(counts, 0) - counts
        local = torch.arange(R, device=device) - starts[slot]
        width = int(counts.max()) * m
        mat = torch.full((len(active), width), float("nan"), dtype=torch.float64, device=device)
        pos = (slot * width + local * m)[:, None] + torch.arange(m, device=device)
        mat.view(-1)[pos.flatten()] = cand_cost.flatten()
        n_t = torch.tensor(n_act, dtype=torch.int64, device=device)
        idx = select_cheapest(mat, n_t)  # (B_act, max n), -1 padded
        last = torch.gather(idx, 1, (n_t - 1)[:, None])[:, 0]
        T = torch.gather(mat, 1, last[:, None])[:, 0]
        if m < V:
            ok_rows = mth_cost > T[slot]
            bad = torch.zeros(len(active), dtype=torch.int64, device=device)
            bad.index_add_(0, slot, (~ok_rows).long())
            ok = (T < float("inf")) & (bad == 0)
        else:
            ok = torch.ones(len(active), dtype=torch.bool, device=device)

        taken = idx >= 0
        sel_slot = torch.arange(len(active), device=device)[:, None].expand_as(idx)[taken]
        p = idx[taken]
        sel_row = starts[sel_slot] + p // m
        j = p % m
        selected = sel_slot, sel_row, words[sel_row, j], cand_cost[sel_row, j]
        if not bool(ok.all()):
            selected = self._fallback(
                k, ok, parts, costs, starts, counts, active, n_act, jobs, selected
            )
        sel_slot, sel_row, sel_word, sel_cost = selected
        act = torch.tensor(active, dtype=torch.int64, device=device)
        return act[sel_slot], sel_row, sel_word, sel_cost

    def _fallback(
        self,
        k: int,
        ok: torch.Tensor,
        parts: Normalised,
        costs: torch.Tensor,
        starts: torch.Tensor,
        counts: torch.Tensor,
        active: list[int],
        n_act: list[int],
        jobs: Sequence[_Job],
        selected: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Redo the selection of the sentences the prefilter cannot decide, on their full
        ``(rows, V)`` cost matrix exactly as ``literal.BeamSearch.search`` does.

        ``selected``: the prefilter's ``(slot, row, word, cost)`` of every selected
        candidate; returned in that form with the undecided sentences' entries redone."""
        V = self.cfg.n_sym_target
        sel_slot, sel_row, sel_word, sel_cost = selected
        pieces = []
        ok_list = ok.tolist()
        starts_l, counts_l = starts.tolist(), counts.tolist()
        for s, b in enumerate(active):
            if ok_list[s]:
                mask = sel_slot == s
                pieces.append((sel_slot[mask], sel_row[mask], sel_word[mask], sel_cost[mask]))
                continue
            self.stats["fallbacks"] += 1
            r0, r1 = starts_l[s], starts_l[s] + counts_l[s]
            probs = parts.probs(slice(r0, r1))  # softmax_with_bias rows
            flat = next_costs(
                costs[r0:r1], probs, k, jobs[b].minlen, jobs[b].ignore_unk, self.eos_id, self.unk_id
            ).flatten()
            best = select_cheapest(flat[None], [n_act[s]])[0]
            pieces.append((torch.full_like(best, s), r0 + best // V, best % V, flat[best]))
        slots, rows, words, chosen = (torch.cat(t) for t in zip(*pieces))
        return slots, rows, words, chosen
