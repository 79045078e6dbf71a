"""The plan of ``groundhog-port archive``: what it re-does, written as ``plan.toml`` (issue 43).

Discovery (:func:`groundhog_port.tasks.archive.plan_experiment`) writes one plan entry per
experiment: every file it chose and, beside each, why; ``archive ROOT --plan-only`` writes
them to ``OUT/plan.toml`` and stops; ``archive ROOT --plan FILE`` runs exactly that plan (a
user fixes a guess by editing one line); with neither, the discovered plan is run.  The
format (docs/archives.md, "The plan"), version :data:`VERSION`::

    version = 1

    [[experiment]]
    id = "search/run_"              # the state's path under ROOT, without "state.pkl"
    state = "search/run_state.pkl"
    model = "search/run_model1.npz"
    snapshots = ["search/run_model0.npz", "search/run_model1.npz"]
    changes = []                    # state changes, as --changes takes them
    word_indx = "dicts/en.vocab.pkl"
    word_indx_why = "by content: ..."
    ...

    [[experiment.output]]
    file = "search/trans.txt"
    kind = "trans"                  # trans | scores | crash log
    beam_size = 10                  # or "by content": found by re-translating first lines
    normalize = true                # likewise (a name or a README only orders the guesses)
    ignore_unk = false
    source = "data/newstest2012.en"
    reference = "data/newstest2012.fr"
    snapshot = "search/run_model0.npz"
    why = "..."

Paths are relative to ROOT (or absolute); ``""`` means none (a missing file: the ``missing``
list says the line to add).  An output's settings left out, or ``"by content"``, are found
as discovery finds them, so a plan written by ``--plan-only`` always runs unedited.  A
refusal names the plan's line and the closest valid form (an unknown key: the closest
known one).  The
reader takes TOML with :mod:`tomllib` (``tomli`` on Python 3.10); the writer is the small
one below (the plan is tables of strings, integers, booleans and arrays of strings).
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypedDict

from ...errors import LegacyInputError
from ...file_names import VOCABULARY_FILE_KEYS
from ...search.defaults import MAX_RETRY_BEAM
from . import records

VERSION = 1
#: the keys of an experiment entry (``<key>_why`` beside a file says why it was chosen)
FILE_KEYS = ("state", "model", *VOCABULARY_FILE_KEYS, "test_source", "test_reference")
HOLDOUT_KEYS = ("holdout_source", "holdout_reference")


class _PlanOutput(TypedDict):
    file: str
    kind: str  # one of KINDS


class PlanOutput(_PlanOutput, total=False):
    """One archived output of a plan entry; a setting may be :data:`BY_CONTENT`."""

    test_set: str
    beam_size: int | str
    normalize: bool | str
    ignore_unk: bool | str
    settings_why: str
    source: str
    reference: str
    why: str
    snapshot: str
    snapshot_why: str
    post_processed: str


class _PlanEntry(TypedDict):
    id: str


class PlanEntry(_PlanEntry, total=False):
    """One experiment of a plan (:func:`groundhog_port.tasks.archive.plan.plan_experiment`
    makes it): each file of :data:`FILE_KEYS` and :data:`HOLDOUT_KEYS` (a path under ROOT)
    with ``<key>_why``."""

    folder: str
    state: str
    state_why: str
    model: str
    model_why: str
    word_indx: str
    word_indx_why: str
    indx_word: str
    indx_word_why: str
    word_indx_trgt: str
    word_indx_trgt_why: str
    indx_word_target: str
    indx_word_target_why: str
    test_source: str
    test_source_why: str
    test_reference: str
    test_reference_why: str
    holdout_source: str
    holdout_source_why: str
    holdout_reference: str
    holdout_reference_why: str
    snapshots: list[str]
    snapshots_why: str
    changes: list[str]
    missing: list[str]
    not_outputs: list[str]
    output: list[PlanOutput]


EXPERIMENT_KEYS = records.keys(PlanEntry)
OUTPUT_KEYS = records.keys(PlanOutput)
KINDS = ("trans", "scores", "crash log")
#: an output setting to be found by re-translating its first lines, as discovery does
BY_CONTENT = "by content"
TOP_KEYS = frozenset({"version", "root", "experiment"})
#: bytes a plan may hold in memory per byte of its text, charged against the parse budget
#: before it is parsed: tomllib's worst measured is 39 (dotted keys ``aN.b=1``: a table per
#: 10 bytes, with its bookkeeping; ``[{},...]``: 24), plus the text's lines kept to name a
#: refusal's line (up to 13 for lines of 4 bytes).  At the default budget (256 MiB) a plan
#: may be 4 MiB: some 2,000 experiments of about 2 KB each
PLAN_HELD_PER_BYTE = 64


def max_plan_bytes() -> int:
    """The largest plan read: the parse budget over :data:`PLAN_HELD_PER_BYTE`."""
    from ... import budget

    return budget.budget_bytes() // PLAN_HELD_PER_BYTE


# ----------------------------------------------------------------------------------------
# writing
# ----------------------------------------------------------------------------------------
def _toml_string(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return _toml_string(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"a plan holds strings, integers, booleans and arrays, not {type(v)}")


def _table(lines: list[str], header: str, table: dict) -> None:
    lines.append(header)
    for k, v in table.items():
        if (
            v is None
            or isinstance(v, dict)
            or (isinstance(v, list) and v and isinstance(v[0], dict))
        ):
            continue
        lines.append(f"{k} = {_toml_value(v)}")


def dumps(plan: dict) -> str:
    """``plan`` (``{"version", "root", "experiment": [entry]}``) as TOML text."""
    lines = [
        "# groundhog-port archive plan (docs/archives.md, 'The plan'): edit a line, then",
        "# groundhog-port archive ROOT --out DIR --plan THIS_FILE",
        f"version = {VERSION}",
        f"root = {_toml_string(str(plan.get('root', '')))}",
    ]
    for e in plan["experiment"]:
        lines.append("")
        for m in e.get("missing", []):
            lines.append(f"# missing: {m}")
        _table(lines, "[[experiment]]", e)
        for o in e.get("output", []):
            lines.append("")
            _table(lines, "[[experiment.output]]", o)
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------
# reading
# ----------------------------------------------------------------------------------------
def _toml():
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    import tomli  # type: ignore[import-not-found]  # the tomli>=1.1 dependency on 3.10

    return tomli


class _Lines:
    """Where each table and key of a plan's text stands, so that a refusal names its line
    (tomllib gives values, not places): the i-th ``[[experiment]]`` header, the j-th
    ``[[experiment.output]]`` after it, and the first ``key =`` line of that table."""

    def __init__(self, text: str):
        self.lines = text.splitlines()
        self._experiments: list[int] | None = None

    def _headers(self, name: str, start: int = 0, stop: int | None = None) -> list[int]:
        if name == "experiment" and start == 0 and stop is None:
            if self._experiments is None:  # once: asked for every key (was quadratic)
                self._experiments = self._scan(name, 0, len(self.lines))
            return self._experiments
        return self._scan(name, start, len(self.lines) if stop is None else stop)

    def _scan(self, name: str, start: int, stop: int) -> list[int]:
        return [
            n for n in range(start, stop) if self.lines[n].strip().replace(" ", "") == f"[[{name}]]"
        ]

    def of(self, i: int | None = None, j: int | None = None, key: str | None = None) -> str:
        """``"line N: "`` of experiment ``i`` (1-based), its output ``j``, key ``key``;
        ``""`` where the text does not say (an inline table, say)."""
        start, stop = 0, len(self.lines)
        if i is not None:
            heads = self._headers("experiment")
            if len(heads) < i:
                return ""
            start = heads[i - 1]
            stop = heads[i] if len(heads) > i else len(self.lines)
            if j is not None:
                outs = self._headers("experiment.output", start, stop)
                if len(outs) < j:
                    return ""
                start, stop = outs[j - 1], (outs[j] if len(outs) > j else stop)
            elif key is not None:  # the experiment's own keys stand before its first output
                outs = self._headers("experiment.output", start, stop)
                stop = outs[0] if outs else stop
        if key is not None:
            for n in range(start, stop):
                if self.lines[n].split("=", 1)[0].strip().strip('"') == key:
                    return f"line {n + 1}: "
        return f"line {start + 1}: " if i is not None else ""


def _unknown(path, where: str, keys, known) -> None:
    for k in keys:
        if k not in known:
            close = difflib.get_close_matches(k, sorted(known), n=1)
            raise LegacyInputError(
                path,
                f"{where}: unknown key {k!r}"
                + (
                    f" (did you mean {close[0]!r}?)"
                    if close
                    else f"; known: {', '.join(sorted(known))}"
                ),
            )


class _Lazy:
    """A refusal's place, worked out only when a refusal is written (finding a key's line
    scans its table: done for every value, a plan of many outputs took quadratic time)."""

    def __init__(self, text: Callable[[], str]):
        self.text = text

    def __str__(self) -> str:
        return self.text()

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def _place(at: _Lines, where: str, i: int, j: int | None, key: str) -> str:
    return at.of(i, j, key) + where


def _typed(path, where, value, kinds, key) -> None:
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise LegacyInputError(path, f"{where}: {key} must be {names}, not {value!r}")


def loads(text: str, path: str | os.PathLike[str] | None = None) -> dict:
    """A plan read from TOML text and checked: the version, every key known (else the
    closest known one is named), every value of its type; an output's settings may be
    left out or ``"by content"``.  Raises :class:`LegacyInputError` (one line naming the
    plan's line and the valid form) on anything else."""
    try:
        data = _toml().loads(text)
    except Exception as err:  # noqa: BLE001 -- tomllib.TOMLDecodeError / tomli's
        raise LegacyInputError(path, f"not a TOML plan: {err}") from None
    at = _Lines(text)
    for k in data:
        if k not in TOP_KEYS:
            _unknown(path, at.of(key=k) + "the plan", [k], TOP_KEYS)
    if data.get("version") != VERSION:
        raise LegacyInputError(
            path,
            at.of(key="version")
            + f"plan version {data.get('version')!r}: this groundhog-port reads version "
            f"{VERSION} (write version = {VERSION})",
        )
    seen = set()
    for i, e in enumerate(data.get("experiment", []), start=1):
        where = f"experiment {i}"
        if not isinstance(e, dict):
            raise LegacyInputError(path, f"{where} is not a table")
        for k in e:
            if k not in EXPERIMENT_KEYS:
                _unknown(path, at.of(i, key=k) + where, [k], EXPERIMENT_KEYS)
        if not isinstance(e.get("id"), str) or not e["id"]:
            raise LegacyInputError(
                path,
                at.of(i) + f"{where}: no id (the state's path without state.pkl, as "
                'id = "search/run_" for search/run_state.pkl)',
            )
        if e["id"] in seen:
            raise LegacyInputError(
                path, at.of(i, key="id") + f"{where}: id {e['id']!r} given twice"
            )
        seen.add(e["id"])
        for k in e:
            place = _Lazy(partial(_place, at, where, i, None, k))
            if k in ("snapshots", "changes", "missing", "not_outputs"):
                _typed(path, place, e[k], (list,), k)
                for x in e[k]:
                    _typed(path, place, x, (str,), k + " item")
            elif k != "output":
                _typed(path, place, e[k], (str,), k)
        for j, o in enumerate(e.get("output", []), start=1):
            w = f"{where} ({e['id']}), output {j}"
            if not isinstance(o, dict):
                raise LegacyInputError(path, at.of(i, j) + f"{w} is not a table")
            for k in o:
                if k not in OUTPUT_KEYS:
                    _unknown(path, at.of(i, j, k) + w, [k], OUTPUT_KEYS)
            for k in ("file", "kind"):
                if k not in o:
                    raise LegacyInputError(
                        path,
                        at.of(i, j)
                        + f"{w}: no {k} (as "
                        + ('file = "PATH"' if k == "file" else 'kind = "trans"')
                        + ")",
                    )
            if o["kind"] not in KINDS:
                close = difflib.get_close_matches(str(o["kind"]), KINDS, n=1)
                raise LegacyInputError(
                    path,
                    at.of(i, j, "kind")
                    + f"{w}: kind {o['kind']!r} is not one of {', '.join(KINDS)}"
                    + (f" (did you mean {close[0]!r}?)" if close else ""),
                )
            for k, v in o.items():
                _setting(path, _Lazy(partial(_place, at, w, i, j, k)), k, v)
        bad = records.problem(e, PlanEntry, where)  # the record's definition, whole
        if bad:
            raise LegacyInputError(path, at.of(i) + bad)
    data.setdefault("experiment", [])
    return data


def _setting(path, where, key, value) -> None:
    """An output's value of ``key``: a beam of at least 1 and two flags, each or
    ``"by content"``; every other key a string.  A refusal says the valid forms."""
    if key in ("beam_size", "normalize", "ignore_unk") and value == BY_CONTENT:
        return
    if key == "beam_size":
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_RETRY_BEAM:
            raise LegacyInputError(
                path,
                f"{where}: beam_size {value}: more than the {MAX_RETRY_BEAM} sample.py ever "
                f"searched with (it doubles a failing beam while below {MAX_RETRY_BEAM}, "
                f'sample.py:127): not believed (as beam_size = {MAX_RETRY_BEAM}, or "{BY_CONTENT}")',
            )
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return
        hint = (
            f"beam_size = {value}"
            if isinstance(value, str) and value.isdigit()
            else "beam_size = 5"
        )
        raise LegacyInputError(
            path,
            f'{where}: beam_size must be a number of at least 1 or "{BY_CONTENT}", not '
            f"{value!r} (as {hint})",
        )
    if key in ("normalize", "ignore_unk"):
        if isinstance(value, bool):
            return
        raise LegacyInputError(
            path,
            f'{where}: {key} must be true, false or "{BY_CONTENT}", not {value!r} (as '
            f"{key} = {'true' if str(value).lower() in ('1', 'yes', 'true') else 'false'})",
        )
    _typed(path, where, value, (str,), key)


def read(path: str | os.PathLike[str]) -> dict:
    """The plan in file ``path`` (:func:`loads`), keyed ``{"entries": {id: entry}, ...}``."""
    from ...untrusted import read_input

    p = Path(path)
    if not p.is_file():
        raise LegacyInputError(p, "--plan: file not found")
    size = p.stat().st_size
    if size > max_plan_bytes():  # before a byte is parsed: tomllib holds it many times over
        from ... import budget

        raise budget.over_budget(
            p,
            f"a plan of {size} bytes (held as up to {PLAN_HELD_PER_BYTE} times its bytes)",
            size * PLAN_HELD_PER_BYTE,
        )
    raw = read_input(p, "a plan", limit=max_plan_bytes())
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise LegacyInputError(p, f"a plan is UTF-8 text (byte {err.start})") from None
    data = loads(text, p)
    data["entries"] = {e["id"]: e for e in data["experiment"]}
    return data
