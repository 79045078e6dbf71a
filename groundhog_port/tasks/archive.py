"""Re-doing a whole tree of old GroundHog experiments: ``groundhog-port archive ROOT``.

An archive is whatever folders users kept: each ``*state.pkl`` is one experiment, with the
``*model.npz`` beside it (the one of the same prefix, else the only one), the vocabularies
the state names (found by :mod:`groundhog_port.lookup`: stored path, next to the state, each
``--data-dir``, then the folder's ``../data``), a test set and what ``sample.py`` /
``score.py`` left in the same folder:

* ``trans_[holdout_]beamN[_normalize][_ignore_unk][_runK].txt`` (sample.py ``--trans``;
  settings read from the name, :func:`groundhog_port.tasks.reproduce.parse_trans_name`), with
  ``sample_<stem>_stdout.txt`` ("Total cost of the translations") and
  ``sample_<stem>_error.txt`` (the traceback of a crashed run);
* ``scores_batch[_holdout][_runK].txt`` (``score.py --mode=batch --allow-unk`` on the test
  set) and ``scores_h5_trainN[_runK].txt`` (the first N batches of the training corpora);
* crash logs ``*_error.txt``.

The test set of each trans file is found by content (:class:`groundhog_port.tasks.reproduce.
SourceFinder`: any text file under ROOT or a ``--data-dir`` whose first lines translate to
the archived ones, docs/archives.md), or given (``--source/--ref``, ``--test-sets FILE``).

Per experiment (:func:`redo`): reproduction per trans file (identical lines, the first
differing ones, the original's crash re-checked), BLEU of archived and reproduced output
(sacrebleu with its signature, and the multi-bleu.perl number), total costs against what
sample.py printed, the scores files line by line, attention plots of the first sentences
(RNNsearch only), and parity where a ``trace.h5`` lies beside.  What cannot be done is
listed with the reason, never dropped.

Results are cached per experiment in ``OUT/cache/`` (keyed by the bytes of the inputs, the
options and the code; each entry checked before use: :mod:`groundhog_port.tasks.archive_cache`),
so an interrupted run resumes where it stopped and gives the same report as an
uninterrupted one (the report holds no timings).  FIFOs, devices and sockets in the tree
are listed as not done, never opened; a file reached through a link to outside ROOT (and
the ``--data-dir`` folders) is not read.  Nothing is
written inside ROOT.  Under ``torchrun`` the experiments are dealt out over the ranks and
rank 0 writes the report (:mod:`groundhog_port.tasks.archive_report`).
"""

import contextlib
import logging
import math
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import lookup
from ..errors import LegacyInputError, shown, unshown
from ..outputs import check_partial, file_in, folder_in, lies_inside
from ..untrusted import read_text, special_kind
from . import packs
from .archive_cache import cached, forget_digests, safe_name, store
from .rescore import read_lines

logger = logging.getLogger(__name__)

#: ``scores_batch[_holdout][_runK].txt`` / ``scores_h5_trainN[_runK].txt`` (docs/recordings.md, "Files")
SCORES_NAME = re.compile(
    r"^scores_(?:batch(?:_(?P<set>holdout))?|h5_train(?P<n>[1-9][0-9]*))"
    r"(?:_run(?P<run>[0-9]+))?\.txt$"
)
VOCAB_KEYS = lookup.VOCABULARY_FILE_KEYS


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


def not_read(path, allowed):
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


def allowed_folders(root, data_dirs=()):
    """The real paths a file of the archive may lead to: ROOT, each ``--data-dir`` and the
    folders packed experiments were unpacked into (:func:`unpacked`)."""
    return tuple(os.path.realpath(d) for d in (root, *data_dirs, *_UNPACKED))


#: unpacked folder (absolute) -> the pack's path under ROOT, for the run (:func:`unpacked`)
_UNPACKED: dict[str, str] = {}


def _pack_files(root):
    """Every packed experiment (:func:`groundhog_port.tasks.packs.is_pack`) under ``root``,
    sorted, links to folders not followed."""
    found = []
    for folder, _, names in lookup.walk(root):
        found += [Path(folder) / n for n in sorted(names) if packs.is_pack(n)]
    return found


def _pack_entry(root, pack, why):
    """The entry of a pack that is not re-done: its one "not done" line says why."""
    rel = rel_path(root, pack)
    return Entry(rel, pack.parent, pack, None, None, root=Path(root), refused=[(pack.name, why)])


@contextlib.contextmanager
def unpacked(root, data_dirs=()):
    """The experiments of every pack under ``root`` (``run7.tar.gz``, ``.zip``...), each pack
    unpacked under the bounds of :mod:`groundhog_port.tasks.packs` into a private temporary
    folder for the run, removed afterwards.  Their ids, and every path of theirs in the
    report, read ``run7.tar.gz/...`` (:func:`rel_path`).  A pack refused, holding no state,
    or holding members not written (links, special files, packs) says so in "Not done"."""
    folder = packs.private_folder()
    entries = []
    try:
        for i, pack in enumerate(_pack_files(root)):
            why = not_read(pack, allowed_folders(root, data_dirs))
            if why is not None:
                entries.append(_pack_entry(root, pack, why))
                continue
            (folder / str(i)).mkdir()
            try:
                up = packs.unpack(pack, folder / str(i))
            except LegacyInputError as err:
                entries.append(_pack_entry(root, pack, err.problem))
                continue
            rel = rel_path(root, pack)
            _UNPACKED[os.path.abspath(up.folder)] = rel
            skipped = up.skipped + [
                (rel_path(up.folder, p), "a pack inside a pack: not unpacked")
                for p in _pack_files(up.folder)
            ]
            found = discover(up.folder, data_dirs)
            if not found:
                why = "holds no experiment (*state.pkl): nothing re-done"
                entries.append(_pack_entry(root, pack, why))
            for entry in found:
                entry.id = f"{rel}/{entry.id}"
                entry.root = Path(root)
                entry.refused += [(f"{pack.name}: {m}", w) for m, w in skipped]
                entries.append(entry)
        yield entries
    finally:
        _UNPACKED.clear()
        shutil.rmtree(folder, ignore_errors=True)


# ----------------------------------------------------------------------------------------
# finding the experiments
# ----------------------------------------------------------------------------------------
def _is_output(name):
    """What sample.py / score.py may have written: ``trans*.txt`` or any ``.txt`` whose name
    holds ``trans`` (``dev_trans.txt``: sample.py ``--trans`` takes any name), ``scores*.txt``,
    ``*_error.txt``."""
    return (
        ("trans" in name and name.endswith(".txt") and not name.startswith("sample_"))
        or (name.startswith("scores") and name.endswith(".txt"))
        or name.endswith("_error.txt")
    )


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


