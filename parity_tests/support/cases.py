"""Where the recorded Theano traces are, and the helpers the tests share about them.

The recordings live in ``../shared/legacy_traces`` beside the checkout, or where
``GROUNDHOG_LEGACY_TRACES`` points.  Tests that need them skip with a reason
naming the path they looked at when it is absent -- except in CI: with ``CI`` set
(``true``/``1``; GitHub Actions and ``.ci/run`` set it) and no ``--legacy-case``, missing
recordings (or a missing one of the five shared cases) end the run with a failure, so CI
never goes green without having compared anything.

Recordings of model types added later (``../shared/pending_traces``, or
``GROUNDHOG_PENDING_TRACES``; today ``grconv``) are found by :func:`pending_case_dirs`;
``test_legacy_cases.py`` runs them like the shared cases.  A case is a folder with a
``*state.pkl`` and a ``trace.h5``; the training recordings (``init_draws``,
``continue_search_variant``) are found by :func:`recording_dir`, in ``legacy_traces`` first
and else in ``pending_traces`` (where they were delivered, until they are moved).

``--legacy-case DIR`` (repeatable) points ``test_legacy_cases.py`` at your own recorded
case folders instead of the shared ones (see docs/parity-ci.md);
``--legacy-data-dir DIR`` (repeatable) says where their vocabularies and test files are when
they are neither where the state says nor in the case folder (the lookup of
``groundhog-port parity --data-dir``, :mod:`groundhog_port.lookup`).
"""

import os
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]


FIXTURES = REPO / "fixtures"


LEGACY_ROOT = Path(
    os.environ.get("GROUNDHOG_LEGACY_TRACES", REPO.parent / "shared" / "legacy_traces")
)


PENDING_ROOT = Path(
    os.environ.get("GROUNDHOG_PENDING_TRACES", LEGACY_ROOT.parent / "pending_traces")
)


CASES = ("search", "encdec", "phrase", "search_variant", "encdec_variant")


def _cases(root):
    """The case folders under ``root``: a ``*state.pkl`` and a ``trace.h5``."""
    if not root.is_dir():
        return []
    return sorted(
        p
        for p in root.iterdir()
        if p.is_dir() and any(p.glob("*state.pkl")) and (p / "trace.h5").is_file()
    )


def case_dirs():
    """Every recorded case directory present."""
    return _cases(LEGACY_ROOT)


def pending_case_dirs():
    """The recorded cases of ``pending_traces`` (same layout as a shared case)."""
    return _cases(PENDING_ROOT)


def recording_dir(name):
    """A recording folder: ``legacy_traces/<name>``, else ``pending_traces/<name>``; when
    neither exists the test skips (fails in CI), naming both places."""
    for root in (LEGACY_ROOT, PENDING_ROOT):
        if (root / name).is_dir():
            return root / name
    (pytest.fail if on_ci() else pytest.skip)(
        f"recording {name!r} not found in {LEGACY_ROOT} or {PENDING_ROOT}"
    )


def on_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing_recordings():
    """What of the shared recordings is absent (empty when all five cases are there)."""
    if not LEGACY_ROOT.is_dir():
        return [str(LEGACY_ROOT)]
    return [c for c in CASES if not any((LEGACY_ROOT / c).glob("*state.pkl"))]


def legacy_data_dirs(config):
    """The ``--legacy-data-dir`` folders, checked to exist."""
    out = []
    for d in config.getoption("legacy_data_dir") or []:
        p = Path(d).expanduser().resolve()
        if not p.is_dir():
            raise pytest.UsageError(f"--legacy-data-dir {d}: not a directory")
        out.append(p)
    return out


def legacy_case_dirs(config):
    """The case folders ``test_legacy_cases.py`` runs on: ``--legacy-case`` ones, else the
    shared recordings (:func:`case_dirs`)."""
    given = config.getoption("legacy_case") or []
    if given:
        out = []
        for d in given:
            p = Path(d).expanduser().resolve()
            if not p.is_dir():
                raise pytest.UsageError(f"--legacy-case {d}: not a directory")
            out.append(p)
        return out
    return case_dirs() + pending_case_dirs()


def assert_scores_match(ours, recorded):
    """Printed ``{:.5e}`` scores: same non-finite pattern, finite ones within the score
    tolerance (rtol 1e-5 + atol 1e-5) plus half a unit of the last printed digit."""
    a = np.array([float(x) for x in ours.split()])
    b = np.array([float(x) for x in recorded.split()])
    assert a.shape == b.shape
    assert np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(np.isinf(a), np.isinf(b))
    fin = np.isfinite(b)
    bound = 1e-5 * np.abs(b[fin]) + 1e-5 + 0.5e-5 * 10.0 ** np.floor(np.log10(np.abs(b[fin])))
    err = np.abs(a[fin] - b[fin])
    assert (err <= bound).all(), f"max abs err {err.max()}, max rel {(err / np.abs(b[fin])).max()}"


def need_browser_part(what):
    """Skip with the reason (fail on CI, where tools/test.sh installs the browser)."""
    msg = (
        f"the page test needs {what} (bash tools/test.sh --with-browser installs them, "
        "or bash tools/install_browser.sh --with-browser as root; pip install selenium)"
    )
    if os.environ.get("CI"):
        pytest.fail(msg)
    pytest.skip(msg)


#: the shared recorded case folders present, and their names (the ids of tests run per case)
CASE_DIRS = case_dirs()
CASE_IDS = [d.name for d in CASE_DIRS]


def case_path_id(case):
    """A test id naming a case folder with its parent (``fixtures/search``, ``legacy_traces/search``)."""
    return f"{case.parent.name}/{case.name}"
