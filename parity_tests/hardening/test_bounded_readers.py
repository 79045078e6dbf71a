"""Bounded and total readers (issue 40, items 2-4): checkpoint folders, archive trees and
their caches, timing files, long inputs and special files.

Each finding of the red team is a test here.  Through a command (in its own process, under
the address-space cap of ``test_hostile_files.run_capped``): exit 2 with ONE error line
naming the file (or, for ``archive``, which lists what it could not do, exit 1 with the
reason in the report), no traceback, peak RSS under 512 MiB above the baseline, and every
input byte for byte as it was.  In-process where the reader is a function.
"""

import hashlib
import json
import os
import shutil
import socket
import struct

import numpy as np
import pytest

from groundhog_port import budget, untrusted
from groundhog_port.errors import LegacyInputError
from parity_tests.hardening import test_hostile_files as hostile
from parity_tests.hardening.test_hostile_files import (
    RSS_BOUND_MIB,
    assert_refused,
    run_capped,
    write,
)
from parity_tests.support.command_lines import FX, MODEL, STATE, translate_args
from parity_tests.support.inprocess import run_cli

#: peak RSS of translate on the fixture, the bound's reference (test_hostile_files' fixture)
baseline = hostile.baseline


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.fixture
def fifo(tmp_path):
    """A FIFO nobody writes to: any blocking open of it hangs (the test then times out)."""
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def _alarm(seconds):
    """Fail instead of hanging when a reader blocks on a FIFO."""
    import signal

    def fail(*_):
        raise AssertionError(f"blocked for {seconds} s")

    signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)


@pytest.fixture
def no_hang():
    _alarm(20)
    yield
    import signal

    signal.alarm(0)


# ---------------------------------------------------------------------------------------------
# JSON under the parse budget
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "data, words",
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested deeper than 32"),  # RecursionError before
        (b'{"a": ' + b"[" * 900 + b"]" * 900 + b"}", "nested deeper than 32"),  # parsed, then
        (b'{"a": ' + b"7" * 5000 + b"}", "a number of 5000 characters"),  # ValueError before
        (b'{"a": NaN}', "NaN is not JSON"),
        (b'{"a": -Infinity}', "-Infinity is not JSON"),
        (b'{"a": 1e999}', "out of range"),
        (b'{"a": "\xff"}', "not UTF-8 JSON (UnicodeDecodeError"),
        (b'{"a": ', "not UTF-8 JSON (JSONDecodeError"),
    ],
)
def test_json_is_bounded_and_total(data, words):
    with pytest.raises(LegacyInputError) as err:
        untrusted.load_json(data, "c.json", "config.json")
    assert str(err.value).startswith("c.json: config.json") and words in str(err.value)


def test_json_charged_before_it_is_parsed(monkeypatch):
    """200,000 elements are charged 160 bytes each (32 MB) against a 16 MiB budget: refused
    by counting separators, nothing parsed; 2 MB of one string fits."""
    monkeypatch.setattr(budget, "_chosen_mib", 16)
    many = b"[" + b"0," * 200_000 + b"0]"
    with pytest.raises(LegacyInputError, match="over the parse budget of 16 MiB"):
        untrusted.load_json(many, "c.json")
    assert untrusted.load_json(b'["' + b"x" * 2_000_000 + b'"]') == ["x" * 2_000_000]


# ---------------------------------------------------------------------------------------------
# special files, sizes and lines
# ---------------------------------------------------------------------------------------------
def test_special_files_refused_by_type_before_any_open(tmp_path, fifo, no_hang):
    from groundhog_port.legacy.data import read_text_lines
    from groundhog_port.tasks.rescore import read_lines
    from groundhog_port.training.files import load_timings
    from legacy_states import safe_load_pickle

    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    cases = [(fifo, "a FIFO"), ("/dev/zero", "a character device"), (tmp_path / "sock", "a socket")]
    for path, kind in cases:
        for reader in (read_text_lines, read_lines, safe_load_pickle, load_timings):
            with pytest.raises(LegacyInputError, match=f"is {kind}") as err:
                reader(path)
            assert str(err.value).startswith(str(path))
    sock.close()
    link = tmp_path / "scores_batch.txt"
    link.symlink_to("/dev/urandom")
    with pytest.raises(LegacyInputError, match="is a character device"):
        read_lines(link)


