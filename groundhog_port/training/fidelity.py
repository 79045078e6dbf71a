"""Does the port train as GroundHog trained?  Its runs against GroundHog's recorded ones.

Two recordings of the original ``train.py`` (docs/training.md, "Reproduced draw for draw"):

``init_draws/``
    a new ``prototype_search_state`` model: every call on the build's ``RandomState``
    (``rng_draws.jsonl.gz``), the model before the first update (``init_model0.npz``) and
    after it (``init_model1.npz``).
``continue_search_variant/``
    the trained ``search_variant`` checkpoint continued for 30 updates: the per-update
    values (``*_timing.npz``) and the model after update 10030.

What is judged, and against what:

* the draws (:func:`compare_draws`): method, arguments, layer and the SHA-256 of every
  output, call for call -- numpy's ``RandomState`` streams are deterministic;
* the initial model (:func:`compare_initial`): bit for bit, except the orthogonal
  matrices, which are ``fl32(U)`` of a double-precision LAPACK SVD: within
  :func:`svd_bound` (one float32 spacing plus the double SVD's own error
  ``n * eps64 * s_1 / gap_i``, Wedin's bound for a backward-stable SVD);
* the first update (:func:`compare_first_update`): the derived float32-noise bound of
  :mod:`groundhog_port.tolerance` with the port's float32 and float64 runs from the same
  start; the noise of an updated parameter scales with its step ``|p64 - p_before|``;
* continued training (:func:`compare_continued`): after ~10 updates the trajectory is
  chaotic (a float32 rounding difference grows x10 every 2-3 updates) and at update 10014
  the float32 run overflows (gradient norm NaN, then ``-log 0 = inf`` costs) where a float64
  run does not, so the float64 shadow stops being the exact value of the computation.
  The noise of each value is therefore measured along the float32 trajectory itself: eight
  *sibling* runs of the port start from the checkpoint moved by one update's float32
  rounding noise (``|p32 - p64|`` after the first update, at least one float32 spacing,
  random signs, :func:`sibling_perturbations`); their RMS distance from the port's run at
  update k is how far two float32 implementations that differ by one update's rounding are
  apart k updates later.  GroundHog differs from the port by that much at every update, so
  its distance is a sum of such terms, dominated by the earliest (the growth is
  exponential); the tolerance model's ``K`` multiple covers the rest.  The non-finite
  pattern (inf costs, NaN norms) must be the same; the batches (``next_offset``, ``step``)
  are compared exactly.
"""
import gzip
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .. import tolerance as tol
from ..loading import open_experiment
from . import files
from .adadelta import trainable_params
from .loop import MainLoop, new_timings

#: the per-update values ``SGD_adadelta`` returns that depend on the parameters
SCALARS = ("cost", "grad_norm", "log2_p_word", "log2_p_expl")
EPS64 = float(np.finfo(np.float64).eps)


# -- 1. the draws --------------------------------------------------------------------------
def read_draw_log(path):
    """GroundHog's recorded draws as ``(method, args, kwargs, layer, sha256)`` tuples (the
    fields of :class:`groundhog_port.training.init.Draws`).  Lines of method ``shuffle`` are
    left out: numpy's ``permutation()`` calls ``self.shuffle`` internally, which the
    recorder's ``RandomState`` subclass saw as a call of its own."""
    out = []
    with gzip.open(path, "rt") as f:
        for line in f:
            r = json.loads(line)
            if r["method"] != "shuffle":
                out.append((r["method"], tuple(r["args"]), r["kwargs"], r["layer"], r["sha256"]))
    return out


def compare_draws(ours, recorded):
    """``(number of calls compared, index of the first difference or None)``."""
    for i, (a, b) in enumerate(zip(ours, recorded)):
        if a != b:
            return i, i
    n = min(len(ours), len(recorded))
    return n, (None if len(ours) == len(recorded) else n)


