"""The set-up scripts say what they do and install system packages only when asked (issue 35,
item 4): ``tools/install_browser.sh`` (which ``tools/test.sh`` runs) installs Debian's
chromium with apt-get only under ``CI=true`` or with ``--with-browser``; otherwise it installs
nothing and says how to enable the page tests.

Run with a PATH of stubs only: ``id`` says root, ``apt-get`` logs its arguments (and "installs"
stub ``chromium`` / ``chromedriver``), so nothing is installed for real.  Proven: the script
of main before this change (apt-get whenever root) fails the first test.  ~0.1 s.
"""

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools" / "install_browser.sh"
BASH = "/bin/bash"

APT_GET = """#!/bin/bash
echo "$@" >> "{log}"
if [ "$1" = install ]; then
    for tool in chromium chromedriver; do
        printf '#!/bin/bash\\necho stub %s\\n' "$tool" > "{bin}/$tool"
        /bin/chmod +x "{bin}/$tool"
    done
fi
"""


def run(tmp_path, *args, ci=None):
    stubs = tmp_path / "bin"
    stubs.mkdir(exist_ok=True)
    log = tmp_path / "apt-get.log"
    (stubs / "id").write_text("#!/bin/bash\necho 0\n")
    (stubs / "apt-get").write_text(APT_GET.format(log=log, bin=stubs))
    for stub in ("id", "apt-get"):
        (stubs / stub).chmod(0o755)
    env = {"PATH": str(stubs), "HOME": str(tmp_path)}
    if ci is not None:
        env["CI"] = ci
    out = subprocess.run(
        [BASH, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=30
    )
    calls = log.read_text().splitlines() if log.exists() else []
    return out, calls


@pytest.mark.skipif(not os.path.exists(BASH), reason="needs /bin/bash")
def test_nothing_installed_unless_asked(tmp_path):
    out, calls = run(tmp_path)
    assert out.returncode == 0 and calls == []
    assert "tools/test.sh --with-browser" in out.stderr and "will skip" in out.stderr
    out, calls = run(tmp_path, ci="false")
    assert out.returncode == 0 and calls == []


@pytest.mark.skipif(not os.path.exists(BASH), reason="needs /bin/bash")
@pytest.mark.parametrize("how", ["--with-browser", "CI=true"])
def test_installed_when_asked_and_said(tmp_path, how):
    args, ci = ((how,), None) if how.startswith("--") else ((), "true")
    out, calls = run(tmp_path, *args, ci=ci)
    assert out.returncode == 0, out.stderr
    assert calls[-1].split()[:1] == ["install"] and "chromium" in calls[-1].split()
    assert "chromium-driver" in calls[-1].split()
    assert "installing Debian's chromium" in out.stderr and "apt-get" in out.stderr
    # installed now: a second run returns at once
    out, again = run(tmp_path, *args, ci=ci)
    assert out.returncode == 0 and again == calls


@pytest.mark.skipif(not os.path.exists(BASH), reason="needs /bin/bash")
@pytest.mark.parametrize("present", ["chromium", "chromedriver", None])
def test_the_missing_part_is_named(tmp_path, present):
    """Chromium there and its driver missing (or the reverse, or both missing): the message
    names what is missing, never "Chromium not installed" when it is (issue 43)."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    if present:
        (stubs / present).write_text("#!/bin/bash\necho stub\n")
        (stubs / present).chmod(0o755)
    out, calls = run(tmp_path)
    assert out.returncode == 0 and calls == []
    says_chromium = "Chromium (Debian's chromium" in out.stderr
    says_driver = "WebDriver (Debian's chromium-driver" in out.stderr
    assert says_chromium == (present != "chromium"), out.stderr
    assert says_driver == (present != "chromedriver"), out.stderr
    assert "will skip" in out.stderr


@pytest.mark.skipif(not os.path.exists(BASH), reason="needs /bin/bash")
def test_unknown_argument(tmp_path):
    out, calls = run(tmp_path, "--yes")
    assert out.returncode == 2 and calls == [] and "unknown argument --yes" in out.stderr
