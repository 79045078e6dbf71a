"""``/train_step`` of a trace: one ``SGD_adadelta`` update compared with the port's.

What is compared (rows of group ``train_step``):

``x``, ``x_mask``, ``y``, ``y_mask``
    ``==`` the first batch of the port's training iterator (``get_batch_iterator`` started at
    offset 0, :func:`~groundhog_port.data.first_training_batch`) on the corpora the state
    names (looked up like the vocabularies; the shared recordings keep them in ``../data``).
``param_order``
    ``==`` :func:`~groundhog_port.training.order.param_order` (the gradient-norm summation order).
``cost``, ``grad_norm``, ``log2_p_word``, ``log2_p_expl``
    what ``algo()`` returned, recomputed from the RECORDED batch and ``model.npz``.
``clipped_grads``
    the gradients after clipping / the non-finite guard (``algo.gs``), same inputs.
``gnorm2_after``, ``dnorm2_after``, ``params_after``
    the Adadelta update computed from the RECORDED clipped gradients, ``model.npz`` and zero
    accumulators -- each quantity from its recorded inputs, as everywhere in the harness, so
    that the gradients' float32 noise is judged once (an update step ``~ g`` for small
    gradients would otherwise carry it into the parameters a second time).

Every float quantity is judged by :func:`judge_quantity`: the derived bound of
:mod:`groundhog_port.tolerance` (``|recorded - p64| <= K * noise + quantum``) where ``p32`` is
the port's float32 value and ``p64`` the same computation on the float64 shadow of the model.
"""
import json
from pathlib import Path

import numpy as np
import torch

from .. import tolerance as tol
from ..data import first_training_batch
from ..errors import LegacyInputError
from ..h5guard import check_dataset
from ..trace import EXACT, Tolerance
from .adadelta import SGDAdadelta, adadelta_step, trainable_params
from .order import param_order

#: kind of float32 noise of each compared quantity (see groundhog_port.tolerance)
KINDS = {
    # scalars: relative rounding of sums (pooled over the four values of the step)
    "cost": tol.REL, "grad_norm": tol.REL, "log2_p_word": tol.REL, "log2_p_expl": tol.REL,
    # gradients: sums over tokens with cancellation, absolute noise per parameter array
    "clipped_grads": tol.ABS,
    # the update from given gradients: elementwise float32 arithmetic, relative rounding
    "gnorm2_after": tol.REL, "dnorm2_after": tol.REL, "params_after": tol.REL,
}
SCALARS = ("cost", "grad_norm", "log2_p_word", "log2_p_expl")
UPDATE = ("gnorm2_after", "dnorm2_after", "params_after")


def judge_quantity(recorded, port32, port64, kind, sigma=None):
    """The one comparison of a float quantity: recorded (Theano float32) vs the port's
    float32 and float64 values (:func:`groundhog_port.tolerance.compare`)."""
    return tol.compare(recorded, port32, port64, kind, sigma=sigma)


def _row(rows, quantity, kind=None):
    from ..parity import Row  # parity imports this module lazily; avoid the cycle at import
    if quantity not in rows.rows:
        if kind is None:
            rows.rows[quantity] = Row("train_step", quantity, EXACT)
        else:
            t = Tolerance("derived", noise=kind.name, nonfinite_pattern=True,
                          note=f"noise of kind {kind.name}: {kind.note}")
            rows.rows[quantity] = Row("train_step", quantity, t)
    return rows.rows[quantity]


def _add(row, where, recorded, cmp):
    """Fold one :class:`~groundhog_port.tolerance.Comparison` into a report row."""
    from ..parity import _account
    _account(row, where, cmp)


def read_train_step(tr):
    """``/train_step`` of a :class:`~groundhog_port.trace.TraceFile` as plain data: the batch
    arrays, ``rvals`` (the returned dict), ``param_order`` and ``{group: {name: array}}``."""
    where = "train_step"
    grp = tr._group(where)
    out = {k: tr._read(grp, k, where, where) for k in ("x", "x_mask", "y", "y_mask")}
    out["rvals"] = {k: float(tr._attr(grp, f"rval_{k}", where)) for k in SCALARS}
    order = tr._attr(grp, "param_order", where)
    try:
        out["param_order"] = [str(n) for n in json.loads(order)]
    except (TypeError, ValueError):
        raise LegacyInputError(tr.path, "/train_step: attribute param_order is not a JSON list") from None
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


