"""Writing several output files so that none is ever half-written.

Everything is computed first; :meth:`Staged.commit` then writes each file to
``NAME.partial`` in its own directory and, only when all of them are complete, renames
them into place.  On any failure the ``.partial`` files are removed and no output exists
that did not exist before (an existing file is only replaced by a complete one).  An
output that is (or reaches through a link) a file the run read is refused when it is
staged, before anything is written (:func:`groundhog_port.outputs.check_outputs`), and a
partial file is never a link or a hard link of another file
(:func:`groundhog_port.outputs.check_partial`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from ...errors import LegacyInputError
from ...outputs import OutputError, check_outputs, check_partial, output_target

logger = logging.getLogger("groundhog_port.legacy.preprocess")


class Staged:
    """``reads``: ``[(what, path)]``, the files the run reads (never an output)."""

    def __init__(self, reads: Iterable[tuple[str, str | os.PathLike[str] | None]] = ()) -> None:
        self._files: list[tuple[Path, Callable[[Path], object]]] = []
        self.reads = list(reads)

    def add(
        self,
        path: str | os.PathLike[str],
        write: Callable[[Path], object],
        keep_existing: bool = False,
        flag: str = "output",
    ) -> None:
        """Stage ``write(tmp_path)`` for ``path``.  ``keep_existing``: ``safe_pickle`` /
        ``safe_hdf`` without ``-o`` (preprocess.py:81-82) -- an existing file is kept and a
        warning logged.  ``flag`` names the output in a refusal."""
        target = output_target(path)  # a symbolic link is written through, never replaced
        if target.stream:
            raise OutputError(
                path,
                "is not a regular file (a FIFO, a device or standard "
                "output): preprocess writes its files whole, give a file name",
            )
        path = target.path
        if keep_existing and path.exists():
            logger.warning("Not saving %s, already exists.", path)
            return
        if any(p == path for p, _ in self._files):
            raise LegacyInputError(path, "named for two different outputs")
        check_outputs([(flag, path)], self.reads)
        self._files.append((path, write))

    def add_bytes(
        self,
        path: str | os.PathLike[str],
        data: bytes,
        keep_existing: bool = False,
        flag: str = "output",
    ) -> None:
        self.add(path, lambda tmp: Path(tmp).write_bytes(data), keep_existing, flag)

    def commit(self) -> list[Path]:
        partials = []
        try:
            for path, _ in self._files:
                check_partial(path.with_name(path.name + ".partial"))
            for path, write in self._files:
                tmp = path.with_name(path.name + ".partial")
                partials.append(tmp)
                write(tmp)
            for (path, _), tmp in zip(self._files, partials):
                logger.info("%s %s.", "Overwriting" if path.exists() else "Saving to", path)
                os.replace(tmp, path)
        except BaseException as err:
            for tmp in partials:
                tmp.unlink(missing_ok=True)
            if isinstance(err, OSError):
                raise LegacyInputError(
                    getattr(err, "filename", None) or partials[-1],
                    f"cannot write ({err.strerror or err}); nothing was written",
                ) from None
            raise
        return [p for p, _ in self._files]
