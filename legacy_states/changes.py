"""GroundHog's command-line ``changes`` to a state, parsed without eval.

``sample.py``, ``score.py`` (and ``train.py``, once per argument) apply their trailing
``changes`` argument with ``state.update(eval("dict({})".format(changes)))``
(sample.py:228, score.py:114, train.py:74), so a change is written as Python keyword
arguments: ``"seqlen=50,prefix='x_'"``.  :func:`parse_changes` reads the same text with
Python's own parser (``ast``, which never runs anything) and accepts only literal values
(``ast.literal_eval``): numbers (also negative), strings (commas inside are fine), lists,
tuples, dicts, sets, ``True``/``False``/``None``.  Because ``dict(...)`` also accepts one
positional mapping, ``"{'seqlen': 50}"`` and ``"**{'seqlen': 50}"`` work as they did in the
original.  Expressions (``dim=2*32``) and names are refused with a message; so is a key
given twice (a SyntaxError in the original).
"""

from __future__ import annotations

import ast
import difflib
import logging
from collections.abc import Iterable
from typing import Any

from groundhog_port.errors import LegacyInputError

logger = logging.getLogger("groundhog_port.changes")

#: longer changes text is refused (a real one is a few hundred characters)
MAX_CHANGES_CHARS = 100_000

_WHERE = "changes"


def _fail(problem):
    return LegacyInputError(_WHERE, problem)


def _show(text, limit=80):
    """repr of (the start of) the text, for messages"""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."


#: what an unquoted word of a value (a path: ``prefix=runs/x_``, its quotes eaten by the
#: shell) parses as
_BARE = (ast.Name, ast.Attribute, ast.BinOp)


def _quoted_form(node, text, key):
    """``key='...'`` (``key=['...']`` for a list) when the value reads as unquoted words,
    else None: the form to type instead."""

    def bare(n):
        return isinstance(n, _BARE) and "'" not in (ast.get_source_segment(text, n) or "'")

    if isinstance(node, ast.List) and node.elts and all(bare(e) for e in node.elts):
        items = ", ".join(repr(ast.get_source_segment(text, e)) for e in node.elts)
        return f"{key}=[{items}]"
    if bare(node):
        return f"{key}={ast.get_source_segment(text, node)!r}"
    return None


def _literal(node, text, what, key=None):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        source = ast.get_source_segment(text, node) or ast.dump(node)
        quoted = _quoted_form(node, text, key) if key and len(source) <= 200 else None
        source = source if len(source) <= 80 else source[:80] + "..."
        raise _fail(
            f"{what} is not a literal: {source!r} (only numbers, strings, lists, tuples, "
            "dicts, True/False/None are accepted; nothing is evaluated)"
            + (
                f'; strings are quoted: {quoted} (in a shell, quote the whole word: "{quoted}")'
                if quoted
                else ""
            )
        ) from None


def _pairs_from_positional(value, source):
    if isinstance(value, dict):
        return list(value.items())
    try:
        pairs = [tuple(item) for item in value]
        if all(len(p) == 2 for p in pairs):
            return pairs
    except TypeError:
        pass
    raise _fail(
        f"positional argument {source!r} is neither a dict nor a list of (key, value) pairs"
    )


