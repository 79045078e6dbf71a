"""Every public function of the finished packages carries type hints (issue 52, item 5).

``tools/annotation_count.py`` counts, with :mod:`ast`, the public functions of each package
of ``groundhog_port/`` and those fully annotated (every parameter but a method's
``self``/``cls``, ``*args``/``**kwargs`` included, and the return).  The packages in
:data:`FINISHED` must have none left unannotated; the counter is first run on a throw-away
package whose every case is counted by hand, so it is shown to tell them apart (~0.3 s in
all).
"""

import importlib.util
import sys
import textwrap

import pytest

from parity_tests.support.cases import REPO

#: packages of groundhog_port/ whose every public function is annotated ("top-level": the
#: modules directly in groundhog_port/)
FINISHED = ("top-level", "legacy", "harness", "tasks", "cli", "distributed", "export", "serve")


@pytest.fixture(scope="module")
def counter():
    spec = importlib.util.spec_from_file_location(
        "annotation_count", REPO / "tools" / "annotation_count.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


#: one module holding each case; the names ending in ``_ok`` are fully annotated, ``_bad``
#: not, ``_skip`` not counted at all
CASES = """
from typing import TYPE_CHECKING


def public_ok(a: int, *args: str, b: int = 1, **kwargs: float) -> None: ...
def public_bad_return(a: int): ...
def public_bad_param(a, b: int) -> int: ...
def public_bad_varargs(*args) -> None: ...
def public_bad_kwargs(**kwargs) -> None: ...
def public_bad_kwonly(*, k) -> None: ...
def public_bad_posonly(p, /) -> None: ...
async def async_bad(x): ...
def _private_skip(x): ...


def outer_ok() -> None:
    def nested_skip(x):  # inside a function: never counted
        ...


if TYPE_CHECKING:
    def in_if_bad(x): ...
else:
    try:
        def in_try_ok(x: int) -> int: ...
    except ImportError:
        pass


class Public:
    def __init__(self, x) -> None: ...  # a dunder is public: x counts
    def method_ok(self, x: int) -> int: ...
    def method_bad(self): ...
    @classmethod
    def make_ok(cls, x: int) -> "Public": ...
    @staticmethod
    def static_bad(self) -> None: ...  # a staticmethod's first parameter is no self
    def _private_skip(self, x): ...

    class Inner:
        def inner_bad(self, y): ...


class _Private:
    def hidden_skip(self, x): ...

    class Deeper:
        def deeper_skip(self, x): ...
"""


def test_counter_tells_each_case(counter, tmp_path):
    """The throw-away package: each ``_ok`` counted annotated, each ``_bad`` not, each
    ``_skip`` not counted, what is missing named."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "top.py").write_text(textwrap.dedent(CASES))
    (pkg / "sub" / "deep.py").write_text("def deep_bad(x): ...\n")
    counts = counter.count(pkg)
    assert list(counts) == [counter.TOP, "sub"]
    names = {f.qualname: f for c in counts.values() for f in c.functions}
    assert not [n for n in names if n.endswith("_skip")]
    expected_ok = {
        "public_ok", "outer_ok", "in_try_ok", "Public.method_ok", "Public.make_ok",
    }  # fmt: skip
    assert {n for n, f in names.items() if f.annotated} == expected_ok
    assert {n: f.missing for n, f in names.items() if not f.annotated} == {
        "public_bad_return": ["return"],
        "public_bad_param": ["a"],
        "public_bad_varargs": ["*args"],
        "public_bad_kwargs": ["**kwargs"],
        "public_bad_kwonly": ["k"],
        "public_bad_posonly": ["p"],
        "async_bad": ["x", "return"],
        "in_if_bad": ["x", "return"],
        "Public.__init__": ["x"],
        "Public.method_bad": ["return"],
        "Public.static_bad": ["self"],
        "Public.Inner.inner_bad": ["y", "return"],
        "deep_bad": ["x", "return"],
    }
    assert (counts[counter.TOP].total, counts[counter.TOP].annotated) == (17, 5)
    assert (counts["sub"].total, counts["sub"].annotated) == (1, 0)
    # --require fails on a package with one unannotated, passes on one without
    (pkg / "fine").mkdir()
    (pkg / "fine" / "m.py").write_text("def f(x: int) -> int: ...\n")
    assert counter.main(["--package-dir", str(pkg), "--require", "fine"]) == 0
    assert counter.main(["--package-dir", str(pkg), "--require", "fine", "sub"]) == 1


@pytest.mark.parametrize("package", FINISHED)
def test_finished_package_is_annotated(counter, package):
    """No public function of ``package`` lacks an annotation (``python
    tools/annotation_count.py --list PACKAGE`` lists them with file:line)."""
    counts = counter.count()
    assert counts[package].total > 0, package
    assert counter.listing(counts[package]) == ""
