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
from ..errors import LegacyInputError, shown
from ..outputs import check_partial, file_in, folder_in
from ..untrusted import read_text, special_kind
from . import packs
from .archive_cache import cached, forget_digests, safe_name, store

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
    parity_groups: tuple | None = None  # None: every group of the trace
    batch_size: int = 1
    tokenize: str = "13a"
    max_diffs: int = 3
    device: str = "cpu"
    source: Path | None = None  # --source: the test set of every experiment
    reference: Path | None = None  # --ref
    test_sets: dict = field(default_factory=dict)  # --test-sets FILE: key -> (source, ref)

    def key(self) -> dict:
        return {
            "data_dirs": [str(d) for d in self.data_dirs],
            "source": str(self.source) if self.source else None,
            "reference": str(self.reference) if self.reference else None,
            "test_sets": {k: [str(p) if p else None for p in v] for k, v in self.test_sets.items()},
            "max_sentences": self.max_sentences,
            "plots": self.plots,
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
    return (
        (name.startswith("trans") and name.endswith(".txt"))
        or (name.startswith("scores") and name.endswith(".txt"))
        or name.endswith("_error.txt")
    )


def _model_for(state):
    prefix = state.name[: -len("state.pkl")]
    same = state.parent / f"{prefix}model.npz"
    if same.is_file():
        return same
    found = sorted(state.parent.glob("*model.npz"))
    return found[0] if len(found) == 1 else None


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
            model = _model_for(state)
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
                )
            )
    return sorted(entries, key=lambda e: e.id)


def places(root, entry: Entry, opts: Options):
    """Where the test sets of ``entry`` are looked for, in order: its folder (not below: the
    folders below are other experiments), each ``--data-dir``, the whole archive, and the
    folder's ``../data`` where it lies outside."""
    out = [lookup.Place(entry.folder, "in the experiment folder", recursive=False)]
    given = [d for d in opts.data_dirs if not isinstance(d, lookup.ImplicitDir)]
    for i, d in enumerate(given):
        label = "--data-dir" + (f" {i + 1} of {len(given)}" if len(given) > 1 else "")
        out.append(lookup.Place(Path(d), label))
    out.append(lookup.Place(Path(root), "under the archive ROOT"))
    out.append(lookup.Place(entry.folder.parent / "data", "in the experiment folder's ../data"))
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
    inputs = []
    if entry.root is not None:
        inputs += [p for p, _ in lookup.text_files(places(entry.root, entry, opts), entry.folder)]
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
    try:
        _redo(res, root, entry, opts, out)
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


def _redo(res, root, entry, opts, out):
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
    if entry.model is None:
        res.not_done(
            "everything",
            "no *model.npz beside the state (or several, none with the state's prefix)",
        )
        return
    from ..legacy.loading import open_experiment

    dirs = lookup.case_data_dirs(entry.folder, opts.data_dirs)
    exp = _attempt(
        res,
        "opening the experiment",
        open_experiment,
        entry.state,
        entry.model,
        "",
        dirs,
        opts.device,
    )
    if exp is None:
        return
    exp.data_dirs = tuple(dirs) + lookup.unique_file_dirs(
        exp.state, VOCAB_KEYS, root, "under the archive ROOT"
    )
    if not _vocabularies(res, exp, entry):
        return
    tests = {}
    for name in TEST_SET_NAMES:
        src, ref, how = given_test_set(root, entry, opts, name)
        if src is not None:
            if ref is None:
                ref, why = lookup.reference_for(src, *lookup.languages(exp.state))
                how += f"; reference: {why}"
            res.data["files"][name] = {
                "source": res.rel(src),
                "reference": res.rel(ref) if ref else None,
                "how": how,
            }
        tests[name] = (src, ref)
    trans = [p for p in entry.outputs if p.name.startswith("trans")]
    _attempt(res, "reproduction", _reproduction, res, root, exp, entry, trans, tests, opts)
    for name, (src, ref) in list(tests.items()):
        if src is None and name not in res.data["files"]:
            # no translation file said which test set: by its standard name, unconfirmed
            src_name = TEST_SET_NAMES[name][0]
            found = lookup.find_named(src_name, entry.folder, dirs)
            if not_read(found, allowed_folders(root, opts.data_dirs)) is not None:
                found = None
            if found is None:  # a score file's test set, found by content
                choice = _test_set_of_scores(res, root, exp, entry, name, opts)
                if choice is not None:
                    tests[name] = (choice.source, choice.reference)
                    res.data["files"][name] = {
                        "source": res.rel(choice.source),
                        "reference": res.rel(choice.reference) if choice.reference else None,
                        "how": _relative_why(res, choice.why),
                    }
                    logger.info("%s: %s", entry.id, choice.why)
            elif found is not None:
                ref, why = lookup.reference_for(found, *lookup.languages(exp.state))
                tests[name] = (found, ref)
                res.data["files"][name] = {
                    "source": res.rel(found),
                    "reference": res.rel(ref) if ref else None,
                    "how": f"{src_name} by its name (no translation file to confirm it)",
                }
    for p in entry.outputs:
        if p.name.startswith("scores"):
            _attempt(res, p.name, _scores, res, exp, entry, p, tests, opts)
    _crash_logs(res, entry)
    if opts.plots > 0:
        _attempt(res, "attention plots", _plots, res, exp, entry, tests["test"], opts, out)
    if entry.trace is not None:
        _attempt(res, "parity", _parity, res, exp, entry, tests["test"], opts)
    else:
        res.data["parity"] = None


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
        f"{', '.join(dict.fromkeys(looked))}, and for a single file of each name under the "
        "archive ROOT); pass --data-dir DIR, the folder holding them",
    )
    return False


