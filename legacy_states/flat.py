"""A pickle of one flat dict -- GroundHog's vocabularies -- checked in one quick pass.

``preprocess.py -d`` wrote ``vocab.*.pkl`` (protocol 2: ``EMPTY_DICT``, ``MARK``, a
thousand ``SHORT_BINSTRING``/``BININT`` pairs, ``SETITEMS``) and ``invert-dict.py``
``ivocab.*.pkl`` (protocol 0: ``MARK DICT``, then ``INT``, ``STRING``, ``PUT``,
``SETITEM`` per word).  The general walk of :mod:`.prescan` charges an abstract value
per opcode, about 1.5 us each: 0.15 s of a 30,000-word vocabulary, three of which a
``translate`` opens before it starts (issue 54).  :func:`flat_dict` recognises only the
opcodes such a dict is written with, keeps no value per opcode, and answers whether the
file is exactly

    [PROTO] dict (MARK (k v)* SETITEMS | k v SETITEM)* STOP

with a fresh dict (``EMPTY_DICT``, or ``MARK`` scalars ``DICT``) whose keys ``k`` and
values ``v`` are strings, byte strings or integers, memo writes (``PUT``/``BINPUT``/
``LONG_BINPUT``/``MEMOIZE``; no memo read) and ``FRAME`` markers anywhere between opcodes.  Such a pickle is what the general walk accepts without question -- no
container inside another, no global, no call, no memo read -- provided its keys are safe
hash keys (a string, or an integer of magnitude below
:data:`~.prescan.KEY_INT_LIMIT`), its memo indices below the file's size, and its
estimate within the budget; :func:`flat_dict` checks those three too.  Anything else --
another opcode, a ``GET``, a nested container, a bad length, an unsafe key, an estimate
over the budget -- answers ``None`` and the general walk decides, with its own message.

The estimate is the walk's, charge for charge (text ``5k + 180`` bytes, an integer 8 or
``INT`` plus its bytes, a memo entry 100, the memo table 8 per index up to the largest,
an entry ``ENTRY / 2`` per item), so a file this pass accepts the walk would accept too
(``parity_tests/hardening/test_flat_pickles.py`` runs both on mutated vocabularies).
"""

from __future__ import annotations

from dataclasses import dataclass

from .prescan import BOOKKEEPING, EMPTY, ENTRY, INT, KEY_INT_LIMIT, PTR

# opcode byte -> what this pass does with it (pickletools' names in the comments)
_OTHER, _TEXT, _INT, _PUT, _SETITEMS, _SETITEM, _MARK, _LINE, _MEMOIZE, _DICT, _FRAME, _STOP = (
    range(12)
)
_KIND = [_OTHER] * 256
#: text and integer opcodes of a fixed width or a length prefix:
#: opcode -> (bytes of the prefix or the value, signed, a byte string?)
_WIDTH: dict[int, tuple[int, bool, bool]] = {}
for _code, _width, _signed, _bytes in (
    ("X", 4, False, False),  # BINUNICODE
    ("\x8c", 1, False, False),  # SHORT_BINUNICODE
    ("\x8d", 8, False, False),  # BINUNICODE8
    ("T", 4, True, True),  # BINSTRING
    ("U", 1, False, True),  # SHORT_BINSTRING
    ("B", 4, False, True),  # BINBYTES
    ("C", 1, False, True),  # SHORT_BINBYTES
):
    _KIND[ord(_code)] = _TEXT
    _WIDTH[ord(_code)] = (_width, _signed, _bytes)
for _code, _width in (("K", 1), ("M", 2), ("J", 4)):  # BININT1, BININT2, BININT
    _KIND[ord(_code)] = _INT
    _WIDTH[ord(_code)] = (_width, False, False)
for _code, _kind in (
    ("q", _PUT),  # BINPUT
    ("r", _PUT),  # LONG_BINPUT
    ("u", _SETITEMS),
    ("s", _SETITEM),
    ("(", _MARK),
    ("S", _LINE),  # STRING
    ("V", _LINE),  # UNICODE
    ("I", _LINE),  # INT
    ("p", _LINE),  # PUT
    ("\x94", _MEMOIZE),
    ("}", _DICT),  # EMPTY_DICT
    ("d", _DICT),  # DICT
    ("\x95", _FRAME),
    (".", _STOP),
):
    _KIND[ord(_code)] = _kind


