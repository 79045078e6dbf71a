"""What to check before reading an HDF5 dataset whole (``ds[()]``), or its attributes.

A damaged or hostile ``.h5`` file can declare a dataset far larger than anything it holds:
a chunked dataset whose chunks were never written (h5py then returns terabytes of fill
value), or one whose data lives "externally" in another file (``/dev/zero`` will do).
Reading such a dataset allocates the declared size -- a memory blow-up, not an error.
GroundHog's files (PyTables ``/phrases`` and ``/indices``) and the trace files keep every
byte of their data inside the file, so :func:`check_dataset` refuses a dataset whose
declared size is more than the deflate limit (about 1032:1) above what the file stores
for it, external storage, and virtual datasets.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..errors import LegacyInputError
from ..untrusted import open_input

if TYPE_CHECKING:
    import h5py  # imported where used: only the readers of .h5 files need it

#: deflate (gzip, the only filter the recordings use) compresses at most ~1032:1
MAX_EXPANSION = 1100
#: small datasets are never refused (compact storage, tiny chunks)
SLACK_BYTES = 1 << 20


def _is_vlen_sequence(type_id):
    import h5py

    return type_id.get_class() == h5py.h5t.VLEN


def check_dataset(
    ds: h5py.HLObject, path: str | os.PathLike[str], where: str, loader_itemsize: int = 0
) -> None:
    """Raise :class:`LegacyInputError` (naming ``path`` and ``where``) unless reading
    ``ds`` whole allocates no more than what the file can hold for it.

    ``loader_itemsize``: bytes per element of the copy the loader makes from what it reads
    (8 for ``.astype(int64)``), held together with it: the size is checked as the loader
    will hold it, not as the file declares it -- a uint8 ``/phrases`` of 3e8 zeros stores
    300 KB at deflate's ratio, passes as 300 MB of uint8, and became 2.4 GB of int64
    (issue 25)."""
    import h5py

    if not isinstance(ds, h5py.Dataset):
        raise LegacyInputError(
            path, f"{where}: expected a dataset, found a {type(ds).__name__.lower()}"
        )
    if _is_vlen_sequence(ds.id.get_type()):
        raise LegacyInputError(
            path,
            f"{where}: a variable-length sequence type; expected numbers "
            "or strings (damaged file?)",
        )
    _check_storage(ds, path, where)
    declared = int(ds.size or 0) * (int(ds.dtype.itemsize) + loader_itemsize)
    stored = int(ds.id.get_storage_size())
    if declared > MAX_EXPANSION * stored + SLACK_BYTES:
        held = (
            f" as the loader holds it, {loader_itemsize} more per element"
            if loader_itemsize
            else ""
        )
        raise LegacyInputError(
            path,
            f"{where}: declares shape {tuple(ds.shape)} of {ds.dtype} "
            f"({declared} bytes{held}) but the file stores {stored} bytes "
            f"for it, more than deflate's {MAX_EXPANSION}:1 could give: "
            "truncated, corrupt or hostile file",
        )


#: objects (groups and datasets) a file the port did not write may hold: a trace holds some
#: thousands (a group per pair, step and beam run), a GroundHog bitext two
MAX_OBJECTS = 1_000_000


def check_links(f: h5py.File, path: str | os.PathLike[str]) -> None:
    """Refuse an HDF5 file that points elsewhere, before anything in it is read.

    The recordings and GroundHog's bitexts are plain trees of groups and datasets whose
    data lie inside the file.  h5py follows a soft link or an *external* link
    (``ExternalLink`` to another file: the data read would not be the file's, and a link to
    a FIFO blocks for ever) as if it were a group.  This visits every link of ``f`` without
    following any (HDF5's ``H5Lvisit``: each group once, so a cycle of hard links ends) and
    refuses, naming the link, a soft or external link or more than :data:`MAX_OBJECTS`
    links.  Datasets stored externally or virtually are refused where they are read
    (:func:`check_dataset`)."""
    import h5py

    seen: dict[str, Any] = {"links": 0, "name": b""}  # a count, and the link's name (bytes)

    def visit(name, info):
        seen["links"] += 1
        if info.type != h5py.h5l.TYPE_HARD or seen["links"] > MAX_OBJECTS:
            seen["name"] = name
            return info.type  # anything but None stops the visit
        return None

    kind = f.id.links.visit(visit, info=True)
    if kind is None:
        return
    name = "/" + seen["name"].decode("utf-8", "backslashreplace")
    if kind == h5py.h5l.TYPE_HARD:
        raise LegacyInputError(
            path, f"holds more than {MAX_OBJECTS} objects: not a recording, not read"
        )
    link = f.get(name, getlink=True)
    if isinstance(link, h5py.ExternalLink):
        raise LegacyInputError(
            path,
            f"{name}: an external link to {link.filename!r}:{link.path!r}: refused "
            "(a case's data lie inside its file; the link is never followed)",
        )
    what = f"a soft link to {link.path!r}" if isinstance(link, h5py.SoftLink) else "a link"
    raise LegacyInputError(
        path, f"{name}: {what}: refused (the recordings hold no links; it is never followed)"
    )


def _check_storage(ds, path, where):
    """Refuse a dataset whose data lie outside the file (external storage, virtual)."""
    try:
        external = ds.external
    except (OSError, RuntimeError, ValueError):
        external = None
    if external:
        raise LegacyInputError(
            path,
            f"{where}: data stored outside the file (in {external[0][0]!r}); "
            "expected the data inside the .h5 file",
        )
    if getattr(ds, "is_virtual", False):
        raise LegacyInputError(
            path,
            f"{where}: a virtual dataset (data in other files); "
            "expected the data inside the .h5 file",
        )


def read_attrs(
    obj: h5py.HLObject,
    path: str | os.PathLike[str],
    where: str,
    names: Iterable[str] | None = None,
) -> dict[str, Any]:  # numbers, strings and arrays, as h5py reads them
    """``{name: value}`` of ``obj``'s attributes (or of ``names`` among them), refusing
    variable-length *sequence* attributes without reading them.  The files hold numbers and
    strings only; a damaged type message can turn a variable-length string into a sequence
    of integers, and HDF5 then crashes the process reading it (segmentation fault).

    A variable-length string is read with the address space capped
    (:func:`_capped_address_space`): its length is stored beside it in the attribute, and
    a damaged length made HDF5 allocate and touch 1.9 GB before it found the string
    missing (issue 17, fuzz seed 17204 case 1275); under the cap the allocation fails and
    HDF5 reports an error instead."""
    import h5py

    out = {}
    for name in list(obj.attrs) if names is None else names:
        type_id = obj.attrs.get_id(name).get_type()
        if _is_vlen_sequence(type_id):
            raise LegacyInputError(
                path,
                f"{where}: attribute {name!r} has a variable-length "
                "sequence type; expected a number or a string (damaged file?)",
            )
        if type_id.get_class() == h5py.h5t.STRING and type_id.is_variable_str():
            with _capped_address_space():
                out[name] = obj.attrs[name]
        else:
            out[name] = obj.attrs[name]
    return out


#: address space a variable-length attribute read may add (the recordings' longest, the
#: THEANO_FLAGS and state JSON strings, are a few KB)
ATTR_READ_MIB = 256


@contextmanager
def _capped_address_space(extra_mib=ATTR_READ_MIB):
    """Lower ``RLIMIT_AS`` to the address space in use plus ``extra_mib`` while the block
    runs (only for the short HDF5 read inside it: the limit is the whole process's), where
    the platform has it; a lower limit already in force is kept."""
    try:
        import resource

        with open("/proc/self/status") as f:
            in_use = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    except (ImportError, OSError, StopIteration):
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = in_use + extra_mib * 2**20
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if soft != resource.RLIM_INFINITY and soft <= cap:
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


# ----------------------------------------------------------------------------------------------
# Global heaps: HDF5 loops forever on one kind of damage
# ----------------------------------------------------------------------------------------------
_SUPERBLOCK = b"\x89HDF\r\n\x1a\n"
_GCOL = b"GCOL"


def _sizeof_lengths(mm):
    """'Size of lengths' from the superblock at offset 0 (8 when it cannot be read)."""
    if mm[:8] != _SUPERBLOCK or len(mm) < 16:
        return 8
    version = mm[8]
    size = mm[14] if version in (0, 1) else mm[10]
    return size if size in (2, 4, 8) else 8


def check_global_heaps(path: str | os.PathLike[str]) -> None:
    """Refuse a file whose global heap would send HDF5 into an endless loop.

    Variable-length strings (trace attributes such as ``THEANO_FLAGS``) live in global heap
    collections (``GCOL``).  HDF5 (1.14 / 2.0, as bundled with h5py 3.16) walks a collection
    object by object and advances by each object's size; a free-space object (index 0) of
    size 0 -- e.g. a zeroed stretch of the file -- makes it advance by nothing, forever
    (``H5HG__cache_heap_deserialize``).  This walks every collection the same way first.
    """
    import mmap
    import os

    try:
        with open_input(path, "an HDF5 file") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                n = len(mm)
                ls = _sizeof_lengths(mm)
                hdr = 8 + ls  # signature, version, 3 reserved, collection size
                objhdr = 8 + ls  # index, refcount, 4 reserved, object size
                at = mm.find(_GCOL)
                while at >= 0:
                    if at + hdr <= n and mm[at + 4] == 1:
                        size = int.from_bytes(mm[at + 8 : at + 8 + ls], "little")
                        end = min(at + size, n)
                        p = at + hdr
                        while p < end and p + objhdr <= end:
                            idx = int.from_bytes(mm[p : p + 2], "little")
                            osize = int.from_bytes(mm[p + 8 : p + 8 + ls], "little")
                            need = objhdr + (osize + 7) // 8 * 8 if idx > 0 else osize
                            if need == 0:
                                raise LegacyInputError(
                                    path,
                                    f"damaged HDF5 global heap at byte {at} (an empty free-space "
                                    f"object at byte {p}): HDF5 would loop forever reading it",
                                )
                            p += need
                    at = mm.find(_GCOL, at + 1)
    except OSError as err:
        raise LegacyInputError(path, f"cannot read ({err.strerror or err})") from None
