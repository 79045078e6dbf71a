"""pytest hooks and fixtures of the suite; the helpers tests import live in :mod:`parity_tests.support.cases` (recorded cases, where the recordings are).

Each test folder is a marker (``pytest -m parity``), added here by folder.
"""

import shutil
import signal
from pathlib import Path

import pytest

from parity_tests.support.cases import LEGACY_ROOT, missing_recordings, need_browser_part, on_ci

KINDS = ("unit", "parity", "cli", "hardening", "serve", "export", "packaging")


@pytest.fixture(scope="session")
def legacy_root():
    if not LEGACY_ROOT.is_dir():
        pytest.skip(f"recorded traces not found at {LEGACY_ROOT} (set GROUNDHOG_LEGACY_TRACES)")
    return LEGACY_ROOT


def pytest_sessionstart(session):
    # A suite started as a background job of a non-interactive shell (`pytest ... &`, nohup)
    # inherits SIGINT ignored, and so would every command it starts: the tests that stop a
    # command with SIGINT (test_resume) would see it run to the end.  A handler here (not
    # SIG_IGN) makes exec reset SIGINT to its default in the children, as in a terminal.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if on_ci() and not session.config.getoption("legacy_case"):
        missing = missing_recordings()
        if missing:
            pytest.exit(
                f"CI: the recorded traces are required but missing at {LEGACY_ROOT} "
                f"({', '.join(missing)}); set GROUNDHOG_LEGACY_TRACES or pass --legacy-case DIR",
                returncode=1,
            )


def pytest_addoption(parser):
    group = parser.getgroup("groundhog-port parity")
    group.addoption(
        "--legacy-case",
        action="append",
        default=[],
        metavar="DIR",
        help="a recorded case folder (*_state.pkl, *_model.npz, trace.h5, test files, "
        "vocabularies) for parity_tests/parity/test_legacy_cases.py; repeatable.  "
        "Default: every case in the shared recordings",
    )
    group.addoption(
        "--legacy-data-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="where the cases' vocabularies / test files are when neither the "
        "state's stored path nor the case folder holds them; repeatable, "
        "searched in order (as groundhog-port parity --data-dir)",
    )


@pytest.fixture(scope="module")
def one_thread():
    """Tiny matrices: extra torch threads only contend (60x slower on a busy 2-core machine)."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


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
    if not chromium or not driver_path:  # name the part that is missing
        need_browser_part(
            " and ".join(
                part
                for part, there in (
                    ("Chromium (Debian's chromium)", chromium),
                    ("its WebDriver (Debian's chromium-driver: chromedriver)", driver_path),
                )
                if not there
            )
        )
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--force-device-scale-factor=1",
        "--window-size=1000,1500",
    ):
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=opts)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def pytest_collection_modifyitems(config, items):
    """Each test carries the marker of its folder (unit, parity, cli, ...: pyproject.toml)."""
    for item in items:
        kind = Path(str(item.fspath)).parent.name
        if kind in KINDS:
            item.add_marker(getattr(pytest.mark, kind))
