"""What ``MainLoop.save`` writes (mainLoop.py:222-239), in formats the original can load.

* ``<prefix>model.npz`` -- ``Container.save`` (basic.py:161): ``numpy.savez`` of one float32
  array per parameter, keyed by its GroundHog name (the legacy table's names);
* ``<prefix>timing.npz`` -- ``numpy.savez(**timings)``: ``step``, ``next_offset`` and the
  per-update arrays (:func:`groundhog_port.training.loop.new_timings`);
* ``<prefix>state.pkl`` -- the state dict.  GroundHog's ``cPickle.dump`` wrote protocol 0;
  here protocol 2 (also readable by Python 2's cPickle) with every ``str`` written as a
  Python-2 byte string (``SHORT_BINSTRING``/``BINSTRING``, UTF-8), so Python 2 reads ``str``
  values, not ``unicode``.  Only plain data is written (dict, list, tuple, str, int, float,
  bool, None; numpy scalars become Python numbers); anything else is refused.

Every file is written to ``<name>.partial`` and renamed when complete, so an interruption
never leaves a half-written checkpoint (the original ignored SIGINT while saving instead).
"""
import io
import os
import pickle
import struct
from pathlib import Path

import numpy as np

from ..checkpoint import legacy_param_table, read_npz_arrays
from ..errors import LegacyInputError


def _atomic(path, write):
    path = Path(path)
    tmp = path.with_name(path.name + ".partial")
    try:
        with open(tmp, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except OSError as err:
        raise LegacyInputError(path, f"cannot write ({err.strerror or err})") from None
    finally:
        if tmp.exists():
            tmp.unlink()


def model_arrays(model):
    """``{legacy name: float32 array}`` of every saved parameter."""
    table, _ = legacy_param_table(model.cfg)
    return {p.name: model.get_parameter(p.path).detach().cpu().numpy().astype(np.float32)
            for p in table}


def save_model(path, model):
    arrays = model_arrays(model)
    _atomic(path, lambda f: np.savez(f, **arrays))


def save_timings(path, timings):
    _atomic(path, lambda f: np.savez(f, **timings))


def load_timings(path):
    """A ``*_timing.npz`` as the dict ``MainLoop.load`` makes of it (mainLoop.py:253)."""
    return read_npz_arrays(path, "timing")


def plain(value, where="state"):
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
    raise LegacyInputError(None, f"{where} holds a {type(value).__name__}; a state file may hold "
                                 "only plain data")


class Py2Pickler(pickle._Pickler):
    """Protocol 2 with ``str`` written as Python-2 ``str`` (UTF-8 byte strings)."""

    dispatch = pickle._Pickler.dispatch.copy()

    def save_py2_str(self, obj):
        data = obj.encode("utf-8")
        if len(data) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(data)]) + data)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", len(data)) + data)
        self.memoize(obj)

    dispatch[str] = save_py2_str


def dumps_state(state):
    buf = io.BytesIO()
    Py2Pickler(buf, protocol=2).dump(plain(dict(state)))
    return buf.getvalue()


def save_state(path, state):
    data = dumps_state(state)
    _atomic(path, lambda f: f.write(data))
