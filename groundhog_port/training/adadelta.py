"""``SGD_adadelta`` (groundhog/trainer/SGD_adadelta.py): clipping and the Adadelta update.

One call of the original trainer (``SGD.__call__``, :162-208) runs two compiled functions:

``train_fn`` (:101-133), on the parameters before the step::

    g_p      = dcost/dp                                   (autograd here)
    norm     = sqrt(sum_p sum(g_p ** 2))                  (params in lm_model.params order)
    if cutoff > 0:                                        (:103)
        c    = float32(cutoff)  [* len(x) with cutoff_rescale_length]
        g_p  = g_p * c / norm   if norm >= c   else g_p   (:112)
        g_p  = 0.1 * p          if norm is nan or inf     (:114, the non-finite guard)
    gs_p     = g_p                                        (stored: ``algo.gs``)
    gnorm2_p = rho * gnorm2_p + (1 - rho) * g_p ** 2      (:125)

``update_fn`` (:137-151), Theano's simultaneous updates (old ``dnorm2`` on both lines)::

    step_p   = sqrt(dnorm2_p + eps) / sqrt(gnorm2_p + eps) * gs_p
    p        = p - step_p
    dnorm2_p = rho * dnorm2_p + (1 - rho) * step_p ** 2

``lr`` is reported (1.0) but never enters the update.  The accumulators start at zero
whenever a trainer is built -- GroundHog never saved them, so every (re)start of train.py
begins with zero accumulators (docs/recordings.md, "Quirks"); so does this class.  With zero
accumulators the first step of an element is ``sqrt(eps) / sqrt((1 - rho) g**2 + eps) * g``,
about ``sqrt(eps / (1 - rho))`` (4.5e-3 with the prototypes' 0.95 / 1e-6) whatever ``g``:
:func:`restart_step`.  :meth:`SGDAdadelta.accumulators` / :meth:`~SGDAdadelta.set_accumulators`
let the ``train`` command carry them across saves (``--keep-accumulators``, a deviation).

Numerics: with ``floatX=float32`` Theano turns the Python constants ``rho``, ``1. - rho``
(computed in double by Python), ``eps``, ``0.1`` and ``cutoff`` into float32 constants, so
every operation above is float32; each ``sum(g ** 2)`` is a float32 ``Sum`` accumulated in
float64 and the per-parameter sums are added in float32 in parameter order (Python's
``sum()`` of Theano scalars), as done here.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ..errors import LegacyInputError
from ..legacy.checkpoint import legacy_param_table
from ..model.encdec import RNNEncoderDecoder
from .cost import Cost, sum_acc64, training_cost
from .order import param_order


def sqrt_rn(x: torch.Tensor) -> torch.Tensor:
    """Correctly rounded ``sqrt`` (libm's ``sqrtf``, what Theano's C code called).

    torch's vectorised float32 CPU ``sqrt`` is not always correctly rounded (measured: 805 of
    the 5136 elements of one recorded Adadelta step differ by an ulp from numpy's), so a
    float32 input is square-rooted in double and rounded once: exact, since double carries
    more than twice float32's precision.
    """
    if x.dtype == torch.float32:
        return torch.sqrt(x.double()).float()
    return torch.sqrt(x)


def global_norm(grads: Sequence[torch.Tensor]) -> torch.Tensor:
    """``sqrt(sum(TT.sum(g ** 2) for g in grads))`` with Theano's float32 rounding."""
    total = None
    for g in grads:
        s = sum_acc64(g * g)
        total = s if total is None else total + s
    assert total is not None  # a model has parameters
    return sqrt_rn(total)


def adadelta_step(
    dnorm2: torch.Tensor, gnorm2: torch.Tensor, g: torch.Tensor, eps: torch.Tensor
) -> torch.Tensor:
    """``sqrt(dnorm2 + eps) / sqrt(gnorm2 + eps) * g`` (SGD_adadelta.py:137), with the
    already updated ``gnorm2`` and the old ``dnorm2``."""
    return sqrt_rn(dnorm2 + eps) / sqrt_rn(gnorm2 + eps) * g