# -- 2. the initial model ------------------------------------------------------------------
def svd_bound(values, scale, u):
    """Per-element bound on ``|port - recorded|`` of ``u * scale`` with ``u`` of
    ``numpy.linalg.svd(values)`` (``sample_weights_orth``).

    numpy computes the SVD of a float32 matrix in double and rounds ``U`` to float32, so two
    LAPACK builds give ``fl32(U)`` and ``fl32(U')`` with ``|U - U'|`` in column ``i`` at most
    ``n * eps64 * s_1 / gap_i`` (a backward-stable SVD of ``A + E``, ``|E| <= n eps64 |A|``;
    a singular vector moves by ``|E| / gap_i``, Wedin), and each rounding adds at most one
    float32 spacing.  A LAPACK with another sign convention could flip a whole column; that
    is outside the bound (it is another model) and would be reported, not absorbed."""
    a = np.asarray(values, dtype=np.float64)
    s = np.linalg.svd(a, compute_uv=False)
    gaps = np.full(s.shape, np.inf)
    gaps[1:] = np.minimum(gaps[1:], s[:-1] - s[1:])
    gaps[:-1] = np.minimum(gaps[:-1], s[:-1] - s[1:])
    with np.errstate(divide="ignore"):
        drift = a.shape[0] * EPS64 * s[0] / gaps * abs(scale)
    return tol.ulp32(u) + drift[None, :]


@dataclass
class ParamVerdict:
    """One parameter of the initial model: bit-identical, max error, its bound (0: exact)."""
    identical: bool
    max_err: float
    bound: float
    ok: bool


def compare_initial(recorded, ours, svd_inputs, scales):
    """``{name: ParamVerdict}`` over the recorded parameters; ``svd_inputs``/``scales``: the
    drawn matrix and scale of each orthogonal parameter (exactness for all the others)."""
    out = {}
    for name, r in recorded.items():
        p = ours.get(name)
        if p is None or p.shape != r.shape:
            out[name] = ParamVerdict(False, float("inf"), 0.0, False)
            continue
        err = np.abs(r.astype(np.float64) - p.astype(np.float64))
        same = bool(np.array_equal(r, p) and r.dtype == p.dtype)
        if name in svd_inputs:
            bound = svd_bound(svd_inputs[name], scales[name], np.maximum(np.abs(r), np.abs(p)))
            out[name] = ParamVerdict(same, float(err.max()), float(bound.max()), bool((err <= bound).all()))
        else:
            out[name] = ParamVerdict(same, float(err.max()), 0.0, same)
    return out


# -- 3. the first update -------------------------------------------------------------------
def compare_first_update(recorded, before, port32, port64):
    """``{name: tolerance.Comparison}`` of the parameters after one update; an element's noise
    is measured relative to its step ``|p64 - before|`` (the parameters before are the same
    float32 numbers in all three runs)."""
    out = {}
    for name, r in recorded.items():
        step = np.abs(np.asarray(port64[name], np.float64) - np.asarray(before[name], np.float64))
        out[name] = tol.compare(r, port32[name], port64[name], tol.ABS, magnitude_of=step)
    return out


# -- 4. continued training -----------------------------------------------------------------
@dataclass
class Run:
    """A training run's per-update ``values`` (``SCALARS``, float64), the iterator's
    ``next_offset`` and ``step`` after it, and the final ``params`` (float64)."""
    values: dict
    next_offset: int
    step: int
    params: dict = field(repr=False)


def continue_run(state_path, model_path, timing_path, changes, data_dir, first, updates,
                 perturb=None, float64=False):
    """Train a checkpoint as ``train`` does (:class:`~groundhog_port.training.loop.MainLoop`,
    the state's ``prefix`` in ``changes`` naming scratch files) for ``updates`` updates after
    update ``first`` (``timing_path`` None: a new run's timings); ``perturb``: ``{name:
    array}`` added to the parameters first; ``float64``: on the model's float64 shadow."""
    exp = open_experiment(state_path, model_path, f"{changes},loopIters={first + updates}",
                          data_dir=data_dir)
    timings = new_timings(exp.state) if timing_path is None else files.load_timings(timing_path)
    model = exp.model.float64_shadow() if float64 else exp.model
    if perturb is not None:
        with torch.no_grad():
            for name, p in trainable_params(model):
                p.add_(torch.as_tensor(perturb[name], dtype=p.dtype))
    loop = MainLoop(model, dict(exp.state), timings, exp.path("source"), exp.path("target"),
                    out=io.StringIO())
    loop.run()
    return run_of(loop.timings, {n: p.detach().cpu().numpy() for n, p in trainable_params(model)},
                  first, updates)