def test_sizes_checked_before_reading_and_lines_bounded(tmp_path):
    from groundhog_port.legacy.data import read_text_lines
    from groundhog_port.tasks.rescore import read_lines

    sparse = tmp_path / "trans_beam10.txt"  # 2 GB of holes: took +2 GiB
    with open(sparse, "wb") as f:
        f.truncate(2 << 30)
    long = write(tmp_path / "long.en", b"ok\n" + b"w " * 40_000 + b"\n")  # 80 KB line 2
    for reader in (read_text_lines, read_lines):
        with pytest.raises(LegacyInputError, match="2147483648 bytes would take about 2048 MiB"):
            reader(sparse)
        with pytest.raises(LegacyInputError, match="line 2 is longer than 65536 bytes"):
            reader(long)
    fits = write(tmp_path / "fits.en", b"w " * 30_000 + b"\nlast")
    assert read_text_lines(fits) == ["w " * 29_999 + "w", "last"]
    assert read_lines(fits) == ["w " * 30_000, "last"]


def test_cli_source_from_dev_zero_fifo_and_a_long_line(tmp_path, baseline, fifo):
    """``translate --source /dev/zero`` reached 2.5 GiB, a 300 MB one-line file 1.15 GB, a
    FIFO blocked for ever; ``bleu`` on 1 M-token lines took +1.1 GiB."""
    line = write(tmp_path / "line.en", b"the " * 2_500_000)  # 10 MB, one line
    big = tmp_path / "big.en"
    with open(big, "wb") as f:
        f.truncate(300 << 20)  # 300 MB, no newline
    cases = [
        ("/dev/zero", "is a character device"),
        (fifo, "is a FIFO"),
        (line, "line 1 is longer than 65536 bytes"),
        (big, "over the parse budget"),
    ]
    for src, words in cases:
        run = run_capped(*translate_args(src, "--trans", tmp_path / "o.fr", beam=2, batch=None))
        assert_refused(run, baseline, src, words)
    tokens = write(tmp_path / "hyp.txt", b" ".join(b"w%d" % i for i in range(1_000_000)) + b"\n")
    run = run_capped("bleu", "--hyp", tokens, "--ref", tokens)
    assert_refused(run, baseline, tokens, "longer than 65536 bytes")
    assert not (tmp_path / "o.fr").exists()


# ---------------------------------------------------------------------------------------------
# exported checkpoints: config.json and model.safetensors
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("exported") / "ckpt"
    r = run_cli("export", "--format", "safetensors", "--state", STATE, MODEL, out)
    assert r.returncode == 0, r.stderr
    return out


def _copy_export(exported, tmp_path):
    d = tmp_path / "ckpt"
    shutil.copytree(exported, d)
    return d


def _edit_config(d, edit):
    path = d / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    edit(config)
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def _safetensors(path, header, data=b""):
    blob = json.dumps(header, separators=(",", ":")).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + data)
    return path


def _translate_checkpoint(d, tmp_path):
    src = write(tmp_path / "src.en", b"he is expensive .\n")
    search = ["--beam-search", "--beam-size", "2", "--source", src, "--trans", tmp_path / "o.fr"]
    return run_capped("translate", "--checkpoint", d, *search)


