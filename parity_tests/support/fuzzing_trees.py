"""Fuzz targets of issue 40 (``tools/fuzz.py --targets checkpoint,archive,timing``):

* ``checkpoint``: an exported checkpoint folder (``config.json`` + ``model.safetensors`` of
  the fixture) with its bytes mutated, hostile JSON (deep, long numbers, ``NaN``, a huge
  vocabulary, ``{"__float__": ...}``, a ``"weights"`` path), hostile safetensors headers
  (dtypes, lying lengths, many zero-size tensors, megabytes of metadata), or either file
  replaced by a FIFO, a socket or a link to ``/dev/zero`` / ``/dev/urandom``; loaded with
  :func:`groundhog_port.legacy.exported.open_checkpoint`;
* ``archive``: a one-experiment tree of the fixture run through ``groundhog-port archive``
  with special files (FIFOs, sockets, links to devices) under the names it reads, links to
  a file outside ROOT, sparse and one-line files, and crafted cache entries (the right key
  for the tree, the real result edited: wrong types, another experiment, plots elsewhere,
  ``<script>`` text, damaged or nested JSON).  Besides a clean exit (0 or 1: the report
  lists what was not done) it checks that nothing under ROOT and no outside file changed
  (``replaced``) and that the report quotes nothing of the outside file, no raw
  ``<script>`` and embeds no file but its plots (``raw``);
* ``timing``: a ``*_timing.npz`` with a tampered ``step``, ``next_offset`` or ``cost``
  (NaN, text, arrays, 2-D, missing, other dtypes) or mutated bytes, read as ``train
  --resume`` and ``plot-training`` read it.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import random
import socket
import stat
import struct
from pathlib import Path

import numpy as np

from parity_tests.support import fuzzing as F

SECRET = "SECRET-OUTSIDE-THE-ARCHIVE"
SPECIAL_KINDS = ("fifo", "socket", "link:/dev/zero", "link:/dev/urandom", "link:dangling")


# ---------------------------------------------------------------------------------------------
# special files (made in the case folder after its plain files are written)
# ---------------------------------------------------------------------------------------------
def make_special(path: Path, kind: str, outside: Path | None = None):
    """Replace ``path`` by a special file: a FIFO, a socket (bound, then left), a link to a
    device, a dangling link, or a link to ``outside``."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        s.close()
    elif kind == "link:dangling":
        path.symlink_to(path.parent / "no-such-file")
    elif kind == "link:outside":
        path.symlink_to(outside)
    elif kind.startswith("link:"):
        path.symlink_to(kind[len("link:") :])
    elif kind == "sparse":
        with open(path, "wb") as f:
            f.truncate(2 << 30)
    elif kind == "long-line":
        path.write_bytes(b"w " * 150_000)
    else:
        raise ValueError(kind)


def tree_state(root: Path) -> dict:
    """Every path under ``root`` with its type, size, mtime and (regular files up to 16 MiB)
    sha256, never opening anything else (FIFOs, devices, sparse giants)."""
    out = {}
    for folder, dirs, names in os.walk(root):
        for n in sorted(names + dirs):
            p = Path(folder) / n
            st = p.lstat()
            item = [stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns]
            if stat.S_ISLNK(st.st_mode):
                item.append(os.readlink(p))
            elif stat.S_ISREG(st.st_mode) and st.st_size <= 16 << 20:
                item.append(hashlib.sha256(p.read_bytes()).hexdigest())
            out[str(p.relative_to(root))] = item
    return out


# ---------------------------------------------------------------------------------------------
# checkpoint folders
# ---------------------------------------------------------------------------------------------
_exported: dict = {}


