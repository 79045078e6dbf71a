"""No output ever replaces an input or an archived result (issue 40, item 1).

Each test is one of the issue's reproductions ("Evidence destroyed"), or a way around the
guard found while building it: the command is run on copies of the fixture (or of a
recorded case), every file it could touch is hashed before and after (links by their
target, files by their bytes), and the run must end with ONE error line and exit 2, every
hash as it was.  The guard is :func:`groundhog_port.outputs.check_outputs` (outputs against
the files the run reads and the folders it checks), :func:`~groundhog_port.outputs.file_in`
(no link followed inside an output folder) and
:func:`~groundhog_port.outputs.check_partial` (a partial file is never a link or another
file's hard link); ``train`` refuses damaged Adadelta accumulators and never writes a model
with NaN weights over a finite one.
"""

import hashlib
import importlib.util
import os
import pickle
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest

from parity_tests.support.cases import FIXTURES, recording_dir
from parity_tests.support.command_lines import score_args, source_file, translate_args
from parity_tests.support.inprocess import run_here
from parity_tests.support.training import train_bundled_search

pytestmark = pytest.mark.hardening


def tree_digest(*roots):
    """``{path: digest}`` of everything under ``roots`` (links not followed): a link by the
    text it points to, a folder by its name, a file by the sha256 of its bytes."""
    out = {}
    for root in roots:
        root = Path(root)
        paths = [root] if not root.is_dir() or root.is_symlink() else sorted(root.rglob("*"))
        for p in paths:
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[str(p)] = "link -> " + os.readlink(p)
            elif stat.S_ISDIR(st.st_mode):
                out[str(p)] = "folder"
            else:
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def refused(argv, roots, *words, cwd=None):
    """``groundhog-port ARGV`` (in this process): exit 2, exactly one line on stderr (which
    holds every one of ``words``), and everything under ``roots`` as it was.  Returns the
    line."""
    before = tree_digest(*roots)
    rc, out, err = run_here(*argv, log_level="WARNING", cwd=cwd)
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, (rc, out[-2000:], err[-3000:])
    for w in words:
        assert w in lines[0], err
    assert tree_digest(*roots) == before
    return lines[0]


@pytest.fixture
def case(tmp_path):
    """A copy of the bundled search experiment (state, model, vocabularies, test set,
    ``trans_beam10.txt``, ``scores_batch.txt``): an archived case folder."""
    folder = tmp_path / "case"
    shutil.copytree(FIXTURES / "search", folder)
    return folder


