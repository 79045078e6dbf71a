"""A pickle's budget, worked out before the unpickler builds anything.

The C unpickler builds whatever the opcodes say, as fast as it can read them, and some of
what it builds is far larger than the bytes that asked for it or hurts before any check of
ours can run (issue 25):

* ``EMPTY_SET`` is one byte and a 216-byte set (twice that once :func:`unpickle._finish`
  copies it): 5 MB of them took 2.7 GB and 71 s; ``EMPTY_DICT`` 1.1 GB;
* a dict key that is a tuple nested 200,000 deep: inserting it hashes it, the C hash
  recurses once per level and overflows the C stack (SIGSEGV) before any depth check;
* dict keys chosen to share one hash (``hash(k) == hash(k + 2**61 - 1)`` for ints): each
  insertion compares with every earlier key, 40,000 keys took 163 s;
* a whitelisted constructor called with a size (``bytearray(3000000000)``) or called over
  and over on one large memoised string.

:func:`prescan` walks the opcodes once, as the unpickler will, but with an abstract value
per object (its kind, payload size, nesting depth, and whether it is a safe hash key), and
charges each object the memory it will cost.  It refuses, naming the file and the byte:

* a tuple or frozenset nested more than :data:`MAX_DEPTH` levels;
* a dict key or set element that is not a string, a byte string, an integer of magnitude
  below :data:`KEY_INT_LIMIT`, ``None`` or a bool -- the only keys GroundHog's states and
  vocabularies use, and ones no file can make collide: strings hash with a per-process
  random key, and ``hash(k) == k`` for every integer of magnitude below ``2**61 - 1``, so
  distinct keys in that range never share a hash (``-1`` and ``-2`` excepted);
* a total estimate over the parse budget (:mod:`groundhog_port.budget`);
* a memo index no pickle of this size can need (``PUT 127990723`` in a 3 KB state made the
  C unpickler size its memo table at 1.9 GB: issue 17, fuzz seed 17217 case 1494).

The estimates (CPython 3, 64-bit) charge each object at least its real size plus the copy
:func:`unpickle._finish` makes and the bookkeeping of this walk and of ``_finish``
(:data:`BOOKKEEPING`): ``sys.getsizeof`` of an empty set is 216, dict 64, list 56,
tuple 40 + 8 per item; a dict entry costs at most about 50 bytes at the lowest fill
(index + 24-byte entry, table at most 1/3 empty), a set entry 16 bytes at fill >= 40% ->
40; a str of n UTF-8 bytes at most 4n + 80 (one astral character makes every character 4
bytes), bytes n + 33.  Where the walk cannot go on (an unknown opcode, truncated data) it
stops: the unpickler cannot get past that point either, and reports the damage.
"""

from __future__ import annotations

import pickletools

from groundhog_port import budget
from groundhog_port.errors import LegacyInputError

#: containers nested deeper than this are refused (GroundHog data is at most 3 deep; a
#: self-containing list would otherwise recurse forever in unpickle._finish)
MAX_DEPTH = 100
#: integers usable as dict keys / set elements: ``hash(k) == k`` far below ``2**61 - 1``,
#: and 2**31 covers every vocabulary id (BININT is 4 bytes)
KEY_INT_LIMIT = 2**31
PTR = 8
#: per object: this walk's abstract value (~72 bytes), ``_finish``'s memo and ``_sizes``'
#: entries (~100 bytes each)
BOOKKEEPING = 300
#: one item added to a list or tuple: its slot, the copy's slot, and room for the set it may
#: later be turned into (``frozenset(list)``, 40 per element)
ITEM = 2 * PTR + 40
#: one dict entry (both copies) or set element (both copies)
ENTRY = 2 * 50
#: empty containers, twice (the unpickler's and ``_finish``'s copy)
EMPTY = {"list": 2 * 56, "dict": 2 * 64, "set": 2 * 216, "frozenset": 2 * 216, "tuple": 2 * 40}
INT = 32
FLOAT = 24
#: tuples up to this long keep their items (call arguments: numpy's ``_frombuffer`` has 4)
MAX_ARGS = 8

_SAFE_KEY_TEXT = "a string, a byte string, an integer below 2**31 in magnitude, None or a bool"


