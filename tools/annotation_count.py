"""How many public functions of each package of ``groundhog_port/`` carry full type hints
(issue 52, item 5: "every public function annotated").

A *public function* is a ``def``/``async def`` whose name does not start with ``_``, or a
dunder (``__init__``, ``__call__``...: their parameters are annotated too), defined at module
level or in a class whose name does not start with ``_`` (classes nested in public classes
included); functions nested in functions are not counted, and neither is anything inside a
class or function that is not counted.  Definitions under ``if``/``try``/``with`` at those
levels count.  A function is *fully annotated* when every parameter (``*args`` and
``**kwargs`` included) has an annotation, the first ``self``/``cls`` of a method excepted
(not that of a ``staticmethod``), and so does its return.

The source is read with :mod:`ast`, never imported.  Packages are the folders directly under
``groundhog_port/`` (their subfolders included); the modules directly in it form the package
``top-level``.

    python tools/annotation_count.py                     # the table, one row per package
    python tools/annotation_count.py --list cli          # cli's unannotated ones, file:line
    python tools/annotation_count.py --require cli tasks # exit 1 if one is unannotated

``parity_tests/packaging/test_annotations.py`` requires the finished packages.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIR = ROOT / "groundhog_port"
#: the name under which the modules directly in ``groundhog_port/`` are counted
TOP = "top-level"

_Def = ast.FunctionDef | ast.AsyncFunctionDef
#: ``try`` statements (``try``/``except*`` is Python 3.11's: absent from 3.10's ast)
_TRY = tuple(t for t in (ast.Try, getattr(ast, "TryStar", None)) if t is not None)


@dataclass
class Function:
    """One public function: where it is and whether it is fully annotated."""

    path: Path
    line: int
    qualname: str
    missing: list[str]  # the unannotated parameters, and "return" when the return is

    @property
    def annotated(self) -> bool:
        return not self.missing


@dataclass
class Count:
    """The public functions of one package."""

    package: str
    functions: list[Function] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.functions)

    @property
    def annotated(self) -> int:
        return sum(f.annotated for f in self.functions)

    @property
    def unannotated(self) -> list[Function]:
        return [f for f in self.functions if not f.annotated]


def is_public(name: str) -> bool:
    """Not ``_private``; dunders (``__init__``) are public."""
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


def _is_staticmethod(node: _Def) -> bool:
    return any(
        (isinstance(d, ast.Name) and d.id == "staticmethod")
        or (isinstance(d, ast.Attribute) and d.attr == "staticmethod")
        for d in node.decorator_list
    )


def missing_annotations(node: _Def, method: bool) -> list[str]:
    """The parameters of ``node`` without an annotation (``*args``/``**kwargs`` written so),
    then ``"return"`` when the return has none.  A method's first positional parameter is
    skipped when it is named ``self`` or ``cls`` and the method is no ``staticmethod``."""
    a = node.args
    positional = [*a.posonlyargs, *a.args]
    if (
        method
        and positional
        and positional[0].arg in ("self", "cls")
        and not _is_staticmethod(node)
    ):
        positional = positional[1:]
    missing = [p.arg for p in [*positional, *a.kwonlyargs] if p.annotation is None]
    if a.vararg is not None and a.vararg.annotation is None:
        missing.append("*" + a.vararg.arg)
    if a.kwarg is not None and a.kwarg.annotation is None:
        missing.append("**" + a.kwarg.arg)
    if node.returns is None:
        missing.append("return")
    return missing


def _blocks(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of ``body``, those inside ``if``/``try``/``with`` blocks included (a
    definition there is still at this level)."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            yield from _blocks(stmt.body)
            yield from _blocks(stmt.orelse)
        elif isinstance(stmt, _TRY):
            for part in (stmt.body, stmt.orelse, stmt.finalbody):
                yield from _blocks(part)
            for handler in stmt.handlers:
                yield from _blocks(handler.body)
        elif isinstance(stmt, ast.With | ast.AsyncWith):
            yield from _blocks(stmt.body)
        else:
            yield stmt


def public_functions(path: Path) -> list[Function]:
    """The public functions of one module, in the order they appear."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[Function] = []

    def visit(body: list[ast.stmt], prefix: str, in_class: bool) -> None:
        for stmt in _blocks(body):
            if isinstance(stmt, ast.ClassDef) and not stmt.name.startswith("_"):
                visit(stmt.body, prefix + stmt.name + ".", True)
            elif isinstance(stmt, _Def) and is_public(stmt.name):
                found.append(
                    Function(
                        path,
                        stmt.lineno,
                        prefix + stmt.name,
                        missing_annotations(stmt, method=in_class),
                    )
                )

    visit(tree.body, "", False)
    return found