def _reproduction(res, root, exp, entry, trans, tests, opts):
    from .reproduce import ArchivedFile, SourceFinder, parse_trans_name, reproduce

    dirs = lookup.case_data_dirs(entry.folder, opts.data_dirs)
    finder = SourceFinder(
        exp,
        places(root, entry, opts),
        entry.folder,
        by_name={n: lookup.find_named(TEST_SET_NAMES[n][0], entry.folder, dirs) for n in tests},
        fix=lambda name: (
            "; pass "
            + ("--source FILE --ref FILE (every experiment), " if name == "test" else "")
            + f"a line '{_folder_key(root, entry)}{'' if name == 'test' else ':' + name} "
            "SOURCE REFERENCE' in --test-sets FILE, or --data-dir DIR (the folder holding it)"
        ),
    )
    files, given = [], dict(tests)
    for p in trans:
        parsed = parse_trans_name(p.name)
        if parsed is None:
            res.not_done(
                p.name,
                "the file name does not say the sample.py settings (expected "
                "trans_[holdout_]beamN[_normalize][_ignore_unk][_runK].txt)",
            )
            continue
        settings, name, _ = parsed
        stem = p.name[len("trans_") : -len(".txt")]
        allowed = allowed_folders(root, opts.data_dirs)
        stdout, error = (entry.folder / f"sample_{stem}_{k}.txt" for k in ("stdout", "error"))
        stdout = stdout if stdout.is_file() and not_read(stdout, allowed) is None else None
        error = error if error.is_file() and not_read(error, allowed) is None else None
        src, ref = given[name]
        if src is None:  # each file's own test set: found by content, confirmed per file
            try:
                choice = finder.find(p, settings, name, error)
            except LegacyInputError as err:
                res.not_done(p.name, f"its test set: {err.problem}", cause="test set")
                continue
            src, ref = choice.source, choice.reference
            why = not_read(src, allowed) or not_read(ref, allowed)
            if why is not None:
                res.not_done(p.name, f"its test set {res.rel(src)} / {ref}: {why}")
                continue
            if tests[name][0] is None:  # the scores, plots and parity take the first one
                res.data["files"][name] = {
                    "source": res.rel(src),
                    "reference": res.rel(ref) if ref else None,
                    "how": _relative_why(res, choice.why),
                }
                tests[name] = (src, ref)
        files.append(ArchivedFile(p, settings, src, ref, stdout, error))
    finder.announce(f"{entry.id}: ")
    if not files:
        return
    report = reproduce(
        exp,
        files,
        batch_size=opts.batch_size,
        max_diffs=opts.max_diffs,
        tokenize=opts.tokenize,
        max_lines=opts.max_sentences,
    )
    from ..legacy.data import read_text_lines

    for f, r in zip(files, report["files"]):
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
        res.data["reproduction"].append(row)


def _relative_why(res, why):
    """A choice's reason with the archive's paths relative to ROOT (the report's paths)."""
    root = os.path.abspath(res.root) + os.sep
    return why.replace(root, "")


def _scores(res, exp, entry, path, tests, opts):
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
                + res.missing.get(name, f"no {TEST_SET_NAMES[name][0]}")
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
    if src is None or ref is None:
        res.not_done("attention plots", "no test set with references")
        return
    if not exp.cfg.search:  # nothing left undone: there is nothing to plot
        res.data["notes"].append("no attention plots: an RNNencdec model has no attention")
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