@dataclass(frozen=True)
class FlatDict:
    """What :func:`flat_dict` learnt: ``entries`` items were set, ``byte_strings``: some
    key or value is a byte string (to be decoded), ``estimate``: the bytes charged."""

    entries: int
    byte_strings: bool
    estimate: int


def flat_dict(data: bytes, limit: int) -> FlatDict | None:
    """``data`` as one flat dict of scalars within ``limit`` bytes, or ``None`` (not that
    shape, or not certainly acceptable: the general walk must decide)."""
    n = len(data)
    pos = 2 if n >= 2 and data[0] == 0x80 else 0  # PROTO
    kinds, widths, from_bytes = _KIND, _WIDTH, int.from_bytes
    cost = n
    memo: set[int] = set()
    made = marked = False  # the dict exists; a MARK is open
    items = entries = 0  # scalars since the dict or the MARK; entries set
    byte_strings = False
    while pos < n:
        op = data[pos]
        kind = kinds[op]
        pos += 1
        if kind == _TEXT:
            width, signed, is_bytes = widths[op]
            if pos + width > n:
                return None
            k = (
                data[pos]
                if width == 1
                else from_bytes(data[pos : pos + width], "little", signed=signed)
            )
            pos += width + k
            if k < 0 or pos > n:
                return None
            cost += 5 * k + 180
            byte_strings |= is_bytes
            items += 1
        elif kind == _PUT:
            width = 1 if op == 0x71 else 4  # BINPUT, LONG_BINPUT
            if pos + width > n:
                return None
            memo.add(data[pos] if width == 1 else from_bytes(data[pos : pos + 4], "little"))
            pos += width
            cost += 100
        elif kind == _INT:
            width = widths[op][0]
            pos += width  # at most 2**31 in magnitude: a safe key
            cost += PTR if width == 1 else INT + width
            items += 1
        elif kind == _SETITEMS or kind == _SETITEM:
            if not made or marked != (kind == _SETITEMS) or items % 2:
                return None
            if kind == _SETITEM and items != 2:  # the dict must be right below the pair
                return None
            cost += ENTRY // 2 * items
            entries += items // 2
            items, marked = 0, False
        elif kind == _LINE:  # protocol 0: an argument up to a newline
            end = data.find(b"\n", pos)
            if end < 0:
                return None
            arg, pos = data[pos:end], end + 1
            if op == 0x70:  # PUT
                if not arg.isdigit() or len(arg) > len(str(n)):
                    return None  # past any memo: the walk refuses it
                memo.add(int(arg))
                cost += 100
                continue
            if op == 0x49:  # INT
                text = arg.strip()
                digits = text[1:] if text[:1] == b"-" else text
                if not digits.isdigit() or len(digits) > 10:
                    return None  # "L", "+", spaces inside...: the walk decides
                if items % 2 == 0 and not -KEY_INT_LIMIT < int(text) < KEY_INT_LIMIT:
                    return None
                cost += INT + len(text)
            else:
                cost += 5 * len(arg) + 180
                byte_strings |= op == 0x53  # STRING
            items += 1
        elif kind == _MARK:
            if marked or items:
                return None
            cost += PTR
            marked = True
        elif kind == _MEMOIZE:
            memo.add(len(memo))
            cost += 100
        elif kind == _DICT:
            # EMPTY_DICT on an empty stack; DICT on a MARK and key-value pairs
            if made or (op == 0x64) != marked or items % 2 or (op == 0x7D and items):
                return None
            cost += EMPTY["dict"] + BOOKKEEPING + ENTRY // 2 * items
            entries += items // 2
            made, marked, items = True, False, 0
        elif kind == _FRAME:
            pos += 8
        elif kind == _STOP:
            if not made or marked or items:
                return None
            if memo and max(memo) >= n:
                return None  # the walk refuses it, naming the index
            cost += PTR * (max(memo) + 1 if memo else 0)
            return FlatDict(entries, byte_strings, cost) if cost <= limit else None
        else:
            return None
    return None  # no STOP: truncated
