"""Loading GroundHog's Python-2 pickles without letting them run anything.

GroundHog wrote its files with Python 2's ``cPickle``: ``*_state.pkl`` at protocol 0,
``vocab.*.pkl`` at protocol 2, ``ivocab.*.pkl`` at protocol 0 (docs/recordings.md, "Python 2 pickles"); their
strings are Python-2 byte strings holding UTF-8.  A pickle can name any importable
callable and have the loader call it, so :func:`safe_load_pickle` resolves global names
through a short whitelist of plain-data constructors (and our own re-implementations of
the numpy reconstructors); any other name is refused *when it is looked up*, before
anything could be called.

Before the C unpickler builds anything, :func:`.prescan.prescan` walks the opcodes and
refuses what would blow up; a vocabulary (one flat dict of words and ids) is checked by
the quicker :func:`.flat.flat_dict` instead, which leaves anything else to that walk.

Byte strings are decoded as UTF-8 after loading (``encoding='bytes'``), so a bad byte is
reported with the place it sits in (``['word_indx']``, ``key b'caf\\xe9'``) rather than as a
bare ``UnicodeDecodeError`` from inside the pickle machinery.  Python-3 pickles (protocols
3-5) load too when they hold only plain data.
"""

from __future__ import annotations

import io
import os
import pickle
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from groundhog_port import budget
from groundhog_port.errors import LegacyInputError
from groundhog_port.untrusted import check_special, describe, read_input, reading

from .flat import flat_dict
from .prescan import MAX_DEPTH, prescan

#: files larger than this are refused before reading (a GroundHog state is a few kB, a
#: 30k-word vocabulary about 1 MB)
MAX_PICKLE_BYTES = 1 << 30

_REFUSED = "refused to unpickle {}.{}: only plain data is allowed"


# ---------------------------------------------------------------------------
# whitelisted constructors
# ---------------------------------------------------------------------------


class _Frozen:
    """Base of the objects we hand to the unpickler: no ``__dict__`` and a refusing
    ``__setstate__``, so a pickle's BUILD opcode cannot change them for later loads."""

    __slots__ = ("label",)

    def __setstate__(self, state):
        raise pickle.UnpicklingError(f"cannot set the state of {self.label}")

    def __repr__(self):
        return f"<{self.label}>"


class _Marker(_Frozen):
    """A non-callable stand-in for a class that may only appear as an argument."""

    __slots__ = ()

    def __init__(self, label):
        self.label = label


class _SafeCallable(_Frozen):
    """One of our own reconstruction functions, as seen by the unpickler."""

    __slots__ = ("fn",)

    def __init__(self, label, fn):
        self.label = label
        self.fn = fn

    def __call__(self, *args):
        return self.fn(*args)


_NDARRAY = _Marker("numpy.ndarray")
_OBJECT = _Marker("object")

# dtype kinds accepted in numpy data: bool, ints, floats, complex, byte and unicode strings
_PLAIN_DTYPE_KINDS = frozenset("biufcSU")


def _as_text(value, what):
    if isinstance(value, bytes):
        try:
            return value.decode("ascii")
        except UnicodeDecodeError:
            pass
    if isinstance(value, str):
        return value
    raise pickle.UnpicklingError(f"{what} must be a string, got {type(value).__name__}")


class _DtypeStub:
    """Built by the pickled ``numpy.dtype(descr, align, copy)`` call, finished by BUILD."""

    def __init__(self, descr, align=False, copy=True):
        descr = _as_text(descr, "numpy dtype")
        try:
            dtype = np.dtype(descr)
        except TypeError as err:
            raise pickle.UnpicklingError(f"unknown numpy dtype {descr!r}") from err
        if dtype.kind not in _PLAIN_DTYPE_KINDS or dtype.fields is not None:
            raise pickle.UnpicklingError(f"numpy dtype {descr!r} is not plain numeric or text data")
        self.dtype = dtype

    def __setstate__(self, state):
        # (version, byteorder, subarray, names, fields, elsize, alignment, flags[, metadata])
        if not isinstance(state, tuple) or len(state) < 2:
            raise pickle.UnpicklingError("malformed numpy dtype state")
        order = _as_text(state[1], "numpy byte order")
        if order not in ("<", ">", "|", "="):
            raise pickle.UnpicklingError(f"bad numpy byte order {order!r}")
        if any(part is not None for part in state[2:5]):
            raise pickle.UnpicklingError("structured numpy dtypes are not plain data")
        if self.dtype.kind in "SU" and self.dtype.itemsize == 0:
            # an unsized text dtype ('S', 'U'): the element size comes with the state
            elsize = state[5] if len(state) > 5 else None
            if not isinstance(elsize, int) or elsize <= 0:
                raise pickle.UnpicklingError("numpy text dtype without an element size")
            chars = elsize // 4 if self.dtype.kind == "U" else elsize
            self.dtype = np.dtype(f"{self.dtype.kind}{chars}")
        if order in ("<", ">"):
            self.dtype = self.dtype.newbyteorder(order)


