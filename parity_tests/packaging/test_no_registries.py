"""No module-level mutable registry in the archive pipeline (issue 50 item 7).

What one run learns (folders walked, line counts, choices said, files classified) lives in
the run's context (``tasks.archive.context.Run``, ``lookup.Memo``), so a second run in the
same process (the CLI run in-process by the tests, the web demo) starts fresh and nothing
has to be reset by hand.  A registry begins as an empty container bound at module level
(``_seen = set()``, ``_cache: dict = {}``); this check reads each pipeline module's syntax
tree for one.  It is first run on a throw-away module holding one, so it is shown to
catch it.
"""

import ast
from pathlib import Path

import groundhog_port

PACKAGE = Path(groundhog_port.__file__).parent
#: the archive pipeline and what it calls to find, read and judge files
PIPELINE = (
    *sorted((PACKAGE / "tasks" / "archive").glob("*.py")),
    PACKAGE / "lookup.py",
    PACKAGE / "file_names.py",
    PACKAGE / "untrusted.py",
    PACKAGE / "tasks" / "packs.py",
    PACKAGE / "tasks" / "reproduce.py",
    PACKAGE / "tasks" / "rescore.py",
    PACKAGE / "harness" / "print_noise.py",
)
_EMPTY_CALLS = {"set", "dict", "list", "defaultdict", "OrderedDict", "Counter", "deque"}


def registries(source: str) -> list[str]:
    """``name:line`` of each module-level binding of an empty mutable container."""
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        empty = (
            (isinstance(value, (ast.Set, ast.List)) and not value.elts)
            or (isinstance(value, ast.Dict) and not value.keys)
            or (
                isinstance(value, ast.Call)
                and not value.args
                and ast.unparse(value.func).rsplit(".", 1)[-1] in _EMPTY_CALLS
            )
        )
        if empty:
            found += [f"{ast.unparse(t)}:{node.lineno}" for t in targets]
    return found


def test_the_check_finds_a_registry():
    planted = "_seen: set[str] = set()\n_walks = {}\nNAMES = ('a',)\n_q = []\n"
    assert registries(planted) == ["_seen:1", "_walks:2", "_q:4"]


def test_no_registry_in_the_archive_pipeline():
    assert all(p.is_file() for p in PIPELINE), [p for p in PIPELINE if not p.is_file()]
    found = {
        str(p.relative_to(PACKAGE)): r
        for p in PIPELINE
        if (r := registries(p.read_text(encoding="utf-8")))
    }
    assert found == {}, f"module-level registries (keep them in the run's context): {found}"
