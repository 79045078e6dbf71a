"""The result of one experiment as ``archive`` builds it (a JSON-able dict in the end,
checked against :data:`groundhog_port.tasks.archive.cache.RESULT` before it is cached)."""

import logging

from ...errors import LegacyInputError
from .context import Run

logger = logging.getLogger("groundhog_port.tasks.archive")


class Result:
    """The result of one experiment under construction (a JSON-able dict in the end)."""

    def __init__(self, run: Run, entry):
        self.run = run
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
        self._causes: dict = {}
        self.missing: dict = {}  # test set name -> why a score file's test set was not found

    def rel(self, path):
        return self.run.rel(path)

    def not_done(self, what, why, cause=None):
        """Record ``what`` as not done.  One cause, one entry: the same ``why`` (or the same
        ``cause``, for reasons worded per file) given again adds its ``what`` to the first."""
        why = self.run.said(why)
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


def attempt(res, what, fn, *args):
    """``fn(*args)``; a failure is recorded as "not done" with its reason (one experiment's
    problem never stops the archive)."""
    try:
        return fn(*args)
    except LegacyInputError as err:
        res.not_done(what, str(err))
    except Exception as err:  # noqa: BLE001 -- an archive holds anything; report, go on
        res.not_done(what, f"{type(err).__name__}: {' '.join(str(err).split())[:300]}")
    return None