def discover(root, data_dirs=()) -> list[Entry]:
    """Every ``*state.pkl`` under ``root`` (sorted by path) with what lies beside it; the
    files :func:`not_read` refuses are listed in each entry's ``refused`` instead."""
    root = Path(root)
    allowed = allowed_folders(root, data_dirs)
    entries = []
    for folder, _, names in lookup.walk(root):
        folder = Path(folder)
        states = sorted(n for n in names if n.endswith("state.pkl"))
        outputs, refused = [], []
        for n in sorted(names):
            if _is_output(n):
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


def experiment_dirs(entry: Entry, opts: Options) -> tuple:
    """The data directories an experiment's files are looked for in: each ``--data-dir``,
    then its folder and its ``../data`` (:func:`groundhog_port.lookup.case_data_dirs`) --
    those two only inside ROOT or the pack it came from: nothing above ROOT is read."""
    inside = [entry.root or entry.folder, *_UNPACKED]
    return tuple(
        d
        for d in lookup.case_data_dirs(entry.folder, opts.data_dirs)
        if not isinstance(d, lookup.ImplicitDir) or any(lies_inside(d, f) for f in inside)
    )


def places(root, entry: Entry, opts: Options):
    """Where the test sets of ``entry`` are looked for, in order: its folder (not below: the
    folders below are other experiments), each ``--data-dir``, the whole archive, and the
    folder's ``../data`` (searched before the rest of ROOT) where it lies inside ROOT or the
    pack the experiment was unpacked from: nothing above ROOT is read."""
    out = [lookup.Place(entry.folder, "in the experiment folder", recursive=False)]
    given = [d for d in opts.data_dirs if not isinstance(d, lookup.ImplicitDir)]
    for i, d in enumerate(given):
        label = "--data-dir" + (f" {i + 1} of {len(given)}" if len(given) > 1 else "")
        out.append(lookup.Place(Path(d), label))
    out.append(lookup.Place(Path(root), "under the archive ROOT"))
    up = entry.folder.parent / "data"
    inside = [entry.root or root, *_UNPACKED]
    if any(lies_inside(up, f) for f in inside):  # never above ROOT: ROOT/../data is not its
        out.append(lookup.Place(up, "in the experiment folder's ../data"))
    return out


def given_test_set(root, entry: Entry, opts: Options, name="test"):
    """``(source, reference, how)`` chosen by the user for ``entry``'s ``name`` test set: a
    line of ``--test-sets FILE`` for the experiment's folder, else (``test``) ``--source/--ref``;
    ``(None, None, None)`` when none."""
    key = _folder_key(root, entry) + ("" if name == "test" else f":{name}")
    if key in opts.test_sets:
        return (*opts.test_sets[key], f"given (--test-sets, line {key!r})")
    if name == "test" and opts.source is not None:
        return opts.source, opts.reference, "given (--source/--ref)"
    return None, None, None


def _folder_key(root, entry):
    return rel_path(root, entry.folder)


def read_test_sets(path, root) -> dict:
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
# caching (groundhog_port.tasks.archive_cache): what a result depends on beyond the folder
# ----------------------------------------------------------------------------------------
def key_inputs(entry: Entry, opts: Options) -> list:
    """The files a test set of ``entry`` may be taken from (found by content: any text file
    of ROOT and the data directories) and the given ones: part of its cache key."""
    from ..legacy.vocab_match import pickles

    inputs = []
    if entry.root is not None:
        inputs += [p for p, _ in lookup.text_files(places(entry.root, entry, opts), entry.folder)]
        # vocabularies may be found by content anywhere there (issue 43)
        given = [d for d in opts.data_dirs if not isinstance(d, lookup.ImplicitDir)]
        inputs += pickles([entry.root, *given])
    inputs += entry.snapshots
    return inputs + [opts.source, opts.reference, *(p for v in opts.test_sets.values() for p in v)]


# ----------------------------------------------------------------------------------------
# re-doing one experiment
# ----------------------------------------------------------------------------------------
def rel_path(root, path):
    """``path`` relative to ROOT where it lies inside (a file of a packed experiment:
    ``run7.tar.gz/...``, :func:`unpacked`), else as it is; for the report and the logs, so
    bytes of a name that are not UTF-8 are shown escaped (:func:`groundhog_port.errors.shown`)."""
    full = os.path.abspath(path)
    for folder, pack in _UNPACKED.items():
        if full == folder or full.startswith(folder + os.sep):
            return shown(Path(pack, os.path.relpath(full, folder)).as_posix())
    try:  # abspath, not resolve: a symlinked file is named where it lies in the archive
        return shown(Path(full).relative_to(os.path.abspath(root)).as_posix())
    except ValueError:
        return shown(str(path))


class _Result:
    """The result of one experiment under construction (a JSON-able dict in the end)."""

    def __init__(self, root, entry):
        self.root = Path(root)
        self.data = {
            "id": entry.id,
            "folder": self.rel(entry.folder),
            "state": self.rel(entry.state),
            "model": self.rel(entry.model) if entry.model else None,
            "files": {},
            "reproduction": [],
            "scores": [],
            "crash_logs": [],
            "parity": None,
            "plots": [],
            "notes": [],
            "not_done": [],
        }
        self._causes = {}
        self.missing = {}  # test set name -> why a score file's test set was not found

    def rel(self, path):
        return rel_path(self.root, path)

    def not_done(self, what, why, cause=None):
        """Record ``what`` as not done.  One cause, one entry: the same ``why`` (or the same
        ``cause``, for reasons worded per file) given again adds its ``what`` to the first."""
        for entry in self.data["not_done"]:
            if entry["why"] == why or (cause is not None and self._causes.get(id(entry)) == cause):
                entry["what"] += f", {what}"
                return
        entry = {"what": what, "why": why}
        self._causes[id(entry)] = cause
        self.data["not_done"].append(entry)

    def flush(self):
        """One warning per cause (``why``) of this experiment."""
        for entry in self.data["not_done"]:
            logger.warning("%s: not done: %s: %s", self.data["id"], entry["what"], entry["why"])


def _attempt(res, what, fn, *args):
    """``fn(*args)``; a failure is recorded as "not done" with its reason (one experiment's
    problem never stops the archive)."""
    try:
        return fn(*args)
    except LegacyInputError as err:
        res.not_done(what, str(err))
    except Exception as err:  # noqa: BLE001 -- an archive holds anything; report, go on
        res.not_done(what, f"{type(err).__name__}: {' '.join(str(err).split())[:300]}")
    return None


def redo(root, entry: Entry, opts: Options, out) -> dict:
    """Everything :mod:`groundhog_port.tasks.archive` re-does for one experiment, as a dict.
    What cannot be done is logged once per cause (:meth:`_Result.flush`)."""
    res = _Result(root, entry)
    plan = opts.plan.get(entry.id) if opts.plan is not None else None
    try:
        _redo(res, root, entry, opts, out, plan)
    finally:
        res.flush()
    return res.data


#: how :func:`not_read` begins the reason of a link leading outside the archive
_OUTSIDE = "leads through a link to "


