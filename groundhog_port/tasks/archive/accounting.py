"""Every file of the archive accounted for (issue 50 item 1): one row per file of ROOT and per
member of each pack under it, with what it holds (:func:`.inventory.classify`) and its role
in the re-done experiments, or "not used" and why.  Nothing is skipped without a row: a
file :func:`.context.not_read` refuses, a pack member not written (a link, a device), a
link to a folder, each has its row saying so (a folder deeper than
:data:`groundhog_port.lookup.MAX_WALK_DEPTH` is named in a warning instead).

Roles are read from the experiments' results (the files each one took), so a cached result
and a fresh one account alike; the rows are made anew each run (a walk and the per-run
classification, no file read twice).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ... import lookup
from .context import Run, not_read
from .kinds import Kind

if TYPE_CHECKING:
    from .result import ResultRecord


@dataclass(frozen=True)
class Account:
    """One row of the inventory: a file (or pack member) as the report names it."""

    file: str
    kind: str
    role: str

    def as_dict(self) -> dict:
        return asdict(self)


#: why a file nothing took is not used, by what it holds
UNUSED = {
    Kind.STATE: "a GroundHog state no experiment was made of",
    Kind.MODEL: "a model that fits no state beside it",
    Kind.TIMING: "training timings (MainLoop's timing file): not re-done",
    Kind.OPTIMIZER: "optimizer accumulators: not needed to translate or score",
    Kind.VOCABULARY: "a vocabulary no experiment's state needed",
    Kind.INVERSE_VOCABULARY: "an inverse vocabulary no experiment's state needed",
    Kind.TEXT: "a text no experiment took as a test set, reference or output",
    Kind.SGML: "a WMT SGML file no experiment took as a test set or reference",
    Kind.CRASH_LOG: "a traceback of no re-done output",
    Kind.LOG: "a log (a training log, timings, sample.py's printed output) no re-done output's total cost was read from",
    Kind.HDF5: "an HDF5 file: a binarized corpus or a trace no experiment took",
    Kind.PACK: "a pack",
    Kind.PICKLE_OTHER: "a pickle that is neither a state nor a vocabulary (never run)",
    Kind.NPZ_OTHER: "an .npz that is no model, timing or optimizer file",
    Kind.BINARY: "binary data of no known kind",
    Kind.EMPTY: "an empty file",
    Kind.UNREADABLE: "unreadable",
}


def _roles(results) -> dict:
    """``{path as the report names it: role}`` from the experiments' results."""
    roles: dict = {}

    def put(path, role):
        if path and path not in roles:
            roles[path] = role

    for r in results:
        x, folder = r["id"], r["folder"]
        here = lambda name, folder=folder: f"{folder}/{name}" if folder not in ("", ".") else name
        put(r["state"], f"the state of experiment {x}")
        put(r["model"], f"the model of experiment {x}")
        for key, v in r["files"].items():
            if isinstance(v, str):
                put(v, f"{key} of experiment {x}")
            elif isinstance(v, dict):
                put(v.get("source"), f"the {key} set of experiment {x}")
                put(v.get("reference"), f"the {key} set's reference of experiment {x}")
        for row in r["reproduction"]:
            status = row.get("status") or (
                "identical"
                if row["all_identical"]
                else f"{row['identical']}/{row['compared']} lines identical"
            )
            put(here(row["file"]), f"an output of experiment {x}, re-done: {status}")
            put(row["source"], f"a test set of experiment {x}")
            put(row.get("reference"), f"a reference of experiment {x}")
            for s in row.get("snapshots") or []:
                put(s["model"], f"a snapshot of experiment {x}: {s['status']}")
            if row.get("archived_total_cost") is not None and row["file"].startswith("trans_"):
                stem = row["file"][len("trans_") : -len(".txt")]
                put(
                    here(f"sample_{stem}_stdout.txt"),
                    f"sample.py's printed total cost, experiment {x}",
                )
        for s in r["scores"]:
            put(here(s["file"]), f"a score file of experiment {x}, re-scored")
        for c in r["crash_logs"]:
            put(here(c["file"]), f"a crash log of experiment {x}: {c['status']}")
        if r.get("parity"):
            put(r["parity"]["trace"], f"the trace of experiment {x}: parity checked")
        for line in r.get("not_outputs", []):
            path, _, why = line.partition(": ")
            put(path, f"not an output of experiment {x}: {why}")
        for nd in r["not_done"]:
            for name in nd["what"].split(", "):
                put(here(name), f"not done in experiment {x}: {nd['why'][:200]}")
    return roles


def account(
    run: Run, results: Sequence[ResultRecord], skipped: Iterable[tuple[str, str]] = ()
) -> list[Account]:
    """The rows of every file under ROOT and every member of the packs unpacked for the run
    (``skipped``: ``[(member as shown, why)]``, the members not written), sorted by path."""
    roles = _roles(results)
    allowed = run.allowed()
    rows = []
    unpacked = {v: k for k, v in run.packs.items()}  # pack path under ROOT -> its folder
    tops: tuple[Path | str, ...] = (run.root, *run.packs)
    for top in tops:
        deep: list = []
        for folder, dirs, names in lookup.walk(top, not_entered=deep):
            for d in dirs:  # a link to a folder is listed, never entered
                if os.path.islink(Path(folder) / d):
                    rows.append(
                        Account(run.rel(Path(folder) / d), "-", "not walked: a link to a folder")
                    )
            for n in names:
                p = Path(folder) / n
                shown = run.rel(p)
                why = not_read(p, allowed)
                if why is not None:
                    rows.append(Account(shown, "-", f"not read: {why}"))
                    continue
                if not os.path.isfile(p):
                    rows.append(Account(shown, "-", "not used: not a regular file"))
                    continue
                kind = run.row(p).kind
                role = roles.get(shown)
                if kind is Kind.PACK:  # (a pack's own "experiment" is its not-done line)
                    role = (
                        "a pack, unpacked: its members are rows of their own"
                        if shown in unpacked
                        else "a pack, not unpacked: see the experiments' Not done"
                    )
                rows.append(Account(shown, kind.value, role or f"not used: {UNUSED[kind]}"))
        rows += [
            Account(
                run.rel(d),
                "-",
                f"not walked: more than {lookup.MAX_WALK_DEPTH} folders deep (what it holds "
                "is not read, and not counted)",
            )
            for d in deep
        ]
    rows += [Account(name, "-", f"not used: {why}") for name, why in skipped]
    return sorted(rows, key=lambda a: a.file)
