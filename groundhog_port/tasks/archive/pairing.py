"""Which model file belongs to which state, by content (issue 50, item 2), and which
vocabulary a text is in.

A model fits a state when its ``.npy`` headers hold exactly the parameters, of exactly the
shapes, that the port's own legacy table (:func:`groundhog_port.legacy.checkpoint.legacy_param_table`)
lists for the architecture the state describes -- the state read as sample.py reads it
(``prototype_state()`` updated with the pickle, sample.py:225-228) with the old-vintage
state upgrade (:mod:`legacy_states.vintage`), and the model's old-vintage ``*_back_*``
decoder projections stacked on their shapes as ``convert_model.py`` stacks the arrays
(:mod:`groundhog_port.legacy.compat`).  Names only break ties and order: the state's
``prefix`` (GroundHog saves ``prefix + 'model.npz'``, or ``prefix + 'model%d.npz'`` with
``overwrite=False``: groundhog/mainLoop.py:233-234 at 4d2433b).

The model table imports torch; it is imported here inside the functions, so
:func:`groundhog_port.tasks.archive.inventory.classify` never loads it.
"""

from __future__ import annotations

import os
from collections.abc import Container, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from ...errors import LegacyInputError
from ...file_names import snapshot_number
from .kinds import Kind, ModelFacts, Pairing, Row, StateFacts

_V = TypeVar("_V")


def _expected(stored: Mapping[str, Any]) -> tuple[dict[str, tuple[int, ...]], list[Any]] | str:
    """``({name: shape}, [(key, value)...])`` of the state's architecture, or why none."""
    from legacy_states import prototype_state
    from legacy_states.vintage import upgrade_state

    from ...legacy.checkpoint import legacy_param_table
    from ...model.config import ModelConfig

    state = prototype_state()
    state.update(upgrade_state(dict(stored)))
    try:
        cfg = ModelConfig.from_state(state)
        table, _ = legacy_param_table(cfg)
    except LegacyInputError as err:
        return f"the state describes no model the port builds: {err.problem}"
    sizes = [
        ("n_sym_source", cfg.n_sym_source),
        ("n_sym_target", cfg.n_sym_target),
        ("rank_n_approx", cfg.rank_n_approx),
        ("dim", cfg.dim),
        ("c_dim", cfg.c_dim),
    ]
    return {p.name: tuple(p.shape) for p in table}, sizes


def _model_shapes(model: ModelFacts) -> dict[str, tuple[int, ...]]:
    """Shapes after ``convert_model.py``'s ``merge_state_projections``: each ``W_0_dec_back_X``
    stacked under ``W_0_dec_X`` (rows added), as :func:`groundhog_port.legacy.compat.upgrade_model`
    does on the arrays."""
    from ...legacy.compat import BACK_PROJECTIONS

    shapes = dict(model.shapes)
    for merged, back in BACK_PROJECTIONS:
        if back in shapes and merged in shapes:
            b, f = shapes.pop(back), shapes[merged]
            if len(b) == 2 and len(f) == 2 and b[1] == f[1]:
                shapes[merged] = (f[0] + b[0], f[1])
    return shapes


def _explain(shape: tuple[int, ...], sizes: list[Any]) -> str:
    said = []
    for n in shape:
        for key, value in sizes:
            if value == n:
                if f"{key}={value}" not in said:
                    said.append(f"{key}={value}")
                break
    return ", ".join(said)


def model_fits_state(
    state: StateFacts | Mapping[str, Any], model: ModelFacts, _cache: Any = None
) -> str | None:
    """None when ``model`` (its headers) is exactly what the state's architecture saves;
    else the first reason, naming a parameter: a shape the state does not give, then a
    parameter missing, then one the architecture has no place for.  ``state``: its facts
    or the pickled dict."""
    stored = state.stored if isinstance(state, StateFacts) else state
    expected = _cache if _cache is not None else _expected(stored)
    if isinstance(expected, str):
        return expected
    table, sizes = expected
    shapes = _model_shapes(model)
    for name, want in table.items():
        got = shapes.get(name)
        if got is not None and got != want:
            return f"{name} is {got}, the state says {want} ({_explain(want, sizes)})"
    missing = [n for n in table if n not in shapes]
    if missing:
        name = missing[0]
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        return f"{name} {table[name]} is not in the model{more}: the state's architecture saves it"
    extra = [n for n in shapes if n not in table]
    if extra:
        name = extra[0]
        return (
            f"the model holds {name} {shapes[name]}, which the state's architecture "
            f"does not have ({len(extra)} such)"
        )
    return None


def name_prefixes(row: Row) -> list[str]:
    """The names a state's models start with: the base name of its ``prefix`` key
    (``.../search/search_`` -> ``search_``) and its own file name less ``state.pkl``."""
    out = []
    facts = row.facts
    if isinstance(facts, StateFacts) and facts.prefix:
        out.append(facts.prefix.replace("\\", "/").rsplit("/", 1)[-1])
    if row.path.name.endswith("state.pkl"):
        out.append(row.path.name[: -len("state.pkl")])
    return [p for p in out if p]


def _name_score(model: str, prefixes: list[str]) -> tuple[bool, int]:
    """(the model's name starts with a whole prefix, the longest common prefix)."""
    best = (False, 0)
    for p in prefixes:
        common = len(os.path.commonprefix([model, p]))
        best = max(best, (common == len(p), common))
    return best


#: fitting states a pairing's reason names at most (a folder may hold hundreds)
MAX_NAMED = 5


