"""Moses tokenisation as the web demo ran it, with sacremoses instead of Perl subprocesses.

The demo piped each source sentence through ``tokenizer.perl -l en -q -`` and the chosen
translation through ``detokenizer.perl -l fr -q -`` (sample_server.py:76-88,154-155).
sacremoses ports those scripts; on the shared test sentences (``test.en`` of every
recorded case, re-tokenised from their detokenised form) and on the recorded French
translations it gives the scripts' output (parity_tests/serve/test_serve_api.py; compared
against the Perl scripts of the GroundHog commit while porting, see docs/serve.md).

Kept behaviour of the scripts as the demo called them:

* Perl reads line by line: a sentence holding newlines is tokenised line by line;
* the tokenizer escapes (``&apos;``, ``&quot;``, ``&amp;`` ...), as the training data are;
* the detokenizer copies a line that looks like a tag (``<...>``) unchanged, and appends
  a newline to every line it writes -- the demo's answer then holds two newlines
  between the translation and the unknown words (see :mod:`.legacy_api`); an empty
  translation gives no line at all.
"""

import re

from sacremoses import MosesDetokenizer, MosesTokenizer

#: detokenizer.perl leaves such lines alone (``/^<.+>$/ || /^\s*$/``)
_TAG_LINE = re.compile(r"<.+>")


class MosesText:
    """Tokenizer for the source language, detokenizer for the target language."""

    def __init__(self, source_lang: str = "en", target_lang: str = "fr") -> None:
        self.source_lang, self.target_lang = source_lang, target_lang
        self._tok = MosesTokenizer(lang=source_lang)
        self._detok = MosesDetokenizer(lang=target_lang)

    def tokenize(self, text: str) -> list[str]:
        """Tokens of ``text`` as ``tokenizer.perl -l SRC -q`` writes them (escaped)."""
        tokens: list[str] = []
        for line in text.split("\n"):
            tokens.extend(self._tok.tokenize(line, escape=True))
        return tokens

    def detokenize(self, sentence: str) -> str:
        """``sentence`` (words joined by spaces) as ``detokenizer.perl -l TRG -q`` writes it,
        without its trailing newline."""
        if not sentence:
            return ""
        if _TAG_LINE.fullmatch(sentence) or not sentence.strip():
            return sentence
        out: str = self._detok.detokenize(sentence.split(" "), return_str=True, unescape=True)
        return out  # (sacremoses has no type information)

    def detokenize_legacy(self, sentence: str) -> str:
        """What the demo read back from the detokenizer: the line with its newline, or ``""``
        when the translation is empty (nothing written to the script, nothing read back)."""
        return self.detokenize(sentence) + "\n" if sentence else ""
