"""The wheel users install: built from a copy of the checkout (pip's PEP 517 path through
setuptools' ``build_meta``, no network, no build isolation), then its file list checked.

Packages are discovered (``[tool.setuptools.packages.find]``), so the checks are written
from the source tree, not from a second hand-kept list: every module and package-data
file under ``groundhog_port/`` and ``legacy_states/`` ships (a hand list once left
``sampling`` out), ``py.typed`` ships (PEP 561, declared in ``package-data``), no test
or tool code ships, and the version has one source (``groundhog_port.__version__``).
Proven: listing ``packages`` by hand without ``groundhog_port.sampling`` fails the first
test; deleting ``py.typed`` fails it too.  ~6 s (one build per session).
"""

import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

import groundhog_port

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("groundhog_port", "legacy_states")
#: test tooling that once shipped inside the package (issue 30, item 4, moved it to the test
#: support): the fuzzers' generators of hostile files and the HTTP load test
TOOLING = ("parity_tests/support/fuzzing.py", "parity_tests/support/loadtest.py")
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist", ".*")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """``(names in the wheel, its METADATA)``, built from a copy of the checkout."""
    src = tmp_path_factory.mktemp("src")
    for name in (*PACKAGES, "parity_tests", "tools"):
        shutil.copytree(REPO / name, src / name, ignore=_SKIP)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(src),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (whl,) = out.glob("*.whl")
    with zipfile.ZipFile(whl) as z:
        names = set(z.namelist())
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        return names, Parser().parsestr(z.read(meta).decode())


def _source_files():
    """Every file of the source packages the wheel must hold (modules, static files)."""
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                yield path.relative_to(REPO).as_posix()


def test_wheel_holds_every_module_and_data_file(wheel):
    names, _ = wheel
    expected = set(_source_files()) - set(TOOLING)
    assert "groundhog_port/py.typed" in expected, "py.typed missing from the source tree"
    assert "groundhog_port/serve/static/index.html" in expected
    assert not expected - names, f"missing from the wheel: {sorted(expected - names)}"


def test_wheel_holds_no_tests_or_tools(wheel):
    names, _ = wheel
    tops = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert tops == set(PACKAGES), f"top-level entries besides {PACKAGES}: {sorted(tops)}"


def test_wheel_holds_no_test_tooling(wheel):
    names, _ = wheel
    assert not set(TOOLING) & names, f"test tooling in the wheel: {sorted(set(TOOLING) & names)}"


def test_version_has_one_source(wheel):
    _, meta = wheel
    assert meta["Version"] == groundhog_port.__version__
    assert (
        "version ="
        not in (REPO / "pyproject.toml").read_text().split("[project]")[1].split("\n[")[0]
    ), "pyproject.toml writes the version a second time"
