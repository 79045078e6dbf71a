"""The per-experiment cache of ``groundhog-port archive`` (``OUT/cache/<experiment>.json``).

A cached result is used only when it is this code's result for *these bytes*, and it is
never trusted whole (issue 40: a tree with the same names, sizes and mtimes but other
contents reused another tree's results; a crafted entry put a raw ``<script>`` into
report.html and had the report embed ``/dev/zero`` as base64; one of the wrong type was a
traceback):

* **the key is content** (:func:`cache_key`): the sha256 of every file the experiment reads
  -- the state, the model, the trace, the archived outputs and logs of its folder, the
  vocabularies the state names and the ``.pkl``/``.en``/``.fr`` files of the folders the
  lookup searches -- the same digests as the resume fingerprint
  (:func:`groundhog_port.outputs.file_digest`), with the options, :data:`CACHE_VERSION`
  and the source of this module and of :mod:`groundhog_port.tasks.archive`.  A special
  file is keyed by its type, never opened;
* **the entry is checked** (:func:`problem`) before use: read under the parse budget
  (:func:`groundhog_port.untrusted.read_json`), not through a link, against the one definition
  of what :func:`groundhog_port.tasks.archive.redo` writes,
  :class:`~groundhog_port.tasks.archive.result.ResultRecord` (:mod:`.records`: every key,
  every type; a value the report renders is a string, a number or a flag where the report
  expects one),
  naming this experiment (its id, state and model), and every plot it lists an
  ``OUT/plots/<experiment>/align_NNNN.png`` that is a regular file holding a PNG
  (:func:`plot_problem`).  Anything else is re-done, with one warning saying why.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import LegacyInputError
from ...file_names import VOCABULARY_FILE_KEYS
from ...outputs import atomic_write_text, file_digest, file_in, folder_in, lies_inside
from ...untrusted import read_json, special_kind
from . import records
from .result import ResultRecord

if TYPE_CHECKING:
    from .context import ExperimentEntry, Options

#: what :func:`digest` remembers for a run: (device, inode, size, mtime_ns, ctime_ns) -> digest
Digests = dict[tuple[int, ...], str]

logger = logging.getLogger("groundhog_port.tasks.archive")

#: bump when a cached result would no longer match what this code computes
#: (2: content keys and the schema, issue 40; 3: the plan, snapshots, issue 43; 4: outputs
#: by content, issue 50)
CACHE_VERSION = 4
#: largest cache entry read (a result is a few KB; the report's first differences are cut)
MAX_ENTRY_BYTES = 16 << 20
#: largest plot embedded into report.html (a plot of 100 x 100 words is about 200 KB)
MAX_PLOT_BYTES = 16 << 20
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
#: files of an experiment's folder that are part of its key (states, models, traces,
#: outputs, logs, test sets and vocabularies)
KEYED_SUFFIXES = (".pkl", ".npz", ".h5", ".txt", ".en", ".fr")


def safe_name(entry_id: str) -> str:
    """A file name for an experiment id (``runs/a/search_`` -> ``runs_a_search_-<hash>``)."""
    digest = hashlib.sha256(entry_id.encode()).hexdigest()[:8]
    return re.sub(r"[^A-Za-z0-9._-]+", "_", entry_id).strip("_")[:80] + "-" + digest


def entry_path(out: str | os.PathLike[str], entry: ExperimentEntry) -> Path:
    return Path(out) / "cache" / f"{safe_name(entry.id)}.json"


# ----------------------------------------------------------------------------------------
# the key
# ----------------------------------------------------------------------------------------
def digest(path: str | os.PathLike[str], memo: Digests | None = None) -> str | None:
    """sha256 of a file's bytes (the resume fingerprint's), ``"special:<kind>"`` for a FIFO,
    device or socket (never opened), ``None`` when absent.  ``memo`` (the run's
    :attr:`~groundhog_port.tasks.archive.context.Run.digests`) remembers it for the run by
    what the file is -- (device, inode, size, mtime_ns, ctime_ns) -> digest -- so a corpus
    under ROOT, in every experiment's key, is hashed once per run, while a file written
    since is hashed again (any write changes ctime, which no utime can set back)."""
    memo = {} if memo is None else memo
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    kind = special_kind(st.st_mode)
    if kind is not None:
        return f"special:{kind}"
    if not stat.S_ISREG(st.st_mode):
        return "not a file"
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key not in memo:
        try:
            memo[key] = file_digest(path) if st.st_size <= MAX_HASHED_BYTES else _large(path, key)
        except (OSError, LegacyInputError) as err:
            return f"unreadable: {getattr(err, 'problem', None) or err}"
    return memo[key]


#: files hashed whole for the key; a bigger one (a full-size snapshot, a 1 TiB sparse file:
#: hours to hash) is keyed by what it is -- device, inode, size, mtime, ctime (any write
#: changes ctime, which no utime sets back) -- and the digest of its first MiB, so its key
#: holds on this copy of the archive only
MAX_HASHED_BYTES = 64 << 20


def _large(path, identity) -> str:
    h = hashlib.sha256(repr(identity).encode())
    with open(path, "rb") as f:
        h.update(f.read(1 << 20))
    return "identity+head:" + h.hexdigest()


def _vocabularies(entry, dirs, memo):
    """``{key: (path, digest)}`` of the vocabularies the state names, as the experiment
    resolves them; the error's text where the state cannot say."""
    import legacy_states

    try:
        state = legacy_states.load_state(entry.state, data_dir=dirs)
        out = {}
        for key in VOCABULARY_FILE_KEYS:
            try:
                path = legacy_states.resolve_path(state, key, entry.state, dirs)
                out[key] = [str(path), digest(path, memo)]
            except LegacyInputError as err:
                out[key] = str(err)
        return out
    except LegacyInputError as err:
        return str(err)