def package_of(path: Path, package_dir: Path = PACKAGE_DIR) -> str:
    """``cli`` for ``groundhog_port/cli/commands/x.py``; :data:`TOP` for
    ``groundhog_port/x.py``."""
    parts = path.relative_to(package_dir).parts
    return parts[0] if len(parts) > 1 else TOP


def count(package_dir: Path = PACKAGE_DIR) -> dict[str, Count]:
    """Every package's :class:`Count`, by name, sorted; :data:`TOP` first."""
    counts: dict[str, Count] = {}
    for path in sorted(package_dir.rglob("*.py")):
        name = package_of(path, package_dir)
        counts.setdefault(name, Count(name)).functions.extend(public_functions(path))
    return dict(sorted(counts.items(), key=lambda kv: (kv[0] != TOP, kv[0])))


def table(counts: dict[str, Count]) -> str:
    """One row per package and the total: public functions, fully annotated, missing."""
    rows = [(c.package, c.total, c.annotated) for c in counts.values()]
    rows.append(("total", sum(r[1] for r in rows), sum(r[2] for r in rows)))
    width = max(len(r[0]) for r in rows)
    lines = [f"{'package':<{width}}  {'public':>6}  {'annotated':>9}  {'missing':>7}"]
    for i, (name, total, annotated) in enumerate(rows):
        if i == len(rows) - 1:
            lines.append("-" * len(lines[0]))
        lines.append(f"{name:<{width}}  {total:>6}  {annotated:>9}  {total - annotated:>7}")
    return "\n".join(lines)


def listing(c: Count, root: Path = ROOT) -> str:
    """``file:line qualname (missing: ...)`` for each unannotated function of ``c``."""
    return "\n".join(
        f"{_shown(f.path, root)}:{f.line} {f.qualname} (missing: {', '.join(f.missing)})"
        for f in c.unannotated
    )


def _shown(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="annotation_count.py",
        description="Count the public functions of each package of groundhog_port/ and how "
        "many are fully annotated (every parameter but a method's self/cls, and the return).",
    )
    parser.add_argument(
        "--package-dir",
        type=Path,
        default=PACKAGE_DIR,
        help="the package folder to read (default: %(default)s)",
    )
    parser.add_argument(
        "--list",
        metavar="PACKAGE",
        help=f"list PACKAGE's unannotated public functions as file:line ({TOP!r}: the "
        "modules directly in the package folder)",
    )
    parser.add_argument(
        "--require",
        nargs="+",
        metavar="PKG",
        help="exit with status 1, listing them, if any of these packages has an unannotated "
        "public function",
    )
    args = parser.parse_args(argv)
    counts = count(args.package_dir)
    root = args.package_dir.resolve().parent
    for name in [*([args.list] if args.list else []), *(args.require or [])]:
        if name not in counts:
            parser.error(f"no package {name!r} (one of: {', '.join(counts)})")
    if args.list:
        text = listing(counts[args.list], root)
        print(text or f"{args.list}: every public function is annotated")
        return 0
    print(table(counts))
    if args.require:
        failing = [counts[name] for name in args.require if counts[name].unannotated]
        for c in failing:
            print(f"\n{c.package}: {len(c.unannotated)} unannotated", file=sys.stderr)
            print(listing(c, root), file=sys.stderr)
        return 1 if failing else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