def exported_files(fx) -> dict:
    """``{"config.json": bytes, "model.safetensors": bytes}`` of the fixture, exported once."""
    if "files" not in _exported:
        from groundhog_port.legacy.exported import write_checkpoint
        from groundhog_port.legacy.loading import open_experiment

        m = fx.main
        exp = open_experiment(m.state, m.model, "", [m.data_dir], "cpu")
        d = fx.scratch() / "exported"
        write_checkpoint(exp, d)
        _exported["files"] = {n: (d / n).read_bytes() for n in ("config.json", "model.safetensors")}
    return _exported["files"]


CONFIG_EDITS = (
    "deep-state",
    "deep-text",
    "long-int",
    "nan",
    "infinity",
    "float-tag",
    "weights-path",
    "huge-vocab",
    "wrong-types",
    "dropped-key",
)
HEADER_EDITS = ("dtype", "length-lie", "zero-tensors", "metadata", "bad-json", "offsets", "shape")
DTYPES = ("BF16", "F16", "F64", "F8_E4M3", "F8_E5M2", "I32", "I64", "U8", "BOOL", "", "f32", 7)


def _config_edit(config_bytes: bytes, edit: str, rng: random.Random) -> bytes:
    c = json.loads(config_bytes)
    if edit == "deep-state":
        depth = rng.choice([17, 100, 900, 5000, 100_000])
        return config_bytes[:-2] + b',"deep":' + b"[" * depth + b"]" * depth + b"}\n"
    if edit == "deep-text":
        depth = rng.choice([900, 100_000])
        return b'{"format": ' + b"[" * depth + b"]" * depth + b"}"
    if edit == "long-int":
        c["state"]["dim"] = 0
        return (
            json.dumps(c)
            .replace('"dim": 0', '"dim": ' + "9" * rng.choice([41, 4301, 5000]))
            .encode()
        )
    if edit in ("nan", "infinity"):
        word = "NaN" if edit == "nan" else rng.choice(["Infinity", "-Infinity", "1e999"])
        c["state"]["dim"] = 0
        return json.dumps(c).replace('"dim": 0', f'"dim": {word}').encode()
    if edit == "float-tag":
        c["state"][rng.choice(["dim", "x", "seqlen"])] = {
            "__float__": rng.choice(["abc", 1, None, [], "1e5", ""])
        }
    elif edit == "weights-path":
        c["weights"] = rng.choice(
            ["/dev/zero", "../x", "..", "", "a/b", 7, None, "\0", "/etc/passwd"]
        )
    elif edit == "huge-vocab":
        n = rng.choice([200_000, 1_600_000])
        c["vocabularies"]["source_word2idx"] = {f"w{i}": i for i in range(n)}
    elif edit == "wrong-types":
        key = rng.choice(["state", "architecture", "vocabularies", "format_version", "tensors"])
        c[key] = rng.choice([None, 1, "x", [], {}, [[[]]]])
    elif edit == "dropped-key":
        c.pop(rng.choice(sorted(c)))
    return json.dumps(c).encode()


def _header(weights: bytes):
    n = struct.unpack("<Q", weights[:8])[0]
    return n, json.loads(weights[8 : 8 + n]), weights[8 + n :]


def _pack(header, data=b"", length=None) -> bytes:
    blob = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(blob) if length is None else length) + blob + data


def _header_edit(weights: bytes, edit: str, rng: random.Random) -> bytes:
    n, header, data = _header(weights)
    names = [k for k in header if k != "__metadata__"]
    if edit == "dtype":
        for name in rng.sample(names, rng.randint(1, len(names))):
            header[name]["dtype"] = rng.choice(DTYPES)
        return _pack(header, data)
    if edit == "length-lie":
        return _pack(
            json.dumps(header).encode(), data, rng.choice([0, 1, n - 1, n + 1, 2**63, 2**40])
        )
    if edit == "zero-tensors":
        count = rng.choice([10_000, 300_000, 1_300_000])
        entry = b'{"dtype":"F32","shape":[0],"data_offsets":[0,0]}'
        return _pack(b"{" + b",".join(b'"t%d":%s' % (i, entry) for i in range(count)) + b"}")
    if edit == "metadata":
        header["__metadata__"]["x"] = "m" * rng.choice([1_000_000, 30_000_000, 94_000_000])
        return _pack(header, data)
    if edit == "bad-json":
        blob = rng.choice(
            [b"[" * 50_000, b'{"a": NaN}', b'{"a": ' + b"1" * 5000 + b"}", b"\xff\xfe"]
        )
        return _pack(blob)
    if edit == "offsets":
        name = rng.choice(names)
        header[name]["data_offsets"] = rng.choice([[0, 2**62], [-1, 4], [10, 5], "x", [0]])
        return _pack(header, data)
    name = rng.choice(names)
    header[name]["shape"] = rng.choice([[2**62, 2**62], [-1], [0], "x", [[1]], [10**30]])
    return _pack(header, data)


