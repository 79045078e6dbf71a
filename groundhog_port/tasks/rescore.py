"""BLEU / chrF of translation files, Moses ``multi-bleu.perl`` numbers, and line comparison.

Three ways to score a hypothesis file against one or more reference files:

* :func:`sacre_scores` -- BLEU and chrF through sacrebleu's Python API
  (``sacrebleu.metrics.BLEU`` / ``CHRF``), with sacrebleu's signature, the number to report
  today.
* :func:`multi_bleu` -- the number Moses' ``scripts/generic/multi-bleu.perl`` prints on
  already-tokenized text, which is what 2014-2015 NMT papers (and GroundHog users) quoted.
  Re-implemented here from its documented behaviour (no Perl needed):

  - tokens are the line split on ASCII whitespace (Perl ``split`` on a byte string);
  - ``-lc`` (``lowercase=True``) lowercases ASCII letters only, as Perl's ``lc`` does on
    the byte strings multi-bleu reads (``É`` stays ``É``);
  - n-grams n = 1..4; each hypothesis n-gram count is clipped by its maximum count over
    the references of that sentence;
  - the reference length of a sentence is that of the reference closest in length to the
    hypothesis, the *shorter* one on a tie; lengths are summed over the corpus;
  - p_n = correct_n / total_n over the corpus (0 when the corpus has no n-gram of order n);
  - BP = exp(1 - r/c) when c < r, else 1; BLEU = BP * exp(sum(log p_n) / 4) where a zero
    precision contributes log = -9999999999, i.e. BLEU is 0 if any p_n is 0;
  - output ``BLEU = %.2f, %.1f/%.1f/%.1f/%.1f (BP=%.3f, ratio=%.3f, hyp_len=%d, ref_len=%d)``;
    with an all-empty reference it prints ``BLEU = 0, 0/0/0/0 (BP=0, ratio=0, hyp_len=0,
    ref_len=0)``.
  - Files are read as multi-bleu.perl reads them: as bytes (``latin-1`` here, one character
    per byte, so that any file is accepted and the ASCII-only rules above hold byte for
    byte), lines end at ``\\n``, and Perl ``chop`` removes the last byte of every line:
    normally the newline, but on a final line without a newline the last real byte
    (:func:`perl_lines`, which logs a warning then).
  - Reference files may have other line counts than the hypothesis: sentence ``s`` is
    scored against the references that have a line ``s``; a hypothesis line no reference
    has counts the script's initial "closest length" 9999 as its reference length, and
    hypothesis lines past the end are never read.  :func:`multi_bleu` does the same
    (the CLI warns about it).
  - Where multi-bleu.perl dies (a hypothesis with no tokens at all but non-empty
    references: "Illegal division by zero") :func:`multi_bleu` returns BLEU 0 with BP 0
    and says so in ``note``; the CLI refuses it as an input error.

* :func:`compare_lines` -- how many lines of a reproduced output are identical to an
  archived one (for ``groundhog-port reproduce``).

Moses escapes (``&apos;`` ``&quot;`` ``&amp;`` ``&lt;`` ``&gt;`` ``&#124;`` ``&#91;``
``&#93;``), which Moses' tokenizer writes and GroundHog's corpora contain, are left alone
unless ``unescape=True`` (:func:`unescape_moses`; ``&amp;`` is replaced last so that
``&amp;lt;`` becomes ``&lt;``).
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import LegacyInputError
from ..untrusted import iter_sentences

log = logging.getLogger(__name__)

#: Moses escape -> character, applied in this order (``&amp;`` last)
MOSES_ESCAPES: tuple[tuple[str, str], ...] = (
    ("&#124;", "|"),
    ("&lt;", "<"),
    ("&gt;", ">"),
    ("&#91;", "["),
    ("&#93;", "]"),
    ("&quot;", '"'),
    ("&apos;", "'"),
    ("&amp;", "&"),
)

#: Perl's ``\s`` on byte strings: space, \t, \n, \r, \f and \v (vertical tab, Perl >= 5.18)
_PERL_WS = re.compile(r"[ \t\n\r\f\v]+")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
#: what multi-bleu.perl's my_log returns for a zero precision
_PERL_LOG_ZERO = -9999999999.0
MAX_ORDER = 4


# --------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------
def unescape_moses(line: str) -> str:
    """Replace Moses' tokenizer escapes by the characters they stand for."""
    if "&" not in line:
        return line
    for esc, char in MOSES_ESCAPES:
        line = line.replace(esc, char)
    return line