def _writable_copy(src, dst):
    shutil.copytree(src, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    return dst


# -- parity --json -----------------------------------------------------------------------
def test_parity_json_never_replaces_the_trace(tmp_path):
    """``parity --case C --json C/trace.h5`` replaced the recorded trace with the JSON
    report (exit 0); also a new name inside C, and a link outside C leading to the trace."""
    c = _writable_copy(recording_dir("search"), tmp_path / "search")
    (tmp_path / "to_trace").symlink_to(c / "trace.h5")
    base = ["parity", "--case", c, "--only", "repr", "--json"]
    refused([*base, c / "trace.h5"], [c], "--trace input")
    refused([*base, tmp_path / "to_trace"], [c, tmp_path / "to_trace"], "--trace input")
    refused([*base, c / "report.json"], [c], "inside the case folder")


# -- reproduce --save-dir ----------------------------------------------------------------
def test_reproduce_save_dir_never_replaces_the_archived_files(case, tmp_path):
    """``reproduce --case C --save-dir C`` overwrote the archived ``trans_*.txt`` it compares
    against (the next run said "identical"); also a link inside the save folder."""
    refused(["reproduce", "--case", case, "--save-dir", case], [case], "inside the case folder")
    refused(["reproduce", "--case", case, "--save-dir", case / "new"], [case], "inside the case")
    archived = ["--archived-trans", case / "trans_beam10.txt", "--beam-size", "10"]
    model = ["--state", case / "search_state.pkl", case / "search_model.npz"]
    test_set = ["--source", case / "test.en", "--ref", case / "test.fr"]
    refused(
        ["reproduce", *model, *test_set, *archived, "--save-dir", case], [case], "archived input"
    )
    out = tmp_path / "out"
    out.mkdir()
    (out / "trans_beam10.txt").symlink_to(case / "test.fr")
    refused(["reproduce", "--case", case, "--save-dir", out], [case, out], "symbolic link", "never")


# -- archive --out -----------------------------------------------------------------------
def _archive_root(tmp_path):
    root = tmp_path / "root"
    shutil.copytree(FIXTURES / "search", root / "exp")
    return root


@pytest.mark.parametrize(
    "link, target",
    [
        ("report.md", "exp/test.fr"),
        ("cache", "exp"),
        ("report.json", "exp/search_state.pkl"),
        ("report.html.partial", "exp/test.en"),
    ],
)
def test_archive_never_writes_through_links_in_out(tmp_path, link, target):
    """``OUT/report.md -> ROOT/exp/test.fr`` had the reference replaced by the report,
    ``OUT/cache -> ROOT/exp`` put the cache files into ROOT."""
    root = _archive_root(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / link).symlink_to(root / target)
    argv = ["archive", root, "--out", out, "--plots", "0", "--max-sentences", "2"]
    refused(argv, [root, out], "symbolic link inside the output folder")


def test_archive_never_writes_through_links_in_its_cache(tmp_path):
    root = _archive_root(tmp_path)
    out = tmp_path / "out"
    (out / "cache").mkdir(parents=True)
    (out / "cache" / "x.json").symlink_to(root / "exp" / "test.en")
    argv = ["archive", root, "--out", out, "--plots", "0", "--max-sentences", "2"]
    refused(argv, [root, out], "symbolic link inside the output folder")


# -- export --------------------------------------------------------------------------------
@pytest.fixture
def exported(case, tmp_path):
    """A safetensors export of the case (``D``: config.json + model.safetensors)."""
    pytest.importorskip("safetensors")
    d = tmp_path / "exported"
    rc, _, err = run_here(
        "export", "--format", "safetensors", "--state", case / "search_state.pkl",
        case / "search_model.npz", d, log_level="WARNING",
    )  # fmt: skip
    assert rc == 0, err
    return d


def test_export_checkpoint_into_itself(exported):
    """``export --format onnx --checkpoint D D`` replaced D's config.json (D no longer
    loaded); the safetensors format would replace both files."""
    pytest.importorskip("onnx")
    for fmt in ("onnx", "safetensors"):
        argv = ["export", "--format", fmt, "--checkpoint", exported, exported]
        refused(argv, [exported], "--checkpoint input")
        argv = ["export", "--format", fmt, "--checkpoint", exported, "--out", exported]
        refused(argv, [exported], "--checkpoint input")


@pytest.mark.parametrize("name, onto", [("model.safetensors", "search_model.npz"),
                                        ("config.json", "search_state.pkl")])  # fmt: skip
def test_export_outdir_links_onto_the_state_or_model(case, tmp_path, name, onto):
    pytest.importorskip("safetensors")
    out = tmp_path / "out"
    out.mkdir()
    (out / name).symlink_to(case / onto)
    argv = ["export", "--format", "safetensors", "--state", case / "search_state.pkl"]
    refused([*argv, case / "search_model.npz", out], [case, out], "symbolic link")


def _driver_main(export_dir):
    spec = importlib.util.spec_from_file_location(
        f"beam_search_guard_{abs(hash(export_dir))}", export_dir / "beam_search.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def test_onnx_driver_trans_never_replaces_its_inputs(case, tmp_path, capsys):
    """The driver's ``--trans`` equal to its ``--source``, its ``config.json``, a graph or
    itself (directly or through a link) replaced it."""
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    d = tmp_path / "onnx"
    rc, _, err = run_here(
        "export", "--format", "onnx", "--state", case / "search_state.pkl",
        case / "search_model.npz", d, log_level="WARNING",
    )  # fmt: skip
    assert rc == 0, err
    main = _driver_main(d)
    src = source_file(tmp_path / "s.en", [1, 2])
    (tmp_path / "to_config").symlink_to(d / "config.json")
    capsys.readouterr()
    for trans, what in [
        (src, "--source input"),
        (d / "config.json", "config.json input"),
        (tmp_path / "to_config", "config.json input"),
        (d / "encoder.onnx", "graph input"),
        (d / "beam_search.py", "driver input"),
    ]:
        before = tree_digest(d, src)
        rc = main(["--model-dir", str(d), "--beam-size", "2", "--source", str(src),
                   "--trans", str(trans)])  # fmt: skip
        err = capsys.readouterr().err
        lines = [l for l in err.splitlines() if "error:" in l]
        assert rc == 2 and len(lines) == 1 and what in lines[0], err
        assert tree_digest(d, src) == before
    # and a plain output is written whole, through a new file renamed into place
    assert main(["--model-dir", str(d), "--beam-size", "2", "--source", str(src),
                 "--trans", str(tmp_path / "t.fr")]) == 0  # fmt: skip
    assert len((tmp_path / "t.fr").read_text(encoding="utf-8").splitlines()) == 2
    assert not (tmp_path / "t.fr.partial").exists()


# -- the preprocessing commands ----------------------------------------------------------
def test_invert_dict_onto_its_input(case):
    v = case / "vocab.en.pkl"
    refused(["invert-dict", v, v], [case], "INPUT input")
    (case / "link.pkl").symlink_to(v)
    refused(["invert-dict", v, case / "link.pkl"], [case], "INPUT input")


def test_pkl2hdf5_onto_its_input(tmp_path):
    b = tmp_path / "b.pkl"
    b.write_bytes(pickle.dumps([[1, 2, 3], [4, 5]], protocol=2))
    refused(["pkl2hdf5", b, b], [tmp_path], "INPUT input")


def test_shuffle_hdf5_onto_its_inputs(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for side, ids in (("a", [[1, 2], [3]]), ("b", [[4], [5, 6]])):
        (data / f"{side}.pkl").write_bytes(pickle.dumps(ids, protocol=2))
        rc, _, err = run_here(
            "pkl2hdf5", data / f"{side}.pkl", data / f"{side}.h5", log_level="WARNING"
        )
        assert rc == 0, err
    a, b = data / "a.h5", data / "b.h5"
    refused(["shuffle-hdf5", a, b, a, b, "--seed", "1"], [data], "SOURCE_INPUT input")
    refused(["shuffle-hdf5", a, b, data / "o.h5", a, "--seed", "1"], [data], "SOURCE_INPUT")


def test_preprocess_onto_its_input(case):
    t = case / "test.en"
    refused(["preprocess", "-o", "-d", t, t], [case], "-d", "input input", cwd=case)
    refused(["preprocess", "-p", "--ivocab", t, t], [case], "--ivocab", cwd=case)


def test_convert_onto_its_input_needs_in_place(tmp_path):
    """``convert IN IN`` (without ``--in-place``) is refused like every other collision."""
    old = FIXTURES / "search" / "search_model.npz"  # today's layout: converting it is a no-op
    m = tmp_path / "m.npz"
    shutil.copyfile(old, m)
    refused(["convert", m, m], [tmp_path], "--in-place")


# -- translate / score: the vocabularies the state names are inputs too -----------------------
def test_translate_and_score_never_replace_a_vocabulary(case, tmp_path):
    src = source_file(tmp_path / "s.en", [1])
    st, m = case / "search_state.pkl", case / "search_model.npz"
    refused(
        translate_args(src, "--trans", case / "vocab.en.pkl", state=st, model=m),
        [case, src],
        "word_indx vocabulary input",
    )
    refused(
        score_args("batch", src, src, "--scores", case / "ivocab.fr.pkl", state=st, model=m),
        [case, src],
        "indx_word_target vocabulary input",
    )


def test_partial_file_linked_to_an_input(case, tmp_path):
    """``OUT.partial`` left as a link (or a hard link) to an input: the partial file was
    opened through it and cut to nothing before the rename (the test set lost)."""
    src = source_file(tmp_path / "s.en", [1])
    out = tmp_path / "o.txt"
    (tmp_path / "o.txt.partial").symlink_to(case / "test.fr")
    model = {"state": case / "search_state.pkl", "model": case / "search_model.npz"}
    argv = score_args("txt", src, src, "--allow-unk", "--scores", out, **model)
    refused(argv, [case, tmp_path], "o.txt.partial", "symbolic link")
    (tmp_path / "o.txt.partial").unlink()
    os.link(case / "test.fr", tmp_path / "o.txt.partial")
    refused(argv, [case, tmp_path], "hard link")


# -- train -----------------------------------------------------------------------------------
def _data():
    from parity_tests.parity.test_training import DATA

    if not (DATA / "binarized_text.shuffled.en.h5").is_file():
        pytest.skip(f"the shared corpus is not at {DATA}")
    return DATA.resolve()


@pytest.mark.parametrize("bad", [np.nan, -1.0, np.inf])
def test_train_resume_refuses_damaged_accumulators(tmp_path, bad, capsys):
    """``train --resume`` (``--keep-accumulators``) took one NaN (or negative) Adadelta
    accumulator, ran, exited 0 and saved a model with NaN weights over the good checkpoint."""
    from groundhog_port.training import files

    prefix = f"{tmp_path}/k_"
    assert train_bundled_search(_data(), prefix, "loopIters=2", "--keep-accumulators") == 0
    acc = dict(files.load_accumulators(tmp_path / "k_adadelta.npz"))
    acc["gnorm2_W_0_enc_approx_embdr"] = acc["gnorm2_W_0_enc_approx_embdr"].copy()
    acc["gnorm2_W_0_enc_approx_embdr"][0, 0] = bad
    np.savez(tmp_path / "k_adadelta.npz", **acc)
    before = tree_digest(tmp_path)
    capsys.readouterr()
    assert train_bundled_search(_data(), prefix, "loopIters=4", "--keep-accumulators") == 2
    err = capsys.readouterr().err
    lines = [l for l in err.splitlines() if "error:" in l]
    assert len(lines) == 1 and "gnorm2_W_0_enc_approx_embdr holds 1 NaN" in lines[0], err
    assert tree_digest(tmp_path) == before


def test_train_never_saves_nan_weights_over_a_finite_model(tmp_path, monkeypatch, capsys):
    """Whatever makes the weights NaN (here an update forced to NaN), the finite checkpoint
    on disk is kept: one line, exit 2."""
    from groundhog_port.legacy import checkpoint
    from groundhog_port.training import files
    from groundhog_port.training.adadelta import SGDAdadelta

    prefix = f"{tmp_path}/n_"
    assert train_bundled_search(_data(), prefix, "loopIters=1") == 0
    update = SGDAdadelta.update

    def poisoned(self, gs):
        update(self, gs)
        with __import__("torch").no_grad():
            self.params[0][0, 0] = float("nan")

    monkeypatch.setattr(SGDAdadelta, "update", poisoned)
    good = checkpoint.read_npz_arrays(tmp_path / "n_model.npz")
    capsys.readouterr()
    assert train_bundled_search(_data(), prefix, "loopIters=3") == 2
    err = capsys.readouterr().err
    lines = [l for l in err.splitlines() if "error:" in l]
    assert len(lines) == 1 and "NaN/Inf weight" in lines[0] and "left as it was" in lines[0], err
    # the run's first save (of the model it resumed, as mainLoop.py:271) rewrote the same
    # weights; the poisoned ones never replaced them
    kept = checkpoint.read_npz_arrays(tmp_path / "n_model.npz")
    assert set(kept) == set(good) and all(np.array_equal(kept[k], good[k]) for k in good)
    assert int(files.load_timings(tmp_path / "n_timing.npz")["step"]) == 1


def test_train_checkpoint_never_replaces_a_corpus(tmp_path):
    """A prefix whose checkpoint names a training corpus is refused before loading."""
    data = tmp_path / "data"
    shutil.copytree(_data(), data)
    en = data / "binarized_text.shuffled.en.h5"
    (tmp_path / "x_timing.npz").symlink_to(en)
    before = tree_digest(data)
    assert train_bundled_search(data, f"{tmp_path}/x_", "loopIters=1") == 2
    assert tree_digest(data) == before


# -- the fuzzer's collisions target ----------------------------------------------------------
def test_fuzz_target_collisions_every_command(tmp_path):
    """``tools/fuzz.py``'s ``collisions`` target: every command, each folder layout, and
    the file layouts dealt out two per command (all six used), each one clean refusal with
    everything it reads as it was (on 70602bd, before the guard: 48 of the 57 combinations
    replaced a file)."""
    from parity_tests.support import fuzzing as F

    fx = F.Fixtures()
    cases = []
    for i, command in enumerate(F.COLLISION_COMMANDS):
        if command == "parity" and not fx.has_traces or command == "train" and not fx.has_bitexts:
            continue
        if command in ("reproduce", "archive", "export"):
            layouts = F.FOLDER_LAYOUTS
        else:
            n = len(F.COLLISION_LAYOUTS)
            layouts = [F.COLLISION_LAYOUTS[(2 * i) % n], F.COLLISION_LAYOUTS[(2 * i + 1) % n]]
        cases += [(command, layout, i) for layout in layouts]
    for k, (command, layout, victim) in enumerate(cases):
        opts = {"command": command, "layout": layout, "victim": victim}
        case = F.Case("collisions", f"{command} {layout}", {"marker.txt": b""}, opts)
        result = F.run_case(fx, case, tmp_path / str(k))
        assert result.outcome == "clean error", (command, layout, result)


def test_plot_training_never_replaces_a_timing_file(tmp_path):
    """``plot-training T --out P`` with ``P`` (a picture name) linked to ``T``: the picture
    replaced the timing file it plots."""
    pytest.importorskip("matplotlib")
    from groundhog_port.training.loop import new_timings

    t = new_timings({"loopIters": 10, "trainFreq": 1, "validFreq": 5})
    t["step"] = 5
    t["cost"][:5] = t["log2_p_expl"][:5] = [5.0, 4.0, 3.0, 2.5, 2.0]
    np.savez(tmp_path / "x_timing.npz", **t)
    (tmp_path / "curve.png").symlink_to(tmp_path / "x_timing.npz")
    argv = ["plot-training", tmp_path / "x_timing.npz", "--out", tmp_path / "curve.png"]
    argv += ["--window", "2"]
    refused(argv, [tmp_path], "timings input")
