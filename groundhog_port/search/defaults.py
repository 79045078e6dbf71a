"""Defaults of the search that the command line shows in ``--help`` without importing torch."""

from __future__ import annotations

#: sentences decoded together by default (``translate``, ``reproduce``, parity's batched
#: rows): the batched search returns exactly what the literal one returns
#: (parity_tests/unit/test_batched_search.py), and this is its sweet spot
DEFAULT_BATCH_SIZE = 32

#: sample.py:127: the beam is doubled while it is below this, so no run of it searched wider
#: (a plan's or a file name's beam over it is not believed: some 2 GiB to search at 7000)
MAX_RETRY_BEAM = 500