def check_train_step(ctx, rows):
    """Compare ``/train_step`` of ``ctx.tr`` into ``rows`` (see the module docstring)."""
    from ..parity import compare_exact, compare_text

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
            compare_exact(_row(rows, f"train_step/{k}"), f"train_step/{k}", getattr(batch, k), rec[k])
    compare_text(_row(rows, "train_step/param_order"), "train_step@param_order",
                 " ".join(param_order(exp.cfg)), " ".join(rec["param_order"]))

    # cost, properties, norm and clipped gradients from the recorded batch: float32 and float64
    t = lambda a, dt=None: torch.as_tensor(np.asarray(a), dtype=dt, device=ctx.device)
    port = {}
    for key, model, fdt in (("32", exp.model, torch.float32),
                            ("64", exp.model.float64_shadow(), torch.float64)):
        algo = SGDAdadelta(model, dict(exp.state))
        cost, grads = algo.gradients(t(rec["x"]), t(rec["x_mask"], fdt), t(rec["y"]),
                                     t(rec["y_mask"], fdt))
        norm, gs = algo.clip(grads, rec["x"].shape[0])
        vals = {"cost": float(cost.cost), "grad_norm": float(norm)}
        vals.update(cost.properties())
        port[key] = (vals, {n: g.detach().cpu().numpy() for n, g in zip(algo.names, gs)})
    pool = tol.Pool(tol.REL)
    for k in SCALARS:
        pool.add(k, np.float64(rec["rvals"][k]), port["32"][0][k], port["64"][0][k])
    for k, cmp in pool.results():
        _add(_row(rows, f"train_step/{k}", KINDS[k]), f"train_step@rval_{k}", rec["rvals"][k], cmp)
    # each parameter's gradient is its own noise pool: its elements are sums over the same
    # tokens, while the gradients of different parameters differ in size by orders
    row = _row(rows, "train_step/clipped_grads", KINDS["clipped_grads"])
    for n, recorded in rec["clipped_grads"].items():
        if n not in port["32"][1]:
            row.mismatch(f"train_step/clipped_grads/{n}", "not a parameter of this model")
            continue
        _add(row, f"train_step/clipped_grads/{n}", recorded,
             judge_quantity(recorded, port["32"][1][n], port["64"][1][n], KINDS["clipped_grads"]))
    _check_update(exp, rows, rec)
    ctx.tick()
    for row in rows.rows.values():
        if row.group == "train_step" and row.tolerance.kind == "derived" and row.n:
            row.note(f"largest error / bound: {row._worst_score:.3g} at {row.worst}")


def update_from(params, grads, state, dtype):
    """``{name: {gnorm2_after, dnorm2_after, params_after}}``: one Adadelta update of
    ``params`` with the given (clipped) gradients and zero accumulators, in ``dtype``
    (the constants are float32 values, as Theano's)."""
    c = lambda v: torch.tensor(np.float32(v), dtype=dtype)
    rho, rho1, eps = c(state["adarho"]), c(1.0 - state["adarho"]), c(state["adaeps"])
    out = {}
    for n, g in grads.items():
        g = torch.as_tensor(g, dtype=dtype)
        p = torch.as_tensor(params[n], dtype=dtype)
        zero = torch.zeros_like(g)
        gn2 = rho * zero + rho1 * (g * g)
        delta = adadelta_step(zero, gn2, g, eps)
        out[n] = {"gnorm2_after": gn2.numpy(), "dnorm2_after": (rho * zero + rho1 * (delta * delta)).numpy(),
                  "params_after": (p - delta).numpy()}
    return out


def _check_update(exp, rows, rec):
    state = dict(exp.state)
    state.setdefault("adarho", 0.96)
    state.setdefault("adaeps", 1e-6)
    before = {n: p.detach().cpu().numpy() for n, p in trainable_params(exp.model)}
    u32 = update_from(before, rec["clipped_grads"], state, torch.float32)
    u64 = update_from(before, rec["clipped_grads"], state, torch.float64)
    for q in UPDATE:
        row = _row(rows, f"train_step/{q}", KINDS[q])
        same = 0
        for n, recorded in rec[q].items():
            if n not in u32:
                row.mismatch(f"train_step/{q}/{n}", "no recorded clipped gradient for this parameter")
                continue
            _add(row, f"train_step/{q}/{n}", recorded,
                 judge_quantity(recorded, u32[n][q], u64[n][q], KINDS[q]))
            same += int(np.count_nonzero(u32[n][q] == recorded))
        row.note("computed from the recorded clipped gradients, model.npz and zero accumulators; "
                 f"float32 result bit-identical to the recording in {same} of {row.n} elements")