def read_lines(
    path: str | os.PathLike[str], unescape: bool = False, part: str = "src"
) -> list[str]:
    """The lines of a UTF-8 text file, without their line terminators.

    Lines are separated by ``\\n`` only (not by the other characters ``str.splitlines``
    treats as line breaks, e.g. U+2028 or \\x1c, which can occur inside a sentence); a
    ``\\r`` before the ``\\n`` is dropped.  Read line by line under the line-length limit
    and the parse budget; a WMT SGML / XML test set's lines are its segments (of ``part`` in
    a ``<dataset>``: ``"src"``, ``"ref"`` or ``"hyp"``), as sacrebleu reads them
    (:func:`groundhog_port.untrusted.iter_sentences`).
    """
    p = Path(path)
    lines, offset = [], 0
    for number, raw in iter_sentences(p, "a text file", part=part):
        chunk = raw[:-1] if raw.endswith(b"\n") else raw
        try:
            line = chunk.decode("utf-8")
        except UnicodeDecodeError as err:
            raise LegacyInputError(
                p, f"line {number}: not valid UTF-8 ({err.reason} at byte {offset + err.start})"
            ) from None
        offset += len(chunk) + 1
        if number == 1 and line.startswith("\ufeff"):
            line = line[1:]
        lines.append(line[:-1] if line.endswith("\r") else line)
    if unescape:
        lines = [unescape_moses(ln) for ln in lines]
    return lines


def read_parallel(
    hyp_path: str | os.PathLike[str],
    ref_paths: Sequence[str | os.PathLike[str]],
    unescape: bool = False,
) -> tuple[list[str], list[list[str]]]:
    """Read a hypothesis file and its reference files; all must have the same line count."""
    if not ref_paths:
        raise LegacyInputError(None, "at least one reference file (--ref) is needed")
    hyps = read_lines(hyp_path, unescape=unescape, part="hyp")
    refs = []
    for rp in ref_paths:
        lines = read_lines(rp, unescape=unescape, part="ref")
        if len(lines) != len(hyps):
            raise LegacyInputError(
                rp,
                f"{len(lines)} reference lines but the hypothesis file "
                f"{hyp_path} has {len(hyps)} lines",
            )
        refs.append(lines)
    return hyps, refs


# --------------------------------------------------------------------------------------
# multi-bleu.perl
# --------------------------------------------------------------------------------------
def perl_tokens(line: str, lowercase: bool = False) -> list[str]:
    """multi-bleu.perl's tokenization: ASCII-whitespace split, ASCII-only lowercasing."""
    if lowercase:
        line = line.translate(_ASCII_LOWER)
    return [t for t in _PERL_WS.split(line) if t]


def _ngrams(tokens: Sequence[str], n: int) -> Counter:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


@dataclass
class MultiBleuResult:
    """What multi-bleu.perl computes; ``str()`` is its output line."""

    bleu: float  # 0..1 (printed x100)
    precisions: list[float]  # p_1..p_4, 0..1
    bp: float
    ratio: float
    hyp_len: int
    ref_len: int
    correct: list[int] = field(default_factory=list)
    total: list[int] = field(default_factory=list)
    note: str = ""

    @property
    def score(self) -> float:
        """BLEU x 100, as printed."""
        return 100.0 * self.bleu

    def format(self) -> str:
        if self.ref_len == 0:
            return "BLEU = 0, 0/0/0/0 (BP=0, ratio=0, hyp_len=0, ref_len=0)"
        p = [100.0 * x for x in self.precisions]
        return "BLEU = %.2f, %.1f/%.1f/%.1f/%.1f (BP=%.3f, ratio=%.3f, hyp_len=%d, ref_len=%d)" % (
            100.0 * self.bleu,
            p[0],
            p[1],
            p[2],
            p[3],
            self.bp,
            self.ratio,
            self.hyp_len,
            self.ref_len,
        )

    __str__ = format

    def to_dict(self) -> dict:
        d = asdict(self)
        d["score"] = self.score
        d["text"] = self.format()
        return d


