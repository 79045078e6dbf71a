"""Hostile and broken versions of the real legacy files, and what every loader makes of them.

Used by ``tools/fuzz.py`` (thousands of seeded random cases, each in its own process with a
time and memory limit) and ``parity_tests/hardening/test_fuzz.py`` (hypothesis drives the same
mutators in-process).  The promise checked is the port's hardening guarantee: for any input
a loader either loads it, or raises ONE :class:`~groundhog_port.errors.LegacyInputError`
that names the file -- never another exception, a hang, a memory blow-up, or code from the
file being run.

Targets (one per loader; :data:`TARGETS`):

========  ==================================================================================
state     ``legacy_states.load_state`` -> ``ModelConfig.from_state`` -> ``open_experiment``
          with the case's real model, then one sentence parsed and scored
vocab     ``vocab.load_word2idx`` / ``load_idx2word``, then ``parse_input`` / rendering
model     ``checkpoint.read_npz`` / ``load_into`` via ``loading.open_experiment``
trace     ``trace.TraceFile`` + ``validate()`` (+ ``/sampler``, ``/train_step``)
bitext    ``data.read_h5_bitext`` + every batch of ``data.iter_h5_batches``
text      ``data.read_text_lines`` + every batch of ``data.iter_text_batches``
cli       ``groundhog-port inspect|score|translate`` in-process (``cli.main``) on a broken
          file: exit 0, or exit 2 with one ``error:`` line on stderr and no traceback
hostile   issue 25's classes against the loader each attacks
outputs   issue 25's special output targets (symbolic links and chains, dangling links,
          FIFOs, character devices, ``-``, ``/proc/self/fd/1``, directories, the source
          itself or a link to it, one file for two outputs, a partial file of another run)
          for ``translate``, sampling and ``score --scores``: exit 0 or one clean error,
          and nothing but a regular file of the run is replaced (``replaced`` otherwise)
collisions  issue 40: the output of every command that writes (translate, score, parity
          --json, reproduce --save-dir, archive --out, export, invert-dict, pkl2hdf5,
          shuffle-hdf5, preprocess, train) made to reach a file the run reads -- its own
          name, a link, a chain, a hard link, a partial file linked to it -- or a link inside
          the output folder, the folder inside the case: one clean error (exit 2) and every
          file of the case as it was (``replaced`` otherwise)
========  ==================================================================================

Mutations are byte-level (truncation at any offset, flipped/overwritten/inserted/deleted
bytes, 4/8-byte "interesting" integers over headers, empty and garbage files) and
format-aware: pickles whose ``__reduce__`` would run ``os.system``/``subprocess``/
``eval``/``exec``/``open``/``getattr`` chains to create a marker file (:data:`MARKER_NAME`
beside the case: its existence proves execution), deeply nested and exponentially shared
pickles, opcodes declaring huge sizes, state values of the wrong type or absurd size,
vocabularies with wrong entries, ``.npz`` models with float64/float16/int/string/object/
structured arrays, wrong shapes, NaN/Inf, missing/extra names and ``.npy`` headers
declaring huge shapes, HDF5 files with deleted/retyped datasets, hostile attributes,
chunked datasets declaring terabytes, external storage on ``/dev/zero`` and external links,
and text with bad UTF-8, NUL bytes, CRLF, lone CR, no final newline, empty and very long
lines.  Every mutation is a plain function of explicit parameters, so hypothesis can
drive it too.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import pickle
import random
import shutil
import struct
import sys
import tempfile
import traceback
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from groundhog_port.errors import (
    EXIT_INPUT,
    EXIT_OK,
    EXIT_PARTIAL,
    MAX_PATH,
    MAX_PROBLEM,
    LegacyInputError,
)
from groundhog_port.model.config import INT_KEYS
from parity_tests.support.command_lines import score_args, translate_args

#: a payload that runs creates this file in the case directory
MARKER_NAME = "EXECUTED"

OUTCOMES = (
    "loaded",
    "clean error",
    "unclear error",
    "CRASH",
    "hang",
    "memory",
    "executed",
    "replaced",
    "raw",
)
#: outcomes that break the guarantee ("raw": archive's report quotes a file outside ROOT,
#: holds a raw <script> or embeds a file that is not one of its plots -- issue 40)
FAILURES = ("unclear error", "CRASH", "hang", "memory", "executed", "replaced", "raw")


# ==============================================================================================
# The real files
# ==============================================================================================

REPO = Path(__file__).resolve().parents[2]


def legacy_root() -> Path:
    return Path(os.environ.get("GROUNDHOG_LEGACY_TRACES", REPO.parent / "shared" / "legacy_traces"))


@dataclass
class ExperimentFiles:
    """One experiment's files: state, model, vocabulary directory."""

    name: str
    state: Path
    model: Path
    data_dir: Path


class Fixtures:
    """The real files the cases are made from: ``fixtures/search`` (always) and the recorded
    cases under :func:`legacy_root` (when present)."""

    def __init__(self, fixture_dir=None, legacy=None, scratch=None):
        self.fixture_dir = Path(fixture_dir or REPO / "fixtures" / "search")
        self.legacy = Path(legacy) if legacy is not None else legacy_root()
        self._scratch = Path(scratch) if scratch else None
        self._bytes = {}
        exps = [
            ExperimentFiles(
                "fixture",
                self.fixture_dir / "search_state.pkl",
                self.fixture_dir / "search_model.npz",
                self.fixture_dir,
            )
        ]
        if self.legacy.is_dir():
            for case in sorted(self.legacy.iterdir()):
                states = sorted(case.glob("*_state.pkl"))
                models = sorted(case.glob("*_model.npz"))
                if states and models:
                    exps.append(ExperimentFiles(case.name, states[0], models[0], case))
        self.experiments = exps
        self.main = exps[0]
        self.vocab_files = sorted(self.fixture_dir.glob("*vocab.*.pkl"))
        self.text_files = [self.fixture_dir / "test.en", self.fixture_dir / "test.fr"]
        data = self.legacy / "data"
        self.bitext_pairs = []
        for a, b in (
            ("binarized_text.shuffled.en.h5", "binarized_text.shuffled.fr.h5"),
            ("binarized_text.en.h5", "binarized_text.fr.h5"),
        ):
            if (data / a).is_file() and (data / b).is_file():
                self.bitext_pairs.append((data / a, data / b))
        self.full_traces = (
            sorted(p for p in self.legacy.glob("*/trace.h5")) if self.legacy.is_dir() else []
        )
        self._small_trace = None

    @property
    def has_traces(self):
        return bool(self.full_traces)

    @property
    def has_bitexts(self):
        return bool(self.bitext_pairs)

    def read(self, path) -> bytes:
        path = Path(path)
        if path not in self._bytes:
            self._bytes[path] = path.read_bytes()
        return self._bytes[path]

    def scratch(self) -> Path:
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="gh-fuzz-fixtures-"))
            atexit.register(shutil.rmtree, self._scratch, True)
        return self._scratch

    def small_trace(self) -> Path:
        """A few records of the first real trace, copied group by group with h5py (the full
        files take a second to validate; this one a few milliseconds)."""
        if self._small_trace is None:
            self._small_trace = make_small_trace(
                self.full_traces[0], self.scratch() / "small_trace.h5"
            )
        return self._small_trace

    def trace_files(self):
        return [self.small_trace()] + self.full_traces if self.has_traces else []


def make_small_trace(src, dst) -> Path:
    import h5py

    with h5py.File(src, "r") as f, h5py.File(dst, "w") as g:
        for k, v in f.attrs.items():
            g.attrs[k] = v
        for top, keep in (
            ("pairs", ("0", "1")),
            ("repr", ("0",)),
            ("steps", ("0",)),
            ("batch_all", ("0",)),
        ):
            if top in f:
                grp = g.create_group(top)
                for k, v in f[top].attrs.items():
                    grp.attrs[k] = v
                for k in keep:
                    if k in f[top]:
                        f.copy(f[top][k], grp, name=k)
        if "batch" in f:
            f.copy(f["batch"], g, name="batch")
        if "beam" in f:
            beam = g.create_group("beam")
            for label in list(f["beam"].keys())[:2]:
                lg = beam.create_group(label)
                for k, v in f["beam"][label].attrs.items():
                    lg.attrs[k] = v
                for i in ("0", "1", "35"):
                    if i in f["beam"][label]:
                        f.copy(f["beam"][label][i], lg, name=i)
    return Path(dst)


# ==============================================================================================
# Byte-level mutators (plain functions of their parameters)
# ==============================================================================================

INTERESTING_INTS = (
    0,
    1,
    0x7F,
    0x80,
    0xFF,
    0x7FFF,
    0x8000,
    0xFFFF,
    0x7FFFFFFF,
    0x80000000,
    0xFFFFFFFF,
    0x7FFFFFFFFFFFFFFF,
    0xFFFFFFFFFFFFFFFF,
    1 << 40,
    1 << 33,
)


def truncate(data: bytes, offset: int) -> bytes:
    return data[: max(0, min(offset, len(data)))]


def flip(data: bytes, edits) -> bytes:
    """XOR ``data[pos]`` with ``x`` for each ``(pos, x)`` (positions taken modulo the length)."""
    if not data:
        return data
    out = bytearray(data)
    for pos, x in edits:
        out[pos % len(out)] ^= (x & 0xFF) or 0x01
    return bytes(out)


def overwrite(data: bytes, pos: int, chunk: bytes) -> bytes:
    if not data:
        return chunk
    pos %= len(data)
    return data[:pos] + chunk + data[pos + len(chunk) :]


def insert(data: bytes, pos: int, chunk: bytes) -> bytes:
    pos = pos % (len(data) + 1)
    return data[:pos] + chunk + data[pos:]


def delete(data: bytes, pos: int, length: int) -> bytes:
    if not data:
        return data
    pos %= len(data)
    return data[:pos] + data[pos + max(1, length) :]


def duplicate(data: bytes, pos: int, length: int, at: int) -> bytes:
    if not data:
        return data
    pos %= len(data)
    return insert(data, at, data[pos : pos + max(1, length)])


def put_int(data: bytes, pos: int, value: int, width: int, big_endian=False) -> bytes:
    value &= (1 << (8 * width)) - 1
    return overwrite(data, pos, value.to_bytes(width, "big" if big_endian else "little"))


# ==============================================================================================
# Pickles that would run code (each creates ``marker`` if it ever runs)
# ==============================================================================================


