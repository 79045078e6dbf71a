"""Parity of the random sampler against a trace's ``/sampler`` group (docs/trace_format.md,
``/sampler``).

What is compared, per quantity (rows of :class:`groundhog_port.harness.report.Report`); the
product is ``Sampler.sample`` (what ``sample --batch-size 1`` calls: its OWN step count,
one stream continued over the recorded calls in order) and, for ``sampler/batched/*``,
``Sampler.sample_many`` at translate's default batch size over all calls:

exact
    ``sampler/mrg_seed`` (derived from the state by :func:`~.seed.derive_mrg_seed` against
    the recorded attribute: a wrong derivation fails here, and the draws below use the
    DERIVED seed, so it fails them too), ``sampler/mrg_base_rstate_after_build`` (the
    stream's base state after ``build()``, i.e. after its two random ops),
    ``sampler/rstate_before_first_call`` (every recorded state matrix: full arrays where
    recorded, else the first rows and the sha256 of the full matrix),
    ``sampler/seq`` (the source parsed as sample.py parses it), ``sampler/n_steps`` (the
    number of steps the product drew), ``sampler/sample_ids``, ``sampler/rstate_after_call``
    (first rows + sha256 after every call), ``sampler/sentences``; the batched path's ids,
    sentences and the stream after the last call.
derived bound (:mod:`groundhog_port.harness.tolerance`)
    ``sampler/sample_neg_log_probs`` (kind ``ABS``: single ``-log p`` terms) and
    ``sampler/costs`` (kind ``TERMS``, the sentence length): the product's float32 values
    (along the RECORDED ids when it drew others, so one differing id does not cascade),
    and ``sampler/batched/costs`` (what ``sample_many`` returned, where its ids are the
    recorded ones); the float64 shadow and the float32 probe replay the recorded ids for
    the bound.
"""

from __future__ import annotations

import hashlib

import numpy as np
from numpy.typing import ArrayLike

from ...legacy.vocab import indices_to_words
from ...sampling.draw import Draw, temperature
from ...sampling.mrg import DEFAULT_N_STREAMS, MRGRandomStreams, StateMatrix
from ...sampling.sampler import Sampler, draw_sentence, finish
from ...sampling.seed import derive_mrg_seed
from ...search.translator import DEFAULT_BATCH_SIZE
from ..report import Context, Group, Rows, compare_exact, compare_text, compare_values
from ..trace import EXACT

#: random ops ``build()`` creates on the output layer's stream (two ``get_sample`` calls in
#: ``sampling_step``, encdec.py:1228-1229); later ops (the recorder's third,
#: ``create_next_states_computer``) come after ``mrg_base_rstate_after_build``
OPS_IN_BUILD = 2


def sha256_rows(rows: ArrayLike) -> str:
    return hashlib.sha256(np.ascontiguousarray(rows, dtype=np.int32).tobytes()).hexdigest()


def _compare_state(row, where, port_rows, recorded):
    """One state matrix: full rows ==, or the first rows == and the sha256 of the whole."""
    want = np.asarray(recorded["rows"])
    if recorded["full"]:
        compare_exact(row, where, port_rows, want)
        return
    compare_exact(row, f"{where}_first{len(want)}rows", port_rows[: len(want)], want)
    if recorded["sha256"] is not None:
        compare_text(row, f"{where}@sha256", sha256_rows(port_rows), str(recorded["sha256"]))