def _refused(res, entry):
    """The files :func:`not_read` refused: one entry per cause -- the links leading outside
    the archive together, naming the folders they lead to (one ``--data-dir`` each fixes
    them), each special file on its own."""
    vital = {entry.state.name, entry.model.name if entry.model is not None else None}
    then = "; nothing of the experiment is re-done without its state and model"
    outside = [(n, why) for n, why in entry.refused if why.startswith(_OUTSIDE)]
    for name, why in entry.refused:
        if not why.startswith(_OUTSIDE):
            res.not_done(name, why + (then if name in vital else ""))
    if outside:
        folders = dict.fromkeys(
            str(Path(why[len(_OUTSIDE) :].split(", outside the archive", 1)[0]).parent)
            for _, why in outside
        )
        res.not_done(
            ", ".join(n for n, _ in outside),
            f"lead{'s' if len(outside) == 1 else ''} through links into "
            f"{', '.join(folders)}, outside the archive: not read (pass "
            + ("that folder" if len(folders) == 1 else "each folder")
            + " with --data-dir to have it read)"
            + (then if vital & {n for n, _ in outside} else ""),
        )


def _abs(root, text):
    """A plan's path (relative to ROOT, or absolute) as a path; ``None`` for ``""``.  The
    inverse of :func:`rel_path`: ``run7.tar.gz/...`` is the file in the folder the pack was
    unpacked into (:func:`unpacked`), and a name shown escaped (bytes that are not UTF-8,
    ``r\\xe9sultats``) is the file of those bytes when no file has the name as written."""
    if not text:
        return None
    for folder, pack in _UNPACKED.items():
        if text == pack or text.startswith(pack + "/"):
            return Path(folder, text[len(pack) :].lstrip("/"))
    p = Path(text)
    p = p if p.is_absolute() else Path(root) / p
    if "\\x" in text and not os.path.lexists(p):
        raw = Path(unshown(str(p)))
        if os.path.lexists(raw):
            return raw
    return p


def _open(entry, model, changes, dirs, opts, opened):
    """The experiment of ``entry`` with ``model`` and ``changes``, opened once per run of
    :func:`redo` (``opened``: the ones opened so far)."""
    from ..legacy.loading import open_experiment

    key = (str(model), tuple(changes))
    if key not in opened:
        opened[key] = open_experiment(entry.state, model, list(changes), dirs, opts.device)
    return opened[key]


def _output_kind(name):
    if name.endswith("_error.txt"):
        return "crash log"
    if name.startswith("scores"):
        return "scores"
    return "trans"


def plan_experiment(root, entry: Entry, opts: Options, opened=None) -> dict:
    """The plan entry of one experiment (:mod:`groundhog_port.tasks.plan`): the files it
    takes and why, each output with the settings it stands for and its test set, what is
    missing with the line to add.  Test sets and settings are found by content (first lines
    re-translated, :class:`~groundhog_port.tasks.reproduce.SourceFinder`)."""
    root = Path(root)
    opened = {} if opened is None else opened
    res = _Result(root, entry)  # scratch: paths relative to ROOT, the test sets' misses
    rel = lambda p: res.rel(p) if p else ""  # noqa: E731
    e: dict = {
        "id": entry.id,
        "folder": _folder_key(root, entry),
        "state": rel(entry.state),
        "state_why": "a *state.pkl under ROOT: one experiment",
        "model": rel(entry.model),
        "model_why": entry.model_why,
        "snapshots": [rel(s) for s in entry.snapshots],
        "snapshots_why": SNAPSHOTS_WHY if entry.snapshots else "",
        "changes": list(opts.changes),
        "missing": [],
        "output": [],
    }
    outputs = [{"file": rel(p), "kind": _output_kind(p.name)} for p in entry.outputs]
    e["output"] = outputs
    unread = {name for name, _ in entry.refused}
    if entry.model is None or entry.state.name in unread or entry.model.name in unread:
        if entry.model is None:
            e["missing"].append('model = "PATH"  (no *model.npz beside the state)')
        return e
    dirs = experiment_dirs(entry, opts)
    try:
        exp = _open(entry, entry.model, e["changes"], dirs, opts, opened)
    except LegacyInputError as err:
        e["missing"].append(f"opening the experiment: {err.problem}")
        return e
    exp.data_dirs = tuple(dirs) + lookup.unique_file_dirs(
        exp.state, VOCAB_KEYS, root, "under the archive ROOT"
    )
    missing = []
    for key in VOCAB_KEYS:
        try:
            e[key], e[key + "_why"] = rel(exp.path(key)), "the file the state names (lookup)"
        except LegacyInputError:
            missing.append(key)
    if missing:
        from ..legacy import vocab_match

        found = vocab_match.find_by_content(
            exp.state,
            missing,
            [root, *(d for d in opts.data_dirs if not isinstance(d, lookup.ImplicitDir))],
            lookup.languages(exp.state),
            near=entry.folder,
        )
        for key in missing:
            if key in found:
                e[key], e[key + "_why"] = rel(found[key].path), found[key].why
            else:
                e[key] = ""
                e[key + "_why"] = (
                    f"not found: no file named {Path(str(exp.state.get(key))).name} and no "
                    "pickle whose words and ids fit the state under ROOT or a --data-dir"
                )
                e["missing"].append(f'{key} = "PATH"  (the state\'s {key})')
        if set(found) != set(missing):
            return e
        try:
            exp = _open(entry, entry.model, _changes(root, e), dirs, opts, opened)
        except LegacyInputError as err:
            e["missing"].append(f"opening the experiment: {err.problem}")
            return e
        exp.data_dirs = tuple(dirs) + lookup.unique_file_dirs(
            exp.state, VOCAB_KEYS, root, "under the archive ROOT"
        )
    snaps = _snapshot_exps(entry, e, dirs, opts, opened, root)
    tests: dict = {}
    for name in TEST_SET_NAMES:
        src, ref, how = given_test_set(root, entry, opts, name)
        if src is not None and ref is None:
            ref, why = lookup.reference_for(src, *lookup.languages(exp.state))
            how += f"; reference: {why}"
        tests[name] = (src, ref, how)
    _plan_trans(res, root, entry, e, exp, snaps, tests, opts)
    chosen = [o["snapshot"] for o in e["output"] if o.get("snapshot")]
    if chosen:  # the scores, plots and parity: the snapshot that reproduces most outputs
        best = max(dict.fromkeys(chosen), key=chosen.count)
        if best != e["model"]:
            e["model"] = best
            e["model_why"] = (
                "the snapshot whose re-translations reproduce the archived outputs "
                f"({chosen.count(best)} of {len(chosen)}): the scores, plots and parity use it"
            )
            exp = dict(snaps)[_abs(root, best)]
    for name, key in (("test", "test"), ("holdout", "holdout")):
        src, ref, how = tests[name]
        e[f"{key}_source"], e[f"{key}_reference"] = rel(src), rel(ref)
        e[f"{key}_source_why"] = _relative_why(res, how) if how else ""
    _plan_scores(res, root, entry, e, exp, tests, opts, dirs)
    return e


