"""The packages' import graph, beyond the folder layers that ``lint-imports`` checks.

Issue 30's acceptance: no module in ``groundhog_port/`` or ``legacy_states/`` imports a
module that imports it back, lazy imports (inside functions) included, and no private name
(``_x``) is imported from another folder (issue 38: ``legacy_states`` is one folder, and
it and ``groundhog_port.legacy`` once imported each other).  The layers contract (``pyproject.toml``) forbids cycles between folders
only; these two checks cover the modules inside a folder and the names.  grimp (the graph
import-linter builds on) reads every import statement, those in function bodies too.
Each check is first run on a throw-away package holding the fault, so it is shown to catch
it (~1 s).
"""

import ast
import sys
from pathlib import Path

import grimp
import pytest

import groundhog_port
import legacy_states

PACKAGES = ("groundhog_port", "legacy_states")


def import_cycles(*packages: str) -> list[list[str]]:
    """The strongly connected groups of more than one module in the graph of ``packages``
    (Tarjan's algorithm, iterative): each is a set of modules importing each other."""
    graph = grimp.build_graph(*packages, cache_dir=None)
    succ = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index, low, stack, on_stack, groups = {}, {}, [], set(), []
    for root in sorted(succ):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on_stack.add(v)
            if i < len(succ[v]):
                work.append((v, i + 1))
                w = succ[v][i]
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                group = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    group.append(w)
                    if w == v:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return groups


def folder(parts: tuple[str, ...] | list[str], roots: dict[str, Path]) -> tuple[str, ...]:
    """The folder a module (its dotted name's parts) lies in: a top-level subpackage of a
    package with subpackages (``groundhog_port.search``), else the whole package
    (``legacy_states``, whose modules are siblings)."""
    nested = any(p.is_dir() and (p / "__init__.py").exists() for p in roots[parts[0]].iterdir())
    return tuple(parts[:2]) if nested else tuple(parts[:1])


def private_imports_across_folders(*roots: Path) -> list[str]:
    """``from M import _name`` where ``M`` lies in another folder (:func:`folder`) of the
    packages at ``roots`` than the importing module: ``file: M._name`` per case."""
    by_name = {root.name: root for root in roots}
    found = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root.parent).with_suffix("").parts
            package = parts[:-1]  # a module's package; for ``__init__`` the package itself
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.ImportFrom):
                    continue
                if node.level:
                    base = list(package[: len(package) - (node.level - 1)])
                    source = base + (node.module.split(".") if node.module else [])
                else:
                    source = (node.module or "").split(".")
                if source[0] not in by_name or folder(source, by_name) == folder(parts, by_name):
                    continue
                found += [
                    f"{path.relative_to(root.parent)}: {'.'.join(source)}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    return found


@pytest.fixture
def faulty_package(tmp_path, monkeypatch):
    """``faulty``: ``core.a`` imports ``core.b`` lazily, ``core.b`` imports ``core.a`` back;
    ``tasks.t`` imports the private ``_helper`` of ``core.a``.  ``flat`` (a package of
    sibling modules, like ``legacy_states``): ``flat.x`` imports ``core.b`` lazily, which
    imports ``flat.x`` back, and imports ``_helper`` too; ``flat.y`` imports ``flat.x``'s
    private ``_own`` (the same folder: allowed)."""
    files = {
        "flat/__init__.py": "",
        "flat/x.py": "def _own():\n    from faulty.core import b\n    return b._helper\n",
        "flat/y.py": "from .x import _own\nfrom faulty.core.a import _helper\n",
        "faulty/__init__.py": "",
        "faulty/core/__init__.py": "",
        "faulty/core/a.py": "def _helper():\n    from . import b\n    return b\n",
        "faulty/core/b.py": "from .a import _helper\nimport flat.x\n",
        "faulty/tasks/__init__.py": "",
        "faulty/tasks/t.py": "from ..core.a import _helper\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path / "faulty", tmp_path / "flat"
    for name in [m for m in sys.modules if m.split(".")[0] in ("faulty", "flat")]:
        del sys.modules[name]


def test_the_checks_catch_a_lazy_cycle_and_a_private_import(faulty_package):
    assert import_cycles("faulty") == [["faulty.core.a", "faulty.core.b"]]
    assert import_cycles("faulty", "flat") == [["faulty.core.a", "faulty.core.b", "flat.x"]]
    assert private_imports_across_folders(*faulty_package) == [
        "faulty/tasks/t.py: faulty.core.a._helper",
        "flat/y.py: faulty.core.a._helper",
    ]


def test_no_module_imports_a_module_that_imports_it_back():
    assert import_cycles(*PACKAGES) == []


def test_no_private_name_is_imported_from_another_folder():
    roots = [Path(groundhog_port.__file__).parent, Path(legacy_states.__file__).parent]
    assert private_imports_across_folders(*roots) == []
