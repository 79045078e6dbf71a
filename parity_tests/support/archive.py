"""A small archive of old experiments in the layouts users keep, built from the shared
recorded cases (every file in it was written by the original GroundHog programs; subsets
of lines are taken where noted -- sample.py translates each line on its own, so the first
lines of its output are its output for the first lines of the test set)."""

import hashlib
import json
import os
import shutil
import tarfile
import zipfile
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


#: one experiment of the shared ``search`` case: its checkpoint, vocabularies, test set and
#: the beam-1 translations sample.py wrote
SEARCH_RUN = (
    "search_state.pkl", "search_model.npz", *VOCABULARIES, "test.en", "test.fr", "trans_beam1.txt"
)  # fmt: skip


def search_run(legacy, folder):
    """:data:`SEARCH_RUN` copied from ``legacy/search`` into ``folder`` (made)."""
    _copy_all(legacy / "search", folder, SEARCH_RUN)
    return folder


def check_sacrebleu(got, hyp, ref, tokenize):
    """A report's BLEU entry ``got`` is sacrebleu's own ``corpus_bleu`` of ``hyp`` against
    ``ref`` with ``tokenize`` (its signature says so), and not the other tokenizer's figure
    (the option reached it)."""
    import pytest
    import sacrebleu

    want = sacrebleu.corpus_bleu(hyp, [ref], tokenize=tokenize).score
    assert got["sacrebleu"] == pytest.approx(want, abs=1e-9)
    assert f"tok:{tokenize}" in got["signature"]
    other = "char" if tokenize == "none" else "none"
    assert got["sacrebleu"] != pytest.approx(
        sacrebleu.corpus_bleu(hyp, [ref], tokenize=other).score, abs=1e-6
    )


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


def _link(src, dst):
    """A copy (archive reads no link leading outside ROOT or a --data-dir: issue 40)."""
    _copy(src, dst)


def build_user_archive(legacy, root, missing_model=False, only=None):
    """An archive as people keep them (issue 35), of copies of the shared recordings:

    * ``rnnsearch/``, ``rnnencdec/``: states and models renamed ``run3_state.pkl`` /
      ``run3_model.npz``, two trans files each (sample.py's stdout beside one), and for
      ``rnnsearch`` score.py's ``scores_batch.txt``;
    * ``rnnsearch_big/``: a crashed sample.py run (``search_variant``: 35 lines written of
      the 40, its traceback ``sample_beam5_error.txt``);
    * ``2015-search/run1/``: the phrase case, its test set two levels up;
    * ``rnnencdec_scored/``: score.py's ``scores_batch.txt`` only (no translation to tell the
      test set);
    * ``vocab/``: the vocabularies, once for all (the states' stored paths fail);
    * ``data/newstest2012.{en,fr}``: the test set, once for all, renamed, beside
      ``data/dev.{en,fr}``, 40 other lines (the first of the training corpus);
    * ``missing/`` (``missing_model``): a state without its model.

    ``only``: the experiment folders to make (default all).  Returns ``{experiment folder: (recorded case, [trans files])}``."""
    experiments = {
        "rnnsearch": ("search", ["trans_beam1.txt", "trans_beam10_normalize.txt"]),
        "rnnencdec": ("encdec", ["trans_beam5.txt", "trans_beam10.txt"]),
        "rnnsearch_big": ("search_variant", ["trans_beam5.txt"]),
        "2015-search/run1": ("phrase", ["trans_beam1.txt"]),
        "rnnencdec_scored": ("encdec", []),  # score.py's output only
    }
    experiments = {k: v for k, v in experiments.items() if only is None or k in only}
    for folder, (case, trans) in experiments.items():
        src, d = legacy / case, root / folder
        state, model = _checkpoint(case)
        _link(src / state, d / "run3_state.pkl")
        _link(src / model, d / "run3_model.npz")
        for name in trans:
            _link(src / name, d / name)
        stem = trans[-1][len("trans_") : -len(".txt")] if trans else None
        for log in (f"sample_{stem}_stdout.txt", f"sample_{stem}_error.txt") if stem else ():
            if (src / log).is_file():
                _link(src / log, d / log)
    for folder, case in (("rnnsearch", "search"), ("rnnencdec_scored", "encdec")):
        if folder in experiments:
            _link(legacy / case / "scores_batch.txt", root / folder / "scores_batch.txt")
    for name in VOCABULARIES:
        _link(legacy / "encdec" / name, root / "vocab" / name)
    for lang in ("en", "fr"):
        _link(legacy / "encdec" / f"test.{lang}", root / "data" / f"newstest2012.{lang}")
        # a decoy of the same length, first in name order: only the content tells them apart
        _copy(legacy / "data" / f"train.{lang}", root / "data" / f"dev.{lang}", slice(0, 40))
    if missing_model:
        _link(legacy / "phrase" / "phrase_state.pkl", root / "missing" / "run1_state.pkl")
    return experiments


def tree_size(root):
    """Files under ``root`` plus the members of each pack (what the inventory accounts for),
    counted with the standard library's own readers: every member but a folder, the ones
    unpacking does not write (a link, a FIFO) included, since each has its row saying so."""
    n = 0
    for p in root.rglob("*"):
        if not p.is_file():
            continue
        n += 1
        if p.suffix == ".zip":
            with zipfile.ZipFile(p) as zf:
                n += sum(not i.is_dir() for i in zf.infolist())
        elif ".tar" in p.name or p.name.endswith(".tgz"):
            with tarfile.open(p) as tf:
                n += sum(not m.isdir() for m in tf.getmembers())
    return n


def without_origin(report):
    """A report's experiments without what says where an entry came from (discovered or
    from the plan): a plan's run and a discovery's compare equal."""
    text = json.dumps(report["experiments"], sort_keys=True)
    return json.loads(text.replace('"from the plan"', '"discovered"'))