class Reduce:
    """Pickles as ``fn(*args)`` (what a hostile ``__reduce__`` does)."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args

    def __call__(self, *args):  # only so that pickle accepts a Reduce as the callable
        raise RuntimeError("a payload stand-in is never called")


def _p0str(s: str) -> bytes:
    return b"S" + repr(s).encode() + b"\n"


def payload_pickles(marker) -> dict[str, bytes]:
    """``{name: pickle bytes}``: every way we know to make an unpickler call something.

    Each one would create ``marker``; none may when loaded by the port.
    """
    import builtins
    import subprocess

    m = str(marker)
    touch = f"touch {m}"
    code = f"open({m!r}, 'w').close()"
    out = {
        # protocol 0, written by hand as Python 2's cPickle would
        "os.system (p0)": b"cos\nsystem\n(" + _p0str(touch) + b"tR.",
        "posix.system (p0)": b"cposix\nsystem\n(" + _p0str(touch) + b"tR.",
        "subprocess.getoutput (p0)": b"csubprocess\ngetoutput\n(" + _p0str(touch) + b"tR.",
        "subprocess.Popen (p0)": b"csubprocess\nPopen\n((" + _p0str("touch") + _p0str(m) + b"ltR.",
        "__builtin__.eval (p0)": b"c__builtin__\neval\n(" + _p0str(code) + b"tR.",
        "builtins.exec (p0)": b"cbuiltins\nexec\n(" + _p0str(code) + b"tR.",
        "__builtin__.open (p0)": b"c__builtin__\nopen\n(" + _p0str(m) + _p0str("w") + b"tR.",
        "getattr(__import__('os'), 'system') (p0)": (
            b"c__builtin__\ngetattr\n(c__builtin__\n__import__\n("
            + _p0str("os")
            + b"tR"
            + _p0str("system")
            + b"tR("
            + _p0str(touch)
            + b"tR."
        ),
        "getattr chain builtins.__dict__['eval'] (p0)": (
            b"c__builtin__\ngetattr\n(c__builtin__\ngetattr\n(c__builtin__\n__import__\n("
            + _p0str("builtins")
            + b"tR"
            + _p0str("__dict__")
            + b"tR"
            + _p0str("get")
            + b"tR("
            + _p0str("eval")
            + b"tR("
            + _p0str(code)
            + b"tR."
        ),
        "INST os.system (p0)": b"(" + _p0str(touch) + b"ios\nsystem\n.",
        "OBJ os.system (p1)": b"(cos\nsystem\n" + _p0str(touch) + b"o.",
        "numpy runstring gadget (p0)": (
            b"cnumpy.testing._private.utils\nrunstring\n(" + _p0str(code) + b"(dtR."
        ),
        "copy_reg._reconstructor(os.system) (p0)": (
            b"ccopy_reg\n_reconstructor\n(cos\nsystem\nc__builtin__\nobject\n"
            + _p0str(touch)
            + b"tR."
        ),
        "object.__new__ + BUILD __setstate__ (p0)": (
            b"ccopy_reg\n_reconstructor\n(c__builtin__\nset\nc__builtin__\nobject\nNtR"
            b"(dS'__setstate__'\ncos\nsystem\nsb" + _p0str(touch) + b"b."
        ),
        "EXT1 unregistered code (p2)": b"\x80\x02\x82\x01)R.",
        "persistent id (p0)": b"P" + touch.encode() + b"\n.",
        "payload as state value (p0)": (
            b"(dp0\nS'dim'\np1\ncos\nsystem\n(" + _p0str(touch) + b"tRp2\ns."
        ),
    }
    for proto in (2, 4, 5):
        out[f"os.system (p{proto})"] = pickle.dumps(Reduce(os.system, touch), protocol=proto)
        out[f"subprocess.call (p{proto})"] = pickle.dumps(
            Reduce(subprocess.call, ["touch", m]), protocol=proto
        )
        out[f"builtins.eval (p{proto})"] = pickle.dumps(Reduce(builtins.eval, code), protocol=proto)
        out[f"builtins.exec (p{proto})"] = pickle.dumps(Reduce(builtins.exec, code), protocol=proto)
        out[f"nested in a dict (p{proto})"] = pickle.dumps(
            {"dim": 32, "x": [1, {"y": Reduce(os.system, touch)}]}, protocol=proto
        )
        out[f"getattr(__import__('os'), 'system') (p{proto})"] = pickle.dumps(
            Reduce(Reduce(getattr, Reduce(__import__, "os"), "system"), touch), protocol=proto
        )
    # a numpy object array holding a payload (what np.save(allow_pickle=True) would write)
    arr = np.empty(1, dtype=object)
    arr[0] = Reduce(os.system, touch)
    out["numpy object array (p2)"] = pickle.dumps(arr, protocol=2)
    return out


#: payloads that do not create the marker even under a plain ``pickle.loads`` (refused by
#: the pickle machinery itself, or asynchronous: ``Popen`` returns before ``touch`` ran); the
#: others demonstrably do (parity_tests/hardening/test_fuzz.py checks it), so their marker is proof
NOT_DIRECTLY_EXECUTING = frozenset(
    {
        "subprocess.Popen (p0)",
        "copy_reg._reconstructor(os.system) (p0)",
        "object.__new__ + BUILD __setstate__ (p0)",
        "EXT1 unregistered code (p2)",
        "persistent id (p0)",
    }
)


def payload_objects(marker) -> dict[str, object]:
    """Objects whose pickling (e.g. inside an object array in an ``.npz``) carries a payload."""
    import builtins

    m = str(marker)
    return {
        "os.system": Reduce(os.system, f"touch {m}"),
        "builtins.exec": Reduce(builtins.exec, f"open({m!r}, 'w').close()"),
    }


def deep_list_pickle(depth: int) -> bytes:
    """``[[[...]]]`` ``depth`` deep (EMPTY_LIST x depth, APPEND x depth-1)."""
    return b"\x80\x02" + b"]" * depth + b"a" * (depth - 1) + b"."


def deep_tuple_pickle(depth: int) -> bytes:
    return b"\x80\x02)" + b"\x85" * depth + b"."


def deep_dict_pickle(depth: int) -> bytes:
    """``{'k': {'k': ...}}`` built from the inside (protocol 0)."""
    return b"(dp0\n" + b"S'k'\n(d" * depth + b"s" * depth + b"."


def shared_dag_pickle(levels: int, wrap_in_state: bool = False) -> bytes:
    """``a0 = []; a(i) = (a(i-1), a(i-1))``: ``levels`` small objects that are 2**levels
    references deep when walked as a tree (the pickle version of the billion laughs)."""
    levels = max(1, min(levels, 250))
    out = bytearray(b"\x80\x02")
    if wrap_in_state:
        out += b"}X\x03\x00\x00\x00dim"
    out += b"]q\x000"  # a0 = [] (memo 0), popped
    for i in range(1, levels):  # a(i) = (a(i-1), a(i-1)) (memo i), popped
        out += b"h" + bytes([i - 1]) + b"h" + bytes([i - 1]) + b"\x86q" + bytes([i]) + b"0"
    out += b"h" + bytes([levels - 1])
    if wrap_in_state:
        out += b"s"  # {'dim': a(levels-1)}
    return bytes(out) + b"."


def huge_size_pickle(opcode: str, size: int) -> bytes:
    """A pickle whose first opcode declares ``size`` bytes it does not hold."""
    size = max(0, size)
    heads = {
        "BINBYTES8": b"\x80\x04\x8e" + struct.pack("<Q", size),
        "BINUNICODE8": b"\x80\x04\x8d" + struct.pack("<Q", size),
        "BYTEARRAY8": b"\x80\x05\x96" + struct.pack("<Q", size),
        "BINSTRING": b"T" + struct.pack("<I", size & 0xFFFFFFFF),
        "BINUNICODE": b"X" + struct.pack("<I", size & 0xFFFFFFFF),
        "LONG4": b"\x80\x02\x8b" + struct.pack("<I", size & 0x7FFFFFFF),
        "FRAME": b"\x80\x04\x95" + struct.pack("<Q", size),
    }
    return heads[opcode] + b"abc."


def long_int_pickle(digits: int) -> bytes:
    return b"L" + b"9" * digits + b"L\n."


HUGE_OPCODES = (
    "BINBYTES8",
    "BINUNICODE8",
    "BYTEARRAY8",
    "BINSTRING",
    "BINUNICODE",
    "LONG4",
    "FRAME",
)


# ----------------------------------------------------------------------------------------------
# Issue 25: pickles that are small, well formed, and hurt (nesting, sized constructors, opcode
# floods, hash collisions); each is refused before the unpickler builds it (legacy_states.prescan)
# ----------------------------------------------------------------------------------------------


def nested_key_pickle(depth: int, kind: str = "tuple") -> bytes:
    """``{key: 1}`` whose key is a tuple nested ``depth`` deep (``kind="tuple"``), or a
    frozenset holding one (``"frozenset"``): inserting it hashes it, and the C hash recurses
    once per level (a SIGSEGV at 200,000 before issue 25)."""
    key = b")" + b"\x85" * depth
    if kind == "frozenset":
        return b"\x80\x04}(" + key + b"\x91K\x01s."
    return b"\x80\x02}" + key + b"K\x01s."


def sized_constructor_pickle(size: int, via: str = "call") -> bytes:
    """``bytearray(size)`` (``via="call"``) or ``copy_reg._reconstructor(bytearray, object,
    size)`` (``"reconstructor"``): 39 to 84 bytes asking for ``size`` bytes."""
    if via == "reconstructor":
        return (
            b"ccopy_reg\n_reconstructor\n(c__builtin__\nbytearray\nc__builtin__\nobject\n"
            b"I%d\ntR." % size
        )
    return b"c__builtin__\nbytearray\n(I%d\ntR." % size


FLOOD_OPCODES = {
    "EMPTY_SET": b"\x8f",
    "EMPTY_DICT": b"}",
    "EMPTY_LIST": b"]",
    "MARK": b"(",
    "EMPTY_TUPLE+DUP": b"2",
}


def opcode_flood_pickle(opcode: str, nbytes: int) -> bytes:
    """``nbytes`` of one object-making opcode (protocol 4 for ``EMPTY_SET``): each byte is
    an object of up to 216 bytes (5 MB of ``EMPTY_SET`` took 2.7 GB and 71 s)."""
    head = b"\x80\x04" + (b")" if opcode == "EMPTY_TUPLE+DUP" else b"")
    return head + FLOOD_OPCODES[opcode] * max(0, nbytes) + b"."


#: ints that differ by a multiple of this hash alike (CPython: hash(k) = k mod 2**61 - 1)
HASH_MODULUS = 2**61 - 1


def colliding_ivocab_pickle(n: int, base: int = 5, protocol: int = 2) -> bytes:
    """An id -> word dict of ``n`` int keys ``base + i * (2**61 - 1)``, all of one hash:
    each insertion compares with every earlier key (40,000 took 163 s before issue 25).
    ``protocol`` 0 writes them as text (``L...L``), 2 as ``LONG1``."""
    out = bytearray(b"\x80\x02}(" if protocol >= 2 else b"(dp0\n")
    for i in range(n):
        k = base + i * HASH_MODULUS
        if protocol >= 2:
            kb = k.to_bytes((k.bit_length() + 8) // 8, "little", signed=True)
            out += b"\x8a" + bytes([len(kb)]) + kb + b"X\x01\x00\x00\x00w"
        else:
            out += b"L%dL\nVw\ns" % k
    return bytes(out + (b"u." if protocol >= 2 else b"."))


# ==============================================================================================
# Format-aware mutators
# ==============================================================================================

HOSTILE_VALUES = (
    -1,
    0,
    1,
    3,
    10**9,
    2**63,
    10**30,
    -(2**70),
    1.5,
    float("nan"),
    float("inf"),
    "32",
    "",
    None,
    True,
    False,
    [],
    {},
    [32],
    (32,),
    b"\xff\xfe",
    "lambda x: __import__('os').system('touch MARKER')",
    "Maxout(10**9)",
    "Maxout(0)",
    "Maxout(-2)",
    "Maxout(2)",
    "lambda x: x",
    "TT.tanh",
    "LSTMLayer",
    "RecurrentLayerWithSearch",
    "RecurrentLayer",
    "/etc/passwd",
    "/dev/zero",
    "x" * 5000,
    np.int64(7),
    np.float32(2.0),
    np.array([1, 2]),
)

#: the state keys the fuzzer gives hostile values: the whole numbers ModelConfig checks first,
#: then every other key the port reads
STATE_KEYS = (
    *INT_KEYS,
    "seqlen",
    "bs",
    "maxout_part",
    "unary_activ",
    "activ",
    "rec_gater",
    "rec_reseter",
    "rank_n_activ",
    "enc_rec_layer",
    "dec_rec_layer",
    "rec_layer",
    "search",
    "forward",
    "backward",
    "last_forward",
    "last_backward",
    "bigram",
    "bias_code",
    "decoding_inputs",
    "deep_out",
    "rec_gating",
    "rec_reseting",
    "oov",
    "word_indx",
    "word_indx_trgt",
    "indx_word",
    "indx_word_target",
    "source",
    "target",
    "sort_k_batches",
    "trim_batches",
    "check_first_word",
    "encoder_stack",
    "dropout",
    "level",
    "seed",
)


def state_with(state: dict, key, value, protocol=0, marker=None) -> bytes:
    """The state re-pickled with ``state[key] = value`` (``MARKER`` in strings -> ``marker``)."""
    st = dict(state)
    if isinstance(value, str) and marker is not None:
        value = value.replace("MARKER", str(marker))
    st[key] = value
    return pickle.dumps(st, protocol=protocol)


def state_without(state: dict, key, protocol=0) -> bytes:
    st = dict(state)
    st.pop(key, None)
    return pickle.dumps(st, protocol=protocol)


def vocab_with(vocab: dict, edit: str, key=None, value=None, protocol=2) -> bytes:
    """A vocabulary edited: ``set`` ``vocab[key] = value``, ``del``, ``empty``, ``list``,
    ``swap`` (keys <-> values), ``nested`` (the dict inside a list)."""
    v = dict(vocab)
    if edit == "set":
        v[key] = value
    elif edit == "del" and v:
        v.pop(next(iter(v)))
    elif edit == "empty":
        v = {}
    elif edit == "list":
        v = list(v.items())
    elif edit == "swap":
        v = {b: a for a, b in v.items()}
    elif edit == "nested":
        v = [v]
    return pickle.dumps(v, protocol=protocol)


def read_npz_arrays(data: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def npz_bytes(arrays: dict, compressed=False) -> bytes:
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return buf.getvalue()


def npy_member(descr: str, shape, fortran=False, payload: bytes = b"") -> bytes:
    """A hand-made ``.npy`` member: the header declares ``descr``/``shape``, ``payload``
    follows (so the header may promise far more data than there is)."""
    header = repr({"descr": descr, "fortran_order": fortran, "shape": tuple(shape)}).encode(
        "latin1"
    )
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + b" " * pad + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + payload


def npz_with_members(arrays: dict, raw_members: dict) -> bytes:
    """An npz of ``arrays`` plus raw ``{name: npy bytes}`` members written as they are."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, a in arrays.items():
            m = io.BytesIO()
            np.lib.format.write_array(m, np.asanyarray(a), allow_pickle=True)
            z.writestr(name + ".npy", m.getvalue())
        for name, raw in raw_members.items():
            z.writestr(name + ".npy", raw)
    return buf.getvalue()


