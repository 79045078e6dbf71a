"""The parity report and the comparisons every group of the harness uses.

A :class:`Row` per compared quantity (its figures, the bound's rule and the worst element),
the comparisons that fill it -- :func:`compare_exact` (``==``), :func:`compare_values`
(the derived bound of :mod:`groundhog_port.harness.tolerance`), :func:`compare_sequences`,
:func:`compare_text`, :func:`compare_costs_by_hypothesis` --, the :class:`Report` that
``groundhog-port parity`` prints, and what a group is given: the :class:`Context` (the
experiment, the trace, the test lines, the float64 shadow and float32 probe that set the
bounds) and the :class:`Rows` it fills.  A group is a :class:`Group`: registered in
:data:`groundhog_port.harness.check.GROUP_TABLE`, which runs them in report order.

Conventions of the figures: ``n`` counts array elements (token sequences: hypotheses;
strings: sentences); ``max abs err`` is over elements finite on both sides; ``max rel err``
is ``|port - recorded| / |recorded|`` over those whose recorded value is not 0; non-finite
values must match as a pattern (same positions, same nan / +inf / -inf) for every float
rule.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch
from numpy.typing import ArrayLike

from ..errors import LegacyInputError, shown_all
from ..legacy.data import read_text_lines
from ..outputs import atomic_write_text
from . import tolerance as tolmod
from .trace import Tolerance, TraceFile, tolerance_for

if TYPE_CHECKING:
    from ..legacy.experiment import Experiment
    from ..outputs import Progress

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
    against its own float64 shadow, bounded by eq. 2 of :mod:`groundhog_port.harness.tolerance`),
    ``direct_max_abs`` ``max |recorded - port64|`` (Theano's own float32 error); the worst
    element is the one with the largest error / bound (``worst_ratio``), with
    ``worst_err``/``worst_allowed``/``worst_noise`` there.  ``self_check`` rows compare
    the recording with itself (trace consistency), not the port.
    """

    group: str
    quantity: str
    tolerance: Tolerance
    n: int = 0
    max_abs: float | None = None  # None: nothing numeric compared (sequences, strings)
    max_rel: float | None = None
    n_bad: int = 0
    worst: str | None = None  # dataset path + index of the worst element
    covered: bool = True
    #: NOT COVERED because the recording does not hold what the row needs (it cannot tell
    #: the mechanism apart): expected, reported, exit 0.  A row not covered for any other
    #: reason (a recorded group the port cannot recompute) is a gap of the port: exit 1.
    recording_gap: bool = False
    self_check: bool = False
    notes: list[str] = field(default_factory=list)
    product: str = ""  # the user-facing function whose output is compared
    noise_max: float | None = None  # max |port32 - float64 shadow| (the float32 self-check)
    direct_max_abs: float | None = None  # max |recorded - float64 shadow| (Theano's own error)
    worst_err: float | None = None
    worst_allowed: float | None = None
    worst_noise: float | None = None
    worst_ratio: float | None = None
    sigma_max: float | None = None  # the largest pooled noise scale (tolerance eq. 4)
    max_units: float | None = None  # max (err - quantum) / noise: the K this row needed
    _worst_score: float = field(default=-1.0, repr=False)
    _pool: tolmod.Pool | None = field(default=None, repr=False)

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
    def max_ratio(self) -> float | None:
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
            if math.isinf(score):  # a mismatch: no bound can hold it
                self.worst_ratio = score
            return True
        return False

    def note(self, text: str, limit: int = 5) -> None:
        if len(self.notes) < limit:
            self.notes.append(text)
        elif len(self.notes) == limit:
            self.notes.append("...")

    def mismatch(self, where: str, problem: str, count: int = 1) -> None:
        """Something that could not be compared element-wise (shape, missing, error)."""
        self.n += count
        self.n_bad += count
        self._candidate(math.inf, where)
        self.note(f"{where}: {problem}")

    def finish(self) -> None:
        """Judge the records kept for pooling (small records, :class:`tolerance.Pool`)."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            for where, res in pool.results():
                account(self, where, res)

    @property
    def tolerance_text(self) -> str:
        return tolerance_text(self.tolerance)

    def as_dict(self) -> dict:
        return {
            "group": self.group,
            "quantity": self.quantity,
            "product": self.product,
            "n": self.n,
            "max_abs_err": _json_float(self.max_abs),
            "max_rel_err": _json_float(self.max_rel),
            "float32_noise": _json_float(self.noise_max),
            "max_abs_err_recorded_vs_float64": _json_float(self.direct_max_abs),
            "max_error_bound_ratio": _json_float(self.worst_ratio),
            "worst_err": _json_float(self.worst_err),
            "worst_allowed": _json_float(self.worst_allowed),
            "worst_noise": _json_float(self.worst_noise),
            "sigma_max": _json_float(self.sigma_max),
            "max_noise_units": _json_float(self.max_units),
            "tolerance": self.tolerance_text,
            "tolerance_note": self.tolerance.note,
            "self_check": self.self_check,
            "status": self.status,
            "passed": self.passed if self.covered else None,
            "recording_gap": self.recording_gap,
            "n_bad": self.n_bad,
            "worst": self.worst,
            "notes": list(self.notes),
        }


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


def compare_exact(row: Row, where: str, got: ArrayLike, want: ArrayLike) -> None:
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
        row.note(
            f"{where}{_index_text(first)}: port {got[tuple(first)]!r}, recorded "
            f"{want[tuple(first)]!r}" + (f" ({n_bad} elements differ)" if n_bad > 1 else "")
        )
    else:
        row._candidate(0.0, where)


def compare_values(
    row: Row,
    where: str,
    port32: ArrayLike,
    port64: ArrayLike,
    recorded: ArrayLike,
    probe: ArrayLike | None = None,
    magnitude_of: ArrayLike | None = None,
    quantum: ArrayLike | None = None,
    poolable: ArrayLike | None = None,
    n_terms: ArrayLike | None = None,
) -> None:
    """A floating-point quantity under the derived bound of :mod:`groundhog_port.harness.tolerance`.

    ``port32``: the product's float32 output (what is compared with ``recorded``),
    ``port64``: the float64 shadow's value, ``probe``: the float64 float32-probe's
    (:meth:`~groundhog_port.model.encdec.RNNEncoderDecoder.float32_probe`; they set the bound).
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
        row.mismatch(
            where, f"product output of shape {p.shape}, recorded {r.shape}", max(1, r.size)
        )
        return
    if r.size == 0:
        return
    scale, n_pool = tolmod.pooled_scale(q, kind, d, magnitude_of, poolable)
    if n_pool >= tolmod.POOL_MIN:
        account(
            row,
            where,
            tolmod.judge(r, p, q, kind, scale, n_pool, d, magnitude_of, quantum, n_terms=n_terms),
        )
        return
    if row._pool is None:
        row._pool = tolmod.Pool(kind)
    row._pool.add(where, r, p, q, d, magnitude_of, quantum, poolable, n_terms)