def _dtype_of(value):
    if isinstance(value, _DtypeStub):
        return value.dtype
    raise pickle.UnpicklingError("expected a numpy dtype")


def _array_from_bytes(raw, dtype, shape, fortran=False):
    if isinstance(raw, str):  # Python-3 protocol 0-2 pickles carry it latin-1 encoded
        raw = raw.encode("latin-1")
    if not isinstance(raw, (bytes, bytearray)):
        raise pickle.UnpicklingError("numpy data is not a byte string (object arrays are refused)")
    if not isinstance(shape, tuple) or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise pickle.UnpicklingError("malformed numpy shape")
    count = 1
    for n in shape:
        count *= n
    if count * dtype.itemsize != len(raw):
        raise pickle.UnpicklingError(
            f"numpy data holds {len(raw)} bytes, shape {shape} of {dtype} needs {count * dtype.itemsize}"
        )
    flat = np.frombuffer(bytes(raw), dtype=dtype, count=count)
    return flat.reshape(shape, order="F" if fortran else "C").copy(order="K")


class _ArrayStub:
    """Built by ``numpy.core.multiarray._reconstruct(ndarray, shape, typecode)``; BUILD
    brings ``(version, shape, dtype, is_fortran, rawdata)``.  Replaced by the real array
    when the result is walked (see :func:`_finish`)."""

    def __init__(self):
        self.array = None

    def __setstate__(self, state):
        if not isinstance(state, tuple) or len(state) not in (4, 5):
            raise pickle.UnpicklingError("malformed numpy array state")
        if len(state) == 5:
            state = state[1:]
        shape, dtype, fortran, raw = state
        self.array = _array_from_bytes(raw, _dtype_of(dtype), shape, bool(fortran))


def _np_reconstruct(cls, shape, typecode):
    if cls is not _NDARRAY:
        raise pickle.UnpicklingError("numpy _reconstruct of something other than numpy.ndarray")
    return _ArrayStub()


def _np_scalar(dtype, raw=None):
    dtype = _dtype_of(dtype)
    if raw is None:
        raise pickle.UnpicklingError("numpy scalar without data")
    return _array_from_bytes(raw, dtype, ())[()]


def _np_frombuffer(buf, dtype, shape, order):
    order = _as_text(order, "numpy order")
    if isinstance(buf, pickle.PickleBuffer):
        buf = bytes(buf.raw())
    return _array_from_bytes(buf, _dtype_of(dtype), shape, order == "F")


def _codecs_encode(text, encoding="utf-8"):
    # Python 3 writes bytes at protocols 0-2 as _codecs.encode(latin1_text, 'latin1')
    encoding = _as_text(encoding, "encoding")
    if not isinstance(text, str) or encoding.lower().replace("_", "-") not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError("_codecs.encode is only accepted for latin-1 byte strings")
    return text.encode("latin-1")


def _reconstructor(cls, base, state):
    # copy_reg._reconstructor(cls, base, state): only for whitelisted builtin classes (not
    # bytearray: bytearray(state) with an integer state allocates that many bytes)
    if not isinstance(cls, type) or cls not in (set, frozenset, list, dict, tuple):
        raise pickle.UnpicklingError("copy_reg._reconstructor of a non-builtin class")
    return cls() if state is None else cls(state)


def _bytearray(data=b"", encoding=None):
    # Python 2 pickles a bytearray as bytearray(latin-1 text, 'latin-1'), Python 3 at
    # protocols 0-2 as bytearray(bytes); bytearray(n) would allocate n bytes of nothing
    if isinstance(data, str) and encoding is not None:
        encoding = _as_text(encoding, "encoding")
        if encoding.lower().replace("_", "-") in ("latin1", "latin-1"):
            return bytearray(data.encode("latin-1"))
    if isinstance(data, (bytes, bytearray)) and encoding is None:
        return bytearray(data)
    raise pickle.UnpicklingError(
        f"bytearray() of a {type(data).__name__} (a size or other "
        "non-byte data): only byte strings are accepted"
    )


def _complex(real=0.0, imag=0.0):
    if not all(isinstance(v, (int, float)) for v in (real, imag)):
        raise pickle.UnpicklingError("complex() of non-numbers")
    return complex(real, imag)


