"""Bounds before parsing (issue 51 item 1): a hostile pack is refused at the bytes that
would reach ``tarfile`` / ``zipfile``, with one line naming it, before they are held.

Each case is the red team's attack scaled down to run in a second; on 06d3c0e each one
passes its bound by the factor the issue lists (the long-name header and the bomb are held
whole, the pax digits parsed in quadratic time, the zip directory read before it is
counted).  Each unpacking runs in a worker process (:mod:`groundhog_port.contained`): the
peak is its resident memory above its start (``ru_maxrss``), the seconds its CPU time.
"""

import bz2
import gzip
import io
import struct
import tarfile
import time

import pytest

from groundhog_port import containers
from groundhog_port.errors import LegacyInputError
from groundhog_port.tasks import packs
from parity_tests.support.memory import worker_peak

MiB = 1 << 20


def _header(name: str, size: int, kind: bytes) -> bytes:
    """One ustar header block (checksum filled in)."""
    info = tarfile.TarInfo(name)
    info.size, info.type = size, kind
    return info.tobuf(format=tarfile.USTAR_FORMAT)


def _member(name: str, data: bytes) -> bytes:
    pad = -len(data) % 512
    return _header(name, len(data), tarfile.REGTYPE) + data + b"\0" * pad


def _unpack(tmp_path, name: str, data: bytes):
    """``(error or None, peak bytes, seconds)`` of unpacking ``data`` saved as ``name``, in a
    worker process as ``archive`` contains its work: the peak is the worker's resident
    memory above its start (``ru_maxrss``), the seconds its CPU time."""
    pack = tmp_path / name
    pack.write_bytes(data)
    into = tmp_path / "into"
    into.mkdir(exist_ok=True)

    def unpack():
        try:
            packs.unpack(pack, into)
        except LegacyInputError as err:
            return err.problem
        return None

    return worker_peak(unpack)


def test_a_long_name_header_is_refused_before_it_is_read(tmp_path):
    """A GNU long-name header of 64 MiB (64 KiB gzipped): refused at its header."""
    zeros = gzip.compress(_header("././@LongLink", 64 * MiB, tarfile.GNUTYPE_LONGNAME))
    body = gzip.compress(b"\0" * (64 * MiB), compresslevel=1)
    error, peak, _ = _unpack(tmp_path, "run.tar.gz", zeros + body)
    assert error is not None and "a long-name header of 67108864 bytes" in error, error
    assert peak < 8 * MiB, peak


def test_pax_digits_are_refused_not_parsed(tmp_path):
    """A pax header of 64 KiB of digits (Python 3.11's parser is quadratic in it)."""
    digits = b"9" * (64 << 10)
    raw = _header("PaxHeader/x", len(digits), tarfile.XHDTYPE) + digits + b"\0" * 1024
    error, _, seconds = _unpack(tmp_path, "run.tar.gz", gzip.compress(raw))
    assert error is not None and "a pax header of 65536 bytes" in error, error
    assert seconds < 2, seconds


def test_a_bzip2_bomb_after_the_end_is_never_decompressed(tmp_path):
    """A small pack whose bzip2 stream goes on after the archive's end with 64 MiB of
    zeros (a few hundred bytes compressed): unpacked, the padding never held."""
    tar = _member("run/notes.txt", b"kept\n") + b"\0" * 1024
    bomb = bz2.BZ2Compressor()
    data = bomb.compress(tar)
    for _ in range(64):
        data += bomb.compress(b"\0" * MiB)
    data += bomb.flush()
    error, peak, _ = _unpack(tmp_path, "run.tar.bz2", data)
    assert error is None, error
    assert (tmp_path / "into" / "run.tar.bz2" / "run" / "notes.txt").read_bytes() == b"kept\n"
    assert peak < 8 * MiB, peak


def test_a_bzip2_bomb_member_stops_at_the_bound(tmp_path):
    """A member of 256 MiB of zeros in a pack of a few hundred bytes: refused at its
    header (over 200 times the pack's size), the zeros never decompressed."""
    bomb = bz2.BZ2Compressor()
    data = bomb.compress(_header("run/big.txt", 256 * MiB, tarfile.REGTYPE))
    for _ in range(256):
        data += bomb.compress(b"\0" * MiB)
    data += bomb.flush()
    error, peak, _ = _unpack(tmp_path, "run.tar.bz2", data)
    assert error is not None and "declares 268435456 bytes: over the" in error, error
    assert peak < 8 * MiB, peak


def _end_record(entries: int, dir_size: int) -> bytes:
    return b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, entries, entries, dir_size, 0, 0)


