"""What ``MainLoop.save`` writes (mainLoop.py:222-239), in formats the original can load.

* ``<prefix>model.npz`` -- ``Container.save`` (basic.py:161): ``numpy.savez`` of one float32
  array per parameter, keyed by its GroundHog name (the legacy table's names);
* ``<prefix>timing.npz`` -- ``numpy.savez(**timings)``: ``step``, ``next_offset`` and the
  per-update arrays (:func:`groundhog_port.training.loop.new_timings`);
* ``<prefix>adadelta.npz`` -- only with ``--keep-accumulators`` (a deviation: GroundHog
  never saved them): Adadelta's ``gnorm2_<name>``/``dnorm2_<name>`` and ``step``;
* ``<prefix>state.pkl`` -- the state dict.  GroundHog's ``cPickle.dump`` wrote protocol 0;
  here protocol 2 (also readable by Python 2's cPickle) with every ``str`` written as a
  Python-2 byte string (``SHORT_BINSTRING``/``BINSTRING``, UTF-8), so Python 2 reads ``str``
  values, not ``unicode``.  Only plain data is written (dict, list, tuple, str, int, float,
  bool, None; numpy scalars become Python numbers); anything else is refused.

A checkpoint is the three files together (:func:`save_checkpoint`): each is written to
``<name>.partial`` (locked), and only when all three are complete and on disk are they
renamed, timings last, after a rename journal ``<prefix>timing.npz.together``
(:mod:`groundhog_port.together`) -- so an interruption, a full disk or even SIGKILL never
leaves a half-written file or, once ``train`` starts again (:func:`finish_checkpoint`), a
model of one update with the timings of another (the original ignored SIGINT while saving
instead, and wrote the three one after the other).
"""

from __future__ import annotations

import io
import math
import os
import pickle
import re
import struct
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import LegacyInputError
from ..legacy.checkpoint import legacy_param_table, read_npz_arrays
from ..model.encdec import RNNEncoderDecoder
from ..together import finish_together, write_together


def model_arrays(model: RNNEncoderDecoder) -> dict[str, np.ndarray]:
    """``{legacy name: float32 array}`` of every saved parameter."""
    table, _ = legacy_param_table(model.cfg)
    return {
        p.name: model.get_parameter(p.path).detach().cpu().numpy().astype(np.float32) for p in table
    }


def save_checkpoint(
    model_path: str | os.PathLike[str],
    state_path: str | os.PathLike[str],
    timing_path: str | os.PathLike[str],
    model: RNNEncoderDecoder,
    state: dict[str, Any],
    timings: dict[str, Any],
    kept: str,
    accumulators: tuple[str | os.PathLike[str], dict[str, np.ndarray]] | None = None,
    diverged: str = "nothing was saved",
) -> None:
    """mainLoop.py:222-239 (``MainLoop.save``): the model, the state and the timings, replaced
    together (:func:`groundhog_port.together.write_together`); ``kept`` ends the error of a
    failed save (which checkpoint is left as it was), ``diverged`` the refusal of a model
    with NaN/Inf weights over a finite one (:func:`refuse_nonfinite_over_finite`).  ``accumulators`` (``--keep-accumulators``,
    a deviation): ``(path, arrays)`` of Adadelta's accumulators, replaced with the others."""
    arrays: dict[str, Any] = model_arrays(model)  # (np.savez's keywords: Any)
    state_bytes = dumps_state(state)
    refuse_nonfinite_over_finite(model_path, arrays, "the model to be saved", diverged)
    writers = [
        (model_path, lambda f: np.savez(f, **arrays)),
        (state_path, lambda f: f.write(state_bytes)),
    ]
    if accumulators is not None:
        acc_path = accumulators[0]
        acc: dict[str, Any] = accumulators[1]
        writers.append((acc_path, lambda f: np.savez(f, **acc)))
    writers.append((timing_path, lambda f: np.savez(f, **timings)))
    write_together(writers, kept)


def finish_checkpoint(prefix: str) -> list[Path]:
    """Complete a save killed between its renames (SIGKILL, a power cut): the files its
    rename journal still lists replace the older ones (:func:`groundhog_port.together.
    finish_together` on ``<prefix>timing.npz``, renamed last); returns the files replaced."""
    return finish_together(prefix + "timing.npz")


def nonfinite_counts(arrays: dict[str, np.ndarray]) -> dict[str, int]:
    """``{name: number of NaN/Inf values}`` of the arrays holding any."""
    out = {}
    for name, a in arrays.items():
        n = int(np.count_nonzero(~np.isfinite(a)))
        if n:
            out[name] = n
    return out


