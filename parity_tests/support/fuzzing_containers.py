"""Fuzz targets of issue 51: packs, compressed text and plans, the containers bounded before
a parser sees them (``groundhog_port/containers.py``, ``tasks/archive/plan_file.py``).

Each generator draws a well-formed container and damages it -- bytes flipped, or one of the
structural lies the red team used (a header's size, a pax record, a zip's end record, a
stream going on after its end, a plan's value of the wrong kind) -- and each loader reads
it as ``archive`` / ``reproduce`` do; a clean outcome is the container read, or one line
naming the file (:func:`parity_tests.support.fuzzing.check_error`).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import random
import struct
import tarfile
import tempfile
import zipfile
from pathlib import Path

from parity_tests.support import fuzzing as F

COMPRESS = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}


def _text(fx) -> bytes:
    """The fixture's test set, its first 20 lines."""
    return b"".join(fx.read(fx.text_files[0]).splitlines(keepends=True)[:20])


# ---------------------------------------------------------------------------------------------
# packs
# ---------------------------------------------------------------------------------------------
PACK_EDITS = ("bytes", "size-lie", "long-name", "pax-digits", "after-end", "zip-count", "dotdot")
#: an undamaged pack, whose members must come out as they went in (issue 53: zip members
#: written by ``ZipFile.writestr`` carry no Unix file mode; tar members none either)
INTACT = "intact"


def _tar(members: dict[str, bytes], pax: dict | None = None) -> bytes:
    raw = io.BytesIO()
    fmt = tarfile.PAX_FORMAT if pax else tarfile.GNU_FORMAT
    with tarfile.open(fileobj=raw, mode="w", format=fmt, pax_headers=pax or {}) as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def gen_pack(rng: random.Random, fx, workdir: Path) -> F.Case:
    members = {"run/test.en": _text(fx), "run/notes.txt": b"kept\n"}
    edit = rng.choice((*PACK_EDITS, INTACT))
    kind = rng.choice(["gz", "bz2", "xz", "zip", "tar"])
    if edit == "zip-count" or kind == "zip":
        raw = io.BytesIO()
        with zipfile.ZipFile(raw, "w") as zf:
            for name, data in members.items():
                if edit == INTACT and rng.random() < 0.5:  # no mode at all, as many tools
                    info = zipfile.ZipInfo(name)
                    info.external_attr = 0
                    zf.writestr(info, data)
                else:
                    zf.writestr("../evil" if edit == "dotdot" else name, data)
        data = raw.getvalue()
        if edit == "zip-count":  # the end record claims other counts and sizes
            at = data.rfind(b"PK\x05\x06")
            n = rng.choice([0xFFFF, 60_000, 1, 0])
            size = rng.choice([0xFFFFFFFF, 1 << 30, 0])
            data = data[: at + 8] + struct.pack("<HHI", n, n, size) + data[at + 16 :]
        name = "run.zip"
    else:
        if edit == "dotdot":
            members = {"../evil.txt": b"x\n", **members}
        tar = _tar(
            members,
            {"comment": "9" * rng.choice([100, 5000, 40_000])} if edit == "pax-digits" else None,
        )
        if edit == "size-lie":  # the first header's size field says otherwise
            field = f"{rng.choice([0, 1, 7777777, 0o77777777777]):011o}".encode()[:11] + b"\0"
            tar = tar[:124] + field + tar[136:]
        elif edit == "long-name":
            tar = _tar({"run/" + "n" * rng.choice([200, 5000, 40_000]): b"x\n", **members})
        elif edit == "after-end":
            tar += b"\0" * rng.choice([1 << 10, 1 << 20, 8 << 20])
        data = tar if kind == "tar" else COMPRESS[kind](tar)
        name = f"run.tar.{kind}" if kind != "tar" else "run.tar"
    label = edit
    if edit == "bytes":
        label, data = F.byte_mutation(data, rng)
    opts = (
        {"members": {k: v.decode("latin-1") for k, v in members.items()}} if edit == INTACT else {}
    )
    return F.Case("pack", f"pack {name}: {label}", {name: data}, opts)


def load_pack(fx, paths, opts):
    from groundhog_port.tasks import packs

    pack = next(iter(paths.values()))
    with tempfile.TemporaryDirectory(prefix="fuzz-pack-") as into:
        up = packs.unpack(pack, into)
        for name, text in opts.get("members", {}).items():  # undamaged: every member, as is
            got = up.folder / name
            if not got.is_file() or got.read_bytes() != text.encode("latin-1"):
                raise AssertionError(f"{name} of an undamaged pack not unpacked as it was")
        return f"{up.files} members written, {len(up.skipped)} not"


