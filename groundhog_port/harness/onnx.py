"""The exported ONNX graphs against a recorded trace, under the port's derived bounds.

Fed with the RECORDED inputs of ``trace.h5`` (``/repr/{i}/seq``; ``/steps/{i}/{k}``:
``last_words`` + ``states_in``, ``word_indices`` + ``states_gathered``), each graph output
is the product judged by :func:`groundhog_port.harness.tolerance.compare`, exactly as the port's
float32 output is by ``groundhog-port parity``::

    |recorded - onnx| <= 2 K * noise + quantum      (against the recording)
    |onnx     - p64|  <=   K * noise + quantum      (against its exact value)

with ``p64`` the port's float64 shadow and ``noise`` from its float32 probe
(:meth:`~groundhog_port.model.encdec.RNNEncoderDecoder.float32_probe`) on the same inputs; the
noise kind of each quantity is the one :data:`groundhog_port.harness.trace.TOLERANCES` gives it.
The graphs run on their own float32 annotations (the ONNX path as a user runs it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch
from numpy.typing import ArrayLike

from . import tolerance as tol
from .trace import TraceFile, tolerance_for

if TYPE_CHECKING:
    from ..model.encdec import RNNEncoderDecoder


class OnnxGraphs(Protocol):
    """What :func:`check_onnx` runs: the exported graphs, as
    :class:`groundhog_port.export.beam_search.OnnxTranslator` holds them (a Protocol: the
    export layer sits above the harness, which may not import it, even for typing)."""

    def encode(self, seq: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """``(c, init_state, p_from_c or None)`` of one sentence."""
        ...

    def next_probs(
        self,
        c: np.ndarray,
        p_from_c: np.ndarray | None,
        step: int,
        y_prev: ArrayLike,
        states: ArrayLike,
    ) -> np.ndarray:
        """The next word's probabilities, ``(n, n_sym_target)``."""
        ...

    def next_states(
        self, c: np.ndarray, p_from_c: np.ndarray | None, step: int, y: ArrayLike, states: ArrayLike
    ) -> np.ndarray:
        """The decoder's next states, ``(n, dim)``."""
        ...


#: quantity -> the trace path whose tolerance (noise kind) it uses
QUANTITIES = {
    "repr/c": "repr/0/c",
    "repr/init_states": "repr/0/init_states",
    "steps/next_probs": "steps/0/000/next_probs",
    "steps/next_states": "steps/0/000/next_states",
}


@dataclass
class OnnxRow:
    """One quantity: values compared, failures, the worst error / bound (either rule) and
    the largest ``|onnx - recorded|`` (``max_err``), ``|onnx - p64|`` (``max_own``) and
    allowed bound seen."""

    quantity: str
    kind: str
    n: int = 0
    n_bad: int = 0
    worst_ratio: float = 0.0
    worst_where: str = ""
    max_err: float = 0.0
    max_own: float = 0.0
    max_vs_recorded: float = 0.0
    max_allowed: float = 0.0
    notes: list = field(default_factory=list)
    _pool: tol.Pool | None = None

    def add(
        self,
        where: str,
        onnx: ArrayLike,
        port64: ArrayLike,
        probe: ArrayLike | None,
        recorded: ArrayLike | None = None,
    ) -> None:
        """One record: the graph's output, the port's float64 shadow and float32 probe values
        of the same quantity on the same inputs, and the recording (None: no recording, the
        bound against the exact value alone)."""
        onnx = np.asarray(onnx)
        recorded = onnx if recorded is None else np.asarray(recorded)
        if onnx.shape != recorded.shape:
            self.n_bad += 1
            self.notes.append(f"{where}: shape {onnx.shape}, recorded {recorded.shape}")
            return
        with np.errstate(invalid="ignore"):
            diff = np.abs(onnx.astype(np.float64) - recorded)
        fin = np.isfinite(diff)
        if fin.any():
            self.max_vs_recorded = max(self.max_vs_recorded, float(diff[fin].max()))
        kind = tol.KINDS[self.kind]
        if onnx.size >= tol.POOL_MIN:  # its own noise pool, as parity.compare_values
            self._account(where, tol.compare(recorded, onnx, port64, kind, probe=probe))
        else:
            if self._pool is None:
                self._pool = tol.Pool(kind)
            self._pool.add(where, recorded, onnx, port64, probe=probe)

    def _account(self, where, res):
        self.n += res.recorded.size
        self.n_bad += res.n_bad
        if res.finite.any():
            self.max_err = max(self.max_err, float(res.err[res.finite].max()))
            self.max_own = max(self.max_own, float(res.own[res.finite].max()))
            self.max_allowed = max(self.max_allowed, float(res.allowed[res.finite].max()))
        ratio = float(res.ratio.max()) if res.ratio.size else 0.0
        if ratio >= self.worst_ratio:
            self.worst_ratio, self.worst_where = ratio, where
        if res.n_bad:
            self.notes.append(
                f"{where}: {res.n_bad} values out of bounds (worst err/allowed {ratio:.3g})"
            )

    def finish(self) -> OnnxRow:
        if self._pool is not None:
            for where, res in self._pool.results():
                self._account(where, res)
            self._pool = None
        return self

    @property
    def ok(self) -> bool:
        return self.n_bad == 0 and self.n > 0

    def line(self) -> str:
        return (
            f"{self.quantity:18s} {self.kind:4s} n={self.n:<7d} bad={self.n_bad} "
            f"max|onnx-exact|={self.max_own:.3g} worst err/allowed={self.worst_ratio:.3g} "
            f"({self.worst_where}) max|onnx-recorded|={self.max_vs_recorded:.3g}"
        )


