"""What one ``archive`` run is given and where its files lie: the options (part of every
cache key), the folders a file may be read from, and the paths as the report shows them
(relative to ROOT; a packed experiment's as ``run7.tar.gz/...``)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ... import contained, lookup
from ...errors import shown, unshown
from ...untrusted import special_kind

if TYPE_CHECKING:
    from .inventory import Row


class ExperimentEntry(Protocol):
    """What the cache and a result read of an experiment
    (:class:`groundhog_port.tasks.archive.discover.Entry`): a Protocol, since ``discover``
    imports the cache, which may then not import ``discover`` back (no import cycle, even for
    typing: ``parity_tests/packaging/test_import_graph.py``)."""

    @property
    def id(self) -> str: ...
    @property
    def folder(self) -> Path: ...
    @property
    def state(self) -> Path: ...
    @property
    def model(self) -> Path | None: ...
    @property
    def trace(self) -> Path | None: ...
    @property
    def outputs(self) -> list[Path]: ...
    @property
    def candidates(self) -> list[Path]: ...
    @property
    def root(self) -> Path | None: ...


@dataclass
class Options:
    """What ``archive`` re-does and how much of it (part of each cache key)."""

    data_dirs: tuple = ()
    max_sentences: int | None = None  # per test set; None: all
    plots: int = 3  # attention plots per experiment
    plot_dpi: int = 100  # --dpi: their resolution (PNG, embedded in report.html)
    parity_groups: tuple | None = None  # None: every group of the trace
    batch_size: int = 1
    tokenize: str = "13a"
    max_diffs: int = 3
    device: str = "cpu"
    source: Path | None = None  # --source: the test set of every experiment
    reference: Path | None = None  # --ref
    test_sets: dict = field(default_factory=dict)  # --test-sets FILE: key -> (source, ref)
    changes: tuple = ()  # --changes: state changes of every experiment
    snapshot: str = "auto"  # --snapshot latest|all|N; auto: each output's first lines pick
    plan: dict | None = None  # --plan FILE (tasks.plan.read): experiment id -> entry

    def key(self) -> dict:
        return {
            "changes": list(self.changes),
            "snapshot": self.snapshot,
            "plan": self.plan,
            "data_dirs": [str(d) for d in self.data_dirs],
            "source": str(self.source) if self.source else None,
            "reference": str(self.reference) if self.reference else None,
            "test_sets": {k: [str(p) if p else None for p in v] for k, v in self.test_sets.items()},
            "max_sentences": self.max_sentences,
            "plots": self.plots,
            "plot_dpi": self.plot_dpi,
            "parity_groups": list(self.parity_groups) if self.parity_groups else None,
            "batch_size": self.batch_size,
            "tokenize": self.tokenize,
            "max_diffs": self.max_diffs,
            "device": self.device,
        }


def not_read(path: str | os.PathLike[str] | None, allowed: Iterable[str]) -> str | None:
    """Why the file at ``path`` is not read, or None: a FIFO, a device or a socket (by
    type: ``os.stat`` opens nothing, and opening one could block forever or never end), or
    a link leading outside the folders in ``allowed`` (real paths: ROOT and each
    ``--data-dir``), whose contents would otherwise be quoted in the report."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None  # missing or a dangling link: the reader says so
    kind = special_kind(st.st_mode)
    if kind is not None:
        return f"is {kind}: never opened (reading it could block or never end)"
    real = os.path.realpath(path)
    if not any(real == a or real.startswith(a.rstrip(os.sep) + os.sep) for a in allowed):
        if os.path.abspath(path) == real:  # no link on the way: the file itself is outside
            return (
                "lies outside the archive (ROOT and the --data-dir folders): not read "
                "(pass its folder with --data-dir to have it read)"
            )
        return (
            f"leads through a link to {real}, outside the archive: not read (pass its "
            "folder with --data-dir to have it read)"
        )
    return None


