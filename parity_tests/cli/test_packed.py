"""Compressed text files and packed experiments (issue 43, item 3).

Labs keep test sets as ``newstest2012.en.gz`` in a shared folder and finished runs as
``run7.tar.gz``.  Every command that reads a text file reads the gzip, bzip2 or xz file as
the text it holds (:func:`groundhog_port.untrusted.iter_raw_lines`), and ``archive`` reads a
pack as the folder it holds (:mod:`groundhog_port.tasks.packs`), under bounds that refuse a
hostile pack with one line and write nothing outside.  Expected outputs are the original's
recorded files (``../shared/legacy_traces/search``).
"""

import bz2
import gzip
import io
import json
import lzma
import shutil
import stat
import tarfile
import zipfile

import pytest

from groundhog_port.errors import LegacyInputError
from groundhog_port.legacy.data import first_text_lines, read_text_lines
from groundhog_port.tasks import packs
from groundhog_port.tasks.rescore import perl_lines, read_lines
from parity_tests.support.archive import tree_size
from parity_tests.support.inprocess import run_cli

N = 4  # sentences: sample.py translates each line alone, so its first lines are its output
VOCABULARIES = ("vocab.en.pkl", "ivocab.en.pkl", "vocab.fr.pkl", "ivocab.fr.pkl")
COMPRESS = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}


def _head(path, n=N):
    return b"".join(path.read_bytes().splitlines(keepends=True)[:n])


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_compressed_text_reads_as_its_text(legacy_root, tmp_path, suffix):
    """Each reader of text files (score.py's, sacrebleu's, multi-bleu's, the first lines of a
    candidate) gives for ``test.en.<suffix>`` exactly what it gives for ``test.en``."""
    plain = legacy_root / "search" / "test.en"
    packed = tmp_path / f"test.en.{suffix}"
    packed.write_bytes(COMPRESS[suffix](plain.read_bytes()))
    assert read_text_lines(packed) == read_text_lines(plain)
    assert read_lines(packed) == read_lines(plain)
    assert perl_lines(packed) == perl_lines(plain)
    assert first_text_lines(packed, 3) == first_text_lines(plain, 3)


def test_translate_and_score_read_gz(legacy_root, tmp_path):
    """``translate --source test.en.gz`` writes the original's trans file byte for byte;
    ``score`` of gzipped source and target prints what it prints for the plain files."""
    case = legacy_root / "search"
    for name in ("test.en", "test.fr"):
        (tmp_path / f"{name}.gz").write_bytes(gzip.compress(_head(case / name)))
        (tmp_path / name).write_bytes(_head(case / name))
    common = ("--state", case / "search_state.pkl", case / "search_model.npz")
    out = tmp_path / "trans.txt"
    r = run_cli("translate", "--beam-search", "--beam-size", "10", "--source",
                tmp_path / "test.en.gz", "--trans", out, *common)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == _head(case / "trans_beam10.txt")
    scores = []
    for suffix in (".gz", ""):
        r = run_cli("score", "--mode", "batch", "--allow-unk", "--src",
                    tmp_path / f"test.en{suffix}", "--trg", tmp_path / f"test.fr{suffix}",
                    *common)  # fmt: skip
        assert r.returncode == 0, r.stderr
        scores.append(r.stdout)
    assert scores[0] == scores[1] and len(scores[0].split()) == N


def test_bleu_reads_gz(legacy_root, tmp_path):
    """``bleu`` of a gzipped hypothesis and reference prints the plain files' figures."""
    case = legacy_root / "search"
    (tmp_path / "hyp.gz").write_bytes(gzip.compress((case / "trans_beam10.txt").read_bytes()))
    (tmp_path / "ref.gz").write_bytes(gzip.compress((case / "test.fr").read_bytes()))
    got = [
        run_cli("bleu", "--hyp", h, "--ref", f, "--multi-bleu")
        for h, f in ((tmp_path / "hyp.gz", tmp_path / "ref.gz"),
                     (case / "trans_beam10.txt", case / "test.fr"))
    ]  # fmt: skip
    assert [g.returncode for g in got] == [0, 0], got[0].stderr
    assert got[0].stdout == got[1].stdout and "BLEU" in got[0].stdout