def test_a_zip_directory_is_counted_before_it_is_read(tmp_path):
    """An end record listing 60,000 entries, and a zip64 one listing 3 million (131 MiB
    of directory): refused from the end record, naming the count."""
    error, _, _ = _unpack(tmp_path, "a.zip", b"PK\x03\x04" + _end_record(60_000, 46 * 60_000))
    assert error is not None and "its directory lists 60000 members" in error, error
    n = 3_000_000
    z64 = b"PK\x06\x06" + struct.pack("<QHHIIQQQQ", 44, 45, 45, 0, 0, n, n, 46 * n, 4)
    locator = b"PK\x06\x07" + struct.pack("<IQI", 0, 4, 1)
    data = b"PK\x03\x04" + z64 + locator + _end_record(0xFFFF, 0xFFFFFFFF)
    error, peak, _ = _unpack(tmp_path, "b.zip", data)
    assert error is not None and f"its directory lists {n} members" in error, error
    assert peak < 4 * MiB, peak


def test_an_xz_stream_over_the_memory_limit_is_named(tmp_path, monkeypatch):
    """xz's decoder under a memory limit: a stream needing more is one line naming the
    limit (was "error: out of memory", no file named).  The limit is lowered here to what
    an ordinary ``xz -6`` stream (8 MiB dictionary) passes."""
    import lzma

    monkeypatch.setattr(containers, "XZ_MEMORY_LIMIT", 1 * MiB)
    data = lzma.compress(_member("run/notes.txt", b"kept\n") + b"\0" * 1024)
    error, _, _ = _unpack(tmp_path, "run.tar.xz", data)
    assert error is not None and "an xz stream that needs more than 1 MiB" in error, error


@pytest.mark.parametrize("kind", ["gzip", "bzip2"])
def test_concatenated_streams_read_as_one(kind):
    """``cat a.gz b.gz``: one stream of both, as the tools read it."""
    compress = {"gzip": gzip.compress, "bzip2": bz2.compress}[kind]
    raw = io.BytesIO(compress(b"first\n") + compress(b"second\n"))
    d = containers.Decompressed(raw, kind, 100, "x", "a test")
    out = b""
    while chunk := d.read(3):
        out += chunk
    assert out == b"first\nsecond\n"
    over = containers.Decompressed(io.BytesIO(compress(b"x" * 101)), kind, 100, "x", "a test")
    with pytest.raises(LegacyInputError, match="decompresses to more than 100 bytes"):
        while over.read(64):
            pass