def check_sampler(ctx: Context, rows: Rows) -> None:
    """Compare ``/sampler`` of ``ctx.tr`` into ``rows`` (see the module docstring)."""

    exp = ctx.exp
    rec = ctx.tr.sampler()
    r_seed = rows.get("sampler", "sampler/mrg_seed", tol=EXACT)
    r_base = rows.get("sampler", "sampler/mrg_base_rstate_after_build", tol=EXACT)
    r_before = rows.get("sampler", "sampler/rstate_before_first_call", tol=EXACT)
    r_seq = rows.get("sampler", "sampler/seq", tol=EXACT)
    r_steps = rows.get("sampler", "sampler/n_steps", tol=EXACT)
    r_ids = rows.get("sampler", "sampler/sample_ids", tol=EXACT)
    r_after = rows.get("sampler", "sampler/rstate_after_call", tol=EXACT)
    r_sent = rows.get("sampler", "sampler/sentences", tol=EXACT)
    r_nlp = rows.get("sampler", "sampler/sample_neg_log_probs", "sampler/0/sample_neg_log_probs")
    r_cost = rows.get("sampler", "sampler/costs", "sampler/0/costs")

    seed = derive_mrg_seed(exp.state, exp.cfg, exp.state_path)
    want_seed = rec["attrs"].get("mrg_seed")
    if want_seed is not None:
        compare_exact(r_seed, "sampler@mrg_seed", np.int64(seed), np.int64(want_seed))
    before = rec.get("rstate_before", {})
    streams = MRGRandomStreams(seed)
    mats, base_after_build = {}, None
    for j in range(max(list(before) + [OPS_IN_BUILD - 1]) + 1):
        shape = before.get(j, {}).get("full_shape")
        mats[j] = streams.new_state_matrix(shape[0] if shape else DEFAULT_N_STREAMS)
        if j == OPS_IN_BUILD - 1:
            base_after_build = streams.rstate.copy()
    assert base_after_build is not None  # the loop above always reaches OPS_IN_BUILD - 1
    if "mrg_base_rstate_after_build" in rec:
        compare_exact(
            r_base,
            "sampler/mrg_base_rstate_after_build",
            base_after_build,
            rec["mrg_base_rstate_after_build"],
        )
    for j, want in sorted(before.items()):
        _compare_state(
            r_before, f"sampler/rstate_shared_before_first_call/{j:02d}", mats[j].rows, want
        )
    used = [j for j, w in before.items() if w.get("used_by_sample_fn")] or [0]
    literal = "Sampler.sample (sample, --batch-size 1: own step count, one stream)"
    for r in (r_seed, r_base, r_before, r_seq):
        r.product = "Sampler (sample: seed derivation, MRG streams)"
    for r in (r_steps, r_ids, r_after, r_sent, r_nlp, r_cost):
        r.product = literal
    sampler = Sampler(exp, seed, stream=StateMatrix(mats[used[0]].rows))
    start = StateMatrix(mats[used[0]].rows.copy())
    shadow, probe = ctx.model64, ctx.probe
    closest: tuple[float, str | None] = (np.inf, None)
    calls = sorted(rec["calls"].items())
    seqs, reference = [], {}  # reference: call -> (float64 costs, probe costs, lengths)
    for i, call in calls:
        where = f"sampler/{i}"
        a = call["attrs"]
        seq = np.asarray(call["seq"], dtype=np.int64)
        seqs.append(seq)
        line = ctx.src_line(int(a["test_index"])) if "test_index" in a else None
        if line is not None:
            compare_exact(
                r_seq, f"{where}/seq", np.asarray(exp.parse_source(line)[0], np.int64), seq
            )
        n, n_steps, alpha = int(a["n_samples"]), int(a["n_steps"]), float(a["alpha"])
        # the product: sample() with its own step count, continuing the one stream
        got = sampler.sample(seq, n, alpha)
        draw = got.draw
        compare_exact(r_steps, f"{where}@n_steps", np.int64(draw.ids.shape[0]), np.int64(n_steps))
        compare_exact(r_ids, f"{where}/sample_ids", draw.ids, call["sample_ids"])
        if draw.margin is not None and draw.margin.size:
            closest = min(closest, (float(draw.margin.min()), where))
        if "sentences" in call:
            _compare_sentences(r_sent, where, got.sentences, list(call["sentences"]))
        for j, want in sorted(call.get("rstate_after", {}).items()):
            rows_j = sampler.stream.rows if j == used[0] else mats[j].rows
            _compare_state(r_after, f"{where}/rstate_shared_after_call/{j:02d}", rows_j, want)
        ids = np.asarray(call["sample_ids"], dtype=np.int64)
        if ids.shape != (n_steps, n):
            r_nlp.mismatch(
                where, f"recorded sample_ids of shape {ids.shape}, expected {(n_steps, n)}"
            )
            continue
        T = temperature(alpha)
        if draw.ids.shape == ids.shape and (draw.ids == ids).all():
            nlp32, costs32 = draw.neg_log_probs, got.costs
        else:
            # the product drew other ids (failed above): its float32 -log p along the
            # RECORDED ids, so that one differing id does not cascade into these rows
            d32 = draw_sentence(ctx.model, seq, n, n_steps, T, None, forced_ids=ids)
            nlp32, costs32 = d32.neg_log_probs, finish(d32, exp.trg_idx2word).costs
        d64 = draw_sentence(shadow, seq, n, n_steps, T, None, forced_ids=ids)
        dp = draw_sentence(probe, seq, n, n_steps, T, None, forced_ids=ids)
        compare_values(
            r_nlp,
            f"{where}/sample_neg_log_probs",
            nlp32,
            d64.neg_log_probs,
            call["sample_neg_log_probs"],
            probe=dp.neg_log_probs,
        )
        f64 = finish(Draw(ids, d64.neg_log_probs), exp.trg_idx2word)
        fp = finish(Draw(ids, dp.neg_log_probs), exp.trg_idx2word)
        lengths = np.asarray(
            [
                min(len(indices_to_words(exp.trg_idx2word, ids[:, s])) + 1, n_steps)
                for s in range(n)
            ],
            np.float64,
        )
        c64, cp = np.asarray(f64.costs, np.float64), np.asarray(fp.costs, np.float64)
        reference[i] = (c64, cp, lengths)
        _check_float32_costs(r_cost, where, costs32, call["costs"])
        compare_values(
            r_cost,
            f"{where}/costs",
            np.asarray(costs32, np.float64),
            c64,
            call["costs"],
            probe=cp,
            magnitude_of=lengths,
            n_terms=lengths,
        )
        ctx.tick()
    if closest[1] is not None:
        # ids are exact as long as no uniform sits closer to a boundary than the probability
        # error (|p32 - p_theano| ~ 1e-6 here): the smallest distance met, for the record
        r_ids.notes.append(
            f"closest draw: a uniform {closest[0]:.2g} from a running-sum boundary ({closest[1]})"
        )
    _check_batched(ctx, rows, exp, seed, start, calls, seqs, used[0], reference)