def multi_bleu(
    hyps: Sequence[str], refs: Sequence[Sequence[str]], lowercase: bool = False
) -> MultiBleuResult:
    """Corpus BLEU exactly as Moses' multi-bleu.perl computes it (see module docstring).

    ``hyps``: one string per sentence; ``refs``: one list of lines per reference file (of
    any length: sentence ``s`` uses the files that have a line ``s``, as multi-bleu.perl's
    ``push @{$REF[$s++]}``).
    """
    refs = [list(r) for r in refs]
    if not refs:
        raise ValueError("multi_bleu needs at least one reference set")
    correct = [0] * (MAX_ORDER + 1)
    total = [0] * (MAX_ORDER + 1)
    hyp_len = 0
    ref_len = 0
    for s, hyp in enumerate(hyps):
        words = perl_tokens(hyp, lowercase)
        c = len(words)
        max_ref: Counter = Counter()
        # multi-bleu.perl's initial values: a sentence without any reference adds 9999
        closest_diff, closest_len = 9999, 9999
        for r in refs:
            if s >= len(r):
                continue
            rw = perl_tokens(r[s], lowercase)
            diff = abs(c - len(rw))
            if diff < closest_diff:
                closest_diff, closest_len = diff, len(rw)
            elif diff == closest_diff and len(rw) < closest_len:
                closest_len = len(rw)  # equally close: the shorter reference counts
            for n in range(1, MAX_ORDER + 1):
                for g, cnt in _ngrams(rw, n).items():
                    if cnt > max_ref[g]:
                        max_ref[g] = cnt
        hyp_len += c
        ref_len += closest_len
        for n in range(1, MAX_ORDER + 1):
            for g, cnt in _ngrams(words, n).items():
                total[n] += cnt
                correct[n] += min(cnt, max_ref.get(g, 0))
    precisions = [correct[n] / total[n] if total[n] else 0.0 for n in range(1, MAX_ORDER + 1)]
    if ref_len == 0:
        return MultiBleuResult(
            0.0,
            [0.0] * 4,
            0.0,
            0.0,
            0,
            0,
            correct[1:],
            total[1:],
            note="all references empty (multi-bleu.perl prints the zero line and exits 1)",
        )
    if hyp_len == 0:
        return MultiBleuResult(
            0.0,
            precisions,
            0.0,
            0.0,
            0,
            ref_len,
            correct[1:],
            total[1:],
            note=DIES_ON_EMPTY_HYPOTHESIS,
        )
    bp = 1.0
    if hyp_len < ref_len:
        bp = math.exp(1 - ref_len / hyp_len)
    logs = [math.log(p) if p else _PERL_LOG_ZERO for p in precisions]
    bleu = bp * math.exp((logs[0] + logs[1] + logs[2] + logs[3]) / 4)
    return MultiBleuResult(
        bleu, precisions, bp, hyp_len / ref_len, hyp_len, ref_len, correct[1:], total[1:]
    )


DIES_ON_EMPTY_HYPOTHESIS = (
    "hypothesis has no tokens: multi-bleu.perl dies here "
    "(Illegal division by zero); reported as BLEU 0"
)


def perl_lines(
    path: str | os.PathLike[str], unescape: bool = False, part: str = "src"
) -> list[str]:
    """The lines of ``path`` as multi-bleu.perl sees them after ``chop``.

    Bytes are decoded as latin-1 (one character per byte: nothing is refused, and chop,
    ``split`` and ``lc`` act on bytes as in Perl); every line loses its last byte, which
    on a final line without a newline is a real character (logged).  Read line by line
    under the bounded reader's limits, as the sacrebleu path reads (a compressed file
    decompressed; a WMT SGML / XML file's lines are its segments of ``part``, each with its
    newline: :func:`groundhog_port.untrusted.iter_sentences`).
    """
    p = Path(path)
    lines = []
    for _, raw in iter_sentences(p, "a text file", part=part):
        lines.append(raw[:-1].decode("latin-1"))
        if not raw.endswith(b"\n"):
            log.warning(
                "%s: last line has no newline; multi-bleu.perl's chop drops its last "
                "byte %r, and so do we (--multi-bleu)",
                p,
                raw[-1:],
            )
    if unescape:
        lines = [unescape_moses(ln) for ln in lines]
    return lines


def multi_bleu_files(
    hyp_path: str | os.PathLike[str],
    ref_paths: Sequence[str | os.PathLike[str]],
    lowercase: bool = False,
    unescape: bool = False,
) -> MultiBleuResult:
    """:func:`multi_bleu` on files read as multi-bleu.perl reads them (:func:`perl_lines`).

    Line counts that differ are scored as multi-bleu.perl scores them, with a warning.
    """
    if not ref_paths:
        raise LegacyInputError(None, "at least one reference file (--ref) is needed")
    hyps = perl_lines(hyp_path, unescape=unescape, part="hyp")
    refs = [perl_lines(rp, unescape=unescape, part="ref") for rp in ref_paths]
    for rp, r in zip(ref_paths, refs):
        if len(r) < len(hyps):
            log.warning(
                "%s: %d lines, but the hypothesis file %s has %d: scored as "
                "multi-bleu.perl does: the hypothesis lines past its end have no "
                "reference there (where no reference has a line, multi-bleu.perl "
                "counts a reference length of 9999)",
                rp,
                len(r),
                hyp_path,
                len(hyps),
            )
        elif len(r) > len(hyps):
            log.warning(
                "%s: %d lines, but the hypothesis file %s has %d: scored as "
                "multi-bleu.perl does, on the first %d reference lines only",
                rp,
                len(r),
                hyp_path,
                len(hyps),
                len(hyps),
            )
    return multi_bleu(hyps, refs, lowercase=lowercase)