def gen_checkpoint(rng: random.Random, fx, workdir: Path) -> F.Case:
    files = dict(exported_files(fx))
    r = rng.random()
    opts: dict = {}
    if r < 0.3:
        name = rng.choice(sorted(files))
        label, files[name] = F.byte_mutation(files[name], rng)
        label = f"{name}: {label}"
    elif r < 0.55:
        edit = rng.choice(CONFIG_EDITS)
        files["config.json"] = _config_edit(files["config.json"], edit, rng)
        label = f"config.json: {edit}"
    elif r < 0.85:
        edit = rng.choice(HEADER_EDITS)
        files["model.safetensors"] = _header_edit(files["model.safetensors"], edit, rng)
        label = f"model.safetensors header: {edit}"
    else:
        name, kind = rng.choice(sorted(files)), rng.choice(SPECIAL_KINDS)
        opts["special"] = [(name, kind)]
        label = f"{name}: {kind}"
    return F.Case("checkpoint", label, {f"ckpt/{k}": v for k, v in files.items()}, opts)


def load_checkpoint(fx, paths, opts):
    from groundhog_port.legacy.exported import open_checkpoint

    d = next(iter(paths.values())).parent
    for name, kind in opts.get("special", []):
        make_special(d / name, kind)
    exp = open_checkpoint(d)
    return f"{exp.cfg.enc.layer}, {len(exp.trg_idx2word)} target words"


# ---------------------------------------------------------------------------------------------
# timing files
# ---------------------------------------------------------------------------------------------
TIMING_EDITS = (
    "step-nan",
    "step-text",
    "step-array",
    "step-negative",
    "step-float",
    "step-huge",
    "offset-text",
    "cost-2d",
    "cost-missing",
    "cost-text",
    "cost-nan",
    "cost-object-bytes",
    "extra-3d",
    "bytes",
)


def timing_arrays() -> dict:
    from groundhog_port.training.adadelta import SGDAdadelta

    t = {"step": np.int64(120), "next_offset": np.int64(-1)}
    for name in SGDAdadelta.RETURN_NAMES:
        t[name] = np.linspace(1.0, 2.0, 200, dtype=np.float32)
    return t


def gen_timing(rng: random.Random, fx, workdir: Path) -> F.Case:
    t = timing_arrays()
    edit = rng.choice(TIMING_EDITS)
    values = {
        "step-nan": ("step", np.float64("nan")),
        "step-text": ("step", np.array(rng.choice(["12", "", "x" * 1000]))),
        "step-array": ("step", np.arange(rng.choice([0, 1, 3]))),
        "step-negative": ("step", np.int64(rng.choice([-1, -(2**62)]))),
        "step-float": ("step", np.float32(rng.choice([0.5, 1e30, float("inf")]))),
        "step-huge": ("step", np.uint64(2**64 - 1)),
        "offset-text": ("next_offset", np.array("a")),
        "cost-2d": ("cost", np.zeros((rng.choice([0, 3, 200]), 2), np.float32)),
        "cost-text": ("cost", np.array(["a", "b"])),
        "cost-nan": ("cost", np.full(200, np.nan, np.float32)),
        "cost-object-bytes": ("cost", np.frombuffer(b"abcd" * 8, dtype="S4")),
        "extra-3d": ("extra", np.zeros((2, 2, 2))),
    }
    if edit == "cost-missing":
        t.pop("cost")
    elif edit in values:
        key, value = values[edit]
        t[key] = value
    buf = io.BytesIO()
    np.savez(buf, **t)
    data = buf.getvalue()
    label = edit
    if edit == "bytes":
        label, data = F.byte_mutation(data, rng)
    return F.Case("timing", f"timing: {label}", {"s_timing.npz": data}, {})


