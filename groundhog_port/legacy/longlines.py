"""A warning for input lines longer than the model was trained on.

GroundHog trained on pairs of at most ``state['seqlen']`` words (the bitext fetcher skipped
longer ones, ``TM_dataset.py:210-211``) but ``sample.py`` and ``score.py`` take any line as it
is: the search runs ``3 * (words + 1)`` steps, the scorer one pass over the whole pair.  The
port does the same (no truncation: that would change the output) and says so, naming the
line.  Memory stays bounded by the line: the search keeps ``beam x words`` attention weights
per step; the scorer's alignment is ``target words x source words``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence

from .vocab import split_words

logger = logging.getLogger("groundhog_port.inputs")

#: lines named one by one; more are counted in one last warning
MAX_NAMED = 5


def warn_long_lines(
    path: str | os.PathLike[str],
    lines: Sequence[str],
    state: Mapping[str, object],
    doing: str = "translating it",
    original: str = "sample.py",
) -> list[int]:
    """Log one warning per line of ``lines`` (read from ``path``) with more words than
    ``state['seqlen']``; returns the 1-based numbers of those lines."""
    seqlen = state.get("seqlen")
    if not isinstance(seqlen, int) or isinstance(seqlen, bool) or seqlen < 1:
        return []
    long_lines = []
    for number, line in enumerate(lines, start=1):
        if len(line) <= seqlen:  # cannot hold more than seqlen words
            continue
        n = len(split_words(line))
        if n > seqlen:
            long_lines.append(number)
            if len(long_lines) <= MAX_NAMED:
                logger.warning(
                    "%s: line %d has %d words, more than seqlen=%d (the longest "
                    "sentences the model was trained on); %s anyway, as %s did",
                    path,
                    number,
                    n,
                    seqlen,
                    doing,
                    original,
                )
    if len(long_lines) > MAX_NAMED:
        logger.warning(
            "%s: %d more lines longer than seqlen=%d (lines %s%s)",
            path,
            len(long_lines) - MAX_NAMED,
            seqlen,
            ", ".join(map(str, long_lines[MAX_NAMED : MAX_NAMED + 10])),
            ", ..." if len(long_lines) > MAX_NAMED + 10 else "",
        )
    return long_lines
