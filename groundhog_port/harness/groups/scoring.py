"""Parity groups ``repr``, ``pairs`` and ``batch``: the encoder and teacher-forced scoring
(``score`` and ``score --mode batch``) against the recording (:mod:`groundhog_port.harness.check`
describes each group's quantities)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ...errors import LegacyInputError
from ...search.scoring import batches_for, parse_pair, score_batch, score_pair
from .. import tolerance as tolmod
from ..report import (
    Context,
    Group,
    Rows,
    as_numpy,
    compare_exact,
    compare_text,
    compare_values,
    normal_sentences,
    score_quantum,
)
from ..trace import tolerance_for


def check_repr(ctx: Context, rows: Rows) -> None:
    seq_row = rows.get("repr", "repr/seq", "repr/0/seq")
    parsed_row = rows.get("repr", "repr/parsed_in", tol=tolerance_for("repr/0/seq"))
    c_row = rows.get("repr", "repr/c", "repr/0/c")
    init_row = rows.get("repr", "repr/init_states", "repr/0/init_states")
    seq_row.product = parsed_row.product = "Experiment.parse_source (translate, sample)"
    c_row.product = "RNNEncoderDecoder.encode (the literal search's encoder)"
    init_row.product = "RNNEncoderDecoder.initial_states"
    for i in ctx.tr.repr_indices():
        rec = ctx.tr.repr(i)
        where = f"repr/{i}"
        line = ctx.src_line(i)
        if line is not None:
            seq, parsed_in = ctx.exp.parse_source(line)
            compare_exact(seq_row, f"{where}/seq", np.asarray(seq, dtype=np.int64), rec["seq"])
            if rec.get("parsed_in") is not None:
                compare_text(parsed_row, f"{where}@parsed_in", parsed_in, rec["parsed_in"])
        c, c64, cp = (m.encode(rec["seq"]) for m in (ctx.model, ctx.model64, ctx.probe))
        compare_values(
            c_row, f"{where}/c", as_numpy(c), as_numpy(c64), rec["c"], probe=as_numpy(cp)
        )
        compare_values(
            init_row,
            f"{where}/init_states",
            as_numpy(ctx.model.initial_states(c)),
            as_numpy(ctx.model64.initial_states(c64)),
            rec["init_states"],
            probe=as_numpy(ctx.probe.initial_states(cp)),
        )
        ctx.tick()
    if ctx.src_lines is None and not ctx.tr.has("pairs"):
        seq_row.covered = parsed_row.covered = False
        seq_row.note("not covered: no source lines (pass --source)")


def check_pairs(ctx: Context, rows: Rows) -> None:
    r_src = rows.get("pairs", "pairs/src_ids", "pairs/0/src_ids")
    r_trg = rows.get("pairs", "pairs/trg_ids", "pairs/0/trg_ids")
    r_wp = rows.get("pairs", "pairs/word_probs", "pairs/0/word_probs")
    r_al = (
        rows.get("pairs", "pairs/alignment", "pairs/0/alignment") if ctx.model.cfg.search else None
    )
    r_sc = rows.get("pairs", "pairs/score", "pairs/0/score")
    r_src.product = r_trg.product = "scoring.parse_pair (score --allow-unk)"
    for r in (r_wp, r_al, r_sc):
        if r is not None:
            r.product = "scoring.score_pair (score, one sentence)"
    for i in ctx.tr.pair_indices():
        rec = ctx.tr.pairs(i)
        where = f"pairs/{i}"
        src_line, trg_line = ctx.src_line(i), ctx.trg_line(i)
        assert src_line is not None and trg_line is not None  # the pairs group needs them
        (src, _), (trg, _) = parse_pair(ctx.exp, src_line, trg_line, allow_unk=True)
        compare_exact(r_src, f"{where}/src_ids", np.asarray(src, dtype=np.int64), rec["src_ids"])
        compare_exact(r_trg, f"{where}/trg_ids", np.asarray(trg, dtype=np.int64), rec["trg_ids"])
        s, s64, sp = (
            score_pair(m, rec["src_ids"], rec["trg_ids"])
            for m in (ctx.model, ctx.model64, ctx.probe)
        )
        # masked as p * mask + 1 - mask (model.score): float32 keeps p to steps of 2**-23
        compare_values(
            r_wp,
            f"{where}/word_probs",
            as_numpy(s.word_probs),
            as_numpy(s64.word_probs),
            rec["word_probs"],
            probe=as_numpy(sp.word_probs),
            quantum=tolmod.ulp32(1.0) + tolmod.ulp32(rec["word_probs"]),
        )
        if s.alignment is not None and r_al is not None:
            assert s64.alignment is not None and sp.alignment is not None  # the same model
            compare_values(
                r_al,
                f"{where}/alignment",
                as_numpy(s.alignment),
                as_numpy(s64.alignment),
                rec["alignment"],
                probe=as_numpy(sp.alignment),
            )
        # non-search models record create_probs_computer's dummy zeros((1,)) (docs/recordings.md,
        # "Quirks of the original"): nothing the port computes, so nothing is compared
        assert s64.token_costs is not None  # score_pair sets them
        compare_values(
            r_sc,
            f"{where}/score",
            (-as_numpy(s.cost)).astype(np.float32),
            -as_numpy(s64.cost),
            rec["score"],
            probe=-as_numpy(sp.cost),
            magnitude_of=len(rec["trg_ids"]),
            n_terms=len(rec["trg_ids"]),
            poolable=normal_sentences(as_numpy(s64.token_costs)),
            quantum=score_quantum(-as_numpy(s64.cost), as_numpy(s64.token_costs)),
        )
        ctx.tick()


def check_batch(ctx: Context, rows: Rows) -> None:
    names = ("x", "y", "x_mask", "y_mask", "scores")
    r = {n: rows.get("batch", f"batch/{n}", f"batch_all/0/{n}") for n in names}
    for n in names:
        r[n].product = "scoring.batches_for / score_batch (score --mode batch)"
    if ctx.source is None or ctx.target is None:
        raise LegacyInputError(
            ctx.tr.path,
            "the batch checks need the source and target text files "
            "(--source/--target, or test files next to the trace)",
        )
    port = list(batches_for(ctx.exp, str(ctx.source), str(ctx.target), allow_unk=True))
    recorded = []
    if ctx.tr.has("batch_all"):
        batches = ctx.tr.batch_all()
        if len(port) != len(batches):
            r["x"].mismatch(
                "batch_all", f"the port builds {len(port)} batches, the trace has {len(batches)}"
            )
        recorded += [(f"batch_all/{b}", b, rec) for b, rec in enumerate(batches)]
    if ctx.tr.has("batch"):
        recorded.append(("batch", 0, ctx.tr.batch()))
    for where, b, rec in recorded:
        if b < len(port):
            pb = port[b]
            for n, got in (("x", pb.x), ("y", pb.y), ("x_mask", pb.x_mask), ("y_mask", pb.y_mask)):
                compare_exact(r[n], f"{where}/{n}", got, rec[n])
        # the scores of the RECORDED batch: its numerics, independently of the batching
        batch = SimpleNamespace(x=rec["x"], y=rec["y"], x_mask=rec["x_mask"], y_mask=rec["y_mask"])
        s32, s64, sp = (
            score_batch(m, batch)  # type: ignore[arg-type]  # a recorded batch: x, y, masks
            for m in (ctx.model, ctx.model64, ctx.probe)
        )
        mask = np.asarray(rec["y_mask"], dtype=np.float64)
        assert s64.token_costs is not None  # score_batch sets them
        compare_values(
            r["scores"],
            f"{where}/scores",
            -as_numpy(s32.cost).astype(np.float32),
            -as_numpy(s64.cost),
            rec["scores"],
            probe=-as_numpy(sp.cost),
            magnitude_of=mask.sum(0),
            n_terms=mask.shape[0],
            poolable=normal_sentences(as_numpy(s64.token_costs), mask),
            quantum=score_quantum(-as_numpy(s64.cost), as_numpy(s64.token_costs), mask),
        )
        ctx.tick()


REPR = Group(
    "repr", lambda tr: tr.has("repr"), lambda tr, labels: len(tr.repr_indices()), check_repr
)
PAIRS = Group(
    "pairs", lambda tr: tr.has("pairs"), lambda tr, labels: len(tr.pair_indices()), check_pairs
)
BATCH = Group(
    "batch",
    lambda tr: tr.has("batch_all") or tr.has("batch"),
    lambda tr, labels: len(tr.batch_all()) + int(tr.has("batch")) if tr.has("batch_all") else 0,
    check_batch,
)