#: why snapshots are listed (groundhog/mainLoop.py:233-234 at 4d2433b)
SNAPSHOTS_WHY = (
    "prefix + model%d.npz: GroundHog's MainLoop.save with overwrite=False "
    "(groundhog/mainLoop.py:233-234); forks also write timing%d.npz, algo%d.npz"
)


def _changes(root, e) -> list:
    """The state changes a plan entry runs with: its ``changes``, then each vocabulary it
    names (``word_indx='...'``, the path made absolute)."""
    out = list(e.get("changes", []))
    for key in VOCAB_KEYS:
        p = _abs(root, e.get(key, ""))
        if p is not None:
            out.append(f"{key}={str(os.path.abspath(p))!r}")
    return out


def _snapshot_exps(entry, e, dirs, opts, opened, root):
    """``[(path, experiment)]`` of the snapshots to check, newest first (``--snapshot``:
    ``latest`` the newest only, ``N`` model N only, else all); ``[]`` without snapshots."""
    snaps = [_abs(root, s) for s in e.get("snapshots", [])]
    snaps = [s for s in snaps if s is not None][::-1]
    if not snaps:
        return []
    if opts.snapshot == "latest":
        snaps = snaps[:1]
    elif opts.snapshot not in ("auto", "all"):
        snaps = [s for s in snaps if _snapshot_number(s) == int(opts.snapshot)]
    out = []
    for s in snaps:
        try:
            out.append((s, _open(entry, s, _changes(root, e), dirs, opts, opened)))
        except LegacyInputError as err:
            e["missing"].append(f"snapshot {s.name}: {err.problem}")
    return out


def _snapshot_number(path) -> int | None:
    m = re.search(r"model([0-9]+)\.npz$", Path(path).name)
    return int(m.group(1)) if m else None


def _plan_trans(res, root, entry, e, exp, snaps, tests, opts):
    """Each translation output's settings (its name, else by content), test set and snapshot."""
    from .reproduce import (
        INFER_BEAMS,
        SourceFinder,
        disambiguate,
        inferable_settings,
        parse_trans_name,
    )

    dirs = experiment_dirs(entry, opts)
    # the files the user named (--source/--ref, --test-sets, the plan) are read where they
    # are; a file found by content must lie in ROOT or a --data-dir (not_read)
    named_by_user = {str(f) for pair in tests.values() for f in pair[:2] if f is not None}
    allowed = allowed_folders(root, opts.data_dirs)
    by_name = {n: lookup.find_named(TEST_SET_NAMES[n][0], entry.folder, dirs) for n in tests}

    def fix(name):
        return (
            "; pass "
            + ("--source FILE --ref FILE (every experiment), " if name == "test" else "")
            + f"a line '{_folder_key(root, entry)}{'' if name == 'test' else ':' + name} "
            "SOURCE REFERENCE' in --test-sets FILE, --data-dir DIR (the folder holding it), "
            'or source = "PATH" in the plan'
        )

    models = snaps or [(entry.model, exp)]
    finders = [
        SourceFinder(m_exp, places(root, entry, opts), entry.folder, by_name=by_name, fix=fix)
        for _, m_exp in models
    ]
    trans = [(p, o) for p, o in zip(entry.outputs, e["output"]) if o["kind"] == "trans"]
    named = [(p, o, parse_trans_name(p.name)) for p, o in trans]
    # outputs whose names say their settings first: their test sets are tried first for
    # the others (SourceFinder reuses a choice)
    named.sort(key=lambda t: t[2] is None)
    for p, o, parsed in named:
        stem = p.name[len("trans_") : -len(".txt")] if p.name.startswith("trans_") else None
        error = entry.folder / f"sample_{stem}_error.txt" if stem else None
        error = error if error is not None and error.is_file() else None
        if parsed is not None:
            settings, name, _ = parsed
            candidates = [settings]
            o["settings_why"] = "read from the file name"
        else:
            name, candidates = "test", inferable_settings()
        o["test_set"] = name
        given = tests[name]
        choice, settings, model, why_not = None, None, None, []
        # an output of any name: the test sets chosen for the others first, every setting
        for reuse_only in (True, False) if parsed is None else (False,):
            for s in candidates:
                for (m_path, _), finder in zip(models, finders):
                    try:
                        if given[0] is not None and str(given[0]) in named_by_user:
                            if finder._confirm(read_lines(p), s)(given[0]) is not None:
                                continue
                            c = lookup.TestSetChoice(given[0], given[1], given[2])
                            finder.note(c, p.name)
                        else:  # found by content (a test set chosen before is tried first)
                            c = finder.find(
                                p, s, name, error, by_name=parsed is not None, reuse_only=reuse_only
                            )
                    except LegacyInputError as err:
                        if not reuse_only:
                            why_not.append(err.problem)
                        continue
                    if not c.confirmed and len(models) > 1 and m_path != models[-1][0]:
                        continue  # by name, unconfirmed: only once no snapshot confirms
                    choice, settings, model = c, s, m_path
                    break
                if choice is not None:
                    break
            if choice is not None:
                break
        if choice is None and given[0] is not None and parsed is not None:
            choice = lookup.TestSetChoice(given[0], given[1], given[2], confirmed=False)
            settings, model = candidates[0], models[0][0]
        if choice is None:
            o["source"] = o["reference"] = ""
            if parsed is None:
                o["why"] = (
                    "the file name does not say the sample.py settings and no setting "
                    f"tried (beams {', '.join(map(str, INFER_BEAMS))}, with and without "
                    "--normalize / --ignore-unk) gives its first lines from any test set "
                    'found; add beam_size = N (normalize, ignore_unk) and source = "PATH"'
                )
            else:
                o["why"] = f"its test set: {why_not[0] if why_not else 'not found'}"
            e["missing"].append(f'{o["file"]}: source = "PATH"  ({o["why"][:200]})')
            continue
        why = None
        if str(choice.source) not in named_by_user:
            why = not_read(choice.source, allowed) or not_read(choice.reference, allowed)
        if why is not None:
            o["source"] = o["reference"] = ""
            o["why"] = f"its test set {res.rel(choice.source)}: {why}"
            continue
        o.update(beam_size=settings.beam_size, normalize=settings.normalize)
        o["ignore_unk"] = settings.ignore_unk
        if parsed is None:
            finder = finders[[m for m, _ in models].index(model)]
            settings, agree, also = disambiguate(finder, read_lines(p), choice.source, settings)
            o.update(beam_size=settings.beam_size, normalize=settings.normalize)
            o["ignore_unk"] = settings.ignore_unk
            o["settings_why"] = (
                f"by content: {agree} re-translated with {settings.describe()} are the "
                "archived ones (settings tried in order: beams 1, 5, 10, 12, 20, each without "
                "and with --normalize / --ignore-unk; where several give the first lines, more "
                "lines decide)"
                + (
                    f"; so are they with {'; '.join(also)} (the first of these is taken)"
                    if also
                    else ""
                )
            )
        o["source"], o["reference"] = (
            res.rel(choice.source),
            res.rel(choice.reference) if choice.reference else "",
        )
        o["why"] = _relative_why(res, choice.why)
        if snaps:
            o["snapshot"] = res.rel(model)
            o["snapshot_why"] = _snapshot_why(p, settings, choice.source, model, models, finders)
        if tests[name][0] is None and (
            parsed is not None or not any(x[2] is not None for x in named)
        ):
            tests[name] = (choice.source, choice.reference, choice.why)
    for finder in finders:  # which test set serves which files, and why: once
        finder.announce(f"{entry.id}: ")


