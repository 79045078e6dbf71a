"""Vocabularies found by content: a renamed ``vocab.en.pkl`` (``dicts/en.vocab.pkl``) is the
pickle whose words and ids fit the state (issue 43, item 5).

``preprocess.py -d`` writes word -> id with ``<s>``/``</s>`` -> 0, ``UNK`` -> 1 and words
from 2 up to ``V - 1``; the end of sequence is ``null_sym = V`` and ``n_sym = V + 1``
(docs/recordings.md, "Files").  So a word -> id file fits ``word_indx`` when its ids are
``0 .. null_sym_source - 1``, all of them used; an id -> word file (``invert-dict.py``) fits
``indx_word`` when its ids are the same and it inverts the chosen word -> id file.  The
checkpoint's embeddings (``W_0_enc_approx_embdr``: ``n_sym_source`` rows) were checked
against the same ``n_sym_*`` when the model was opened.  Every pickle is read by the
project's safe unpickler only (:func:`legacy_states.unpickle.safe_load_pickle`, via
:mod:`groundhog_port.legacy.vocab`).  Where both sides have one size, a file is taken for a
side only when its name says the language (``en.vocab.pkl``); two files that fit one key
equally are never guessed between.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import lookup
from ..errors import LegacyInputError
from . import vocab

#: state key -> (side, inverted): the four vocabulary keys (sample.py:237-247)
KEYS = {
    "word_indx": ("source", False),
    "indx_word": ("source", True),
    "word_indx_trgt": ("target", False),
    "indx_word_target": ("target", True),
}
#: pickles read at most per search, and the largest one read (a vocabulary of 500,000 words
#: is about 10 MB)
MAX_CANDIDATES = 200
MAX_BYTES = 64 << 20


@dataclass(frozen=True)
class Found:
    """A vocabulary file chosen for a state key, and why."""

    key: str
    path: Path
    why: str


def pickles(folders: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The ``.pkl`` files (not states) of ``folders``, any depth, links not followed."""
    out: list[Path] = []
    seen: set[Path] = set()
    for folder in folders:
        for top, dirs, names in lookup.walk(folder):  # iterative, bounded in depth
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for n in names:
                p = Path(top) / n
                if n.endswith(".pkl") and not n.endswith("state.pkl") and p not in seen:
                    seen.add(p)
                    try:
                        if p.is_file() and not p.is_symlink() and p.stat().st_size <= MAX_BYTES:
                            out.append(p)
                    except OSError:
                        continue
                if len(out) >= MAX_CANDIDATES:
                    return out
    return out


def _read(path) -> tuple[dict[str, int] | None, dict[int, str] | None]:
    try:
        return vocab.load_word2idx(path), None
    except LegacyInputError:
        pass
    try:
        return None, dict(vocab.load_idx2word(path))
    except LegacyInputError:
        return None, None


def _inverts(i2w: dict, w2i: dict) -> bool:
    """Whether id -> word file ``i2w`` gives back every word of ``w2i`` (its own ``<s>`` and
    ``</s>`` aside: GroundHog's inverse files name those ids otherwise)."""
    return all(i2w.get(i) == w for w, i in w2i.items() if w not in ("<s>", "</s>"))


def _says_language(path: Path, lang: str) -> bool:
    return lang in path.name.split(".")[:-1] or lang in path.name.replace("-", "_").split("_")


def find_by_content(
    state: Mapping[str, object],
    keys: Collection[str],
    folders: Sequence[str | os.PathLike[str]],
    langs: tuple[str, str] = ("en", "fr"),
    near: str | os.PathLike[str] | None = None,
) -> dict[str, Found]:
    """The files of ``folders`` (any depth) fitting the vocabulary ``keys`` of ``state``
    (module docstring); keys no file fits, or two different files fit equally, are left
    out (copies of one file: the nearest to folder ``near``)."""
    near = near if near is not None else folders[0]
    sizes = {}
    for side in ("source", "target"):
        null = state.get(f"null_sym_{side}")
        if not isinstance(null, numbers.Integral) or isinstance(null, bool) or null < 1:
            return {}
        sizes[side] = null
    # one pickle held at a time (24 of 6.8 MB held at once: +879 MiB): first which sides'
    # ids each one's fit, then the inverse files checked against their partner, two at a time
    ids_fit: dict[Path, tuple[set, set]] = {}
    for p in pickles(folders):
        w2i, i2w = _read(p)
        ids_fit[p] = (
            {s for s in sizes if w2i and set(w2i.values()) == set(range(sizes[s]))},
            {s for s in sizes if i2w and set(i2w) == set(range(sizes[s]))},
        )
        del w2i, i2w
    lang = {"source": langs[0], "target": langs[1]}
    out: dict[str, Found] = {}
    for key in ("word_indx", "word_indx_trgt", "indx_word", "indx_word_target"):
        if key not in keys:
            continue
        side, inverted = KEYS[key]
        null = sizes[side]
        fits = [p for p, (w, i) in ids_fit.items() if side in (i if inverted else w)]
        partner = out.get("word_indx" if side == "source" else "word_indx_trgt")
        if inverted and partner is not None and fits:
            w2i_partner = _read(partner.path)[0] or {}
            fits = [p for p in fits if _inverts(_read(p)[1] or {}, w2i_partner)]
            del w2i_partner
        if len(fits) > 1 and sizes["source"] == sizes["target"]:
            fits = [p for p in fits if _says_language(p, lang[side])]
        if len(fits) > 1 and lookup.same_bytes(fits):  # copies of one file: the nearest
            fits = sorted(fits, key=lambda p: (lookup.folder_distance(near, p.parent), str(p)))[:1]
        if len(fits) != 1:
            continue
        what = "an id -> word" if inverted else "a word -> id"
        why = (
            f"by content: {what} pickle with the ids 0..{null - 1} of the state's "
            f"null_sym_{side}={null} (n_sym_{side}={null + 1}, the rows of the checkpoint's "
            f"{side} embeddings)"
            + (", inverting the word -> id file" if inverted else "")
            + (f", its name says .{lang[side]}" if sizes["source"] == sizes["target"] else "")
        )
        out[key] = Found(key, fits[0], why)
    return out
