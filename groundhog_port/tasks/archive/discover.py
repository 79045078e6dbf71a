"""Finding the experiments of an archive by content: every file of ROOT and of every pack
under it classified by what it holds (:func:`groundhog_port.tasks.archive.inventory.classify`);
every GroundHog state, whatever its name, is one experiment, with the models beside it whose
parameters fit it (:func:`~groundhog_port.tasks.archive.inventory.pair_models`), its trace and what
``sample.py`` / ``score.py`` left beside it.  Names only order and break ties."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ... import contained, lookup
from ...errors import LegacyInputError, shown
from ...file_names import is_output
from .. import packs
from .context import Run, not_read, relative
from .inventory import Kind, Pairing, Row, pair_models


@dataclass
class Entry:
    """One experiment found in the archive."""

    id: str  # the state's path under ROOT, without "state.pkl"
    folder: Path
    state: Path
    model: Path | None
    trace: Path | None
    outputs: list[Path] = field(default_factory=list)  # trans_*, scores*, *_error.txt
    others: int = 0  # other states in the same folder (each output then found by content)
    root: Path | None = None  # the archive it was found in
    #: ``[(file name, why)]``: files of the experiment that are not read (:func:`not_read`)
    refused: list = field(default_factory=list)
    #: GroundHog's snapshots ``prefix + model%d.npz`` (mainLoop.py:233-234), oldest first
    snapshots: list = field(default_factory=list)
    model_why: str = ""
    state_why: str = ""
    #: text files of any name beside the state that may be its outputs: kept where its
    #: model's re-translations confirm them (issue 50 item 3), every output's in a folder of
    #: several states (each belongs to the state whose model gives its first lines)
    candidates: list = field(default_factory=list)
    #: output -> ``trans`` / ``scores`` / ``crash log`` where the content says (a traceback
    #: of any name); else the name's (:func:`groundhog_port.file_names.output_kind`)
    kinds: dict = field(default_factory=dict)


def pack_files(root: str | os.PathLike[str]) -> list[Path]:
    """Every packed experiment (:func:`groundhog_port.tasks.packs.is_pack`) under ``root``,
    sorted, links to folders not followed."""
    found = []
    for folder, _, names in lookup.walk(root):
        found += [Path(folder) / n for n in sorted(names) if packs.is_pack(n)]
    return found


def _pack_entry(run: Run, pack, why):
    """The entry of a pack that is not re-done: its one "not done" line says why."""
    rel = run.rel(pack)
    return Entry(rel, pack.parent, pack, None, None, root=run.root, refused=[(pack.name, why)])


@contextlib.contextmanager
def unpacked(run: Run) -> Iterator[list[Entry]]:
    """The experiments of every pack under ROOT (``run7.tar.gz``, ``.zip``...), each pack
    unpacked under the bounds of :mod:`groundhog_port.tasks.packs` into a private temporary
    folder for the run, removed afterwards (``run.packs`` says where each lies meanwhile).
    Their ids, and every path of theirs in the report, read ``run7.tar.gz/...``
    (:meth:`~groundhog_port.tasks.archive.context.Run.rel`).  A pack refused, holding no state,
    or holding members not written (links, special files, packs) says so in "Not done"."""
    folder = packs.private_folder()
    entries = []
    try:
        for i, pack in enumerate(pack_files(run.root)):
            why = not_read(pack, run.allowed())
            if why is not None:
                entries.append(_pack_entry(run, pack, why))
                continue
            (folder / str(i)).mkdir()
            try:
                up = packs.unpack(pack, folder / str(i))
            except LegacyInputError as err:
                entries.append(_pack_entry(run, pack, err.problem))
                continue
            rel = run.rel(pack)
            run.packs[os.path.abspath(up.folder)] = rel
            run.skipped += [(f"{rel}/{m}", w) for m, w in up.skipped]
            skipped = up.skipped + [
                (relative(up.folder, p), "a pack inside a pack: not unpacked")
                for p in pack_files(up.folder)
            ]
            found = discover(run, up.folder)
            if not found:
                why = "holds no experiment (*state.pkl): nothing re-done"
                entries.append(_pack_entry(run, pack, why))
            for entry in found:
                entry.id = f"{rel}/{entry.id}"
                entry.root = run.root
                entry.refused += [(f"{pack.name}: {m}", w) for m, w in skipped]
                entries.append(entry)
        yield entries
    finally:
        run.packs.clear()
        run.skipped.clear()
        shutil.rmtree(folder, ignore_errors=True)


def _experiment_id(rel: str) -> str:
    """An experiment's id: its state's path under ROOT without ``state.pkl`` (GroundHog's
    ``prefix + 'state.pkl'``, mainLoop.py:226), or without ``.pkl`` for another name."""
    if rel.endswith("state.pkl"):
        return rel[: -len("state.pkl")] or "state"
    return rel[: -len(".pkl")] if rel.endswith(".pkl") else rel


def _models_of(state: Row, mine: list[Pairing], pairings: list[Pairing]):
    """``(model, why, alternatives)`` of a state from ``mine``, the models of its folder
    paired with it (``pairings``: every model's of the folder) -- those whose parameters fit
    it: ``prefix + model.npz`` (what sample.py was given by habit), else the
    only one, else the newest snapshot ``prefix + model%d.npz`` (mainLoop.py:233-234), else
    the first by name; ``alternatives`` are every fitting model but that one when there are
    several, oldest snapshot first (each output is checked against every one).  With none
    fitting, the reason names each model seen and why it does not fit."""
    if not mine:
        if not pairings:
            return None, "no model (.npz of GroundHog parameters) beside the state", []
        seen = itertools.islice(pairings, 8)  # a folder may hold hundreds
        return (
            None,
            "no model beside the state fits it: "
            + "; ".join(f"{p.model.name}: {p.why}" for p in seen)[:600],
            [],
        )
    prefix = state.path.name[: -len("state.pkl")] if state.path.name.endswith("state.pkl") else None
    named = [p for p in mine if prefix is not None and p.model.name == f"{prefix}model.npz"]
    snaps = sorted((p for p in mine if p.snapshot is not None), key=lambda p: p.snapshot or 0)
    others = sorted(
        (p for p in mine if p.snapshot is None and p not in named), key=lambda p: p.model.name
    )
    fit = "its parameters' names and shapes fit the state"
    if len(mine) == 1:
        p = mine[0]
        why = (
            f"the *model.npz of the state's prefix; {fit}"
            if named
            else f"the only model beside the state that fits it ({p.model.name}: {fit})"
        )
        return p.model, why, [p.model] if p.snapshot is not None else []
    alternatives = [p.model for p in (*snaps, *others)]
    if named:
        model, why = named[0].model, f"the *model.npz of the state's prefix; {fit}"
        alternatives = alternatives if snaps else [model, *alternatives]
    elif snaps:
        model, why = (
            snaps[-1].model,
            "the newest snapshot (each output is checked against every one)",
        )
    else:
        model = others[0].model
        why = (
            f"{len(others)} models beside the state fit it ({', '.join(p.model.name for p in others)}): "
            "each output is checked against every one"
        )
    return model, why, alternatives


class _Dealt(set):
    """The outputs dealt to one of several twin experiments, and why (:func:`_shared_out`)."""

    why = ""


def _shared_out(run: Run, states: list[Row], chosen: dict, files: list[Path]) -> dict:
    """``{state: the files dealt to it}`` for the states of one folder whose state and model
    are byte for byte another's (twins: the same experiment twice, so every output one
    gives the other gives too, and checking each output against each is a tie known
    before it is run, quadratic in a folder of hundreds: issue 51 item 6).  Names break
    the tie, as they break ties elsewhere: each file goes to the twin whose name prefix it
    starts with (the longest), else to the first twin by name.  A state with no twin is not
    in the result: it sees every file, its outputs found by content."""
    from .cache import digest
    from .pairing import name_prefixes, prefix_owners

    twins: dict = {}
    for s in states:
        model, _, alternatives = chosen[s.path]
        if model is None or alternatives:  # several models: outputs checked against each
            continue
        key = (digest(s.path, run.digests), digest(model, run.digests))
        if all(isinstance(k, str) and k.startswith("sha256:") for k in key):  # both hashed
            twins.setdefault(key, []).append(s)
    out: dict = {}
    for group in twins.values():
        if len(group) < 2:
            continue
        group.sort(key=lambda r: r.path.name)
        by_prefix: dict = {}
        for s in group:
            for prefix in name_prefixes(s):
                by_prefix.setdefault(prefix, []).append(s.path)
        dealt = {s.path: _Dealt() for s in group}
        for f in files:
            hits, _ = prefix_owners(f.name, by_prefix)
            dealt[hits[0] if len(hits) == 1 else group[0].path].add(f)
        for s in group:
            named = [t.path.name for t in itertools.islice((t for t in group if t is not s), 3)]
            more = ", ..." if len(group) > 4 else ""
            dealt[s.path].why = (
                f"its state and model are byte for byte those of {len(group) - 1} other "
                f"state(s) beside it ({', '.join(named)}{more}): "
                "the outputs are dealt out by name (each to the one whose prefix it starts "
                f"with, the others to {group[0].path.name}), not checked against each"
            )
        out.update(dealt)
    return out


def _unusable_snapshots(state: Row, rows: dict) -> list[tuple[str, str]]:
    """``[(name, why)]``: the files named as this state's snapshots (``prefix +
    model%d.npz``, mainLoop.py:233-234) that hold no model (an array of objects, a damaged
    or oversized file): each one "not done" line, never left out of the report."""
    name = state.path.name
    if not name.endswith("state.pkl"):
        return []
    named = {p.name for p in lookup.snapshots_of(state.path)}  # the one rule for the names
    return [
        (
            n,
            f"named as a snapshot of {name}, but it holds {row.kind.value}"
            + (f" ({row.note})" if row.note else "")
            + ": not used",
        )
        for n, row in sorted(rows.items())
        if n in named and row.kind is not Kind.MODEL
    ]


def _rows(run: Run, folder: Path, names, allowed):
    """``({name: row}, [(name, why)])``: each readable regular file of ``folder`` classified
    (once per run: :meth:`Run.row`), and the files :func:`not_read` refuses."""
    rows, refused = {}, []
    for n in sorted(names):
        p = folder / n
        why = not_read(p, allowed)
        if why is not None:
            refused.append((n, why))
            continue
        if os.path.isfile(p):
            rows[n] = run.row(p)
    return rows, refused


#: the kinds a text of any name beside a state may be an output of (by content)
_TEXTS = (Kind.TEXT,)
#: the largest text of any name taken for a candidate output (its lines are read whole to be
#: compared): a test set's translation is a few hundred KB (WMT's 3,003 sentences: ~400 KB);
#: a bigger text, or one whose count stopped at the decompression bound, is no output
MAX_CANDIDATE_BYTES = 64 << 20


def _candidate(row: Row) -> bool:
    """Whether a text of any name may be an output: complete, not too big (a text of numbers
    may be score.py's, :func:`groundhog_port.tasks.archive.plan.scores_of_any_name`)."""
    facts = row.facts
    return (
        row.kind in _TEXTS
        and getattr(facts, "complete", False)
        and getattr(facts, "bytes_counted", 0) <= MAX_CANDIDATE_BYTES
    )


def classify_contained(run: Run, root: Path) -> None:
    """Classify every file under ``root`` that :func:`discover` reads and the run has not
    yet classified, in a worker under ``run.limits`` (:mod:`groundhog_port.contained`): the
    rows come back to the run, and a file whose reader a limit stops is one UNREADABLE row
    saying so (the others are classified again without it; nothing of ROOT is lost, and the
    run goes on).  Where workers cannot be made, :func:`discover` classifies in this process."""
    if not contained.available():
        return
    allowed = run.allowed()
    todo = [
        p
        for folder, _, names in lookup.walk(root)
        for p in (os.path.join(folder, n) for n in names)
        if os.path.abspath(p) not in run.rows and not_read(p, allowed) is None and os.path.isfile(p)
    ]
    while todo:
        out = contained.run(_classified, run, todo, limits=run.limits)
        if out.breach is None:
            run.learn(out.value)
            return
        stopped = os.path.abspath(out.breach.file) if out.breach.file else None
        if (
            stopped is None
            or stopped in run.rows
            or not any(os.path.abspath(p) == stopped for p in todo)
        ):
            raise LegacyInputError(root, f"classifying the archive's files: {out.breach.text()}")
        run.rows[stopped] = Row(
            Path(stopped), Kind.UNREADABLE, os.path.getsize(stopped), note=out.breach.detail
        )
        todo = [p for p in todo if os.path.abspath(p) not in run.rows]


def _classified(run: Run, paths: list) -> dict:
    """In the worker: every path classified; what the run learnt."""
    mark = run.mark()
    for p in paths:
        run.row(p)
    return run.learnt_since(mark)


def discover(run: Run, top: str | os.PathLike[str] | None = None) -> list[Entry]:
    """Every GroundHog state under folder ``top`` (ROOT by default; an unpacked pack),
    whatever its name, sorted by path, with what lies beside it; the files :func:`not_read`
    refuses are listed in each entry's ``refused`` instead."""
    root = Path(top) if top is not None else run.root
    allowed = run.allowed()
    classify_contained(run, root)
    entries = []
    for walked, _, names in lookup.walk(root):
        folder = Path(walked)
        rows, refused = _rows(run, folder, names, allowed)
        states = [r for r in rows.values() if r.kind is Kind.STATE]
        # a state that may not be read (a link out of the archive) is known by its name
        # alone: its experiment is one "not done" line saying why (nothing else is read)
        unread = [n for n, _ in refused if n.endswith("state.pkl")]
        if not states and not unread:
            continue
        refused.sort(
            key=lambda x: (
                0
                if is_output(x[0])
                else 1
                if x[0].endswith("state.pkl")
                else 2
                if x[0].endswith("model.npz")
                else 3
            )
        )
        for n in unread:
            model = folder / f"{n[: -len('state.pkl')]}model.npz"
            entries.append(
                Entry(
                    _experiment_id(shown((folder / n).relative_to(root).as_posix())),
                    folder,
                    folder / n,
                    model if os.path.lexists(model) else None,
                    None,
                    [folder / x for x in sorted(names) if is_output(x)],
                    len(states) + len(unread) - 1,
                    run.root,
                    list(refused),
                    state_why="named *state.pkl (it may not be read: its content is not known)",
                )
            )
        if not states:
            continue
        models = [r for r in rows.values() if r.kind is Kind.MODEL]
        pairings = pair_models(states, models)
        named = [folder / n for n in sorted(names) if is_output(n) and n in rows]
        kinds = {folder / n: "crash log" for n, r in rows.items() if r.kind is Kind.CRASH_LOG}
        crashes = [p for p in kinds if p not in named]
        texts = [folder / n for n, r in rows.items() if _candidate(r) and folder / n not in named]
        of_state: dict = {}
        for p in pairings:
            of_state.setdefault(p.state, []).append(p)
        chosen = {s.path: _models_of(s, of_state.get(s.path, []), pairings) for s in states}
        shared = _shared_out(run, states, chosen, [*named, *crashes, *texts])
        for state in states:
            rel = shown(state.path.relative_to(root).as_posix())
            trace = folder / "trace.h5"
            model, model_why, alternatives = chosen[state.path]
            outs, cands = [*named, *crashes], texts
            if state.path in shared:  # a twin: only the outputs dealt to it
                mine_only = shared[state.path]
                outs = [p for p in outs if p in mine_only]
                cands = [p for p in cands if p in mine_only]
                model_why += f"; {mine_only.why}"
            mine = list(refused) + _unusable_snapshots(state, rows)
            refused_names = {name for name, _ in mine}
            entries.append(
                Entry(
                    _experiment_id(rel),
                    folder,
                    state.path,
                    model,
                    trace
                    if "trace.h5" in rows
                    and rows["trace.h5"].kind is Kind.HDF5
                    and trace.name not in refused_names
                    else None,
                    outs,
                    len(states) - 1,
                    run.root,
                    mine,
                    alternatives,
                    model_why,
                    "its content is a GroundHog state (a pickled dict of state.py's keys)",
                    cands,
                    kinds,
                )
            )
    return sorted(entries, key=lambda e: e.id)