def test_config_json_bounded_in_process(exported, tmp_path):
    """What raised RecursionError / ValueError tracebacks: one error naming config.json."""
    from groundhog_port.legacy.exported import open_checkpoint

    d = _copy_export(exported, tmp_path)
    cases = [
        (lambda c: c["state"].update(deep=json.loads("[" * 900 + "]" * 900)), "nested deeper"),
        (lambda c: c["state"].update(x={"__float__": "abc"}), "\"__float__\": 'abc'"),
        # fuzz seed 3823347203 case 51: a list there was a TypeError (unhashable)
        (lambda c: c["state"].update(x={"__float__": []}), '"__float__": []'),
        (lambda c: c.update(weights="/dev/zero"), "\"weights\" is '/dev/zero'"),
        (lambda c: c.update(weights="../ckpt/model.safetensors"), "the name of a file beside"),
    ]
    for edit, words in cases:
        shutil.copy(exported / "config.json", d / "config.json")
        path = _edit_config(d, edit)
        with pytest.raises(LegacyInputError) as err:
            open_checkpoint(d)
        assert str(err.value).startswith(f"{path}: ") and words in str(err.value), err.value
    path = write(d / "config.json", b'{"format": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    with pytest.raises(LegacyInputError, match="nested deeper than 16"):
        open_checkpoint(d)
    write(path, b'{"format_version": ' + b"1" * 5000 + b"}")
    with pytest.raises(LegacyInputError, match="a number of 5000 characters"):
        open_checkpoint(d)


@pytest.mark.parametrize("dtype", ["BF16", "F8_E4M3", "F16", "I32", "BOOL"])
def test_safetensors_dtypes_refused_by_name(exported, tmp_path, dtype):
    from groundhog_port.legacy.exported import check_weights_header

    header = {
        "__metadata__": {"format": "x"},
        "W": {"dtype": dtype, "shape": [2], "data_offsets": [0, 4]},
    }
    path = _safetensors(tmp_path / "model.safetensors", header, b"\0" * 4)
    with pytest.raises(
        LegacyInputError, match=f"has dtype '{dtype}': a GroundHog checkpoint holds"
    ):
        check_weights_header(path)


def test_checkpoint_folders_through_the_command(exported, tmp_path, baseline, fifo):
    """A 29 MiB config.json took +1.4 GiB and loaded; 1.3 M zero-size tensors +1.15 GiB, 94 MB
    of metadata +805 MiB (both loaded); a FIFO as model.safetensors blocked in a native
    open() that SIGTERM could not interrupt; BF16 was a traceback."""
    d = _copy_export(exported, tmp_path)
    weights, config = d / "model.safetensors", d / "config.json"
    good = weights.read_bytes()
    # the files are streamed out: ru_maxrss of a forked child counts the RSS of this process
    # at the fork (before exec), so holding them here would be measured as the command's
    text = (exported / "config.json").read_text(encoding="utf-8")
    head, tail = text.split('"source_word2idx": {', 1)
    with open(config, "w", encoding="utf-8") as f:  # 29 MiB of vocabulary-shaped JSON
        f.write(head + '"source_word2idx": {')
        for start in range(0, 1_600_000, 100_000):
            f.write("".join(f'"w{i}": {i}, ' for i in range(start, start + 100_000)))
        f.write(tail)
    assert config.stat().st_size > 29 << 20
    before = digest(config)
    assert_refused(_translate_checkpoint(d, tmp_path), baseline, config, "over the parse budget")
    assert digest(config) == before
    shutil.copy(exported / "config.json", config)
    entry = b'{"dtype":"F32","shape":[0],"data_offsets":[0,0]}'
    zero = (b'"t%d":%s' % (i, entry) for i in range(1_300_000))  # 1.3 M zero-size tensors
    meta = [b'"__metadata__":{"format":"groundhog-port","x":"', *[b"m" * 1_000_000] * 94, b'"}']
    for parts in (zero, meta):
        with open(weights, "wb") as f:
            f.write(b"\0" * 8 + b"{")
            for i, part in enumerate(parts):
                f.write((b"," if i and parts is zero else b"") + part)
            f.write(b"}")
            size = f.tell()
            f.seek(0)
            f.write(struct.pack("<Q", size - 8))
        run = _translate_checkpoint(d, tmp_path)
        assert_refused(run, baseline, weights, "safetensors header", "over the parse budget")
    weights.unlink()
    os.mkfifo(weights)
    assert_refused(_translate_checkpoint(d, tmp_path), baseline, weights, "is a FIFO")
    weights.unlink()
    header_len = struct.unpack("<Q", good[:8])[0]
    head = json.loads(good[8 : 8 + header_len])
    for name, info in head.items():
        if name != "__metadata__":
            info["dtype"] = "BF16"
            break
    _safetensors(weights, head, good[8 + header_len :])
    assert_refused(_translate_checkpoint(d, tmp_path), baseline, weights, "has dtype 'BF16'")


# ---------------------------------------------------------------------------------------------
# timing files
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda t: t.update(step=np.float64("nan")), "timing 'step' is nan"),
        (lambda t: t.update(step=np.array("12")), "timing 'step' is a <U2 value"),
        (lambda t: t.update(step=np.arange(3)), "timing 'step' is an array of shape (3,)"),
        (lambda t: t.update(step=np.int64(-4)), "a whole number >= 0"),
        (
            lambda t: t.update(cost=np.zeros((4, 2), np.float32)),
            "'cost' is an array of shape (4, 2)",
        ),
        (lambda t: t.pop("cost"), "no 'cost' in the timing file"),
        (lambda t: t.update(next_offset=np.float32(0.5)), "'next_offset' is 0.5"),
    ],
)
def test_tampered_timing_files(tmp_path, edit, words):
    """A tampered ``*_timing.npz`` (NaN, text or array step, 2-D or missing cost) was a
    traceback in ``train --resume`` and ``plot-training``."""
    from groundhog_port.tasks.curves import curve
    from groundhog_port.training.files import load_timings

    t = {"step": np.int64(300), "next_offset": np.int64(-1), "cost": np.ones(400, np.float32)}
    t["log2_p_expl"] = np.ones(400, np.float32)
    edit(t)
    path = tmp_path / "s_timing.npz"
    np.savez(path, **t)
    with pytest.raises(LegacyInputError) as err:
        load_timings(path)
    assert str(err.value).startswith(f"{path}: ") and words in str(err.value), err.value
    if "cost" not in words:  # plot-training does not need the cost
        with pytest.raises(LegacyInputError, match="timing"):
            curve(path)