def _deflate_zeros(head: bytes, nbytes: int):
    """Raw deflate of ``head`` followed by ``nbytes`` zeros, made from one compressed
    megabyte repeated (each full flush resets the compressor, so equal input gives equal
    output): a 2 GB member costs a few milliseconds to make."""
    import zlib

    mb = 1 << 20
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = c.compress(head + bytes(min(nbytes, mb))) + c.flush(zlib.Z_FULL_FLUSH)
    rest, tail = divmod(max(0, nbytes - mb), mb)
    again = c.compress(bytes(mb)) + c.flush(zlib.Z_FULL_FLUSH)
    return first + again * rest + c.compress(bytes(tail)) + c.flush()


def npz_with_deflate_bomb(npz: bytes, name: str, declared: int) -> bytes:
    """``npz`` (stored members, as numpy.savez writes) plus a deflate member ``name``.npy of
    ``declared`` bytes of float32 zeros (a 2.1 MB file declaring 2 GB took 2.7 GB before
    issue 25: every member was decompressed before the names were checked).  Its CRC is not
    computed (0): a reader that gets that far has already decompressed it."""
    header = npy_member("<f4", (declared // 4,))
    body = _deflate_zeros(header, declared // 4 * 4)
    size = len(header) + declared // 4 * 4
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(npz)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info))
    data = bytearray(out.getvalue())
    eocd = data.rfind(b"PK\x05\x06")
    cd_size, cd_offset = struct.unpack("<II", data[eocd + 12 : eocd + 20])
    central, entries = (
        data[cd_offset : cd_offset + cd_size],
        struct.unpack("<H", data[eocd + 10 : eocd + 12])[0],
    )
    fname = (name + ".npy").encode()
    local_at = cd_offset
    local = (
        struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, 0, 8, 0, 0, 0, len(body), size, len(fname), 0)
        + fname
    )
    entry = (
        struct.pack(
            "<4s6H3I5H2I",
            b"PK\x01\x02",
            20,
            20,
            0,
            8,
            0,
            0,
            0,
            len(body),
            size,
            len(fname),
            0,
            0,
            0,
            0,
            0,
            local_at,
        )
        + fname
    )
    new_cd_offset = local_at + len(local) + len(body)
    end = struct.pack(
        "<4s4H2IH",
        b"PK\x05\x06",
        0,
        0,
        entries + 1,
        entries + 1,
        len(central) + len(entry),
        new_cd_offset,
        0,
    )
    return bytes(data[:cd_offset]) + local + body + bytes(central) + entry + end


def h5_declared_size_lie(path: Path, n: int, dtype: str = "uint8", chunk: int = 1 << 20) -> None:
    """A GroundHog bitext ``.h5`` (``/phrases``, ``/indices``) whose ``/phrases`` declares
    ``n`` elements of ``dtype``, all zeros, gzip-compressed chunk by chunk (the same
    compressed chunk written directly ``n / chunk`` times): 3e8 uint8 store ~300 KB, pass
    the stored-vs-declared check as 300 MB, and the loader's ``.astype(int64)`` made 2.4 GB
    of them (5.2 GB through ``score``, exit 0) before issue 25."""
    import zlib

    import h5py

    with h5py.File(path, "w") as f:
        ds = f.create_dataset(
            "phrases", shape=(n,), dtype=dtype, chunks=(chunk,), compression="gzip"
        )
        packed = zlib.compress(bytes(chunk * np.dtype(dtype).itemsize), 9)
        for start in range(0, n, chunk):
            ds.id.write_direct_chunk((start,), packed)
        rows = np.zeros(2, dtype=[("pos", "<i8"), ("length", "<i8")])
        rows["length"] = 1
        f.create_dataset("indices", data=rows)


NPZ_EDITS = (
    "float64",
    "float16",
    "int32",
    "int64",
    "bool",
    "complex64",
    "big-endian",
    "string",
    "structured",
    "object",
    "transpose",
    "flatten",
    "extra-dim",
    "drop-row",
    "empty",
    "scalar",
    "nan",
    "inf",
    "-inf",
    "delete",
    "extra",
    "rename",
    "huge-header",
    "lying-header",
    "bad-header",
    "fortran",
)


def npz_edit(arrays: dict, edit: str, name: str, rng: random.Random, marker=None) -> bytes:
    """The model's arrays with parameter ``name`` changed by ``edit`` (one of
    :data:`NPZ_EDITS`), as npz bytes."""
    a = {k: v.copy() for k, v in arrays.items()}
    x = a[name]
    raw = {}
    if edit in ("float64", "float16", "int32", "int64", "bool", "complex64"):
        a[name] = x.astype(edit)
    elif edit == "big-endian":
        a[name] = x.astype(">f4")
    elif edit == "string":
        a[name] = x.astype("U8")
    elif edit == "structured":
        s = np.zeros(x.shape, dtype=[("v", "<f4")])
        s["v"] = x
        a[name] = s
    elif edit == "object":
        o = np.empty(x.shape, dtype=object)
        o.flat[0] = payload_objects(marker or "/nonexistent/EXECUTED")["os.system"]
        a[name] = o
    elif edit == "transpose":
        a[name] = x.T.copy() if x.ndim > 1 else x[:, None]
    elif edit == "flatten":
        a[name] = x.ravel()
    elif edit == "extra-dim":
        a[name] = x[None]
    elif edit == "drop-row":
        a[name] = x[:-1]
    elif edit == "empty":
        a[name] = np.zeros((0,) + x.shape[1:], dtype=x.dtype)
    elif edit == "scalar":
        a[name] = np.float32(1.0)
    elif edit in ("nan", "inf", "-inf"):
        y = x.copy()
        for _ in range(rng.randint(1, 5)):
            y.flat[rng.randrange(y.size)] = float(edit)
        a[name] = y
    elif edit == "delete":
        del a[name]
    elif edit == "extra":
        a["W_0_unknown_layer"] = np.zeros((3, 3), dtype=np.float32)
    elif edit == "rename":
        a[name + "_renamed"] = a.pop(name)
    elif edit == "huge-header":
        del a[name]
        shape = rng.choice([(2**40,), (2**31, 2**10), (10**12, 16), (2**28,), (65536, 65536)])
        raw[name] = npy_member("<f4", shape, payload=x.tobytes()[:64])
    elif edit == "lying-header":
        del a[name]
        raw[name] = npy_member(
            rng.choice(["<f4", "<f8", "|O", "<U99999999", "|V99999999"]),
            x.shape,
            payload=x.tobytes(),
        )
    elif edit == "bad-header":
        del a[name]
        bad = rng.choice(
            [
                b"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
                b"{'descr': '<f4'}",
                b"__import__('os').system('touch x')",
                b"{'descr': '<f4', 'fortran_order': False, 'shape': (1e9,)}",
                b"[" * 5000,
                b"{'descr': '<f4', 'fortran_order': 'x', 'shape': ()}",
            ]
        )
        raw[name] = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(bad) + 1) + bad + b"\n"
    elif edit == "fortran":
        a[name] = np.asfortranarray(x)
    if raw:
        return npz_with_members(a, raw)
    return npz_bytes(a, compressed=rng.random() < 0.2)


H5_EDITS = (
    "delete",
    "retype",
    "reshape",
    "scalar",
    "to-group",
    "huge-chunked",
    "external-zero",
    "external-link",
    "soft-loop",
    "attr",
    "vlen-str",
    "empty",
    "values",
)