def _snapshot_why(path, settings, source, chosen, models, finders):
    """What the first-lines check says of each snapshot for one output."""
    parts = []
    for (m_path, _), finder in zip(models, finders):
        difference = finder._confirm(read_lines(path), settings)(source)
        n = min(lookup.CONFIRM_LINES, len(read_lines(path)))
        if difference is None:
            parts.append(f"{m_path.name}: its first {n} lines are the archived ones")
        else:
            parts.append(f"{m_path.name}: first-lines check only, {difference}")
    return f"{chosen.name}, the newest snapshot whose first lines reproduce it; " + "; ".join(parts)


def _plan_scores(res, root, entry, e, exp, tests, opts, dirs):
    """Each score file's test set: the translations', else by name, else by content."""
    for p, o in zip(entry.outputs, e["output"]):
        if o["kind"] != "scores":
            continue
        m = SCORES_NAME.match(p.name)
        if m is None or m.group("n"):
            continue
        name = m.group("set") or "test"
        o["test_set"] = name
        src, ref, how = tests[name]
        if src is None:
            found = lookup.find_named(TEST_SET_NAMES[name][0], entry.folder, dirs)
            if not_read(found, allowed_folders(root, opts.data_dirs)) is not None:
                found = None
            if found is not None:
                ref, _ = lookup.reference_for(found, *lookup.languages(exp.state))
                src, how = (
                    found,
                    f"{TEST_SET_NAMES[name][0]} by its name (no translation file to confirm it)",
                )
            else:
                choice = _test_set_of_scores(res, root, exp, entry, name, opts)
                if choice is not None:
                    src, ref, how = choice.source, choice.reference, choice.why
                    logger.info("%s: %s", entry.id, choice.why)
            if src is not None:
                tests[name] = (src, ref, how)
                e[f"{name}_source"], e[f"{name}_reference"] = (
                    res.rel(src),
                    res.rel(ref) if ref else "",
                )
                e[f"{name}_source_why"] = _relative_why(res, how)
        o["source"] = res.rel(src) if src else ""
        o["reference"] = res.rel(ref) if ref else ""
        o["why"] = (
            _relative_why(res, how)
            if src
            else res.missing.get(name, f"no {TEST_SET_NAMES[name][0]}")
        )


def _redo(res, root, entry, opts, out, plan=None):
    """Run plan entry ``plan`` of ``entry`` (discovered here when ``None``)."""
    _refused(res, entry)
    unread = {name for name, _ in entry.refused}
    if entry.state.name in unread or (entry.model is not None and entry.model.name in unread):
        return  # said with its cause (_refused)
    if entry.others:
        res.not_done(
            "attributing outputs",
            f"the folder holds {entry.others + 1} states: its "
            "outputs are checked against each of them",
        )
    opened: dict = {}
    if plan is None:
        res.data["origin"] = "discovered"
        plan = plan_experiment(root, entry, opts, opened)
    else:
        res.data["origin"] = "from the plan"
    model = _abs(root, plan.get("model", ""))
    if model is None:
        res.not_done(
            "everything",
            "no *model.npz beside the state (or several, none with the state's prefix, and no "
            'GroundHog snapshot prefix + model%d.npz); add model = "PATH" in the plan',
        )
        return
    res.data["model"] = res.rel(model)
    dirs = experiment_dirs(entry, opts)
    changes = _changes(root, plan)
    exp = _attempt(res, "opening the experiment", _open, entry, model, changes, dirs, opts, opened)
    if exp is None:
        return
    exp.data_dirs = tuple(dirs) + lookup.unique_file_dirs(
        exp.state, VOCAB_KEYS, root, "under the archive ROOT"
    )
    if not _vocabularies(res, exp, entry):
        return
    tests = {}
    for name in TEST_SET_NAMES:
        src, ref = (
            _abs(root, plan.get(f"{name}_source", "")),
            _abs(root, plan.get(f"{name}_reference", "")),
        )
        if src is not None:
            res.data["files"][name] = {
                "source": res.rel(src),
                "reference": res.rel(ref) if ref else None,
                "how": plan.get(f"{name}_source_why", "") or "given in the plan",
            }
        tests[name] = (src, ref)
    outputs = _plan_outputs(root, entry, plan)
    _attempt(
        res, "reproduction", _reproduction, res, root, exp, entry, plan, outputs, opts, opened, dirs
    )
    for p, o in outputs:
        if o["kind"] == "scores":
            src, ref = _abs(root, o.get("source", "")), _abs(root, o.get("reference", ""))
            name = o.get("test_set", "test")
            if src is not None:
                tests[name] = (src, ref)
            _attempt(res, p.name, _scores, res, exp, entry, p, tests, opts, o.get("why", ""))
    _crash_logs(res, entry)
    if opts.plots > 0:
        _attempt(res, "attention plots", _plots, res, exp, entry, tests["test"], opts, out)
    if entry.trace is not None:
        _attempt(res, "parity", _parity, res, exp, entry, tests["test"], opts)
    else:
        res.data["parity"] = None


def _plan_outputs(root, entry, plan):
    """``[(path, output entry)]`` of a plan entry, in the plan's order."""
    return [(_abs(root, o["file"]), o) for o in plan.get("output", [])]


#: test set name -> its standard (source, reference) names, as sample.py's users named them
TEST_SET_NAMES = {"test": ("test.en", "test.fr"), "holdout": ("holdout.en", "holdout.fr")}


def _vocabularies(res, exp, entry):
    """Find the four vocabularies; when some are missing, one "not done" naming them all and
    where they were looked for (nothing else can be done without them)."""
    missing = []
    for key in VOCAB_KEYS:
        try:
            res.data["files"][key] = res.rel(exp.path(key))
        except LegacyInputError:
            res.data["files"][key] = None
            missing.append(key)
    if not missing:
        return True
    names = [Path(str(exp.state.get(k))).name for k in missing]
    stored = sorted({str(Path(str(exp.state.get(k))).parent) for k in missing})
    looked = [*stored] + [
        f"{Path(c).parent} ({where})"
        for c, where in lookup.candidates(names[0], entry.state, exp.data_dirs)
    ]
    res.not_done(
        "everything (translations, scores, plots, parity)",
        f"vocabularies not found: {', '.join(dict.fromkeys(names))} (looked in "
        f"{', '.join(dict.fromkeys(looked))}, for a single file of each name under the "
        "archive ROOT, and for a pickle whose words and ids fit the state); pass --data-dir "
        'DIR, the folder holding them, --changes "'
        + ",".join(f"{k}='FILE'" for k in missing)
        + '", or '
        + ", ".join(f'{k} = "PATH"' for k in missing)
        + " in the plan",
    )
    return False