_BUILTIN_NAMES = {
    # immutable builtin types are handed over as they are
    "set": set,
    "frozenset": frozenset,
    "bytearray": _SafeCallable("bytearray", _bytearray),
    "complex": _SafeCallable("complex", _complex),
    "object": _OBJECT,
}

_NUMPY_MODULES = ("numpy.core.multiarray", "numpy._core.multiarray")

#: (module, name) -> the safe object handed to the unpickler instead of the real one
_ALLOWED = {}
for _module in ("__builtin__", "builtins"):
    for _name, _obj in _BUILTIN_NAMES.items():
        _ALLOWED[(_module, _name)] = _obj
for _module in ("copy_reg", "copyreg"):
    _ALLOWED[(_module, "_reconstructor")] = _SafeCallable("copy_reg._reconstructor", _reconstructor)
_ALLOWED[("_codecs", "encode")] = _SafeCallable("_codecs.encode", _codecs_encode)
for _module in _NUMPY_MODULES:
    _ALLOWED[(_module, "_reconstruct")] = _SafeCallable("numpy _reconstruct", _np_reconstruct)
    _ALLOWED[(_module, "scalar")] = _SafeCallable("numpy scalar", _np_scalar)
for _module in ("numpy.core.numeric", "numpy._core.numeric"):
    _ALLOWED[(_module, "_frombuffer")] = _SafeCallable("numpy _frombuffer", _np_frombuffer)
_ALLOWED[("numpy", "dtype")] = _SafeCallable("numpy.dtype", lambda *args: _DtypeStub(*args))
_ALLOWED[("numpy", "ndarray")] = _NDARRAY


class _PlainDataUnpickler(pickle.Unpickler):
    """The C unpickler with every global lookup going through :data:`_ALLOWED`.

    Overriding ``find_class`` also disables ``fix_imports``' renaming, so both the Python-2
    (``__builtin__``, ``copy_reg``) and Python-3 spellings are listed explicitly.
    """

    def __init__(self, file, path):
        super().__init__(file, encoding="bytes")
        self._path = path

    def find_class(self, module, name):
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise LegacyInputError(self._path, _REFUSED.format(module, name)) from None

    def persistent_load(self, pid):
        raise LegacyInputError(
            self._path, "refused to unpickle a persistent id: only plain data is allowed"
        )


# ---------------------------------------------------------------------------
# decoding pass
# ---------------------------------------------------------------------------


def _where(trail):
    if not trail:
        return "the top-level value"
    if len(trail) > 8:  # a self-containing list would give an endless trail
        return "".join(trail[:4]) + "..." + "".join(trail[-2:])
    return "".join(trail)


def _decode_bytes(value: bytes, trail, path):
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as err:
        raise LegacyInputError(
            path,
            f"{_where(trail)}: byte string {value[:40]!r} is not UTF-8 text "
            f"(byte 0x{value[err.start]:02x} at position {err.start})",
        ) from None


def _finish(obj, path, trail=(), depth=0, memo=None):
    """Decode byte strings to str, replace numpy stubs, check nesting depth.

    ``memo`` (id -> result) makes a container shared through the pickle memo finish once:
    a pickle of n small tuples each holding the previous one twice is 2**n paths deep when
    walked as a tree (the pickle form of the "billion laughs"), but n objects here.
    """
    if memo is None:
        memo = {}
    if depth > MAX_DEPTH:
        raise LegacyInputError(
            path,
            f"{_where(trail)}: data nested more than {MAX_DEPTH} levels deep "
            "(or containing itself): not GroundHog data",
        )
    if isinstance(obj, bytes):
        return _decode_bytes(obj, trail, path)
    if isinstance(obj, (str, int, float, complex, type(None), np.ndarray, np.generic, bytearray)):
        return obj
    if isinstance(obj, _ArrayStub):
        if obj.array is None:
            raise LegacyInputError(path, f"{_where(trail)}: numpy array without data")
        return obj.array
    if id(obj) in memo:
        return memo[id(obj)]
    if isinstance(obj, dict):
        out = {}
        for n, (key, value) in enumerate(obj.items()):
            key_trail = trail + (f"[key {key!r}]",)
            new_key = _finish(key, path, key_trail, depth + 1, memo)
            shown = new_key if isinstance(new_key, (str, int, float)) else f"#{n}"
            new_value = _finish(value, path, trail + (f"[{shown!r}]",), depth + 1, memo)
            if new_key in out:
                raise LegacyInputError(
                    path, f"{_where(trail)}: key {new_key!r} occurs twice once decoded"
                )
            out[new_key] = new_value
        memo[id(obj)] = out
        return out
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = [_finish(v, path, trail + (f"[{i}]",), depth + 1, memo) for i, v in enumerate(obj)]
        memo[id(obj)] = out = type(obj)(items)
        return out
    raise LegacyInputError(path, f"{_where(trail)}: {type(obj).__name__} object is not plain data")