def test_the_file_size_limit_while_unpacking_is_named(tmp_path):
    """``ulimit -f`` passed while unpacking: the limit and the fix named (was "damaged or
    not a pack")."""
    import os
    import subprocess
    import sys

    data = os.urandom(2 * MiB)  # incompressible: no ratio bound is near
    pack = tmp_path / "run.tar.gz"
    pack.write_bytes(gzip.compress(_member("run/big.bin", data) + b"\0" * 1024))
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))\n"
        "from groundhog_port.tasks import packs\n"
        "from groundhog_port.errors import LegacyInputError\n"
        "try:\n"
        "    packs.unpack(sys.argv[1], sys.argv[2])\n"
        "except LegacyInputError as err:\n"
        "    print(err.problem)\n"
    )
    (tmp_path / "into").mkdir()
    r = subprocess.run(
        [sys.executable, "-c", code, str(pack), str(tmp_path / "into")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "passes the file-size limit of this process (ulimit -f)" in r.stdout, r.stdout + r.stderr


def test_a_full_disk_while_unpacking_is_named(tmp_path, monkeypatch):
    import errno

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(packs, "_write", full)
    error, _, _ = _unpack(tmp_path, "run.tar.gz", gzip.compress(_member("run/a", b"a\n")))
    assert error is not None and "filled up while unpacking" in error, error
    assert "set TMPDIR to a folder with room" in error


def test_a_packed_case_reads_nothing_else_of_tmpdir(legacy_root, tmp_path, monkeypatch):
    """``reproduce --case run7.tar.gz`` with the run's files at the pack's top: the test
    set and vocabularies lying in $TMPDIR (``$TMPDIR/data/test.en``) are not read -- the
    run is "not done", naming where it looked (on 06d3c0e: read, "40/40 identical")."""
    import shutil
    import tempfile

    from parity_tests.support.inprocess import run_cli

    case = legacy_root / "search"
    tmpdir = tmp_path / "tmpdir"
    (tmpdir / "data").mkdir(parents=True)
    for name in ("test.en", "test.fr"):
        shutil.copyfile(case / name, tmpdir / "data" / name)
    for name in ("vocab.en.pkl", "ivocab.en.pkl", "vocab.fr.pkl", "ivocab.fr.pkl"):
        shutil.copyfile(case / name, tmpdir / name)
    monkeypatch.setattr(tempfile, "tempdir", str(tmpdir))
    lab = tmp_path / "lab"
    lab.mkdir()
    head = b"".join((case / "trans_beam10.txt").read_bytes().splitlines(keepends=True)[:2])
    (tmp_path / "trans_beam10.txt").write_bytes(head)  # a run cut short: 2 lines
    with tarfile.open(lab / "run7.tar.gz", "w:gz") as tf:
        for name in ("search_state.pkl", "search_model.npz"):
            tf.add(case / name, name)
        tf.add(tmp_path / "trans_beam10.txt", "trans_beam10.txt")
    r = run_cli("reproduce", "--case", lab / "run7.tar.gz")
    assert r.returncode == 2 and "identical" not in r.stdout, r.stdout + r.stderr
    assert "cannot find the file for 'word_indx'" in r.stderr, r.stderr
    # the vocabularies given with --data-dir are read (the fence is for what is not
    # given), the test set in $TMPDIR/data still not
    given = tmp_path / "vocab"
    shutil.copytree(tmpdir, given, ignore=shutil.ignore_patterns("data"))
    r = run_cli("reproduce", "--case", lab / "run7.tar.gz", "--data-dir", given)
    assert r.returncode != 0 and "identical" not in r.stdout, r.stdout + r.stderr
    for name in ("test.en", "test.fr"):  # beside the pack: looked for there
        shutil.copyfile(case / name, lab / name)
    r = run_cli("reproduce", "--case", lab / "run7.tar.gz", "--data-dir", given)
    assert r.returncode == 0, r.stderr[-2000:]


def test_a_compressed_text_is_read_within_a_ratio_of_its_size(tmp_path):
    """A 48-byte .bz2 of 10 MiB of newlines (2.4 s to count, each, before) and a few-KB
    .xz of 500,000 lines (+1 GiB in bleu): no text compresses 200 times, so each stops
    there -- no candidate test set, one line where a command reads it."""
    import lzma

    from groundhog_port import lookup
    from groundhog_port.legacy.data import read_text_lines

    bomb = tmp_path / "x.en.bz2"
    bomb.write_bytes(bz2.compress(b"\n" * (10 * MiB), 9))
    assert bomb.stat().st_size < 64
    start = time.process_time()
    assert lookup.line_count(bomb) is None
    assert time.process_time() - start < 0.5
    lines = tmp_path / "hyp.xz"
    lines.write_bytes(lzma.compress(b"the same line\n" * 500_000, preset=9))

    def refused():
        try:
            read_text_lines(lines)
        except LegacyInputError as err:
            return err.problem
        return None

    problem, held, _ = worker_peak(refused)  # the worker's ru_maxrss (was +1 GiB in bleu)
    assert problem and "decompresses to more than" in problem and "(200 times" in problem
    assert held < 16 * MiB, held
    text = tmp_path / "test.en.gz"  # a real text passes: some 3 times
    text.write_bytes(
        gzip.compress("".join(f"sentence {i} of a test set\n" for i in range(999)).encode())
    )
    assert len(read_text_lines(text)) == 999


def test_zip_members_without_unix_modes_are_unpacked(legacy_root, tmp_path):
    """Many tools write zip members with no Unix file mode (``external_attr`` 0, made on
    "DOS"): they are regular files like those with a mode -- unpacked, byte for byte --
    while a link member (mode S_IFLNK) is still skipped."""
    import stat
    import zipfile

    text = (legacy_root / "search" / "test.en").read_bytes()
    pack = tmp_path / "lab.zip"
    with zipfile.ZipFile(pack, "w") as z:
        bare = zipfile.ZipInfo("run/test.en")
        bare.create_system, bare.external_attr = 0, 0
        z.writestr(bare, text)
        moded = zipfile.ZipInfo("run/test.fr")
        moded.external_attr = (stat.S_IFREG | 0o644) << 16
        z.writestr(moded, b"le chat .\n")
        link = zipfile.ZipInfo("run/link")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        z.writestr(link, b"/etc/passwd")
    into = tmp_path / "out"
    into.mkdir()
    result = packs.unpack(pack, into)
    assert result.files == 2
    assert (result.folder / "run" / "test.en").read_bytes() == text
    assert (result.folder / "run" / "test.fr").read_bytes() == b"le chat .\n"
    assert [name for name, _ in result.skipped] == ["run/link"]
