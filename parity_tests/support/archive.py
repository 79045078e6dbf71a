"""A small archive of old experiments in the layouts users keep, built from the shared
recorded cases (every file in it was written by the original GroundHog programs; subsets
of lines are taken where noted -- sample.py translates each line on its own, so the first
lines of its output are its output for the first lines of the test set)."""

import hashlib
import os
import shutil
from pathlib import Path

MAX_SENTENCES = 4
VOCABULARIES = ("vocab.en.pkl", "ivocab.en.pkl", "vocab.fr.pkl", "ivocab.fr.pkl")


def _copy(src, dst, lines=None):
    dst.parent.mkdir(parents=True, exist_ok=True)
    if lines is None:
        shutil.copyfile(src, dst)
    else:
        text = src.read_text(encoding="utf-8").splitlines(keepends=True)
        dst.write_text("".join(text[lines]), encoding="utf-8")


def _copy_all(src, dst, names):
    for name in names:
        _copy(src / name, dst / name)


def _checkpoint(case):
    """A recorded case's state and model files."""
    return (f"{case}_state.pkl", f"{case}_model.npz")


def build_archive(legacy, root):
    """Five experiments under ``root``; returns the ``--data-dir`` the archive needs.

    * ``2015/search/``: a whole recorded case (state, model, vocabularies, test set, six
      trans files with sample.py's stdout, score.py outputs, ``trace.h5``); its
      ``scores_h5_train20.txt`` needs the training corpora, which are not in the archive;
    * ``2015/encdec_run/``: state and model only -- the vocabularies are in ``vocabularies/``
      (so the state's stored paths fail and ``--data-dir`` is needed), the test set renamed
      ``newstest.en``/``newstest.fr``;
    * ``crashed/search_variant/``: a sample.py run that crashed: lines 33-40 of the test set,
      the 3 lines the original wrote before dying on the 4th (line 36 of the recording) and
      its traceback ``sample_beam5_error.txt``;
    * ``phrase/``: the test set only in the sibling ``data/`` folder, and an output whose
      name does not say its settings (``trans_final.txt``);
    * ``broken/``: a state without its model.
    """
    v = root / "vocabularies"
    _copy_all(legacy / "encdec", v, VOCABULARIES)
    s = legacy / "search"
    for p in s.iterdir():
        if p.name != "timings.txt" and not p.name.endswith("timing.npz"):
            _copy(p, root / "2015" / "search" / p.name)
    e, d = legacy / "encdec", root / "2015" / "encdec_run"
    outputs = ("trans_beam5.txt", "trans_beam10_normalize.txt", "sample_beam5_stdout.txt")
    _copy_all(e, d, _checkpoint("encdec") + outputs)
    _copy(e / "test.en", d / "newstest.en")
    _copy(e / "test.fr", d / "newstest.fr")
    sv, d = legacy / "search_variant", root / "crashed" / "search_variant"
    _copy_all(sv, d, _checkpoint("search_variant") + VOCABULARIES + ("sample_beam5_error.txt",))
    _copy(sv / "test.en", d / "test.en", slice(32, 40))
    _copy(sv / "test.fr", d / "test.fr", slice(32, 40))
    _copy(sv / "trans_beam5.txt", d / "trans_beam5.txt", slice(32, 40))
    ph, d = legacy / "phrase", root / "phrase"
    outputs = ("trans_beam1.txt", "scores_batch.txt", "sample_beam1_stdout.txt")
    _copy_all(ph, d, _checkpoint("phrase") + VOCABULARIES + outputs)
    _copy(ph / "trans_beam10.txt", d / "trans_final.txt")
    _copy(ph / "test.en", root / "data" / "test.en")
    _copy(ph / "test.fr", root / "data" / "test.fr")
    _copy(ph / "phrase_state.pkl", root / "broken" / "phrase_state.pkl")
    return v


def tree_digest(root):
    """sha256 over every path, file content, mode and modification time under ``root``."""
    h = hashlib.sha256()
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        for n in sorted(names) + [f"{x}/" for x in dirs]:
            p = Path(folder) / n.rstrip("/")
            st = p.lstat()
            h.update(f"{p.relative_to(root)}|{st.st_mode}|{st.st_mtime_ns}|".encode())
            if p.is_file():
                h.update(p.read_bytes())
    return h.hexdigest()