# ---------------------------------------------------------------------------
# entry point
# ---------------------------------------------------------------------------


def safe_load_pickle(path: str | os.PathLike[str], max_bytes: int = MAX_PICKLE_BYTES) -> Any:
    """Load a (Python-2) pickle holding only plain data; never runs code from it.

    Allowed: dict, list, tuple, str/bytes (byte strings decoded as UTF-8), int, float,
    bool, None, set/frozenset, complex, and numpy scalars/arrays of numeric or text dtype
    (rebuilt by our own code from the raw bytes).  Any other global name, persistent ids,
    truncated or corrupt data, nesting beyond :data:`MAX_DEPTH` and files over
    ``max_bytes`` raise :class:`LegacyInputError` naming the file.
    """
    path = Path(path)
    check_special(path, "a pickle")  # a FIFO or device by type, before any open
    try:
        size = os.path.getsize(path)
    except OSError as err:
        raise LegacyInputError(path, f"cannot read: {err.strerror or err}") from None
    if size > max_bytes:
        raise LegacyInputError(
            path, f"file is {size} bytes, more than the {max_bytes} accepted for a pickle"
        )
    if size == 0:
        raise LegacyInputError(path, "file is empty, not a pickle")
    budget.check(path, f"a pickle of {size} bytes", size)
    data = read_input(path, "a pickle", max_bytes)
    flat = flat_dict(data, budget.budget_bytes())  # a vocabulary, checked in one quick pass
    if flat is None:
        prescan(data, path)  # depth, hash keys, memo indices and memory, before building
    try:
        with warnings.catch_warnings():  # e.g. invalid escapes in a damaged protocol-0 string
            warnings.simplefilter("ignore")
            raw = _PlainDataUnpickler(io.BytesIO(data), path).load()
    except LegacyInputError:
        raise
    except RecursionError:
        raise LegacyInputError(path, "pickle nested too deeply") from None
    except MemoryError:
        raise LegacyInputError(
            path, "pickle declares more data than can be held (corrupt?)"
        ) from None
    except (EOFError, pickle.UnpicklingError) as err:
        raise LegacyInputError(
            path, f"truncated or corrupt pickle ({err or type(err).__name__})"
        ) from None
    except Exception as err:  # anything the C unpickler raises on malformed input
        raise LegacyInputError(path, f"corrupt pickle ({describe(err)})") from None
    if flat is not None:
        return _finish_flat(raw, path) if flat.byte_strings else raw
    with reading(path, "corrupt pickle"):  # rebuilding numpy values from the raw bytes
        try:
            data = _finish(raw, path)
        except RecursionError:
            raise LegacyInputError(path, "pickle nested too deeply") from None
        distinct, expanded = _sizes(data)
    if expanded > MAX_SHARING * distinct + (1 << 20):
        raise LegacyInputError(
            path,
            f"{distinct} objects that are {expanded} when expanded (the same "
            "containers referenced over and over): not GroundHog data",
        )
    return data


def _finish_flat(raw: dict, path) -> dict:
    """:func:`_finish` of a flat dict of scalars (:func:`.flat.flat_dict`): its byte strings
    decoded, without the trail each item's message would need; a byte string that is not
    UTF-8, or two keys that decode alike, go to :func:`_finish` for its message."""
    out = {}
    try:
        for key, value in raw.items():
            if type(key) is bytes:
                key = key.decode("utf-8")
            if type(value) is bytes:
                value = value.decode("utf-8")
            if key in out:
                break
            out[key] = value
        else:
            return out
    except UnicodeDecodeError:
        pass
    return _finish(raw, path)  # raises, naming the item


#: a container may be referenced from several places (the pickle memo), but data that
#: expands to more than this many times its objects (plus a million) is refused: any code
#: that walks it as a tree -- repr() in an error message, ==, json -- would take forever
MAX_SHARING = 4


def _sizes(obj, memo=None):
    """``(distinct, expanded)``: containers and leaves counted once each, and as a tree."""
    seen = {} if memo is None else memo
    if isinstance(obj, dict):
        children = list(obj.keys()) + list(obj.values())
    elif isinstance(obj, (list, tuple, set, frozenset)):
        children = obj
    else:
        return 1, 1
    if id(obj) in seen:
        return 0, seen[id(obj)]
    distinct, expanded = 1, 1
    for child in children:
        d, e = _sizes(child, seen)
        distinct += d
        expanded += e
    seen[id(obj)] = expanded
    return distinct, expanded