def load_timing(fx, paths, opts):
    from groundhog_port.tasks.curves import curve
    from groundhog_port.training.adadelta import SGDAdadelta
    from groundhog_port.training.files import load_timings

    path = paths["s_timing.npz"]
    t = load_timings(path, SGDAdadelta.RETURN_NAMES)
    c = curve(path, y="cost", window=10)
    return f"step {int(t['step'])}, {c.updates} updates shown"


# ---------------------------------------------------------------------------------------------
# archive trees
# ---------------------------------------------------------------------------------------------
ARCHIVE_NAMES = (
    "search_state.pkl",
    "search_model.npz",
    "vocab.en.pkl",
    "ivocab.en.pkl",
    "vocab.fr.pkl",
    "ivocab.fr.pkl",
)
#: the names archive reads in an experiment folder (special files go there)
READ_NAMES = (
    "scores_batch.txt",
    "trans_beam10.txt",
    "trans_beam2.txt",
    "sample_beam10_stdout.txt",
    "sample_beam10_error.txt",
    "search_model.npz",
    "search_state.pkl",
    "trace.h5",
    "test.en",
    "test.fr",
    "vocab.en.pkl",
    "ivocab.fr.pkl",
)
CACHE_EDITS = (
    "none",
    "wrong-type",
    "foreign-id",
    "plot-elsewhere",
    "plot-link",
    "script",
    "bytes",
    "deep",
    "long-number",
    "drop-key",
    "extra-key",
)
_TYPES = (None, 1, -1, 1.5, "x", "<script>alert(1)</script>", [], {}, True, [[1]], {"a": 1})


def archive_files(fx, lines=2) -> dict:
    out = {f"root/exp/{n}": fx.read(fx.fixture_dir / n) for n in ARCHIVE_NAMES}
    for n in ("test.en", "test.fr", "trans_beam10.txt", "scores_batch.txt"):
        text = fx.read(fx.fixture_dir / n).split(b"\n")[:lines]
        out[f"root/exp/{n}"] = b"\n".join(text) + b"\n"
    out["root/exp/sample_beam10_stdout.txt"] = b"Total cost of the translations: 1.5\n"
    out["secret.txt"] = f"{SECRET}\n{SECRET} 2\n".encode()
    return out


def gen_archive(rng: random.Random, fx, workdir: Path) -> F.Case:
    files = archive_files(fx)
    specials, labels = [], []
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        name = rng.choice(READ_NAMES)
        kind = rng.choice([*SPECIAL_KINDS, "link:outside", "link:outside", "sparse", "long-line"])
        if kind in ("sparse", "long-line") and not name.endswith(".txt"):
            kind = "link:outside"
        specials.append((f"root/exp/{name}", kind))
        labels.append(f"{name}: {kind}")
    if rng.random() < 0.3:  # the script reaches the report through an archived line
        key = "root/exp/trans_beam10.txt"
        first = files[key].split(b"\n")[0]
        files[key] = first + b"\n<script>alert(1)</script> [x](javascript:alert(1)) |`\n"
        labels.append("script in a trans line")
    cache = rng.choice(CACHE_EDITS) if rng.random() < 0.6 else None
    if cache:
        labels.append(f"cache: {cache}")
    extras = rng.sample(TREE_EXTRAS, rng.choice([0, 0, 1, 2]))
    labels += [f"tree: {e}" for e in extras]
    opts = {
        "special": specials,
        "cache": cache,
        "cache_seed": rng.randrange(2**32),
        "plots": rng.choice([0, 1]),
        "extras": extras,
    }
    return F.Case("archive", "; ".join(labels) or "plain tree", files, opts)