def h5_edit(path: Path, edit: str, rng: random.Random, kind: str) -> None:
    """Change the HDF5 file at ``path`` in place (``kind``: 'trace' or 'bitext')."""
    import h5py

    with h5py.File(path, "r+") as f:
        datasets, groups = [], []
        f.visititems(lambda n, o: (datasets if isinstance(o, h5py.Dataset) else groups).append(n))
        if not datasets:
            return
        name = rng.choice(datasets)
        if kind == "bitext" and rng.random() < 0.6:
            name = rng.choice(["phrases", "indices"])
        ds = f[name]
        parent, leaf = name.rpartition("/")[0], name.rpartition("/")[2]
        pg = f[parent] if parent else f

        def replace(data=None, **kw):
            del pg[leaf]
            if data is None:
                pg.create_dataset(leaf, **kw)
            else:
                pg.create_dataset(leaf, data=data, **kw)

        if edit == "delete":
            del pg[leaf]
        elif edit == "retype":
            data = ds[()]
            new = rng.choice(["f8", "f4", "i4", "i8", "u1", "i2", "f2", "c8"])
            try:
                replace(
                    np.asarray(data).astype(new)
                    if data.dtype.names is None
                    else np.zeros(data.shape, new)
                )
            except (TypeError, ValueError):
                replace(np.zeros(np.shape(data), new))
        elif edit == "reshape":
            data = np.asarray(ds[()])
            replace(data.reshape(-1, 1) if data.ndim == 1 else data.reshape(-1))
        elif edit == "scalar":
            replace(np.int64(rng.randint(-5, 5)))
        elif edit == "to-group":
            del pg[leaf]
            pg.create_group(leaf)
        elif edit == "huge-chunked":
            dtype = ds.dtype
            replace(
                shape=(rng.choice([2**33, 2**40, 10**10]),),
                dtype=dtype,
                chunks=(4096,),
                maxshape=(None,),
            )
        elif edit == "external-zero":
            dtype = ds.dtype if ds.dtype.names is None else np.dtype("i4")
            n = rng.choice(
                [2**20, 2**34 // max(1, dtype.itemsize), 2**40 // max(1, dtype.itemsize)]
            )
            del pg[leaf]
            pg.create_dataset(
                leaf, shape=(n,), dtype=dtype, external=[("/dev/zero", 0, h5py.h5f.UNLIMITED)]
            )
        elif edit == "external-link":
            del pg[leaf]
            pg[leaf] = h5py.ExternalLink(
                rng.choice(["/etc/passwd", "/nonexistent.h5", str(path)]), "/"
            )
        elif edit == "soft-loop":
            del pg[leaf]
            pg[leaf] = h5py.SoftLink("/" + (parent or leaf))
        elif edit == "attr":
            objs = [f] + [f[g] for g in groups] + [f[d] for d in datasets[:50]]
            obj = rng.choice(objs)
            keys = list(obj.attrs.keys()) or ["format_version"]
            key = rng.choice(keys + ["format_version", "n_steps", "beam_size", "k", "error"])
            val = rng.choice(
                [
                    -1,
                    2,
                    10**12,
                    "abc",
                    b"\xff\xfe",
                    1.5,
                    float("nan"),
                    np.array([1, 2, 3]),
                    np.array([], dtype="i4"),
                    "",
                    "{",
                    "[1, 2",
                    np.array([b"a", b"b"]),
                ]
            )
            obj.attrs[key] = val
        elif edit == "vlen-str":
            replace(np.array(["a", "b"], dtype=h5py.string_dtype()))
        elif edit == "empty":
            replace(np.zeros((0,), dtype=ds.dtype))
        elif edit == "values":
            data = np.array(ds[()])
            if data.size:
                flat = data.reshape(-1)
                for _ in range(rng.randint(1, 4)):
                    i = rng.randrange(flat.size)
                    if data.dtype.names:
                        col = rng.choice(data.dtype.names)
                        info = np.iinfo(data.dtype[col]) if data.dtype[col].kind in "iu" else None
                        flat[col][i] = rng.choice([info.max, info.min, 0, 1]) if info else -1
                    elif data.dtype.kind in "iu":
                        info = np.iinfo(data.dtype)
                        flat[i] = rng.choice([info.max, info.min, 0, -1 if info.min < 0 else 1])
                    elif data.dtype.kind == "f":
                        flat[i] = rng.choice([np.nan, np.inf, -np.inf, 1e30])
                replace(data)


# ==============================================================================================
# Text
# ==============================================================================================

TEXT_EDITS = (
    "bad-utf8",
    "nul",
    "crlf",
    "lone-cr",
    "no-final-newline",
    "empty-lines",
    "blank-lines",
    "long-line",
    "bom",
    "cut-utf8",
    "unicode-space",
    "trailing-unicode-space",
    "only-newlines",
    "empty-file",
    "extra-line",
    "drop-line",
)


def text_edit(data: bytes, edit: str, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    if edit == "bad-utf8":
        return insert(
            data,
            rng.randrange(len(data) + 1),
            rng.choice([b"\xff", b"\xc3", b"\xe9t\xe9", b"\xed\xa0\x80"]),
        )
    if edit == "nul":
        return insert(data, rng.randrange(len(data) + 1), b"\x00")
    if edit == "crlf":
        return data.replace(b"\n", b"\r\n")
    if edit == "lone-cr":
        return data.replace(b"\n", b"\r", rng.randint(1, 5))
    if edit == "no-final-newline":
        return data.rstrip(b"\n")
    if edit == "empty-lines":
        i = rng.randrange(len(lines))
        return b"\n".join(lines[:i] + [b""] * rng.randint(1, 3) + lines[i:])
    if edit == "blank-lines":
        i = rng.randrange(len(lines))
        return b"\n".join(lines[:i] + [b" \t\x0b\x0c "] + lines[i:])
    if edit == "long-line":
        i = rng.randrange(len(lines))
        words = b" ".join(
            rng.choice([b"the", b"cat", b"zzz", b"."]) for _ in range(rng.choice([50, 2000, 20000]))
        )
        return b"\n".join(lines[:i] + [words] + lines[i:])
    if edit == "bom":
        return b"\xef\xbb\xbf" + data
    if edit == "cut-utf8":
        pos = data.find(b"\xc3")
        return data[: pos + 1] if pos >= 0 else data[:-1]
    if edit == "unicode-space":
        return data.replace(
            b" ", rng.choice(["\u00a0", "\u2028", "\u3000", "\u200b"]).encode(), rng.randint(1, 4)
        )
    if edit == "trailing-unicode-space":  # Python 2 kept it in the last word (issue 53)
        lines = data.split(b"\n")
        for i in rng.sample(range(len(lines)), min(len(lines), rng.randint(1, 4))):
            lines[i] += rng.choice(["\u00a0", "\u2028", "\u3000", "\u200b"]).encode()
        return b"\n".join(lines)
    if edit == "only-newlines":
        return b"\n" * rng.randint(1, 5)
    if edit == "empty-file":
        return b""
    if edit == "extra-line":
        return data + b"one more line\n"
    if edit == "drop-line":
        return b"\n".join(lines[1:])
    raise ValueError(edit)


# ==============================================================================================
# Cases and what loading them means
# ==============================================================================================


@dataclass
class Case:
    target: str
    label: str
    files: dict = field(default_factory=dict)  # name -> bytes, written into the case dir
    options: dict = field(default_factory=dict)


def write_case(case: Case, directory) -> dict:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, data in case.files.items():
        p = directory / name
        p.parent.mkdir(parents=True, exist_ok=True)  # "root/exp/x.txt": a tree (issue 40)
        p.write_bytes(data)
        paths[name] = p
    return paths


def _exp(fx: Fixtures, name):
    for e in fx.experiments:
        if e.name == name:
            return e
    return fx.main


def _load_state_case(fx, paths, opts):
    import legacy_states
    from groundhog_port.legacy.checkpoint import legacy_param_table
    from groundhog_port.legacy.loading import open_experiment
    from groundhog_port.model.config import ModelConfig
    from groundhog_port.search.scoring import batches_for, parse_pair, score_pair

    p = paths["state.pkl"]
    exp_files = _exp(fx, opts.get("experiment"))
    state = legacy_states.load_state(p)
    cfg = ModelConfig.from_state(state, p)
    legacy_param_table(cfg)
    exp = open_experiment(p, exp_files.model, "", data_dir=exp_files.data_dir)
    (src, _), (trg, _) = parse_pair(exp, "the cat is black .", "le chat est noir .", True)
    score_pair(exp.model, src, trg)
    exp.parse_source("the cat is black .")
    for _ in batches_for(exp, fx.text_files[0], fx.text_files[1], allow_unk=True):
        break
    return f"state loaded (dim={cfg.dim})"


def _load_vocab_case(fx, paths, opts):
    import legacy_states
    from groundhog_port.legacy import vocab

    p = paths["vocab.pkl"]
    state = legacy_states.load_state(fx.main.state)
    if opts.get("kind") == "word2idx":
        w2i = vocab.load_word2idx(p)
        vocab.parse_input(state, w2i, "the cat is black .", raise_unk=False)
        return f"word2idx of {len(w2i)} words"
    i2w = vocab.load_idx2word(p)
    vocab.render_translation(
        vocab.target_idx2word(state, i2w, p), [2, 3, 4, state["null_sym_target"]]
    )
    return f"idx2word of {len(i2w)} words"


def _load_model_case(fx, paths, opts):
    from groundhog_port.legacy.loading import open_experiment
    from groundhog_port.search.scoring import parse_pair, score_pair

    e = _exp(fx, opts.get("experiment"))
    exp = open_experiment(
        e.state,
        paths["model.npz"],
        "",
        data_dir=e.data_dir,
        lenient=opts.get("lenient", False),
        allow_nonfinite=opts.get("allow_nonfinite", False),
    )
    (src, _), (trg, _) = parse_pair(exp, "the cat is black .", "le chat est noir .", True)
    score_pair(exp.model, src, trg)
    return "model loaded"


def _load_trace_case(fx, paths, opts):
    from groundhog_port.harness.trace import TraceFile

    with TraceFile(paths["trace.h5"]) as tf:
        tf.validate()
        if tf.has("sampler"):
            tf.sampler()
        if tf.has("train_step"):
            tf.train_step()
        dict(tf.attrs)
    return "trace read"


def _load_bitext_case(fx, paths, opts):
    import legacy_states
    from groundhog_port.legacy.data import iter_h5_batches, read_h5_bitext

    state = legacy_states.load_state(fx.main.state)
    src = paths.get("src.h5") or Path(opts["src"])
    trg = paths.get("trg.h5") or Path(opts["trg"])
    side = read_h5_bitext(src)
    n = sum(1 for _ in iter_h5_batches(state, src, trg))
    return f"bitext of {len(side)} pairs, {n} batches"


def _load_text_case(fx, paths, opts):
    import legacy_states
    from groundhog_port.legacy import vocab
    from groundhog_port.legacy.data import iter_text_batches, read_text_lines

    state = legacy_states.load_state(fx.main.state)
    src = paths.get("src.txt") or fx.text_files[0]
    trg = paths.get("trg.txt") or fx.text_files[1]
    lines = read_text_lines(src)
    if opts.get("py2_words"):  # each line's words as score.py / sample.py split its bytes
        raw = Path(src).read_bytes().split(b"\n")
        want = [[w.decode("utf-8") for w in r.split()] for r in raw[: len(lines)]]
        if [vocab.split_words(line) for line in lines] != want or len(raw) - 1 > len(lines):
            raise AssertionError(f"{Path(src).name}: words not split as Python 2 split bytes")
    w2i_src = vocab.load_word2idx(fx.fixture_dir / "vocab.en.pkl")
    w2i_trg = vocab.load_word2idx(fx.fixture_dir / "vocab.fr.pkl")
    n = sum(
        b.size
        for b in iter_text_batches(
            state, src, trg, w2i_src, w2i_trg, allow_unk=opts.get("allow_unk", True)
        )
    )
    return f"{len(lines)} lines, {n} pairs batched"


def _load_cli_case(fx, paths, opts):
    """Run ``groundhog-port`` in this process; returns (exit code, stdout, stderr)."""
    from groundhog_port.cli.main import main

    argv = [
        str(paths.get(a[1:], a)) if isinstance(a, str) and a.startswith("@") else str(a)
        for a in opts["argv"]
    ]
    return run_cli_inprocess(main, argv, cwd=next(iter(paths.values())).parent if paths else None)


def run_cli_inprocess(main, argv, cwd=None):
    """``main(argv)`` with stdin empty and stdout/stderr captured both as file descriptors
    and as ``sys.stdout``/``sys.stderr`` (so prints, logging and C-level writes are all
    caught, also under pytest's capture).  An exception escaping ``main`` is written as the
    interpreter would (a traceback) and gives exit code 1, as ``python -m`` does."""
    import logging

    out_f = tempfile.TemporaryFile()
    err_f = tempfile.TemporaryFile()
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2), os.dup(0)
    streams = sys.stdout, sys.stderr, sys.stdin
    old_cwd = os.getcwd()
    null = os.open(os.devnull, os.O_RDONLY)
    root = logging.getLogger()
    old_handlers, old_level = root.handlers[:], root.level
    root.handlers = []
    try:
        os.dup2(out_f.fileno(), 1)
        os.dup2(err_f.fileno(), 2)
        os.dup2(null, 0)
        sys.stdout = io.TextIOWrapper(
            io.FileIO(1, "w", closefd=False), encoding="utf-8", newline="\n", write_through=True
        )
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False),
            encoding="utf-8",
            errors="backslashreplace",
            newline="\n",
            write_through=True,
        )
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
        if cwd is not None:
            os.chdir(cwd)
        try:
            rc = main([str(a) for a in argv])
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:  # noqa: BLE001 - what the interpreter would print
            traceback.print_exc()
            rc = 1
        for h in root.handlers:
            with contextlib.suppress(Exception):
                h.flush()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        root.handlers, root.level = old_handlers, old_level
        sys.stdout, sys.stderr, sys.stdin = streams
        os.chdir(old_cwd)
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.dup2(saved[2], 0)
        for fd in saved + (null,):
            os.close(fd)
    out_f.seek(0)
    err_f.seek(0)
    return rc, out_f.read().decode("utf-8", "replace"), err_f.read().decode("utf-8", "replace")


