"""Parity groups ``steps`` and ``beam``: every instrumented step of the literal beam search
fed with the recorded inputs, and translate's two searches (literal and batched) on every
recorded label (:mod:`groundhog_port.harness.check` describes each group's quantities)."""

from __future__ import annotations

import math

import numpy as np
import torch

from ...errors import LegacyInputError
from ...search.common import SearchFailed, length_normalized, next_costs, select_cheapest
from ...search.literal import BeamSearch, path_costs
from ...search.translator import DEFAULT_BATCH_SIZE, Translator, choose
from .. import tolerance as tolmod
from ..report import (
    Context,
    Group,
    Row,
    Rows,
    as_numpy,
    compare_costs_by_hypothesis,
    compare_exact,
    compare_sequences,
    compare_text,
    compare_values,
    normal_probs,
    same_error,
)
from ..trace import Tolerance, tolerance_for


def _step_triples(beam, flat, beam_size, voc):
    """The port's selection on ``flat`` as (prefix, word, flat index) triples (``beam_size``:
    the step's width, the trace's ``n_samples``)."""
    if beam_size >= flat.numel():
        return None
    best = select_cheapest(flat[None], [beam_size])[0].cpu().numpy()
    return [(beam[int(b) // voc], int(b) % voc, int(b)) for b in best]


def check_steps(ctx: Context, rows: Rows) -> None:
    r_seq = rows.get("steps", "steps/seq", "steps/0/seq")
    r_probs = rows.get("steps", "steps/next_probs", "steps/0/000/next_probs")
    r_flat = rows.get("steps", "steps/flat_next_costs", "steps/0/000/flat_next_costs")
    r_surv = rows.get("steps", "steps/survivors", "steps/0/000/costs")
    r_next = rows.get("steps", "steps/next_states", "steps/0/000/next_states")
    r_ftrans = rows.get("steps", "steps/fin_trans", "steps/0/fin_trans_flat")
    r_fcost = rows.get("steps", "steps/fin_costs", "steps/0/fin_costs")
    # recorded data against recorded data: a check of the trace, reported apart
    r_last = rows.get("steps", "steps/last_words", "steps/0/000/last_words", self_check=True)
    r_gath = rows.get(
        "steps",
        "steps/states_gathered",
        "steps/0/000/states_gathered",
        self_check=True,
        tol=tolerance_for("steps/0/000/last_words"),
    )
    model, model64, probe = ctx.model, ctx.model64, ctx.probe
    eos, unk = model.cfg.null_sym_target, model.cfg.unk_sym_target
    searcher = BeamSearch(model)
    for r in (r_seq, r_probs, r_flat, r_surv, r_next):
        r.product = "BeamSearch step functions (translate --batch-size 1, the literal search)"
    r_ftrans.product = r_fcost.product = "BeamSearch.search (translate --batch-size 1)"
    for i in ctx.tr.steps_indices():
        ss = ctx.tr.steps(i)
        where = f"steps/{i}"
        line = ctx.src_line(i)
        if line is not None:
            compare_exact(
                r_seq,
                f"{where}/seq",
                np.asarray(ctx.exp.parse_source(line)[0], dtype=np.int64),
                ss.seq,
            )
        c, c64, cp = (m.encode(ss.seq) for m in (model, model64, probe))
        pfc, pfc64, pfcp = model.p_from_c(c), model64.p_from_c(c64), probe.p_from_c(cp)
        recorded = ss.survivors(eos)
        beam: list[tuple[int, ...]] = [()]
        prev_costs = np.zeros(1)
        for n, st in enumerate(ss.steps):
            sw = f"{where}/{n:03d}"
            k = int(st["k"])
            if k == 0:
                beam, prev_costs = [()], np.zeros(1)
            # the beam bookkeeping: last word of every open hypothesis, zeros at k = 0
            last = (
                np.zeros(len(beam), np.int64)
                if k == 0
                else np.asarray([p[-1] for p in beam], np.int64)
            )
            compare_exact(r_last, f"{sw}/last_words", last, st["last_words"])
            states_in = np.asarray(st["states_in"])
            words_in = ctx.t(st["last_words"], torch.int64)
            probs = model.next_probs(c, pfc, k, words_in, ctx.t(states_in[0], torch.float32))
            probs64 = model64.next_probs(
                c64, pfc64, k, words_in, ctx.t(states_in[0], torch.float64)
            )
            probsp = probe.next_probs(cp, pfcp, k, words_in, ctx.t(states_in[0], torch.float64))
            compare_values(
                r_probs,
                f"{sw}/next_probs",
                as_numpy(probs),
                as_numpy(probs64),
                st["next_probs"],
                probe=as_numpy(probsp),
            )
            if len(prev_costs) != probs.shape[0]:
                r_flat.mismatch(
                    f"{sw}/flat_next_costs",
                    f"{len(prev_costs)} open hypotheses after the "
                    f"previous step, {probs.shape[0]} rows fed",
                )
                triples = flat32 = flat64 = None
            else:
                args = (k, ss.minlen, ss.ignore_unk, eos, unk)
                prev = ctx.t(prev_costs, torch.float64)
                flat = next_costs(prev, probs, *args).flatten()
                flat32, flat64 = (
                    as_numpy(flat),
                    as_numpy(next_costs(prev, probs64, *args).flatten()),
                )
                flatp = as_numpy(next_costs(prev, probsp, *args).flatten())
                rec_p = np.asarray(st["next_probs"], dtype=np.float64).ravel()
                exact_p = as_numpy(probs64).ravel()
                compare_values(
                    r_flat,
                    f"{sw}/flat_next_costs",
                    flat32,
                    flat64,
                    st["flat_next_costs"],
                    probe=flatp,
                    quantum=tolmod.cost_quantum(st["flat_next_costs"], np.minimum(rec_p, exact_p)),
                    poolable=normal_probs(rec_p, exact_p),
                )
                triples = _step_triples(beam, flat, int(st["n_samples"]), probs.shape[1])
            _compare_survivors(
                r_surv,
                sw,
                triples,
                recorded[n],
                beam,
                probs.shape[1],
                flat32,
                flat64,
                None if flat32 is None else flatp,
            )
            trans_idx = np.asarray(st["trans_indices"], dtype=np.int64)
            if trans_idx.size and (trans_idx.min() < 0 or trans_idx.max() >= states_in.shape[1]):
                r_gath.mismatch(
                    f"{sw}/states_gathered", "trans_indices outside the recorded states_in"
                )
            else:
                compare_exact(
                    r_gath, f"{sw}/states_gathered", states_in[:, trans_idx], st["states_gathered"]
                )
            words = ctx.t(st["word_indices"], torch.int64)
            gathered = np.asarray(st["states_gathered"])[0]
            ns = model.next_states(c, pfc, k, words, ctx.t(gathered, torch.float32))
            ns64 = model64.next_states(c64, pfc64, k, words, ctx.t(gathered, torch.float64))
            nsp = probe.next_states(cp, pfcp, k, words, ctx.t(gathered, torch.float64))
            compare_values(
                r_next,
                f"{sw}/next_states",
                as_numpy(ns)[None],
                as_numpy(ns64)[None],
                st["next_states"],
                probe=as_numpy(nsp)[None],
            )
            # go on from the RECORDED survivors
            kept = [(p, w, cost) for p, w, cost in recorded[n] if w != eos]
            beam = [p + (w,) for p, w, _ in kept]
            prev_costs = np.asarray([cost for _, _, cost in kept], dtype=np.float64)
        # the whole search, as sample.py --beam-size N runs it
        try:
            hyps = searcher.search(ss.seq, ss.beam_size, ignore_unk=ss.ignore_unk, minlen=ss.minlen)
            failure = None
        except SearchFailed as err:
            hyps, failure = None, str(err)
        _compare_outcome(
            r_ftrans,
            r_fcost,
            None,
            where,
            hyps,
            failure,
            ss.trans,
            ss.costs,
            ss.error,
            costs64=None if hyps is None else path_costs(model64, ss.seq, hyps.trans),
            costs_probe=None if hyps is None else path_costs(probe, ss.seq, hyps.trans),
        )
        ctx.tick()


def _compare_survivors(row: Row, where: str, port, recorded, beam, voc, flat32, flat64, flatp):
    """Survivors of one step as SETS of (prefix, word); their costs under the derived bound.

    A set difference is accepted only as a near tie: every candidate in one set but not the
    other lies within the float32 noise bound of the selection boundary (the recorded set is
    then as valid a float32 selection as the port's); it is noted.
    """
    if port is None or flat32 is None:
        row.mismatch(
            where,
            "the port could not select survivors (beam not smaller than the candidates)",
            len(recorded),
        )
        return
    slot = {p: j for j, p in enumerate(beam)}
    want = {(p, w): c for p, w, c in recorded}
    got = {(p, w): b for p, w, b in port}
    index = lambda key: slot[key[0]] * voc + key[1] if key[0] in slot else None
    keys = [key for key in want if index(key) is not None]
    missing = [key for key in want if key not in got]
    extra = [key for key in got if key not in want]
    if len(keys) < len(want):
        row.mismatch(
            where,
            "a recorded survivor extends no hypothesis of the recorded beam",
            len(want) - len(keys),
        )
    if keys:
        idx = np.asarray([index(key) for key in keys])
        compare_values(
            row,
            f"{where}/costs",
            flat32[idx],
            flat64[idx],
            np.asarray([want[key] for key in keys], dtype=np.float64),
            probe=flatp[idx],
        )
    if missing or extra:
        near = _near_tie(
            [index(key) for key in missing], [got[key] for key in extra], flat64, flatp
        )
        if near:
            row.note(
                f"{where}: near tie at the selection boundary accepted (recorded only {missing[:2]}, "
                f"port only {extra[:2]}, costs within the float32 noise bound)"
            )
        else:
            row.mismatch(
                where,
                f"survivor sets differ: recorded only {missing[:3]}, port only {extra[:3]}",
                len(missing),
            )


def _near_tie(recorded_only, port_only, flat64, flatp) -> bool:
    """Each swapped candidate's exact cost within the bound (2 K * noise, the probe's
    noise) of the other side's: either order is a valid float32 selection."""
    if None in recorded_only or not recorded_only or not port_only:
        return False
    finite = np.isfinite(flat64)
    scale, _ = tolmod.pooled_scale(flat64, tolmod.ABS, flatp, poolable=finite)
    a, b = np.asarray(recorded_only), np.asarray(port_only)
    allow = lambda i: (
        2 * tolmod.K * np.maximum(np.abs(flatp[i] - flat64[i]), max(scale, tolmod.U32))
        + tolmod.ulp32(flat64[i])
    )
    lo_rec = np.min(flat64[a] - allow(a))  # the cheapest the recorded-only ones can be
    hi_port = np.max(flat64[b] + allow(b))  # the dearest the port-only ones can be
    return bool(np.isfinite(flat64[a]).all() and lo_rec <= hi_port)


def _compare_outcome(
    r_trans: Row,
    r_cost: Row,
    r_best: Row | None,
    where: str,
    hyps,
    failure: str | None,
    want_trans,
    want_costs,
    want_error: str | None,
    best_sentence: str | None = None,
    rendered: str | None = None,
    costs64=None,
    normalized: bool = False,
    costs_probe=None,
):
    """A finished search (or the crash) against the recorded one."""
    if want_error is not None:
        r_trans.n += 1
        if failure is None:
            r_trans.n_bad += 1
            r_trans._candidate(math.inf, where)
            r_trans.note(
                f"{where}: the original failed ({want_error}); the port found "
                f"{len(hyps.trans)} hypotheses"
            )
        elif not same_error(failure, want_error):
            r_trans.n_bad += 1
            r_trans._candidate(math.inf, where)
            r_trans.note(f"{where}: port failed with {failure!r}, the original with {want_error!r}")
        return
    if failure is not None:
        r_trans.mismatch(
            where,
            f"the port failed ({failure}); the original found {len(want_trans)} hypotheses",
            max(1, len(want_trans)),
        )
        return
    compare_sequences(r_trans, f"{where}/fin_trans", hyps.trans, want_trans)
    compare_costs_by_hypothesis(
        r_cost,
        f"{where}/fin_costs",
        hyps.trans,
        hyps.costs,
        costs64,
        want_trans,
        want_costs,
        lengths_as_terms=not normalized,
        got_costs_probe=costs_probe,
    )
    if r_best is not None and best_sentence is not None:
        compare_text(r_best, f"{where}@best_sentence", rendered, best_sentence)


class _EachSearchOnce:
    """``BeamSearch.search`` with each input searched once, and the float64 ``path_costs``.

    The labels ``N`` and ``N_normalize`` run the same search (``sample()`` normalises the
    costs afterwards), so the literal Translator of every label shares this searcher: a
    trace's labels cost one literal search per (beam size, ignore_unk); ``sample()`` and the
    normalisation are still the product's own."""

    def __init__(self, model):
        self.searcher = BeamSearch(model)
        self.searches, self.costs = {}, {}

    def search(self, seq, beam_size, ignore_unk=False, minlen=0):
        key = (tuple(np.asarray(seq).tolist()), beam_size, ignore_unk, minlen)
        if key not in self.searches:
            try:
                self.searches[key] = (
                    self.searcher.search(seq, beam_size, ignore_unk=ignore_unk, minlen=minlen),
                    None,
                )
            except SearchFailed as err:
                self.searches[key] = None, err
        hyps, failed = self.searches[key]
        if failed is not None:
            raise failed
        return hyps

    def path_costs(self, model, seq, trans):
        key = (id(model), tuple(np.asarray(seq).tolist()), tuple(tuple(t) for t in trans))
        if key not in self.costs:
            self.costs[key] = path_costs(model, seq, trans)
        return self.costs[key].copy()


def beam_products() -> tuple[tuple[str, int, str], ...]:
    """``(name, batch size, product text)`` of the two searches ``translate`` runs: the
    batched search at translate's default ``--batch-size`` (what ``translate`` and ``serve``
    run) and the literal one (``--batch-size 1``)."""
    return (
        (
            "",
            1,
            "Translator(batch_size=1).search_seqs (translate --batch-size 1: BeamSearch, sample())",
        ),
        (
            "batched/",
            DEFAULT_BATCH_SIZE,
            f"Translator(batch_size={DEFAULT_BATCH_SIZE}).search_seqs (translate's default: "
            "BatchedBeamSearch.sample_many)",
        ),
    )


def check_beam(ctx: Context, rows: Rows) -> None:
    labels = ctx.beam_labels
    available = ctx.tr.beam_labels()
    chosen = available if labels is None else [str(l) for l in labels]
    unknown = [l for l in chosen if l not in available]
    if unknown:
        raise LegacyInputError(
            ctx.tr.path,
            f"beam label(s) {', '.join(unknown)} not in the trace "
            f"(it has {', '.join(available) or 'none'})",
        )
    cache = _EachSearchOnce(ctx.model)
    for label in chosen:
        run = ctx.tr.beam(label)
        order = sorted(run.sentences)
        seqs = [ctx.source_seq(i) for i in order]
        for sub, batch_size, product in beam_products():
            translator = Translator(
                ctx.exp,
                run.beam_size,
                ignore_unk=run.ignore_unk,
                normalize=run.normalize,
                batch_size=batch_size,
            )
            if batch_size == 1:
                translator.literal = cache  # type: ignore[assignment]  # BeamSearch's search()
            results = translator.search_seqs(seqs)
            r_trans = rows.get(
                "beam", f"beam/{label}/{sub}fin_trans", f"beam/{label}/0/fin_trans_flat"
            )
            r_cost = rows.get("beam", f"beam/{label}/{sub}fin_costs", f"beam/{label}/0/fin_costs")
            r_best = rows.get(
                "beam", f"beam/{label}/{sub}best_sentence", f"beam/{label}/0/fin_trans_flat"
            )
            r_trans.product = r_cost.product = r_best.product = product
            n_err = 0
            for i, res in zip(order, results):
                sent = run.sentences[i]
                where = f"beam/{label}/{sub}{i}"
                seq = seqs[order.index(i)]
                if isinstance(res, SearchFailed):
                    hyps, failure, rendered = None, str(res), None
                    costs64 = costsp = None
                else:
                    hyps, failure = res, None
                    rendered = choose(hyps, ctx.exp.trg_idx2word).line
                    costs64 = cache.path_costs(ctx.model64, seq, hyps.trans)
                    costsp = cache.path_costs(ctx.probe, seq, hyps.trans)
                    if run.normalize:  # the bound's reference values only
                        costs64 = length_normalized(costs64, hyps.trans)
                        costsp = length_normalized(costsp, hyps.trans)
                if sent.error is not None:
                    n_err += 1
                _compare_outcome(
                    r_trans,
                    r_cost,
                    r_best,
                    where,
                    hyps,
                    failure,
                    sent.trans,
                    sent.costs,
                    sent.error,
                    sent.best_sentence,
                    rendered,
                    costs64=costs64,
                    normalized=run.normalize,
                    costs_probe=costsp,
                )
            ctx.tick()
            if n_err and r_trans.passed:
                r_trans.note(
                    f"{n_err} recorded crash(es) of sample.py reproduced with the same message"
                )
    _beam_coverage(ctx, rows, chosen)


def _beam_coverage(ctx: Context, rows: Rows, labels):
    """NOT COVERED rows for mechanisms a recording cannot tell apart (expected:
    :attr:`~groundhog_port.harness.report.Row.recording_gap`, exit 0):

    * ``beam/N_ignore_unk/ignore_unk``: no hypothesis of the plain ``beam/N`` run contains
      UNK (or there is no plain run), so searching with or without ``ignore_unk`` gives the
      same recording;
    * ``beam/N_normalize/normalize_choice``: in no sentence does the cheapest normalised
      cost pick another hypothesis than the cheapest raw cost (always so at beam 1), so a
      search that chose by raw cost writes the same lines (the costs themselves are still
      compared: ``beam/N_normalize/fin_costs``).
    """
    available = set(ctx.tr.beam_labels())
    unk = ctx.exp.model.cfg.unk_sym_target
    for label in labels:
        run = ctx.tr.beam(label)
        why = None
        if run.ignore_unk:
            plain = str(run.beam_size)
            if plain not in available:
                why = f"no plain beam/{plain} recording to tell ignore_unk apart"
            elif not any(
                unk in tuple(int(t) for t in h)
                for s in ctx.tr.beam(plain).sentences.values()
                for h in (s.trans or [])
            ):
                why = f"no hypothesis of beam/{plain} contains UNK: ignore_unk changes nothing here"
            quantity = f"beam/{label}/ignore_unk"
        elif run.normalize:
            differs = False
            for s in run.sentences.values():
                if s.error is not None or not s.trans:
                    continue
                norm = np.asarray(s.costs, dtype=np.float64)
                raw = norm * np.asarray([len(t) for t in s.trans], dtype=np.float64)
                differs |= int(np.argmin(norm)) != int(np.argmin(raw))
            if not differs:
                why = (
                    "the cheapest normalised and the cheapest raw cost pick the same hypothesis in "
                    "every sentence: choosing by normalised cost is not discriminated"
                )
            quantity = f"beam/{label}/normalize_choice"
        if why is not None:
            row = rows.get("beam", quantity, tol=Tolerance("n/a"))
            row.covered = False
            row.recording_gap = True  # a fact of the recording: expected (exit 0)
            row.notes.append(why)


STEPS = Group(
    "steps", lambda tr: tr.has("steps"), lambda tr, labels: len(tr.steps_indices()), check_steps
)
BEAM = Group(
    "beam",
    lambda tr: tr.has("beam"),
    lambda tr, labels: (
        2
        * sum(
            1
            for label in (tr.beam_labels() if labels is None else labels)
            if tr.has(f"beam/{label}")
        )
    ),
    check_beam,
)
