"""One lookup of the files an archived experiment needs, shared by every command.

A GroundHog state stores the absolute paths of the machine it was trained on
(``/data/lisatmp3/.../vocab.en.pkl``); archives move.  Every command (``translate``,
``score``, ``inspect``, ``train``, ``reproduce``, ``parity``, ``archive`` and the pytest
plugin's ``--legacy-data-dir``) finds a file the same way, first hit wins:

1. the path as stored in the state (a key given in the changes is used as given and
   must exist, like the original);
2. a file of the same name next to the state file;
3. the same name in each data directory, in the order given (``--data-dir DIR``,
   repeatable).

Test sets of a case folder (``test.en``/``test.fr``, ``holdout.*``) are looked for by
name in the folder, then in the same data directories.  Commands taking ``--case DIR`` add
the folder's sibling ``../data`` (the shared recordings' corpus folder) after the given
data directories.  Renamed test sets kept anywhere are found by content
(:func:`find_source`, docs/archives.md): ``archive``, ``reproduce --case``, ``parity --case``
and the pytest plugin share it.

Each choice is logged once per run (:class:`Memo`) on logger ``groundhog_port.paths``: one INFO line
per (stored folder, folder used) -- three vocabularies found in one ``--data-dir`` give
one line, not three -- and the single files at DEBUG.  When nothing is found,
:class:`~groundhog_port.errors.LegacyInputError` lists every place looked at and says to
pass ``--data-dir``.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import re
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import LegacyInputError, shown
from .file_names import VOCABULARY_FILE_KEYS, never_a_test_set
from .untrusted import (
    COMPRESSED_SUFFIXES,
    compression_of,
    iter_sentences,
    markup_kind,
    strip_compression,
)

logger = logging.getLogger("groundhog_port.paths")


@dataclass
class Memo:
    """What one command run has learnt about the files, so it is worked out and said once:
    the choices announced at INFO, the folders walked, the folders said too deep, the line
    counts of texts (per path, size and modification time), other warnings said once
    (:func:`say_once`).  A run opens one with :func:`remembering` (``main()`` per command,
    ``archive`` per tree); outside any, nothing is remembered and everything is said."""

    announced: set = field(default_factory=set)  # (stored folder, folder used, why)
    walks: dict = field(default_factory=dict)  # folder (and how) -> its candidate files
    too_deep: set = field(default_factory=set)
    line_counts: dict = field(default_factory=dict)  # (path, size, mtime_ns) -> count
    said: set = field(default_factory=set)


_memo: contextvars.ContextVar[Memo | None] = contextvars.ContextVar("lookup_memo", default=None)


@contextlib.contextmanager
def remembering(memo: Memo | None = None) -> Iterator[Memo]:
    """Within the block, lookups remember what they found in ``memo`` (a new one if
    ``None``); yields it."""
    memo = Memo() if memo is None else memo
    token = _memo.set(memo)
    try:
        yield memo
    finally:
        _memo.reset(token)


_fence: contextvars.ContextVar[str | None] = contextvars.ContextVar("lookup_fence", default=None)


@contextlib.contextmanager
def fenced(top: str | os.PathLike[str]) -> Iterator[None]:
    """Within the block, the folders searched by default -- a case's ``../data``, the
    ``data/`` folders and vocabularies up from it -- stay inside folder ``top``: a packed
    experiment, unpacked into a temporary folder, sees its own files and the folders given
    (``--data-dir``), never the rest of ``$TMPDIR``."""
    token = _fence.set(os.path.abspath(top))
    try:
        yield
    finally:
        _fence.reset(token)


def beyond_fence(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` lies outside the folder :func:`fenced` set (False when none is)."""
    top = _fence.get()
    if top is None:
        return False
    full = os.path.abspath(path)
    return not (full == top or full.startswith(top.rstrip(os.sep) + os.sep))


def _current() -> Memo:
    """The run's memo, or a fresh one that is dropped after the call (no run open)."""
    memo = _memo.get()
    return Memo() if memo is None else memo


