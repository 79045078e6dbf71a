"""The equivalence harness: recompute what a trace holds and compare, quantity by quantity.

A trace (``trace.h5``, :mod:`groundhog_port.trace`) records what GroundHog's compiled
Theano functions computed for a model and a set of test sentences.  :func:`check`
recomputes every recorded quantity the port can compute and returns a :class:`Report`:
one :class:`Row` per quantity with the number of values compared, the maximum absolute
and relative error, the rule from :data:`groundhog_port.trace.TOLERANCES` (the one
tolerance table) and the worst element's location.  ``groundhog-port parity`` prints it,
``parity_tests/test_legacy_cases.py`` asserts it.

What is compared (groups, selectable with ``groups=``):

``repr``
    ``seq`` (== the source line parsed as sample.py does), annotations ``c`` and the initial
    decoder states, computed from the recorded ``seq``.
``pairs``
    ``src_ids``/``trg_ids`` (== score.py's txt-mode parsing, unknown words allowed), then
    ``word_probs``, ``alignment`` and ``score`` of the recorded ids.
``batch``
    ``x``, ``y``, masks of ``/batch`` and every ``/batch_all/{b}`` (== the batches
    score.py --mode=batch builds from the source/target files) and the batch scores of the
    recorded batches.
``steps``
    every instrumented search step fed with the RECORDED inputs (``k``, ``last_words``,
    ``states_in``; the previous step's recorded survivors and costs): ``last_words`` as the
    beam bookkeeping derives them, ``next_probs``, ``flat_next_costs``, the survivors
    compared as a set of (hypothesis prefix, word, cost) -- argpartition's order is numpy's
    and not compared --, ``states_gathered``, ``next_states`` (from the recorded word and
    gathered states); then the whole search re-run: finished hypotheses == and their costs.
``beam``
    ``sample()`` with each label's beam size / normalize / ignore_unk on every sentence:
    the finished lists ==, their costs, the line sample.py wrote (``best_sentence``), and
    where the original crashed, the same error (the port raises
    :class:`~groundhog_port.search.common.SearchFailed` with the message minus the
    exception type).

``/sampler`` and ``/train_step`` are reported as NOT COVERED rows (the port has neither the
MRG random sampler nor training yet); such rows never pass or fail, and are never dropped.

Conventions of the figures: ``n`` counts array elements (token sequences: hypotheses;
strings: sentences); ``max abs err`` is over elements finite on both sides; ``max rel err``
is ``|port - recorded| / |recorded|`` over those whose recorded value is not 0; non-finite
values must match as a pattern (same positions, same nan / +inf / -inf) for every float
rule.  Each sentence is computed from its recorded inputs, so one wrong quantity does not
cascade into the rows of the next.

Typical use::

    exp = open_experiment(state, model, data_dir=case_dir)
    with TraceFile(case_dir / "trace.h5") as tr:
        report = check(exp, tr, source=case_dir / "test.en", target=case_dir / "test.fr")
    print(report.table()); report.ok
    report = check_case(case_dir)        # the same for a folder laid out like the fixtures
"""
from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Dict, Iterable, List, Optional, Sequence

import numpy as np
import torch

from .data import read_text_lines
from .errors import LegacyInputError
from .outputs import atomic_write_text
from .scoring import batches_for, parse_pair, score_batch, score_pair
from .search.common import SearchFailed, next_costs, select_cheapest
from .search.legacy import BeamSearch, sample
from .trace import Tolerance, TraceFile, tolerance_for
from .translate import choose

#: the groups :func:`check` compares, in report order
GROUPS = ("repr", "pairs", "batch", "steps", "beam")
#: recorded groups the port cannot recompute yet (reported as NOT COVERED rows)
NOT_COVERED = {
    "sampler": "not yet covered: the port has no MRG31k3p random sampler (sample.py without "
               "--beam-search)",
    "train_step": "not yet covered: training (SGD_adadelta update) is not ported",
}

PASS, FAIL, NOT_COVERED_STATUS = "PASS", "FAIL", "NOT COVERED"


# --------------------------------------------------------------------------------------
# Report rows
# --------------------------------------------------------------------------------------
def tolerance_text(tol: Tolerance) -> str:
    """``exact``, ``atol 1e-05``, ``rtol 1e-05 + atol 1e-06``, ``set; cost rtol 1e-05``."""
    if tol.kind == "exact":
        return "exact"
    if tol.kind == "atol":
        return f"atol {tol.atol:g}"
    if tol.kind == "rtol":
        return f"rtol {tol.rtol:g}"
    if tol.kind == "allclose":
        return f"rtol {tol.rtol:g} + atol {tol.atol:g}"
    if tol.kind == "set":
        cost = f"rtol {tol.rtol:g}" + (f" + atol {tol.atol:g}" if tol.atol else "")
        return f"set; cost {cost}"
    return tol.kind