class SGDAdadelta:
    """The trainer: ``step(batch)`` is one ``algo()`` call of the original.

    The model's saved parameters (:func:`trainable_params`, ``lm_model.params`` order) are
    updated in place.  ``state``: the GroundHog state (``adarho``/``adaeps`` default to 0.96/1e-6
    when absent, as SGD_adadelta.py:46-49 sets them; the prototypes hold 0.95/1e-6).
    """

    def __init__(self, model: RNNEncoderDecoder, state: dict[str, Any]) -> None:
        self.model = model
        self.state = state
        if "adarho" not in state:
            state["adarho"] = 0.96
        if "adaeps" not in state:
            state["adaeps"] = 1e-6
        params = trainable_params(model)
        self.names = [n for n, _ in params]
        self.params = [p for _, p in params]
        dt, dev = self.params[0].dtype, self.params[0].device

        def const(v: np.float32) -> torch.Tensor:
            return torch.tensor(v, dtype=dt, device=dev)

        self.rho = const(np.float32(state["adarho"]))
        self.one_minus_rho = const(np.float32(1.0 - state["adarho"]))
        self.eps = const(np.float32(state["adaeps"]))
        self.tenth = const(np.float32(0.1))
        cutoff = state.get("cutoff", None)
        self.cutoff = None if cutoff is None or not cutoff > 0 else const(np.float32(cutoff))
        self.rescale_length = bool(state.get("cutoff_rescale_length", 0))
        self.gs = [torch.zeros_like(p) for p in self.params]
        self.gnorm2 = [torch.zeros_like(p) for p in self.params]
        self.dnorm2 = [torch.zeros_like(p) for p in self.params]
        self.lr = 1.0
        self.step_timer = time.time()

    # -- train_fn ---------------------------------------------------------------------
    def gradients(
        self, x: torch.Tensor, x_mask: torch.Tensor, y: torch.Tensor, y_mask: torch.Tensor
    ) -> tuple[Cost, list[torch.Tensor]]:
        """Cost, its properties and the raw gradients (parameters before the step)."""
        for p in self.params:
            p.requires_grad_(True)
        try:
            with torch.enable_grad():
                cost = training_cost(self.model, x, x_mask, y, y_mask)
                raw = torch.autograd.grad(cost.cost, self.params, allow_unused=True)
        finally:
            for p in self.params:
                p.requires_grad_(False)
        grads = [torch.zeros_like(p) if g is None else g for g, p in zip(raw, self.params)]
        return cost, grads

    def clip(
        self, grads: list[torch.Tensor], n_steps_x: int
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """``norm`` and the gradients after clipping and the non-finite guard (:101-117)."""
        norm = global_norm(grads)
        if self.cutoff is None:
            return norm, grads
        c = self.cutoff
        if self.rescale_length:
            c = c * torch.tensor(float(n_steps_x), dtype=c.dtype, device=c.device)
        if not bool(torch.isfinite(norm)):
            return norm, [self.tenth * p for p in self.params]
        if bool(norm >= c):
            return norm, [g * c / norm for g in grads]
        return norm, grads

    def decay(self, acc: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``rho * acc + (1 - rho) * v ** 2`` (SGD_adadelta.py:125 and :143-144)."""
        return self.rho * acc + self.one_minus_rho * (v * v)

    @torch.no_grad()
    def update(self, gs: Sequence[torch.Tensor]) -> None:
        """From the clipped gradients ``gs`` (parameter order): ``gnorm2`` decayed (the end
        of ``train_fn``, :125), then ``update_fn`` (:137-151) on every parameter in place."""
        self.gs = list(gs)
        self.gnorm2 = [self.decay(gn2, g) for gn2, g in zip(self.gnorm2, self.gs)]
        for i, (p, g, gn2) in enumerate(zip(self.params, self.gs, self.gnorm2)):
            delta = adadelta_step(self.dnorm2[i], gn2, g, self.eps)
            p.sub_(delta)
            self.dnorm2[i] = self.decay(self.dnorm2[i], delta)

    # -- one algo() call ----------------------------------------------------------------
    @torch.no_grad()
    def step(
        self, x: torch.Tensor, x_mask: torch.Tensor, y: torch.Tensor, y_mask: torch.Tensor
    ) -> dict[str, float]:
        """One update on a batch; returns the dict ``SGD.__call__`` returns (:203-207)."""
        t0 = time.time()
        cost, grads = self.gradients(x, x_mask, y, y_mask)
        norm, gs = self.clip(grads, x.shape[0])
        self.update(gs)
        t1 = time.time()
        self.state["lr"] = float(self.lr)
        out = {"grad_norm": float(norm)}
        out.update(cost.properties())
        c = float(cost.cost.detach())
        out.update(
            {
                "cost": c,
                "error": c,
                "lr": float(self.lr),
                "time_step": t1 - t0,
                "whole_time": time.time() - self.step_timer,
            }
        )
        return out

    # -- carried across saves (--keep-accumulators; GroundHog never saved them) ------------
    def accumulators(self) -> dict[str, np.ndarray]:
        """``{gnorm2_<name>, dnorm2_<name>: float32 array}`` (``gs`` is rewritten before use)."""
        out = {}
        for n, gn2, dn2 in zip(self.names, self.gnorm2, self.dnorm2):
            out["gnorm2_" + n] = gn2.detach().cpu().numpy()
            out["dnorm2_" + n] = dn2.detach().cpu().numpy()
        return out

    def set_accumulators(
        self, arrays: Mapping[str, np.ndarray], where: str | os.PathLike[str]
    ) -> None:
        """Take the accumulators of :meth:`accumulators` back (``where`` names the file)."""
        want = {k: a.shape for k, a in self.accumulators().items()}
        got = {k: np.shape(v) for k, v in arrays.items() if k != "step"}
        if got != want:
            missing = sorted(set(want) - set(got)) or sorted(k for k in want if got[k] != want[k])
            raise LegacyInputError(
                where,
                "not the Adadelta accumulators of this model (differs at "
                f"{', '.join(missing[:3]) or 'extra arrays'})",
            )
        # running means of squares (:125, :151) are finite and >= 0: one NaN, Inf or
        # negative value would make every later step of that parameter NaN (and the saved
        # model with it) -- refused, naming the array, before any update
        for key in sorted(want):
            a = np.asarray(arrays[key])
            bad = int(np.count_nonzero(~(np.isfinite(a) & (a >= 0))))
            if bad:
                raise LegacyInputError(
                    where,
                    f"{key} holds {bad} NaN, infinite or negative value(s): not Adadelta "
                    "accumulators (running means of squares are finite and >= 0); remove "
                    "the file to restart Adadelta from zero",
                )
        dt, dev = self.params[0].dtype, self.params[0].device

        def t(a: np.ndarray) -> torch.Tensor:
            return torch.as_tensor(np.asarray(a), dtype=dt, device=dev)

        self.gnorm2 = [t(arrays["gnorm2_" + n]) for n in self.names]
        self.dnorm2 = [t(arrays["dnorm2_" + n]) for n in self.names]

    #: the keys of the returned dict, in the original's ``return_names`` order (:155-159)
    RETURN_NAMES = (
        "grad_norm",
        "log2_p_word",
        "log2_p_expl",
        "cost",
        "error",
        "time_step",
        "whole_time",
        "lr",
    )


def restart_step(state: dict[str, Any]) -> float:
    """``sqrt(eps / (1 - rho))``: the size of the first update of every element whose gradient
    is well above it, when Adadelta starts from zero accumulators."""
    return float(np.sqrt(state.get("adaeps", 1e-6) / (1.0 - state.get("adarho", 0.96))))


def trainable_params(model: RNNEncoderDecoder) -> list[tuple[str, torch.Tensor]]:
    """``[(legacy name, tensor)]`` of every saved parameter, in ``lm_model.params`` order."""
    table, _ = legacy_param_table(model.cfg)
    path = {p.name: p.path for p in table}
    return [(n, model.get_parameter(path[n])) for n in param_order(model.cfg)]