def refuse_nonfinite_over_finite(
    model_path: str | os.PathLike[str], arrays: dict[str, np.ndarray], what: str, kept: str
) -> None:
    """A model holding NaN/Inf weights is never written over a finite one (DEVIATION: the
    original saved whatever the parameters held; with its non-finite guard,
    SGD_adadelta.py:114, a faithful run keeps finite weights even through NaN gradient
    norms, so only damaged inputs -- e.g. a NaN accumulator -- get here).  Writing it where
    no model is, or over one already non-finite, is left as the original did."""
    bad = nonfinite_counts(arrays)
    if not bad or not os.path.lexists(model_path):
        return
    try:
        old = read_npz_arrays(model_path, "model")
        if nonfinite_counts({k: v for k, v in old.items() if isinstance(v, np.ndarray)}):
            return
    except LegacyInputError:
        pass  # unreadable: not known to be non-finite, so kept
    names = ", ".join(sorted(bad)[:3]) + (", ..." if len(bad) > 3 else "")
    raise LegacyInputError(
        model_path,
        f"{what} holds {sum(bad.values())} NaN/Inf weight(s) (in {names}): it is never "
        f"written over a finite model; {kept}",
    )


def accumulators_path(model_path: str | os.PathLike[str]) -> Path | None:
    """``<prefix>adadelta.npz`` beside ``<prefix>model.npz`` (``model3.npz`` ->
    ``adadelta3.npz`` with ``overwrite=0``); None for a model file not named so."""
    m = re.fullmatch(r"(.*)model(\d*)\.npz", Path(model_path).name)
    return None if m is None else Path(model_path).with_name(f"{m[1]}adadelta{m[2]}.npz")


def load_accumulators(
    path: str | os.PathLike[str], expected: dict[str, tuple[int, ...]] | None = None
) -> dict[str, np.ndarray]:
    """An accumulators file as written by :func:`save_checkpoint` (plain ``.npz``);
    ``expected``: ``{name: shape}`` of this model's accumulators (nothing else is read)."""
    return read_npz_arrays(path, "adadelta", expected=expected)


def load_timings(
    path: str | os.PathLike[str], required: tuple[str, ...] = ("cost",)
) -> dict[str, np.ndarray]:
    """A ``*_timing.npz`` as the dict ``MainLoop.load`` makes of it (mainLoop.py:253),
    checked (:func:`check_timings`) so that a tampered file is one error naming it, not a
    traceback where a value is used: ``step`` (and ``next_offset``) a whole number,
    every other member a 1-D array of numbers, the ``required`` ones present."""
    arrays = read_npz_arrays(path, "timing")
    check_timings(arrays, path, required)
    return arrays


def _whole_number(arrays: dict[str, Any], key: str, path: object, least: int) -> None:
    value = arrays[key]
    kind = getattr(value, "dtype", np.dtype(object)).kind
    if np.ndim(value) != 0 or kind not in "iuf":
        raise LegacyInputError(
            path,
            f"timing {key!r} is {_described(value)}: a whole number is written there "
            "(mainLoop.py:136)",
        )
    number = float(value)
    if not (math.isfinite(number) and number == int(number) and number >= least):
        raise LegacyInputError(
            path, f"timing {key!r} is {number!r}: a whole number >= {least} is written there"
        )


def _described(value: Any) -> str:
    shape = np.shape(value)
    kind = getattr(value, "dtype", None)
    return f"an array of shape {shape}" if shape else f"a {kind} value"


def check_timings(
    arrays: dict[str, Any], path: object, required: tuple[str, ...] = ("cost",)
) -> None:
    """Refuse (one error naming ``path``) timings ``MainLoop`` could not have saved."""
    if "step" not in arrays:
        raise LegacyInputError(path, "no 'step' in the timing file (mainLoop.py:136 saves it)")
    _whole_number(arrays, "step", path, 0)
    if "next_offset" in arrays:
        _whole_number(arrays, "next_offset", path, -1)
    for key in required:
        if key not in arrays:
            raise LegacyInputError(
                path,
                f"no {key!r} in the timing file (keys: {', '.join(sorted(arrays)[:20])})",
            )
    for key, value in arrays.items():
        if key in ("step", "next_offset"):
            continue
        kind = getattr(value, "dtype", np.dtype(object)).kind
        if np.ndim(value) != 1 or kind not in "iuf":
            raise LegacyInputError(
                path,
                f"timing {key!r} is {_described(value)}: a 1-D array of numbers is "
                "written there (one value per update)",
            )


def plain(value: object, where: str = "state") -> object:
    """``value`` with numpy scalars turned into Python numbers; refuses non-plain data."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        out = [plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return out if isinstance(value, list) else tuple(out)
    if isinstance(value, dict):
        return {plain(k, where): plain(v, f"{where}[{k!r}]") for k, v in value.items()}
    raise LegacyInputError(
        None, f"{where} holds a {type(value).__name__}; a state file may hold only plain data"
    )


class Py2Pickler(pickle._Pickler):
    """Protocol 2 with ``str`` written as Python-2 ``str`` (UTF-8 byte strings)."""

    dispatch = pickle._Pickler.dispatch.copy()

    def save_py2_str(self, obj: str) -> None:
        data = obj.encode("utf-8")
        if len(data) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(data)]) + data)  # type: ignore[attr-defined]
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", len(data)) + data)  # type: ignore[attr-defined]
        self.memoize(obj)  # type: ignore[attr-defined]  # (pickle._Pickler's, not in typeshed)

    dispatch[str] = save_py2_str  # type: ignore[assignment]


def dumps_state(state: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    Py2Pickler(buf, protocol=2).dump(plain(dict(state)))
    return buf.getvalue()