def _reproduction(res, root, exp, entry, plan, outputs, opts, opened, dirs):
    from .reproduce import ArchivedFile, Settings, reproduce

    allowed = allowed_folders(root, opts.data_dirs)
    groups: dict = {}  # snapshot (or the model) -> [(ArchivedFile, output entry)]
    snaps = [_abs(root, s) for s in plan.get("snapshots", [])]
    for p, o in outputs:
        if o["kind"] != "trans":
            continue
        src = _abs(root, o.get("source", ""))
        if src is None or "beam_size" not in o:
            res.not_done(p.name, o.get("why", "no test set in the plan"), cause="test set")
            continue
        ref = _abs(root, o.get("reference", ""))
        stem = p.name[len("trans_") : -len(".txt")] if p.name.startswith("trans_") else None
        stdout = error = None
        if stem is not None:
            stdout, error = (entry.folder / f"sample_{stem}_{k}.txt" for k in ("stdout", "error"))
            stdout = stdout if stdout.is_file() and not_read(stdout, allowed) is None else None
            error = error if error.is_file() and not_read(error, allowed) is None else None
        settings = Settings(o["beam_size"], bool(o.get("normalize")), bool(o.get("ignore_unk")))
        f = ArchivedFile(p, settings, src, ref, stdout, error)
        model = _abs(root, o.get("snapshot", "")) or _abs(root, plan.get("model", ""))
        groups.setdefault(model, []).append((f, o))
    rows = {}
    for model, items in groups.items():
        m_exp = (
            exp
            if model == _abs(root, plan.get("model", ""))
            else _open(entry, model, _changes(root, plan), dirs, opts, opened)
        )
        m_exp.data_dirs = exp.data_dirs
        report = reproduce(
            m_exp,
            [f for f, _ in items],
            batch_size=opts.batch_size,
            max_diffs=opts.max_diffs,
            tokenize=opts.tokenize,
            max_lines=opts.max_sentences,
        )
        for (f, o), r in zip(items, report["files"]):
            row = _row(res, f, r)
            if o.get("settings_why"):
                row["settings_why"] = o["settings_why"]
            if snaps and o.get("snapshot"):
                row["snapshot"] = res.rel(model)
                row["snapshots"] = _other_snapshots(
                    res, root, entry, plan, f, o, model, snaps, opts, opened, dirs, exp
                )
            rows[str(f.path)] = row
    for p, _ in outputs:
        if str(p) in rows:
            res.data["reproduction"].append(rows[str(p)])


def _other_snapshots(res, root, entry, plan, f, o, model, snaps, opts, opened, dirs, exp):
    """What each snapshot says of output ``f``: the chosen one reproduces it (the row);
    with ``--snapshot all`` every other one is re-translated in full ("N lines differ"),
    else the plan's first-lines check is quoted as it is."""
    from .reproduce import reproduce

    out = []
    for s in snaps:
        if s == model:
            out.append({"model": res.rel(s), "status": "this row"})
            continue
        if opts.snapshot == "all":
            s_exp = _open(entry, s, _changes(root, plan), dirs, opts, opened)
            s_exp.data_dirs = exp.data_dirs
            r = reproduce(s_exp, [f], batch_size=opts.batch_size, max_lines=opts.max_sentences)
            r = r["files"][0]
            status = (
                "reproduces it too"
                if r["all_identical"]
                else f"does not reproduce: {r['compared'] - r['identical']} of {r['compared']} lines differ"
            )
        else:
            said = [
                part
                for part in o.get("snapshot_why", "").split("; ")
                if part.startswith(s.name + ": ")
            ]
            status = (
                said[0][len(s.name) + 2 :].replace(
                    "first-lines check only, ", "does not reproduce (first-lines check only): "
                )
                if said
                else "not checked (--snapshot)"
            )
        out.append({"model": res.rel(s), "status": status})
    return out


def _row(res, f, r):
    from ..legacy.data import read_text_lines

    row = {
        k: r[k]
        for k in (
            "file",
            "settings",
            "compared",
            "identical",
            "all_identical",
            "first_differences",
            "bleu",
            "total_cost",
            "archived_total_cost",
            "original_stopped_after",
        )
    }
    row.update(
        source=res.rel(f.source),
        reference=res.rel(f.reference) if f.reference else None,
        crash_reproduced=r.get("crash_reproduced"),
        original_error=r.get("original_error"),
    )
    archived_lines = len(read_text_lines(f.path))
    source_lines = len(read_text_lines(f.source))
    if archived_lines > row["compared"]:
        row["limited"] = f"first {row['compared']} of {archived_lines} lines (--max-sentences)"
        if archived_lines < source_lines:
            row["crash_not_rechecked"] = (
                f"the original stopped after {archived_lines} "
                f"lines; not re-checked within the first "
                f"{row['compared']}"
            )
    return row


def _test_set_of_scores(res, root, exp, entry, name, opts):
    """The test set of the experiment's ``scores_batch[_holdout]*.txt`` where no translation
    file told it: a text file of as many lines with its same-stem reference whose first batch
    scores give the archived first lines within print noise (:class:`PrintNoise`, the rule of
    parity's ``batch/scores``).  ``None`` when there is no such score file or nothing
    matches (the score file's "not done" then says why)."""
    from ..search.scoring import batches_for
    from .rescore import read_lines

    scores = [
        p
        for p in entry.outputs
        if (m := SCORES_NAME.match(p.name))
        and not m.group("n")
        and (m.group("set") or "test") == name
    ]
    if not scores:
        return None
    archived = read_lines(scores[0])
    if not archived:
        return None
    langs = lookup.languages(exp.state)
    k = min(lookup.CONFIRM_LINES, len(archived))
    noise = PrintNoise(exp)

    def confirm(src):
        ref, why = lookup.reference_for(src, *langs)
        if ref is None:
            return f"no reference: {why}"
        try:
            batch = next(iter(batches_for(exp, src, ref, True)), None)
        except LegacyInputError as err:
            return err.problem
        if batch is None:
            return "no sentence to score"
        noise.restart()
        noise.add(batch, archived[:k], 0)
        return None if noise.ok() else "its first scores are not the archived ones"

    try:
        return lookup.find_source(
            len(archived),
            confirm,
            places(root, entry, opts),
            entry.folder,
            scores[0].name,
            "scored as score.py --mode=batch --allow-unk (within print noise)",
            langs,
            allow_longer=False,
        )
    except LegacyInputError as err:
        res.missing[name] = err.problem
        return None


def _relative_why(res, why):
    """A choice's reason with the archive's paths relative to ROOT (the report's paths)."""
    root = os.path.abspath(res.root) + os.sep
    return why.replace(root, "")