# --------------------------------------------------------------------------------------
# sacrebleu
# --------------------------------------------------------------------------------------
def bleu_tokenizers() -> list[str]:
    """The ``--tokenize`` values this sacrebleu offers."""
    try:
        from sacrebleu.metrics.bleu import _TOKENIZERS  # noqa: PLC0415 - private, but the only list

        return list(_TOKENIZERS)
    except ImportError:  # pragma: no cover - older/newer sacrebleu
        return [
            "none",
            "zh",
            "13a",
            "intl",
            "char",
            "ja-mecab",
            "ko-mecab",
            "spm",
            "flores101",
            "flores200",
        ]


@dataclass
class MetricResult:
    name: str  # "BLEU" / "chrF2"
    score: float
    signature: str
    text: str  # sacrebleu's one-line summary
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def sacre_scores(
    hyps: Sequence[str],
    refs: Sequence[Sequence[str]],
    tokenize: str = "13a",
    lowercase: bool = False,
    chrf: bool = True,
) -> dict[str, MetricResult]:
    """Corpus BLEU (and chrF) with sacrebleu's Python API; ``refs`` is one list per file."""
    try:
        from sacrebleu.metrics import BLEU, CHRF
    except ImportError as err:  # pragma: no cover - environment problem
        raise LegacyInputError(None, f"sacrebleu is not installed ({err})") from None
    if not hyps:
        raise LegacyInputError(None, "no hypothesis lines to score")
    try:
        bleu = BLEU(tokenize=tokenize, lowercase=lowercase)
    except Exception as err:  # noqa: BLE001 - unknown tokenizer or its backend missing
        raise LegacyInputError(
            None, f"sacrebleu tokenizer {tokenize!r} unavailable: {err}"
        ) from None
    b = bleu.corpus_score(list(hyps), [list(r) for r in refs])
    out = {
        "bleu": MetricResult(
            "BLEU",
            float(b.score),
            str(bleu.get_signature()),
            str(b),
            {
                "precisions": [float(p) for p in b.precisions],
                "bp": float(b.bp),
                "sys_len": int(b.sys_len),
                "ref_len": int(b.ref_len),
                "counts": list(map(int, b.counts)),
                "totals": list(map(int, b.totals)),
                "tokenize": tokenize,
                "lowercase": lowercase,
            },
        )
    }
    if chrf:
        ch = CHRF(lowercase=lowercase)
        c = ch.corpus_score(list(hyps), [list(r) for r in refs])
        out["chrf"] = MetricResult(
            c.name, float(c.score), str(ch.get_signature()), str(c), {"lowercase": lowercase}
        )
    return out


# --------------------------------------------------------------------------------------
# Archived vs reproduced outputs
# --------------------------------------------------------------------------------------
def compare_lines(
    archived: Sequence[str], reproduced: Sequence[str | None], max_diffs: int = 10
) -> dict:
    """Line-by-line comparison of an archived output with a reproduced one.

    Returns ``{"archived_lines", "reproduced_lines", "compared", "identical", "different",
    "missing", "extra", "percent_identical", "all_identical", "first_differences"}``, where
    ``percent_identical`` is relative to the longer of the two files (a missing or extra
    line counts as a difference) and ``first_differences`` lists up to ``max_diffs`` entries
    ``{"line": 1-based number, "archived": str or None, "reproduced": str or None}``.
    """
    archived = list(archived)
    reproduced = list(reproduced)
    n = min(len(archived), len(reproduced))
    identical = 0
    diffs: list[dict[str, object]] = []
    for i in range(max(len(archived), len(reproduced))):
        a = archived[i] if i < len(archived) else None
        r = reproduced[i] if i < len(reproduced) else None
        if a is not None and a == r:
            identical += 1
        elif len(diffs) < max_diffs:
            diffs.append({"line": i + 1, "archived": a, "reproduced": r})
    denom = max(len(archived), len(reproduced))
    return {
        "archived_lines": len(archived),
        "reproduced_lines": len(reproduced),
        "compared": n,
        "identical": identical,
        "different": n - identical,
        "missing": max(0, len(archived) - len(reproduced)),
        "extra": max(0, len(reproduced) - len(archived)),
        "percent_identical": 100.0 * identical / denom if denom else 100.0,
        "all_identical": identical == len(archived) == len(reproduced),
        "first_differences": diffs,
    }


def compare_files(
    archived_path: str | os.PathLike[str],
    reproduced_path: str | os.PathLike[str],
    max_diffs: int = 10,
) -> dict:
    """:func:`compare_lines` on two files (read with :func:`read_lines`)."""
    out = compare_lines(read_lines(archived_path), read_lines(reproduced_path), max_diffs=max_diffs)
    out["archived"] = str(archived_path)
    out["reproduced"] = str(reproduced_path)
    return out