@dataclass
class Row:
    """One compared quantity (all its datasets over all sentences/steps/batches)."""

    group: str
    quantity: str
    tolerance: Tolerance
    n: int = 0
    max_abs: Optional[float] = None     # None: nothing numeric compared (sequences, strings)
    max_rel: Optional[float] = None
    n_bad: int = 0
    worst: Optional[str] = None         # dataset path + index of the worst element
    covered: bool = True
    notes: List[str] = field(default_factory=list)
    rule_extra: str = ""                # an addition to the table's rule, e.g. subnormal spacing
    atol_needed: Optional[float] = None  # smallest atol that passes every finite element (same rtol)
    rtol_needed: Optional[float] = None  # smallest rtol that passes every finite element (same atol)
    _worst_score: float = field(default=-1.0, repr=False)

    @property
    def passed(self) -> bool:
        return self.covered and self.n_bad == 0

    @property
    def status(self) -> str:
        if not self.covered:
            return NOT_COVERED_STATUS
        return PASS if self.passed else FAIL

    # -- accumulation ---------------------------------------------------------------
    def _errs(self, max_abs, max_rel):
        if max_abs is not None:
            self.max_abs = max_abs if self.max_abs is None else max(self.max_abs, max_abs)
        if max_rel is not None:
            self.max_rel = max_rel if self.max_rel is None else max(self.max_rel, max_rel)

    def _candidate(self, score, where):
        if score > self._worst_score:
            self._worst_score, self.worst = score, where

    def note(self, text: str, limit: int = 5):
        if len(self.notes) < limit:
            self.notes.append(text)
        elif len(self.notes) == limit:
            self.notes.append("...")

    def mismatch(self, where: str, problem: str, count: int = 1):
        """Something that could not be compared element-wise (shape, missing, error)."""
        self.n += count
        self.n_bad += count
        self._candidate(math.inf, where)
        self.note(f"{where}: {problem}")

    @property
    def tolerance_text(self) -> str:
        return tolerance_text(self.tolerance) + self.rule_extra

    def as_dict(self) -> dict:
        return {"group": self.group, "quantity": self.quantity, "n": self.n,
                "max_abs_err": _json_float(self.max_abs), "max_rel_err": _json_float(self.max_rel),
                "tolerance": self.tolerance_text, "tolerance_note": self.tolerance.note,
                "status": self.status, "passed": self.passed if self.covered else None,
                "n_bad": self.n_bad, "worst": self.worst,
                "atol_needed": _json_float(self.atol_needed), "rtol_needed": _json_float(self.rtol_needed),
                "notes": list(self.notes)}


def _json_float(x):
    if x is None:
        return None
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return float(x)


def _fmt(x) -> str:
    if x is None:
        return "-"
    if x == 0:
        return "0"
    return f"{x:.3g}"


# --------------------------------------------------------------------------------------
# Element-wise comparison
# --------------------------------------------------------------------------------------
def _index_text(idx) -> str:
    return "[" + ", ".join(str(int(i)) for i in idx) + "]"


def compare_array(row: Row, where: str, got, want, tol: Optional[Tolerance] = None, extra_allow=None):
    """Compare ``got`` (port) with ``want`` (recorded) under ``tol`` into ``row``.

    Float rules: ``|got - want| <= atol + rtol * |want|`` (per the rule's kind) on elements
    finite on both sides; non-finite elements must be the same non-finite value.  Exact:
    ``==`` element-wise.  A shape difference is one mismatch counting every recorded element.
    ``extra_allow`` (same shape as ``want``) widens the allowed difference element by element
    (the float32 spacing of subnormal probabilities, :func:`subnormal_cost_spacing`).
    """
    tol = tol or row.tolerance
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        row.mismatch(where, f"shape {got.shape}, recorded {want.shape}", max(1, want.size))
        return
    row.n += want.size
    if want.size == 0:
        return
    numeric = got.dtype.kind in "biuf" and want.dtype.kind in "biuf"
    if not numeric:
        bad = got != want
        n_bad = int(np.count_nonzero(bad))
        if n_bad:
            row.n_bad += n_bad
            first = np.argwhere(bad)[0]
            row._candidate(math.inf, where + _index_text(first))
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    fin = np.isfinite(g) & np.isfinite(w)
    same_nonfinite = ~fin & ((g == w) | (np.isnan(g) & np.isnan(w)))
    pattern_bad = ~fin & ~same_nonfinite
    absw = np.abs(w)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        diff = np.where(fin, np.abs(g - w), 0.0)
        rel = np.where(fin & (absw > 0), diff / np.where(absw > 0, absw, 1.0), 0.0)
    if tol.kind == "exact":
        allow = np.zeros_like(w)
    elif tol.kind == "atol":
        allow = np.full_like(w, tol.atol)
    elif tol.kind == "rtol" or tol.kind == "set":
        allow = tol.rtol * np.where(fin, absw, 0.0) + tol.atol
    else:  # allclose
        allow = tol.atol + tol.rtol * np.where(fin, absw, 0.0)
    extra = 0.0 if extra_allow is None else np.asarray(extra_allow, dtype=np.float64).reshape(w.shape)
    allow = allow + extra
    bad = pattern_bad | (fin & (diff > allow))
    if tol.kind != "exact" and fin.any():
        # what the rule would need to pass these elements (figures for tuning the table)
        rtol_part = 0.0 if tol.kind == "atol" else tol.rtol * absw
        atol_part = tol.atol if tol.kind != "rtol" else 0.0
        need_a = float(np.max(np.where(fin, diff - rtol_part - extra, 0.0)))
        row.atol_needed = max(row.atol_needed or 0.0, need_a)
        if tol.kind != "atol":
            nz = fin & (absw > 0)
            if nz.any():
                need_r = float(np.max((diff[nz] - atol_part - (extra[nz] if np.ndim(extra) else extra)) / absw[nz]))
                row.rtol_needed = max(row.rtol_needed or 0.0, need_r)
    if fin.any():
        row._errs(float(diff[fin].max()), float(rel[fin].max()))
    elif row.max_abs is None:
        row._errs(0.0, 0.0)
    # closeness to the tolerance: > 1 fails, inf for a non-finite pattern difference
    with np.errstate(divide="ignore", invalid="ignore"):
        score = np.where(allow > 0, diff / np.where(allow > 0, allow, 1.0),
                         np.where(diff > 0, np.inf, 0.0))
    score = np.where(pattern_bad, np.inf, score)
    flat = int(np.argmax(score))
    idx = np.unravel_index(flat, want.shape) if want.ndim else ()
    n_bad = int(np.count_nonzero(bad))
    if n_bad:
        row.n_bad += n_bad
        row.note(f"{where}{_index_text(idx)}: port {float(g.ravel()[flat])!r}, "
                 f"recorded {float(w.ravel()[flat])!r}"
                 + (f" ({n_bad} elements out of tolerance)" if n_bad > 1 else ""))
    row._candidate(float(score.ravel()[flat]), where + _index_text(idx))


