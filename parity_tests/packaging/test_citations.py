"""Every ``file:line`` citation of the original points inside the cited file (issue 38).

Docstrings, comments and docs cite GroundHog as ``encdec.py:1023``, ``sample.py:153-155``,
``rconv_layers.py:196-257, 288``, ``TM_dataset.py:216, :261`` or with a path
(``groundhog/layers/basic.py:168``), at commit 4d2433b6ff03da63f3619ecb3e8c501901779cdb of
lisa-groundhog/GroundHog (CONTRIBUTING.md).  The original is not in the repository, so
:data:`LINES` keeps the length of each cited file at that commit; a citation past the end, a
range written backwards, or a ``.py``/``.perl``/... name that is neither a cited GroundHog
file, nor one of Theano's, nor a file of this repository (a typo) fails, naming where it is.
The checker is first run on a throw-away text holding each fault (~0.5 s in all).
"""

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: lines of each cited file of lisa-groundhog/GroundHog at 4d2433b6ff03da63f3619ecb3e8c501901779cdb
#: (``git show 4d2433b:PATH | wc -l``; every file ends with a newline); a file cited for the
#: first time is added here, with its count taken the same way
LINES = {
    "experiments/nmt/analysis.py": 58,
    "experiments/nmt/compat/convert_model.py": 40,
    "experiments/nmt/compat/convert_state.py": 45,
    "experiments/nmt/compat/convert_timing.py": 32,
    "experiments/nmt/encdec.py": 1516,
    "experiments/nmt/preprocess/convert-pkl2hdf5.py": 57,
    "experiments/nmt/preprocess/invert-dict.py": 23,
    "experiments/nmt/preprocess/preprocess.py": 266,
    "experiments/nmt/preprocess/shuffle-hdf5.py": 88,
    "experiments/nmt/sample.py": 303,
    "experiments/nmt/score.py": 247,
    "experiments/nmt/state.py": 294,
    "experiments/nmt/train.py": 100,
    "experiments/nmt/tree.py": 194,
    "experiments/nmt/web-demo/sample_server.py": 202,
    "groundhog/datasets/TM_dataset.py": 360,
    "groundhog/layers/basic.py": 575,
    "groundhog/layers/cost_layers.py": 1366,
    "groundhog/layers/ff_layers.py": 511,
    "groundhog/layers/rconv_layers.py": 319,
    "groundhog/layers/rec_layers.py": 1542,
    "groundhog/mainLoop.py": 361,
    "groundhog/models/LM_model.py": 266,
    "groundhog/trainer/SGD_adadelta.py": 208,
    "groundhog/utils/utils.py": 191,
}

#: Theano's files (the recorded runs' Theano 1.0.5, not the original): cited, not checked here
THEANO = frozenset({"rng_mrg.py", "multinomial.py", "scan_op.py"})

#: ``[path/]name.ext:N`` then ``-M`` and more lines after ``,`` or ``and`` (``, 288``, ``, :261``)
CITATION = re.compile(
    r"(?<![\w./-])([\w./-]*?)([\w-]+\.(?:py|perl|bash|php|html)):(\d+(?:-\d+)?"
    r"(?:(?:,[ \t]*|[ \t]+and[ \t]+):?\d+(?:-\d+)?)*)"
)
#: the text files of the repository that may cite the original
SUFFIXES = {".py", ".md", ".sh", ".toml", ".html", ".js", ".txt", ".cfg"}
SKIPPED_DIRS = {"fixtures", "build", "dist", "__pycache__", "node_modules"}


def text_files(root: Path) -> list[Path]:
    """The repository's own text files: no hidden folder (``.venv``, ``.git``), no data,
    not this file (its faults are on purpose)."""
    found = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [
            d
            for d in dirs
            if not (d.startswith(".") or d in SKIPPED_DIRS or d.endswith(".egg-info"))
        ]
        found += [Path(folder, n) for n in names if Path(n).suffix in SUFFIXES]
    return sorted(p for p in found if p != Path(__file__).resolve())


def wrong_citations(texts: dict[str, str], lines: dict[str, int], own: set[str]) -> list[str]:
    """``where:line: citation: what is wrong`` for each citation in ``texts`` (name -> text)
    of a file of ``lines`` (path -> length) past its end or written backwards, and for each
    cited name that is in none of ``lines``, :data:`THEANO` and ``own`` (this repository's
    file names)."""
    by_name: dict[str, list[str]] = {}
    for path in lines:
        by_name.setdefault(path.rsplit("/", 1)[-1], []).append(path)
    found = []
    for where, text in texts.items():
        for m in CITATION.finditer(text):
            prefix, name, spans = m.groups()
            at = f"{where}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
            cited = prefix + name
            files = [p for p in by_name.get(name, []) if p == cited or p.endswith("/" + cited)]
            if not files:
                if name not in THEANO and name not in own:
                    found.append(f"{at}: no such file of GroundHog in the table, of Theano or here")
                continue
            if len(files) > 1:
                found.append(f"{at}: ambiguous ({', '.join(files)}): give the path")
                continue
            n = lines[files[0]]
            for first, last in re.findall(r"(\d+)(?:-(\d+))?", spans):
                a, b = int(first), int(last or first)
                if not 1 <= a <= b <= n:
                    found.append(f"{at}: {first}{'-' + last if last else ''} not in 1-{n}")
    return found