def run_of(timings, params, first, updates):
    """A :class:`Run` from a timing dict and parameters (a run's files or memory)."""
    span = slice(first, first + updates)
    return Run({k: np.asarray(timings[k][span], np.float64) for k in SCALARS},
               int(timings["next_offset"]), int(timings["step"]),
               {n: np.asarray(a, np.float64) for n, a in params.items()})


def sibling_perturbations(start, after32, after64, n, seed=0):
    """``n`` perturbations of the start parameters by one update's float32 rounding noise:
    ``max(|p32 - p64| after one update, one float32 spacing)`` with random signs."""
    g = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        out.append({k: (g.choice([-1.0, 1.0], size=np.shape(a))
                        * np.maximum(np.abs(after32[k] - after64[k]), tol.ulp32(a))).astype(np.float32)
                    for k, a in start.items()})
    return out


def spread(port, siblings):
    """``(rms, unstable)``: the RMS distance of the siblings from the port's values where
    both are finite, and where a sibling's finiteness differs from the port's (a branch that
    a rounding difference flips)."""
    port = np.asarray(port, np.float64)
    sq, unstable = np.zeros(port.shape), np.zeros(port.shape, bool)
    for s in siblings:
        s = np.asarray(s, np.float64)
        both = np.isfinite(s) & np.isfinite(port)
        with np.errstate(invalid="ignore"):
            sq += np.where(both, (s - port) ** 2, 0.0)
        unstable |= np.isfinite(s) != np.isfinite(port)
    return np.sqrt(sq / len(siblings)), unstable


def judge_against_siblings(recorded, port, siblings, kind):
    """The tolerance model with the siblings' spread as the noise: ``compare(recorded,
    port + spread, port)`` (``port`` plays the reference, ``port + spread`` the float32 run
    whose distance from it is the noise); branch-unstable elements are left out.  Returns
    ``(Comparison, number left out)``."""
    port = np.asarray(port, np.float64)
    rms, unstable = spread(port, siblings)
    keep = ~unstable
    cmp = tol.compare(np.asarray(recorded, np.float64)[keep], (port + rms)[keep], port[keep], kind)
    return cmp, int(unstable.sum())


@dataclass
class ContinuedVerdict:
    """``updates``: ``{(update index, value name): Comparison}`` of the per-update values
    (pooled per update); ``model``: ``{name: Comparison}`` of the final parameters;
    ``same_batches``: ``next_offset`` and ``step`` equal; ``unstable``: values left out
    because a sibling's finiteness differs from the port's."""
    updates: dict
    model: dict
    same_batches: bool
    unstable: int

    @property
    def ok(self):
        return (self.same_batches and all(c.ok for c in self.updates.values())
                and all(c.ok for c in self.model.values()))

    def worst(self):
        """``(units, where)`` of the value closest to its bound (``Comparison.units()``)."""
        rows = [(c.units() or 0.0, f"{k} of update {i}") for (i, k), c in self.updates.items()]
        rows += [(c.units() or 0.0, k) for k, c in self.model.items()]
        return max(rows)


def compare_continued(recorded, port, siblings):
    """Judge a recorded :class:`Run` against the port's and its siblings' (module docstring)."""
    updates, unstable = {}, 0
    for i in range(len(port.values["cost"])):
        pool = tol.Pool(tol.REL)
        for k in SCALARS:
            p = port.values[k][i:i + 1]
            rms, bad = spread(p, [sib.values[k][i:i + 1] for sib in siblings])
            if bad.any():
                unstable += 1
                continue
            pool.add((i, k), recorded.values[k][i:i + 1], p + rms, p)
        updates.update(pool.results())
    model = {}
    for name, r in recorded.params.items():
        model[name], bad = judge_against_siblings(r, port.params[name],
                                                  [sib.params[name] for sib in siblings], tol.ABS)
        unstable += bad
    same = (recorded.next_offset, recorded.step) == (port.next_offset, port.step)
    return ContinuedVerdict(updates, model, same, unstable)