def account(row: Row, where: str, res: tolmod.Comparison) -> None:
    """Add one judged record to the row's figures."""
    r, p = res.recorded, res.port32
    assert r is not None and p is not None  # set by every comparison
    row.n += r.size
    fin = res.finite
    if fin.any():
        absr = np.abs(r)
        nz = fin & (absr > 0)
        row._errs(
            float(res.err[fin].max()), float((res.err[nz] / absr[nz]).max()) if nz.any() else None
        )
        theano = float(res.theano[fin].max())
        row.direct_max_abs = (
            theano if row.direct_max_abs is None else max(row.direct_max_abs, theano)
        )
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
        what = (
            f"|product - float64 shadow| {float(res.own.ravel()[flat]):.3g} > allowed "
            f"{float(res.own_allowed.ravel()[flat]):.3g} (float32 arithmetic cannot be that far "
            "off its exact value)"
            if own_bad
            else f"|product - recorded| {float(res.err.ravel()[flat]):.3g} > allowed "
            f"{float(res.allowed.ravel()[flat]):.3g}"
        )
        row.note(
            f"{where}{_index_text(idx)}: product {float(p.ravel()[flat])!r}, recorded "
            f"{float(r.ravel()[flat])!r}, {what} (float32 noise {float(res.noise.ravel()[flat]):.3g})"
            + (f" ({n_bad} elements out of bounds)" if n_bad > 1 else "")
        )


def compare_sequences(
    row: Row, where: str, got: Sequence[Sequence[int]], want: Sequence[Sequence[int]]
) -> None:
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
        row.note(
            f"{where}[{j}]: port {a}, recorded {b}"
            + (
                f"; port has {len(got)} hypotheses, recorded {len(want)}"
                if len(got) != len(want)
                else ""
            )
        )


def compare_text(
    row: Row, where: str, got: str | list[str] | None, want: str | list[str] | None
) -> None:
    row.n += 1
    if got != want:
        row.n_bad += 1
        row._candidate(math.inf, where)
        row.note(f"{where}: port {got!r}, recorded {want!r}")


