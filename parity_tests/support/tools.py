"""The project's tools (``tools/*.py``, scripts, not a package) imported by the tests that
check them."""

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def load_tool(name: str):
    """``tools/<name>.py`` as module ``name`` (kept in ``sys.modules``, as its dataclasses
    and pickles need)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "tools" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