# ---------------------------------------------------------------------------------------------
# compressed text
# ---------------------------------------------------------------------------------------------
TEXT_EDITS = ("bytes", "truncated", "bomb", "concatenated", "trailing", INTACT)
#: how a compressed test set may be named: by its compression, or not (issue 53: recognised
#: by its magic number, whatever the name says)
NAMES = ("test.en.{kind}", "test.en", "test.en.txt", "newstest2014")


def gen_compressed(rng: random.Random, fx, workdir: Path) -> F.Case:
    kind = rng.choice(sorted(COMPRESS))
    text = _text(fx)
    edit = rng.choice(TEXT_EDITS)
    data = COMPRESS[kind](text)
    name = rng.choice(NAMES).format(kind=kind)
    opts = {"lines": text.decode("utf-8").splitlines()} if edit == INTACT else {}
    label = edit
    if edit == "truncated":
        data = data[: rng.randrange(1, len(data))]
    elif edit == "bomb":
        data = COMPRESS[kind](rng.choice([b"\n", b"a", b"\0"]) * rng.choice([1 << 20, 16 << 20]))
    elif edit == "concatenated":
        data = data + COMPRESS[kind](text)
    elif edit == "trailing":
        data = data + bytes(rng.randrange(256) for _ in range(rng.choice([1, 16, 512])))
    elif edit != INTACT:
        label, data = F.byte_mutation(data, rng)
    return F.Case("compressed", f"{name} ({kind}): {label}", {name: data}, opts)


def load_compressed(fx, paths, opts):
    from groundhog_port import lookup
    from groundhog_port.errors import LegacyInputError
    from groundhog_port.legacy.data import read_text_lines

    path = next(iter(paths.values()))
    try:
        with lookup.remembering():
            n = lookup.line_count(path)
        lines = read_text_lines(path)
    except LegacyInputError as err:
        if "lines" in opts:  # an undamaged stream has nothing to refuse
            raise AssertionError(f"{path.name}: an undamaged stream refused: {err}") from None
        raise
    if "lines" in opts and (lines != opts["lines"] or n != len(lines)):  # undamaged
        raise AssertionError(f"{path.name}: an undamaged stream not read as its text")
    return f"{len(lines)} lines (counted {n})"


# ---------------------------------------------------------------------------------------------
# plans
# ---------------------------------------------------------------------------------------------
PLAN = """version = 1
root = "lab"

[[experiment]]
id = "search/run_"
state = "search/run_state.pkl"
model = "search/run_model.npz"
test_source = "data/test.en"
changes = []
missing = []

[[experiment.output]]
file = "search/trans_beam10.txt"
kind = "trans"
beam_size = 10
normalize = false
ignore_unk = false
"""
PLAN_VALUES = (
    '"by content"',
    "7000",
    "-1",
    "true",
    '"x"',
    "[]",
    "{}",
    "1e999",
    '"' + "a" * 5000 + '"',
)


def gen_plan(rng: random.Random, fx, workdir: Path) -> F.Case:
    text = PLAN
    edit = rng.choice(["bytes", "value", "key", "many", "dotted", "version"])
    label = edit
    if edit == "value":
        lines = text.splitlines()
        at = rng.choice([i for i, ln in enumerate(lines) if " = " in ln])
        key = lines[at].split(" = ")[0]
        lines[at] = f"{key} = {rng.choice(PLAN_VALUES)}"
        text, label = "\n".join(lines) + "\n", f"value of {key}"
    elif edit == "key":
        text = text.replace("beam_size", rng.choice(["beam", "beam-size", "Beam_size", ""]))
    elif edit == "many":
        block = text.split("[[experiment]]", 1)[1]
        text = text + "".join(
            "[[experiment]]" + block.replace("search/run_", f"search/run{i}_")
            for i in range(rng.choice([10, 200, 2000]))
        )
    elif edit == "dotted":
        text = text + "".join(f"a{i}.b = 1\n" for i in range(rng.choice([10, 10_000])))
    elif edit == "version":
        version = rng.choice(["2", "0", '"1"'])
        text = text.replace("version = 1", f"version = {version}")
    data = text.encode()
    if edit == "bytes":
        label, data = F.byte_mutation(data, rng)
    return F.Case("plan", f"plan: {label}", {"plan.toml": data}, {})


def load_plan(fx, paths, opts):
    from groundhog_port.tasks.archive import plan_file

    plan = plan_file.read(paths["plan.toml"])
    return f"{len(plan['entries'])} experiments"