#: what a lab tree may hold beside its experiments (issue 47): folders deeper than the walk
#: goes (70 levels: past its 64, within what the fuzzer's own clean-up can remove), names
#: that are not UTF-8, hostile packs, compressed text
TREE_EXTRAS = (
    "deep folder",
    "latin-1 names",
    "pack: ../x",
    "pack: /abs",
    "pack: link out",
    "pack: 1 GiB declared",
    "pack: damaged",
    "gzip bomb as a text file",
    "gzip test set",
)


def make_extra(root: Path, extra: str, secret: Path) -> None:
    """Lay ``extra`` (one of :data:`TREE_EXTRAS`) out under the archive ``root``."""
    import gzip
    import tarfile

    def tar(name, add):
        with tarfile.open(root / name, "w:gz") as tf:
            add(tf)

    def member(tf, name, data=b"x", **attrs):
        info = tarfile.TarInfo(name)
        info.size = len(data)
        for k, v in attrs.items():
            setattr(info, k, v)
        tf.addfile(info, io.BytesIO(data) if info.isfile() else None)

    if extra == "deep folder":
        path = os.fsencode(root / "scratch")
        for _ in range(70):
            path = os.path.join(path, b"d")
        os.makedirs(path)
    elif extra == "latin-1 names":
        folder = os.path.join(os.fsencode(root), b"r\xe9sultats")
        os.makedirs(folder)
        with open(os.path.join(folder, b"caf\xe9.txt"), "wb") as f:
            f.write(b"une ligne\n")
    elif extra == "pack: ../x":
        tar("dotdot.tar.gz", lambda tf: member(tf, "run/../../x"))
    elif extra == "pack: /abs":
        tar("abs.tar.gz", lambda tf: member(tf, "/tmp/groundhog-fuzz-abs"))
    elif extra == "pack: link out":
        tar(
            "link.tar.gz",
            lambda tf: member(tf, "run/s", type=tarfile.SYMTYPE, linkname=str(secret)),
        )
    elif extra == "pack: 1 GiB declared":
        info = tarfile.TarInfo("run/model.npz")
        info.size = 1 << 30
        (root / "liar.tar.gz").write_bytes(gzip.compress(info.tobuf() + bytes(1024)))
    elif extra == "pack: damaged":
        (root / "damaged.tgz").write_bytes(b"\x1f\x8b\x08 not a stream")
    elif extra == "gzip bomb as a text file":
        one = gzip.compress(b"\n" * (1 << 20), compresslevel=9)
        (root / "exp" / "bomb.en.gz").write_bytes(one * 64)
    elif extra == "gzip test set":
        src = root / "exp" / "test.en"
        if src.is_file():
            (root / "shared").mkdir(exist_ok=True)
            (root / "shared" / "newstest.en.gz").write_bytes(gzip.compress(src.read_bytes()))
    else:
        raise ValueError(extra)


