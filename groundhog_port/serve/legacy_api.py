"""The web demo's query API (experiments/nmt/web-demo/sample_server.py:26-93).

``GET /?source=S&ignore_unk=0|1&beamwidth=N`` answers, with status 200 and
``Content-type: text/html``, ``urllib.quote(translation + '\\n' + ','.join(unknown_words))``
where ``translation`` is the detokenized first hypothesis of ``sample(...,
normalize=True)`` and ``unknown_words`` the tokens whose id is 1.

Kept quirks, each answered as the original answered it:

* the query is cut at ``&`` and each part at ``=``, the value being the text up to the
  next ``=`` (sample_server.py:34-46); a later parameter wins; only ``source`` is
  unquoted (``unquote_plus``, line 52); ``ignore_unk`` and ``beamwidth`` go through
  ``int()`` (any non-zero ``ignore_unk`` is true); ``beamwidth`` defaults to 10, not to
  the server's ``--beam-size`` (the original ignored that flag; here it is the default);
* ``normalize=True`` divides the costs by the hypothesis lengths, but the answer is
  ``trans[0]``: the hypotheses stay in raw-cost order (sample.py:150-158), so the
  answer is the lowest *raw* cost hypothesis, the line ``sample.py --beam-size N``
  writes without ``--normalize``;
* the detokenizer's output keeps its newline, so a non-empty translation is followed
  by two newlines (index.html's parser skips the empty line);
* unknown words are the *tokenized* (escaped) words whose id is 1 -- the literal 1 of
  line 92, which is ``unk_sym_source`` in every GroundHog state -- also words whose id
  is beyond ``n_sym_source`` (``parse_input`` maps them to UNK);
* ``urllib.quote`` of Python 2: ``/`` and ``A-Za-z0-9_.-`` stay, everything else is
  %-encoded from UTF-8 -- ``~`` too (Python 3 keeps it).

Deliberate differences: a request the original could not answer (no ``?``, a part
without ``=``, a non-integer, a sentence sample.py crashes on) made it raise and close
the connection without an answer; here it gets a 4xx with a one-line JSON error.  The
original's 400 without a ``source`` had an empty body; here it has that JSON line.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import SupportsInt
from urllib.parse import quote, unquote_plus

#: sample_server.py:38
DEFAULT_BEAMWIDTH = 10
#: the id sample_server.py:92 reports as unknown
LEGACY_UNK_ID = 1


class QueryError(ValueError):
    """A query the original could not answer (it raised); the message is for the client."""


@dataclass
class LegacyQuery:
    source: str
    ignore_unk: bool
    beamwidth: int
    #: extension: ``tokenized=1`` sends pre-tokenized text (the original had no such option)
    tokenized: bool = False


def _int(name: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise QueryError(f"{name}={value[:40]!r} is not an integer") from None


def parse_query(query: str, default_beamwidth: int = DEFAULT_BEAMWIDTH) -> LegacyQuery | None:
    """``LegacyQuery`` of the text after ``?`` (sample_server.py:34-52), or ``None`` without
    ``source`` (the original's 400).  Raises :class:`QueryError` where the original raised."""
    source: str | None = None
    ignore_unk, beamwidth, tokenized = False, default_beamwidth, False
    for part in query.split("&"):
        cc = part.split("=")
        if cc[0] in ("source", "ignore_unk", "beamwidth", "tokenized") and len(cc) < 2:
            raise QueryError(f"parameter {cc[0]!r} without a value")
        if cc[0] == "source":
            source = cc[1]
        elif cc[0] == "ignore_unk":
            ignore_unk = _int("ignore_unk", cc[1]) != 0
        elif cc[0] == "beamwidth":
            beamwidth = _int("beamwidth", cc[1])
        elif cc[0] == "tokenized":
            tokenized = _int("tokenized", cc[1]) != 0
    if source is None:
        return None
    return LegacyQuery(unquote_plus(source, errors="replace"), ignore_unk, beamwidth, tokenized)


def quote_py2(text: str) -> str:
    """Python 2's ``urllib.quote(text)`` of the UTF-8 bytes of ``text`` (safe: ``/``)."""
    return quote(text, safe="/").replace("~", "%7E")


def unknown_words(tokens: Iterable[str], seq: Iterable[SupportsInt]) -> list[str]:
    """sample_server.py:90-92: the tokens whose id is 1, in order (``zip`` stops at the
    shorter: ``seq`` has one more entry, end-of-sequence)."""
    return [w for w, i in zip(tokens, seq) if int(i) == LEGACY_UNK_ID]


def answer(detokenized_line: str, unknown: Iterable[str]) -> str:
    """The body of the original's 200 answer (sample_server.py:58): ``detokenized_line``
    is the detokenizer's output with its newline (:meth:`MosesText.detokenize_legacy`)."""
    return quote_py2(detokenized_line + "\n" + ",".join(unknown))
