"""Where an experiment's inputs are looked for (its data directories, the places of its
test sets), the test sets the user chose (``--source/--ref``, ``--test-sets FILE``), the
files its cache key depends on, and the models it holds open (:class:`Opened`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ... import lookup
from ...errors import LegacyInputError
from ...file_names import VOCABULARY_FILE_KEYS
from ...outputs import lies_inside
from ...untrusted import read_text
from .context import Options, Run
from .discover import Entry

if TYPE_CHECKING:
    from ...legacy.experiment import Experiment

_T = TypeVar("_T")


def experiment_dirs(run: Run, entry: Entry, opts: Options) -> tuple:
    """The data directories an experiment's files are looked for in: each ``--data-dir``,
    then its folder and its ``../data`` (:func:`groundhog_port.lookup.case_data_dirs`) --
    those two only inside ROOT or the pack it came from: nothing above ROOT is read."""
    inside = run.inside()
    return tuple(
        d
        for d in lookup.case_data_dirs(entry.folder, opts.data_dirs)
        if not isinstance(d, lookup.ImplicitDir) or any(lies_inside(d, f) for f in inside)
    )


def places(run: Run, entry: Entry, opts: Options) -> list[lookup.Place]:
    """Where the test sets of ``entry`` are looked for, in order: its folder (not below: the
    folders below are other experiments), each ``--data-dir``, the whole archive, and the
    folder's ``../data`` (searched before the rest of ROOT) where it lies inside ROOT or the
    pack the experiment was unpacked from: nothing above ROOT is read."""
    out = [lookup.Place(entry.folder, "in the experiment folder", recursive=False)]
    given = [d for d in opts.data_dirs if not isinstance(d, lookup.ImplicitDir)]
    for i, d in enumerate(given):
        label = "--data-dir" + (f" {i + 1} of {len(given)}" if len(given) > 1 else "")
        out.append(lookup.Place(Path(d), label))
    out.append(lookup.Place(run.root, "under the archive ROOT"))
    up = entry.folder.parent / "data"
    inside = run.inside()
    if any(lies_inside(up, f) for f in inside):  # never above ROOT: ROOT/../data is not its
        out.append(lookup.Place(up, "in the experiment folder's ../data"))
    return out


def given_test_set(
    run: Run, entry: Entry, opts: Options, name: str = "test"
) -> tuple[Path | None, Path | None, str | None]:
    """``(source, reference, how)`` chosen by the user for ``entry``'s ``name`` test set: a
    line of ``--test-sets FILE`` for the experiment's folder, else (``test``) ``--source/--ref``;
    ``(None, None, None)`` when none."""
    key = folder_key(run, entry) + ("" if name == "test" else f":{name}")
    if key in opts.test_sets:
        return (*opts.test_sets[key], f"given (--test-sets, line {key!r})")
    if name == "test" and opts.source is not None:
        return opts.source, opts.reference, "given (--source/--ref)"
    return None, None, None


def folder_key(run: Run, entry: Entry) -> str:
    return run.rel(entry.folder)


def read_test_sets(
    path: str | os.PathLike[str], root: str | os.PathLike[str]
) -> dict[str, tuple[Path, Path | None]]:
    """The ``--test-sets FILE`` mapping (docs/archives.md, "Choosing test sets yourself"): one line
    per experiment, ``FOLDER SOURCE [REFERENCE]`` separated by whitespace, ``#`` starting a
    comment; ``FOLDER`` is the experiment's folder relative to ROOT (``.`` for ROOT itself;
    ``FOLDER:holdout`` for its holdout set); ``SOURCE``/``REFERENCE`` are relative to the
    mapping file's folder (or absolute).  Every folder and file must exist."""
    path, root = Path(path), Path(root)
    if not lookup.is_file(path):
        raise LegacyInputError(path, "--test-sets: file not found")
    out = {}
    text = read_text(path, "the --test-sets mapping")  # bounded, non-UTF-8 one line
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        if len(words) not in (2, 3):
            raise LegacyInputError(
                path,
                f"line {number}: expected FOLDER SOURCE [REFERENCE] (whitespace-separated), "
                f"got {len(words)} words",
            )
        folder, _, name = words[0].partition(":")
        if name not in ("", "holdout"):
            raise LegacyInputError(
                path, f"line {number}: {words[0]!r}: only FOLDER or FOLDER:holdout"
            )
        if not (root / folder).is_dir():
            raise LegacyInputError(path, f"line {number}: no folder {folder!r} under {root}")
        files = [p if p.is_absolute() else path.parent / p for p in map(Path, words[1:])]
        for f in files:
            if not lookup.is_file(f):
                raise LegacyInputError(path, f"line {number}: {f}: file not found")
        key = Path(folder).as_posix() + (f":{name}" if name else "")
        if key in out:
            raise LegacyInputError(path, f"line {number}: {words[0]!r} given twice")
        out[key] = (files[0], files[1] if len(files) > 1 else None)
    return out


