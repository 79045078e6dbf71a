"""Finding the experiments of an archive: every state with its model, snapshots, trace and
what ``sample.py`` / ``score.py`` left beside it, in ROOT and in every pack under it."""

import contextlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ... import lookup
from ...errors import LegacyInputError, shown
from ...file_names import is_output
from .. import packs
from .context import Run, not_read, relative


@dataclass
class Entry:
    """One experiment found in the archive."""

    id: str  # the state's path under ROOT, without "state.pkl"
    folder: Path
    state: Path
    model: Path | None
    trace: Path | None
    outputs: list[Path] = field(default_factory=list)  # trans_*, scores*, *_error.txt
    others: int = 0  # other states in the same folder (outputs then shared)
    root: Path | None = None  # the archive it was found in
    #: ``[(file name, why)]``: files of the experiment that are not read (:func:`not_read`)
    refused: list = field(default_factory=list)
    #: GroundHog's snapshots ``prefix + model%d.npz`` (mainLoop.py:233-234), oldest first
    snapshots: list = field(default_factory=list)
    model_why: str = ""


def pack_files(root):
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
def unpacked(run: Run):
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
        shutil.rmtree(folder, ignore_errors=True)


def _model_for(state):
    """``(model, why, snapshots)`` of a state: its ``prefix + model.npz``, else the only
    ``*model.npz`` beside it, else its newest snapshot (:func:`groundhog_port.lookup.snapshots_of`)."""
    prefix = state.name[: -len("state.pkl")]
    snaps = lookup.snapshots_of(state)
    same = state.parent / f"{prefix}model.npz"
    if same.is_file():
        return same, "the *model.npz of the state's prefix", snaps
    found = sorted(state.parent.glob("*model.npz"))
    if len(found) == 1:
        return found[0], "the only *model.npz beside the state", snaps
    if snaps:
        return snaps[-1], "the newest snapshot (each output is checked against every one)", snaps
    return None, "", snaps


def discover(run: Run, top=None) -> list[Entry]:
    """Every ``*state.pkl`` under folder ``top`` (ROOT by default; an unpacked pack), sorted
    by path, with what lies beside it; the files :func:`not_read` refuses are listed in each
    entry's ``refused`` instead."""
    root = Path(top) if top is not None else run.root
    allowed = run.allowed()
    entries = []
    for folder, _, names in lookup.walk(root):
        folder = Path(folder)
        states = sorted(n for n in names if n.endswith("state.pkl"))
        outputs, refused = [], []
        for n in sorted(names):
            if is_output(n):
                why = not_read(folder / n, allowed)
                if why is None:
                    outputs.append(folder / n)
                else:
                    refused.append((n, why))
        for n in states:
            state = folder / n
            rel = shown(state.relative_to(root).as_posix())
            trace = folder / "trace.h5"
            model, model_why, snaps = _model_for(state)
            mine = list(refused)
            for p in (state, model, trace):
                why = not_read(p, allowed) if p is not None and os.path.lexists(p) else None
                if why is not None:
                    mine.append((p.name, why))
            unread = {name for name, _ in mine}
            entries.append(
                Entry(
                    rel[: -len("state.pkl")] or "state",
                    folder,
                    state,
                    model,
                    trace if trace.is_file() and trace.name not in unread else None,
                    outputs,
                    len(states) - 1,
                    root,
                    mine,
                    snaps,
                    model_why,
                )
            )
    return sorted(entries, key=lambda e: e.id)
