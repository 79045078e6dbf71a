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
  :mod:`groundhog_port.harness.tolerance` with the port's float32 and float64 runs from the same
  start, each parameter its own absolute-noise pool;
* continued training (:func:`compare_continued`): after ~10 updates the trajectory is
  chaotic (a float32 rounding difference grows about x10 every three updates) and at update 10014
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

import contextlib
import gzip
import hashlib
import io
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from groundhog_port.harness import tolerance as tol
from groundhog_port.harness.groups.continued import (  # noqa: F401 (the tests' names)
    SCALARS,
    ContinuedVerdict,
    Run,
    compare_continued,
    continue_run,
    judge_against_siblings,
    run_of,
    sibling_perturbations,
    spread,
)
from groundhog_port.training import files

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
            out[name] = ParamVerdict(
                same, float(err.max()), float(bound.max()), bool((err <= bound).all())
            )
        else:
            out[name] = ParamVerdict(same, float(err.max()), 0.0, same)
    return out


# -- 3. the first update -------------------------------------------------------------------
def compare_first_update(recorded, before, port32, port64, probe64=None, n_tokens=1):
    """``{name: tolerance.Comparison}`` of the parameters after one update from ``before``,
    each parameter its own absolute-noise pool, as its gradient in the ``/train_step`` check:
    the start is the same float32 numbers in all three runs, and the step's float32 noise is
    the gradient's (absolute per parameter: sums over the batch's tokens, with cancellation)
    carried through ``sqrt(eps) / sqrt((1 - rho) g**2 + eps) * g`` (for ``|g|`` well above
    ``sqrt(eps / (1 - rho))`` the step saturates and hardly carries it).  The magnitude of
    the pool is the parameter's largest step, so the noise floor is one float32 rounding of
    it (not of 1, the scale of the activations the absolute kind was made for).  ``probe64``:
    the same update on the model's float32 probe (:meth:`~groundhog_port.model.encdec.
    RNNEncoderDecoder.float32_probe`), whose distance from ``port64`` is the noise;
    ``n_tokens``: the batch's target tokens, whose float32 gradient sums the probe does not
    model (the magnitude is scaled by ``sqrt(n_tokens)``, their typical rounding, as in
    :func:`groundhog_port.harness.groups.train_step.judge_quantity`)."""
    out = {}
    for name, r in recorded.items():
        step = np.abs(np.asarray(port64[name], np.float64) - np.asarray(before[name], np.float64))
        m = float(step.max()) * float(np.sqrt(n_tokens)) if step.size else 0.0
        out[name] = tol.compare(
            r,
            port32[name],
            port64[name],
            tol.ABS,
            probe=None if probe64 is None else probe64[name],
            magnitude_of=m,
        )
    return out


# -- 4. continued training: groundhog_port.harness.groups.continued ----------------------------
# -- the two recordings, end to end through the train command ----------------------------
def _train(argv):
    """``groundhog-port train ARGV`` in this process; returns (exit status, its stdout)."""
    from groundhog_port.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["train", *argv])
    return status, out.getvalue()


@dataclass
class NewModelReport:
    """``init_draws`` end to end: the draws (``n_draws`` compared, ``first_bad`` index or None,
    ``rng_state`` equal), the initial model (``initial``: :func:`compare_initial`) and the
    first update (``first_update``: :func:`compare_first_update`), ``stdout`` of the run."""

    n_draws: int
    first_bad: object
    rng_state: bool
    initial: dict
    orthogonal: tuple
    first_update: dict
    stdout: str

    @property
    def ok(self):
        return (
            self.first_bad is None
            and self.rng_state
            and all(v.ok for v in self.initial.values())
            and all(c.ok for c in self.first_update.values())
        )


def recorded_changes(rec, data_dir, prefix):
    """The changes of ``init_draws/train_cmd.sh`` (from its summary), with the corpus in
    ``data_dir`` and the files under ``prefix``."""
    common, case = json.loads((Path(rec) / "rng_log_summary.json").read_text())["changes"]
    return [
        common.replace("/data/legacy/data", str(Path(data_dir).resolve())),
        case.replace("prefix='init_'", f"prefix='{prefix}'"),
    ]


