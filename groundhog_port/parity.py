"""The equivalence harness: recompute what a trace holds and compare, quantity by quantity.

A trace (``trace.h5``, :mod:`groundhog_port.trace`) records what GroundHog's compiled
Theano functions computed for a model and a set of test sentences.  :func:`check`
recomputes every recorded quantity with the PRODUCT -- the float32 functions ``translate``,
``score``, ``train`` and ``sample`` call, with their default options -- and returns a
:class:`Report`: one :class:`Row` per quantity with the product function compared
(``Row.product``), the number of values compared, the maximum absolute and relative error
of the product against the recording, the largest error / bound, the rule from
:data:`groundhog_port.trace.TOLERANCES` and the worst element's location.  The float64
shadow and the float32 probe of the model only set the bounds
(:mod:`groundhog_port.tolerance`).  ``groundhog-port parity`` prints it,
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
    ``Translator.search_seqs`` with each label's beam size / normalize / ignore_unk on every
    sentence, twice: the literal search (``--batch-size 1``: rows ``beam/{label}/...``) and
    translate's default batched search (rows ``beam/{label}/batched/...``): the finished
    lists ==, their costs and normalised costs as the product wrote them, the line it
    writes (``best_sentence``), and where the original crashed, the same error (the port
    raises :class:`~groundhog_port.search.common.SearchFailed` with the message minus the
    exception type).

``sampler``
    the random sampler (sample.py without ``--beam-search``): the MRG seed derived from the
    state, every MRG stream state (exact), ``Sampler.sample``'s own step count, drawn ids,
    sentences and stream after each call (exact), ``-log p`` and costs under the derived
    bound, and ``Sampler.sample_many`` at the default batch size
    (:mod:`groundhog_port.sampling.parity`).

``train_step``
    one real ``SGDAdadelta.step`` (what ``train`` runs) from the recorded batch: the batch,
    cost, gradient norm, clipped gradients, accumulators and parameters after it
    (:mod:`groundhog_port.training.parity`).

NOT COVERED rows say what a recording cannot discriminate (:func:`_beam_coverage`:
``ignore_unk`` where no hypothesis of the plain run holds UNK, choosing by normalised cost
where it never changes the choice; a group the port cannot recompute, none today); they
never pass or fail, are never dropped, and make ``groundhog-port parity`` exit 1 unless
``--allow-uncovered``.

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
from .search.legacy import BeamSearch, path_costs
from . import lookup
from . import tolerance as tolmod
from .trace import Tolerance, TraceFile, tolerance_for
from .translate import choose

#: the groups :func:`check` compares, in report order
GROUPS = ("repr", "pairs", "batch", "steps", "sampler", "train_step", "beam")
#: recorded groups the port cannot recompute yet (reported as NOT COVERED rows): none today
NOT_COVERED: Dict[str, str] = {
}

PASS, FAIL, NOT_COVERED_STATUS = "PASS", "FAIL", "NOT COVERED"
#: status of the trace self-check rows (recorded data against recorded data)
CONSISTENT, INCONSISTENT = "CONSISTENT", "INCONSISTENT"


# --------------------------------------------------------------------------------------
# Report rows
# --------------------------------------------------------------------------------------
def tolerance_text(tol: Tolerance) -> str:
    """``exact``, ``K*noise(abs)``, ``set; cost K*noise(abs)``."""
    if tol.kind == "exact":
        return "exact"
    if tol.kind == "derived":
        return f"{tolmod.K:g}*noise({tol.noise})"
    if tol.kind == "set":
        return f"set; cost {tolmod.K:g}*noise({tol.noise})"
    return tol.kind


@dataclass
class Row:
    """One compared quantity (all its datasets over all sentences/steps/batches).

    Derived (floating-point) quantities: ``max_abs``/``max_rel`` are ``|recorded - port32|``,
    the product's float32 output (``product`` names the user-facing function that returned
    it) against the recording; ``noise_max`` is ``max |port32 - port64|`` (the product
    against its own float64 shadow, bounded by eq. 2 of :mod:`groundhog_port.tolerance`),
    ``direct_max_abs`` ``max |recorded - port64|`` (Theano's own float32 error); the worst
    element is the one with the largest error / bound (``worst_ratio``), with
    ``worst_err``/``worst_allowed``/``worst_noise`` there.  ``self_check`` rows compare
    the recording with itself (trace consistency), not the port.
    """

    group: str
    quantity: str
    tolerance: Tolerance
    n: int = 0
    max_abs: Optional[float] = None     # None: nothing numeric compared (sequences, strings)
    max_rel: Optional[float] = None
    n_bad: int = 0
    worst: Optional[str] = None         # dataset path + index of the worst element
    covered: bool = True
    self_check: bool = False
    notes: List[str] = field(default_factory=list)
    product: str = ""                   # the user-facing function whose output is compared
    noise_max: Optional[float] = None   # max |port32 - float64 shadow| (the float32 self-check)
    direct_max_abs: Optional[float] = None   # max |recorded - float64 shadow| (Theano's own error)
    worst_err: Optional[float] = None
    worst_allowed: Optional[float] = None
    worst_noise: Optional[float] = None
    worst_ratio: Optional[float] = None
    sigma_max: Optional[float] = None   # the largest pooled noise scale (tolerance eq. 4)
    max_units: Optional[float] = None   # max (err - quantum) / noise: the K this row needed
    _worst_score: float = field(default=-1.0, repr=False)
    _pool: Optional[tolmod.Pool] = field(default=None, repr=False)

    @property
    def passed(self) -> bool:
        return self.covered and self.n_bad == 0

    @property
    def status(self) -> str:
        if not self.covered:
            return NOT_COVERED_STATUS
        if self.self_check:
            return CONSISTENT if self.passed else INCONSISTENT
        return PASS if self.passed else FAIL

    @property
    def max_ratio(self) -> Optional[float]:
        """The largest error / bound of the row (tolerance eqs. 1-2; > 1 fails)."""
        return self.worst_ratio

    # -- accumulation ---------------------------------------------------------------
    def _errs(self, max_abs, max_rel):
        if max_abs is not None:
            self.max_abs = max_abs if self.max_abs is None else max(self.max_abs, max_abs)
        if max_rel is not None:
            self.max_rel = max_rel if self.max_rel is None else max(self.max_rel, max_rel)

    def _candidate(self, score, where):
        if score > self._worst_score:
            self._worst_score, self.worst = score, where
            if math.isinf(score):       # a mismatch: no bound can hold it
                self.worst_ratio = score
            return True
        return False

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

    def finish(self):
        """Judge the records kept for pooling (small records, :class:`tolerance.Pool`)."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            for where, res in pool.results():
                _account(self, where, res)

    @property
    def tolerance_text(self) -> str:
        return tolerance_text(self.tolerance)

    def as_dict(self) -> dict:
        return {"group": self.group, "quantity": self.quantity, "product": self.product, "n": self.n,
                "max_abs_err": _json_float(self.max_abs), "max_rel_err": _json_float(self.max_rel),
                "float32_noise": _json_float(self.noise_max),
                "max_abs_err_recorded_vs_float64": _json_float(self.direct_max_abs),
                "max_error_bound_ratio": _json_float(self.worst_ratio),
                "worst_err": _json_float(self.worst_err), "worst_allowed": _json_float(self.worst_allowed),
                "worst_noise": _json_float(self.worst_noise), "sigma_max": _json_float(self.sigma_max),
                "max_noise_units": _json_float(self.max_units),
                "tolerance": self.tolerance_text, "tolerance_note": self.tolerance.note,
                "self_check": self.self_check,
                "status": self.status, "passed": self.passed if self.covered else None,
                "n_bad": self.n_bad, "worst": self.worst, "notes": list(self.notes)}


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


def compare_exact(row: Row, where: str, got, want):
    """``==`` element-wise (ids, masks, indices).  A shape difference is one mismatch counting
    every recorded element."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        row.mismatch(where, f"shape {got.shape}, recorded {want.shape}", max(1, want.size))
        return
    row.n += want.size
    bad = got != want
    if got.dtype.kind == "f" and want.dtype.kind == "f":
        bad &= ~(np.isnan(got) & np.isnan(want))
    n_bad = int(np.count_nonzero(bad))
    if n_bad:
        row.n_bad += n_bad
        first = np.argwhere(bad)[0] if want.ndim else ()
        row._candidate(math.inf, where + _index_text(first))
        row.note(f"{where}{_index_text(first)}: port {got[tuple(first)]!r}, recorded "
                 f"{want[tuple(first)]!r}" + (f" ({n_bad} elements differ)" if n_bad > 1 else ""))
    else:
        row._candidate(0.0, where)


def compare_values(row: Row, where: str, port32, port64, recorded, probe=None, magnitude_of=None,
                   quantum=None, poolable=None, n_terms=None):
    """A floating-point quantity under the derived bound of :mod:`groundhog_port.tolerance`.

    ``port32``: the product's float32 output (what is compared with ``recorded``),
    ``port64``: the float64 shadow's value, ``probe``: the float64 float32-probe's
    (:meth:`~groundhog_port.model.RNNEncoderDecoder.float32_probe`; they set the bound).
    Records with at least ``tolerance.POOL_MIN`` pooled elements are judged now with
    their own noise pool; smaller ones (a sentence score, one n-best list's costs) join the
    row's pool and are judged by :meth:`Row.finish`.  ``n_terms``: the value is a float32
    running sum of that many terms (:func:`tolerance.sum_floor`).
    """
    kind = tolmod.KINDS[row.tolerance.noise]
    r = np.asarray(recorded)
    p, q = np.asarray(port32), np.asarray(port64)
    d = q if probe is None else np.asarray(probe)
    if p.shape != r.shape or q.shape != r.shape or d.shape != r.shape:
        row.mismatch(where, f"product output of shape {p.shape}, recorded {r.shape}", max(1, r.size))
        return
    if r.size == 0:
        return
    scale, n_pool = tolmod.pooled_scale(q, kind, d, magnitude_of, poolable)
    if n_pool >= tolmod.POOL_MIN:
        _account(row, where, tolmod.judge(r, p, q, kind, scale, n_pool, d, magnitude_of, quantum,
                                          n_terms=n_terms))
        return
    if row._pool is None:
        row._pool = tolmod.Pool(kind)
    row._pool.add(where, r, p, q, d, magnitude_of, quantum, poolable, n_terms)


def _account(row: Row, where: str, res: tolmod.Comparison):
    """Add one judged record to the row's figures."""
    r, p = res.recorded, res.port32
    row.n += r.size
    fin = res.finite
    if fin.any():
        absr = np.abs(r)
        nz = fin & (absr > 0)
        row._errs(float(res.err[fin].max()),
                  float((res.err[nz] / absr[nz]).max()) if nz.any() else None)
        theano = float(res.theano[fin].max())
        row.direct_max_abs = theano if row.direct_max_abs is None else max(row.direct_max_abs, theano)
        row.sigma_max = res.scale if row.sigma_max is None else max(row.sigma_max, res.scale)
        own = float(res.own[fin].max())
        row.noise_max = own if row.noise_max is None else max(row.noise_max, own)
    elif row.max_abs is None:
        row._errs(0.0, 0.0)
    units = res.units()
    if units is not None:
        row.max_units = units if row.max_units is None else max(row.max_units, units)
    ratio = res.ratio
    flat = int(np.argmax(ratio))
    idx = np.unravel_index(flat, r.shape) if r.ndim else ()
    worst = float(ratio.ravel()[flat])
    if row._candidate(worst, where + _index_text(idx)):
        row.worst_ratio = worst
        row.worst_err = float(res.err.ravel()[flat])
        row.worst_allowed = float(res.allowed.ravel()[flat])
        row.worst_noise = float(res.noise.ravel()[flat])
    n_bad = res.n_bad
    if n_bad:
        row.n_bad += n_bad
        own_bad = bool(res.own_bad.ravel()[flat])
        what = (f"|product - float64 shadow| {float(res.own.ravel()[flat]):.3g} > allowed "
                f"{float(res.own_allowed.ravel()[flat]):.3g} (float32 arithmetic cannot be that far "
                "off its exact value)" if own_bad else
                f"|product - recorded| {float(res.err.ravel()[flat]):.3g} > allowed "
                f"{float(res.allowed.ravel()[flat]):.3g}")
        row.note(f"{where}{_index_text(idx)}: product {float(p.ravel()[flat])!r}, recorded "
                 f"{float(r.ravel()[flat])!r}, {what} (float32 noise {float(res.noise.ravel()[flat]):.3g})"
                 + (f" ({n_bad} elements out of bounds)" if n_bad > 1 else ""))


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


def compare_costs_by_hypothesis(row: Row, where: str, got_trans, got_costs, got_costs64, want_trans,
                                want_costs, lengths_as_terms=True, got_costs_probe=None):
    """Costs of the same hypotheses: positionally when both lists agree, else matched by tokens
    (a hypothesis missing on one side counts as a mismatch).  ``got_costs64``: the float64
    shadow's costs of the port's hypotheses; the noise magnitude is the hypothesis length
    (the number of ``-log p`` terms summed), or 1 (``lengths_as_terms=False``: costs divided
    by the length, ``--normalize``)."""
    g = [tuple(int(t) for t in s) for s in got_trans]
    w = [tuple(int(t) for t in s) for s in want_trans]
    if got_costs_probe is None:
        got_costs_probe = got_costs64
    port = {h: (c, c64, cp) for h, c, c64, cp in zip(g, got_costs, got_costs64, got_costs_probe)}
    matched, missing = [], 0
    for h, c in zip(w, want_costs):
        if h in port:
            matched.append(port[h] + (c, len(h) if lengths_as_terms else 1))
        else:
            missing += 1
    if matched:
        p32, p64, pp, rec, m = (np.asarray(x, dtype=np.float64) for x in zip(*matched))
        compare_values(row, where if g == w else where + "(matched by hypothesis)", p32, p64, rec,
                       probe=pp, magnitude_of=m)
    if missing:
        row.mismatch(where, f"{missing} recorded hypotheses not found by the port", missing)


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
        """Every covered row passed and the trace is self-consistent (NOT COVERED rows
        neither pass nor fail)."""
        return all(r.passed for r in self.rows if r.covered)

    @property
    def failed(self) -> List[Row]:
        """Port quantities out of bounds (self-check rows not included)."""
        return [r for r in self.rows if r.covered and not r.passed and not r.self_check]

    @property
    def uncovered(self) -> List[Row]:
        """NOT COVERED rows: what the recording cannot tell apart (``parity`` exits 1 on
        them unless ``--allow-uncovered``)."""
        return [r for r in self.rows if not r.covered]

    @property
    def inconsistent(self) -> List[Row]:
        """Trace self-checks that failed (the recording contradicts itself)."""
        return [r for r in self.rows if r.self_check and not r.passed]

    @property
    def n_compared(self) -> int:
        return sum(r.n for r in self.rows if r.covered and not r.self_check)

    def group(self, name: str) -> List[Row]:
        return [r for r in self.rows if r.group == name]

    def table(self, notes: bool = True, float64_reference: bool = False) -> str:
        """The plain-text table ``quantity | n | max abs err | max rel err | err/bound |
        tolerance | result`` of the port's quantities (errors: the product's float32 output
        against the recording; ``err/bound``: the largest error / allowed of the row, eqs.
        1-2 of :mod:`groundhog_port.tolerance`), then the trace self-checks apart.
        ``float64_reference`` adds ``float32 noise`` (max |product - float64 shadow|),
        ``err/allowed`` at the worst element and ``rec-float64`` (max |recorded - float64
        shadow|, Theano's own error).  FAIL rows name their worst element and the product
        function; (``notes``) the first mismatches follow."""
        head = ["quantity", "n", "max abs err", "max rel err", "err/bound", "tolerance"]
        if float64_reference:
            head += ["float32 noise", "worst err/allowed", "rec-float64"]
        head.append("result")
        port_rows = [r for r in self.rows if not r.self_check]
        checks = [r for r in self.rows if r.self_check]

        def cells(r):
            result = r.status
            if r.status in (FAIL, INCONSISTENT):
                result += f" ({r.n_bad} bad; worst {r.worst}" + (f"; product: {r.product}" if r.product
                                                                  else "") + ")"
            elif not r.covered:
                result += f" ({r.notes[0]})" if r.notes else ""
            out = [r.quantity, str(r.n) if r.covered else "-", _fmt(r.max_abs), _fmt(r.max_rel),
                   _fmt(r.worst_ratio), r.tolerance_text if r.covered else "-"]
            if float64_reference:
                ratio = "-" if r.worst_allowed is None else f"{_fmt(r.worst_err)}/{_fmt(r.worst_allowed)}"
                out += [_fmt(r.noise_max), ratio, _fmt(r.direct_max_abs)]
            return out + [result]

        body = [cells(r) for r in port_rows]
        extra = [cells(r) for r in checks]
        ncol = len(head) - 1
        widths = [max(len(x[i]) for x in [head] + body + extra) for i in range(ncol)]
        fmt = lambda c: " | ".join(x.ljust(w) for x, w in zip(c[:ncol], widths)) + " | " + c[ncol]
        lines = [fmt(head), "-+-".join("-" * w for w in widths) + "-+-" + "-" * 6]
        lines += [fmt(c) for c in body]
        n_fail = len(self.failed)
        n_cov = sum(1 for r in port_rows if r.covered)
        lines.append(f"{n_cov - n_fail}/{n_cov} quantities pass"
                     + (f", {n_fail} FAIL" if n_fail else "")
                     + (f", {len(port_rows) - n_cov} NOT COVERED" if n_cov < len(port_rows) else ""))
        if checks:
            lines.append("trace self-checks (recorded data against recorded data, not port results):")
            lines += [fmt(c) for c in extra]
        if notes:
            for r in self.failed + self.inconsistent:
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
            tol: Optional[Tolerance] = None, self_check: bool = False) -> Row:
        if quantity not in self.rows:
            self.rows[quantity] = Row(group, quantity, tol or tolerance_for(tol_path or quantity),
                                      self_check=self_check)
        return self.rows[quantity]

    def finish(self):
        for row in self.rows.values():
            row.finish()


class _Context:
    def __init__(self, exp, trace: TraceFile, source, target, progress):
        self.exp, self.tr, self.progress = exp, trace, progress
        self.model = exp.model
        # the two float64 runs that set the bounds (never compared in place of the product)
        self.model64 = exp.model.float64_shadow()
        self.probe = exp.model.float32_probe()
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
        compare_values(c_row, f"{where}/c", _np(c), _np(c64), rec["c"], probe=_np(cp))
        compare_values(init_row, f"{where}/init_states", _np(ctx.model.initial_states(c)),
                       _np(ctx.model64.initial_states(c64)), rec["init_states"],
                       probe=_np(ctx.probe.initial_states(cp)))
        ctx.tick()
    if ctx.src_lines is None and not ctx.tr.has("pairs"):
        seq_row.covered = parsed_row.covered = False
        seq_row.note("not covered: no source lines (pass --source)")


def _np(t):
    return t.detach().cpu().numpy()


def _normal_probs(*probs):
    """Mask of the entries whose probability is a normal float32 on every side (a subnormal
    probability has a fixed absolute spacing: its noise is not representative)."""
    return np.logical_and.reduce([np.asarray(p, dtype=np.float64) >= tolmod.FLT32_TINY for p in probs])


#: ``-log`` of the smallest normal float32: a word cost above it comes from a subnormal p
SUBNORMAL_COST = -float(np.log(tolmod.FLT32_TINY))


def _normal_sentences(token_costs, mask=None):
    """Sentences (columns) none of whose (unmasked) word costs come from a subnormal
    probability; non-finite costs are compared as a pattern, not pooled, anyway."""
    c = np.asarray(token_costs, dtype=np.float64)
    if mask is not None:
        c = np.where(np.asarray(mask) > 0, c, 0.0)
    with np.errstate(invalid="ignore"):
        return ~(np.isfinite(c) & (c > SUBNORMAL_COST)).any(0)


def _score_quantum(score64, token_costs64, mask=None):
    """Resolution of a float32 sentence score: two spacings at the score plus, per word,
    :func:`tolerance.cost_quantum`'s step of its float32 probability (negligible for a
    normal ``p``; a subnormal ``p``, kept to a fixed spacing of 2**-149 by both float32
    implementations, moves its ``-log p`` by up to ``2 * 2**-149 / p``)."""
    with np.errstate(over="ignore", invalid="ignore"):
        p = np.exp(-np.asarray(token_costs64, dtype=np.float64))
    steps = np.where(np.isfinite(p), tolmod.cost_quantum(np.zeros_like(p), p), 0.0)
    if mask is not None:
        steps = np.where(np.asarray(mask) > 0, steps, 0.0)
    return 2 * tolmod.ulp32(score64) + steps.sum(0)


def _check_pairs(ctx: _Context, rows: _Rows):
    r_src = rows.get("pairs", "pairs/src_ids", "pairs/0/src_ids")
    r_trg = rows.get("pairs", "pairs/trg_ids", "pairs/0/trg_ids")
    r_wp = rows.get("pairs", "pairs/word_probs", "pairs/0/word_probs")
    r_al = rows.get("pairs", "pairs/alignment", "pairs/0/alignment") if ctx.model.cfg.search else None
    r_sc = rows.get("pairs", "pairs/score", "pairs/0/score")
    r_src.product = r_trg.product = "scoring.parse_pair (score --allow-unk)"
    for r in (r_wp, r_al, r_sc):
        if r is not None:
            r.product = "scoring.score_pair (score, one sentence)"
    for i in ctx.tr.pair_indices():
        rec = ctx.tr.pairs(i)
        where = f"pairs/{i}"
        (src, _), (trg, _) = parse_pair(ctx.exp, ctx.src_line(i), ctx.trg_line(i), allow_unk=True)
        compare_exact(r_src, f"{where}/src_ids", np.asarray(src, dtype=np.int64), rec["src_ids"])
        compare_exact(r_trg, f"{where}/trg_ids", np.asarray(trg, dtype=np.int64), rec["trg_ids"])
        s, s64, sp = (score_pair(m, rec["src_ids"], rec["trg_ids"])
                      for m in (ctx.model, ctx.model64, ctx.probe))
        # masked as p * mask + 1 - mask (model.score): float32 keeps p to steps of 2**-23
        compare_values(r_wp, f"{where}/word_probs", _np(s.word_probs), _np(s64.word_probs), rec["word_probs"],
                       probe=_np(sp.word_probs), quantum=tolmod.ulp32(1.0) + tolmod.ulp32(rec["word_probs"]))
        if s.alignment is not None:
            compare_values(r_al, f"{where}/alignment", _np(s.alignment), _np(s64.alignment), rec["alignment"],
                           probe=_np(sp.alignment))
        # non-search models record create_probs_computer's dummy zeros((1,)) (MANIFEST
        # section 10): nothing the port computes, so nothing is compared
        compare_values(r_sc, f"{where}/score", (-_np(s.cost)).astype(np.float32), -_np(s64.cost),
                       rec["score"], probe=-_np(sp.cost), magnitude_of=len(rec["trg_ids"]),
                       n_terms=len(rec["trg_ids"]), poolable=_normal_sentences(_np(s64.token_costs)),
                       quantum=_score_quantum(-_np(s64.cost), _np(s64.token_costs)))
        ctx.tick()


def _check_batch(ctx: _Context, rows: _Rows):
    names = ("x", "y", "x_mask", "y_mask", "scores")
    r = {n: rows.get("batch", f"batch/{n}", f"batch_all/0/{n}") for n in names}
    for n in names:
        r[n].product = "scoring.batches_for / score_batch (score --mode batch)"
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
                compare_exact(r[n], f"{where}/{n}", got, rec[n])
        # the scores of the RECORDED batch: its numerics, independently of the batching
        batch = SimpleNamespace(x=rec["x"], y=rec["y"], x_mask=rec["x_mask"], y_mask=rec["y_mask"])
        s32, s64, sp = (score_batch(m, batch) for m in (ctx.model, ctx.model64, ctx.probe))
        mask = np.asarray(rec["y_mask"], dtype=np.float64)
        compare_values(r["scores"], f"{where}/scores", -_np(s32.cost).astype(np.float32), -_np(s64.cost),
                       rec["scores"], probe=-_np(sp.cost), magnitude_of=mask.sum(0), n_terms=mask.shape[0],
                       poolable=_normal_sentences(_np(s64.token_costs), mask),
                       quantum=_score_quantum(-_np(s64.cost), _np(s64.token_costs), mask))
        ctx.tick()


def _step_triples(beam, flat, n_samples, voc):
    """The port's selection on ``flat`` as (prefix, word, flat index) triples."""
    if n_samples >= flat.numel():
        return None
    best = select_cheapest(flat[None], [n_samples])[0].cpu().numpy()
    return [(beam[int(b) // voc], int(b) % voc, int(b)) for b in best]


def _check_steps(ctx: _Context, rows: _Rows):
    r_seq = rows.get("steps", "steps/seq", "steps/0/seq")
    r_probs = rows.get("steps", "steps/next_probs", "steps/0/000/next_probs")
    r_flat = rows.get("steps", "steps/flat_next_costs", "steps/0/000/flat_next_costs")
    r_surv = rows.get("steps", "steps/survivors", "steps/0/000/costs")
    r_next = rows.get("steps", "steps/next_states", "steps/0/000/next_states")
    r_ftrans = rows.get("steps", "steps/fin_trans", "steps/0/fin_trans_flat")
    r_fcost = rows.get("steps", "steps/fin_costs", "steps/0/fin_costs")
    # recorded data against recorded data: a check of the trace, reported apart
    r_last = rows.get("steps", "steps/last_words", "steps/0/000/last_words", self_check=True)
    r_gath = rows.get("steps", "steps/states_gathered", "steps/0/000/states_gathered", self_check=True,
                      tol=tolerance_for("steps/0/000/last_words"))
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
            compare_exact(r_seq, f"{where}/seq", np.asarray(ctx.exp.parse_source(line)[0], dtype=np.int64), ss.seq)
        c, c64, cp = (m.encode(ss.seq) for m in (model, model64, probe))
        pfc, pfc64, pfcp = model.p_from_c(c), model64.p_from_c(c64), probe.p_from_c(cp)
        recorded = ss.survivors(eos)
        beam, prev_costs = [()], np.zeros(1)
        for n, st in enumerate(ss.steps):
            sw = f"{where}/{n:03d}"
            k = int(st["k"])
            if k == 0:
                beam, prev_costs = [()], np.zeros(1)
            # the beam bookkeeping: last word of every open hypothesis, zeros at k = 0
            last = np.zeros(len(beam), np.int64) if k == 0 else np.asarray([p[-1] for p in beam], np.int64)
            compare_exact(r_last, f"{sw}/last_words", last, st["last_words"])
            states_in = np.asarray(st["states_in"])
            words_in = ctx.t(st["last_words"], torch.int64)
            probs = model.next_probs(c, pfc, k, words_in, ctx.t(states_in[0], torch.float32))
            probs64 = model64.next_probs(c64, pfc64, k, words_in, ctx.t(states_in[0], torch.float64))
            probsp = probe.next_probs(cp, pfcp, k, words_in, ctx.t(states_in[0], torch.float64))
            compare_values(r_probs, f"{sw}/next_probs", _np(probs), _np(probs64), st["next_probs"],
                           probe=_np(probsp))
            if len(prev_costs) != probs.shape[0]:
                r_flat.mismatch(f"{sw}/flat_next_costs", f"{len(prev_costs)} open hypotheses after the "
                                                         f"previous step, {probs.shape[0]} rows fed")
                triples = flat32 = flat64 = None
            else:
                args = (k, ss.minlen, ss.ignore_unk, eos, unk)
                prev = ctx.t(prev_costs, torch.float64)
                flat = next_costs(prev, probs, *args).flatten()
                flat32, flat64 = _np(flat), _np(next_costs(prev, probs64, *args).flatten())
                flatp = _np(next_costs(prev, probsp, *args).flatten())
                rec_p = np.asarray(st["next_probs"], dtype=np.float64).ravel()
                exact_p = _np(probs64).ravel()
                compare_values(r_flat, f"{sw}/flat_next_costs", flat32, flat64, st["flat_next_costs"],
                               probe=flatp,
                               quantum=tolmod.cost_quantum(st["flat_next_costs"], np.minimum(rec_p, exact_p)),
                               poolable=_normal_probs(rec_p, exact_p))
                triples = _step_triples(beam, flat, int(st["n_samples"]), probs.shape[1])
            _compare_survivors(r_surv, sw, triples, recorded[n], beam, probs.shape[1], flat32, flat64,
                               None if flat32 is None else flatp)
            trans_idx = np.asarray(st["trans_indices"], dtype=np.int64)
            if trans_idx.size and (trans_idx.min() < 0 or trans_idx.max() >= states_in.shape[1]):
                r_gath.mismatch(f"{sw}/states_gathered", "trans_indices outside the recorded states_in")
            else:
                compare_exact(r_gath, f"{sw}/states_gathered", states_in[:, trans_idx], st["states_gathered"])
            words = ctx.t(st["word_indices"], torch.int64)
            gathered = np.asarray(st["states_gathered"])[0]
            ns = model.next_states(c, pfc, k, words, ctx.t(gathered, torch.float32))
            ns64 = model64.next_states(c64, pfc64, k, words, ctx.t(gathered, torch.float64))
            nsp = probe.next_states(cp, pfcp, k, words, ctx.t(gathered, torch.float64))
            compare_values(r_next, f"{sw}/next_states", _np(ns)[None], _np(ns64)[None], st["next_states"],
                           probe=_np(nsp)[None])
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
        _compare_outcome(r_ftrans, r_fcost, None, where, hyps, failure, ss.trans, ss.costs, ss.error,
                         costs64=None if hyps is None else path_costs(model64, ss.seq, hyps.trans),
                         costs_probe=None if hyps is None else path_costs(probe, ss.seq, hyps.trans))
        ctx.tick()


def _compare_survivors(row: Row, where: str, port, recorded, beam, voc, flat32, flat64, flatp):
    """Survivors of one step as SETS of (prefix, word); their costs under the derived bound.

    A set difference is accepted only as a near tie: every candidate in one set but not the
    other lies within the float32 noise bound of the selection boundary (the recorded set is
    then as valid a float32 selection as the port's); it is noted.
    """
    if port is None or flat32 is None:
        row.mismatch(where, "the port could not select survivors (beam not smaller than the candidates)",
                     len(recorded))
        return
    slot = {p: j for j, p in enumerate(beam)}
    want = {(p, w): c for p, w, c in recorded}
    got = {(p, w): b for p, w, b in port}
    index = lambda key: slot[key[0]] * voc + key[1] if key[0] in slot else None
    keys = [key for key in want if index(key) is not None]
    missing = [key for key in want if key not in got]
    extra = [key for key in got if key not in want]
    if len(keys) < len(want):
        row.mismatch(where, "a recorded survivor extends no hypothesis of the recorded beam",
                     len(want) - len(keys))
    if keys:
        idx = np.asarray([index(key) for key in keys])
        compare_values(row, f"{where}/costs", flat32[idx], flat64[idx],
                       np.asarray([want[key] for key in keys], dtype=np.float64), probe=flatp[idx])
    if missing or extra:
        near = _near_tie([index(key) for key in missing], [got[key] for key in extra], flat64, flatp)
        if near:
            row.note(f"{where}: near tie at the selection boundary accepted (recorded only {missing[:2]}, "
                     f"port only {extra[:2]}, costs within the float32 noise bound)")
        else:
            row.mismatch(where, f"survivor sets differ: recorded only {missing[:3]}, port only {extra[:3]}",
                         len(missing))


def _near_tie(recorded_only, port_only, flat64, flatp) -> bool:
    """Each swapped candidate's exact cost within the bound (2 K * noise, the probe's
    noise) of the other side's: either order is a valid float32 selection."""
    if None in recorded_only or not recorded_only or not port_only:
        return False
    finite = np.isfinite(flat64)
    scale, _ = tolmod.pooled_scale(flat64, tolmod.ABS, flatp, poolable=finite)
    a, b = np.asarray(recorded_only), np.asarray(port_only)
    allow = lambda i: 2 * tolmod.K * np.maximum(np.abs(flatp[i] - flat64[i]), max(scale, tolmod.U32)) \
        + tolmod.ulp32(flat64[i])
    lo_rec = np.min(flat64[a] - allow(a))          # the cheapest the recorded-only ones can be
    hi_port = np.max(flat64[b] + allow(b))         # the dearest the port-only ones can be
    return bool(np.isfinite(flat64[a]).all() and lo_rec <= hi_port)


def _compare_outcome(r_trans: Row, r_cost: Row, r_best: Optional[Row], where: str, hyps,
                     failure: Optional[str], want_trans, want_costs, want_error: Optional[str],
                     best_sentence: Optional[str] = None, rendered: Optional[str] = None,
                     costs64=None, normalized: bool = False, costs_probe=None):
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
    compare_costs_by_hypothesis(r_cost, f"{where}/fin_costs", hyps.trans, hyps.costs, costs64, want_trans,
                                want_costs, lengths_as_terms=not normalized, got_costs_probe=costs_probe)
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

    def search(self, seq, n_samples, ignore_unk=False, minlen=0):
        key = (tuple(np.asarray(seq).tolist()), n_samples, ignore_unk, minlen)
        if key not in self.searches:
            try:
                self.searches[key] = self.searcher.search(seq, n_samples, ignore_unk=ignore_unk,
                                                          minlen=minlen), None
            except SearchFailed as err:
                self.searches[key] = None, err
        hyps, err = self.searches[key]
        if err is not None:
            raise err
        return hyps

    def path_costs(self, model, seq, trans):
        key = (id(model), tuple(np.asarray(seq).tolist()), tuple(tuple(t) for t in trans))
        if key not in self.costs:
            self.costs[key] = path_costs(model, seq, trans)
        return self.costs[key].copy()


def beam_products():
    """``(name, batch size, product text)`` of the two searches ``translate`` runs: the
    batched search at translate's default ``--batch-size`` (what ``translate`` and ``serve``
    run) and the literal one (``--batch-size 1``)."""
    from .commands.translate import DEFAULT_BATCH_SIZE
    return (("", 1, "Translator(batch_size=1).search_seqs (translate --batch-size 1: BeamSearch, "
                    "sample())"),
            ("batched/", DEFAULT_BATCH_SIZE,
             f"Translator(batch_size={DEFAULT_BATCH_SIZE}).search_seqs (translate's default: "
             "BatchedBeamSearch.sample_many)"))


def _check_beam(ctx: _Context, rows: _Rows, labels: Optional[Iterable[str]]):
    from .translate import Translator
    available = ctx.tr.beam_labels()
    chosen = available if labels is None else [str(l) for l in labels]
    unknown = [l for l in chosen if l not in available]
    if unknown:
        raise LegacyInputError(ctx.tr.path, f"beam label(s) {', '.join(unknown)} not in the trace "
                                            f"(it has {', '.join(available) or 'none'})")
    cache = _EachSearchOnce(ctx.model)
    for label in chosen:
        run = ctx.tr.beam(label)
        order = sorted(run.sentences)
        seqs = [ctx.source_seq(i) for i in order]
        for sub, batch_size, product in beam_products():
            translator = Translator(ctx.exp, run.beam_size, run.ignore_unk, run.normalize, batch_size)
            if batch_size == 1:
                translator.literal = cache
            results = translator.search_seqs(seqs)
            r_trans = rows.get("beam", f"beam/{label}/{sub}fin_trans", f"beam/{label}/0/fin_trans_flat")
            r_cost = rows.get("beam", f"beam/{label}/{sub}fin_costs", f"beam/{label}/0/fin_costs")
            r_best = rows.get("beam", f"beam/{label}/{sub}best_sentence", f"beam/{label}/0/fin_trans_flat")
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
                    if run.normalize:   # the bound's reference values only
                        lengths = np.asarray([len(t) for t in hyps.trans], dtype=np.float64)
                        costs64, costsp = costs64 / lengths, costsp / lengths
                if sent.error is not None:
                    n_err += 1
                _compare_outcome(r_trans, r_cost, r_best, where, hyps, failure, sent.trans, sent.costs,
                                 sent.error, sent.best_sentence, rendered, costs64=costs64,
                                 normalized=run.normalize, costs_probe=costsp)
            ctx.tick()
            if n_err and r_trans.passed:
                r_trans.note(f"{n_err} recorded crash(es) of sample.py reproduced with the same message")
    _beam_coverage(ctx, rows, chosen)


def _beam_coverage(ctx: _Context, rows: _Rows, labels):
    """NOT COVERED rows for mechanisms a recording cannot tell apart (``--allow-uncovered``):

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
            elif not any(unk in tuple(int(t) for t in h) for s in ctx.tr.beam(plain).sentences.values()
                         for h in (s.trans or [])):
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
                why = ("the cheapest normalised and the cheapest raw cost pick the same hypothesis in "
                       "every sentence: choosing by normalised cost is not discriminated")
            quantity = f"beam/{label}/normalize_choice"
        if why is not None:
            row = rows.get("beam", quantity, tol=Tolerance("n/a"))
            row.covered = False
            row.notes.append(why)


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
    if "sampler" in groups and tr.has("sampler"):
        n += len(tr.sampler()["calls"])
    if "train_step" in groups and tr.has("train_step"):
        n += 1
    if "beam" in groups:
        labels = tr.beam_labels() if beam_labels is None else beam_labels
        n += 2 * sum(1 for label in labels if tr.has(f"beam/{label}"))
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
               "sampler": trace.has("sampler"), "train_step": trace.has("train_step"),
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
            elif g == "sampler":
                from .sampling.parity import check_sampler
                check_sampler(ctx, rows)
            elif g == "train_step":
                from .training.parity import check_train_step
                check_train_step(ctx, rows)
            else:
                _check_beam(ctx, rows, beam_labels)
            seconds[g] = time.perf_counter() - t0
    rows.finish()
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


def find_case(case_dir, state=None, model=None, trace=None, source=None, target=None,
              data_dirs=()) -> CaseFiles:
    """Locate ``*_state.pkl``, the matching ``*_model.npz``, ``trace.h5`` in ``case_dir`` and
    the test files (named by the trace's ``test_src_file``/``test_trg_file`` attributes,
    default ``test.en``/``test.fr``) there or in ``data_dirs`` (:func:`groundhog_port.lookup.
    find_named`); explicit paths override what is found."""
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
        if source is None:
            source = lookup.find_named(src_name, d, data_dirs)
        if target is None:
            target = lookup.find_named(trg_name, d, data_dirs)
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

    dirs = lookup.case_data_dirs(case_dir)
    files = find_case(case_dir, data_dirs=dirs)
    exp = open_experiment(files.state, files.model, changes, data_dir=dirs, device=device)
    with TraceFile(files.trace) as tr:
        report = check(exp, tr, groups=groups, beam_labels=beam_labels, source=files.source,
                       target=files.target, progress=progress)
    report.case = report.case or files.name
    return report