def compare_sequences(row: Row, where: str, got: Sequence[Sequence[int]], want: Sequence[Sequence[int]]):
    """Lists of token sequences compared with ``==`` (n counts sequences)."""
    got = [tuple(int(t) for t in s) for s in got]
    want = [tuple(int(t) for t in s) for s in want]
    row.n += len(want)
    n_bad = sum(1 for a, b in zip(got, want) if a != b) + abs(len(got) - len(want))
    if n_bad:
        row.n_bad += n_bad
        j = next((j for j, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        row._candidate(math.inf, f"{where}[{j}]")
        a = got[j] if j < len(got) else "(none)"
        b = want[j] if j < len(want) else "(none)"
        row.note(f"{where}[{j}]: port {a}, recorded {b}"
                 + (f"; port has {len(got)} hypotheses, recorded {len(want)}" if len(got) != len(want) else ""))


def compare_text(row: Row, where: str, got: Optional[str], want: Optional[str]):
    row.n += 1
    if got != want:
        row.n_bad += 1
        row._candidate(math.inf, where)
        row.note(f"{where}: port {got!r}, recorded {want!r}")


def compare_costs_by_hypothesis(row: Row, where: str, got_trans, got_costs, want_trans, want_costs):
    """Costs of the same hypotheses: positionally when both lists agree, else matched by tokens
    (a hypothesis missing on one side counts as a mismatch)."""
    g = [tuple(int(t) for t in s) for s in got_trans]
    w = [tuple(int(t) for t in s) for s in want_trans]
    if g == w:
        compare_array(row, where, np.asarray(got_costs, dtype=np.float64),
                      np.asarray(want_costs, dtype=np.float64))
        return
    port = {h: c for h, c in zip(g, got_costs)}
    matched_g, matched_w, missing = [], [], 0
    for h, c in zip(w, want_costs):
        if h in port:
            matched_g.append(port[h])
            matched_w.append(c)
        else:
            missing += 1
    if matched_w:
        compare_array(row, where + "(matched by hypothesis)", np.asarray(matched_g, dtype=np.float64),
                      np.asarray(matched_w, dtype=np.float64))
    if missing:
        row.mismatch(where, f"{missing} recorded hypotheses not found by the port", missing)


#: the smallest normal float32 and the spacing of the subnormal float32 numbers below it
FLT32_MIN_NORMAL = float(np.finfo(np.float32).tiny)
FLT32_SUBNORMAL_SPACING = 2.0 ** -149


def subnormal_cost_spacing(probs_recorded, probs_port) -> np.ndarray:
    """Extra allowance for ``-log p`` where ``p`` is a subnormal float32 (below 1.18e-38).

    There float32 keeps a fixed spacing of 2**-149 (1.4e-45), so ``p`` itself is only known to
    ``2**-149 / p`` relative -- 1.4 % at p = 1e-43 -- and so is ``-log p``: two correct float32
    computations of a word with p ~ 1e-43 give costs near 99 that differ by ~1e-3.  The
    allowance is that relative spacing (of the smaller of the two probabilities); it is 0 for
    normal probabilities, so every other entry keeps the table's rule.  A probability that is
    0 on one side only is still a non-finite-pattern mismatch.
    """
    p = np.minimum(np.asarray(probs_recorded, dtype=np.float64), np.asarray(probs_port, dtype=np.float64))
    with np.errstate(divide="ignore"):
        return np.where((p > 0) & (p < FLT32_MIN_NORMAL), FLT32_SUBNORMAL_SPACING / np.where(p > 0, p, 1.0), 0.0)


def error_message(recorded: str) -> str:
    """``"ValueError: kth(=512) out of bounds (321)"`` -> ``"kth(=512) out of bounds (321)"``."""
    m = re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Failed)\w*: (.*)$", recorded, re.S)
    return m.group(2) if m else recorded


def same_error(port_message: str, recorded: str) -> bool:
    """The port's :class:`SearchFailed` message against the recorded exception text.

    Equal after dropping the recorded exception type; the port's message may add context
    around the original's (``"Translation failed (attempt to get argmin of an empty
    sequence)"`` for numpy's ``argmin`` crash after GroundHog gave up).
    """
    want = error_message(recorded)
    return port_message == want or (bool(want) and want in port_message)


# --------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------
@dataclass
class Report:
    """All rows of one parity run (:func:`check`)."""

    rows: List[Row]
    trace: str = ""
    case: Optional[str] = None
    seconds: Dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Every covered row passed (NOT COVERED rows neither pass nor fail)."""
        return all(r.passed for r in self.rows if r.covered)

    @property
    def failed(self) -> List[Row]:
        return [r for r in self.rows if r.covered and not r.passed]

    @property
    def n_compared(self) -> int:
        return sum(r.n for r in self.rows if r.covered)

    def group(self, name: str) -> List[Row]:
        return [r for r in self.rows if r.group == name]

    def table(self, notes: bool = True) -> str:
        """The plain-text table ``quantity | n | max abs err | max rel err | tolerance | result``;
        FAIL rows name their worst element, and (``notes``) the first mismatches follow."""
        head = ("quantity", "n", "max abs err", "max rel err", "tolerance", "result")
        body = []
        for r in self.rows:
            result = r.status
            if r.status == FAIL:
                result += f" ({r.n_bad} bad; worst {r.worst})"
            elif not r.covered:
                result += f" ({r.notes[0]})" if r.notes else ""
            body.append((r.quantity, str(r.n) if r.covered else "-", _fmt(r.max_abs), _fmt(r.max_rel),
                         r.tolerance_text if r.covered else "-", result))
        widths = [max(len(x[i]) for x in [head] + body) for i in range(5)]
        lines = []
        for cells in [head] + body:
            lines.append(" | ".join(c.ljust(w) for c, w in zip(cells[:5], widths)) + " | " + cells[5])
        lines.insert(1, "-+-".join("-" * w for w in widths) + "-+-" + "-" * 6)
        n_fail = len(self.failed)
        n_cov = sum(1 for r in self.rows if r.covered)
        lines.append(f"{n_cov - n_fail}/{n_cov} quantities pass"
                     + (f", {n_fail} FAIL" if n_fail else "")
                     + (f", {len(self.rows) - n_cov} not covered" if n_cov < len(self.rows) else ""))
        if notes:
            for r in self.failed:
                for note in r.notes:
                    lines.append(f"  {r.quantity}: {note}")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return {"trace": self.trace, "case": self.case, "ok": self.ok,
                "n_compared": self.n_compared, "seconds": dict(self.seconds),
                "rows": [r.as_dict() for r in self.rows]}

    def to_json(self, path=None) -> str:
        text = json.dumps(self.as_dict(), indent=2, allow_nan=False, ensure_ascii=False)
        if path is not None:
            atomic_write_text(path, text + "\n")  # complete or absent, even if interrupted
        return text


# --------------------------------------------------------------------------------------
# The checks
# --------------------------------------------------------------------------------------
class _Rows:
    """Rows of a report, created on first use in a fixed order."""

    def __init__(self):
        self.rows: Dict[str, Row] = {}

    def get(self, group: str, quantity: str, tol_path: Optional[str] = None,
            tol: Optional[Tolerance] = None) -> Row:
        if quantity not in self.rows:
            self.rows[quantity] = Row(group, quantity, tol or tolerance_for(tol_path or quantity))
        return self.rows[quantity]


class _Context:
    def __init__(self, exp, trace: TraceFile, source, target, progress):
        self.exp, self.tr, self.progress = exp, trace, progress
        self.model = exp.model
        self.device = exp.model.device
        self.source, self.target = source, target
        self.src_lines = read_text_lines(source) if source is not None else None
        self.trg_lines = read_text_lines(target) if target is not None else None
        self._seq_cache: Dict[int, np.ndarray] = {}

    def t(self, a, dtype=None):
        return torch.as_tensor(np.asarray(a), dtype=dtype, device=self.device)

    def tick(self, n=1):
        if self.progress is not None:
            self.progress.update(n)

    def src_line(self, i: int) -> Optional[str]:
        if self.src_lines is not None:
            if i >= len(self.src_lines):
                raise LegacyInputError(self.source, f"the trace has sentence {i} but the file has only "
                                                    f"{len(self.src_lines)} lines")
            return self.src_lines[i]
        if self.tr.has(f"pairs/{i}"):
            return self.tr.pairs(i)["src_line"]
        return None

    def trg_line(self, i: int) -> Optional[str]:
        if self.trg_lines is not None:
            if i >= len(self.trg_lines):
                raise LegacyInputError(self.target, f"the trace has sentence {i} but the file has only "
                                                    f"{len(self.trg_lines)} lines")
            return self.trg_lines[i]
        if self.tr.has(f"pairs/{i}"):
            return self.tr.pairs(i)["trg_line"]
        return None

    def source_seq(self, i: int) -> np.ndarray:
        """The search input of sentence i: the recorded ``/repr/{i}/seq`` when present (so a
        parsing difference shows in ``repr/seq`` only), else the port's parse of the line."""
        if i not in self._seq_cache:
            if self.tr.has(f"repr/{i}"):
                seq = self.tr.repr(i)["seq"]
            else:
                line = self.src_line(i)
                if line is None:
                    raise LegacyInputError(self.tr.path, f"sentence {i}: no /repr/{i}/seq and no source "
                                                         "line (pass --source)")
                seq = self.exp.parse_source(line)[0]
            self._seq_cache[i] = np.asarray(seq, dtype=np.int64)
        return self._seq_cache[i]


def _check_repr(ctx: _Context, rows: _Rows):
    seq_row = rows.get("repr", "repr/seq", "repr/0/seq")
    parsed_row = rows.get("repr", "repr/parsed_in", tol=tolerance_for("repr/0/seq"))
    c_row = rows.get("repr", "repr/c", "repr/0/c")
    init_row = rows.get("repr", "repr/init_states", "repr/0/init_states")
    for i in ctx.tr.repr_indices():
        rec = ctx.tr.repr(i)
        where = f"repr/{i}"
        line = ctx.src_line(i)
        if line is not None:
            seq, parsed_in = ctx.exp.parse_source(line)
            compare_array(seq_row, f"{where}/seq", np.asarray(seq, dtype=np.int64), rec["seq"])
            if rec.get("parsed_in") is not None:
                compare_text(parsed_row, f"{where}@parsed_in", parsed_in, rec["parsed_in"])
        c = ctx.model.encode(rec["seq"])
        compare_array(c_row, f"{where}/c", c.cpu().numpy(), rec["c"])
        init = ctx.model.initial_states(c)
        compare_array(init_row, f"{where}/init_states", init.cpu().numpy(), rec["init_states"])
        ctx.tick()
    if ctx.src_lines is None and not ctx.tr.has("pairs"):
        seq_row.covered = parsed_row.covered = False
        seq_row.note("not covered: no source lines (pass --source)")


def _check_pairs(ctx: _Context, rows: _Rows):
    r_src = rows.get("pairs", "pairs/src_ids", "pairs/0/src_ids")
    r_trg = rows.get("pairs", "pairs/trg_ids", "pairs/0/trg_ids")
    r_wp = rows.get("pairs", "pairs/word_probs", "pairs/0/word_probs")
    r_al = rows.get("pairs", "pairs/alignment", "pairs/0/alignment")
    r_sc = rows.get("pairs", "pairs/score", "pairs/0/score")
    for i in ctx.tr.pair_indices():
        rec = ctx.tr.pairs(i)
        where = f"pairs/{i}"
        (src, _), (trg, _) = parse_pair(ctx.exp, ctx.src_line(i), ctx.trg_line(i), allow_unk=True)
        compare_array(r_src, f"{where}/src_ids", np.asarray(src, dtype=np.int64), rec["src_ids"])
        compare_array(r_trg, f"{where}/trg_ids", np.asarray(trg, dtype=np.int64), rec["trg_ids"])
        s = score_pair(ctx.model, rec["src_ids"], rec["trg_ids"])
        compare_array(r_wp, f"{where}/word_probs", s.word_probs.numpy(), rec["word_probs"])
        if s.alignment is None:
            # non-search models: create_probs_computer's dummy zeros((1,)) (MANIFEST section 10)
            compare_array(r_al, f"{where}/alignment", np.zeros((1,), dtype=np.float32), rec["alignment"])
        else:
            compare_array(r_al, f"{where}/alignment", s.alignment.numpy(), rec["alignment"])
        compare_array(r_sc, f"{where}/score", (-s.cost).numpy().astype(np.float32), rec["score"])
        ctx.tick()


def _check_batch(ctx: _Context, rows: _Rows):
    names = ("x", "y", "x_mask", "y_mask", "scores")
    r = {n: rows.get("batch", f"batch/{n}", f"batch_all/0/{n}") for n in names}
    if ctx.source is None or ctx.target is None:
        raise LegacyInputError(ctx.tr.path, "the batch checks need the source and target text files "
                                            "(--source/--target, or test files next to the trace)")
    port = list(batches_for(ctx.exp, str(ctx.source), str(ctx.target), allow_unk=True))
    recorded = []
    if ctx.tr.has("batch_all"):
        batches = ctx.tr.batch_all()
        if len(port) != len(batches):
            r["x"].mismatch("batch_all", f"the port builds {len(port)} batches, the trace has {len(batches)}")
        recorded += [(f"batch_all/{b}", b, rec) for b, rec in enumerate(batches)]
    if ctx.tr.has("batch"):
        recorded.append(("batch", 0, ctx.tr.batch()))
    for where, b, rec in recorded:
        if b < len(port):
            pb = port[b]
            for n, got in (("x", pb.x), ("y", pb.y), ("x_mask", pb.x_mask), ("y_mask", pb.y_mask)):
                compare_array(r[n], f"{where}/{n}", got, rec[n])
        # the scores of the RECORDED batch: its numerics, independently of the batching
        batch = SimpleNamespace(x=rec["x"], y=rec["y"], x_mask=rec["x_mask"], y_mask=rec["y_mask"])
        scores = -score_batch(ctx.model, batch).cost.numpy().astype(np.float32)
        compare_array(r["scores"], f"{where}/scores", scores, rec["scores"])
        ctx.tick()


def _step_triples(beam, flat, n_samples, voc):
    """The port's selection on ``flat`` as (prefix, word, cost) triples."""
    if n_samples >= flat.numel():
        return None
    best = select_cheapest(flat[None], [n_samples])[0].cpu().numpy()
    fl = flat.cpu().numpy()
    return [(beam[int(b) // voc], int(b) % voc, float(fl[int(b)])) for b in best]


def _check_steps(ctx: _Context, rows: _Rows):
    r_seq = rows.get("steps", "steps/seq", "steps/0/seq")
    r_last = rows.get("steps", "steps/last_words", "steps/0/000/last_words")
    r_probs = rows.get("steps", "steps/next_probs", "steps/0/000/next_probs")
    r_flat = rows.get("steps", "steps/flat_next_costs", "steps/0/000/flat_next_costs")
    r_flat.rule_extra = " (+ subnormal p spacing)"
    r_surv = rows.get("steps", "steps/survivors", "steps/0/000/costs")
    r_gath = rows.get("steps", "steps/states_gathered", "steps/0/000/states_gathered")
    r_next = rows.get("steps", "steps/next_states", "steps/0/000/next_states")
    r_ftrans = rows.get("steps", "steps/fin_trans", "steps/0/fin_trans_flat")
    r_fcost = rows.get("steps", "steps/fin_costs", "steps/0/fin_costs")
    model = ctx.model
    eos, unk = model.cfg.null_sym_target, model.cfg.unk_sym_target
    searcher = BeamSearch(model)
    for i in ctx.tr.steps_indices():
        ss = ctx.tr.steps(i)
        where = f"steps/{i}"
        line = ctx.src_line(i)
        if line is not None:
            compare_array(r_seq, f"{where}/seq", np.asarray(ctx.exp.parse_source(line)[0], dtype=np.int64), ss.seq)
        c = model.encode(ss.seq)
        pfc = model.p_from_c(c)
        recorded = ss.survivors(eos)
        beam, prev_costs = [()], np.zeros(1)
        for n, st in enumerate(ss.steps):
            sw = f"{where}/{n:03d}"
            k = int(st["k"])
            if k == 0:
                beam, prev_costs = [()], np.zeros(1)
            # the beam bookkeeping: last word of every open hypothesis, zeros at k = 0
            last = np.zeros(len(beam), np.int64) if k == 0 else np.asarray([p[-1] for p in beam], np.int64)
            compare_array(r_last, f"{sw}/last_words", last, st["last_words"])
            states_in = np.asarray(st["states_in"])
            probs = model.next_probs(c, pfc, k, ctx.t(st["last_words"], torch.int64),
                                     ctx.t(states_in[0], torch.float32))
            compare_array(r_probs, f"{sw}/next_probs", probs.cpu().numpy(), st["next_probs"])
            if len(prev_costs) != probs.shape[0]:
                r_flat.mismatch(f"{sw}/flat_next_costs", f"{len(prev_costs)} open hypotheses after the "
                                                         f"previous step, {probs.shape[0]} rows fed")
                triples = None
            else:
                flat = next_costs(ctx.t(prev_costs, torch.float64), probs, k, ss.minlen, ss.ignore_unk,
                                  eos, unk).flatten()
                compare_array(r_flat, f"{sw}/flat_next_costs", flat.cpu().numpy(), st["flat_next_costs"],
                              extra_allow=subnormal_cost_spacing(st["next_probs"], probs.cpu().numpy()).ravel())
                triples = _step_triples(beam, flat, int(st["n_samples"]), probs.shape[1])
            _compare_survivors(r_surv, f"{sw}", triples, recorded[n])
            trans_idx = np.asarray(st["trans_indices"], dtype=np.int64)
            if trans_idx.size and (trans_idx.min() < 0 or trans_idx.max() >= states_in.shape[1]):
                r_gath.mismatch(f"{sw}/states_gathered", "trans_indices outside the recorded states_in")
            else:
                compare_array(r_gath, f"{sw}/states_gathered", states_in[:, trans_idx], st["states_gathered"])
            ns = model.next_states(c, pfc, k, ctx.t(st["word_indices"], torch.int64),
                                   ctx.t(np.asarray(st["states_gathered"])[0], torch.float32))
            compare_array(r_next, f"{sw}/next_states", ns.cpu().numpy()[None], st["next_states"])
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
        _compare_outcome(r_ftrans, r_fcost, None, where, hyps, failure, ss.trans, ss.costs, ss.error)
        ctx.tick()


def _compare_survivors(row: Row, where: str, port, recorded):
    """Survivors of one step as SETS of (prefix, word) with their costs."""
    if port is None:
        row.mismatch(where, "the port could not select survivors (beam not smaller than the candidates)",
                     len(recorded))
        return
    want = {(p, w): c for p, w, c in recorded}
    got = {(p, w): c for p, w, c in port}
    common = [key for key in want if key in got]
    extra = [key for key in got if key not in want]
    missing = [key for key in want if key not in got]
    if common:
        compare_array(row, f"{where}/costs(matched)", np.asarray([got[k] for k in common]),
                      np.asarray([want[k] for k in common]))
    if missing or extra:
        row.mismatch(where, f"survivor sets differ: recorded only {missing[:3]}, port only {extra[:3]}",
                     len(missing))


def _compare_outcome(r_trans: Row, r_cost: Row, r_best: Optional[Row], where: str, hyps,
                     failure: Optional[str], want_trans, want_costs, want_error: Optional[str],
                     best_sentence: Optional[str] = None, rendered: Optional[str] = None):
    """A finished search (or the crash) against the recorded one."""
    if want_error is not None:
        r_trans.n += 1
        if failure is None:
            r_trans.n_bad += 1
            r_trans._candidate(math.inf, where)
            r_trans.note(f"{where}: the original failed ({want_error}); the port found "
                         f"{len(hyps.trans)} hypotheses")
        elif not same_error(failure, want_error):
            r_trans.n_bad += 1
            r_trans._candidate(math.inf, where)
            r_trans.note(f"{where}: port failed with {failure!r}, the original with {want_error!r}")
        return
    if failure is not None:
        r_trans.mismatch(where, f"the port failed ({failure}); the original found {len(want_trans)} "
                                "hypotheses", max(1, len(want_trans)))
        return
    compare_sequences(r_trans, f"{where}/fin_trans", hyps.trans, want_trans)
    compare_costs_by_hypothesis(r_cost, f"{where}/fin_costs", hyps.trans, hyps.costs, want_trans, want_costs)
    if r_best is not None and best_sentence is not None:
        compare_text(r_best, f"{where}@best_sentence", rendered, best_sentence)


def _check_beam(ctx: _Context, rows: _Rows, labels: Optional[Iterable[str]]):
    available = ctx.tr.beam_labels()
    chosen = available if labels is None else [str(l) for l in labels]
    unknown = [l for l in chosen if l not in available]
    if unknown:
        raise LegacyInputError(ctx.tr.path, f"beam label(s) {', '.join(unknown)} not in the trace "
                                            f"(it has {', '.join(available) or 'none'})")
    searcher = BeamSearch(ctx.model)
    for label in chosen:
        run = ctx.tr.beam(label)
        r_trans = rows.get("beam", f"beam/{label}/fin_trans", f"beam/{label}/0/fin_trans_flat")
        r_cost = rows.get("beam", f"beam/{label}/fin_costs", f"beam/{label}/0/fin_costs")
        r_best = rows.get("beam", f"beam/{label}/best_sentence", f"beam/{label}/0/fin_trans_flat")
        n_err = 0
        for i, sent in sorted(run.sentences.items()):
            where = f"beam/{label}/{i}"
            try:
                hyps = sample(searcher, ctx.source_seq(i), run.beam_size, run.ignore_unk, run.normalize)
                failure, rendered = None, choose(hyps, ctx.exp.trg_idx2word).line
            except SearchFailed as err:
                hyps, failure, rendered = None, str(err), None
            if sent.error is not None:
                n_err += 1
            _compare_outcome(r_trans, r_cost, r_best, where, hyps, failure, sent.trans, sent.costs,
                             sent.error, sent.best_sentence, rendered)
            ctx.tick()
        if n_err and r_trans.passed:
            r_trans.note(f"{n_err} recorded crash(es) of sample.py reproduced with the same message")


def _not_covered(tr: TraceFile, rows: _Rows):
    for group, why in NOT_COVERED.items():
        if tr.has(group):
            row = rows.get(group, group, tol=Tolerance("n/a"))
            row.covered = False
            row.notes.append(why)


def count_work(tr: TraceFile, groups: Sequence[str], beam_labels=None) -> int:
    """Progress units of :func:`check`: one per sentence / batch / instrumented search /
    (label, sentence)."""
    n = 0
    if "repr" in groups:
        n += len(tr.repr_indices())
    if "pairs" in groups:
        n += len(tr.pair_indices())
    if "batch" in groups and tr.has("batch_all"):
        n += len(tr.batch_all()) + int(tr.has("batch"))
    if "steps" in groups:
        n += len(tr.steps_indices())
    if "beam" in groups:
        labels = tr.beam_labels() if beam_labels is None else beam_labels
        for label in labels:
            if tr.has(f"beam/{label}"):
                n += len(tr.beam(label).sentences)
    return n


def check(exp, trace: TraceFile, *, groups: Sequence[str] = GROUPS, beam_labels=None,
          source=None, target=None, progress=None) -> Report:
    """Recompute what ``trace`` holds with ``exp`` (:class:`~groundhog_port.loading.Experiment`).

    ``groups``: a subset of :data:`GROUPS`; a group the trace does not hold is left out.
    ``beam_labels``: restrict ``/beam`` to these labels (default: all in the trace).
    ``source``/``target``: the test text files (``test.en``/``test.fr``); without them the
    lines recorded in ``/pairs`` are used where possible, and the batch checks need them.
    ``progress``: an object with ``update(n)`` (:class:`~groundhog_port.outputs.Progress`).
    Raises :class:`LegacyInputError` for an unreadable or inconsistent trace or input file.
    """
    groups = tuple(groups)
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        raise LegacyInputError(None, f"unknown parity group(s) {', '.join(unknown)} "
                                     f"(known: {', '.join(GROUPS)})")
    ctx = _Context(exp, trace, source, target, progress)
    rows = _Rows()
    seconds: Dict[str, float] = {}
    present = {"repr": trace.has("repr"), "pairs": trace.has("pairs"),
               "batch": trace.has("batch_all") or trace.has("batch"), "steps": trace.has("steps"),
               "beam": trace.has("beam")}
    with torch.no_grad():
        for g in GROUPS:
            if g not in groups or not present[g]:
                continue
            t0 = time.perf_counter()
            if g == "repr":
                _check_repr(ctx, rows)
            elif g == "pairs":
                _check_pairs(ctx, rows)
            elif g == "batch":
                _check_batch(ctx, rows)
            elif g == "steps":
                _check_steps(ctx, rows)
            else:
                _check_beam(ctx, rows, beam_labels)
            seconds[g] = time.perf_counter() - t0
    _not_covered(trace, rows)
    return Report(list(rows.rows.values()), trace=str(trace.path), case=trace.attrs.get("case"),
                  seconds=seconds)


# --------------------------------------------------------------------------------------
# Case folders
# --------------------------------------------------------------------------------------
@dataclass
class CaseFiles:
    """The files of a case folder (laid out like ``shared/legacy_traces/<case>``)."""

    dir: Path
    state: Path
    model: Path
    trace: Path
    source: Optional[Path]
    target: Optional[Path]

    @property
    def name(self) -> str:
        return self.dir.name


def find_case(case_dir, state=None, model=None, trace=None, source=None, target=None) -> CaseFiles:
    """Locate ``*_state.pkl``, the matching ``*_model.npz``, ``trace.h5`` and the test files
    (named by the trace's ``test_src_file``/``test_trg_file`` attributes, default
    ``test.en``/``test.fr``) in ``case_dir``; explicit paths override what is found."""
    d = Path(case_dir)
    if not d.is_dir():
        raise LegacyInputError(d, "case directory not found")
    if state is None:
        found = sorted(d.glob("*state.pkl"))
        if len(found) != 1:
            raise LegacyInputError(d, f"expected one *_state.pkl in the case directory, found "
                                      f"{len(found)}" + (f" ({', '.join(p.name for p in found)}); pass --state"
                                                         if found else ""))
        state = found[0]
    state = Path(state)
    if model is None:
        prefix = state.name[: -len("state.pkl")] if state.name.endswith("state.pkl") else None
        cand = d / f"{prefix}model.npz" if prefix is not None else None
        if cand is None or not cand.is_file():
            found = sorted(p for p in d.glob("*model.npz"))
            if len(found) != 1:
                raise LegacyInputError(d, f"expected {cand.name if cand else '*_model.npz'} in the case "
                                          "directory; pass --model")
            cand = found[0]
        model = cand
    trace = Path(trace) if trace is not None else d / "trace.h5"
    if not trace.is_file():
        raise LegacyInputError(trace, "trace file not found")
    if source is None or target is None:
        src_name, trg_name = _test_file_names(trace)
        if source is None and (d / src_name).is_file():
            source = d / src_name
        if target is None and (d / trg_name).is_file():
            target = d / trg_name
    return CaseFiles(d, state, Path(model), trace, None if source is None else Path(source),
                     None if target is None else Path(target))


def _test_file_names(trace_path):
    with TraceFile(trace_path) as tr:
        return (str(tr.attrs.get("test_src_file") or "test.en"),
                str(tr.attrs.get("test_trg_file") or "test.fr"))


def test_files_near(trace_path):
    """``(source, target)`` next to a trace, as its ``test_src_file``/``test_trg_file`` attributes
    name them (None where absent)."""
    d = Path(trace_path).parent
    src, trg = _test_file_names(trace_path)
    return ((d / src) if (d / src).is_file() else None, (d / trg) if (d / trg).is_file() else None)


def check_case(case_dir, *, groups: Sequence[str] = GROUPS, beam_labels=None, device="cpu",
               progress=None, changes="") -> Report:
    """:func:`check` on a case folder (:func:`find_case`); vocabularies are looked up there."""
    from .loading import open_experiment

    files = find_case(case_dir)
    exp = open_experiment(files.state, files.model, changes, data_dir=files.dir, device=device)
    with TraceFile(files.trace) as tr:
        report = check(exp, tr, groups=groups, beam_labels=beam_labels, source=files.source,
                       target=files.target, progress=progress)
    report.case = report.case or files.name
    return report
