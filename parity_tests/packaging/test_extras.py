"""pymarian (Marian's CPU decoder, ~600 MB) is the ``bench`` extra's alone (issue 54, item 3):
never a dependency, never in the test install that CI and ``tools/test.sh`` make."""

import re
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[2]


def _names(requirements):
    return {re.split(r"[<>=!~\[ ;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_pymarian_is_in_the_bench_extra_only():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert "pymarian" in _names(extras["bench"])
    assert "pymarian" not in _names(project["dependencies"])
    for name, requirements in extras.items():
        if name != "bench":
            assert "pymarian" not in _names(requirements), name
    # what the set-up scripts install: ensure_venv EXTRAS (tools/venv.sh)
    asked = [
        m
        for script in (REPO / "tools").glob("*.sh")
        for m in re.findall(r"^\s*ensure_venv\s+(\S+)", script.read_text(), re.M)
    ]
    assert "test" in asked and not any("bench" in a for a in asked), asked