def compare_costs_by_hypothesis(
    row: Row,
    where: str,
    got_trans: Iterable[Sequence[int]],
    got_costs: Iterable[float],
    got_costs64: Iterable[float],
    want_trans: Iterable[Sequence[int]],
    want_costs: Iterable[float],
    lengths_as_terms: bool = True,
    got_costs_probe: Iterable[float] | None = None,
) -> None:
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
        compare_values(
            row,
            where if g == w else where + "(matched by hypothesis)",
            p32,
            p64,
            rec,
            probe=pp,
            magnitude_of=m,
        )
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

    rows: list[Row]
    trace: str = ""
    case: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Every covered row passed and the trace is self-consistent (NOT COVERED rows
        neither pass nor fail)."""
        return all(r.passed for r in self.rows if r.covered)

    @property
    def failed(self) -> list[Row]:
        """Port quantities out of bounds (self-check rows not included)."""
        return [r for r in self.rows if r.covered and not r.passed and not r.self_check]

    @property
    def uncovered(self) -> list[Row]:
        """NOT COVERED rows, expected or not (:attr:`unexpected_uncovered`)."""
        return [r for r in self.rows if not r.covered]

    @property
    def unexpected_uncovered(self) -> list[Row]:
        """NOT COVERED rows that should have been covered: the recording holds what they
        need but the port did not compare it (``parity`` exits 1 on them unless
        ``--allow-uncovered``; docs/exit-codes.md).  Rows the recording cannot tell apart
        (:attr:`Row.recording_gap`) are expected: reported, and exit 0."""
        return [r for r in self.rows if not r.covered and not r.recording_gap]

    @property
    def inconsistent(self) -> list[Row]:
        """Trace self-checks that failed (the recording contradicts itself)."""
        return [r for r in self.rows if r.self_check and not r.passed]

    @property
    def n_compared(self) -> int:
        return sum(r.n for r in self.rows if r.covered and not r.self_check)

    def group(self, name: str) -> list[Row]:
        return [r for r in self.rows if r.group == name]

    def table(self, notes: bool = True, float64_reference: bool = False) -> str:
        """The plain-text table ``quantity | n | max abs err | max rel err | err/bound |
        tolerance | result`` of the port's quantities (errors: the product's float32 output
        against the recording; ``err/bound``: the largest error / allowed of the row, eqs.
        1-2 of :mod:`groundhog_port.harness.tolerance`), then the trace self-checks apart.
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
                result += (
                    f" ({r.n_bad} bad; worst {r.worst}"
                    + (f"; product: {r.product}" if r.product else "")
                    + ")"
                )
            elif not r.covered:
                result += f" ({r.notes[0]})" if r.notes else ""
            out = [
                r.quantity,
                str(r.n) if r.covered else "-",
                _fmt(r.max_abs),
                _fmt(r.max_rel),
                _fmt(r.worst_ratio),
                r.tolerance_text if r.covered else "-",
            ]
            if float64_reference:
                ratio = (
                    "-"
                    if r.worst_allowed is None
                    else f"{_fmt(r.worst_err)}/{_fmt(r.worst_allowed)}"
                )
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
        lines.append(
            f"{n_cov - n_fail}/{n_cov} quantities pass"
            + (f", {n_fail} FAIL" if n_fail else "")
            + (f", {len(port_rows) - n_cov} NOT COVERED" if n_cov < len(port_rows) else "")
        )
        if checks:
            lines.append(
                "trace self-checks (recorded data against recorded data, not port results):"
            )
            lines += [fmt(c) for c in extra]
        if notes:
            for r in self.failed + self.inconsistent:
                for note in r.notes:
                    lines.append(f"  {r.quantity}: {note}")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return {
            "trace": self.trace,
            "case": self.case,
            "ok": self.ok,
            "n_compared": self.n_compared,
            "seconds": dict(self.seconds),
            "rows": [r.as_dict() for r in self.rows],
        }

    def to_json(self, path: str | os.PathLike[str] | None = None) -> str:
        # names whose bytes are not UTF-8 (a case folder copied from a Latin-1 machine) shown
        # escaped, as the archive's report does: writing them raised UnicodeEncodeError
        text = json.dumps(shown_all(self.as_dict()), indent=2, allow_nan=False, ensure_ascii=False)
        if path is not None:
            atomic_write_text(path, text + "\n")  # complete or absent, even if interrupted
        return text


