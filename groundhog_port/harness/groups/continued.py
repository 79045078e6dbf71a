"""Continued training against GroundHog's recording of it (``parity --case``, group ``continued``).

``continue_<case>/`` (``docs/recordings.md``, "Training recordings") holds what GroundHog's
``train.py`` printed and saved when it continued the case's checkpoint for a number of
updates: the per-update values (``*_timing.npz``) and the parameters after the last update.
Adadelta's accumulators (``gnorm2``, ``dnorm2``) are carried from one update to the next and
never saved, so only a run of several updates shows them: one update cannot tell
accumulators reset between updates from carried ones.

After ~10 updates the trajectory is chaotic (a float32 rounding difference grows about x10
every three updates) and the float32 run overflows where a float64 run does not, so the
float64 shadow stops being the exact value of the computation.  The noise of each value is
measured along the float32 trajectory itself (``docs/training.md``, "Continued training"):
sibling runs of the port start from the checkpoint moved by one update's float32 rounding
noise (``|p32 - p64|`` after the first update, at least one float32 spacing, random signs);
their RMS distance from the port's run at update k plays the probe of the tolerance model,
``compare(recorded, port, port, probe=port + spread)`` (kinds ``rel`` per update over its
four values, ``abs`` per parameter).  The non-finite pattern must be the same; the batches
(``next_offset``, ``step``) are compared exactly.

:func:`check_continued` runs it for ``groundhog-port parity`` (rows ``continued/...``); the
test suite's end-to-end check (``parity_tests/support/train_fidelity.py``) runs the
``train`` command instead and judges it with the same functions.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from numpy.typing import ArrayLike

from ...legacy.loading import open_experiment
from ...training import files
from ...training.adadelta import trainable_params
from ...training.loop import MainLoop, new_timings
from .. import tolerance as tol
from ..report import Row, Rows, account, compare_exact
from ..trace import Tolerance

#: the per-update values ``SGD_adadelta`` returns that depend on the parameters
SCALARS = ("cost", "grad_norm", "log2_p_word", "log2_p_expl")
#: the recording of case ``X``'s continued training, beside the case or in pending_traces
RECORDING = "continue_{case}"


@dataclass
class Run:
    """A training run's per-update ``values`` (``SCALARS``, float64), the iterator's
    ``next_offset`` and ``step`` after it, and the final ``params`` (float64)."""

    values: dict
    next_offset: int
    step: int
    params: dict = field(repr=False)


def continue_run(
    state_path: str | os.PathLike[str],
    model_path: str | os.PathLike[str],
    timing_path: str | os.PathLike[str] | None,
    changes: str,
    data_dir: Sequence[str | os.PathLike[str]],
    first: int,
    updates: int,
    perturb: Mapping[str, np.ndarray] | None = None,
    float64: bool = False,
    probe: bool = False,
) -> Run:
    """Train a checkpoint as ``train`` does (:class:`~groundhog_port.training.loop.MainLoop`,
    the state's ``prefix`` in ``changes`` naming scratch files) for ``updates`` updates after
    update ``first`` (``timing_path`` None: a new run's timings); ``perturb``: ``{name:
    array}`` added to the parameters first; ``float64``: on the model's float64 shadow; ``probe``:
    on its float32 probe (:meth:`~groundhog_port.model.encdec.RNNEncoderDecoder.float32_probe`)."""
    exp = open_experiment(
        state_path, model_path, f"{changes},loopIters={first + updates}", data_dir=data_dir
    )
    timings = new_timings(exp.state) if timing_path is None else files.load_timings(timing_path)
    model = (
        exp.model.float32_probe(backward=True)
        if probe
        else exp.model.float64_shadow()
        if float64
        else exp.model
    )
    if perturb is not None:
        with torch.no_grad():
            for name, p in trainable_params(model):
                p.add_(torch.as_tensor(perturb[name], dtype=p.dtype))
    loop = MainLoop(
        model, dict(exp.state), timings, exp.path("source"), exp.path("target"), out=io.StringIO()
    )
    loop.run()
    return run_of(
        loop.timings,
        {n: p.detach().cpu().numpy() for n, p in trainable_params(model)},
        first,
        updates,
    )


def run_of(
    timings: Mapping[str, np.ndarray],
    params: Mapping[str, np.ndarray],
    first: int,
    updates: int,
) -> Run:
    """A :class:`Run` from a timing dict and parameters (a run's files or memory)."""
    span = slice(first, first + updates)
    return Run(
        {k: np.asarray(timings[k][span], np.float64) for k in SCALARS},
        int(timings["next_offset"]),
        int(timings["step"]),
        {n: np.asarray(a, np.float64) for n, a in params.items()},
    )


def sibling_perturbations(
    start: Mapping[str, np.ndarray],
    after32: Mapping[str, np.ndarray],
    after64: Mapping[str, np.ndarray],
    n: int,
    seed: int = 0,
) -> list[dict[str, np.ndarray]]:
    """``n`` perturbations of the start parameters by one update's float32 rounding noise:
    ``max(|p32 - p64| after one update, one float32 spacing)`` with random signs."""
    g = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        out.append(
            {
                k: (
                    g.choice([-1.0, 1.0], size=np.shape(a))
                    * np.maximum(np.abs(after32[k] - after64[k]), tol.ulp32(a))
                ).astype(np.float32)
                for k, a in start.items()
            }
        )
    return out


def spread(port: ArrayLike, siblings: Sequence[ArrayLike]) -> tuple[np.ndarray, np.ndarray]:
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


def judge_against_siblings(
    recorded: ArrayLike, port: ArrayLike, siblings: Sequence[ArrayLike], kind: tol.Kind
) -> tuple[tol.Comparison, int]:
    """The tolerance model with the siblings' spread as the noise: ``compare(recorded,
    port + spread, port)`` (``port`` plays the reference, ``port + spread`` the float32 run
    whose distance from it is the noise); branch-unstable elements are left out.  Returns
    ``(Comparison, number left out)``."""
    port = np.asarray(port, np.float64)
    rms, unstable = spread(port, siblings)
    keep = ~unstable
    cmp = tol.compare(
        np.asarray(recorded, np.float64)[keep],
        port[keep],
        port[keep],
        kind,
        probe=(port + rms)[keep],
    )
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
    def ok(self) -> bool:
        return (
            self.same_batches
            and all(c.ok for c in self.updates.values())
            and all(c.ok for c in self.model.values())
        )

    def worst(self) -> tuple[float, str]:
        """``(units, where)`` of the value closest to its bound (``Comparison.units()``)."""
        rows = [(c.units() or 0.0, f"{k} of update {i}") for (i, k), c in self.updates.items()]
        rows += [(c.units() or 0.0, k) for k, c in self.model.items()]
        return max(rows)


def compare_continued(recorded: Run, port: Run, siblings: Sequence[Run]) -> ContinuedVerdict:
    """Judge a recorded :class:`Run` against the port's and its siblings' (module docstring)."""
    updates: dict[tuple[int, str], tol.Comparison] = {}
    unstable = 0
    for i in range(len(port.values["cost"])):
        pool: tol.Pool[tuple[int, str]] = tol.Pool(tol.REL)
        for k in SCALARS:
            p = port.values[k][i : i + 1]
            rms, bad = spread(p, [sib.values[k][i : i + 1] for sib in siblings])
            if bad.any():
                unstable += 1
                continue
            pool.add((i, k), recorded.values[k][i : i + 1], p, p, probe=p + rms)
        updates.update(pool.results())
    model = {}
    for name, r in recorded.params.items():
        model[name], left_out = judge_against_siblings(
            r, port.params[name], [sib.params[name] for sib in siblings], tol.ABS
        )
        unstable += left_out
    same = (recorded.next_offset, recorded.step) == (port.next_offset, port.step)
    return ContinuedVerdict(updates, model, same, unstable)


# --------------------------------------------------------------------------------------
# parity rows
# --------------------------------------------------------------------------------------
def recording_dir(case_dir: str | os.PathLike[str]) -> Path | None:
    """``continue_<case>`` beside the case folder, else in ``../pending_traces/``."""
    case_dir = Path(case_dir)
    name = RECORDING.format(case=case_dir.name)
    for cand in (case_dir.parent / name, case_dir.parent.parent / "pending_traces" / name):
        if cand.is_dir():
            return cand
    return None


def _one(pattern, folder) -> Path:
    found = sorted(Path(folder).glob(pattern))
    if len(found) != 1:
        raise FileNotFoundError(f"expected one {pattern} in {folder}, found {len(found)}")
    return found[0]


def check_continued(
    state: str | os.PathLike[str],
    model: str | os.PathLike[str],
    rec_dir: str | os.PathLike[str],
    data_dirs: Sequence[str | os.PathLike[str]],
    n_siblings: int = 8,
) -> list[Row]:
    """The ``continued/...`` rows: the case's checkpoint (``state``, ``model`` and the timing
    file beside them) continued by the port as GroundHog continued it in ``rec_dir`` (the
    updates from the checkpoint's ``step`` to the recording's), judged against the recording
    with ``n_siblings`` sibling runs (module docstring)."""
    from ...legacy.checkpoint import read_npz_arrays

    state, model = Path(state), Path(model)
    timing = model.with_name(model.name[: -len("model.npz")] + "timing.npz")
    rec_timing = files.load_timings(_one("*timing.npz", rec_dir))
    rec_model = read_npz_arrays(_one("*model.npz", rec_dir))
    first = int(files.load_timings(timing)["step"])
    updates = int(rec_timing["step"]) - first
    recorded = run_of(rec_timing, rec_model, first, updates)
    with tempfile.TemporaryDirectory(prefix="groundhog-continued-") as tmp:
        scratch = f"prefix='{tmp}/c_',reload=True,hookFreq=-1"
        run = lambda n, **kw: continue_run(state, model, timing, scratch, data_dirs, first, n, **kw)
        port = run(updates)
        one = [run(1, float64=f64) for f64 in (False, True)]
        start = {k: np.asarray(v, np.float64) for k, v in read_npz_arrays(model).items()}
        siblings = [
            run(updates, perturb=p)
            for p in sibling_perturbations(start, one[0].params, one[1].params, n_siblings)
        ]
    verdict = compare_continued(recorded, port, siblings)
    rows = Rows()
    product = f"MainLoop.run ({updates} updates from update {first}; what train runs)"
    batches = rows.get("continued", "continued/batches", tol=Tolerance("exact"))
    batches.product = product
    compare_exact(
        batches,
        "continued/next_offset,step",
        np.array([port.next_offset, port.step]),
        np.array([recorded.next_offset, recorded.step]),
    )
    tol_rel = Tolerance("derived", noise="rel", nonfinite_pattern=True, note=SIBLINGS_NOTE)
    tol_abs = Tolerance("derived", noise="abs", nonfinite_pattern=True, note=SIBLINGS_NOTE)
    for (i, k), cmp in sorted(verdict.updates.items()):
        row = rows.get("continued", f"continued/{k}", tol=tol_rel)
        row.product = product
        account(row, f"continued/{k}@update {first + i}", cmp)
    for name, cmp in verdict.model.items():
        row = rows.get("continued", "continued/params_after", tol=tol_abs)
        row.product = product
        account(row, f"continued/params_after/{name}", cmp)
    if verdict.unstable:
        rows.get("continued", "continued/params_after", tol=tol_abs).note(
            f"{verdict.unstable} value(s) left out: a sibling's finiteness differs from the port's"
        )
    return list(rows.rows.values())


SIBLINGS_NOTE = (
    "the noise along the float32 trajectory: the RMS distance of sibling runs started one "
    "update's float32 rounding away (docs/training.md, 'Continued training')"
)