def _check_float32_costs(row, where, got, recorded):
    """Where every recorded cost is a float32 value (the float32 ``numpy.sum`` of ``-log p``
    in sample.py's ``sample()``, sample.py:163-188; ``sampler.finish``), the product's must be too: a
    float64 sum moves every printed cost (``-2.6754255`` becomes ``-2.6754256188869476``)
    while staying far inside the value bound, so only this exact check sees it."""
    recorded = np.asarray(recorded, np.float64)
    if not np.array_equal(recorded.astype(np.float32).astype(np.float64), recorded):
        return  # normalised costs (a float64 division) are not float32 values
    got = np.asarray(got, np.float64)
    wide = got.astype(np.float32).astype(np.float64) != got
    if wide.any():
        row.mismatch(
            f"{where}/costs",
            f"{int(wide.sum())} of {wide.size} costs are not float32 "
            f"values (e.g. {got[wide][0]!r}), the recorded ones are",
            int(wide.sum()),
        )


def _compare_sentences(row, where, got, want):
    for s, (g, w) in enumerate(zip(got, want, strict=False)):
        compare_text(row, f"{where}@sentences[{s}]", g, w)
    if len(got) != len(want):
        row.mismatch(where, f"{len(got)} sentences, recorded {len(want)}")


def _check_batched(ctx, rows, exp, seed, start, calls, seqs, used, reference):
    """The sample command's default path: ``Sampler.sample_many`` at translate's default
    ``--batch-size`` over the recorded calls in order (one stream): ids, sentences, the
    costs it returns (under the derived bound, with the literal check's float64 and probe
    costs along the recorded ids: ``reference``) and the stream after the last call."""
    shapes = {(int(c["attrs"]["n_samples"]), float(c["attrs"]["alpha"])) for _, c in calls}
    if len(shapes) != 1:
        return  # sample_many draws one n_samples / alpha for all lines
    ((n, alpha),) = shapes
    product = (
        f"Sampler.sample_many(batch_size={DEFAULT_BATCH_SIZE}) (sample's default batched path)"
    )
    r_ids = rows.get("sampler", "sampler/batched/sample_ids", tol=EXACT)
    r_sent = rows.get("sampler", "sampler/batched/sentences", tol=EXACT)
    r_cost = rows.get("sampler", "sampler/batched/costs", "sampler/0/costs")
    r_after = rows.get("sampler", "sampler/batched/rstate_after_last_call", tol=EXACT)
    for r in (r_ids, r_sent, r_cost, r_after):
        r.product = product
    sampler = Sampler(exp, seed, stream=start)
    results = sampler.sample_many(seqs, n, alpha, batch_size=DEFAULT_BATCH_SIZE)
    for (i, call), got in zip(calls, results, strict=True):
        where = f"sampler/batched/{i}"
        if not hasattr(got, "draw"):
            r_ids.mismatch(where, f"the product failed: {got}")
            continue
        compare_exact(r_ids, f"{where}/sample_ids", got.draw.ids, call["sample_ids"])
        if "sentences" in call:
            _compare_sentences(r_sent, where, got.sentences, list(call["sentences"]))
        if i in reference and np.array_equal(got.draw.ids, call["sample_ids"]):
            c64, cp, lengths = reference[i]
            _check_float32_costs(r_cost, where, got.costs, call["costs"])
            compare_values(
                r_cost,
                f"{where}/costs",
                np.asarray(got.costs, np.float64),
                c64,
                call["costs"],
                probe=cp,
                magnitude_of=lengths,
                n_terms=lengths,
            )
    i, last = calls[-1]
    for j, want in sorted(last.get("rstate_after", {}).items()):
        if j == used:
            _compare_state(
                r_after,
                f"sampler/batched/{i}/rstate_shared_after_call/{j:02d}",
                sampler.stream.rows,
                want,
            )


SAMPLER = Group(
    "sampler",
    lambda tr: tr.has("sampler"),
    lambda tr, labels: len(tr.sampler()["calls"]) if tr.has("sampler") else 0,
    check_sampler,
)
