"""Output files that are never half-written, resumable runs, and a progress line.

A :class:`Journal` writes result lines to ``PATH.partial`` and a matching record
per line (a cost, a batch number...) to ``PATH.partial.journal``, both flushed as
they go.  ``commit()`` renames ``PATH.partial`` to ``PATH`` (atomic within one
directory) and removes the journal, so ``PATH`` only ever holds a complete run.
After an interruption, ``--resume`` reopens the partial files, keeps every
complete line (a line only counts once it and its journal record end with a
newline) and the run continues from there.
"""
import os
import sys
import time
from pathlib import Path

from .errors import LegacyInputError


class Journal:
    def __init__(self, path, resume=False, keep=None):
        """``keep(records) -> n`` may cut the kept prefix further (e.g. to a batch boundary)."""
        self.path = Path(path)
        self.partial = self.path.with_name(self.path.name + ".partial")
        self.journal = self.path.with_name(self.path.name + ".partial.journal")
        check_output_path(self.path)
        lines, records = [], []
        if resume and self.partial.exists() and self.journal.exists():
            lines = _complete_lines(self.partial)
            records = _complete_lines(self.journal)
            n = min(len(lines), len(records))
            if keep is not None:
                n = keep(records[:n])
            lines, records = lines[:n], records[:n]
        self.done_lines, self.done_records = lines, records
        try:
            self._out = open(self.partial, "w", encoding="utf-8", newline="\n")
            self._rec = open(self.journal, "w", encoding="utf-8", newline="\n")
        except OSError as err:
            raise LegacyInputError(self.partial, f"cannot write ({err.strerror or err})") from None
        for line, record in zip(lines, records):
            self._out.write(line + "\n")
            self._rec.write(record + "\n")
        self.flush()

    def append(self, line, record=""):
        self._out.write(line + "\n")
        self._rec.write(record + "\n")

    def flush(self):
        self._out.flush()
        self._rec.flush()

    def commit(self):
        self._out.flush()
        os.fsync(self._out.fileno())
        self._out.close()
        self._rec.close()
        try:
            os.replace(self.partial, self.path)
        except OSError as err:
            raise LegacyInputError(self.path, f"cannot rename {self.partial.name} to it "
                                   f"({err.strerror or err}); the complete output is in "
                                   f"{self.partial}") from None
        self.journal.unlink()

    def close_unfinished(self):
        """Leave the partial files for ``--resume`` (interrupted or failed run)."""
        self.flush()
        self._out.close()
        self._rec.close()


def check_output_path(path):
    """An output file we can create: its directory exists and it is not a directory."""
    path = Path(path)
    if not path.parent.is_dir():
        raise LegacyInputError(path, "output directory does not exist")
    if path.is_dir():
        raise LegacyInputError(path, "is a directory, expected an output file name")


def _complete_lines(path):
    """The lines of ``path`` that end with a newline.  Split before decoding: a run killed
    while its buffer was being written may end in the middle of a UTF-8 character."""
    parts = Path(path).read_bytes().split(b"\n")[:-1]  # the last piece is incomplete
    try:
        return [p.decode("utf-8") for p in parts]
    except UnicodeDecodeError as err:
        raise LegacyInputError(path, f"not UTF-8 ({err.reason}): not a file this program wrote; "
                               "remove it or run without --resume") from None


class Progress:
    """A progress bar (tqdm) on stderr: ``35/40 [00:02<00:00, 16.5 sent/s]``.

    Shown when stderr is a terminal, or always with ``enabled=True``.  While it is shown,
    log records go through tqdm (``logging_redirect_tqdm``), which clears the bar, prints
    the record on its own line and redraws the bar below it.
    """

    def __init__(self, total, unit="sent", enabled=None, stream=None):
        self.total, self.unit = total, unit
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.start = time.monotonic()
        self.count = 0
        self._bar = self._redirect = None
        if self.enabled:
            from tqdm import tqdm
            from tqdm.contrib.logging import logging_redirect_tqdm
            self._bar = tqdm(total=total or None, unit=f" {unit}", file=self.stream,
                             mininterval=0.5, dynamic_ncols=True)
            self._redirect = logging_redirect_tqdm(tqdm_class=tqdm)
            self._redirect.__enter__()

    def update(self, n=1):
        self.count += n
        if self._bar is not None:
            self._bar.update(n)

    def rate(self):
        elapsed = time.monotonic() - self.start
        return self.count / elapsed if elapsed > 0 else 0.0

    def close(self):
        """Leave the final bar on screen and give logging its handlers back (idempotent)."""
        if self._bar is not None:
            self._bar.close()
            self._redirect.__exit__(None, None, None)
            self._bar = self._redirect = None
