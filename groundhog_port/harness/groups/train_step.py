"""``/train_step`` of a trace: one ``SGD_adadelta`` update compared with the port's.

What is compared (rows of group ``train_step``):

``x``, ``x_mask``, ``y``, ``y_mask``
    ``==`` the first batch of the port's training iterator (``get_batch_iterator`` started at
    offset 0, :func:`~groundhog_port.legacy.data.first_training_batch`) on the corpora the state
    names (looked up like the vocabularies; the shared recordings keep them in ``../data``).
``param_order``
    ``==`` :func:`~groundhog_port.training.order.param_order` (the gradient-norm summation order).
``cost``, ``grad_norm``, ``log2_p_word``, ``log2_p_expl``, ``clipped_grads``, ``gnorm2_after``, ``dnorm2_after``, ``params_after``
    ONE real ``SGDAdadelta.step`` -- what ``train`` runs -- on a copy of the model from the
    RECORDED batch and ``model.npz`` with zero accumulators: the values it returns,
    ``algo.gs`` (the gradients after clipping / the non-finite guard), the accumulators and
    the parameters after it.

Every float quantity is judged by :func:`judge_quantity`: the derived bound of
:mod:`groundhog_port.harness.tolerance` (the product ``p32`` against the recording and against its
float64 shadow ``p64``; the noise from the same step on the float64 shadow and on the float32
probe ``float32_probe(backward=True)`` (weights perturbed); the parameter arrays' floor from
the step on the shadow with every operation rounded as float32 rounds it
(:class:`~groundhog_port.harness.rounding.Float32Rounding`: the terms of a sum that cancels
keep their rounding).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import ArrayLike

from ...errors import LegacyInputError
from ...legacy.data import first_training_batch
from ...legacy.h5guard import check_dataset
from ...training.adadelta import SGDAdadelta
from ...training.order import param_order
from ...untrusted import load_json
from .. import tolerance as tol
from ..report import Context, Group, Row, Rows, account, compare_exact, compare_text
from ..rounding import Float32Rounding
from ..trace import EXACT, Tolerance, TraceFile

#: kind of float32 noise of each compared quantity (see groundhog_port.harness.tolerance)
KINDS = {
    # scalars: relative rounding of sums (pooled over the four values of the step)
    "cost": tol.REL,
    "grad_norm": tol.REL,
    "log2_p_word": tol.REL,
    "log2_p_expl": tol.REL,
    # sums over tokens with cancellation: absolute noise per parameter array, in units of the
    # array's largest value (judge_quantity)
    "clipped_grads": tol.ABS,
    "gnorm2_after": tol.ABS,
    "dnorm2_after": tol.ABS,
    "params_after": tol.ABS,
}
SCALARS = ("cost", "grad_norm", "log2_p_word", "log2_p_expl")
UPDATE = ("gnorm2_after", "dnorm2_after", "params_after")


def judge_quantity(
    recorded: ArrayLike,
    port32: ArrayLike,
    port64: ArrayLike,
    probe: ArrayLike | None,
    rounded: ArrayLike,
    quantity: str,
) -> tol.Comparison:
    """One parameter's array of a step quantity (:func:`groundhog_port.harness.tolerance.compare`).

    ``probe``: the step on the weight-perturbed probe; ``rounded``: on the shadow with every
    operation rounded (:class:`~groundhog_port.harness.rounding.Float32Rounding`).

    The magnitude ``m`` is the array's terms, not its value: a gradient is a sum over the
    batch's tokens (and the backward pass's sums before it) whose terms may cancel -- to
    exactly 0 where every annotation position holds the same vector (the attention is then
    uniform whatever ``A``, ``B``, ``D``), while float32 returns the rounding of each term.
    ``rounded`` carries that rounding, ``U32 * z`` per term: ``m = max |rounded - p64| /
    U32`` is the array's terms in units of float32's rounding, and ``U32 * m`` (the floor of
    eq. 3) is the largest rounding of the array's terms -- every element gets at least it.
    (Was ``max |p64| * sqrt(n_tokens)``: the result's own size, ~0 where the terms cancel.)"""
    q = np.asarray(port64, np.float64)
    dev = np.abs(np.asarray(rounded, np.float64) - q)
    dev = dev[np.isfinite(dev)]
    m = float(dev.max()) / tol.U32 if dev.size else 0.0
    return tol.compare(recorded, port32, port64, KINDS[quantity], probe=probe, magnitude_of=m)


def _row(rows, quantity, kind=None):
    if quantity not in rows.rows:
        if kind is None:
            rows.rows[quantity] = Row("train_step", quantity, EXACT)
        else:
            t = Tolerance(
                "derived",
                noise=kind.name,
                nonfinite_pattern=True,
                note=f"noise of kind {kind.name}: {kind.note}",
            )
            rows.rows[quantity] = Row("train_step", quantity, t)
    return rows.rows[quantity]


def _add(row, where, recorded, cmp):
    """Fold one :class:`~groundhog_port.harness.tolerance.Comparison` into a report row."""
    account(row, where, cmp)


def read_train_step(tr: TraceFile) -> dict[str, Any]:  # arrays, dicts of them, a list
    """``/train_step`` of a :class:`~groundhog_port.harness.trace.TraceFile` as plain data: the batch
    arrays, ``rvals`` (the returned dict), ``param_order`` and ``{group: {name: array}}``."""
    where = "train_step"
    grp = tr._group(where)
    out = {k: tr._read(grp, k, where, where) for k in ("x", "x_mask", "y", "y_mask")}
    out["rvals"] = {k: float(tr._attr(grp, f"rval_{k}", where)) for k in SCALARS}
    order = tr._attr(grp, "param_order", where)
    try:  # under the parse budget: depth, number length (a RecursionError escaped before)
        out["param_order"] = [str(n) for n in load_json(order, tr.path, "param_order")]
    except (TypeError, AttributeError, LegacyInputError):
        raise LegacyInputError(
            tr.path, "/train_step: attribute param_order is not a JSON list"
        ) from None
    for sub in ("clipped_grads",) + UPDATE:
        g = tr._group(f"{where}/{sub}")
        out[sub] = {}
        for name in g:
            # read, then held as a float32 copy
            check_dataset(g[name], tr.path, f"/{where}/{sub}/{name}", loader_itemsize=4)
            out[sub][name] = np.asarray(g[name][()], dtype=np.float32)
    return out


def _corpora(exp, trace_path):
    """The training corpora: as the state names them (``--data-dir`` etc.), else in the
    ``data`` folder beside the case folder (the layout of the shared recordings)."""
    try:
        return exp.path("source"), exp.path("target")
    except LegacyInputError:
        data = Path(trace_path).resolve().parent.parent / "data"
        src, trg = (data / Path(str(exp.state[k][0])).name for k in ("source", "target"))
        if src.is_file() and trg.is_file():
            return src, trg
        raise


def check_train_step(ctx: Context, rows: Rows) -> None:
    """Compare ``/train_step`` of ``ctx.tr`` into ``rows`` (see the module docstring)."""
    exp = ctx.exp
    rec = read_train_step(ctx.tr)
    try:
        src, trg = _corpora(exp, ctx.tr.path)
        batch = first_training_batch(exp.state, src, trg)
    except LegacyInputError as err:
        row = _row(rows, "train_step/x")
        row.covered = False
        row.notes.append(f"batch not compared: {err}; pass --data-dir")
    else:
        for k in ("x", "x_mask", "y", "y_mask"):
            compare_exact(
                _row(rows, f"train_step/{k}"), f"train_step/{k}", getattr(batch, k), rec[k]
            )
    compare_text(
        _row(rows, "train_step/param_order"),
        "train_step@param_order",
        " ".join(param_order(exp.cfg)),
        " ".join(rec["param_order"]),
    )

    # the product: one SGDAdadelta.step (what train runs) on a copy of the model, from the
    # RECORDED batch; the float64 shadow and the float32 probe run the same step for the bound
    steps = {
        "32": _real_step(exp, copy.deepcopy(exp.model), rec, torch.float32),
        "64": _real_step(exp, exp.model.float64_shadow(), rec, torch.float64),
        "probe": _real_step(exp, exp.model.float32_probe(backward=True), rec, torch.float64),
    }
    with Float32Rounding(seed=0):
        steps["rounded"] = _real_step(exp, exp.model.float64_shadow(), rec, torch.float64)
    product = "SGDAdadelta.step (train: one update from zero accumulators)"
    pool: tol.Pool[str] = tol.Pool(tol.REL)
    for k in SCALARS:
        pool.add(
            k,
            np.float64(rec["rvals"][k]),
            steps["32"]["rvals"][k],
            steps["64"]["rvals"][k],
            probe=steps["probe"]["rvals"][k],
        )
    for k, cmp in pool.results():
        row = _row(rows, f"train_step/{k}", KINDS[k])
        row.product = product
        _add(row, f"train_step@rval_{k}", rec["rvals"][k], cmp)
    for q in ("clipped_grads",) + UPDATE:
        row = _row(rows, f"train_step/{q}", KINDS[q])
        row.product = product
        for n, recorded in rec[q].items():
            if n not in steps["32"][q]:
                row.mismatch(f"train_step/{q}/{n}", "not a parameter of this model")
                continue
            p32, p64, pp, pr = (steps[key][q][n] for key in ("32", "64", "probe", "rounded"))
            _add(
                row, f"train_step/{q}/{n}", recorded, judge_quantity(recorded, p32, p64, pp, pr, q)
            )
    ctx.tick()
    for row in rows.rows.values():
        if row.group == "train_step" and row.tolerance.kind == "derived" and row.n:
            row.note(f"largest error / bound: {row._worst_score:.3g} at {row.worst}")


def _real_step(exp, model, rec, dtype):
    """``SGDAdadelta(model).step`` on the recorded batch: the returned values, ``algo.gs``
    (the clipped gradients), the accumulators and parameters after it, and before it."""
    t = lambda a, dt=None: torch.as_tensor(np.asarray(a), dtype=dt, device=exp.model.device)
    algo = SGDAdadelta(model, dict(exp.state))
    before = {n: p.detach().cpu().numpy().copy() for n, p in zip(algo.names, algo.params)}
    rvals = algo.step(t(rec["x"]), t(rec["x_mask"], dtype), t(rec["y"]), t(rec["y_mask"], dtype))
    arr = lambda ts: {n: v.detach().cpu().numpy() for n, v in zip(algo.names, ts)}
    return {
        "rvals": {k: rvals[k] for k in SCALARS},
        "before": before,
        "clipped_grads": arr(algo.gs),
        "gnorm2_after": arr(algo.gnorm2),
        "dnorm2_after": arr(algo.dnorm2),
        "params_after": arr(algo.params),
    }


TRAIN_STEP = Group(
    "train_step",
    lambda tr: tr.has("train_step"),
    lambda tr, labels: int(tr.has("train_step")),
    check_train_step,
)
