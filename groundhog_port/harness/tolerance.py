"""The derived tolerance model: how far the port's float32 output may be from a recording.

This is the ONE place in code where the parity bounds of floating-point quantities are
defined (``docs/trace_format.md``, section "Tolerances", has the derivation in prose).
Ids, token sequences and masks stay exact (:data:`groundhog_port.harness.trace.TOLERANCES`).

The idea
--------
A recorded value ``r`` is what Theano's float32 code computed.  What is compared with it
is ``p32``, the port's float32 output of the user-facing function (translate's searches,
score, ``SGDAdadelta.step``, the sampler).  Two further runs of the same functions, both
in float64 from the same float32 weights and recorded inputs, set the bound and never
stand in for ``p32``:

* ``p64`` -- the float64 shadow (:meth:`~groundhog_port.model.encdec.RNNEncoderDecoder.float64_shadow`):
  the exact value up to ~1e-16 relative;
* ``probe`` -- the float64 shadow with every weight perturbed by what float32 arithmetic
  does to it (:meth:`~groundhog_port.model.encdec.RNNEncoderDecoder.float32_probe`): backward
  error analysis says a float32 dot product of length ``n`` returns the exact dot product
  of weights perturbed relatively by up to ``n * U32`` (typically ``sqrt(n) * U32``), so
  ``|probe - p64|`` is the size of a float32 implementation's error on THIS model and
  input -- its widths, depths, magnitudes and condition numbers -- computed without the
  float32 output under test.

An element is accepted when::

    |r   - p32| <= 2 K * noise + quantum       the product against the recording  (1)
    |p32 - p64| <=   K * noise + quantum       the product against its own exact value (2)

    noise = max(|probe - p64|,  scale * m,  U32 * m  [, U32 * |p64| * sqrt(n)])        (3)
    scale = max over a pool of |probe - p64| / m      the LARGEST noise per unit m      (4)

Theano and the port are two float32 implementations, each within ``K * noise`` of the exact
value, hence ``2 K`` in (1).  (2) makes a float32 path that departs from its own float64
shadow by more than float32 allows a failure in itself, whatever the recording.  Neither
side of the bound contains ``p32``: no error of the port's float32 path can widen it.

* ``m`` is the element's noise *magnitude* given by the quantity's :class:`Kind`:
  ``ABS`` (m = 1: bounded activations -- annotations, states -- and single ``-log p``
  terms), ``REL`` (m = |p64|: probabilities, attention weights, accumulators), ``TERMS``
  (m = number of float32 terms summed, given by the caller: sentence scores, beam costs).
* ``scale`` pools the probe's noise of many elements with its MAXIMUM, not its RMS: float32
  noise is heavy-tailed (a few ill-conditioned elements sit far out; the pooled RMS of the
  previous model under-estimated them at dim 256), so every element gets at least the
  largest noise per unit magnitude seen in its pool, and its own probe noise if larger.
  The pool is the compared array itself when it has at least :data:`POOL_MIN` elements,
  otherwise every element of the quantity in the run (:class:`Pool`).  Elements below
  float32's normal range stay out of a pool (fixed absolute spacing: ``quantum``).
* ``U32 = 2**-24`` per unit magnitude is a floor; a running float32 sum of ``n`` terms also
  gets ``U32 * |p64| * sqrt(n)`` (:func:`sum_floor`).
* ``quantum`` is the resolution of the values: one float32 spacing (:func:`ulp32`), or the
  printed precision of a number read from text (:func:`printed_quantum`).
* ``K`` (:data:`K`) is fixed; the evidence is in ``docs/trace_format.md``
  (``tools/tolerance_evidence.py``): Theano's own self-differences (the same hypothesis in
  two beam runs, single vs padded scores, run-to-run repeats) and ``|r - p64|``,
  ``|p32 - p64|`` on every shared case, in units of ``noise``.

Non-finite values (``nan``, ``+inf``, ``-inf``: underflowed probabilities, masked words)
are compared as a pattern between ``r`` and ``p32``; where ``p64`` is not finite but both
float32 values are, ``p32`` stands in for it (and the element is judged by (1) alone).

API::

    from groundhog_port import tolerance as tol
    res = tol.compare(recorded, port32, port64, tol.REL, probe=probe64)   # big arrays
    res.ok, res.n_bad, res.err, res.allowed, res.noise, res.ratio
    pool = tol.Pool(tol.TERMS)                                            # small records
    pool.add("pairs/3/score", recorded, port32, port64, probe=probe64, magnitude_of=n_words)
    for where, res in pool.results(): ...
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import numpy as np
from numpy.typing import ArrayLike

#: the multiple of the float32 noise one float32 implementation may be off the exact value
#: by (see the module docstring and docs/trace_format.md for the evidence)
K = 8.0
#: float32 unit roundoff
U32 = 2.0**-24
#: smallest normal float32; below it float32 keeps a fixed spacing of 2**-149
FLT32_TINY = float(np.finfo(np.float32).tiny)
#: an array with at least this many pooled elements is its own pool
POOL_MIN = 64


@dataclass(frozen=True)
class Kind:
    """How the float32 noise of a quantity scales with the element (the ``m`` of eq. (3)).

    ``scaling``: ``"abs"`` (m = 1), ``"rel"`` (m = |p64|), ``"terms"`` (m given by the
    caller: the number of float32 terms summed into the value).
    """

    name: str
    scaling: str
    note: str = ""


ABS = Kind(
    "abs",
    "abs",
    "noise independent of the value: bounded activations (annotations, "
    "states), single -log p terms (absolute error of the logits)",
)
REL = Kind(
    "rel",
    "rel",
    "noise proportional to the value: probabilities and attention weights "
    "(relative error = absolute error of the logits/energies)",
)
TERMS = Kind(
    "terms",
    "terms",
    "noise proportional to the number of float32 terms summed: "
    "sentence scores, beam costs (magnitude = number of words)",
)
KINDS = {k.name: k for k in (ABS, REL, TERMS)}


def ulp32(x: ArrayLike) -> np.ndarray:
    """The float32 spacing at ``|x|`` (``2**-149`` below the normal range; 0 for non-finite)."""
    a = np.abs(np.asarray(x, dtype=np.float64))
    fin = np.isfinite(a)
    a32 = np.where(fin, np.minimum(a, float(np.finfo(np.float32).max)), 0.0).astype(np.float32)
    return np.where(fin, np.spacing(a32).astype(np.float64), 0.0)


def printed_quantum(x: ArrayLike, digits: int = 5) -> np.ndarray:
    """Half a unit in the last printed digit of ``x`` written as ``{:.<digits>e}``
    (score.py prints ``{:.5e}``): the resolution of a number read back from text."""
    a = np.abs(np.asarray(x, dtype=np.float64))
    with np.errstate(divide="ignore"):
        e = np.floor(np.log10(np.where(np.isfinite(a) & (a > 0), a, 1.0)))
    return 0.5 * 10.0 ** (e - digits)


def cost_quantum(cost: ArrayLike, prob: ArrayLike) -> np.ndarray:
    """Resolution of a ``-log p`` (+ a float64 prefix) whose ``p`` was a float32: two
    float32 spacings at the cost, plus ``2 ulp32(p) / p``, the cost step of the two roundings
    of ``p`` (2.4e-7 for a normal ``p``; 2.8 % at the subnormal ``p = 1e-43``, whose fixed
    spacing 2**-149 makes the costs of two correct float32 computations differ by ~1e-3).
    ``prob`` must not be the output under test (give the recorded or the float64 one)."""
    p = np.abs(np.asarray(prob, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        step = np.where(p > 0, ulp32(p) / np.where(p > 0, p, 1.0), 0.0)
    return 2 * (ulp32(cost) + step)


def magnitude(kind: Kind, port64: ArrayLike, given: ArrayLike | None = None) -> np.ndarray:
    """``m`` of eq. (3) for every element."""
    q = np.asarray(port64, dtype=np.float64)
    if kind.scaling == "abs":
        m = np.ones_like(q)
    elif kind.scaling == "rel":
        m = np.abs(q)
    elif kind.scaling == "terms":
        if given is None:
            raise ValueError(
                f"kind {kind.name!r} needs the magnitude (number of terms) of each element"
            )
        m = np.broadcast_to(np.asarray(given, dtype=np.float64), q.shape).copy()
    else:
        raise ValueError(f"unknown noise scaling {kind.scaling!r}")
    if given is not None and kind.scaling != "terms":
        m = m * np.broadcast_to(np.asarray(given, dtype=np.float64), q.shape)
    return np.where(np.isfinite(m), m, 0.0)


def sum_floor(value: ArrayLike, n_terms: ArrayLike) -> np.ndarray:
    """``U32 * |value| * sqrt(n_terms)``: every addition of a float32 running sum rounds by
    up to half a spacing of the partial sum, independently, so ``n`` additions add
    ~``sqrt(n)`` of them -- noise a sum carries whatever the probe's weights do."""
    return (
        U32
        * np.abs(np.asarray(value, dtype=np.float64))
        * np.sqrt(np.asarray(n_terms, dtype=np.float64))
    )