def check_new_model(rec, data_dir, workdir):
    """``train --proto prototype_search_state`` with the recorded changes (one update, as
    recorded) against ``init_draws``: draws, ``init_model0.npz``, ``init_model1.npz``."""
    from groundhog_port.legacy.checkpoint import read_npz_arrays
    from groundhog_port.model.config import ModelConfig
    from groundhog_port.training.init import build_plan, draw
    from legacy_states import load_state

    rec, workdir = Path(rec), Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    status, stdout = _train(
        ["--proto", "prototype_search_state", *recorded_changes(rec, data_dir, f"{workdir}/init_")]
    )
    if status:
        raise RuntimeError(f"train --proto exited with {status}")
    state = load_state(rec / "init_state.pkl")
    cfg = ModelConfig.from_state(state)
    drawn = draw(cfg, state)
    n, bad = compare_draws(drawn.log, read_draw_log(rec / "rng_draws.jsonl.gz"))
    after = json.loads((rec / "rng_log_summary.json").read_text())["rng_state_after_build"]
    _, key, pos, *_ = drawn.rng.get_state()
    same_rng = (
        pos == after["pos"] and hashlib.sha256(key.tobytes()).hexdigest() == after["key_sha256"]
    )
    orth = {
        m.name: m.scale
        for layer in build_plan(cfg, state)
        for m in layer.tensors
        if getattr(m, "fn", "") == "sample_weights_orth"
    }
    rec0, ours0 = (
        read_npz_arrays(rec / "init_model0.npz"),
        read_npz_arrays(workdir / "init_model0.npz"),
    )
    initial = compare_initial(rec0, ours0, drawn.svd_inputs, orth)
    p64 = continue_run(
        workdir / "init_state.pkl",
        workdir / "init_model0.npz",
        None,
        f"prefix='{workdir}/f64_',overwrite=1",
        None,
        0,
        1,
        float64=True,
    ).params
    pp = continue_run(
        workdir / "init_state.pkl",
        workdir / "init_model0.npz",
        None,
        f"prefix='{workdir}/probe_',overwrite=1",
        None,
        0,
        1,
        probe=True,
    ).params
    # at most bs sentences of seqlen words and the end-of-sequence each
    first = compare_first_update(
        read_npz_arrays(rec / "init_model1.npz"),
        rec0,
        read_npz_arrays(workdir / "init_model1.npz"),
        p64,
        pp,
        n_tokens=int(state["bs"]) * (int(state["seqlen"]) + 1),
    )
    return NewModelReport(n, bad, same_rng, initial, tuple(orth), first, stdout)


@dataclass
class ContinuedReport:
    """``continue_search_variant`` end to end: the verdict, the port's and the recorded runs,
    the siblings, the ``train`` run's stdout."""

    verdict: ContinuedVerdict
    port: Run
    recorded: Run
    siblings: list = field(repr=False)
    stdout: str = ""


def check_continued(rec, case, data_dir, workdir, n_siblings=8):
    """GroundHog's command of ``continue_search_variant/cmd.txt`` run by ``train`` (the
    checkpoint copied to the run's prefix, ``reload=True``, the timing file as saved) and
    judged against the recording with ``n_siblings`` sibling runs (module docstring)."""
    from groundhog_port.legacy.checkpoint import read_npz_arrays

    rec, case, workdir = Path(rec), Path(case), Path(workdir)
    run = workdir / "run"
    run.mkdir(parents=True, exist_ok=True)
    model, timing = case / "search_variant_model.npz", case / "search_variant_timing.npz"
    state = case / "search_variant_state.pkl"
    shutil.copy(model, run / model.name)
    shutil.copy(timing, run / timing.name)
    status, stdout = _train(
        [
            "--state",
            str(state),
            "--data-dir",
            str(data_dir),
            f"prefix='{run}/search_variant_',reload=True,hookFreq=-1,loopIters=10030",
        ]
    )
    if status:
        raise RuntimeError(f"train exited with {status}")
    port = run_of(
        files.load_timings(run / timing.name), read_npz_arrays(run / model.name), 10000, 30
    )
    recorded = run_of(
        files.load_timings(rec / "search_variant_after_10030_timing.npz"),
        read_npz_arrays(rec / "search_variant_after_10030_model.npz"),
        10000,
        30,
    )
    scratch = f"prefix='{workdir}/sibling_',reload=True,hookFreq=-1"
    one = [
        continue_run(state, model, timing, scratch, data_dir, 10000, 1, float64=f64)
        for f64 in (False, True)
    ]
    start = {k: np.asarray(v, np.float64) for k, v in read_npz_arrays(model).items()}
    siblings = [
        continue_run(state, model, timing, scratch, data_dir, 10000, 30, perturb=p)
        for p in sibling_perturbations(start, one[0].params, one[1].params, n_siblings)
    ]
    return ContinuedReport(
        compare_continued(recorded, port, siblings), port, recorded, siblings, stdout
    )