def _load_hostile_case(fx, paths, opts):
    """An issue-25 class (:func:`_gen_hostile`) through the loader it attacks."""
    return LOADERS[opts["loader"]](fx, paths, opts)


#: the special output targets of :func:`_gen_outputs` (how each is laid out: _lay_out)
OUTPUT_LAYOUTS = (
    "link",
    "link-chain",
    "dangling-link",
    "fifo",
    "chardev",
    "dash",
    "proc-fd",
    "directory",
    "source",
    "link-to-source",
    "hardlink-to-source",
    "two-outputs",
    "partial-of-another-run",
)


def _lay_out(layout, d, source):
    """Make the output target ``layout`` in folder ``d``; returns ``(name given to the
    command, {path: what it must still be afterwards})``, what being ``("link", target)``,
    ``("fifo",)``, ``("chr",)``, ``("dir",)`` or ``("bytes", content)``."""
    import stat

    keep = {source: ("bytes", source.read_bytes())}
    out = d / "out.txt"
    elsewhere = d / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    if layout in ("link", "link-chain", "dangling-link"):
        real = elsewhere / "real.txt"
        if layout != "dangling-link":
            real.write_text("old text\n")
        if layout == "link-chain":
            (d / "hop").symlink_to(real)
            out.symlink_to(d / "hop")
            keep[d / "hop"] = ("link", str(real))
        else:
            out.symlink_to(real)
        keep[out] = ("link", os.readlink(out))
        return str(out), keep
    if layout == "fifo":
        os.mkfifo(out)
        keep[out] = ("fifo",)
        return str(out), keep
    if layout == "chardev":
        try:
            os.mknod(out, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a /dev/null of the case's
        except OSError:
            return _lay_out("link", d, source)
        keep[out] = ("chr",)
        return str(out), keep
    if layout == "dash":
        return "-", keep
    if layout == "proc-fd":
        out.symlink_to("/proc/self/fd/1")  # what /dev/stdout is, in the case's folder
        keep[out] = ("link", "/proc/self/fd/1")
        return str(out), keep
    if layout == "directory":
        out.mkdir()
        keep[out] = ("dir",)
        return str(out), keep
    if layout == "source":
        return str(source), keep
    if layout == "link-to-source":
        out.symlink_to(source)
        keep[out] = ("link", str(source))
        return str(out), keep
    if layout == "hardlink-to-source":
        os.link(source, out)
        return str(out), keep
    if layout == "partial-of-another-run":
        partial = d / "out.txt.partial"
        partial.write_text("a line of another run\n")
        journal = d / "out.txt.partial.journal"
        journal.write_text('#fingerprint {"command": "another"}\n{}\n')
        keep[partial] = ("bytes", partial.read_bytes())
        keep[journal] = ("bytes", journal.read_bytes())
        return str(out), keep
    return str(out), keep  # two-outputs: a plain name, given twice


def _still(path, what):
    """Whether ``path`` is still ``what`` (see :func:`_lay_out`)."""
    import stat

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    kind = what[0]
    if kind == "link":
        return stat.S_ISLNK(st.st_mode) and os.readlink(path) == what[1]
    if kind == "fifo":
        return stat.S_ISFIFO(st.st_mode)
    if kind == "chr":
        return stat.S_ISCHR(st.st_mode)
    if kind == "dir":
        return stat.S_ISDIR(st.st_mode)
    return stat.S_ISREG(st.st_mode) and Path(path).read_bytes() == what[1]


def _run_outputs_case(fx, paths, opts) -> Outcome:
    """Lay the target out, run the command in this process (a reader on a FIFO), check."""
    import threading

    from groundhog_port.cli.main import main

    source = paths["source.txt"]
    d = source.parent
    given, keep = _lay_out(opts["layout"], d, source)
    reader = None
    if opts["layout"] == "fifo":
        reader = threading.Thread(target=lambda: Path(given).read_bytes(), daemon=True)
        reader.start()
    m = fx.main
    model = ["--state", str(m.state), str(m.model), "--data-dir", str(m.data_dir)]
    flags = [given, *opts.get("extra", [])]
    if opts["layout"] == "two-outputs":
        flags += [opts["second"], given]
    command = opts["command"]
    if command == "score":
        argv = [
            "score",
            *model,
            "--mode",
            "batch",
            "--src",
            str(source),
            "--trg",
            str(paths["target.txt"]),
            "--allow-unk",
            "--scores",
            *flags,
        ]
    elif command == "sample":
        argv = ["translate", *model, "--source", str(source), "--n-samples", "2", "--trans", *flags]
    else:
        argv = [
            "translate",
            *model,
            "--beam-search",
            "--beam-size",
            "3",
            "--batch-size",
            "1",
            "--source",
            str(source),
            "--trans",
            *flags,
        ]
    try:
        rc, out, err = run_cli_inprocess(main, ["--log-level", "ERROR", *argv], cwd=d)
    finally:
        if reader is not None:  # a command that never opened the FIFO: let go
            with contextlib.suppress(OSError):
                os.close(os.open(given, os.O_WRONLY | os.O_NONBLOCK))
            reader.join(10)
    result = check_cli(rc, out, err)
    changed = [str(p.relative_to(d)) for p, what in keep.items() if not _still(p, what)]
    if changed:
        return Outcome(
            "replaced", f"{', '.join(changed)} changed ({result.outcome}: {result.detail[:200]})"
        )
    if rc == EXIT_OK:
        left = sorted(str(p.relative_to(d)) for p in d.rglob("*.partial*") if p not in keep)
        if left:
            return Outcome("replaced", f"a finished run left {left}")
    return result


# ----------------------------------------------------------------------------------------------
# collisions (issue 40): every command's output pointed at what the run reads or checks
# ----------------------------------------------------------------------------------------------
#: how an output is made to reach a file the run reads (:func:`_collide`)
COLLISION_LAYOUTS = (
    "same",  # the input's own name
    "link",  # a link to it, outside the case
    "link-chain",  # a link to a link to it
    "hardlink",  # another name of its bytes
    "partial-link",  # a new name whose OUT.partial is a link to it
    "partial-hardlink",  # ... or a hard link of it
)
#: what each command writes where (``file``: a name the user gives; ``folder``: a folder the
#: command writes named files into -- laid out by :func:`_collision_argv`)
COLLISION_COMMANDS = (
    "translate",
    "score",
    "parity",
    "reproduce",
    "archive",
    "export",
    "invert-dict",
    "pkl2hdf5",
    "shuffle-hdf5",
    "preprocess",
    "train",
)
#: folder outputs: the layouts of :func:`_collision_argv` (a link in the folder, the folder
#: itself inside the case, a link to the case)
FOLDER_LAYOUTS = ("named-link", "inside-case", "folder-link")


def _cut(path, n=2):
    """Keep the first ``n`` lines of a text file."""
    lines = path.read_bytes().split(b"\n")[:n]
    path.write_bytes(b"\n".join(lines) + b"\n")


def _collision_case(fx, d):
    """``d/case``: the fixture experiment with a 2-line test set and archived outputs; the
    files the commands below read."""
    case = d / "case"
    shutil.copytree(fx.fixture_dir, case)
    for name in ("test.en", "test.fr", "trans_beam10.txt", "scores_batch.txt"):
        if (case / name).exists():
            _cut(case / name)
    (case / "ids.pkl").write_bytes(pickle.dumps([[1, 2, 3], [4, 5]], protocol=2))
    from groundhog_port.legacy.preprocess.h5out import write_bitext_side

    write_bitext_side(case / "a.h5", [[1, 2], [3]])
    write_bitext_side(case / "b.h5", [[4], [5, 6]])
    return case


def _collide(layout, victim, out_dir, name="o.out"):
    """A name for an output that reaches ``victim`` by ``layout`` (:data:`COLLISION_LAYOUTS`)."""
    out, partial = out_dir / name, out_dir / (name + ".partial")
    if layout == "same":
        return victim
    if layout == "link":
        out.symlink_to(victim)
    elif layout == "link-chain":
        (out_dir / "hop").symlink_to(victim)
        out.symlink_to(out_dir / "hop")
    elif layout == "hardlink":
        os.link(victim, out)
    elif layout == "partial-link":
        partial.symlink_to(victim)
    else:
        os.link(victim, partial)
    return out


def _collision_argv(fx, opts, case, out_dir):
    """The command line of a collision case (``opts``: command, layout, victim index)."""
    m = ["--state", str(case / "search_state.pkl"), str(case / "search_model.npz")]
    command, layout, k = opts["command"], opts["layout"], opts["victim"]
    model_files = [case / n for n in ("search_state.pkl", "search_model.npz", "vocab.en.pkl",
                                      "ivocab.fr.pkl")]  # fmt: skip

    def victim(choices):
        return choices[k % len(choices)]

    def out_file(choices):
        return str(_collide(layout, victim(choices), out_dir))

    def out_folder(name):
        """A folder output: ``named-link``: ``name`` in it links to an input;
        ``inside-case``: a folder inside the case; ``folder-link``: a link to the case."""
        if layout == "inside-case":
            return str(case / "sub")
        if layout == "folder-link":
            (out_dir / "f").symlink_to(case)
            return str(out_dir / "f")
        folder = out_dir / "f"
        folder.mkdir()
        (folder / name).symlink_to(victim([case / "test.fr", *model_files]))
        return str(folder)

    src, trg = str(case / "test.en"), str(case / "test.fr")
    if command == "translate":
        out = out_file([case / "test.en", *model_files])
        return ["translate", *m, "--beam-search", "--beam-size", "2", "--source", src,
                "--trans", out]  # fmt: skip
    if command == "score":
        out = out_file([case / "test.en", case / "test.fr", *model_files])
        mode = ("batch", "txt")[k % 2]
        return ["score", *m, "--mode", mode, "--src", src, "--trg", trg, "--allow-unk",
                "--scores", out]  # fmt: skip
    if command == "parity":
        shutil.copyfile(fx.small_trace(), case / "trace.h5")
        exp = Path(fx.full_traces[0]).parent
        for f in exp.iterdir():
            if f.name != "trace.h5" and not (case / f.name).exists() and f.is_file():
                shutil.copyfile(f, case / f.name)
        state, model = sorted(exp.glob("*_state.pkl"))[0], sorted(exp.glob("*_model.npz"))[0]
        shutil.copyfile(state, case / state.name)
        shutil.copyfile(model, case / model.name)
        files = [case / "trace.h5", case / state.name, case / model.name]
        # (partial-hardlink stands for a new name inside the case folder here)
        out = str(case / "new.json") if layout == "partial-hardlink" else out_file(files)
        return ["parity", "--state", str(case / state.name), "--model", str(case / model.name),
                "--trace", str(case / "trace.h5"), "--case", str(case), "--only", "repr",
                "--json", out]  # fmt: skip
    if command == "reproduce":
        return ["reproduce", "--case", str(case), "--save-dir", out_folder("trans_beam10.txt")]
    if command == "archive":
        root = case.parent / "root"
        root.mkdir()
        case = case.rename(root / "exp")
        if layout == "inside-case":
            out = str(case / "sub")
        elif layout == "folder-link":
            folder = out_dir / "f"
            folder.mkdir()
            (folder / ("cache", "plots")[k % 2]).symlink_to(case)
            out = str(folder)
        else:
            folder = out_dir / "f"
            folder.mkdir()
            name = ("report.md", "report.json", "report.html")[k % 3]
            (folder / name).symlink_to(victim([case / "test.fr", case / "search_state.pkl"]))
            out = str(folder)
        return ["archive", str(root), "--out", out, "--plots", "0", "--max-sentences", "1"]
    if command == "export":
        if layout == "inside-case":  # the exported checkpoint into itself
            rc, _, err = run_cli_inprocess(_main(), ["export", "--format", "safetensors", *m,
                                                     str(case / "exp")])  # fmt: skip
            assert rc == 0, err
            return ["export", "--format", "safetensors", "--checkpoint", str(case / "exp"),
                    str(case / "exp")]  # fmt: skip
        folder = out_dir / "f"
        folder.mkdir()
        name = ("model.safetensors", "config.json")[k % 2]
        (folder / name).symlink_to(victim(model_files))
        return ["export", "--format", "safetensors", *m, str(folder)]
    if command == "invert-dict":
        v = case / "vocab.en.pkl"
        return ["invert-dict", str(v), out_file([v])]
    if command == "pkl2hdf5":
        b = case / "ids.pkl"
        return ["pkl2hdf5", str(b), out_file([b])]
    if command == "shuffle-hdf5":
        a, b = case / "a.h5", case / "b.h5"
        out = out_file([a, b])
        outs = [out, str(out_dir / "other.h5")][:: 1 if k % 2 else -1]
        return ["shuffle-hdf5", str(a), str(b), *outs, "--seed", "1"]
    if command == "preprocess":
        flag = ("-d", "--ivocab")[k % 2]
        return ["preprocess", "-o", "-p", flag, out_file([case / "test.en"]), str(case / "test.en")]
    # train: a checkpoint file of the prefix reaches a training corpus
    data = case.parent / "data"
    data.mkdir()
    for a in fx.bitext_pairs[0]:
        shutil.copyfile(a, data / a.name)
    corpus = data / fx.bitext_pairs[0][k % 2].name
    name = ("x_timing.npz", "x_state.pkl", "x_model.npz")[k % 3]
    _collide("link" if layout == "same" else layout, corpus, out_dir, name)
    m = ["--state", str(case / "search_state.pkl"), "--model", str(case / "search_model.npz")]
    return ["--threads", "1", "train", *m, "--data-dir", str(data), f"prefix='{out_dir}/x_'",
            "loopIters=1", "sort_k_batches=1"]  # fmt: skip


def _main():
    from groundhog_port.cli.main import main

    return main


def _snapshot(root):
    """Everything under ``root`` (links not followed): links by their target text, files by
    their bytes' digest."""
    import hashlib
    import stat

    out = {}
    for p in sorted(Path(root).rglob("*")):
        st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode):
            out[str(p)] = "link " + os.readlink(p)
        elif stat.S_ISREG(st.st_mode):
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            out[str(p)] = "other"
    return out


