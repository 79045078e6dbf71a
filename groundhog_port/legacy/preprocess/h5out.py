"""GroundHog's ``.h5`` files, written with h5py in the layout PyTables gives them.

``convert-pkl2hdf5.py`` and ``shuffle-hdf5.py`` write one side of a bitext as

* ``/phrases``: an ``Int32`` EArray (``tables.Int32Atom(), shape=(0,)``), every sentence's
  word ids concatenated (convert-pkl2hdf5.py:26);
* ``/indices``: a table of ``Index`` rows, ``UInt32Col`` columns ``pos`` and ``length``
  (PyTables orders the columns by name: ``length``, ``pos``), one per sentence
  (convert-pkl2hdf5.py:20-29).

PyTables recognises its nodes by HDF5 attributes (``CLASS``, ``VERSION``, ``TITLE``, the
table's ``FIELD_*`` and ``NROWS``, the EArray's ``EXTDIM``); they are written with the
string types, chunk sizes (16384 ids, 8192 rows) and values of the recorded files, so
``tables.open_file`` (what GroundHog's ``TM_dataset.py`` uses) reads these files as it reads
its own, and the port's :func:`groundhog_port.legacy.data.read_h5_bitext` reads them too.

``-n`` n-grams are written as PyTables writes ``createCArray`` (preprocess.py:100-105)
except that they are not blosc-compressed (h5py has no blosc filter); the values and
the node name are the original's.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

PHRASES_CHUNK = 16384  # PyTables' chunk for an Int32 EArray of shape (0,)
INDICES_CHUNK = 8192  # PyTables' chunk for the 8-byte Index rows
INDEX_DTYPE = np.dtype([("length", "<u4"), ("pos", "<u4")])
INDEX_TITLE = "a table of indices and lengths"


def _string_attr(obj, name, text, utf8=True):
    """A scalar fixed-length string attribute as PyTables writes it (NULLTERM, exact size;
    an empty string as a null dataspace of one byte)."""
    import h5py

    data = text.encode("utf-8")
    tid = h5py.h5t.C_S1.copy()
    tid.set_size(max(len(data), 1))
    tid.set_strpad(h5py.h5t.STR_NULLTERM)
    tid.set_cset(h5py.h5t.CSET_UTF8 if utf8 else h5py.h5t.CSET_ASCII)
    space = h5py.h5s.create(h5py.h5s.NULL if not data else h5py.h5s.SCALAR)
    attr = h5py.h5a.create(obj.id, name.encode(), tid, space)
    if data:
        attr.write(np.array(data, dtype=f"S{len(data)}"), mtype=tid)


def _root_attrs(f):
    _string_attr(f, "CLASS", "GROUP")
    _string_attr(f, "PYTABLES_FORMAT_VERSION", "2.1")
    _string_attr(f, "TITLE", "")
    _string_attr(f, "VERSION", "1.0")


def write_bitext_side(
    path: str | os.PathLike[str], sentences: Sequence[Sequence[int] | np.ndarray]
) -> None:
    """One side of a bitext: ``sentences`` is a sequence of id sequences."""
    import h5py

    lengths = np.array([len(s) for s in sentences], dtype=np.int64)
    pos = np.concatenate([[0], np.cumsum(lengths)[:-1]]) if len(lengths) else lengths
    if lengths.sum() >= 2**32:
        raise ValueError("more than 2**32 words: the UInt32 'pos' column cannot hold them")
    phrases = (
        np.concatenate([np.asarray(s, dtype=np.int64) for s in sentences])
        if lengths.sum()
        else np.zeros(0, dtype=np.int64)
    )
    if phrases.size and (phrases.min() < -(2**31) or phrases.max() >= 2**31):
        raise ValueError("a word id does not fit the Int32 '/phrases' array")
    rows = np.zeros(len(lengths), dtype=INDEX_DTYPE)
    rows["length"], rows["pos"] = lengths, pos
    with h5py.File(path, "w", libver="earliest") as f:
        _root_attrs(f)
        ph = f.create_dataset(
            "phrases", data=phrases.astype("<i4"), maxshape=(None,), chunks=(PHRASES_CHUNK,)
        )
        _string_attr(ph, "CLASS", "EARRAY", utf8=False)
        ph.attrs.create("EXTDIM", np.int32(0))
        _string_attr(ph, "TITLE", "", utf8=False)
        _string_attr(ph, "VERSION", "1.1", utf8=False)
        ix = f.create_dataset("indices", data=rows, maxshape=(None,), chunks=(INDICES_CHUNK,))
        _string_attr(ix, "CLASS", "TABLE")
        ix.attrs.create("FIELD_0_FILL", np.uint32(0))
        _string_attr(ix, "FIELD_0_NAME", "length")
        ix.attrs.create("FIELD_1_FILL", np.uint32(0))
        _string_attr(ix, "FIELD_1_NAME", "pos")
        ix.attrs.create("NROWS", np.int64(len(rows)))
        _string_attr(ix, "TITLE", INDEX_TITLE)
        _string_attr(ix, "VERSION", "2.7")


def write_carray(path: str | os.PathLike[str], node: str, array: np.ndarray) -> None:
    """``safe_hdf`` (preprocess.py:92): one CArray ``node`` holding ``array``."""
    import h5py

    with h5py.File(path, "w", libver="earliest") as f:
        _root_attrs(f)
        ds = f.create_dataset(node, data=array, chunks=True if array.size else None)
        _string_attr(ds, "CLASS", "CARRAY", utf8=False)
        _string_attr(ds, "TITLE", "", utf8=False)
        _string_attr(ds, "VERSION", "1.1", utf8=False)
