"""HDF5 files read as data, never as pointers (issue 47, "Trace files").

A ``trace.h5`` (or a GroundHog ``.h5`` bitext) is a tree of groups and datasets whose bytes
lie inside it.  One that points elsewhere -- an external or soft link, a file name attribute
that is absolute or climbs out of the case -- or that makes the harness hold far more than
it stores, is refused in one line before anything is compared.  Each test edits a copy of
the shared ``search`` recording.
"""

import os
import shutil

import h5py
import numpy as np
import pytest

from groundhog_port.errors import LegacyInputError
from groundhog_port.harness.check import test_files_near as files_near
from groundhog_port.harness.trace import TraceFile
from groundhog_port.legacy.data import read_h5_bitext
from parity_tests.support.inprocess import run_cli


@pytest.fixture
def case(legacy_root, tmp_path):
    """A writable copy of the shared ``search`` case."""
    dst = tmp_path / "search"
    shutil.copytree(legacy_root / "search", dst)
    for p in dst.iterdir():
        p.chmod(0o644)
    return dst


def _edit(trace, fn):
    with h5py.File(trace, "r+") as f:
        fn(f)


def _relink(f, name, link):
    del f[name]
    f[name] = link


@pytest.mark.parametrize("kind", ["external", "external-fifo", "soft"])
def test_links_refused_before_any_read(case, tmp_path, kind):
    """``/repr`` as an external link (to a copy outside the case, or to a FIFO, which would
    block for ever) or a soft link: one line naming the link, never followed."""
    outside = tmp_path / "outside.h5"
    with h5py.File(case / "trace.h5", "r") as src, h5py.File(outside, "w") as dst:
        src.copy("repr", dst)
    if kind == "external-fifo":
        os.mkfifo(tmp_path / "fifo.h5")
        link = h5py.ExternalLink(str(tmp_path / "fifo.h5"), "/repr")
    elif kind == "external":
        link = h5py.ExternalLink(str(outside), "/repr")
    else:
        link = h5py.SoftLink("/pairs")
    _edit(case / "trace.h5", lambda f: _relink(f, "repr", link))
    with pytest.raises(LegacyInputError, match="/repr: an? (external|soft) link") as err:
        TraceFile(case / "trace.h5")
    assert "\n" not in str(err.value)
    r = run_cli("parity", "--case", case, "--only", "repr")
    assert r.returncode == 2 and "/repr: a" in r.stderr and "Traceback" not in r.stderr


def test_bitext_with_an_external_link_refused(legacy_root, tmp_path):
    """A GroundHog ``.h5`` bitext whose ``/phrases`` is a link to another file: refused."""
    src = next((legacy_root / "data").glob("*.en.h5"))
    copy = tmp_path / src.name
    shutil.copyfile(src, copy)
    copy.chmod(0o644)
    other = tmp_path / "other.h5"
    shutil.copyfile(src, other)
    _edit(copy, lambda f: _relink(f, "phrases", h5py.ExternalLink(str(other), "/phrases")))
    with pytest.raises(LegacyInputError, match="/phrases: an external link"):
        read_h5_bitext(copy)
    assert len(read_h5_bitext(other).length) > 0  # the same data, inside its file, reads


def test_float_dataset_charged_as_the_harness_holds_it(case, monkeypatch):
    """A float dataset is held as float64 beside the file's float32: 100,000 recorded floats
    (400 KB stored) take 1.2 MB compared, over a 1 MiB budget (raised, the same trace reads)."""

    def grow(f):
        del f["repr/0/c"]
        f["repr/0/c"] = np.random.default_rng(0).random((1000, 100), dtype=np.float32)

    _edit(case / "trace.h5", grow)
    monkeypatch.setenv("GROUNDHOG_PARSE_BUDGET_MIB", "1")
    with pytest.raises(LegacyInputError, match=r"/repr/0/c \(\(1000, 100\) of float32"):
        TraceFile(case / "trace.h5").repr(0)
    monkeypatch.setenv("GROUNDHOG_PARSE_BUDGET_MIB", "2")
    assert TraceFile(case / "trace.h5").repr(0)["c"].shape == (1000, 100)


def test_zeros_passing_the_ratio_only_as_stored_are_refused(case):
    """10^8 float32 zeros deflated: declared 400 MB passed deflate's ratio against the
    stored bytes as float32; as the harness holds them (12 bytes each) they do not."""

    def zeros(f):
        del f["repr/0/c"]
        ds = f.create_dataset("repr/0/c", (10**4, 10**4), dtype="float32", chunks=(1000, 10**4),
                              compression="gzip", compression_opts=9)  # fmt: skip
        block = np.zeros((1000, 10**4), dtype=np.float32)
        for i in range(10):
            ds[i * 1000 : (i + 1) * 1000] = block

    _edit(case / "trace.h5", zeros)
    with pytest.raises(LegacyInputError, match="more than deflate|parse budget"):
        TraceFile(case / "trace.h5").repr(0)


def test_recorded_ids_longer_than_their_line_refused(case):
    """A pair whose ``trg_ids`` are 10,000 ids for a line of a few words: refused before it
    is re-scored."""

    def longer(f):
        del f["pairs/0/trg_ids"]
        f["pairs/0/trg_ids"] = np.ones(10_000, dtype=np.int64)

    _edit(case / "trace.h5", longer)
    with pytest.raises(LegacyInputError, match="10000 ids for a trg_line of"):
        TraceFile(case / "trace.h5").pairs(0)
    assert len(TraceFile(case / "trace.h5").pairs(1)["trg_ids"]) < 100


@pytest.mark.parametrize("name", ["/etc/hostname", "../../test.en", "data/../../x.en"])
def test_test_file_attribute_outside_the_case_refused(case, name):
    """``test_src_file`` absolute or climbing out: refused, the file never read as the
    test set (a name inside the case still works)."""
    _edit(case / "trace.h5", lambda f: f.attrs.__setitem__("test_src_file", name))
    with pytest.raises(LegacyInputError, match="test_src_file = .*not a name inside the case"):
        files_near(case / "trace.h5")
    _edit(case / "trace.h5", lambda f: f.attrs.__setitem__("test_src_file", "test.en"))
    assert files_near(case / "trace.h5")[0] == case / "test.en"