def _run_collision_case(fx, paths, opts) -> Outcome:
    """Lay the collision out, run the command in this process: it must refuse with one
    line (exit 2) and leave every file it reads or checks -- everything under the case's
    folder, the links laid out -- as it was (``replaced`` otherwise)."""
    d = Path(paths["marker.txt"]).parent
    out_dir = d / "out"
    out_dir.mkdir(exist_ok=True)
    argv = _collision_argv(fx, opts, _collision_case(fx, d), out_dir)
    before = {**_snapshot(d / "case"), **_snapshot(d / "root"), **_snapshot(d / "data"),
              **{k: v for k, v in _snapshot(out_dir).items() if v.startswith("link")}}  # fmt: skip
    rc, out, err = run_cli_inprocess(_main(), ["--log-level", "ERROR", *argv], cwd=d)
    after = {**_snapshot(d / "case"), **_snapshot(d / "root"), **_snapshot(d / "data"),
             **{k: v for k, v in _snapshot(out_dir).items() if v.startswith("link")}}  # fmt: skip
    changed = sorted(set(before.items()) ^ set(after.items()))
    result = check_cli(rc, out, err)
    if changed:
        names = sorted({str(Path(k).relative_to(d)) for k, _ in changed})
        return Outcome("replaced", f"{', '.join(names)[:300]} changed ({result.outcome})")
    if result.outcome == "loaded":  # every case collides: it must be refused
        return Outcome("replaced", f"not refused: exit {rc}")
    if result.outcome == "clean error" and not any(w in result.detail for w in GUARD_WORDS):
        return Outcome("unclear error", f"refused, but not by the guard: {result.detail}")
    return result


#: what the guard's refusals say (one of these in every collision's error line)
GUARD_WORDS = ("input of this run", "lies inside", "symbolic link", "its partial file",
               "hard link")  # fmt: skip


def _gen_collisions(rng, fx, marker, workdir):
    """A command of :data:`COLLISION_COMMANDS` with its output made to reach a file it
    reads (:data:`COLLISION_LAYOUTS`) or, for a folder output, a link in it / the case."""
    commands = [
        c
        for c in COLLISION_COMMANDS
        if not (c == "parity" and not fx.has_traces) and not (c == "train" and not fx.has_bitexts)
    ]
    command = rng.choice(commands)
    folder = command in ("reproduce", "archive", "export")
    layout = rng.choice(FOLDER_LAYOUTS if folder else COLLISION_LAYOUTS)
    opts = {"command": command, "layout": layout, "victim": rng.randrange(12)}
    return Case("collisions", f"{command} --> {layout} #{opts['victim']}", {"marker.txt": b""},
                opts)  # fmt: skip


LOADERS = {
    "state": _load_state_case,
    "vocab": _load_vocab_case,
    "model": _load_model_case,
    "trace": _load_trace_case,
    "bitext": _load_bitext_case,
    "text": _load_text_case,
    "cli": _load_cli_case,
    "hostile": _load_hostile_case,
    "outputs": _run_outputs_case,
    "collisions": _run_collision_case,
    "checkpoint": lambda fx, paths, opts: _trees().load_checkpoint(fx, paths, opts),
    "archive": lambda fx, paths, opts: _trees().run_archive(fx, paths, opts),
    "timing": lambda fx, paths, opts: _trees().load_timing(fx, paths, opts),
    "pack": lambda fx, paths, opts: _containers().load_pack(fx, paths, opts),
    "compressed": lambda fx, paths, opts: _containers().load_compressed(fx, paths, opts),
    "plan": lambda fx, paths, opts: _containers().load_plan(fx, paths, opts),
    "ties": lambda fx, paths, opts: _mixes().load_ties(fx, paths, opts),
    "serve-batch": lambda fx, paths, opts: _mixes().load_serve_batch(fx, paths, opts),
}
TARGETS = tuple(LOADERS)
#: the targets before issue 53 added ``ties`` and ``serve-batch``
TARGETS_BEFORE_ISSUE_53 = TARGETS[: TARGETS.index("ties")]
#: the targets before issue 51 added ``pack``, ``compressed`` and ``plan``
TARGETS_BEFORE_ISSUE_51 = TARGETS[: TARGETS.index("pack")]
#: the targets before issue 40 added ``collisions``, ``checkpoint``, ``archive`` and
#: ``timing`` (cases of earlier seeds replay with these)
TARGETS_BEFORE_ISSUE_40 = TARGETS[: TARGETS.index("collisions")]


def _containers():
    """The issue-51 targets (:mod:`parity_tests.support.fuzzing_containers`)."""
    from parity_tests.support import fuzzing_containers

    return fuzzing_containers


def _mixes():
    """The issue-53 targets (:mod:`parity_tests.support.fuzzing_mixes`)."""
    from parity_tests.support import fuzzing_mixes

    return fuzzing_mixes


def _trees():
    """The issue-40 targets ``checkpoint``, ``archive`` and ``timing``
    (:mod:`parity_tests.support.fuzzing_trees`, which builds on this module)."""
    from parity_tests.support import fuzzing_trees

    return fuzzing_trees


#: the targets before issue 25 added ``hostile`` and ``outputs``: cases of earlier seeds
#: replay with these (``tools/fuzz.py --targets state,vocab,model,trace,bitext,text,cli
#: --seed S --only I``)
TARGETS_BEFORE_ISSUE_25 = ("state", "vocab", "model", "trace", "bitext", "text", "cli")


@dataclass
class Outcome:
    outcome: str
    detail: str = ""


#: an error line is the file name and the problem, each bounded (errors.MAX_PATH,
#: errors.MAX_PROBLEM), plus the command's prefix
MAX_ERROR_LINE = MAX_PATH + MAX_PROBLEM + 200


def check_error(err: LegacyInputError, paths) -> Outcome:
    """A clean error is one line and names the file it is about (or, for a problem with no
    file of its own, at least says what is wrong)."""
    msg = str(err)
    if "\n" in msg or not msg.strip():
        return Outcome("unclear error", f"not one line: {msg[:300]!r}")
    if len(msg) > MAX_ERROR_LINE:
        return Outcome("unclear error", f"an error line of {len(msg)} characters: {msg[:200]}")
    names = [str(p) for p in paths.values()]
    if err.path is None and not any(n in msg for n in names):
        return Outcome("unclear error", f"names no file: {msg}")
    return Outcome("clean error", msg)


