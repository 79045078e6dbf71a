"""Shared pytest fixtures: where the recorded Theano traces are.

The recordings live in ``../shared/legacy_traces`` beside the checkout, or where
``GROUNDHOG_LEGACY_TRACES`` points.  Tests that need them skip with a reason
naming the path they looked at when it is absent.
"""
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
LEGACY_ROOT = Path(os.environ.get("GROUNDHOG_LEGACY_TRACES", REPO.parent / "shared" / "legacy_traces"))
CASES = ("search", "encdec", "phrase", "search_variant", "encdec_variant")


def case_dirs():
    """Every recorded case directory present (those with a ``*state.pkl``)."""
    if not LEGACY_ROOT.is_dir():
        return []
    return sorted(p for p in LEGACY_ROOT.iterdir() if p.is_dir() and any(p.glob("*state.pkl")))


@pytest.fixture(scope="session")
def legacy_root():
    if not LEGACY_ROOT.is_dir():
        pytest.skip(f"recorded traces not found at {LEGACY_ROOT} (set GROUNDHOG_LEGACY_TRACES)")
    return LEGACY_ROOT