def parse_changes(text: str | list | tuple | None) -> dict:
    """``"key=value, key2=value2"`` -> ``{'key': value, 'key2': value2}`` (order kept).

    Empty or blank text gives ``{}``.  Any syntax problem raises
    :class:`LegacyInputError` (path ``changes``) saying what is wrong.  A list of texts
    is applied in turn, a later one overriding an earlier one, as train.py applied each
    of its arguments (train.py:74).
    """
    if isinstance(text, (list, tuple)):
        merged = {}
        for one in text:
            merged.update(parse_changes(one))
        return merged
    if text is None or not text.strip():
        return {}
    if len(text) > MAX_CHANGES_CHARS:
        raise _fail(f"{len(text)} characters, more than the {MAX_CHANGES_CHARS} accepted")
    wrapped = f"dict({text.strip()})"
    try:
        tree = ast.parse(wrapped, mode="eval")
    except SyntaxError as err:
        col = (err.offset or 1) - len("dict(")
        hint = f" near character {col}" if 0 < col <= len(text.strip()) else ""
        raise _fail(
            f"cannot parse {_show(text.strip())}{hint}: {err.msg} "
            "(expected key=value pairs separated by commas, e.g. seqlen=50,prefix='x_')"
        ) from None
    except (ValueError, MemoryError, RecursionError) as err:
        raise _fail(f"cannot parse {_show(text.strip())}: {type(err).__name__}") from None

    call = tree.body
    # the whole expression must still be one dict(...) call: text such as "a=1) + (2" or
    # "a=1)(b=2" would otherwise close the call early
    if not (
        isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "dict"
    ):
        raise _fail(
            f"cannot parse {_show(text.strip())}: expected key=value pairs separated by commas"
        )
    if len(call.args) > 1:
        raise _fail(
            f"more than one positional argument in {_show(text.strip())}: expected key=value pairs"
        )

    result: dict = {}

    def put(key, value):
        if not isinstance(key, str):
            raise _fail(f"key {key!r} is not a string")
        if key in result:
            raise _fail(f"key {key!r} given twice")
        result[key] = value

    for arg in call.args:
        if isinstance(arg, ast.Starred):
            raise _fail(f"*{ast.get_source_segment(wrapped, arg.value)} is not accepted")
        value = _literal(arg, wrapped, "positional argument")
        for key, val in _pairs_from_positional(value, ast.get_source_segment(wrapped, arg)):
            put(key, val)
    for kw in call.keywords:
        if kw.arg is None:  # **{...}
            value = _literal(kw.value, wrapped, "**argument")
            if not isinstance(value, dict):
                raise _fail(f"**{ast.get_source_segment(wrapped, kw.value)!s} is not a dict")
            for key, val in value.items():
                put(key, val)
        else:
            put(kw.arg, _literal(kw.value, wrapped, f"value of {kw.arg!r}", kw.arg))
    return result


#: keys GroundHog reads that no prototype sets (a change to one is not a typo):
#: encdec.py (c_dim, hid_mult, softmax_layer), score.py (force_enc_repr_cpu), the keys
#: mainLoop.py and the trainers keep in the state
KEYS_BEYOND_PROTOTYPES = (
    "c_dim",
    "hid_mult",
    "softmax_layer",
    "force_enc_repr_cpu",
    "best_params_pos",
    "bstep",
    "btime",
    "bvalidcost",
    "clr",
    "cost_threshold",
    "divide_lr",
    "gotNaN",
    "lr_start",
    "step",
    "testtime",
    "traincost",
    "validtime",
    "wholetime",
    "moment",
    "profile",
)
#: ``prefix_lookup(state, prefix, key)`` (encdec.py:560) reads ``<prefix>_<key>`` first
PREFIXED_KEYS = tuple(
    f"{prefix}_{key}"
    for prefix in ("enc", "back_enc", "dec")
    for key in (
        "activ",
        "rec_layer",
        "rec_gating",
        "rec_reseting",
        "rec_gater",
        "rec_reseter",
        "rec_weight_scale",
    )
)


def known_keys(state_keys: Iterable[str] = ()) -> set[str]:
    """The state keys GroundHog code reads: ``state_keys`` (a stored state's), every
    prototype's, :data:`KEYS_BEYOND_PROTOTYPES` and :data:`PREFIXED_KEYS`."""
    from .prototypes import PROTOTYPES

    return set(state_keys).union(
        KEYS_BEYOND_PROTOTYPES, PREFIXED_KEYS, *(proto() for proto in PROTOTYPES.values())
    )


def check_change_keys(
    changes: dict[str, Any], state_keys: Iterable[str], strict: bool = False
) -> list[str]:
    """Warn about each key of ``changes`` that no GroundHog code reads (a typo such as
    ``loopIter=50`` for ``loopIters``, which the original added to the state unused),
    naming the closest known key; with ``strict`` raise :class:`LegacyInputError` instead.

    Known keys: ``state_keys`` (the prototype and the stored state), every prototype's,
    :data:`KEYS_BEYOND_PROTOTYPES` and :data:`PREFIXED_KEYS`.  Returns the messages.
    """
    known = known_keys(state_keys)
    messages = []
    for key in changes:
        if key in known:
            continue
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}?" if close else "no known key is close"
        messages.append(
            f"unknown state key {key!r} in the changes ({hint}): it is added to "
            "the state and never read, as in GroundHog"
        )
    if messages and strict:
        raise _fail("; ".join(messages) + " (--strict)")
    for message in messages:
        logger.warning("%s", message)
    return messages