# ----------------------------------------------------------------------------------------
# caching (groundhog_port.tasks.archive.cache): what a result depends on beyond the folder
# ----------------------------------------------------------------------------------------
def key_inputs(run: Run, entry: Entry, opts: Options) -> list:
    """The files a test set of ``entry`` may be taken from (found by content: any text file
    of ROOT and the data directories) and the given ones: part of its cache key."""
    from ...legacy.vocab_match import pickles

    inputs = []
    inputs += [p for p, _ in lookup.text_files(places(run, entry, opts), entry.folder)]
    # vocabularies may be found by content anywhere there (issue 43)
    given = [d for d in opts.data_dirs if not isinstance(d, lookup.ImplicitDir)]
    inputs += pickles([run.root, *given])
    inputs += entry.snapshots
    inputs += [p for _, p in plan_files(run, opts.plan.get(entry.id) if opts.plan else None)]
    return inputs + [opts.source, opts.reference, *(p for v in opts.test_sets.values() for p in v)]


#: the keys of a plan entry, and of each of its outputs, that name a file
PLAN_FILE_KEYS = (
    "state",
    "model",
    *VOCABULARY_FILE_KEYS,
    "test_source",
    "test_reference",
    "holdout_source",
    "holdout_reference",
)
PLAN_OUTPUT_FILE_KEYS = ("file", "source", "reference", "snapshot")


def plan_files(run: Run, entry: dict | None) -> list[tuple[str, Path]]:
    """``[(what, path)]``: every file a plan entry names, wherever it lies (its bytes key
    the cache: a test set the plan names outside ROOT, changed after a run, was served
    from the cache)."""
    if entry is None:
        return []
    named = [(k, entry.get(k, "")) for k in PLAN_FILE_KEYS]
    named += [("snapshots", s) for s in entry.get("snapshots", [])]
    named += [
        (f"output {j} {k}", o.get(k, ""))
        for j, o in enumerate(entry.get("output", []), start=1)
        for k in PLAN_OUTPUT_FILE_KEYS
    ]
    return [(what, p) for what, text in named if text and (p := run.abs(text)) is not None]


#: models one experiment's re-doing holds open at once, the least recently used dropped
#: first: its own and one snapshot (issue 51: 30 snapshots of a 6.4 MB model, all held,
#: took +1,112 MiB; 100 of 1.2 MB, 3.6 GiB)
HELD_MODELS = 2


class Opened:
    """The models one experiment's re-doing has open: at most :data:`HELD_MODELS`; one
    dropped is opened again when asked again (``loads`` counts the openings)."""

    def __init__(self, held: int = HELD_MODELS) -> None:
        self.held = held
        self.loads = 0
        self._open: dict = {}

    def get(self, key: Hashable, make: Callable[[], _T]) -> _T:
        if key in self._open:
            self._open[key] = self._open.pop(key)  # the most recently used last
            return self._open[key]
        while len(self._open) >= self.held:  # dropped before the next is made
            self._open.pop(next(iter(self._open)))
        self._open[key] = made = make()
        self.loads += 1
        return made


def open_model(
    entry: Entry,
    model: str | os.PathLike[str],
    changes: Sequence[str],
    dirs: Sequence[Path],
    opts: Options,
    opened: Opened,
) -> Experiment:
    """The experiment of ``entry`` with ``model`` and ``changes``, from ``opened`` (the
    models :func:`redo` holds open) or opened now."""
    from ...legacy.loading import open_experiment

    return opened.get(
        (str(model), tuple(changes)),
        lambda: open_experiment(entry.state, model, list(changes), dirs, opts.device),
    )
