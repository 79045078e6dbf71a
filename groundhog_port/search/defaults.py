"""Defaults of the search that the command line shows in ``--help`` without importing torch."""

from __future__ import annotations

#: sentences decoded together by default (``translate``, ``reproduce``, parity's batched
#: rows): the batched search returns exactly what the literal one returns
#: (parity_tests/unit/test_batched_search.py), and this is its sweet spot
DEFAULT_BATCH_SIZE = 32

#: hypotheses a default group starts with at least: at beams under 4, 32 sentences are
#: few rows, and every step streams the whole output matrix whatever its rows (issue 54,
#: the full-size model at beam 1, one thread, 120 sentences: two groups of 60 decoded in
#: 18.7 s, one of 120 in 16.8 s; 40 sentences in one group 6.9 s, in 32 + 8 10.6 s)
GROUP_ROWS = 128


def batch_size(beam_size: int, asked: int | None = None) -> int:
    """``--batch-size`` of a beam search of ``beam_size``: ``asked``, or by default
    DEFAULT_BATCH_SIZE sentences, more at beams under 4 so that a group starts with
    GROUP_ROWS hypotheses (128 sentences at beam 1).  Every size gives the same output."""
    if asked is not None:
        return asked
    return max(DEFAULT_BATCH_SIZE, GROUP_ROWS // max(1, beam_size))


#: sample.py:127: the beam is doubled while it is below this, so no run of it searched wider
#: (a plan's or a file name's beam over it is not believed: some 2 GiB to search at 7000)
MAX_RETRY_BEAM = 500