class _V:
    """Abstract value: ``kind``; ``size``: payload bytes it carries (deep, as copies of it
    would cost); ``n``: items (or characters); ``depth``: tuple/frozenset nesting; ``key``:
    safe as a hash key (containers: every item is); ``text``: a short string's bytes (for
    ``STACK_GLOBAL``) or a global's ``(module, name)``; ``items``: a short tuple's items
    (argument tuples of calls)."""

    __slots__ = ("kind", "size", "n", "depth", "key", "text", "items")

    def __init__(self, kind, size=0, n=0, depth=0, key=False, text=None, items=None):
        self.kind, self.size, self.n, self.depth, self.key = kind, size, n, depth, key
        self.text, self.items = text, items


_KEY_SCALAR = _V("scalar", key=True)
_BIG_INT = _V("integer of 2**31 or more in magnitude")
_FLOAT = _V("float")
_UNKNOWN = _V("object")


class _Stop(Exception):
    """The walk cannot go on; the unpickler will report the damage."""


#: argument lengths given by a prefix: (prefix bytes, signed)
_LENGTH_PREFIX = {
    pickletools.TAKEN_FROM_ARGUMENT1: (1, False),
    pickletools.TAKEN_FROM_ARGUMENT4: (4, True),
    pickletools.TAKEN_FROM_ARGUMENT4U: (4, False),
    pickletools.TAKEN_FROM_ARGUMENT8U: (8, False),
}
_TEXT_OPS = {
    "STRING",
    "BINSTRING",
    "SHORT_BINSTRING",
    "BINBYTES",
    "SHORT_BINBYTES",
    "BINBYTES8",
    "UNICODE",
    "BINUNICODE",
    "SHORT_BINUNICODE",
    "BINUNICODE8",
}
_SET_BUILDERS = {"set", "frozenset"}
_ITER_BUILDERS = _SET_BUILDERS | {"list", "tuple", "dict", "bytearray"}