def _prepare(recorded, port32, port64, probe):
    r = np.asarray(recorded, dtype=np.float64)
    p = np.asarray(port32, dtype=np.float64)
    q = np.asarray(port64, dtype=np.float64)
    d = q if probe is None else np.asarray(probe, dtype=np.float64)
    if not (r.shape == p.shape == q.shape == d.shape):
        raise ValueError(
            f"shapes differ: recorded {r.shape}, port32 {p.shape}, port64 {q.shape}, "
            f"probe {d.shape}"
        )
    fin32 = np.isfinite(r) & np.isfinite(p)
    exact_ok = np.isfinite(q)
    q = np.where(exact_ok | ~fin32, q, p)  # p64 not finite, both float32 finite
    d = np.where(np.isfinite(d), d, q)
    return r, p, q, d, fin32, exact_ok


def _unit_noise(q, d, m, fin32, poolable=None):
    """|probe - p64| / m over the elements that may enter a pool."""
    use = fin32 & np.isfinite(q) & (m > 0) & (np.abs(q) >= FLT32_TINY)
    if poolable is not None:
        use &= np.broadcast_to(np.asarray(poolable, dtype=bool), use.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.abs(d - q)[use] / m[use]


@dataclass
class Comparison:
    """The verdict on one array (element-wise arrays have the shape of ``recorded``).

    ``err = |r - p32|`` (the product against the recording; 0 where not finite), ``own =
    |p32 - p64|`` (the product against its exact value), ``theano = |r - p64|``,
    ``noise`` (eq. 3), ``allowed`` (eq. 1 right side), ``own_allowed`` (eq. 2), ``bad``
    (over either bound, or a non-finite pattern mismatch), ``own_bad`` (over eq. 2),
    ``scale`` (the pool's largest noise per unit magnitude), ``n_pool`` (its size).
    """

    err: np.ndarray
    own: np.ndarray
    theano: np.ndarray
    noise: np.ndarray
    quantum: np.ndarray
    bad: np.ndarray
    own_bad: np.ndarray
    pattern_bad: np.ndarray
    finite: np.ndarray
    scale: float
    n_pool: int
    kind: Kind
    k: float = K
    recorded: np.ndarray | None = None
    port32: np.ndarray | None = None

    @property
    def allowed(self) -> np.ndarray:
        return 2 * self.k * self.noise + self.quantum

    @property
    def own_allowed(self) -> np.ndarray:
        return self.k * self.noise + self.quantum

    @property
    def n_bad(self) -> int:
        return int(np.count_nonzero(self.bad))

    @property
    def ok(self) -> bool:
        return self.n_bad == 0

    @property
    def ratio(self) -> np.ndarray:
        """``max(err / allowed, own / own_allowed)`` (> 1 fails; inf for a pattern mismatch)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            a = np.where(
                self.allowed > 0,
                self.err / np.where(self.allowed > 0, self.allowed, 1.0),
                np.where(self.err > 0, np.inf, 0.0),
            )
            b = np.where(
                self.own_allowed > 0,
                self.own / np.where(self.own_allowed > 0, self.own_allowed, 1.0),
                np.where(self.own > 0, np.inf, 0.0),
            )
        return np.where(self.pattern_bad, np.inf, np.maximum(a, b))

    def units(self) -> float | None:
        """``max((max(|r - p64|, |p32 - p64|) - quantum) / noise)`` over the finite elements:
        the smallest ``K`` one float32 implementation needed here (the evidence for :data:`K`)."""
        if not self.finite.any():
            return None
        with np.errstate(divide="ignore", invalid="ignore"):
            u = np.where(
                self.finite & (self.noise > 0),
                (np.maximum(self.own, self.theano) - self.quantum) / self.noise,
                0.0,
            )
        return float(max(0.0, u.max()))

    def max_err(self) -> float | None:
        return float(self.err[self.finite].max()) if self.finite.any() else None

    def max_allowed(self) -> float | None:
        return float(self.allowed[self.finite].max()) if self.finite.any() else None


def judge(
    recorded: ArrayLike,
    port32: ArrayLike,
    port64: ArrayLike,
    kind: Kind,
    scale: float,
    n_pool: int,
    probe: ArrayLike | None = None,
    magnitude_of: ArrayLike | None = None,
    quantum: ArrayLike | None = None,
    k: float = K,
    n_terms: ArrayLike | None = None,
) -> Comparison:
    """Eq. (1)-(3) with a given pooled ``scale`` (see :func:`compare` and :class:`Pool`).

    ``quantum`` (broadcastable): the values' resolution; default two :func:`ulp32` of
    ``max(|r|, |p32|, |p64|)``.  ``n_terms``: the value is a running float32 sum of that
    many terms (:func:`sum_floor`).
    """
    r, p, q, d, fin32, exact_ok = _prepare(recorded, port32, port64, probe)
    m = magnitude(kind, q, magnitude_of)
    fin = fin32 & np.isfinite(q)
    same_nonfinite = ~fin32 & ((r == p) | (np.isnan(r) & np.isnan(p)))
    pattern_bad = ~fin32 & ~same_nonfinite
    with np.errstate(invalid="ignore"):
        err = np.where(fin, np.abs(r - p), 0.0)
        own = np.where(fin & exact_ok, np.abs(p - q), 0.0)
        theano = np.where(fin & exact_ok, np.abs(r - q), 0.0)
        probe_noise = np.where(fin, np.abs(d - q), 0.0)
    noise = np.maximum(probe_noise, np.maximum(scale * m, U32 * m))
    if n_terms is not None:
        noise = np.maximum(noise, sum_floor(np.where(fin, q, 0.0), n_terms))
    if quantum is None:
        # the float32 values' own resolution: up to two roundings in the last operation (a
        # subnormal softmax output is rounded by exp and again by the division)
        big = np.maximum(np.maximum(np.abs(r), np.abs(p)), np.abs(q))
        quantum = 2 * ulp32(np.where(fin, big, 0.0))
    quantum = np.broadcast_to(np.asarray(quantum, dtype=np.float64), r.shape)
    own_bad = fin & (own > k * noise + quantum)
    bad = pattern_bad | (fin & (err > 2 * k * noise + quantum)) | own_bad
    return Comparison(
        err,
        own,
        theano,
        noise,
        quantum,
        bad,
        own_bad,
        pattern_bad,
        fin,
        float(scale),
        int(n_pool),
        kind,
        k,
        r,
        p,
    )


def pooled_scale(
    port64: ArrayLike,
    kind: Kind,
    probe: ArrayLike | None = None,
    magnitude_of: ArrayLike | None = None,
    poolable: ArrayLike | None = None,
) -> tuple[float, int]:
    """``(scale, n)`` of eq. (4) over one array: the largest ``|probe - p64| / m``
    (``poolable``: a mask of the elements whose noise is representative)."""
    q = np.asarray(port64, dtype=np.float64)
    d = q if probe is None else np.asarray(probe, dtype=np.float64)
    fin = np.isfinite(q) & np.isfinite(d)
    u = _unit_noise(q, d, magnitude(kind, q, magnitude_of), fin, poolable)
    return (float(u.max()) if u.size else 0.0), int(u.size)


def compare(
    recorded: ArrayLike,
    port32: ArrayLike,
    port64: ArrayLike,
    kind: Kind,
    probe: ArrayLike | None = None,
    magnitude_of: ArrayLike | None = None,
    quantum: ArrayLike | None = None,
    scale: float | None = None,
    k: float = K,
    poolable: ArrayLike | None = None,
    n_terms: ArrayLike | None = None,
) -> Comparison:
    """Judge the product's ``port32`` against ``recorded`` (eq. 1) and against its float64
    shadow ``port64`` (eq. 2), with the noise of the float64 ``probe`` (eq. 3).

    The pool of eq. (4) is the array itself (give arrays of at least :data:`POOL_MIN`
    elements, or pass ``scale`` from a :class:`Pool`).  ``probe`` None: no probe run (the
    floors of eq. 3 alone, for values computed by a few element-wise float32 operations).
    """
    n = 0
    if scale is None:
        scale, n = pooled_scale(port64, kind, probe, magnitude_of, poolable)
    return judge(recorded, port32, port64, kind, scale, n, probe, magnitude_of, quantum, k, n_terms)


#: what names a record of a :class:`Pool` (a dataset path, or ``(update, value name)``)
_Where = TypeVar("_Where", bound=Hashable)


@dataclass
class Pool(Generic[_Where]):
    """Records of one quantity judged together, with ``scale`` pooled over all of them.

    For quantities whose records are small (a sentence score, one n-best list's costs):
    :meth:`add` them all, then :meth:`results` judges each with the pool's ``scale``.
    """

    kind: Kind
    k: float = K
    _records: list[tuple] = field(default_factory=list)
    _scale: float = 0.0
    _n: int = 0

    def add(
        self,
        where: _Where,
        recorded: ArrayLike,
        port32: ArrayLike,
        port64: ArrayLike,
        probe: ArrayLike | None = None,
        magnitude_of: ArrayLike | None = None,
        quantum: ArrayLike | None = None,
        poolable: ArrayLike | None = None,
        n_terms: ArrayLike | None = None,
    ) -> None:
        """One record (arguments as in :func:`compare`)."""
        _, p, q, d, fin32, _ = _prepare(recorded, port32, port64, probe)
        u = _unit_noise(q, d, magnitude(self.kind, q, magnitude_of), fin32, poolable)
        if u.size:
            self._scale = max(self._scale, float(u.max()))
        self._n += int(u.size)
        self._records.append(
            (
                where,
                np.asarray(recorded),
                np.asarray(port32),
                np.asarray(port64),
                None if probe is None else np.asarray(probe),
                magnitude_of,
                quantum,
                n_terms,
            )
        )

    def __len__(self) -> int:
        return len(self._records)

    @property
    def scale(self) -> float:
        return self._scale

    def results(self) -> Iterator[tuple[_Where, Comparison]]:
        for where, r, p, q, d, m, quantum, n_terms in self._records:
            yield (
                where,
                judge(r, p, q, self.kind, self._scale, self._n, d, m, quantum, self.k, n_terms),
            )