def check_cli(rc, out, err) -> Outcome:
    lines = [l for l in err.splitlines() if l.strip()]
    if "Traceback" in err:
        return Outcome("CRASH", err.strip().splitlines()[-1] if err.strip() else "traceback")
    if rc in (EXIT_OK, EXIT_PARTIAL):  # 3: sentences the original could not translate either
        return Outcome("loaded", f"exit {rc}")
    error_lines = [l for l in lines if " error: " in l or l.startswith("error:")]
    if any(len(l) > MAX_ERROR_LINE for l in error_lines):
        return Outcome("unclear error", f"an error line of {max(map(len, error_lines))} characters")
    if rc == EXIT_INPUT and len(error_lines) == 1:
        return Outcome("clean error", error_lines[0])
    return Outcome("unclear error", f"exit {rc}, stderr {lines[-3:]!r}")


def run_case(fx: Fixtures, case: Case, directory) -> Outcome:
    """Write the case into ``directory``, load it in this process, classify the result."""
    directory = Path(directory)
    paths = write_case(case, directory)
    marker = directory / MARKER_NAME
    try:
        if case.target == "outputs":
            result = _run_outputs_case(fx, paths, case.options)
        elif case.target == "collisions":
            result = _run_collision_case(fx, paths, case.options)
        elif case.target == "archive":
            result = _trees().run_archive(fx, paths, case.options)
        elif case.target == "cli" or case.options.get("loader") == "cli":
            result = check_cli(*_load_cli_case(fx, paths, case.options))
        else:
            result = Outcome("loaded", LOADERS[case.target](fx, paths, case.options))
    except LegacyInputError as err:
        result = check_error(err, paths)
    except MemoryError as err:
        result = Outcome("memory", f"MemoryError: {err}")
    except RecursionError as err:
        result = Outcome("CRASH", f"RecursionError: {err}")
    except Exception as err:  # noqa: BLE001 - this is what the fuzzer looks for
        tb = traceback.extract_tb(err.__traceback__)
        where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else "?"
        msg = " ".join(str(err).split())[:300]
        if "allocate" in msg and "memory" in msg.lower():
            result = Outcome("memory", f"{type(err).__name__} at {where}: {msg}")
        else:
            result = Outcome("CRASH", f"{type(err).__name__} at {where}: {msg}")
    if marker.exists():
        result = Outcome(
            "executed", f"{MARKER_NAME} created; was: {result.outcome} {result.detail}"
        )
    return result


# ==============================================================================================
# Random cases (tools/fuzz.py)
# ==============================================================================================


def _pos(rng: random.Random, n: int) -> int:
    """A position biased towards the ends of a file, where headers and directories live."""
    if n <= 0:
        return 0
    r = rng.random()
    if r < 0.35:
        return rng.randrange(min(n, 4096))
    if r < 0.55:
        return max(0, n - 1 - rng.randrange(min(n, 2048)))
    return rng.randrange(n)


BYTE_MUTATIONS = (
    "truncate",
    "flip",
    "overwrite",
    "insert",
    "delete",
    "duplicate",
    "int",
    "zero-range",
    "empty",
    "garbage",
)


def byte_mutation(data: bytes, rng: random.Random, kind=None) -> tuple[str, bytes]:
    kind = kind or rng.choice(BYTE_MUTATIONS)
    n = len(data)
    if kind == "truncate":
        off = rng.choice([rng.randrange(n + 1), _pos(rng, n)])
        return f"truncate@{off}/{n}", truncate(data, off)
    if kind == "flip":
        edits = [(_pos(rng, n), rng.randrange(1, 256)) for _ in range(rng.choice([1, 1, 2, 4, 16]))]
        return f"flip{[e[0] for e in edits][:4]}", flip(data, edits)
    if kind == "overwrite":
        pos = _pos(rng, n)
        chunk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 32)))
        return f"overwrite@{pos}+{len(chunk)}", overwrite(data, pos, chunk)
    if kind == "insert":
        pos = _pos(rng, n)
        chunk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
        return f"insert@{pos}+{len(chunk)}", insert(data, pos, chunk)
    if kind == "delete":
        pos, ln = _pos(rng, n), rng.choice([1, 2, 8, 100, 4096])
        return f"delete@{pos}-{ln}", delete(data, pos, ln)
    if kind == "duplicate":
        pos, ln, at = _pos(rng, n), rng.choice([1, 16, 512]), _pos(rng, n)
        return f"duplicate@{pos}+{ln}->{at}", duplicate(data, pos, ln, at)
    if kind == "int":
        pos, width = _pos(rng, n), rng.choice([1, 2, 4, 8])
        val = rng.choice(INTERESTING_INTS)
        return f"int@{pos}:{width}={val:#x}", put_int(data, pos, val, width, rng.random() < 0.3)
    if kind == "zero-range":
        pos, ln = _pos(rng, n), rng.choice([8, 64, 1024])
        return f"zero@{pos}+{ln}", overwrite(
            data, pos, b"\x00" * min(ln, max(0, n - pos % max(n, 1)))
        )
    if kind == "empty":
        return "empty file", b""
    return "garbage", bytes(rng.randrange(256) for _ in range(rng.randint(1, 4096)))


def random_case(rng: random.Random, fx: Fixtures, target: str, workdir) -> Case:
    """One random case for ``target``; ``workdir`` is where it will run (payloads aim their
    marker there)."""
    marker = Path(workdir) / MARKER_NAME
    return _GENERATORS[target](rng, fx, marker, Path(workdir))


def _gen_state(rng, fx, marker, workdir):
    e = rng.choice(fx.experiments)
    data = fx.read(e.state)
    opts = {"experiment": e.name}
    r = rng.random()
    if r < 0.4:
        label, out = byte_mutation(data, rng)
    elif r < 0.75:
        import legacy_states

        state = legacy_states.safe_load_pickle(e.state)
        key = rng.choice(STATE_KEYS)
        if rng.random() < 0.1:
            label, out = f"state without {key}", state_without(state, key, rng.choice([0, 2]))
        else:
            val = rng.choice(HOSTILE_VALUES)
            label = f"state[{key!r}] = {val!r:.60}"
            try:
                out = state_with(state, key, val, rng.choice([0, 2, 4]), marker)
            except (pickle.PicklingError, TypeError):
                out = state_with(state, key, repr(val), 0, marker)
    else:
        label, out = _pickle_attack(rng, marker, wrap_state=True)
    return Case("state", f"{e.name}: {label}", {"state.pkl": out}, opts)


def _pickle_attack(rng, marker, wrap_state=False):
    r = rng.random()
    if r < 0.45:
        payloads = payload_pickles(marker)
        name = rng.choice(sorted(payloads))
        return f"payload {name}", payloads[name]
    if r < 0.6:
        kind = rng.choice(["list", "tuple", "dict"])
        depth = rng.choice([50, 101, 1000, 100000])
        fn = {"list": deep_list_pickle, "tuple": deep_tuple_pickle, "dict": deep_dict_pickle}[kind]
        return f"nested {kind} x{depth}", fn(depth)
    if r < 0.75:
        levels = rng.choice([20, 40, 64, 200])
        return f"shared DAG 2**{levels}", shared_dag_pickle(levels, wrap_state)
    if r < 0.92:
        op = rng.choice(HUGE_OPCODES)
        size = rng.choice([2**31 - 1, 2**33, 2**40, 2**62, 2**64 - 1])
        return f"{op} declares {size} bytes", huge_size_pickle(op, size)
    digits = rng.choice([4000, 5000, 100000])
    return f"LONG of {digits} digits", long_int_pickle(digits)


def _gen_vocab(rng, fx, marker, workdir):
    p = rng.choice(fx.vocab_files)
    kind = "idx2word" if p.name.startswith("ivocab") else "word2idx"
    if rng.random() < 0.1:
        kind = "word2idx" if kind == "idx2word" else "idx2word"  # the other kind of file
    data = fx.read(p)
    r = rng.random()
    if r < 0.45:
        label, out = byte_mutation(data, rng)
    elif r < 0.75:
        from legacy_states import safe_load_pickle

        v = safe_load_pickle(p)
        edit = rng.choice(["set", "set", "set", "del", "empty", "list", "swap", "nested"])
        key = value = None
        if edit == "set":
            if rng.random() < 0.5:
                key = rng.choice(list(v))
                value = rng.choice(HOSTILE_VALUES)
            else:
                key = rng.choice(HOSTILE_VALUES[:12] + (b"caf\xe9", "new", ("a",)))
                value = rng.choice([5, -1, "w", 10**9])
        label = f"{edit} {key!r:.30} -> {value!r:.30}"
        try:
            out = vocab_with(v, edit, key, value, rng.choice([0, 2]))
        except (TypeError, pickle.PicklingError):
            out = vocab_with(v, "empty")
    else:
        label, out = _pickle_attack(rng, marker)
    return Case("vocab", f"{p.name} as {kind}: {label}", {"vocab.pkl": out}, {"kind": kind})


def _gen_model(rng, fx, marker, workdir):
    e = rng.choice(fx.experiments)
    data = fx.read(e.model)
    opts = {
        "experiment": e.name,
        "lenient": rng.random() < 0.2,
        "allow_nonfinite": rng.random() < 0.3,
    }
    if rng.random() < 0.45:
        label, out = byte_mutation(data, rng)
    else:
        arrays = read_npz_arrays(data)
        edit, name = rng.choice(NPZ_EDITS), rng.choice(sorted(arrays))
        label, out = f"{edit} {name}", npz_edit(arrays, edit, name, rng, marker)
    flags = "".join(f" {k}" for k in ("lenient", "allow_nonfinite") if opts[k])
    return Case("model", f"{e.name}: {label}{flags}", {"model.npz": out}, opts)


def _h5_case(rng, fx, src_path, kind, workdir):
    data = fx.read(src_path)
    if rng.random() < 0.5:
        return byte_mutation(data, rng)
    scratch = Path(tempfile.mkdtemp(dir=workdir))
    p = scratch / "x.h5"
    p.write_bytes(data)
    edit = rng.choice(H5_EDITS)
    h5_edit(p, edit, rng, kind)
    out = p.read_bytes()
    shutil.rmtree(scratch, ignore_errors=True)
    return f"h5 {edit}", out


def _gen_trace(rng, fx, marker, workdir):
    files = fx.trace_files()
    src = files[0] if rng.random() < 0.85 else rng.choice(files[1:] or files)
    label, out = _h5_case(rng, fx, src, "trace", workdir)
    return Case("trace", f"{src.parent.name}/{src.name}: {label}", {"trace.h5": out})


def _gen_bitext(rng, fx, marker, workdir):
    a, b = rng.choice(fx.bitext_pairs)
    which = rng.choice(["src", "trg"])
    label, out = _h5_case(rng, fx, a if which == "src" else b, "bitext", workdir)
    opts = {"src": str(a), "trg": str(b)}
    return Case(
        "bitext",
        f"{which} {(a if which == 'src' else b).name}: {label}",
        {f"{which}.h5": out},
        opts,
    )


def _gen_text(rng, fx, marker, workdir):
    which = rng.choice(["src", "trg"])
    p = fx.text_files[0 if which == "src" else 1]
    data = fx.read(p)
    if rng.random() < 0.4:
        label, out = byte_mutation(data, rng)
    else:
        label = rng.choice(TEXT_EDITS)
        out = text_edit(data, label, rng)
    opts = {"allow_unk": rng.random() < 0.7}
    if label in ("unicode-space", "trailing-unicode-space"):  # valid UTF-8: words checkable
        opts["py2_words"] = True
    return Case("text", f"{which} {p.name}: {label}", {f"{which}.txt": out}, opts)


