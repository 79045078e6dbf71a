"""The archive's typed records checked against their one definition.

A record (an experiment's result, :mod:`.result`; a plan entry, :mod:`.plan_file`) is a
``TypedDict``: the producer fills it (mypy checks the keys it writes), the report reads
it, and what comes back from disk (a cache entry, a plan) is checked by :func:`problem`
against the same class -- no second schema to keep in step.

The JSON conventions: ``int`` is an integer (never a flag), ``float`` a number or one of
``"nan"``, ``"inf"``, ``"-inf"`` (a NaN cost is a genuine GroundHog output and strict JSON
has none, :func:`groundhog_port.tasks.archive.cache.strict_json`); ``X | None`` may be
``null``; a key a record class marks optional (``total=False``) may be absent, every other
key must be present, and no other key may be.
"""

from __future__ import annotations

import math
import types
import typing
from typing import Any, Union

NON_FINITE = ("nan", "inf", "-inf")


def _is_record(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def problem(value: Any, tp: Any, where: str = "result") -> str | None:
    """Where ``value`` (parsed JSON) departs from type ``tp`` (one line), or ``None``."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        found = [problem(value, t, where) for t in typing.get_args(tp)]
        return None if None in found else found[-1]
    if tp is None or tp is type(None):
        ok = value is None
    elif origin is list:
        if not isinstance(value, list):
            return f"{where} is not a list"
        (item,) = typing.get_args(tp)
        for i, x in enumerate(value):
            bad = problem(x, item, f"{where}[{i}]")
            if bad:
                return bad
        return None
    elif _is_record(tp):
        return _record_problem(value, tp, where)
    elif tp is float:
        ok = (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and not (isinstance(value, float) and not math.isfinite(value))
        ) or value in NON_FINITE
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp in (str, bool):
        ok = isinstance(value, tp)
    else:
        raise TypeError(f"{tp!r}: not a type a record holds")
    return None if ok else f"{where} is of the wrong type ({type(value).__name__})"


def _record_problem(value: Any, tp: Any, where: str) -> str | None:
    if not isinstance(value, dict):
        return f"{where} is not an object"
    hints = typing.get_type_hints(tp)
    unknown = sorted(set(value) - set(hints))
    if unknown:
        return f"{where} has an unknown key {str(unknown[0])[:80]!r}"
    for key, sub in hints.items():
        if key not in value:
            if key in tp.__required_keys__:
                return f"{where} has no {key!r}"
            continue
        bad = problem(value[key], sub, f"{where}[{key!r}]")
        if bad:
            return bad
    return None


def keys(tp: Any) -> frozenset[str]:
    """Every key record class ``tp`` may hold."""
    return frozenset(typing.get_type_hints(tp))
