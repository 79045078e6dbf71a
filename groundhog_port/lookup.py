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

Test sets of a case folder (``test.en``/``test.fr``, ``holdout.*``) are looked for in
the folder, then in the same data directories.  Commands taking ``--case DIR`` add the
folder's sibling ``../data`` (the shared recordings' corpus folder) after the given
data directories.

Each choice is logged once per run (:func:`new_run`) on logger ``groundhog_port.paths``: one INFO line
per (stored folder, folder used) -- three vocabularies found in one ``--data-dir`` give
one line, not three -- and the single files at DEBUG.  When nothing is found,
:class:`~groundhog_port.errors.LegacyInputError` lists every place looked at and says to
pass ``--data-dir``.
"""

import logging
from pathlib import Path

from .errors import LegacyInputError

logger = logging.getLogger("groundhog_port.paths")

#: what has been announced at INFO in this process: (stored folder, folder used, why)
_announced = set()


def new_run():
    """Forget what was announced: the next choices are logged again (a new command run)."""
    _announced.clear()


def data_dirs(value, check=True):
    """``--data-dir`` values as a tuple of folders: ``None``, one path, or a list of paths
    (``action="append"``).  ``check``: each must be a directory (a typo fails before any
    loading)."""
    if value is None:
        return ()
    if isinstance(value, (str, Path)):
        value = [value]
    out = []
    for d in value:
        p = Path(d)
        if check and not p.is_dir():
            raise LegacyInputError(
                p, "data directory does not exist or is not a directory (--data-dir)"
            )
        if p not in out:
            out.append(p)
    return tuple(out)


def case_data_dirs(case_dir, given=None):
    """The data directories of a ``--case DIR`` command: the given ones, then ``DIR`` itself
    (for a ``--state`` kept elsewhere), then ``DIR/../data`` when it exists (where the shared
    recordings keep their corpora and test sets)."""
    dirs = list(data_dirs(given))
    for d in (Path(case_dir), Path(case_dir).parent / "data"):
        if d.is_dir() and d not in dirs:
            dirs.append(d)
    return tuple(dirs)


def is_file(path) -> bool:
    """``path.is_file()``, False also when the name cannot be looked up at all (too long,
    a NUL byte...): such a state value names no usable file."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


def _announce(what, stored, chosen, where):
    key = (str(Path(stored).parent), str(chosen.parent), where)
    if key in _announced:
        logger.debug("%s: using %s (%s)", what, chosen, where)
        return
    _announced.add(key)
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


def candidates(name, state_path=None, dirs=()):
    """``[(path, where)]`` for a file called ``name``: next to the state, then each data
    directory (step 2 and 3 of the module docstring)."""
    out = []
    if state_path is not None:
        out.append((Path(state_path).parent / name, "next to the state file"))
    n = len(dirs)
    for i, d in enumerate(dirs):
        path = Path(d) / name
        if all(path != p for p, _ in out):
            out.append((path, "--data-dir" + (f" {i + 1} of {n}" if n > 1 else "")))
    return out


def hint():
    """How to make a missing file found."""
    return "; pass --data-dir DIR (the folder holding it; repeatable)"


def find_stored(
    stored, what, state_path, dirs=(), explicit=False, where_from="the changes", change=None
):
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
    if is_file(stored):
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


def find_named(name, folder, dirs=()):
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


def places(name, folder, dirs=()):
    """Where :func:`find_named` looks, for messages."""
    return ", ".join(str(c) for c, _ in candidates(name, Path(folder) / name, dirs))