# ---------------------------------------------------------------------------------------------
# mathtext in plot labels
# ---------------------------------------------------------------------------------------------
def test_dollar_words_are_labels_not_mathtext(tmp_path):
    """A ``$\\fakecmd$`` token with ``--plot-alignment`` raised inside matplotlib's mathtext
    parser when the picture was drawn."""
    pytest.importorskip("matplotlib")
    from groundhog_port.tasks.plots import plot_alignment, plot_grconv_tree

    words = ["$\\fakecmd$", "$x^{", "a"]
    out = plot_alignment(np.full((3, 3), 1 / 3), words, words, tmp_path / "a.png", title="$\\t$")
    assert out.read_bytes()[:4] == b"\x89PNG"
    gates = np.full((2, 3, 3), 1 / 3)
    plot_grconv_tree(gates, words, tmp_path / "t.png", title="$\\t$")
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"


# ---------------------------------------------------------------------------------------------
# the ONNX driver (standalone: its own small bounded readers)
# ---------------------------------------------------------------------------------------------
def test_onnx_driver_errors_are_one_line(tmp_path, capsys):
    from groundhog_port.export import beam_search

    d = tmp_path / "export"
    d.mkdir()
    config = {
        "graphs": {"encoder": "e.onnx", "next_probs": "p.onnx", "next_states": "s.onnx"},
        "search": {"null_sym_source": 0, "unk_sym_source": 1, "n_sym_source": 10, "oov": "UNK"},
        "vocabularies": {"source_word2idx": {}, "source_idx2word": {}, "target_idx2word": {}},
    }
    (d / "config.json").write_text(json.dumps(config), encoding="utf-8")
    src = write(tmp_path / "src.en", b"a b\n")
    bad = write(tmp_path / "bad.en", b"a\n\xff\xfe\n")
    run = lambda *a: beam_search.main(["--model-dir", str(d), "--beam-size", "2", *map(str, a)])
    out = tmp_path / "out.txt"
    cases = [
        (tmp_path / "missing.en", out, "missing.en: cannot read the --source file"),
        (bad, out, "bad.en: line 2: not valid UTF-8"),
        ("/dev/zero", out, "not a regular file"),
        (tmp_path, out, "is a folder"),
        (src, tmp_path, "is a folder, not a file to write --trans to"),
        (src, out, "has no word id null_sym_target"),
    ]
    for source, trans, words in cases:
        assert run("--source", source, "--trans", trans) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("beam_search.py: error: "), err
        assert words in err[0], err[0]
    (d / "config.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    assert run("--source", src, "--trans", tmp_path / "out.txt") == 2
    assert "nested deeper than 16" in capsys.readouterr().err
    assert not (tmp_path / "out.txt").exists()


# ---------------------------------------------------------------------------------------------
# archive: trees, links, special files and caches
# ---------------------------------------------------------------------------------------------
ARCHIVE_FILES = ("search_state.pkl", "search_model.npz", "vocab.en.pkl", "ivocab.en.pkl")
ARCHIVE_FILES += ("vocab.fr.pkl", "ivocab.fr.pkl")


def _experiment(folder, lines=2):
    folder.mkdir(parents=True)
    for name in ARCHIVE_FILES:
        shutil.copy(FX / name, folder / name)
    for name in ("test.en", "test.fr", "trans_beam10.txt"):
        text = (FX / name).read_text(encoding="utf-8").splitlines(keepends=True)[:lines]
        (folder / name).write_text("".join(text), encoding="utf-8")
    return folder


def _options(root, out, *extra):
    from groundhog_port.cli.commands import archive as command
    from groundhog_port.cli.main import build_parser

    argv = ["archive", str(root), "--out", str(out), "--max-sentences", "2", "--plots", "1"]
    args = build_parser().parse_args([*argv, *extra])
    return argv, command._options(args)


def test_cache_key_is_the_content(tmp_path):
    """A tree of the same names, sizes and modification times but other bytes reused the
    results of the one before ("1/1 identical" where a fresh run says 0/1)."""
    from groundhog_port.tasks import archive
    from groundhog_port.tasks.archive.cache import cache_key

    root = tmp_path / "root"
    e = _experiment(root / "exp")
    _, opts = _options(root, tmp_path / "out")
    keys = []
    for name in ("trans_beam10.txt", "search_model.npz", "vocab.en.pkl"):
        path = e / name
        st = path.stat()
        data = bytearray(path.read_bytes())
        data[-2] ^= 1  # the same size
        path.write_bytes(bytes(data))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        (entry,) = archive.discover(archive.Run(root))
        keys.append(cache_key(entry, opts))
    (entry,) = archive.discover(archive.Run(root))
    assert len(set(keys)) == 3 and cache_key(entry, opts) == keys[-1]


def _redone(out, entry, opts):
    from groundhog_port.tasks.archive import Run, redo
    from groundhog_port.tasks.archive.cache import strict_json

    return strict_json(redo(Run(entry.folder.parent), entry, opts, out))


def _crafted(out, entry, opts, result, result_edit):
    """A cache entry of ``entry`` with the right key holding ``result`` edited; returns
    :func:`archive.cache.problem`'s reason to refuse it."""
    import copy

    from groundhog_port.tasks import archive
    from groundhog_port.tasks.archive.cache import cache_key, entry_path, problem

    result = copy.deepcopy(result)
    result_edit(result)
    path = entry_path(out, entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    key = cache_key(entry, opts)
    path.write_text(json.dumps({"key": key, "result": result}))
    root = entry.folder.parent
    return problem(json.loads(path.read_text()), key, entry, opts, out, archive.Run(root).rel)


def test_crafted_cache_entries_are_redone(tmp_path):
    """An entry with the right key is still checked: the wrong type (was a traceback), another
    experiment's id, a plot outside OUT/plots (``/dev/zero`` reached 3.2 GB as base64), a plot
    through a link, are each re-done with a warning, never used."""
    from groundhog_port.tasks import archive
    from groundhog_port.tasks.archive.cache import cached, safe_name

    root = tmp_path / "root"
    _experiment(root / "exp")
    out = tmp_path / "out"
    _, opts = _options(root, out, "--plots", "0")
    (entry,) = archive.discover(archive.Run(root))
    rel = archive.Run(root).rel
    edits = [
        (lambda r: None, None),
        (lambda r: r.update(reproduction="<script>"), "result['reproduction'] is not a list"),
        (lambda r: r["reproduction"][0].update(identical="1"), "['identical'] is of the wrong"),
        (lambda r: r.update(id="other/"), "its id is 'other/'"),
        (lambda r: r["notes"].append(7), "result['notes'][0] is of the wrong type"),
        (lambda r: r.update(extra=1), "unknown key 'extra'"),
        (lambda r: r["plots"].append({"sentence": 1, "file": "/dev/zero"}), "1 plots, more"),
    ]
    result = _redone(out, entry, opts)
    for edit, why in edits:
        got = _crafted(out, entry, opts, result, edit)
        assert (got is None) if why is None else (why in got), (why, got)
        assert (cached(out, entry, opts, rel) is None) == (why is not None)
    _, opts = _options(root, out)  # --plots 1
    result = _redone(out, entry, opts)
    plot_dir = out / "plots" / safe_name(entry.id)
    wanted = {"sentence": 1, "file": f"plots/{safe_name(entry.id)}/align_0001.png"}
    assert result["plots"] == [wanted]
    for target, why in [
        (None, "is missing"),
        ("/dev/zero", "is a link"),
        (b"GIF89a", "is not a PNG"),
        (b"\x89PNG\r\n\x1a\n", None),
    ]:
        png = plot_dir / "align_0001.png"
        if png.exists() or png.is_symlink():
            png.unlink()
        if isinstance(target, str):
            png.symlink_to(target)
        elif target is not None:
            png.write_bytes(target)
        got = _crafted(out, entry, opts, result, lambda r: None)
        assert (got is None) if why is None else (why in got), (why, got)
        assert (cached(out, entry, opts, rel) is None) == (why is not None)


def test_hostile_archive_tree(tmp_path, baseline, fifo):
    """A FIFO named scores_batch.txt hung ``archive``; ``scores_batch_holdout.txt ->
    /dev/urandom`` took +3.2 GiB; a trans file linked to a file outside ROOT was quoted in
    the report; a crafted cache entry put a raw ``<script>`` into report.html and embedded
    ``/dev/zero``; report.md passed raw HTML from sentences."""
    from groundhog_port.tasks import archive
    from parity_tests.support.archive import tree_digest

    root, out, secret = tmp_path / "root", tmp_path / "out", tmp_path / "secret.txt"
    e = _experiment(root / "exp")
    secret.write_text("SECRET-LINE-1\nSECRET-LINE-2\n", encoding="utf-8")
    (e / "trans_beam5.txt").symlink_to(secret)
    (e / "scores_batch.txt").unlink(missing_ok=True)
    os.rename(fifo, e / "scores_batch.txt")
    (e / "scores_batch_holdout.txt").symlink_to("/dev/urandom")
    trans = e / "trans_beam10.txt"
    first = trans.read_text(encoding="utf-8").splitlines()[0]
    trans.write_text(f"{first}\n<script>alert(1)</script> [x](javascript:alert(1)) | `y`\n")
    argv, opts = _options(root, out)
    (entry,) = archive.discover(archive.Run(root, opts.data_dirs))
    _crafted(
        out,
        entry,
        opts,
        _redone(out, entry, opts),
        lambda r: r.update(
            notes=["<script>alert(2)</script>"],
            plots=[{"sentence": 1, "file": "../../../../dev/zero"}],
        ),
    )
    before, secret_before = tree_digest(root), digest(secret)
    run = run_capped(*argv)
    assert run.rc == 1 and "Traceback" not in run.err, run.err[-3000:]
    assert run.peak_mib - baseline < RSS_BOUND_MIB
    assert tree_digest(root) == before and digest(secret) == secret_before
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    why = {n["what"]: n["why"] for n in report["experiments"][0]["not_done"]}
    assert "is a FIFO" in why["scores_batch.txt"]
    assert "is a character device" in why["scores_batch_holdout.txt"]
    assert "outside the archive: not read" in why["trans_beam5.txt"]
    assert "the cached result" in run.err and "not used" in run.err
    page = (out / "report.html").read_text(encoding="utf-8")
    md = (out / "report.md").read_text(encoding="utf-8")
    for text in (page, md, (out / "report.json").read_text(encoding="utf-8")):
        assert "SECRET-LINE" not in text
    for text in (page, md):
        assert "<script>" not in text and "&lt;script&gt;alert(1)" in text
    assert "[x](javascript" not in md and "\\[x\\](javascript" in md
    assert page.count("data:image/png;base64,") == 1 and "AAAAAAAAAAAAAAAAAAAAAAAA" not in page


# ---------------------------------------------------------------------------------------------
# JSON held in trace attributes
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("attr", ["param_order", "changed_params"])
@pytest.mark.parametrize(
    "text, words",
    [("[" * 100_000 + "]" * 100_000, "nested deeper"), ("[" + "9" * 5000 + "]", "5000 characters")],
)
def test_trace_json_attributes_bounded(tmp_path, attr, text, words):
    """``/train_step``'s JSON attributes: ``param_order`` let a RecursionError through
    (``json.loads`` caught only TypeError/ValueError)."""
    h5py = pytest.importorskip("h5py")
    from groundhog_port.harness.groups.train_step import read_train_step
    from groundhog_port.harness.trace import TraceFile
    from parity_tests.support.cases import LEGACY_ROOT

    src = LEGACY_ROOT / "search" / "trace.h5"
    if not src.is_file():
        pytest.skip(f"no recorded trace at {src}")
    path = tmp_path / "trace.h5"
    with h5py.File(src, "r") as f, h5py.File(path, "w") as g:
        for k, v in f.attrs.items():
            g.attrs[k] = v
        f.copy("train_step", g)
        g["train_step"].attrs[attr] = text
    with TraceFile(path) as tr:
        reader = tr.train_step if attr == "changed_params" else lambda: read_train_step(tr)
        with pytest.raises(LegacyInputError) as err:
            reader()
    assert str(err.value).startswith(str(path)), err.value
    if attr == "changed_params":
        assert words in str(err.value), err.value