def say_once(key: Hashable) -> bool:
    """True the first time ``key`` is seen in this run (always outside one)."""
    said = _current().said
    if key in said:
        return False
    said.add(key)
    return True


#: deepest folder a walk enters below the folder it starts from (archives nest a few levels;
#: Python 3.11's os.walk recursed once per level and raised RecursionError near 1,000)
MAX_WALK_DEPTH = 64


def walk(
    top: str | os.PathLike[str],
    max_depth: int = MAX_WALK_DEPTH,
    not_entered: list[str] | None = None,
) -> Iterator[tuple[str, list[str], list[str]]]:
    """``(folder, dirs, names)`` of every folder under ``top`` as ``os.walk(top)`` gives
    them top-down (``dirs`` may be pruned in place; links to folders are listed in ``dirs``
    and never entered), each list sorted -- but iteratively, so a tree of any depth is walked
    without recursion, and not below ``max_depth`` levels: a folder deeper than that is
    logged once (WARNING) and not entered (appended to list ``not_entered`` when given,
    for a caller that accounts for every file).  Names are ``str`` as ``os.walk`` gives them
    (bytes that are not UTF-8 as surrogates: show them with
    :func:`groundhog_port.errors.shown`)."""
    stack = [(os.fspath(top), 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                found = list(it)
        except OSError:  # unreadable or vanished: holds nothing (os.walk's own way)
            continue
        dirs: list[str] = []
        names: list[str] = []
        links: set[str] = set()
        for e in found:
            try:
                is_dir = e.is_dir()
                if is_dir and e.is_symlink():
                    links.add(e.name)
            except OSError:
                is_dir = False
            (dirs if is_dir else names).append(e.name)
        dirs.sort()
        names.sort()
        yield folder, dirs, names
        below = [d for d in dirs if d not in links]
        if below and depth >= max_depth:
            if not_entered is not None:
                not_entered += [os.path.join(folder, d) for d in below]
            if say_once(("too deep", folder)):
                logger.warning(
                    "%s: more than %d folders below %s: its %d folder(s) are not searched",
                    shown(folder), max_depth, shown(os.fspath(top)), len(below),
                )  # fmt: skip
            continue
        stack.extend((os.path.join(folder, d), depth + 1) for d in reversed(below))


def snapshots_of(state: str | os.PathLike[str]) -> list[Path]:
    """GroundHog's snapshots of ``state``: ``prefix + 'model%d.npz' % save_iter`` beside it
    (``MainLoop.save`` with ``overwrite=False``, groundhog/mainLoop.py:233-234; the port's
    ``train`` names them so too: ``search_model1.npz``), oldest first."""
    prefix = Path(state).name[: -len("state.pkl")]
    pattern = re.compile(re.escape(prefix) + r"model([0-9]+)\.npz$")
    try:
        names = os.listdir(Path(state).parent)
    except OSError:
        return []
    found = [(int(m.group(1)), n) for n in names if (m := pattern.match(n))]
    return [Path(state).parent / n for _, n in sorted(found)]


class ImplicitDir(type(Path())):  # type: ignore[misc]  # the concrete PosixPath/WindowsPath
    """A folder searched without being given with ``--data-dir`` (the ``--case`` folder, its
    ``../data``): messages name it by ``label``, and ``--data-dir i of n`` counts only the
    folders the user gave."""

    label = "a folder searched by default"


def implicit_dir(path: str | os.PathLike[str], label: str) -> ImplicitDir:
    d = ImplicitDir(path)
    d.label = label
    return d


def data_dirs(
    value: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None, check: bool = True
) -> tuple[Path, ...]:
    """``--data-dir`` values as a tuple of folders: ``None``, one path, or a list of paths
    (``action="append"``).  ``check``: each must be a directory (a typo fails before any
    loading)."""
    if value is None:
        return ()
    if isinstance(value, (str, os.PathLike)):  # one path (a PathLike other than Path too)
        value = [value]
    out = []
    for d in value:
        p = d if isinstance(d, Path) else Path(d)
        if check and not p.is_dir():
            raise LegacyInputError(
                p, "data directory does not exist or is not a directory (--data-dir)"
            )
        if p not in out:
            out.append(p)
    return tuple(out)


def case_data_dirs(
    case_dir: str | os.PathLike[str],
    given: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
) -> tuple[Path, ...]:
    """The data directories of a ``--case DIR`` command: the given ones, then ``DIR`` itself
    (for a ``--state`` kept elsewhere), then ``DIR/../data`` when it exists (where the shared
    recordings keep their corpora and test sets)."""
    dirs = list(data_dirs(given))
    for d, label in (
        (Path(case_dir), "in the experiment folder"),
        (Path(case_dir).parent / "data", "in the experiment folder's ../data"),
    ):
        if d.is_dir() and d not in dirs and not beyond_fence(d):
            dirs.append(implicit_dir(d, label))
    return tuple(dirs)


def is_file(path: str | os.PathLike[str]) -> bool:
    """``path.is_file()``, False also when the name cannot be looked up at all (too long,
    a NUL byte...): such a state value names no usable file."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


def _announce(what, stored, chosen, where):
    key = (str(Path(stored).parent), str(chosen.parent), where)
    announced = _current().announced
    if key in announced:
        logger.debug("%s: using %s (%s)", what, chosen, where)
        return
    announced.add(key)
    if str(stored) == str(chosen):
        logger.info("%s: using %s (%s)", what, chosen, where)
    else:
        logger.info(
            "files of %s (%s first) are taken from %s (%s)",
            Path(stored).parent,
            what,
            chosen.parent,
            where,
        )
        logger.debug("%s: %s -> %s", what, stored, chosen)


def candidates(
    name: str, state_path: str | os.PathLike[str] | None = None, dirs: Sequence[Path] = ()
) -> list[tuple[Path, str]]:
    """``[(path, where)]`` for a file called ``name``: next to the state, then each data
    directory (step 2 and 3 of the module docstring)."""
    out = []
    if state_path is not None:
        out.append((Path(state_path).parent / name, "next to the state file"))
    given = [d for d in dirs if not isinstance(d, ImplicitDir)]
    n = len(given)
    for d in dirs:
        path = Path(d) / name
        if isinstance(d, ImplicitDir):
            where = d.label
        else:
            where = "--data-dir" + (f" {given.index(d) + 1} of {n}" if n > 1 else "")
        if all(path != p for p, _ in out):
            out.append((path, where))
    return out


def hint() -> str:
    """How to make a missing file found."""
    return "; pass --data-dir DIR (the folder holding it; repeatable)"


def find_stored(
    stored: str | os.PathLike[str],
    what: str,
    state_path: str | os.PathLike[str] | None,
    dirs: Sequence[Path] = (),
    explicit: bool = False,
    where_from: str = "the changes",
    change: str | None = None,
) -> Path:
    """The file for ``stored`` (a path held by the state): the path itself, else its name
    next to the state, else in each of ``dirs``.  ``explicit``: given by the user (in the
    changes), used as given and never replaced.  ``change``: the change that gives the path
    (default ``what='FILE'``; ``source=['FILE']`` for a one-element list key)."""
    stored = Path(stored)
    if explicit:
        if is_file(stored):
            logger.info("%s: using %s (given in %s)", what, stored, where_from)
            return stored
        raise LegacyInputError(stored, f"file for {what!r} given in {where_from} does not exist")
    if is_file(stored) and _may_read(stored, dirs):
        _announce(what, stored, stored, "the path stored in the state")
        return stored
    places = candidates(stored.name, state_path, dirs)
    for candidate, where in places:
        if is_file(candidate):
            _announce(what, stored, candidate, where)
            return candidate
    looked = [str(stored)] + [str(c) for c, _ in places]
    default_change = f"{what}='FILE'"
    raise LegacyInputError(
        state_path,
        f"cannot find the file for {what!r}: looked at "
        f"{', '.join(looked)}{hint()} or give the path in "
        f"the changes ({change or default_change})",
    )


def _may_read(path, dirs) -> bool:
    """A stored path is read where no fence is set (:func:`fenced`), inside it, or inside a
    folder the user gave (``--data-dir``)."""
    if not beyond_fence(path):
        return True
    full = os.path.abspath(path)
    return any(
        full.startswith(os.path.abspath(d).rstrip(os.sep) + os.sep)
        for d in dirs
        if not isinstance(d, ImplicitDir)
    )


def find_named(name: str, folder: str | os.PathLike[str], dirs: Sequence[Path] = ()) -> Path | None:
    """A test file called ``name`` of an experiment folder: in ``folder``, else in each of
    ``dirs``; ``None`` when absent (the caller says what it then skips)."""
    for candidate, where in [(Path(folder) / name, "in the experiment folder")] + candidates(
        name, Path(folder) / name, dirs
    )[1:]:
        if is_file(candidate):
            if where != "in the experiment folder":
                _announce(name, Path(folder) / name, candidate, where)
            return candidate
    return None


def places(name: str, folder: str | os.PathLike[str], dirs: Sequence[Path] = ()) -> str:
    """Where :func:`find_named` looks, for messages."""
    return ", ".join(str(c) for c, _ in candidates(name, Path(folder) / name, dirs))


# ----------------------------------------------------------------------------------------
# test sets found by content (archive, reproduce --case, parity --case, the pytest plugin)
# ----------------------------------------------------------------------------------------
#: files that are never a test set: what sample.py / score.py / train.py / the recorder wrote
#: (:func:`groundhog_port.file_names.never_a_test_set`), and binary formats (a text file is
#: also checked for NUL bytes)
_BINARY_SUFFIXES = frozenset(
    ".pkl .npz .npy .h5 .hdf5 .gz .bz2 .xz .zip .tar .png .jpg .pdf .pyc .so .json .html .md "
    ".partial".split()
)
#: how many first lines confirm a candidate (each one translated with the archived settings)
CONFIRM_LINES = 3
#: candidates confirmed at most per lookup (each costs CONFIRM_LINES translations)
MAX_CONFIRMATIONS = 40
#: not name parts that say a language
_NOT_LANGUAGES = frozenset("h5 pkl npz txt gz tok bpe raw sgm xml src trg ref out in".split())


@dataclass
class Place:
    """A folder test sets are looked for in: ``label`` for messages, ``recursive`` (any
    depth) or only the files directly inside."""

    folder: Path
    label: str
    recursive: bool = True


@dataclass(frozen=True)
class TestSetChoice:
    """The source of an archived output, its reference, and why they were taken."""

    source: Path
    reference: Path | None
    why: str
    confirmed: bool = True


def _is_candidate_name(name):
    """A text file's name that may hold a test set: not an output of the original, not a
    binary format's; ``test.en.gz`` is judged as ``test.en`` (compressed text is read
    decompressed, :func:`groundhog_port.untrusted.iter_lines`)."""
    plain = strip_compression(name)
    return (
        not never_a_test_set(plain)
        and Path(plain).suffix.lower() not in _BINARY_SUFFIXES
        and (plain == name or Path(plain).suffix.lower() not in COMPRESSED_SUFFIXES)
    )


def _sentence_count(path) -> int | None:
    """:func:`line_count` of a gzip, bzip2 or xz file (decompressed) or of a WMT SGML / XML
    test set (its segments), read by :func:`groundhog_port.untrusted.iter_sentences` under
    the bounded reader's limits (a file that passes them, or a malformed SGML file, cannot
    be read as a test set either)."""
    n = 0
    try:
        for _, raw in iter_sentences(path, "a text file", whole=False):
            if b"\0" in raw:
                return None
            n += 1
    except LegacyInputError as err:
        logger.debug("%s: not a candidate test set: %s", path, err)
        return None
    return n


def line_count(path: str | os.PathLike[str]) -> int | None:
    """The number of lines of a text file as :func:`~groundhog_port.legacy.data.read_text_lines`
    counts them (a last line without newline counts; a WMT SGML / XML test set: its
    segments); ``None`` when it is not a text file (a NUL byte) or cannot be read.  Cached
    per (path, size, modification time)."""
    try:
        st = Path(path).stat()
    except OSError:
        return None
    key = (str(path), st.st_size, st.st_mtime_ns)
    counts = _current().line_counts
    if key not in counts:
        counts[key] = _line_count(path)
    return counts[key]


def _line_count(path) -> int | None:
    n = 0
    last = b"\n"
    try:
        with open(path, "rb") as fh:
            head = fh.peek(8)[:8]
            if compression_of(head) is not None or _may_be_markup(fh):
                return _sentence_count(path)
            while chunk := fh.read(1 << 20):
                if b"\0" in chunk:
                    return None
                n += chunk.count(b"\n")
                last = chunk[-1:]
    except OSError:
        return None
    return n + 1 if last != b"\n" else n


def _may_be_markup(fh) -> bool:
    """Whether the file ``fh`` (opened, at its start) may be a WMT SGML / XML test set: its
    first non-blank lines (in its first 64 KiB) are told by
    :func:`groundhog_port.untrusted.markup_kind`; read whole by :func:`_sentence_count`
    then.  Leaves ``fh`` at its start."""
    head = fh.read(1 << 16)
    fh.seek(0)
    lines = [ln for ln in head.splitlines() if ln.strip()][:2]
    if not lines:
        return False
    return markup_kind(*lines) is not None


def _distance(a, b):
    """Folder hops from folder ``a`` to folder ``b`` (up to their common ancestor, then down)."""
    a, b = Path(os.path.abspath(a)).parts, Path(os.path.abspath(b)).parts
    common = 0
    for x, y in zip(a, b):
        if x != y:
            break
        common += 1
    return (len(a) - common) + (len(b) - common)


def _walk(folder, recursive):
    key = (os.path.abspath(folder), recursive)
    walks = _current().walks
    if key not in walks:
        found = []
        if recursive:
            for top, dirs, names in walk(folder):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found += [Path(top) / n for n in names if _is_candidate_name(n)]
        else:
            try:  # an unreadable folder holds no candidate (os.walk skips them the same way)
                found = [p for p in folder.iterdir() if _is_candidate_name(p.name)]
            except OSError:
                found = []
        # regular files only (os.stat: a FIFO or device is never a candidate), and not
        # through a link leading outside the folder walked (issue 40: not read unless asked)
        inside = os.path.realpath(folder) + os.sep
        walks[key] = [
            p
            for p in found
            if p.is_file() and (not p.is_symlink() or os.path.realpath(p).startswith(inside))
        ]
    return walks[key]


def files_named(
    root: str | os.PathLike[str], name: str, max_entries: int | None = None
) -> list[Path] | None:
    """Every file called ``name`` under ``root`` (any depth), sorted (walked once per run, :class:`Memo`);
    ``None`` when the tree holds more than ``max_entries`` names (not walked to the end)."""
    key = (os.path.abspath(root), "all", max_entries)
    walks = _current().walks
    if key not in walks:
        found: dict[str, list[Path]] = {}
        seen, complete = 0, True
        for top, dirs, names in walk(root):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            seen += len(names) + len(dirs)
            if max_entries is not None and seen > max_entries:
                complete = False
                break
            for n in names:
                found.setdefault(n, []).append(Path(top) / n)
        walks[key] = found if complete else None
    if walks[key] is None:
        return None
    return sorted(p for p in walks[key].get(name, []) if p.is_file())


#: files of one name compared byte for byte at most (more: never taken)
MAX_SAME_NAME = 8
#: the state keys naming the four vocabularies (sample.py:237-247, score.py:129-130)
#: names walked at most around a ``--case`` folder (a home folder is not searched to its end)
NEAR_CASE_ENTRIES = 50_000


def near_case_dirs(
    state: Mapping[str, object], case_dir: str | os.PathLike[str], levels: int = 2
) -> tuple[ImplicitDir, ...]:
    """:func:`unique_file_dirs` of the vocabularies under the folder ``levels`` up from a
    ``--case`` folder (``wmt14/vocab/`` for ``wmt14/2015-search/run1``), the walk bounded by
    :data:`NEAR_CASE_ENTRIES`."""
    up = Path(os.path.abspath(case_dir))
    for _ in range(levels):
        if beyond_fence(up.parent):  # a packed case: no higher than its unpacked folder
            break
        up = up.parent
    label = "under " + "/".join([".."] * levels)
    return unique_file_dirs(state, VOCABULARY_FILE_KEYS, up, label, NEAR_CASE_ENTRIES)


def unique_file_dirs(
    state: Mapping[str, object],
    keys: Iterable[str],
    root: str | os.PathLike[str],
    label: str,
    max_entries: int | None = None,
) -> tuple[ImplicitDir, ...]:
    """Folders under ``root`` holding the files ``state[key]`` names (vocabularies), where the
    tree holds exactly one file of that name or all such files are byte-identical: never a
    guess among different files (those need ``--data-dir``).  Searched after every other
    place (:func:`find_stored`)."""
    out = []
    for key in keys:
        value = state.get(key)
        if not isinstance(value, str) or not value:
            continue
        name = Path(value).name
        found = files_named(root, name, max_entries) or []
        if 0 < len(found) <= MAX_SAME_NAME and _same_bytes(found):
            folder = found[0].parent
            if folder not in out:
                out.append(implicit_dir(folder, f"{label} (the only {name} there)"))
    return tuple(out)


def folder_distance(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> int:
    """Folder hops from folder ``a`` to folder ``b`` (:func:`_distance`)."""
    return _distance(a, b)


def same_bytes(paths: Sequence[Path]) -> bool:
    """Whether the files hold the same bytes (:func:`_same_bytes`)."""
    return _same_bytes(paths)


def _same_bytes(paths) -> bool:
    """Whether the files hold the same bytes: sizes first, then sha256 in 1 MiB chunks (a
    2 GB sparse file of a vocabulary's name is never held whole, issue 40)."""
    import hashlib

    try:
        if len({p.stat().st_size for p in paths}) != 1:
            return False
        digests = set()
        for p in paths:
            h = hashlib.sha256()
            with open(p, "rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
            digests.add(h.hexdigest())
    except OSError:
        return False
    return len(digests) == 1


def _other_experiment(folder, near) -> bool:
    """Whether ``folder`` is another experiment's (it holds a ``*state.pkl``) than the one in
    ``near``: at the same distance a shared folder (``data/``) is nearer to the experiment than
    a sibling experiment's own files (issue 43)."""
    if os.path.abspath(folder) == os.path.abspath(near):
        return False
    try:
        return any(n.endswith("state.pkl") for n in os.listdir(folder))
    except OSError:
        return False


def text_files(places: Sequence[Place], near: str | os.PathLike[str]) -> list[tuple[Path, str]]:
    """``[(path, label)]``: the candidate text files of ``places`` in order (a place's files by
    their distance from folder ``near``, a folder of another experiment after any other at
    the same distance, then path); each file once (its first place).  Worked out once per
    run for each (places, folder) (:class:`Memo`): every archived output of
    an experiment asks the same."""
    key = ("text_files", tuple((str(p.folder), p.label, p.recursive) for p in places), str(near))
    walks = _current().walks
    if key not in walks:
        walks[key] = _text_files(places, near)
    return list(walks[key])


def _text_files(places, near):
    out, seen = [], set()
    for place in places:
        folder = Path(place.folder)
        if not folder.is_dir():
            continue
        found = list(_walk(folder, place.recursive))
        found.sort(
            key=lambda p: (_distance(near, p.parent), _other_experiment(p.parent, near), str(p))
        )
        for p in found:
            key = os.path.abspath(p)
            if key not in seen:
                seen.add(key)
                out.append((p, place.label))
    return out


def case_places(
    directory: str | os.PathLike[str], data_dirs: Sequence[Path] = (), levels: int = 2
) -> list[Place]:
    """Where ``reproduce --case DIR`` looks for test sets: ``DIR`` (any depth), each
    ``--data-dir`` (any depth), then the ``data/`` folder of each of the ``levels`` folders up
    (``ROOT/data/test.en`` for ``ROOT/2015-search/run1``).  Nothing else above ``DIR`` is
    read: the folders up hold whatever else their owner keeps (issue 43: scratch files three
    folders up were read as candidate test sets)."""
    directory = Path(directory)
    places = [Place(directory, "in the experiment folder")]
    given = [d for d in data_dirs if not isinstance(d, ImplicitDir)]
    for i, d in enumerate(given):
        label = "--data-dir" + (f" {i + 1} of {len(given)}" if len(given) > 1 else "")
        places.append(Place(Path(d), label))
    up = Path(os.path.abspath(directory))
    for level in range(1, levels + 1):
        if up.parent == up or beyond_fence(up.parent):
            break
        up = up.parent
        rel = "/".join([".."] * level)
        places.append(Place(up / "data", f"in {rel}/data"))
    return places


def languages(state: Mapping[str, object]) -> tuple[str, str]:
    """``(source, target)`` language suffixes the state's files name (``vocab.en.pkl``,
    ``binarized_text.fr.h5``: ``en``, ``fr``); ``("en", "fr")`` where they say none."""

    def lang(keys, default):
        for key in keys:
            value = state.get(key)
            if isinstance(value, (list, tuple)) and value:
                value = value[0]
            if not isinstance(value, str):
                continue
            parts = Path(value).name.split(".")[1:]
            for part in reversed(parts):
                if part.isalpha() and 2 <= len(part) <= 3 and part.lower() not in _NOT_LANGUAGES:
                    return part
        return default

    return (
        lang(("source", "word_indx", "indx_word"), "en"),
        lang(("target", "word_indx_trgt", "indx_word_target"), "fr"),
    )


#: WMT's SGML test set names: ``newstest2012-src.en.sgm`` (its reference ``-ref.fr.sgm``)
_WMT_SGML_SOURCE = re.compile(r"^(.+)-src\.([A-Za-z]{2,3})(\.sgm|\.xml)$")


def reference_for(
    source: str | os.PathLike[str], src_lang: str, trg_lang: str
) -> tuple[Path | None, str]:
    """``(reference, why)`` of a source file: the file of the same stem in the target language
    (``newstest2012.en`` -> ``newstest2012.fr``; a compressed source's reference may be
    compressed or not: ``newstest2012.en.gz`` -> ``newstest2012.fr.gz`` or ``.fr``; WMT's
    SGML names: ``newstest2012-src.en.sgm`` -> ``newstest2012-ref.fr.sgm``, and
    ``newstest2014-fren-src.en.sgm`` -> ``newstest2014-fren-ref.fr.sgm``); ``(None, why
    not)`` when there is none with as many lines (segments) as the source.  The name only
    pairs files: a reference of another count is never taken."""
    source = Path(source)
    plain = strip_compression(source.name)
    suffix = source.name[len(plain) :]
    parts = plain.split(".")
    n = line_count(source)
    wmt = _WMT_SGML_SOURCE.match(plain)
    other = None  # a file of WMT's name but another count: said when nothing else is found
    if wmt is not None and wmt.group(2) == src_lang:  # tried first; another count: not taken
        stem = f"{wmt.group(1)}-ref.{trg_lang}{wmt.group(3)}"
        for x in dict.fromkeys((suffix, "", *COMPRESSED_SUFFIXES)):
            ref = source.with_name(stem + x)
            if is_file(ref):
                m = line_count(ref)
                if m == n:
                    return ref, f"WMT's naming -src.{src_lang} -> -ref.{trg_lang}, {n} segments"
                other = other or f"{ref} has {m} segments, its source {n}"
    stems = []
    if src_lang in parts[1:]:
        i = len(parts) - 1 - parts[::-1].index(src_lang)
        stems.append(".".join(parts[:i] + [trg_lang] + parts[i + 1 :]))
    stems.append(f"{plain}.{trg_lang}")
    if len(parts) > 1:
        stems.append(f"{'.'.join(parts[:-1])}.{trg_lang}")
    names = [s + x for s in stems for x in dict.fromkeys((suffix, "", *COMPRESSED_SUFFIXES))]
    for name in dict.fromkeys(names):
        ref = source.with_name(name)
        if is_file(ref):
            m = line_count(ref)
            if m == n:
                return ref, f"the same stem in the target language .{trg_lang}"
            return None, f"{ref} has {m} lines, its source {n}"
    if other is not None:
        return None, other
    tried = " or ".join(dict.fromkeys(s + suffix for s in stems))
    return None, f"no {tried} beside it (target language .{trg_lang})"


def find_source(
    n_lines: int,
    confirm: Callable[[Path], str | None],
    places: Sequence[Place],
    near: str | os.PathLike[str],
    what: str,
    how: str,
    langs: tuple[str, str] = ("en", "fr"),
    crashed: str | None = None,
    by_name: Path | None = None,
    fix: str = "",
    allow_longer: bool = True,
) -> TestSetChoice:
    """The source text file an archived output of ``n_lines`` lines was made from.

    Candidates are the text files of ``places`` (:func:`text_files`): first those with exactly
    ``n_lines`` lines, then (the original stopped early: ``crashed`` names its crash log, or
    nothing of the right length confirmed) longer ones (unless ``allow_longer`` is false: a
    score file has a line per source line); files ending in the source language
    first.  ``confirm(path)`` decides: ``None`` when the candidate's first lines give the
    archived ones (``how`` says with what), else the first difference as text.  The first
    confirmed candidate wins; ``by_name`` (the standard name, ``test.en``) is taken without
    confirmation when nothing confirms, the differences then being the report's.

    Returns a :class:`TestSetChoice`; raises :class:`LegacyInputError` saying what was looked
    at, the near misses and the fix.
    """
    src_lang, trg_lang = langs
    files = text_files(places, near)
    counts = [(p, label, line_count(p)) for p, label in files]
    exact = [c for c in counts if c[2] == n_lines]
    longer = [c for c in counts if c[2] is not None and c[2] > n_lines]
    by_lang = lambda cs: sorted(
        cs, key=lambda c: not strip_compression(c[0].name).endswith("." + src_lang)
    )
    misses, tried = [], 0
    passes = [(by_lang(exact), "exact")] + ([(by_lang(longer), "longer")] if allow_longer else [])
    for group, kind in passes:
        for path, label, count in group:
            if tried >= MAX_CONFIRMATIONS:
                break
            tried += 1
            difference = confirm(path)
            if difference is not None:
                misses.append(f"{path} ({difference})")
                continue
            ref, ref_why = reference_for(path, src_lang, trg_lang)
            if kind == "exact":
                lines = f"{count} lines, as many as {what}"
            else:
                lines = f"{count} lines, {what} {n_lines}: the original stopped early" + (
                    f" ({crashed})" if crashed else ""
                )
            why = (
                f"source {path} ({label}; {lines}; its first lines give the archived ones "
                f"{how}), reference " + (f"{ref} ({ref_why})" if ref else f"none ({ref_why})")
            )
            return TestSetChoice(path, ref, why)
    if by_name is not None and (n_named := line_count(by_name)) is not None and n_named >= n_lines:
        ref, ref_why = reference_for(by_name, src_lang, trg_lang)
        why = (
            f"source {by_name} by its name (no text file's first lines give the archived "
            f"ones {how}: the report shows the differences), reference "
            + (f"{ref} ({ref_why})" if ref else f"none ({ref_why})")
        )
        return TestSetChoice(by_name, ref, why, confirmed=False)
    looked = ", ".join(
        dict.fromkeys(
            f"{p.folder}{'' if p.recursive else ' (not below)'}"
            for p in places
            if Path(p.folder).is_dir()
        )
    )
    near_text = (
        f"; files of {n_lines} lines or more whose first lines differ: {'; '.join(misses[:3])}"
        + (f" and {len(misses) - 3} more" if len(misses) > 3 else "")
        if misses
        else f"; no text file there has {n_lines} lines or more"
    )
    raise LegacyInputError(
        None,
        f"cannot find the source of {what} ({n_lines} lines): looked at the text files in "
        f"{looked}{near_text}{fix}",
    )