def _scores(res, exp, entry, path, tests, opts, why=""):
    """A ``scores*.txt`` of score.py, re-scored and compared line by line (the ``{:.5e}``
    text, and the largest relative difference of the numbers)."""
    import numpy as np

    from ..search.scoring import batches_for, score_batch
    from .rescore import read_lines

    m = SCORES_NAME.match(path.name)
    if m is None:
        res.not_done(
            path.name,
            "the file name does not say how score.py was run (expected "
            "scores_batch[_holdout][_runK].txt or scores_h5_trainN[_runK].txt)",
        )
        return
    archived = read_lines(path)
    limit = len(archived) if opts.max_sentences is None else min(len(archived), opts.max_sentences)
    if m.group("n"):
        batches, how = (
            batches_for(exp, None, None, True, int(m.group("n"))),
            f"score.py --mode=batch on the training corpora, {m.group('n')} batches",
        )
    else:
        name = m.group("set") or "test"
        src, ref = tests[name]
        if src is None:
            key = _folder_key(res.root, entry) + ("" if name == "test" else f":{name}")
            res.not_done(
                path.name,
                f"its {name} set: "
                + (why or res.missing.get(name, f"no {TEST_SET_NAMES[name][0]}"))
                + "; pass "
                + ("--source FILE --ref FILE (every experiment), " if name == "test" else "")
                + f"a line '{key} SOURCE REFERENCE' in --test-sets FILE, or --data-dir DIR "
                "(the folder holding it)",
                cause="test set",
            )
            return
        if ref is None:
            res.not_done(
                path.name,
                f"its {name} set has no reference ({res.data['files'][name]['how']}); "
                f"pass --ref FILE, or a line '{_folder_key(res.root, entry)} "
                f"{res.data['files'][name]['source']} REFERENCE' in --test-sets FILE",
            )
            return
        batches, how = (
            batches_for(exp, src, ref, True),
            f"score.py --mode=batch --allow-unk on {res.rel(src)} / {res.rel(ref)}",
        )
    lines, bound = [], PrintNoise(exp)
    for batch in batches:  # whole batches: score.py's padding decides the numbers
        if len(lines) >= limit:
            break
        cost = -score_batch(exp.model, batch).cost.numpy()
        first = len(lines)
        lines += [f"{float(s):.5e}" for s in cost]
        bound.add(batch, archived[first:limit], first)
    lines = lines[:limit]
    worst, off = 0.0, 0
    for a, b in zip(archived, lines):
        x, y = float(a), float(b)
        if math.isfinite(x) and math.isfinite(y):
            worst = max(worst, abs(x - y) / abs(x) if x else abs(y))
            off += abs(x - y) > last_digit(a, b)
        elif not (x == y or (np.isnan(x) and np.isnan(y))):
            worst, off = math.inf, off + 1
    identical = sum(a == b for a, b in zip(archived, lines))
    res.data["scores"].append(
        {
            "file": path.name,
            "how": how,
            "compared": len(lines),
            "archived_lines": len(archived),
            "identical": identical,
            "all_identical": len(lines) == limit == identical,
            "beyond_last_digit": off,
            "max_rel_diff": worst,
            "within_print_noise": bound.ok(),
            "first_differences": [
                {"line": i + 1, "archived": a, "reproduced": b}
                for i, (a, b) in enumerate(zip(archived, lines))
                if a != b
            ][: opts.max_diffs],
        }
    )


class PrintNoise:
    """Whether archived score.py lines lie within parity's ``batch/scores`` bounds of the
    port's scores (:mod:`groundhog_port.harness.tolerance`: the float64 shadow and the float32
    probe of the model set the bound, eq. (1)), plus half a unit in the last printed digit
    (:func:`~groundhog_port.harness.tolerance.printed_quantum`: score.py printed ``{:.5e}``).
    The same row and rule as ``groundhog-port parity``; nothing is fitted here."""

    def __init__(self, exp):
        from ..harness.report import Rows

        self.exp = exp
        self.row = Rows().get("batch", "batch/scores")
        self._models = None

    def add(self, batch, archived, first):
        """Judge the first ``len(archived)`` sentences of ``batch`` (lines ``first + 1...``)."""
        import numpy as np

        from ..harness import tolerance as tolmod
        from ..harness.report import as_numpy, compare_values, normal_sentences, score_quantum
        from ..search.scoring import score_batch

        n = min(len(archived), np.asarray(batch.x).shape[1])
        if n <= 0:
            return
        if self._models is None:
            self._models = (self.exp.model.float64_shadow(), self.exp.model.float32_probe())
        s32, s64, sp = (score_batch(m, batch) for m in (self.exp.model, *self._models))
        mask = np.asarray(batch.y_mask, dtype=np.float64)[:, :n]
        recorded = np.array([float(a) for a in archived[:n]])
        compare_values(
            self.row,
            f"lines {first + 1}-{first + n}",
            -as_numpy(s32.cost)[:n].astype(np.float32),
            -as_numpy(s64.cost)[:n],
            recorded,
            probe=-as_numpy(sp.cost)[:n],
            magnitude_of=mask.sum(0),
            n_terms=mask.shape[0],
            poolable=normal_sentences(as_numpy(s64.token_costs)[:, :n], mask),
            quantum=score_quantum(-as_numpy(s64.cost)[:n], as_numpy(s64.token_costs)[:, :n], mask)
            + tolmod.printed_quantum(recorded),
        )

    def ok(self) -> bool:
        self.row.finish()
        return self.row.passed

    def restart(self):
        """Judge anew (the float64 shadow and probe of the model are kept)."""
        from ..harness.report import Rows

        self.row = Rows().get("batch", "batch/scores")


def last_digit(a, b):
    """One unit in the last printed digit of ``{:.5e}`` numbers ``a`` / ``b`` (the larger
    exponent).  Reported, not judged: a score is a float32 sum whose rounding error scales
    with its terms, not with the printed total, so a small total can differ by more
    (parity's ``batch/scores`` judges scores against bounds derived per model)."""
    exponent = max(int(t.lower().split("e")[1]) if "e" in t.lower() else 0 for t in (a, b))
    return 10.0 ** (exponent - 5) * (1 + 1e-9)


def _crash_logs(res, entry):
    from .reproduce import original_error

    rows = {r["file"]: r for r in res.data["reproduction"]}
    for p in entry.outputs:
        if not p.name.endswith("_error.txt"):
            continue
        stem = p.name[: -len("_error.txt")]
        trans = "trans_" + stem[len("sample_") :] + ".txt" if stem.startswith("sample_") else None
        row = rows.get(trans)
        if row is None:
            status = "no trans file of this run was re-done"
        elif row.get("crash_not_rechecked"):
            status = row["crash_not_rechecked"]
        elif row.get("crash_reproduced"):
            status = f"reproduced: the port fails on line {row['original_stopped_after'] + 1} too"
        else:
            status = "NOT reproduced"
        res.data["crash_logs"].append(
            {
                "file": p.name,
                "last_line": original_error(p),
                "trans": trans if row else None,
                "status": status,
            }
        )