def _gen_cli(rng, fx, marker, workdir):
    """A broken file handed to a command: the state, the model, a vocabulary or the input.

    Inputs are kept to three short lines so that a command run stays well inside the
    per-case time limit (the search itself is not what is tested here).
    """
    m = fx.main
    what = rng.choice(["state", "model", "source", "target", "vocab"])
    src = b"\n".join(fx.read(fx.text_files[0]).split(b"\n")[:3]) + b"\n"
    trg = b"\n".join(fx.read(fx.text_files[1]).split(b"\n")[:3]) + b"\n"
    files = {}
    if what == "state":
        files["state.pkl"] = _gen_state(rng, fx, marker, workdir).files["state.pkl"]
    elif what == "model":
        files["model.npz"] = _gen_model(rng, fx, marker, workdir).files["model.npz"]
    elif what in ("source", "target"):
        data = src if what == "source" else trg
        if rng.random() < 0.4:
            label, data = byte_mutation(data, rng)
        else:
            label = rng.choice(TEXT_EDITS)
            data = text_edit(data, label, rng)
        # a line of thousands of words is legitimate work for a search (3 x length steps)
        data = b"\n".join(b" ".join(l.split(b" ")[:200]) for l in data.split(b"\n"))
        if what == "source":
            src = data
        else:
            trg = data
    else:
        c = _gen_vocab(rng, fx, marker, workdir)
        name = rng.choice(["vocab.en.pkl", "ivocab.en.pkl", "vocab.fr.pkl", "ivocab.fr.pkl"])
        files[name] = c.files["vocab.pkl"]
    # the state and vocabularies live together: copy what was not broken
    for f in ("vocab.en.pkl", "ivocab.en.pkl", "vocab.fr.pkl", "ivocab.fr.pkl"):
        files.setdefault(f, fx.read(m.data_dir / f))
    files.setdefault("state.pkl", fx.read(m.state))
    files.setdefault("model.npz", fx.read(m.model))
    files["source.txt"], files["target.txt"] = src, trg
    command = rng.choice(["inspect", "score", "translate"])
    if what == "target":
        command = "score"
    if command == "inspect":
        argv = ["inspect", "--state", "@state.pkl", "@model.npz"] + (
            ["--json"] if rng.random() < 0.5 else []
        )
    elif command == "score":
        mode = rng.choice(["batch", "txt"])
        argv = score_args(
            mode,
            "@source.txt",
            "@target.txt",
            "--allow-unk",
            state="@state.pkl",
            model="@model.npz",
        )
        if mode == "batch" and rng.random() < 0.5:
            argv += ["--scores", "@scores.txt"]
            files["scores.txt"] = b""
    else:
        argv = translate_args(
            "@source.txt",
            "--trans",
            "@trans.txt",
            beam="5",
            batch="1",
            state="@state.pkl",
            model="@model.npz",
        )
        files["trans.txt"] = b""
    argv = ["--log-level", "ERROR"] + argv
    return Case("cli", f"{command} with broken {what}", files, {"argv": argv})


HOSTILE_CLASSES = (
    "nesting",
    "sized-constructor",
    "opcode-flood",
    "hash-collision",
    "npz-size-lie",
    "h5-size-lie",
    "long-value",
)


def _gen_hostile(rng, fx, marker, workdir):
    """Issue 25's classes, each against the loader it attacks: nesting before hashing
    (tuple/frozenset keys), constructors called with a size, floods of object-making opcodes,
    dict keys sharing one hash, ``.npz`` members and ``.h5`` datasets whose declared sizes
    lie (per dtype), and state values megabytes long (error lines)."""
    kind = rng.choice(HOSTILE_CLASSES)
    as_vocab = rng.random() < 0.5
    if kind == "nesting":
        nest = rng.choice(["tuple", "frozenset"])
        depth = rng.choice([101, 1000, 200_000])
        label, data = f"{nest} key nested x{depth}", nested_key_pickle(depth, nest)
    elif kind == "sized-constructor":
        via, size = rng.choice(["call", "reconstructor"]), rng.choice([10**6, 3 * 10**9, 2**40])
        label, data = f"bytearray({size}) via {via}", sized_constructor_pickle(size, via)
    elif kind == "opcode-flood":
        op, n = rng.choice(sorted(FLOOD_OPCODES)), rng.choice([10**5, 10**6, 5 * 10**6])
        label, data = f"{n} x {op}", opcode_flood_pickle(op, n)
    elif kind == "hash-collision":
        n, proto = rng.choice([1000, 40_000]), rng.choice([0, 2])
        label, data = (
            f"{n} colliding int keys (protocol {proto})",
            colliding_ivocab_pickle(n, protocol=proto),
        )
        as_vocab = True
    elif kind == "long-value":
        import legacy_states

        e = rng.choice(fx.experiments)
        key = rng.choice(STATE_KEYS)
        value = rng.choice(["x" * rng.choice([10**5, 3 * 10**6]), list(range(10**5))])
        label = f"state[{key!r}] = {type(value).__name__} of {len(value)}"
        data = state_with(legacy_states.safe_load_pickle(e.state), key, value, 2)
        return Case(
            "hostile",
            f"{e.name}: {label}",
            {"state.pkl": data},
            {"loader": "state", "experiment": e.name},
        )
    elif kind == "npz-size-lie":
        e = rng.choice(fx.experiments)
        arrays = read_npz_arrays(fx.read(e.model))
        name = rng.choice(sorted(arrays) + ["W_extra"])
        declared = rng.choice([10**8, 2 * 10**9])
        arrays.pop(name, None)
        data = npz_with_deflate_bomb(npz_bytes(arrays), name, declared)
        opts = {
            "loader": "model",
            "experiment": e.name,
            "lenient": rng.random() < 0.3,
            "allow_nonfinite": False,
        }
        return Case(
            "hostile",
            f"{e.name}: deflate member {name} declaring {declared} bytes",
            {"model.npz": data},
            opts,
        )
    else:  # h5-size-lie
        if not fx.has_bitexts:
            return _gen_hostile(rng, fx, marker, workdir)
        a, b = rng.choice(fx.bitext_pairs)
        dtype = rng.choice(["uint8", "int16", "int32", "int64"])
        n = rng.choice([10**7, 3 * 10**8]) // np.dtype(dtype).itemsize
        scratch = Path(tempfile.mkdtemp(dir=workdir))
        h5_declared_size_lie(scratch / "x.h5", n, dtype)
        data = (scratch / "x.h5").read_bytes()
        shutil.rmtree(scratch, ignore_errors=True)
        which = rng.choice(["src", "trg"])
        return Case(
            "hostile",
            f"{which}.h5: {dtype} /phrases declaring {n} elements",
            {f"{which}.h5": data},
            {"loader": "bitext", "src": str(a), "trg": str(b)},
        )
    if as_vocab:
        vkind = rng.choice(["word2idx", "idx2word"])
        return Case(
            "hostile",
            f"vocabulary ({vkind}): {label}",
            {"vocab.pkl": data},
            {"loader": "vocab", "kind": vkind},
        )
    return Case(
        "hostile",
        f"state: {label}",
        {"state.pkl": data},
        {"loader": "state", "experiment": fx.main.name},
    )


def _gen_outputs(rng, fx, marker, workdir):
    """A special output target (:data:`OUTPUT_LAYOUTS`) for one of the commands that write
    a line-per-item output, on two short lines of the fixture; sometimes ``--resume``."""
    layout = rng.choice(OUTPUT_LAYOUTS)
    command = rng.choice(["translate", "sample", "score"])
    src = b"\n".join(fx.read(fx.text_files[0]).split(b"\n")[:2]) + b"\n"
    trg = b"\n".join(fx.read(fx.text_files[1]).split(b"\n")[:2]) + b"\n"
    opts = {
        "layout": layout,
        "command": command,
        "extra": ["--resume"] if rng.random() < 0.2 else [],
    }
    if layout == "two-outputs":
        if command != "translate":
            command = opts["command"] = "translate"
        opts["second"] = "--n-best"
    elif command == "translate" and rng.random() < 0.3:
        opts["extra"] += ["--n-best", str(Path(workdir) / "nbest.txt")]
    return Case(
        "outputs",
        f"{command} --> {layout}{' --resume' if '--resume' in opts['extra'] else ''}",
        {"source.txt": src, "target.txt": trg},
        opts,
    )


_GENERATORS = {
    "state": _gen_state,
    "vocab": _gen_vocab,
    "model": _gen_model,
    "trace": _gen_trace,
    "bitext": _gen_bitext,
    "text": _gen_text,
    "cli": _gen_cli,
    "hostile": _gen_hostile,
    "outputs": _gen_outputs,
    "collisions": _gen_collisions,
    "checkpoint": lambda rng, fx, marker, workdir: _trees().gen_checkpoint(rng, fx, workdir),
    "archive": lambda rng, fx, marker, workdir: _trees().gen_archive(rng, fx, workdir),
    "timing": lambda rng, fx, marker, workdir: _trees().gen_timing(rng, fx, workdir),
    "pack": lambda rng, fx, marker, workdir: _containers().gen_pack(rng, fx, workdir),
    "compressed": lambda rng, fx, marker, workdir: _containers().gen_compressed(rng, fx, workdir),
    "plan": lambda rng, fx, marker, workdir: _containers().gen_plan(rng, fx, workdir),
    "ties": lambda rng, fx, marker, workdir: _mixes().gen_ties(rng, fx, workdir),
    "serve-batch": lambda rng, fx, marker, workdir: _mixes().gen_serve_batch(rng, fx, workdir),
}


def unavailable_targets(fx: Fixtures) -> dict[str, str]:
    """target -> why it cannot run here (``tools/fuzz.py`` says so)."""
    out = {}
    if not fx.has_traces:
        out["trace"] = f"no recorded traces under {fx.legacy}"
    if not fx.has_bitexts:
        out["bitext"] = f"no binarized corpora under {fx.legacy / 'data'}"
    if _mixes().legacy_numpy_version() is None:
        out["ties"] = (
            f"its oracle is numpy 1.23 in {_mixes().LEGACY_PYTHON.parent.parent}, not built "
            "(bash tools/theano_venv.sh)"
        )
    return out


def available_targets(fx: Fixtures):
    missing = unavailable_targets(fx)
    return [t for t in TARGETS if t not in missing]


def case_rng(seed: int, index: int) -> random.Random:
    """The generator of case ``index`` of a run with ``seed`` (replayable on its own)."""
    return random.Random(f"{seed}:{index}")


def pick_target(rng: random.Random, targets, weights=None):
    weights = weights or {}
    return rng.choices(targets, [weights.get(t, 1.0) for t in targets])[0]


#: tools/fuzz.py's default relative frequency of targets (the others count 1)
DEFAULT_WEIGHTS = {"trace": 0.7, "cli": 0.5, "archive": 0.3, "serve-batch": 0.3}


def seeded_case(fx: Fixtures, seed: int, index: int, workdir, targets=None, weights=None) -> Case:
    """Case ``index`` of ``tools/fuzz.py --seed seed`` (default targets and weights): what
    ``--only index`` replays, and what the regression tests replay."""
    rng = case_rng(seed, index)
    targets = list(targets) if targets is not None else available_targets(fx)
    target = pick_target(rng, targets, DEFAULT_WEIGHTS if weights is None else weights)
    return random_case(rng, fx, target, workdir)