def _edit_result(result: dict, edit: str, rng: random.Random, plot_name: str):
    """The real result of the experiment, edited as ``edit`` says (in place)."""
    paths = []

    def walk(v, where):
        paths.append(where)
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, (*where, k))
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, (*where, i))

    walk(result, ())

    def put(where, value):
        target = result
        for k in where[:-1]:
            target = target[k]
        target[where[-1]] = value

    if edit == "wrong-type":
        put(rng.choice(paths[1:]), rng.choice(_TYPES))
    elif edit == "foreign-id":
        put(
            (rng.choice(["id", "state", "folder", "model"]),),
            rng.choice(["other/", "../x", "/etc"]),
        )
    elif edit == "plot-elsewhere":
        result["plots"] = [
            {
                "sentence": 1,
                "file": rng.choice(
                    [
                        "/dev/zero",
                        "../secret.txt",
                        "../../secret.txt",
                        plot_name + "/..",
                        "report.json",
                    ]
                ),
            }
        ]
    elif edit == "plot-link":
        result["plots"] = [{"sentence": 1, "file": plot_name}]
    elif edit == "script":
        result["notes"] = ["<script>alert(2)</script>"]
        where = rng.choice([p for p in paths if p and isinstance(p[-1], str)] or [("notes",)])
        with contextlib.suppress(Exception):
            put(where, "<script>alert(3)</script>")
    elif edit == "drop-key":
        result.pop(rng.choice(sorted(result)))
    elif edit == "extra-key":
        result[rng.choice(["extra", "id2"])] = "<script>"


def _write_cache(root: Path, out: Path, opts, edit: str, seed: int):
    from groundhog_port.tasks import archive
    from groundhog_port.tasks.archive.cache import cache_key, entry_path, safe_name, strict_json

    rng = random.Random(seed)
    run = archive.Run(root, opts.data_dirs)
    (entry,) = archive.discover(run)
    result = strict_json(archive.redo(run, entry, opts, out))
    plot_name = f"plots/{safe_name(entry.id)}/align_0001.png"
    if edit == "plot-link":
        png = out / plot_name
        make_special(
            png, rng.choice(["link:/dev/zero", "link:outside"]), root.parent / "secret.txt"
        )
    if edit not in ("none", "bytes", "deep", "long-number"):
        _edit_result(result, edit, rng, plot_name)
    text = json.dumps({"key": cache_key(entry, opts), "result": result}).encode()
    if edit == "bytes":
        text = F.byte_mutation(text, rng)[1]
    elif edit == "deep":
        text = text[:-1] + b', "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    elif edit == "long-number":
        text = text.replace(b'"sentence": 1', b'"sentence": ' + b"1" * 5000)
    path = entry_path(out, entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text)


def run_archive(fx, paths, opts) -> F.Outcome:
    from groundhog_port.cli.commands import archive as command
    from groundhog_port.cli.main import build_parser, main

    d = paths["secret.txt"].parent
    root, out, secret = d / "root", d / "out", d / "secret.txt"
    argv = ["archive", str(root), "--out", str(out), "--max-sentences", "2"]
    argv += ["--plots", str(opts["plots"])]
    if opts.get("cache"):
        args = build_parser().parse_args(argv)
        _write_cache(root, out, command._options(args), opts["cache"], opts["cache_seed"])
    for name, kind in opts["special"]:
        make_special(d / name, kind, secret)
    for extra in opts.get("extras", ()):
        make_extra(root, extra, secret)
    before, secret_before = tree_state(root), secret.read_bytes()
    rc, o, err = F.run_cli_inprocess(main, ["--log-level", "ERROR", *argv], cwd=d)
    if "Traceback" in err:
        return F.Outcome("CRASH", err.strip().splitlines()[-1])
    if rc == 1:
        result = F.Outcome("loaded", "exit 1: the report lists what was not done")
    else:
        result = F.check_cli(rc, o, err)
    after = tree_state(root)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    if changed or secret.read_bytes() != secret_before:
        return F.Outcome("replaced", f"{changed[:5]} changed under ROOT ({result.outcome})")
    for name in ("report.html", "report.md", "report.json"):
        p = out / name
        if not p.is_file():
            continue
        text = p.read_text(encoding="utf-8", errors="replace")
        if SECRET in text:
            return F.Outcome("raw", f"{name} quotes the file outside ROOT")
        if name != "report.json" and "<script" in text:
            return F.Outcome("raw", f"{name} holds a raw <script>")
        if name == "report.html" and text.count("base64,") > opts["plots"]:
            return F.Outcome("raw", f"{name} embeds {text.count('base64,')} files")
    return result
