"""Pickles as Python 2.7's ``cPickle.dump`` wrote them, byte for byte.

GroundHog's preprocessing wrote ``vocab.*.pkl`` and ``binarized_text.*.pkl`` with
``cPickle.HIGHEST_PROTOCOL`` = 2 (preprocess.py:89) and ``ivocab.*.pkl`` with the default
protocol 0 (invert-dict.py:20), from Python 2 objects: ``str`` (a byte string), ``unicode``
(character-level vocabularies), ``int``, ``list``, ``dict`` and ``collections.Counter``
(the ``-c`` count files).  This writer emits the opcodes cPickle 2.7 emitted
(Modules/cPickle.c) so that both Python 2's loader and the port's read the files:

* ``bytes`` -> ``S'...'\\n`` with Python 2's ``repr`` escaping (protocol 0),
  ``SHORT_BINSTRING`` / ``BINSTRING`` with the raw bytes (protocol 2);
* ``str`` (Python-2 ``unicode``) -> ``V`` raw-unicode-escape (protocol 0; ``\\``, newline
  and characters above U+00FF as ``\\uXXXX``), ``BINUNICODE`` UTF-8 (protocol 2);
* ``int`` -> ``I<n>\\n`` / ``BININT1`` / ``BININT2`` / ``BININT``; for states also
  ``float`` (``F%.17g\\n`` -- so ``F1\\n`` for 1.0 -- / ``BINFLOAT``), ``bool`` (``I01\\n``),
  ``None`` and tuples;
* lists and dicts: ``(lp``/``(dp`` + ``a``/``s`` (protocol 0), ``]``/``}`` + ``APPENDS`` /
  ``SETITEMS`` in batches of 1000, one item alone as ``APPEND`` / ``SETITEM`` (protocol 2);
* every container and string is memoised (``PUT`` / ``BINPUT`` / ``LONG_BINPUT``),
  numbered from 1 as cPickle numbered them.  cPickle skipped the memo entry of an object
  whose reference count was below 2 at dump time (``put``); of the objects preprocessing
  pickles, only the fresh dict and 1-tuple of ``Counter.__reduce__`` are such objects, and
  they are written without one.
* dict items in the order a CPython 2.7 dict iterates them: a :class:`Py2Dict` is
  written in its own order; a plain dict is first rebuilt as Python 2 would have built it
  by inserting its items in the order given (:func:`as_py2_dict`).
* ``Counter(d)`` (``-c`` count files): ``GLOBAL collections Counter``, the 1-tuple
  ``(dict(counter),)``, ``REDUCE`` -- ``Counter.__reduce__`` of Python 2.7.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Mapping

from .py2dict import Py2Dict, Py2Key

BATCHSIZE = 1000


class Py2Counter:
    """Marks a :class:`Py2Dict` of word counts to be pickled as a ``collections.Counter``."""

    def __init__(self, counts: Py2Dict) -> None:
        self.counts = counts


def as_py2_dict(mapping: Mapping[Py2Key, object] | Py2Dict) -> Py2Dict:
    """``mapping`` as the Python-2 dict built by inserting its items in their order."""
    return mapping if isinstance(mapping, Py2Dict) else Py2Dict(mapping.items())


def py2_repr_bytes(s: bytes) -> bytes:
    """``repr(str)`` of Python 2 (stringobject.c ``PyString_Repr``, smart quotes)."""
    quote = b'"' if (b"'" in s and b'"' not in s) else b"'"
    out = bytearray(quote)
    for c in s:
        if c == quote[0] or c == 0x5C:
            out += b"\\" + bytes([c])
        elif c == 0x09:
            out += b"\\t"
        elif c == 0x0A:
            out += b"\\n"
        elif c == 0x0D:
            out += b"\\r"
        elif c < 0x20 or c >= 0x7F:
            out += b"\\x%02x" % c
        else:
            out.append(c)
    out += quote
    return bytes(out)


def _raw_unicode_escape_27(s: str) -> bytes:
    """cPickle 2.7 ``modified_EncodeRawUnicodeEscape``: latin-1 bytes, except ``\\``,
    newline and characters >= 256 as ``\\uXXXX`` / ``\\UXXXXXXXX``."""
    out = bytearray()
    for ch in s:
        o = ord(ch)
        if o >= 0x10000:
            out += b"\\U%08x" % o
        elif o >= 256 or ch in "\\\n":
            out += b"\\u%04x" % o
        else:
            out.append(o)
    return bytes(out)


class _Writer:
    def __init__(self, protocol: int):
        if protocol not in (0, 2):
            raise ValueError("GroundHog's files use pickle protocols 0 and 2")
        self.proto = protocol
        self.out = io.BytesIO()
        self.memo = 0

    def put(self) -> None:
        self.memo += 1
        if self.proto == 0:
            self.out.write(b"p%d\n" % self.memo)
        elif self.memo < 256:
            self.out.write(b"q" + bytes([self.memo]))
        else:
            self.out.write(b"r" + struct.pack("<i", self.memo))

    def save(self, obj, memoize: bool = True) -> None:
        w = self.out.write
        if obj is None:
            w(b"N")
        elif isinstance(obj, bool):  # save_bool: I01/I00 at protocol 0, NEWTRUE/NEWFALSE at 2
            w((b"I01\n" if obj else b"I00\n") if self.proto == 0 else (b"\x88" if obj else b"\x89"))
        elif isinstance(obj, float):  # save_float: "%.17g" text, BINFLOAT big-endian double
            w(b"F" + (b"%.17g" % obj) + b"\n" if self.proto == 0 else b"G" + struct.pack(">d", obj))
        elif isinstance(obj, tuple):
            self._tuple(obj)
        elif isinstance(obj, int):
            if self.proto == 0:
                w(b"I%d\n" % obj)
            elif 0 <= obj < 256:
                w(b"K" + bytes([obj]))
            elif 0 <= obj < 65536:
                w(b"M" + struct.pack("<H", obj))
            elif -(1 << 31) <= obj < (1 << 31):
                w(b"J" + struct.pack("<i", obj))
            else:
                raise ValueError(f"integer {obj} needs Python-2 longs, not emulated")
        elif isinstance(obj, bytes):
            if self.proto == 0:
                w(b"S" + py2_repr_bytes(obj) + b"\n")
            elif len(obj) < 256:
                w(b"U" + bytes([len(obj)]) + obj)
            else:
                w(b"T" + struct.pack("<i", len(obj)) + obj)
            self.put()
        elif isinstance(obj, str):
            if self.proto == 0:
                w(b"V" + _raw_unicode_escape_27(obj) + b"\n")
            else:
                data = obj.encode("utf-8", "surrogatepass")
                w(b"X" + struct.pack("<i", len(data)) + data)
            self.put()
        elif isinstance(obj, list):
            w(b"(l" if self.proto == 0 else b"]")
            self.put()
            self._batch(obj, b"a", b"e", lambda item: self.save(item))
        elif isinstance(obj, (dict, Py2Dict)):
            w(b"(d" if self.proto == 0 else b"}")
            if memoize:
                self.put()
            self._batch(
                as_py2_dict(obj).items(),
                b"s",
                b"u",
                self._save_pair,
            )
        elif isinstance(obj, Py2Counter):
            # Counter.__reduce__ -> (Counter, (dict(self),)): dict(self) is a PyDict_Merge copy
            w(b"ccollections\nCounter\n")
            self.put()
            if self.proto == 0:
                w(b"(")
            plain = Py2Dict()
            plain.merge_from(obj.counts)
            self.save(plain, memoize=False)  # refcount 1: no PUT
            w(b"t" if self.proto == 0 else b"\x85")  # TUPLE / TUPLE1, refcount 1: no PUT
            w(b"R")
            self.put()
        else:
            raise TypeError(f"cannot write a {type(obj).__name__} as GroundHog did")

    def _tuple(self, obj) -> None:
        """``save_tuple``: MARK items TUPLE (protocol 0), TUPLE1-3 for short tuples at 2."""
        w = self.out.write
        if not obj:
            w(b"(t" if self.proto == 0 else b")")
            return
        if self.proto == 2 and len(obj) <= 3:
            for item in obj:
                self.save(item)
            w(b"\x85\x86\x87"[len(obj) - 1 : len(obj)])
        else:
            w(b"(")
            for item in obj:
                self.save(item)
            w(b"t")
        self.put()

    def _save_pair(self, kv):
        """A dict item: its key, then its value."""
        self.save(kv[0])
        self.save(kv[1])

    def _batch(self, items, one, many, save_item) -> None:
        """``batch_list`` / ``batch_dict``: protocol 0 one opcode per item; protocol 2
        MARK ... APPENDS/SETITEMS per 1000 items, a lone item with APPEND/SETITEM."""
        items = list(items)
        if self.proto == 0:
            for item in items:
                save_item(item)
                self.out.write(one)
            return
        for start in range(0, len(items), BATCHSIZE):
            chunk = items[start : start + BATCHSIZE]
            if len(chunk) == 1:
                save_item(chunk[0])
                self.out.write(one)
            else:
                self.out.write(b"(")
                for item in chunk:
                    save_item(item)
                self.out.write(many)


def dumps(obj: object, protocol: int) -> bytes:
    """``cPickle.dumps(obj, protocol)`` of Python 2.7 (see the module docstring)."""
    wr = _Writer(protocol)
    if protocol >= 2:
        wr.out.write(b"\x80\x02")
    wr.save(obj)
    wr.out.write(b".")
    return wr.out.getvalue()
