"""Shared pytest fixtures: where the recorded Theano traces are.

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
case folders instead of the shared ones (see docs/trace_format.md, "Parity in your CI");
``--legacy-data-dir DIR`` (repeatable) says where their vocabularies and test files are when
they are neither where the state says nor in the case folder (the lookup of
``groundhog-port parity --data-dir``, :mod:`groundhog_port.lookup`).
"""
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
LEGACY_ROOT = Path(os.environ.get("GROUNDHOG_LEGACY_TRACES", REPO.parent / "shared" / "legacy_traces"))
PENDING_ROOT = Path(os.environ.get("GROUNDHOG_PENDING_TRACES", LEGACY_ROOT.parent / "pending_traces"))
CASES = ("search", "encdec", "phrase", "search_variant", "encdec_variant")


def _cases(root):
    """The case folders under ``root``: a ``*state.pkl`` and a ``trace.h5``."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir()
                  if p.is_dir() and any(p.glob("*state.pkl")) and (p / "trace.h5").is_file())


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
    (pytest.fail if _ci() else pytest.skip)(f"recording {name!r} not found in {LEGACY_ROOT} "
                                            f"or {PENDING_ROOT}")


@pytest.fixture(scope="session")
def legacy_root():
    if not LEGACY_ROOT.is_dir():
        pytest.skip(f"recorded traces not found at {LEGACY_ROOT} (set GROUNDHOG_LEGACY_TRACES)")
    return LEGACY_ROOT


def _ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing_recordings():
    """What of the shared recordings is absent (empty when all five cases are there)."""
    if not LEGACY_ROOT.is_dir():
        return [str(LEGACY_ROOT)]
    return [c for c in CASES if not any((LEGACY_ROOT / c).glob("*state.pkl"))]


def pytest_sessionstart(session):
    if _ci() and not session.config.getoption("legacy_case"):
        missing = missing_recordings()
        if missing:
            pytest.exit(f"CI: the recorded traces are required but missing at {LEGACY_ROOT} "
                        f"({', '.join(missing)}); set GROUNDHOG_LEGACY_TRACES or pass --legacy-case DIR",
                        returncode=1)


def pytest_addoption(parser):
    group = parser.getgroup("groundhog-port parity")
    group.addoption("--legacy-case", action="append", default=[], metavar="DIR",
                    help="a recorded case folder (*_state.pkl, *_model.npz, trace.h5, test files, "
                         "vocabularies) for parity_tests/test_legacy_cases.py; repeatable.  "
                         "Default: every case in the shared recordings")
    group.addoption("--legacy-data-dir", action="append", default=[], metavar="DIR",
                    help="where the cases' vocabularies / test files are when neither the "
                         "state's stored path nor the case folder holds them; repeatable, "
                         "searched in order (as groundhog-port parity --data-dir)")


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


@pytest.fixture(scope="module")
def one_thread():
    """Tiny matrices: extra torch threads only contend (60x slower on a busy 2-core machine)."""
    import torch
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


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
    msg = f"the page test needs {what} (bash tools/install_browser.sh; pip install selenium)"
    if os.environ.get("CI"):
        pytest.fail(msg)
    pytest.skip(msg)


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium driven by Selenium (test_serve_browser, test_archive)."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        need_browser_part("selenium")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not chromium or not driver_path:
        need_browser_part("Debian's chromium and chromium-driver")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--force-device-scale-factor=1", "--window-size=1000,1500"):
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=opts)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()

