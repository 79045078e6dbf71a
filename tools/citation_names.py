"""The names defined at each cited line of the original (issue 45, item 6).

``parity_tests/packaging/test_citations.py`` checks that a citation such as
``RecurrentLayer.step_fprop`` (rec_layers.py:1018) names what stands there.  The original is
not in this repository, so this script reads a GroundHog checkout at commit 4d2433b and
writes ``parity_tests/packaging/citation_names.json``: for every ``file:line`` the
repository cites, the ``def``/``class`` names that open within :data:`NEAR` lines of it and
the ones it lies inside, and for every cited file the line of each ``def``/``class``.  Only
identifiers are kept, never the original's code.  Run it again when a citation is added:

    python tools/citation_names.py --groundhog ~/GroundHog
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "parity_tests" / "packaging" / "citation_names.json"
COMMIT = "4d2433b6ff03da63f3619ecb3e8c501901779cdb"
#: lines either side of a cited line where the cited name may open
NEAR = 3
_DEF = re.compile(r"^(\s*)(?:def|class)\s+([A-Za-z_]\w*)")


def _citations_module():
    spec = importlib.util.spec_from_file_location(
        "test_citations", REPO / "parity_tests" / "packaging" / "test_citations.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def defs(text: str) -> list[tuple[int, int, str]]:
    """``(line, indent, name)`` of every ``def``/``class`` of a Python file."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        m = _DEF.match(line)
        if m:
            out.append((number, len(m.group(1)), m.group(2)))
    return out


def names_at(found: list[tuple[int, int, str]], line: int) -> list[str]:
    """Names opening within :data:`NEAR` lines of ``line``, and those enclosing it."""
    near = {name for n, _, name in found if abs(n - line) <= NEAR}
    enclosing, indent = [], None
    for _, ind, name in reversed([d for d in found if d[0] <= line]):
        if indent is None or ind < indent:
            enclosing.append(name)
            indent = ind
            if ind == 0:
                break
    return sorted(near | set(enclosing))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--groundhog", type=Path, required=True, help="a git checkout of GroundHog")
    args = p.parse_args(argv)
    cit = _citations_module()
    files = cit.text_files(REPO)
    texts = {str(f.relative_to(REPO)): f.read_text(encoding="utf-8") for f in files}
    by_name: dict[str, list[str]] = {}
    for path in cit.LINES:
        by_name.setdefault(path.rsplit("/", 1)[-1], []).append(path)
    cache: dict[str, list[tuple[int, int, str]]] = {}
    out: dict[str, dict] = {"lines": {}, "files": {}}
    for text in texts.values():
        for m in cit.CITATION.finditer(text):
            prefix, name, spans = m.groups()
            paths = [q for q in by_name.get(name, []) if q.endswith(prefix + name)]
            if len(paths) != 1 or not paths[0].endswith(".py"):
                continue
            path = paths[0]
            if path not in cache:
                source = subprocess.run(
                    ["git", "-C", str(args.groundhog), "show", f"{COMMIT}:{path}"],
                    capture_output=True, text=True, check=True,
                ).stdout  # fmt: skip
                cache[path] = defs(source)
                where: dict[str, list[int]] = {}
                for n, _, name in cache[path]:
                    where.setdefault(name, []).append(n)
                out["files"][path] = dict(sorted(where.items()))
            for first in re.findall(r"(\d+)(?:-\d+)?", spans):
                out["lines"][f"{path}:{int(first)}"] = names_at(cache[path], int(first))
    out["lines"] = dict(sorted(out["lines"].items()))
    OUT.write_text(json.dumps(out, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{OUT.relative_to(REPO)}: {len(out['lines'])} cited lines in {len(out['files'])} files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