def _np(t):
    return t.detach().cpu().numpy()


def check_onnx(
    model: RNNEncoderDecoder,
    translator: OnnxGraphs,
    trace: TraceFile,
    repr_indices: Iterable[int] | None = None,
    steps_indices: Iterable[int] | None = None,
) -> dict[str, OnnxRow]:
    """Rows of :data:`QUANTITIES` for the ONNX graphs of ``translator``
    (:class:`~groundhog_port.export.beam_search.OnnxTranslator`) against ``trace``
    (:class:`~groundhog_port.harness.trace.TraceFile`); ``model`` is the port's model of the same
    checkpoint (its float64 shadow and float32 probe make the bounds)."""
    rows = {q: OnnxRow(q, tolerance_for(p).noise) for q, p in QUANTITIES.items()}
    ref = {"p64": model.float64_shadow(), "probe": model.float32_probe()}
    f64 = lambda a: torch.as_tensor(np.asarray(a), dtype=torch.float64)
    i64 = lambda a: torch.as_tensor(np.asarray(a), dtype=torch.int64)
    for i in trace.repr_indices() if repr_indices is None else repr_indices:
        rec = trace.repr(i)
        c = {n: m.encode(rec["seq"]) for n, m in ref.items()}
        s0 = {n: _np(m.initial_states(c[n])) for n, m in ref.items()}
        oc, os0, _ = translator.encode(rec["seq"])
        rows["repr/c"].add(f"repr/{i}/c", oc, _np(c["p64"]), _np(c["probe"]), rec["c"])
        rows["repr/init_states"].add(
            f"repr/{i}/init_states", os0, s0["p64"], s0["probe"], rec["init_states"]
        )
    for i in trace.steps_indices() if steps_indices is None else steps_indices:
        ss = trace.steps(i)
        c = {n: m.encode(ss.seq) for n, m in ref.items()}
        pfc = {n: m.p_from_c(c[n]) for n, m in ref.items()}
        oc, _, opfc = translator.encode(ss.seq)
        for n, st in enumerate(ss.steps):
            where, k = f"steps/{i}/{n:03d}", int(st["k"])
            words, states = st["last_words"], np.asarray(st["states_in"])[0]
            probs = {
                r: _np(m.next_probs(c[r], pfc[r], k, i64(words), f64(states)))
                for r, m in ref.items()
            }
            rows["steps/next_probs"].add(
                f"{where}/next_probs",
                translator.next_probs(oc, opfc, k, words, states),
                probs["p64"],
                probs["probe"],
                st["next_probs"],
            )
            words, gathered = st["word_indices"], np.asarray(st["states_gathered"])[0]
            ns = {
                r: _np(m.next_states(c[r], pfc[r], k, i64(words), f64(gathered)))[None]
                for r, m in ref.items()
            }
            onx = translator.next_states(oc, opfc, k, words, gathered)
            rows["steps/next_states"].add(
                f"{where}/next_states", onx[None], ns["p64"], ns["probe"], st["next_states"]
            )
    return {q: r.finish() for q, r in rows.items()}