class _Walk:
    def __init__(self, data, path):
        self.data, self.path, self.n = data, path, len(data)
        self.stack, self.marks, self.memo = [], [], {}
        self.memo_len = 0
        self.cost = self.n  # the file's bytes, held while it is parsed
        self.limit = budget.budget_bytes()
        self.pos = 0

    # ---- bookkeeping -------------------------------------------------------------------
    def charge(self, nbytes):
        self.cost += nbytes
        if self.cost > self.limit:
            self.over()

    def over(self):
        raise budget.over_budget(
            self.path, f"the objects of this pickle (reached at byte {self.pos} of {self.n})"
        )

    def refuse(self, problem):
        raise LegacyInputError(
            self.path,
            f"{problem} at byte {self.pos} of the pickle: not "
            "GroundHog data (refused before unpickling)",
        )

    def push(self, v, nbytes=PTR):
        self.stack.append(v)
        self.cost += nbytes  # charge(), inlined: the walk's most frequent step
        if self.cost > self.limit:
            self.over()

    def pop(self):
        if len(self.stack) <= (self.marks[-1] if self.marks else 0):
            raise _Stop
        return self.stack.pop()

    def pop_mark(self):
        if not self.marks:
            raise _Stop
        at = self.marks.pop()
        items = self.stack[at:]
        del self.stack[at:]
        return items

    def top(self):
        if not self.stack:
            raise _Stop
        return self.stack[-1]

    def check_keys(self, items, what):
        for k in items:
            if not k.key:
                article = "an" if k.kind[0] in "aeiou" else "a"
                self.refuse(
                    f"{what} that is {article} {k.kind} (only {_SAFE_KEY_TEXT} are accepted: "
                    "other keys can be made to share one hash and make loading quadratic)"
                )

    def nested(self, kind, items):
        depth = 1 + max((v.depth for v in items), default=0)
        if depth > MAX_DEPTH:
            self.refuse(f"a {kind} nested more than {MAX_DEPTH} levels deep")
        return depth

    # ---- containers --------------------------------------------------------------------
    def tuple_of(self, items):
        depth = self.nested("tuple", items)
        self.push(
            _V(
                "tuple",
                sum(v.size for v in items) + PTR * len(items),
                len(items),
                depth,
                items=items if len(items) <= MAX_ARGS else None,
            ),
            EMPTY["tuple"] + BOOKKEEPING + ITEM * len(items),
        )

    def add_items(self, target, items, per_item):
        if target.kind in ("list", "dict", "set"):
            target.n += len(items)
            target.size += sum(v.size for v in items) + PTR * len(items)
            target.key = target.key and all(v.key for v in items)
            # the deepest item: what tuple(list) or frozenset(list) would nest
            target.depth = max(target.depth, max((v.depth for v in items), default=0))
        self.charge(per_item * len(items))

    def set_items(self, pairs):
        keys = pairs[0::2]
        self.check_keys(keys, "a dict key")
        self.add_items(self.top(), pairs, ENTRY // 2)

    # ---- calls ---------------------------------------------------------------------------
    def call(self, fn, args):
        """``fn(*args)`` for a whitelisted global (the unpickler refuses any other)."""
        name = fn.text[1] if fn.kind == "global" and fn.text else None
        if name == "_reconstructor" and len(args) == 3:
            cls = args[0].text[1] if args[0].kind == "global" and args[0].text else None
            return self.build_from(cls, args[2])
        if name in _ITER_BUILDERS and fn.text[0] in ("__builtin__", "builtins"):
            return self.build_from(name, args[0] if args else _V("tuple", key=True))
        size = sum(v.size for v in args)
        self.charge(3 * size + BOOKKEEPING)  # numpy: the raw bytes, a copy, the array
        if name == "encode":  # _codecs.encode(latin-1 text): bytes
            return _V("str", size, size, key=True)
        return _V("object built by a call", size)

    def build_from(self, cls, it):
        """``cls(it)`` for the iterable-taking builtins: a set's elements are hashed."""
        if cls in _SET_BUILDERS or cls == "dict":
            self.check_keys([it], f"an element of a {cls}() argument")
        n = it.n
        self.charge(EMPTY.get(cls, 2 * 56) + BOOKKEEPING + (ENTRY + ITEM) * n + 2 * it.size)
        if cls == "frozenset":
            return _V("frozenset", it.size, n, self.nested("frozenset", [it]), key=True)
        kind = cls if cls in ("list", "set", "dict", "tuple") else "object"
        depth = self.nested("tuple", [it]) if kind == "tuple" else it.depth
        return _V(kind, it.size, n, depth, key=it.key)

    # ---- the walk ------------------------------------------------------------------------
    def run(self):
        data, n, pos = self.data, self.n, 0
        table = _TABLE
        while pos < n:
            entry = table.get(data[pos])
            if entry is None:
                return
            self.pos = pos
            pos += 1
            length, pair, prefix, signed, handler = entry
            if length is None:  # up to a newline (two for GLOBAL/INST)
                end = data.find(b"\n", pos)
                if pair and end >= 0:
                    end = data.find(b"\n", end + 1)
                if end < 0:
                    return
                arg, pos = data[pos:end], end + 1
            else:
                if prefix:
                    if pos + prefix > n:
                        return
                    length = prefix + int.from_bytes(
                        data[pos : pos + prefix], "little", signed=signed
                    )
                if length < 0 or pos + length > n:
                    return
                arg, pos = data[pos : pos + length], pos + length
            if handler is None:  # STOP
                return
            handler(self, arg)

    def op_text(self, arg, prefix=0):
        k = len(arg) - prefix
        self.push(_V("str", k, k, key=True, text=arg[prefix:] if k <= 100 else None), 5 * k + 180)

    def op_int(self, value, nbytes):
        safe = value is not None and -KEY_INT_LIMIT < value < KEY_INT_LIMIT
        self.push(_KEY_SCALAR if safe else _BIG_INT, INT + nbytes)

    def op_text_int(self, arg):
        text = arg.strip().rstrip(b"L")
        if len(text) > 20:
            return self.op_int(None, len(text))
        try:
            return self.op_int(int(text), len(text))
        except ValueError:
            raise _Stop from None

    def op_long(self, arg, prefix):
        body = arg[prefix:]
        value = int.from_bytes(body, "little", signed=True) if len(body) <= 8 else None
        self.op_int(value, len(body))

    def op_mark(self, arg):
        self.marks.append(len(self.stack))
        self.charge(PTR)

    def op_pop(self, arg):
        if len(self.stack) > (self.marks[-1] if self.marks else 0):
            self.stack.pop()
        elif self.marks:
            self.marks.pop()

    def op_tuple_n(self, count):
        items = [self.pop() for _ in range(count)][::-1]
        self.tuple_of(items)

    def op_list(self, arg):
        v = _V("list", key=True)
        self.add_items(v, self.pop_mark(), ITEM)
        self.push(v, EMPTY["list"] + BOOKKEEPING)

    def op_dict(self, arg):
        pairs = self.pop_mark()
        self.check_keys(pairs[0::2], "a dict key")
        v = _V("dict", key=True)
        self.add_items(v, pairs, ENTRY // 2)
        self.push(v, EMPTY["dict"] + BOOKKEEPING)

    def op_setitem(self, arg):
        value, key = self.pop(), self.pop()
        self.set_items([key, value])

    def op_additems(self, arg):
        items = self.pop_mark()
        self.check_keys(items, "a set element")
        self.add_items(self.top(), items, ENTRY)

    def op_frozenset(self, arg):
        items = self.pop_mark()
        self.check_keys(items, "a frozenset element")
        depth = self.nested("frozenset", items)
        self.push(
            _V("frozenset", sum(v.size for v in items), len(items), depth, key=True),
            EMPTY["frozenset"] + BOOKKEEPING + ENTRY * len(items),
        )

    def op_get(self, index):
        if index not in self.memo:
            raise _Stop
        self.push(self.memo[index])

    def op_text_index(self, arg, then):
        text = arg.strip()
        if not text.isdigit():
            raise _Stop
        if len(text) > len(str(self.n)):  # past any memo; int() refuses 4300 digits
            if then is not _Walk.op_put:
                raise _Stop  # a GET: the unpickler reports it
            raise LegacyInputError(
                self.path,
                f"corrupt pickle (memo index of {len(text)} digits in a file of {self.n} bytes)",
            )
        then(self, int(text))

    def op_put(self, index):
        if index >= self.n:
            raise LegacyInputError(
                self.path, f"corrupt pickle (memo index {index} in a file of {self.n} bytes)"
            )
        if not self.stack:
            raise _Stop
        self.memo[index] = self.stack[-1]
        if index >= self.memo_len:
            self.cost += PTR * (index + 1 - self.memo_len)
            self.memo_len = index + 1
        self.charge(100)

    def op_global(self, arg):
        module, _, name = arg.partition(b"\n")
        self.push(_V("global", text=(module.decode("latin-1"), name.decode("latin-1"))))

    def op_stack_global(self, arg):
        name, module = self.pop(), self.pop()
        self.push(
            _V(
                "global",
                text=((module.text or b"").decode("latin-1"), (name.text or b"").decode("latin-1")),
            )
        )

    def op_reduce(self, arg):
        args, fn = self.pop(), self.pop()
        self.push(self.call(fn, self._args(args)))

    def op_build(self, arg):
        state = self.pop()
        self.top()
        self.charge(3 * state.size + BOOKKEEPING)

    def op_inst(self, arg):
        module, _, name = arg.partition(b"\n")
        fn = _V("global", text=(module.decode("latin-1"), name.decode("latin-1")))
        self.push(self.call(fn, self.pop_mark()))

    def op_obj(self, arg):
        items = self.pop_mark()
        if not items:
            raise _Stop
        self.push(self.call(items[0], items[1:]))

    def op_newobj(self, arg, kwargs=False):
        if kwargs:
            self.pop()
        args, cls = self.pop(), self.pop()
        self.push(self.call(cls, self._args(args)))

    @staticmethod
    def _args(args):
        """The items of a call's argument tuple (a longer one, or not a tuple: one unknown
        value standing for all of it, which the unpickler will refuse as arguments)."""
        if args.kind == "tuple" and args.items is not None:
            return args.items
        return [_V("object", args.size, args.n)]


def _handlers():
    """opcode name -> ``handler(walk, arg)``; ``None``: STOP."""
    W = _Walk
    le = lambda arg: int.from_bytes(arg, "little")  # noqa: E731
    h = {
        "STOP": None,
        "PROTO": lambda w, a: None,
        "FRAME": lambda w, a: None,
        "MARK": W.op_mark,
        "POP": W.op_pop,
        "POP_MARK": lambda w, a: w.pop_mark(),
        "DUP": lambda w, a: w.push(w.top()),
        "NONE": lambda w, a: w.push(_KEY_SCALAR),
        "NEWTRUE": lambda w, a: w.push(_KEY_SCALAR),
        "NEWFALSE": lambda w, a: w.push(_KEY_SCALAR),
        "BININT1": lambda w, a: w.push(_KEY_SCALAR),
        "BININT2": lambda w, a: w.op_int(le(a), 2),
        "BININT": lambda w, a: w.op_int(int.from_bytes(a, "little", signed=True), 4),
        "INT": W.op_text_int,
        "LONG": W.op_text_int,
        "LONG1": lambda w, a: w.op_long(a, 1),
        "LONG4": lambda w, a: w.op_long(a, 4),
        "FLOAT": lambda w, a: w.push(_FLOAT, PTR + FLOAT),
        "BINFLOAT": lambda w, a: w.push(_FLOAT, PTR + FLOAT),
        "BYTEARRAY8": lambda w, a: w.push(
            _V("bytearray", len(a) - 8, len(a) - 8), 2 * (len(a) - 8) + BOOKKEEPING
        ),
        "EMPTY_TUPLE": lambda w, a: w.push(_V("tuple", depth=1, items=[])),
        "TUPLE": lambda w, a: w.tuple_of(w.pop_mark()),
        "TUPLE1": lambda w, a: w.op_tuple_n(1),
        "TUPLE2": lambda w, a: w.op_tuple_n(2),
        "TUPLE3": lambda w, a: w.op_tuple_n(3),
        "EMPTY_LIST": lambda w, a: w.push(_V("list", key=True), EMPTY["list"] + BOOKKEEPING),
        "LIST": W.op_list,
        "APPEND": lambda w, a: w.add_items(
            w.stack[-2] if len(w.stack) > 1 else w.top(), [w.pop()], ITEM
        ),
        "APPENDS": lambda w, a: w.add_items(*reversed((w.pop_mark(), w.top())), ITEM),
        "EMPTY_DICT": lambda w, a: w.push(_V("dict", key=True), EMPTY["dict"] + BOOKKEEPING),
        "DICT": W.op_dict,
        "SETITEM": W.op_setitem,
        "SETITEMS": lambda w, a: w.set_items(w.pop_mark()),
        "EMPTY_SET": lambda w, a: w.push(_V("set", key=True), EMPTY["set"] + BOOKKEEPING),
        "ADDITEMS": W.op_additems,
        "FROZENSET": W.op_frozenset,
        "GET": lambda w, a: w.op_text_index(a, W.op_get),
        "BINGET": lambda w, a: w.op_get(le(a)),
        "LONG_BINGET": lambda w, a: w.op_get(le(a)),
        "PUT": lambda w, a: w.op_text_index(a, W.op_put),
        "BINPUT": lambda w, a: w.op_put(le(a)),
        "LONG_BINPUT": lambda w, a: w.op_put(le(a)),
        "MEMOIZE": lambda w, a: w.op_put(len(w.memo)),
        "GLOBAL": W.op_global,
        "STACK_GLOBAL": W.op_stack_global,
        "REDUCE": W.op_reduce,
        "BUILD": W.op_build,
        "INST": W.op_inst,
        "OBJ": W.op_obj,
        "NEWOBJ": W.op_newobj,
        "NEWOBJ_EX": lambda w, a: w.op_newobj(a, kwargs=True),
    }
    for name in _TEXT_OPS:
        h[name] = W.op_text
    # persistent ids, extensions, out-of-band buffers: the unpickler refuses them or fails
    for name in ("PERSID", "EXT1", "EXT2", "EXT4", "NEXT_BUFFER", "READONLY_BUFFER"):
        h[name] = lambda w, a: w.push(_UNKNOWN)
    h["BINPERSID"] = lambda w, a: (w.pop(), w.push(_UNKNOWN))
    return h


def _table():
    """opcode byte -> (fixed length | None for up-to-newline, two lines?, length-prefix
    bytes, prefix signed?, handler); text opcodes' handlers get their prefix length bound."""
    handlers = _handlers()
    table = {}
    for op in pickletools.opcodes:
        arg = op.arg
        length = arg.n if arg is not None else 0
        prefix, signed = _LENGTH_PREFIX.get(length, (0, False))
        handler = handlers[op.name]
        if op.name in _TEXT_OPS and prefix:
            handler = (lambda p: lambda w, a: _Walk.op_text(w, a, p))(prefix)
        if length == pickletools.UP_TO_NEWLINE:
            table[op.code.encode("latin-1")[0]] = (
                None,
                arg.name.endswith("_pair"),
                0,
                False,
                handler,
            )
        else:
            table[op.code.encode("latin-1")[0]] = (
                0 if prefix else length,
                False,
                prefix,
                signed,
                handler,
            )
    return table


_TABLE = _table()


def prescan(data: bytes, path: object) -> None:
    """Walk ``data`` (a pickle's bytes) as the unpickler will, without building anything;
    raise :class:`LegacyInputError` naming ``path`` for what the module docstring lists."""
    try:
        _Walk(data, path).run()
    except _Stop:
        pass