def _plots(res, exp, entry, test, opts, out):
    """Attention of the first ``opts.plots`` test pairs (source, archived/reference target)."""
    from ..search.scoring import parse_pair, score_pair
    from . import plots

    src, ref = test
    if not exp.cfg.search:  # nothing left undone: there is nothing to plot (said first)
        res.data["notes"].append("no attention plots: an RNNencdec model has no attention")
        return
    if src is None or ref is None:
        res.not_done("attention plots", "no test set with references")
        return
    plots.require_matplotlib()
    from ..legacy.data import read_text_lines

    folder = folder_in(out, "plots", safe_name(entry.id))  # no link in OUT followed
    for i, (s, t) in enumerate(
        zip(read_text_lines(src)[: opts.plots], read_text_lines(ref)[: opts.plots])
    ):
        (src_seq, src_words), (trg_seq, trg_words) = parse_pair(exp, s, t, True)
        a = score_pair(exp.model, src_seq, trg_seq).alignment.numpy()[:, :, 0]
        path = file_in(folder, plots.plot_file_name(i + 1, opts.plots))
        plots.plot_alignment(
            a,
            src_words + ["<eos>"],
            trg_words + ["<eos>"],
            path,
            title=f"{entry.id}: test pair {i + 1}",
            dpi=opts.plot_dpi,
        )
        res.data["plots"].append({"sentence": i + 1, "file": path.relative_to(out).as_posix()})


def _parity(res, exp, entry, test, opts):
    from ..harness.check import GROUPS, check
    from ..harness.trace import TraceFile

    groups = opts.parity_groups or GROUPS
    with TraceFile(entry.trace) as tr:
        groups = tuple(g for g in groups if tr.has(g) or (g == "batch" and tr.has("batch_all")))
        report = check(exp, tr, groups=groups, source=test[0], target=test[1])
    res.data["parity"] = {
        "trace": res.rel(entry.trace),
        "groups": list(groups),
        "ok": report.ok,
        "rows": [
            {
                "quantity": r.quantity,
                "n": r.n,
                "max_abs": r.max_abs,
                "max_rel": r.max_rel,
                "tolerance": r.tolerance_text,
                "status": r.status,
            }
            for r in report.rows
        ],
    }


# ----------------------------------------------------------------------------------------
# the whole archive
# ----------------------------------------------------------------------------------------
def check_out_dir(root, out):
    """``out`` must not lie inside ``root``: nothing is written into the archive.  Nor is
    anything written through a link inside ``out`` (``OUT/report.md -> ROOT/exp/test.fr``,
    ``OUT/cache -> ROOT/exp``): every name archive writes there, and everything already
    under ``OUT/cache`` and ``OUT/plots``, must be a real file or folder (checked before any
    work; the writes check again, :func:`groundhog_port.outputs.file_in`)."""
    from .archive_report import REPORT_FILES

    r, o = Path(root).resolve(), Path(out).resolve()
    if o == r or r in o.parents:
        raise LegacyInputError(
            out,
            f"the output folder lies inside the archive {root}; give "
            "one outside it (nothing is written into the archive)",
        )
    if not Path(out).is_dir():
        return
    for name in REPORT_FILES:
        check_partial(file_in(out, name + ".partial"))  # a link there would be written through
        file_in(out, name)
    for name in ("cache", "plots"):
        if not os.path.lexists(Path(out) / name):
            continue
        folder_in(out, name, create=False)
        for folder, dirs, files in os.walk(Path(out) / name):  # links not followed
            rel = Path(folder).relative_to(out).parts
            for d in dirs:
                folder_in(out, *rel, d, create=False)
            for f in files:
                file_in(out, *rel, f)


def write_plan(root, out, opts: Options) -> Path:
    """``archive ROOT --plan-only``: the discovered plan of every experiment in
    ``OUT/plan.toml`` (:mod:`groundhog_port.tasks.plan`); nothing is re-done."""
    from ..outputs import atomic_write_text
    from . import plan as planmod

    root = Path(root)
    check_out_dir(root, out)
    Path(out).mkdir(parents=True, exist_ok=True)
    with unpacked(root, opts.data_dirs) as packed:
        found = sorted(discover(root, opts.data_dirs) + packed, key=lambda e: e.id)
        entries = [plan_experiment(root, e, opts) for e in found]
    path = file_in(out, "plan.toml")
    atomic_write_text(path, planmod.dumps({"root": str(root), "experiment": entries}))
    return path


def check_plan(root, plan: dict, path) -> None:
    """Every experiment of a ``--plan`` is one of ROOT's (else one line naming the closest)."""
    import difflib

    ids = [e.id for e in discover(root)]
    packs_in = [rel_path(root, p) + "/" for p in _pack_files(root)]  # checked once unpacked
    for pid in plan:
        if pid not in ids and not any(pid.startswith(p) for p in packs_in):
            close = difflib.get_close_matches(pid, ids, n=1)
            raise LegacyInputError(
                path,
                f"experiment {pid!r} is not under {root}"
                + (f" (did you mean {close[0]!r}?)" if close else ""),
            )


def run(root, out, opts: Options, world=None, progress=None, fresh=False, packed=()):
    """Re-do every experiment under ``root`` and the ``packed`` ones (:func:`unpacked`; this
    rank's share under torchrun), caching each result in ``out/cache``; returns
    ``(entries, results)`` on rank 0 (results in entry order), ``(entries, None)`` elsewhere."""
    root = Path(root)
    if not root.is_dir():
        raise LegacyInputError(root, "archive folder not found")
    check_out_dir(root, out)
    Path(out).mkdir(parents=True, exist_ok=True)
    forget_digests()
    entries = sorted(discover(root, opts.data_dirs) + list(packed), key=lambda e: e.id)
    rank, size = (world.rank, world.size) if world else (0, 1)
    mine = {}
    for i, entry in enumerate(entries):
        if i % size != rank:
            continue
        extra = key_inputs(entry, opts)
        rel = lambda p, root=root: rel_path(root, p)  # noqa: E731
        result = None if fresh else cached(out, entry, opts, rel, extra)
        if result is None:
            logger.info("%s: re-doing", entry.id)
            result = store(out, entry, opts, redo(root, entry, opts, out), extra)
        else:
            logger.info("%s: done before (cached in %s/cache)", entry.id, out)
        mine[i] = result
        if progress is not None:
            progress.update(1)
    if world is None:
        return entries, [mine[i] for i in range(len(entries))]
    import torch.distributed as dist

    gathered: list[Any] | None = [None] * size if world.is_root else None
    dist.gather_object(mine, gathered, dst=0)
    if not world.is_root or gathered is None:
        return entries, None
    merged: dict[int, Any] = {}
    for part in gathered:
        merged.update(part)
    return entries, [merged[i] for i in range(len(entries))]
