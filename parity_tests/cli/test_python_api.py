"""The "Examples" of the documentation's Python API page (``docs/api.md``) run as written
(issue 26, item 4; the page was the README's "Python API" section before issue 39).

Each ``python`` block of the section is executed from the checkout's root, in this process.
The first (translate, score, sample on the bundled fixture) asserts itself that its
translations are the original's ``trans_beam10.txt`` lines; here its printed batch scores
are compared with the original's ``scores_batch.txt``.  The second (parity) needs the shared
recordings and runs on ``GROUNDHOG_LEGACY_TRACES`` when that points elsewhere.
"""

import contextlib
import io
import re

from parity_tests.support.cases import FIXTURES, REPO

SECTION = re.search(
    r"^## Examples\n(.*?)^## ", (REPO / "docs" / "api.md").read_text(encoding="utf-8"), re.S | re.M
).group(1)
BLOCKS = re.findall(r"```python\n(.*?)```", SECTION, re.S)


def _run(code, monkeypatch):
    monkeypatch.chdir(REPO)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/api.md (Examples)", "exec"), {"__name__": "readme"})
    return out.getvalue()


def test_readme_has_the_blocks():
    assert len(BLOCKS) == 2 and "open_experiment" in BLOCKS[0] and "check_case" in BLOCKS[1]


def test_translate_score_sample_block(monkeypatch, one_thread):
    printed = _run(BLOCKS[0], monkeypatch)
    golden = (FIXTURES / "search" / "scores_batch.txt").read_text().split()[:3]
    assert repr(golden) in printed, printed
    assert "torch.Size([" in printed


def test_parity_block(legacy_root, monkeypatch, one_thread):
    code = BLOCKS[1].replace('"../shared/legacy_traces/search"', repr(str(legacy_root / "search")))
    printed = _run(code, monkeypatch)
    assert "quantities pass" in printed, printed


def test_translator_flags_are_keyword_arguments():
    """Issue 38: ``Translator(exp, 5, True)`` silently meant ``ignore_unk=True``; the flags and
    the batch size are keyword-only, so a call names what it switches on."""
    import inspect

    from groundhog_port.search.translator import Translator

    params = inspect.signature(Translator).parameters
    keyword_only = [n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    assert keyword_only == ["ignore_unk", "normalize", "batch_size", "warnings"]
    assert list(params)[:2] == ["experiment", "beam_size"]