def _names(rows: Sequence[Row]) -> str:
    shown = ", ".join(r.path.name for r in rows[:MAX_NAMED])
    return shown + (f" and {len(rows) - MAX_NAMED} more" if len(rows) > MAX_NAMED else "")


def pair_models(states: Sequence[Row], models: Sequence[Row]) -> list[Pairing]:
    """Each model row paired with the state row it fits (:func:`model_fits_state`).

    Where several states fit one model (identical shapes), the one whose name prefix the
    model's name starts with, longest first, wins; when the names do not tell them apart
    the model is left unpaired with every fitting state listed.  A model fitting no state
    is reported with each state's reason.  Order: by state as given, each state's models
    newest first -- ``prefix + 'model.npz'`` (what sample.py and ``MainLoop.load`` read by
    default) before the numbered snapshots, highest number first -- then the unpaired.

    Time linear in states and models for a folder of many (issue 51 item 6): states are
    grouped by the shapes their architecture saves, so a model is checked once per group,
    and the state a model's name starts with is looked up by prefix, not scored against
    every state."""
    groups: dict = {}  # the shapes a state's architecture saves -> [state index]
    expected = []
    for i, s in enumerate(states):
        e = _expected(s.facts.stored) if isinstance(s.facts, StateFacts) else "not a state"
        expected.append(e)
        shapes = ("why", e) if isinstance(e, str) else ("shapes", tuple(sorted(e[0].items())))
        groups.setdefault(shapes, []).append(i)
    by_prefix: dict[str, list[int]] = {}  # a state's name prefix -> [state index]
    for i, s in enumerate(states):
        for p in dict.fromkeys(name_prefixes(s)):
            by_prefix.setdefault(p, []).append(i)
    out = []
    for m in models:
        facts = m.facts
        if m.kind is not Kind.MODEL or not isinstance(facts, ModelFacts):
            out.append(Pairing(m.path, None, (), None, f"not a model ({m.kind.value})"))
            continue
        reasons: dict[int, str | None] = {}
        for (kind, _), members in groups.items():
            first = members[0]
            e = expected[first]
            why = e if kind == "why" else model_fits_state(states[first].facts, facts, e)
            reasons.update(dict.fromkeys(members, why))
        fit_ids = [i for i in range(len(states)) if reasons[i] is None]
        snap = snapshot_number(m.path)
        if not fit_ids:
            why = "fits no state: " + "; ".join(
                f"{s.path.name}: {reasons[i]}" for i, s in enumerate(states)
            )
            out.append(Pairing(m.path, None, (), snap, why if states else "no state"))
            continue
        fits = [states[i] for i in fit_ids]
        if len(fits) == 1:
            out.append(
                Pairing(m.path, fits[0].path, (fits[0].path,), snap, "the only state it fits")
            )
            continue
        best_ids, p = _best_named(m.path.name, states, fit_ids, by_prefix)
        firsts = set(best_ids)
        ordered = [states[i] for i in best_ids] + [states[i] for i in fit_ids if i not in firsts]
        names = tuple(s.path for s in ordered)
        if len(best_ids) != 1:
            why = f"fits {len(fits)} states of the same shapes ({_names(ordered)}); the names do not tell"
            out.append(Pairing(m.path, None, names, snap, why))
        else:
            why = f"fits {len(fits)} states of the same shapes ({_names(ordered)}); its name starts {p!r}"
            out.append(Pairing(m.path, ordered[0].path, names, snap, why))
    order = {s.path: i for i, s in enumerate(states)}

    def key(p: Pairing) -> tuple[int, int, int]:
        at = order.get(p.state, len(states)) if p.state is not None else len(states)
        return (at, 0 if p.snapshot is None else 1, -(p.snapshot or 0))

    return sorted(out, key=key)


def prefix_owners(
    name: str, by_prefix: Mapping[str, Sequence[_V]], keep: Container[_V] | None = None
) -> tuple[list[_V], str]:
    """``(the values filed under the longest whole prefix of name, that prefix)``, each value
    once (only those in ``keep`` when given); ``([], "")`` when no prefix of ``name`` is
    filed.  One lookup per length of ``name``: linear in a folder of hundreds of states."""
    for n in range(len(name), 0, -1):
        hits = [v for v in by_prefix.get(name[:n], ()) if keep is None or v in keep]
        if hits:
            return list(dict.fromkeys(hits)), name[:n]
    return [], ""


def _best_named(name: str, states, fit_ids: list[int], by_prefix) -> tuple[list[int], str]:
    """``(the fitting states of the best name score, the prefix)``: the longest whole prefix
    of ``name`` that a fitting state's name gives (looked up, one per length of ``name``),
    else the longest common prefix (every fitting state scored: no name starts with any)."""
    hits, prefix = prefix_owners(name, by_prefix, set(fit_ids))
    if hits:
        return hits, prefix
    scores = {i: _name_score(name, name_prefixes(states[i])) for i in fit_ids}
    top = max(scores.values())
    best = [i for i in fit_ids if scores[i] == top]
    p = max(name_prefixes(states[best[0]]) or [""], key=lambda x: _name_score(name, [x]))
    return best, p


def vocabulary_share(words: Iterable[str], word2idx: Mapping[str, int]) -> float:
    """The share of tokens found in ``word2idx``: ``words`` are lines or words, split on
    whitespace as ``parse_input`` splits (encdec.py:1494-1515).  A source-language text
    scores high against the source vocabulary and low against the target one; 0.0 without
    tokens."""
    total = found = 0
    for item in words:
        for token in item.split():
            total += 1
            found += token in word2idx
    return found / total if total else 0.0