def _code_digest():
    """The source of the archive pipeline (this package), of the reproduction it calls and of
    the file-name rules: a result cached by other code (another result layout) is redone,
    never mixed into the report."""
    here = Path(__file__).parent
    h = hashlib.sha256()
    for path in (
        *sorted(here.glob("*.py")),
        here.parent / "reproduce.py",
        here.parent.parent / "file_names.py",
    ):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def cache_key(
    entry: ExperimentEntry,
    opts: Options,
    extra: Iterable[str | os.PathLike[str]] = (),
    memo: Digests | None = None,
) -> str:
    """Digest of the experiment's inputs (their bytes; ``extra``: more files it may read,
    such as every candidate test set) and the options (``memo``: :func:`digest`'s)."""
    from ... import lookup

    # the folders the experiment reads (archive.experiment_dirs; its packs' folders aside)
    dirs = tuple(
        d
        for d in lookup.case_data_dirs(entry.folder, opts.data_dirs)
        if not isinstance(d, lookup.ImplicitDir) or entry.root is None or lies_inside(d, entry.root)
    )
    inputs = {entry.state, entry.model, entry.trace, *entry.outputs, *entry.candidates, *extra}
    up = entry.folder.parent / "data"
    above = entry.root is not None and not lies_inside(up, entry.root)  # not read: not keyed
    for d in (entry.folder, *opts.data_dirs, *(() if above else (up,))):
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        suffixes = KEYED_SUFFIXES if Path(d) == entry.folder else (".pkl", ".en", ".fr")
        inputs.update(Path(d) / n for n in names if n.endswith(suffixes))
    blob = json.dumps(
        {
            "version": CACHE_VERSION,
            "code": _code_digest(),
            "inputs": sorted([str(p), digest(p, memo)] for p in inputs if p is not None),
            "vocabularies": _vocabularies(entry, dirs, memo),
            "options": opts.key(),
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def plot_problem(
    out: str | os.PathLike[str], entry_id: str, plot: dict[str, Any], number: int, total: int
) -> str | None:
    """Why ``plot`` (``{"sentence", "file"}`` of a result) may not be embedded, or None: it
    must be ``plots/<experiment>/align_NNNN.png`` of pair ``number`` (1-based) under
    ``out``, a regular file reached through no link, holding a PNG of at most
    :data:`MAX_PLOT_BYTES`.  Nothing else is ever read into the report."""
    from ..plots import plot_file_name

    expected = f"plots/{safe_name(entry_id)}/{plot_file_name(number, total)}"
    if plot.get("sentence") != number or plot.get("file") != expected:
        return f"plot {number} is not {expected}"
    path = Path(out) / expected
    for p in (Path(out) / "plots", path.parent, path):  # no link anywhere below OUT
        try:
            st = os.lstat(p)
        except OSError:
            return f"{expected} is missing"
        if stat.S_ISLNK(st.st_mode):
            return f"{p.relative_to(out).as_posix()} is a link"
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_PLOT_BYTES:
        return f"{expected} is not a regular file of at most {MAX_PLOT_BYTES} bytes"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            magic = f.read(len(PNG_MAGIC))
    except OSError as err:
        return f"{expected}: {err.strerror or err}"
    return None if magic == PNG_MAGIC else f"{expected} is not a PNG"


def problem(
    data: object,
    key: str,
    entry: ExperimentEntry,
    opts: Options,
    out: str | os.PathLike[str],
    rel: Callable[[Path], str],
) -> str | None:
    """Why a cache entry ``data`` (parsed) may not stand for ``entry``'s result, or None.
    ``rel``: how the result names a path of the archive."""
    if not isinstance(data, dict) or set(data) != {"key", "result"}:
        return "not a cache entry of groundhog-port archive"
    if data["key"] != key:
        return "made from other inputs, options or code"
    result = data["result"]
    bad = records.problem(result, ResultRecord)
    if bad:
        return bad
    mine = {
        "id": entry.id,
        "folder": rel(entry.folder),
        "state": rel(entry.state),
        "model": rel(entry.model) if entry.model else None,
    }
    for k, v in mine.items():
        if result[k] != v:
            return f"its {k} is {str(result[k])[:80]!r}, not this experiment's {v!r}"
    if len(result["plots"]) > opts.plots:
        return f"{len(result['plots'])} plots, more than --plots {opts.plots}"
    for i, plot in enumerate(result["plots"], start=1):
        bad = plot_problem(out, entry.id, plot, i, opts.plots)
        if bad:
            return bad
    return None


def cached(
    out: str | os.PathLike[str],
    entry: ExperimentEntry,
    opts: Options,
    rel: Callable[[Path], str],
    extra: Iterable[str | os.PathLike[str]] = (),
    memo: Digests | None = None,
) -> ResultRecord | None:
    """The cached result of ``entry``, or None when absent, made from other inputs, or
    failing any check of :func:`problem` (then a warning says why, and it is re-done)."""
    path = entry_path(out, entry)
    try:
        st = os.lstat(path)
    except OSError:
        return None
    why = None
    if not stat.S_ISREG(st.st_mode) or os.path.islink(path.parent):
        why = "not a regular file of OUT/cache (a link?)"
    else:
        try:
            data = read_json(path, "a cache entry", limit=MAX_ENTRY_BYTES)
        except LegacyInputError as err:
            why = err.problem
        else:
            key = cache_key(entry, opts, extra, memo)
            if isinstance(data, dict) and data.get("key") != key:
                return None  # an older run's, of other inputs: quietly re-done
            why = problem(data, key, entry, opts, out, rel)
    if why is None:
        return data["result"]
    logger.warning("%s: the cached result %s is not used (%s); re-doing it", entry.id, path, why)
    return None


def strict_json(value: object) -> object:
    """``value`` with non-finite floats as the strings ``"nan"``, ``"inf"``, ``"-inf"``
    (a NaN score is a genuine GroundHog output; strict JSON has no NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value


def store(
    out: str | os.PathLike[str],
    entry: ExperimentEntry,
    opts: Options,
    result: ResultRecord,
    extra: Iterable[str | os.PathLike[str]] = (),
    memo: Digests | None = None,
) -> ResultRecord:
    """Cache ``result``; returns it as read back (a fresh result and a cached one then give
    the same report, key order included)."""
    folder_in(out, "cache")  # a link in OUT is never followed
    path = file_in(out, "cache", f"{safe_name(entry.id)}.json")
    text = json.dumps(
        {"key": cache_key(entry, opts, extra, memo), "result": strict_json(result)},
        sort_keys=True,
        allow_nan=False,
    )
    atomic_write_text(path, text)
    return json.loads(text)["result"]