def _gzip_bomb(path, line, members):
    """``members`` gzip members, each 1 MiB of ``line`` repeated: about ``members`` MiB of
    text in a file of about ``members`` KiB."""
    one = gzip.compress(line * ((1 << 20) // len(line)), compresslevel=9)
    with open(path, "wb") as f:
        for _ in range(members):
            f.write(one)


@pytest.mark.parametrize("line", [b"\n", b"x" * 60_000 + b"\n", b"\0" * 4096])
def test_gzip_bomb_as_a_test_set_is_one_line(tmp_path, line, monkeypatch):
    """A gzip bomb of 1 GiB of text given as a test set stops at the parse budget (many
    short lines, lines of 60 kB) or the line limit (no newline at all): one line, exit 2,
    never a traceback and never the whole stream.  (A budget of 64 MiB keeps the test
    short: the default's 256 MiB stops the same way, 4 times later.)"""
    monkeypatch.setenv("GROUNDHOG_PARSE_BUDGET_MIB", "64")
    bomb = tmp_path / "bomb.en.gz"
    _gzip_bomb(bomb, line, 1024)
    with pytest.raises(LegacyInputError, match="parse budget|line-length limit") as err:
        read_text_lines(bomb)
    assert "gzip" in str(err.value) or "line 1 " in str(err.value)
    r = run_cli("bleu", "--hyp", bomb, "--ref", bomb)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "bomb.en.gz" in r.stderr


def test_damaged_gzip_is_one_line(legacy_root, tmp_path):
    """A truncated gzip test set: one line naming the file and the stream, exit 2."""
    data = gzip.compress((legacy_root / "search" / "test.en").read_bytes())
    bad = tmp_path / "test.en.gz"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(LegacyInputError, match="damaged gzip stream"):
        read_text_lines(bad)


# ------------------------------------------------------------------------------------------
# packed experiments
# ------------------------------------------------------------------------------------------
def _run_folder(legacy_root, folder):
    """A sample.py run of the shared ``search`` case on its first N lines."""
    case = legacy_root / "search"
    folder.mkdir(parents=True)
    for name in ("search_state.pkl", "search_model.npz", *VOCABULARIES):
        shutil.copyfile(case / name, folder / name)
    (folder / "trans_beam10.txt").write_bytes(_head(case / "trans_beam10.txt"))
    return folder


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_archive_redoes_a_packed_run_with_gz_test_sets(legacy_root, tmp_path, kind):
    """``lab/run7.tar.gz`` (or ``.zip``) holding a run, its test set gzipped in a shared
    folder two levels up: ``archive ROOT`` re-does it identically, naming the pack's files
    ``lab/run7.<kind>/...`` and the test set by its ``.gz`` name; nothing written in ROOT."""
    root = tmp_path / "lab"
    run = _run_folder(legacy_root, tmp_path / "scratch" / "run7")
    (root / "runs").mkdir(parents=True)
    pack = root / "runs" / f"run7.{kind}"
    if kind == "zip":
        with zipfile.ZipFile(pack, "w") as zf:
            for p in sorted(run.iterdir()):
                zf.write(p, f"run7/{p.name}")
    else:
        with tarfile.open(pack, "w:gz") as tf:
            tf.add(run, "run7")
    shared = root / "shared" / "corpora"
    shared.mkdir(parents=True)
    for name in ("test.en", "test.fr"):
        data = _head(legacy_root / "search" / name)
        (shared / f"newstest2012.{name[-2:]}.gz").write_bytes(gzip.compress(data))
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    out = tmp_path / "report"
    r = run_cli("archive", root, "--out", out, "--plots", "0")
    assert r.returncode == 0, r.stderr
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    (e,) = report["experiments"]
    assert e["id"] == f"runs/run7.{kind}/run7/search_"
    assert e["state"] == f"runs/run7.{kind}/run7/search_state.pkl"
    assert e["not_done"] == []
    assert e["files"]["test"]["source"] == "shared/corpora/newstest2012.en.gz"
    assert e["files"]["test"]["reference"] == "shared/corpora/newstest2012.fr.gz"
    (row,) = e["reproduction"]
    assert row["identical"] == row["compared"] == N
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before


def _tar_with(tmp_path, name, add):
    pack = tmp_path / name
    with tarfile.open(pack, "w:gz") as tf:
        add(tf)
    return pack


def _member(tf, name, data=b"x", **attrs):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for k, v in attrs.items():
        setattr(info, k, v)
    tf.addfile(info, io.BytesIO(data) if info.isfile() else None)


@pytest.mark.parametrize(
    "name, add, match",
    [
        ("dotdot.tar.gz", lambda tf: _member(tf, "run/../../x"), "climbs out"),
        ("absolute.tar.gz", lambda tf: _member(tf, "/tmp/x"), "absolute path"),
    ],
)
def test_hostile_pack_refused_in_one_line(tmp_path, name, add, match):
    """A member ``../x`` or ``/x``: the pack is refused with one line naming it, and nothing
    is left written anywhere."""
    pack = _tar_with(tmp_path, name, add)
    into = _into(tmp_path)
    with pytest.raises(LegacyInputError, match=match) as err:
        packs.unpack(pack, into)
    assert name in str(err.value) and "\n" not in str(err.value)
    assert list(into.iterdir()) == [] and not (tmp_path / "x").exists()


def test_pack_of_100000_members_refused_early(tmp_path):
    """100,000 members: refused at the first member past the limit (streamed, never listed
    whole), in one line."""
    pack = tmp_path / "huge.tar"
    with tarfile.open(pack, "w") as tf:
        for i in range(100_000):
            _member(tf, f"f{i}", b"")
    with pytest.raises(LegacyInputError, match="more than 10000 members"):
        packs.unpack(pack, _into(tmp_path))


def _into(tmp_path):
    into = tmp_path / "into"
    into.mkdir()
    return into


def test_member_declaring_1_gib_refused_before_writing(tmp_path):
    """A header declaring a 1 GiB member in a pack of a few hundred bytes: refused by the
    ratio bound before a byte of it is written (the data is not even there)."""
    info = tarfile.TarInfo("run/model.npz")
    info.size = 1 << 30
    raw = io.BytesIO()
    raw.write(info.tobuf())
    raw.write(b"\0" * 1024)
    pack = tmp_path / "liar.tar.gz"
    pack.write_bytes(gzip.compress(raw.getvalue()))
    into = _into(tmp_path)
    with pytest.raises(LegacyInputError, match="declares 1073741824 bytes"):
        packs.unpack(pack, into)
    assert list(into.iterdir()) == []


def test_tar_bomb_stopped_at_the_ratio(tmp_path):
    """A member of 64 MiB of zeros packed into some 64 KB: refused at 200 times the pack's
    size (its header, before any write)."""
    pack = tmp_path / "bomb.tar.gz"
    with tarfile.open(pack, "w:gz", compresslevel=1) as tf:
        _member(tf, "run/test.en", bytes(64 << 20))
    into = _into(tmp_path)
    with pytest.raises(LegacyInputError, match="times the pack's"):
        packs.unpack(pack, into)
    assert list(into.iterdir()) == []


def test_links_and_special_members_listed_not_written(legacy_root, tmp_path):
    """A link out (symbolic or hard), a FIFO, a pack inside the pack: not written, and
    ``archive`` lists each in the experiment's "Not done"; the rest is re-done."""
    run = _run_folder(legacy_root, tmp_path / "scratch" / "run")
    for name in ("test.en", "test.fr"):
        (run / name).write_bytes(_head(legacy_root / "search" / name))
    (run / "inner.tar.gz").write_bytes(gzip.compress(b""))
    root = tmp_path / "lab"
    root.mkdir()

    def add(tf):
        tf.add(run, "run")
        _member(tf, "run/passwd", type=tarfile.SYMTYPE, linkname="/etc/passwd")
        _member(tf, "run/hard", type=tarfile.LNKTYPE, linkname="../../etc/passwd")
        _member(tf, "run/fifo", type=tarfile.FIFOTYPE)

    _tar_with(root, "run.tgz", add)
    out = tmp_path / "report"
    r = run_cli("archive", root, "--out", out, "--plots", "0")
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    (e,) = report["experiments"]
    (row,) = e["reproduction"]
    assert row["identical"] == row["compared"] == N
    listed = " | ".join(f"{d['what']}: {d['why']}" for d in e["not_done"])
    for member in ("run/passwd", "run/hard", "run/fifo", "run/inner.tar.gz"):
        assert member in listed, listed
    assert "a link in the pack" in listed and "a pack inside a pack" in listed
    assert r.returncode == 1  # something not done
    assert not (tmp_path / "etc").exists()


def test_members_not_written_have_their_inventory_rows(tmp_path):
    """Every pack member has its row in the report's inventory (issue 50 item 1), the ones
    unpacking does not write too: a symbolic and a hard link and a FIFO in a ``.tar.gz``, a
    symbolic link in a ``.zip``, each "not used" saying why (the packs hold no experiment:
    each is one "not done" line, and the inventory is still written)."""
    root = tmp_path / "lab"
    root.mkdir()

    def add(tf):
        _member(tf, "run/notes.txt", b"notes\n")
        _member(tf, "run/model.npz", type=tarfile.SYMTYPE, linkname="/elsewhere/model.npz")
        _member(tf, "run/hard", type=tarfile.LNKTYPE, linkname="run/notes.txt")
        _member(tf, "run/fifo", type=tarfile.FIFOTYPE)

    _tar_with(root, "run.tar.gz", add)
    with zipfile.ZipFile(root / "run2.zip", "w") as zf:
        zf.writestr("run2/notes.txt", "notes\n")
        link = zipfile.ZipInfo("run2/state.pkl")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "/elsewhere/state.pkl")
    out = tmp_path / "report"
    r = run_cli("archive", root, "--out", out, "--plots", "0", "--max-sentences", "2")
    assert r.returncode == 1, r.stderr[-2000:]
    inv = json.loads((out / "report.json").read_text(encoding="utf-8"))["inventory"]
    assert len(inv) == tree_size(root) == 2 + 4 + 2
    roles = {a["file"]: a["role"] for a in inv}
    for member in ("run.tar.gz/run/model.npz", "run.tar.gz/run/hard", "run2.zip/run2/state.pkl"):
        assert roles[member].startswith("not used: a link in the pack"), roles
    assert (
        roles["run.tar.gz/run/fifo"] == "not used: a special member (device, FIFO...): not written"
    )
    # a pack is a pack, whatever its not-done line (it was "the state of experiment ...")
    assert roles["run.tar.gz"] == "a pack, unpacked: its members are rows of their own"


def test_refused_pack_is_in_the_report(legacy_root, tmp_path):
    """A damaged pack beside a good experiment: the good one is re-done, the pack is one
    "not done" line with the reason (never ignored in silence)."""
    root = tmp_path / "lab"
    _run_folder(legacy_root, root / "good")
    for name in ("test.en", "test.fr"):
        (root / "good" / name).write_bytes(_head(legacy_root / "search" / name))
    (root / "run8.tar.gz").write_bytes(b"\x1f\x8b not really gzip")
    (root / "empty.zip").write_bytes(_zip_of({"README": b"notes"}))
    out = tmp_path / "report"
    r = run_cli("archive", root, "--out", out, "--plots", "0")
    assert r.returncode == 1, r.stderr
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    by_id = {e["id"]: e for e in report["experiments"]}
    assert by_id["good/search_"]["not_done"] == []
    (damaged,) = by_id["run8.tar.gz"]["not_done"]
    assert "damaged or not a pack" in damaged["why"]
    (empty,) = by_id["empty.zip"]["not_done"]
    assert "holds no experiment" in empty["why"]


def _zip_of(files):
    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return raw.getvalue()


def test_reproduce_case_of_a_pack(legacy_root, tmp_path):
    """``reproduce --case run7.tar.gz``: the run re-done from the pack, its gzipped test set
    found beside the pack, the archived file identical; a pack of two runs is one line."""
    run = _run_folder(legacy_root, tmp_path / "scratch" / "run7")
    lab = tmp_path / "lab"
    lab.mkdir()
    with tarfile.open(lab / "run7.tar.gz", "w:gz") as tf:
        tf.add(run, "run7")
    for name in ("test.en", "test.fr"):
        (lab / f"newstest.{name[-2:]}.gz").write_bytes(
            gzip.compress(_head(legacy_root / "search" / name))
        )
    r = run_cli("reproduce", "--case", lab / "run7.tar.gz", "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["case"] == f"{lab / 'run7.tar.gz'}/run7"
    (row,) = report["files"]
    assert row["identical"] == row["compared"] == N
    with tarfile.open(lab / "two.tar", "w") as tf:
        tf.add(run, "a")
        tf.add(run, "b")
    r = run_cli("reproduce", "--case", lab / "two.tar")
    assert r.returncode == 2 and "holds 2 experiments (a, b)" in r.stderr, r.stderr