# --------------------------------------------------------------------------------------
# What a group is given
# --------------------------------------------------------------------------------------
class Rows:
    """Rows of a report, created on first use in a fixed order."""

    def __init__(self) -> None:
        self.rows: dict[str, Row] = {}

    def get(
        self,
        group: str,
        quantity: str,
        tol_path: str | None = None,
        tol: Tolerance | None = None,
        self_check: bool = False,
    ) -> Row:
        if quantity not in self.rows:
            self.rows[quantity] = Row(
                group, quantity, tol or tolerance_for(tol_path or quantity), self_check=self_check
            )
        return self.rows[quantity]

    def finish(self) -> None:
        for row in self.rows.values():
            row.finish()


class Context:
    """What every group reads: the experiment, the trace, the test lines, and the float64
    shadow and float32 probe of the model that set the bounds."""

    def __init__(
        self,
        exp: Experiment,
        trace: TraceFile,
        source: str | os.PathLike[str] | None,
        target: str | os.PathLike[str] | None,
        progress: Progress | None,
        beam_labels: Sequence[str] | None = None,
    ) -> None:
        self.exp, self.tr, self.progress = exp, trace, progress
        #: restrict ``/beam`` to these labels (None: all the trace holds)
        self.beam_labels = beam_labels
        self.model = exp.model
        # the two float64 runs that set the bounds (never compared in place of the product)
        self.model64 = exp.model.float64_shadow()
        self.probe = exp.model.float32_probe()
        self.device = exp.model.device
        self.source, self.target = source, target
        self.src_lines = read_text_lines(source) if source is not None else None
        self.trg_lines = read_text_lines(target) if target is not None else None
        self._seq_cache: dict[int, np.ndarray] = {}

    def t(self, a: ArrayLike, dtype: torch.dtype | None = None) -> torch.Tensor:
        return torch.as_tensor(np.asarray(a), dtype=dtype, device=self.device)

    def tick(self, n: int = 1) -> None:
        if self.progress is not None:
            self.progress.update(n)

    def src_line(self, i: int) -> str | None:
        return self._line(i, self.src_lines, self.source, "src_line")

    def trg_line(self, i: int) -> str | None:
        return self._line(i, self.trg_lines, self.target, "trg_line")

    def _line(self, i: int, lines, path, key: str) -> str | None:
        """Test line ``i``: from the file when one is given, else the one recorded in
        ``/pairs/{i}`` (its attribute ``key``), else None."""
        if lines is not None:
            if i >= len(lines):
                raise LegacyInputError(
                    path, f"the trace has sentence {i} but the file has only {len(lines)} lines"
                )
            return lines[i]
        if self.tr.has(f"pairs/{i}"):
            return self.tr.pairs(i)[key]
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
                    raise LegacyInputError(
                        self.tr.path,
                        f"sentence {i}: no /repr/{i}/seq and no source line (pass --source)",
                    )
                seq = self.exp.parse_source(line)[0]
            self._seq_cache[i] = np.asarray(seq, dtype=np.int64)
        return self._seq_cache[i]


def as_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def normal_probs(*probs: ArrayLike) -> np.ndarray:
    """Mask of the entries whose probability is a normal float32 on every side (a subnormal
    probability has a fixed absolute spacing: its noise is not representative)."""
    return np.logical_and.reduce(
        [np.asarray(p, dtype=np.float64) >= tolmod.FLT32_TINY for p in probs]
    )


#: ``-log`` of the smallest normal float32: a word cost above it comes from a subnormal p
SUBNORMAL_COST = -float(np.log(tolmod.FLT32_TINY))


def normal_sentences(
    token_costs: ArrayLike, mask: ArrayLike | None = None
) -> np.ndarray | np.bool_:  # (n,) for (T, n) costs
    """Sentences (columns) none of whose (unmasked) word costs come from a subnormal
    probability; non-finite costs are compared as a pattern, not pooled, anyway."""
    c = np.asarray(token_costs, dtype=np.float64)
    if mask is not None:
        c = np.where(np.asarray(mask) > 0, c, 0.0)
    with np.errstate(invalid="ignore"):
        return ~(np.isfinite(c) & (c > SUBNORMAL_COST)).any(0)


def score_quantum(
    score64: ArrayLike, token_costs64: ArrayLike, mask: ArrayLike | None = None
) -> np.ndarray:
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


@dataclass(frozen=True)
class Group:
    """One group of recorded quantities, as :data:`groundhog_port.harness.check.GROUP_TABLE` runs it.

    ``present(trace)``: the trace holds it; ``work(trace, beam_labels)``: its progress units
    (one per sentence / batch / instrumented search / (label, sentence)); ``run(ctx, rows)``
    recomputes and compares it, calling ``ctx.tick()`` per unit."""

    name: str
    present: Callable[[TraceFile], bool]
    work: Callable[[TraceFile, Sequence[str] | None], int]
    run: Callable[[Context, Rows], None]