def test_the_check_catches_each_fault():
    lines = {"experiments/nmt/sample.py": 303, "a/utils.py": 10, "b/utils.py": 20}
    texts = {
        "ok.py": "sample.py:153-155, 303 and experiments/nmt/sample.py:1; rng_mrg.py:9999",
        "past.py": "x\n(sample.py:159, :304)",
        "backwards.md": "sample.py:160-159",
        "typo.py": "smaple.py:3",
        "ambiguous.py": "utils.py:3 but a/utils.py:3 is fine",
        "own.md": "search/batched.py:408, groundhog_port/cli/sample.py:9999",
    }
    assert wrong_citations(texts, lines, {"batched.py", "sample.py"}) == [
        "past.py:2: sample.py:159, :304: 304 not in 1-303",
        "backwards.md:1: sample.py:160-159: 160-159 not in 1-303",
        "typo.py:1: smaple.py:3: no such file of GroundHog in the table, of Theano or here",
        "ambiguous.py:1: utils.py:3: ambiguous (a/utils.py, b/utils.py): give the path",
    ]


def test_every_citation_of_the_original_points_inside_the_file():
    files = text_files(ROOT)
    if not any(p.name == "encdec.py" for p in files):
        pytest.fail(f"the repository's sources were not found under {ROOT}")
    texts = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in files}
    assert wrong_citations(texts, LINES, {p.name for p in files}) == []


#: ``NAME`` (file:N ...) / ``A.NAME()`` (file:N ...), or file:N NAME / (file:N, NAME): a
#: citation that names what stands at the cited line
_NAMED_BEFORE = re.compile(r"``(?:\w+\.)*(\w+)(?:\(\))?``\s*\(\s*$")
_NAMED_AFTER = re.compile(r"^,?\s+(\w+)\s*[),;]")


def misnamed_citations(texts, names, lines) -> list[str]:
    """Citations whose neighbouring name is a ``def``/``class`` of the cited file that does
    not open at (or within 3 lines of, or anywhere in a cited range) nor enclose the cited
    line (``names``: citation_names.json)."""
    by_name: dict[str, list[str]] = {}
    for path in lines:
        by_name.setdefault(path.rsplit("/", 1)[-1], []).append(path)
    found = []
    for where, text in texts.items():
        for m in CITATION.finditer(text):
            prefix, name, spans = m.groups()
            paths = [p for p in by_name.get(name, []) if p.endswith(prefix + name)]
            if len(paths) != 1 or paths[0] not in names["files"]:
                continue
            path = paths[0]
            span = re.match(r"(\d+)(?:-(\d+))?", spans)
            first, last = int(span.group(1)), int(span.group(2) or span.group(1))
            before = _NAMED_BEFORE.search(text[max(0, m.start() - 120) : m.start()])
            after = _NAMED_AFTER.match(text[m.end() : m.end() + 60])
            for cited in {g.group(1) for g in (before, after) if g}:
                if cited not in names["files"][path]:
                    continue  # not a name defined in that file (a variable, a word)
                at_line = names["lines"].get(f"{path}:{first}")
                line = text.count(chr(10), 0, m.start()) + 1
                opens = names["files"][path][cited]
                if any(first - 3 <= n <= last + 3 for n in opens):
                    continue  # it opens within the cited lines (a range: anywhere in it)
                if at_line is None:
                    found.append(f"{where}:{line}: {path}:{first}: not in citation_names.json "
                                 "(run tools/citation_names.py)")  # fmt: skip
                elif cited not in at_line:
                    found.append(f"{where}:{line}: {cited} is not at {path}:{first} "
                                 f"({', '.join(at_line) or 'no def there'})")  # fmt: skip
    return found


def _names():
    import json

    return json.loads((Path(__file__).parent / "citation_names.json").read_text(encoding="utf-8"))


def test_the_name_check_catches_a_wrong_line():
    """``RecurrentLayer.step_fprop`` cited at the class's line (839) fails, at 1018 passes."""
    names = _names()
    lines = {"groundhog/layers/rec_layers.py": 1542}
    bad = {"a.py": "``RecurrentLayer.step_fprop`` (rec_layers.py:839), without the mask"}
    good = {"a.py": "``RecurrentLayer.step_fprop`` (rec_layers.py:1018), without the mask"}
    after = {"a.py": "(rec_layers.py:839, step_fprop)"}
    assert misnamed_citations(good, names, lines) == []
    assert misnamed_citations(bad, names, lines) == [
        "a.py:1: step_fprop is not at groundhog/layers/rec_layers.py:839 (RecurrentLayer)"
    ]
    assert len(misnamed_citations(after, names, lines)) == 1


def test_every_named_citation_names_what_stands_there():
    files = text_files(ROOT)
    texts = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in files}
    assert misnamed_citations(texts, _names(), LINES) == []
