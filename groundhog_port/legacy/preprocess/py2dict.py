"""CPython 2.7's dict iteration order, emulated exactly.

Every archived GroundHog experiment was preprocessed under Python 2.7, where a dict
iterates in the order of its hash table's slots, not in insertion order.  That order
decided three things the files still show (docs/recordings.md, "Python 2 pickles and dict order"):

* which of several equally frequent words gets the lower index
  (``Counter.most_common`` breaks ties in the Counter's iteration order,
  preprocess.py:160/168);
* which of ``<s>`` / ``</s>`` ends up as ``ivocab[0]`` (invert-dict.py:17 keeps the one
  iterated last);
* the order of the items inside every pickled dict (cPickle writes them as iterated).

What is emulated (Objects/dictobject.c and Objects/stringobject.c of CPython 2.7, 64-bit
build, hash randomisation off as it is by default in 2.7):

* ``hash(str)``: ``x = b0 << 7; x = (1000003 * x) ^ b`` over the bytes; ``x ^= len``;
  ``-1 -> -2``; the empty string hashes to 0 (``string_hash``).  ``hash(unicode)`` is the
  same recurrence over the code points (a UCS-4 build, as on Linux); ``hash(int) = int``
  with ``-1 -> -2``.
* the table: 8 slots to start with; ``lookdict``'s probe ``i = 5*i + perturb + 1`` with
  ``perturb >>= 5`` (``perturb`` starts as the hash, as an unsigned 64-bit number);
* growth: after an insertion of a new key that leaves ``fill * 3 >= size * 2``, the table
  is rebuilt by ``dictresize(4 * used)`` (``2 * used`` above 50000 entries), i.e. the
  smallest power of two above that, re-inserting the old slots in slot order;
* ``dict(other)`` / ``Counter.copy`` (``PyDict_Merge``): presize to ``2 * (used + other)``
  when the merge would pass 2/3, then insert ``other``'s entries in ``other``'s slot order.

Keys are ``bytes`` (a Python-2 ``str``), ``str`` (a Python-2 ``unicode``) or ``int``.
A Python-2 ``str`` and ``unicode`` holding the same ASCII text are the same key there; the
port never mixes such a pair in one dict (char-level vocabularies hold single characters
beside ``'UNK'``, ``'<s>'``, ``'</s>'``), so keys are compared as given.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

#: what a key of a Python 2 dict may be here: ``str`` (bytes), ``unicode`` (str) or ``int``
Py2Key = bytes | str | int

_MASK64 = (1 << 64) - 1
_PERTURB_SHIFT = 5
_MIN_SIZE = 8


def _signed64(x: int) -> int:
    x &= _MASK64
    return x - (1 << 64) if x >> 63 else x


def _sequence_hash(units) -> int:
    """``string_hash`` / ``unicode_hash`` (stringobject.c:1263) over byte values or code
    points, in 64-bit two's complement arithmetic as C's ``long`` wraps."""
    n = len(units)
    if n == 0:
        return 0
    x = (units[0] << 7) & _MASK64
    for u in units:
        x = ((1000003 * x) ^ u) & _MASK64
    x ^= n
    x = _signed64(x)
    return -2 if x == -1 else x


def py2_hash(key: object) -> int:
    """``hash(key)`` as a 64-bit CPython 2.7 computes it (no ``-R`` randomisation)."""
    if isinstance(key, bytes):
        return _sequence_hash(key)
    if isinstance(key, str):
        return _sequence_hash([ord(c) for c in key])
    if isinstance(key, bool) or not isinstance(key, int):
        raise TypeError(f"no Python-2 hash emulated for {type(key).__name__}")
    if not -(1 << 63) <= key < (1 << 63):
        raise TypeError("Python-2 long hashing is not emulated")  # GroundHog's keys are small
    return -2 if key == -1 else key


class Py2Dict:
    """A dict that iterates like CPython 2.7's, for inserts and updates (no deletions:
    preprocessing never deletes).  ``d[k] = v``, ``d[k]``, ``get``, ``in``, ``len`` and
    ``items()`` / ``keys()`` / iteration in Python 2's order."""

    __slots__ = ("_keys", "_hashes", "_values", "_fill", "_index")

    def __init__(self, items: Iterable[tuple[Py2Key, object]] = ()) -> None:
        self._keys: list = [None] * _MIN_SIZE
        self._hashes: list = [0] * _MIN_SIZE
        self._values: list = [None] * _MIN_SIZE
        self._fill = 0
        self._index: dict = {}  # key -> slot, only to make lookups O(1)
        for k, v in items:
            self[k] = v

    # -- dictobject.c --------------------------------------------------------------------
    def _free_slot(self, h: int) -> int:
        """``lookdict`` / ``insertdict_clean``: the first empty slot of ``h``'s probe
        sequence (never called for a key already present)."""
        mask = len(self._keys) - 1
        i = h & _MASK64
        slot = i & mask
        perturb = h & _MASK64
        while self._keys[slot] is not None:
            i = (5 * i + perturb + 1) & _MASK64
            slot = i & mask
            perturb >>= _PERTURB_SHIFT
        return slot

    def _resize(self, minused: int) -> None:
        """``dictresize``: the smallest power of two > ``minused`` (at least 8), old
        entries re-inserted in slot order."""
        size = _MIN_SIZE
        while size <= minused:
            size <<= 1
        old = [
            (k, h, v) for k, h, v in zip(self._keys, self._hashes, self._values) if k is not None
        ]
        self._keys, self._hashes, self._values = [None] * size, [0] * size, [None] * size
        self._index = {}
        for k, h, v in old:
            self._place(k, h, v)
        self._fill = len(old)

    def _place(self, key, h, value) -> None:
        slot = self._free_slot(h)
        self._keys[slot], self._hashes[slot], self._values[slot] = key, h, value
        self._index[key] = slot

    def __setitem__(self, key: Py2Key, value: object) -> None:
        slot = self._index.get(key)
        if slot is not None:  # an existing key: value replaced, no resize
            self._values[slot] = value
            return
        self._place(key, py2_hash(key), value)
        self._fill += 1
        # PyDict_SetItem: grow when a new key leaves the table 2/3 full
        if self._fill * 3 >= len(self._keys) * 2:
            used = len(self._index)
            self._resize((2 if used > 50000 else 4) * used)

    def merge_from(self, other: Py2Dict) -> None:
        """``PyDict_Merge(self, other)`` (``dict(other)``, ``d.update(other_dict)``)."""
        if (self._fill + len(other)) * 3 >= len(self._keys) * 2:
            self._resize((len(self) + len(other)) * 2)
        for k, v in other.items():
            slot = self._index.get(k)
            if slot is not None:
                self._values[slot] = v
            else:  # insertdict on a table that cannot need growing
                self._place(k, py2_hash(k), v)
                self._fill += 1

    # -- the mapping interface used by preprocessing -------------------------------------
    def __getitem__(self, key: Py2Key) -> object:
        return self._values[self._index[key]]

    def get(self, key: Py2Key, default: object = None) -> object:
        slot = self._index.get(key)
        return default if slot is None else self._values[slot]

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def __len__(self) -> int:
        return len(self._index)

    def items(self) -> list:
        return [(k, v) for k, v in zip(self._keys, self._values) if k is not None]

    def keys(self) -> list:
        return [k for k in self._keys if k is not None]

    def __iter__(self) -> Iterator[Py2Key]:
        return iter(self.keys())

    def values(self) -> list:
        return [v for k, v in zip(self._keys, self._values) if k is not None]

    def to_dict(self) -> dict:
        """A plain dict whose insertion order is Python 2's iteration order."""
        return dict(self.items())
