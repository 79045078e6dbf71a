"""The derived tolerance model: how far a recorded float32 value may be from the port's.

This is the ONE place in code where the parity bounds of floating-point quantities are
defined (``docs/trace_format.md``, section "Tolerances", has the derivation in prose).
Ids, token sequences and masks stay exact (:data:`groundhog_port.trace.TOLERANCES`).

The idea
--------
A recorded value ``r`` is what Theano's float32 code computed; the port computes the same
quantity twice from the same float32 weights and recorded inputs:

* ``p32`` -- the port's float32 path (what users run),
* ``p64`` -- a float64 shadow of the same step functions (``groundhog-port parity
  --float64-reference`` reports it; :func:`groundhog_port.model.RNNEncoderDecoder.float64_shadow`).

``p64`` is the exact value up to ~1e-16 relative; ``|p32 - p64|`` is the rounding noise
of ONE float32 implementation of this quantity, on this model and these inputs, so it
grows with the model's width, depth and magnitudes by itself.  Theano's value is another
float32 implementation of the same maths (other summation orders, other ``exp``/``tanh``),
so its error ``|r - p64|`` is of the same size.  A recording is accepted when::

    |r - p64| <= K * noise + quantum                                            (1)

    noise   = max(|p32 - p64|,  sigma * m,  U32 * m)         element-wise       (2)
    sigma   = RMS over a pool of (|p32 - p64| / m)            noise per unit m   (3)

* ``m`` is the element's noise *magnitude* given by the quantity's :class:`Kind`:
  ``ABS`` (m = 1: bounded activations -- annotations, states, next-states -- and single
  ``-log p`` terms, whose rounding follows the absolute error of the logits), ``REL``
  (m = |p64|: probabilities and attention weights, whose relative error is the absolute
  error of the logits/energies), ``TERMS`` (m = number of float32 terms summed, given by
  the caller: sentence scores and beam costs are sums of per-word ``-log p``).
* ``sigma`` pools the noise of many elements, so an element whose own ``|p32 - p64|`` is
  accidentally 0 (it happened to round the same way) still gets the typical noise of its
  kind; ``|p32 - p64|`` itself is kept in the max so an ill-conditioned element with
  larger-than-typical noise gets that.  The pool is the compared array itself when it has
  at least :data:`POOL_MIN` elements (one step's ``next_probs``, one sentence's ``c``),
  otherwise every element of the quantity in the run (:class:`Pool`; sentence scores,
  beam costs).  Elements below float32's normal range (``|p64| < 1.2e-38``) stay out of a
  pool: there float32 has a fixed absolute spacing, accounted for by ``quantum``.
* ``U32 = 2**-24`` (the float32 unit roundoff) per unit magnitude is a floor for records
  with no noise at all (exactly representable results).
* ``quantum`` is the resolution of the recorded value: one float32 spacing (:func:`ulp32`)
  at the value (the recording rounded to float32, and below 1.2e-38 the subnormal spacing
  2**-149), or the printed precision of a number read from text (:func:`printed_quantum`).
* ``K`` (:data:`K`) is fixed; the evidence for it is in ``docs/trace_format.md``:
  Theano's own self-differences in the recordings (beam 1 vs beam 5 costs of one
  hypothesis, single vs padded scores, run-to-run repeats) measured in units of ``noise``,
  and the port's own ``|r - p64| / noise`` on every shared case and on the independent
  numpy float32 traces up to RNNsearch-50 size (``tools/numpy_trace_producer.py``).

Non-finite values (``nan``, ``+inf``, ``-inf``: underflowed probabilities, masked words)
are compared as a pattern between ``r`` and ``p32`` (the float32 path must underflow where
Theano did); where ``p64`` is not finite but both float32 values are, ``p32`` stands in
for it.

API (used by ``groundhog_port.parity`` and by the sampler / training / grConv checks)::

    from groundhog_port import tolerance as tol
    res = tol.compare(recorded, port32, port64, tol.REL)            # big arrays: judged now
    res.ok, res.n_bad, res.err, res.allowed, res.noise, res.sigma
    pool = tol.Pool(tol.TERMS)                                      # small records: pooled
    pool.add("pairs/3/score", recorded, port32, port64, magnitude_of=n_words)
    for where, res in pool.results(): ...                          # judged with the pool
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, List, Optional, Tuple

import numpy as np

#: the fixed multiple of the float32 noise a recording may be off by (see module docstring
#: and docs/trace_format.md for the evidence)
K = 8.0
#: float32 unit roundoff
U32 = 2.0 ** -24
#: smallest normal float32; below it float32 keeps a fixed spacing of 2**-149
FLT32_TINY = float(np.finfo(np.float32).tiny)
FLT32_SUBNORMAL_SPACING = 2.0 ** -149
#: an array with at least this many pooled elements is its own pool
POOL_MIN = 64


@dataclass(frozen=True)
class Kind:
    """How the float32 noise of a quantity scales with the element (the ``m`` of eq. (2)).

    ``scaling``: ``"abs"`` (m = 1), ``"rel"`` (m = |p64|), ``"terms"`` (m given by the
    caller: the number of float32 terms summed into the value).
    """

    name: str
    scaling: str
    note: str = ""


ABS = Kind("abs", "abs", "noise independent of the value: bounded activations (annotations, "
                         "states), single -log p terms (absolute error of the logits)")
REL = Kind("rel", "rel", "noise proportional to the value: probabilities and attention weights "
                         "(relative error = absolute error of the logits/energies)")
TERMS = Kind("terms", "terms", "noise proportional to the number of float32 terms summed: "
                               "sentence scores, beam costs (magnitude = number of words)")
KINDS = {k.name: k for k in (ABS, REL, TERMS)}


def ulp32(x) -> np.ndarray:
    """The float32 spacing at ``|x|`` (``2**-149`` below the normal range; 0 for non-finite)."""
    a = np.abs(np.asarray(x, dtype=np.float64))
    fin = np.isfinite(a)
    a32 = np.where(fin, np.minimum(a, float(np.finfo(np.float32).max)), 0.0).astype(np.float32)
    return np.where(fin, np.spacing(a32).astype(np.float64), 0.0)


def printed_quantum(x, digits: int = 5) -> np.ndarray:
    """Half a unit in the last printed digit of ``x`` written as ``{:.<digits>e}``
    (score.py prints ``{:.5e}``): the resolution of a number read back from text."""
    a = np.abs(np.asarray(x, dtype=np.float64))
    with np.errstate(divide="ignore"):
        e = np.floor(np.log10(np.where(np.isfinite(a) & (a > 0), a, 1.0)))
    return 0.5 * 10.0 ** (e - digits)


def magnitude(kind: Kind, port64, given=None) -> np.ndarray:
    """``m`` of eq. (2) for every element."""
    q = np.asarray(port64, dtype=np.float64)
    if kind.scaling == "abs":
        m = np.ones_like(q)
    elif kind.scaling == "rel":
        m = np.abs(q)
    elif kind.scaling == "terms":
        if given is None:
            raise ValueError(f"kind {kind.name!r} needs the magnitude (number of terms) of each element")
        m = np.broadcast_to(np.asarray(given, dtype=np.float64), q.shape).copy()
    else:
        raise ValueError(f"unknown noise scaling {kind.scaling!r}")
    if given is not None and kind.scaling != "terms":
        m = m * np.broadcast_to(np.asarray(given, dtype=np.float64), q.shape)
    return np.where(np.isfinite(m), m, 0.0)


def _prepare(recorded, port32, port64):
    r = np.asarray(recorded, dtype=np.float64)
    p = np.asarray(port32, dtype=np.float64)
    q = np.asarray(port64, dtype=np.float64)
    if not (r.shape == p.shape == q.shape):
        raise ValueError(f"shapes differ: recorded {r.shape}, port32 {p.shape}, port64 {q.shape}")
    fin32 = np.isfinite(r) & np.isfinite(p)
    q = np.where(np.isfinite(q) | ~fin32, q, p)     # p64 not finite, both float32 finite
    return r, p, q, fin32


def _unit_noise(p, q, m, fin32):
    """|p32 - p64| / m over the elements that may enter a pool."""
    use = fin32 & np.isfinite(q) & (m > 0) & (np.abs(q) >= FLT32_TINY)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.abs(p - q)[use] / m[use]


@dataclass
class Comparison:
    """The verdict on one array (element-wise arrays have the shape of ``recorded``).

    ``err = |r - p64|`` (0 where not finite), ``noise`` (eq. 2), ``allowed`` (eq. 1 right
    side), ``bad`` (over the bound, or a non-finite pattern mismatch), ``pattern_bad``,
    ``sigma`` (the pooled noise per unit magnitude used), ``n_pool`` (its pool's size).
    """

    err: np.ndarray
    noise: np.ndarray
    allowed: np.ndarray
    bad: np.ndarray
    pattern_bad: np.ndarray
    finite: np.ndarray
    sigma: float
    n_pool: int
    kind: Kind

    @property
    def n_bad(self) -> int:
        return int(np.count_nonzero(self.bad))

    @property
    def ok(self) -> bool:
        return self.n_bad == 0

    @property
    def ratio(self) -> np.ndarray:
        """``err / allowed`` (> 1 fails; inf for a pattern mismatch)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(self.allowed > 0, self.err / np.where(self.allowed > 0, self.allowed, 1.0),
                           np.where(self.err > 0, np.inf, 0.0))
        return np.where(self.pattern_bad, np.inf, out)

    def max_err(self) -> Optional[float]:
        return float(self.err[self.finite].max()) if self.finite.any() else None

    def max_noise(self) -> Optional[float]:
        return float(self.noise[self.finite].max()) if self.finite.any() else None

    def max_allowed(self) -> Optional[float]:
        return float(self.allowed[self.finite].max()) if self.finite.any() else None


def judge(recorded, port32, port64, kind: Kind, sigma: float, n_pool: int, magnitude_of=None,
          quantum=None, k: float = K) -> Comparison:
    """Eq. (1)-(2) with a given pooled ``sigma`` (see :func:`compare` and :class:`Pool`).

    ``quantum`` (broadcastable): the recorded value's resolution; default :func:`ulp32` of
    ``max(|r|, |p64|)``.
    """
    r, p, q, fin32 = _prepare(recorded, port32, port64)
    m = magnitude(kind, q, magnitude_of)
    fin = fin32 & np.isfinite(q)
    same_nonfinite = ~fin32 & ((r == p) | (np.isnan(r) & np.isnan(p)))
    pattern_bad = ~fin32 & ~same_nonfinite
    with np.errstate(invalid="ignore"):
        err = np.where(fin, np.abs(r - q), 0.0)
        own = np.where(fin, np.abs(p - q), 0.0)
    noise = np.maximum(own, np.maximum(sigma * m, U32 * m))
    if quantum is None:
        quantum = ulp32(np.maximum(np.where(fin, np.abs(r), 0.0), np.where(fin, np.abs(q), 0.0)))
    allowed = k * noise + np.broadcast_to(np.asarray(quantum, dtype=np.float64), r.shape)
    bad = pattern_bad | (fin & (err > allowed))
    return Comparison(err, noise, allowed, bad, pattern_bad, fin, float(sigma), int(n_pool), kind)


def pooled_sigma(port32, port64, kind: Kind, magnitude_of=None) -> Tuple[float, int]:
    """``(sigma, n)`` of eq. (3) over one array."""
    _, p, q, fin32 = _prepare(port32, port32, port64)
    u = _unit_noise(p, q, magnitude(kind, q, magnitude_of), fin32)
    return (float(np.sqrt(np.mean(u * u))) if u.size else 0.0), int(u.size)


def compare(recorded, port32, port64, kind: Kind, magnitude_of=None, quantum=None,
            sigma: Optional[float] = None, k: float = K) -> Comparison:
    """Judge ``recorded`` against the port's float32 and float64 values of the same quantity.

    The pool of eq. (3) is the array itself (give arrays of at least :data:`POOL_MIN`
    elements, or pass ``sigma`` from a :class:`Pool`).  ``magnitude_of``: the number of
    terms for ``TERMS`` (a factor on ``m`` for the other kinds).  Returns a
    :class:`Comparison`; ``.ok`` is the verdict.
    """
    n = 0
    if sigma is None:
        sigma, n = pooled_sigma(port32, port64, kind, magnitude_of)
    return judge(recorded, port32, port64, kind, sigma, n, magnitude_of, quantum, k)


@dataclass
class Pool:
    """Records of one quantity judged together, with ``sigma`` pooled over all of them.

    For quantities whose records are small (a sentence score, one n-best list's costs):
    :meth:`add` them all, then :meth:`results` judges each with the pool's ``sigma``
    (every record's elements pooled).  ``big_records_alone=True`` judges records of at
    least :data:`POOL_MIN` elements with their own pool (they still join the shared pool).
    """

    kind: Kind
    k: float = K
    big_records_alone: bool = False
    _records: List[tuple] = field(default_factory=list)
    _sum_sq: float = 0.0
    _n: int = 0

    def add(self, where: str, recorded, port32, port64, magnitude_of=None, quantum=None):
        """One record (``magnitude_of``/``quantum`` as in :func:`compare`)."""
        _, p, q, fin32 = _prepare(recorded, port32, port64)
        u = _unit_noise(p, q, magnitude(self.kind, q, magnitude_of), fin32)
        self._sum_sq += float(np.sum(u * u))
        self._n += int(u.size)
        self._records.append((where, np.asarray(recorded), np.asarray(port32), np.asarray(port64),
                              magnitude_of, quantum, u))

    @property
    def sigma(self) -> float:
        return float(np.sqrt(self._sum_sq / self._n)) if self._n else 0.0

    def results(self) -> Iterator[Tuple[str, Comparison]]:
        shared = self.sigma
        for where, r, p, q, m, quantum, u in self._records:
            if self.big_records_alone and u.size >= POOL_MIN:
                sigma, n = float(np.sqrt(np.mean(u * u))), int(u.size)
            else:
                sigma, n = shared, self._n
            yield where, judge(r, p, q, self.kind, sigma, n, m, quantum, self.k)