@dataclass
class Run:
    """One ``archive`` run: ROOT, the ``--data-dir`` folders, the packs unpacked for it
    (:func:`groundhog_port.tasks.archive.discover.unpacked` fills ``packs``) and what it has
    learnt of each file (``digests``: a file's bytes hashed once per run, keyed by device,
    inode, size, mtime and ctime so that any write is seen).  Every stage is given the run;
    nothing of it outlives the run."""

    root: Path
    data_dirs: tuple = ()
    #: unpacked folder (absolute) -> the pack's path under ROOT (``runs/run7.tar.gz``)
    packs: dict[str, str] = field(default_factory=dict)
    digests: dict = field(default_factory=dict)
    #: absolute path -> its inventory row (:func:`groundhog_port.tasks.archive.inventory.classify`),
    #: every file classified once per run
    rows: dict = field(default_factory=dict)
    #: ``[(member as the report names it, why)]``: pack members not written (links, devices)
    skipped: list = field(default_factory=list)
    #: the lookups' memo (folders walked, line counts, choices said): opened with
    #: ``lookup.remembering(run.memo)`` by the command for the whole run
    memo: lookup.Memo = field(default_factory=lookup.Memo)
    #: the experiments whose results were taken from OUT/cache (the report says which)
    from_cache: list = field(default_factory=list)
    #: the limits of the workers that classify the files and re-do each experiment
    #: (:mod:`groundhog_port.contained`; ``--max-memory-mib``, ``--max-cpu-minutes``)
    limits: contained.Limits = contained.DEFAULT_LIMITS

    def __post_init__(self) -> None:
        self.root = Path(self.root)

    def _stores(self) -> dict:
        """What the run learns as it goes, each a dict whose keys are set once or a set."""
        memo = {f"memo.{f.name}": getattr(self.memo, f.name) for f in fields(self.memo)}
        return {"digests": self.digests, "rows": self.rows, **memo}

    def mark(self) -> dict:
        """Where what the run has learnt stands now, for :meth:`learnt_since`."""
        return {k: len(v) if isinstance(v, dict) else set(v) for k, v in self._stores().items()}

    def learnt_since(self, mark: dict) -> dict:
        """What was learnt after :meth:`mark` gave ``mark`` (keys are added, never changed:
        a dict's new items are its last ones): a contained experiment's, sent back to the
        run (:meth:`learn`) so that no walk, line count or message is done twice."""
        return {
            k: list(itertools.islice(v.items(), mark[k], None))
            if isinstance(v, dict)
            else v - mark[k]
            for k, v in self._stores().items()
        }

    def learn(self, learnt: dict) -> None:
        """Take in what :meth:`learnt_since` gave (in another process)."""
        for k, v in self._stores().items():
            v.update(learnt[k])

    def row(self, path: str | os.PathLike[str]) -> Row:
        """The inventory row of file ``path`` (what it holds, by content), read once."""
        from .inventory import classify

        key = os.path.abspath(path)
        if key not in self.rows:
            self.rows[key] = classify(path)
        return self.rows[key]

    def allowed(self) -> tuple:
        """The real paths a file of the archive may lead to: ROOT, each ``--data-dir`` and
        the folders packs were unpacked into."""
        return tuple(os.path.realpath(d) for d in (self.root, *self.data_dirs, *self.packs))

    def inside(self) -> list:
        """The folders an experiment's implicit data folders (``../data``) must lie in:
        ROOT and the unpacked packs (nothing above ROOT is read)."""
        return [self.root, *self.packs]

    def rel(self, path: str | os.PathLike[str]) -> str:
        """``path`` relative to ROOT where it lies inside (a file of a packed experiment:
        ``run7.tar.gz/...``), else as it is; for the report and the logs, so bytes of a
        name that are not UTF-8 are shown escaped (:func:`groundhog_port.errors.shown`)."""
        full = os.path.abspath(path)
        for folder, pack in self.packs.items():
            if full == folder or full.startswith(folder + os.sep):
                return shown(Path(pack, os.path.relpath(full, folder)).as_posix())
        return relative(self.root, path)

    def said(self, text: str) -> str:
        """``text`` (a reason, a lookup's message) with every path inside an unpacked pack
        named as the report names it (``runs.tar.xz/runs/data/test.en``), never by the
        temporary folder it was unpacked into, which is gone when the run ends."""
        for folder, pack in self.packs.items():
            text = text.replace(folder + os.sep, pack + "/").replace(folder, pack)
        return text

    def abs(self, text: str) -> Path | None:
        """A plan's path (relative to ROOT, or absolute) as a path; ``None`` for ``""``.
        The inverse of :meth:`rel`: ``run7.tar.gz/...`` is the file in the folder the pack
        was unpacked into, and a name shown escaped (bytes that are not UTF-8,
        ``r\\xe9sultats``) is the file of those bytes when no file has the name as written."""
        if not text:
            return None
        for folder, pack in self.packs.items():
            if text == pack or text.startswith(pack + "/"):
                return Path(folder, text[len(pack) :].lstrip("/"))
        p = Path(text)
        p = p if p.is_absolute() else self.root / p
        if "\\x" in text and not os.path.lexists(p):
            raw = Path(unshown(str(p)))
            if os.path.lexists(raw):
                return raw
        return p


def relative(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> str:
    """``path`` relative to folder ``root`` where it lies inside, else as it is, shown
    escaped (:func:`groundhog_port.errors.shown`)."""
    full = os.path.abspath(path)
    try:  # abspath, not resolve: a symlinked file is named where it lies in the archive
        return shown(Path(full).relative_to(os.path.abspath(root)).as_posix())
    except ValueError:
        return shown(str(path))


#: how :func:`not_read` begins the reason of a link leading outside the archive
OUTSIDE = "leads through a link to "
