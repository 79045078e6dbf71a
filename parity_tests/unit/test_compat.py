"""Old-vintage checkpoints (experiments/nmt/compat/): recognised on load, converted in memory,
and written by ``groundhog-port convert``.

No old-vintage file was recorded, so each test turns a shared checkpoint into the old layout
with the inverse of the original conversion (split each merged decoder projection into its
forward and ``*_back_*`` halves; drop the ``enc_rec_*`` / ``dec_rec_*`` copies of ``rec_*``;
rename ``log2_p_*`` back to ``cost2_p_*``) and checks that what the port computes from the old
files is what it computes from -- and what GroundHog recorded for -- the current ones.
"""

import logging
import pickle
import shutil
import subprocess

import numpy as np
import pytest
import torch

import legacy_states
from groundhog_port.cli.commands.convert import _py2_strings
from groundhog_port.errors import LegacyInputError
from groundhog_port.legacy import compat
from groundhog_port.legacy.loading import open_experiment
from groundhog_port.legacy.preprocess.py2pickle import dumps
from parity_tests.support.cases import LEGACY_ROOT, assert_scores_match
from parity_tests.support.command_lines import sample_py_args, score_py_args


def cli(capsys, *args):
    from groundhog_port.cli.main import main

    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out.out, out.err)


# -- the inverse operations (test-only) ------------------------------------------------------


def to_old_model(arrays, dim):
    """Inverse of convert_model.py merge_state_projections: the top ``dim`` rows of each merged
    projection stay, the rest become its ``*_back_*`` matrix."""
    out = dict(arrays)
    for merged, back in compat.BACK_PROJECTIONS:
        if merged in out:
            assert out[merged].shape[0] == 2 * dim
            out[merged], out[back] = out[merged][:dim], out[merged][dim:]
    return out


def to_old_state(stored):
    """Inverse of convert_state.py separate_enc_dec_rec_layers (exact only where the copies
    equal the shared options, which is checked)."""
    out = {}
    for k, v in stored.items():
        if k.startswith(("enc_rec_", "dec_rec_")):
            assert stored[k[4:]] == v, f"{k} differs from {k[4:]}: no old-vintage equivalent"
        else:
            out[k] = v
    return out


def old_case(tmp_path, case, old_state=True):
    """A copy of the shared ``case`` with its model (and state) in the old layout."""
    src = LEGACY_ROOT / case
    if not src.is_dir():
        pytest.skip(f"recorded case not found at {src}")
    dst = tmp_path / case
    dst.mkdir()
    for name in (
        "vocab.en.pkl",
        "vocab.fr.pkl",
        "ivocab.en.pkl",
        "ivocab.fr.pkl",
        "test.en",
        "test.fr",
    ):
        shutil.copy(src / name, dst / name)
    stored = legacy_states.safe_load_pickle(src / f"{case}_state.pkl")
    with np.load(src / f"{case}_model.npz") as npz:
        arrays = {k: npz[k] for k in npz.files}
    np.savez(dst / f"{case}_model.npz", **to_old_model(arrays, stored["dim"]))
    state = to_old_state(stored) if old_state else stored
    (dst / f"{case}_state.pkl").write_bytes(dumps(_py2_strings(state), 0))
    return src, dst


def _compat_records(caplog, what):
    return [
        r
        for r in caplog.records
        if r.name == "groundhog_port.legacy.compat" and what in r.getMessage()
    ]


@pytest.mark.parametrize("case,old_state", [("encdec_variant", True), ("search", False)])
def test_old_vintage_loads_as_its_converted_form(tmp_path, caplog, case, old_state):
    src, dst = old_case(tmp_path, case, old_state)
    with caplog.at_level(logging.INFO):
        old = open_experiment(dst / f"{case}_state.pkl", dst / f"{case}_model.npz")
    assert len(_compat_records(caplog, "old-vintage model")) == 1
    assert len(_compat_records(caplog, "old-vintage state")) == (1 if old_state else 0)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        new = open_experiment(src / f"{case}_state.pkl", src / f"{case}_model.npz")
    assert not _compat_records(caplog, "old-vintage")  # current files: no conversion
    assert old.cfg == new.cfg
    for (name, p), (name2, q) in zip(old.model.named_parameters(), new.model.named_parameters()):
        assert name == name2 and torch.equal(p, q), name


@pytest.mark.parametrize("case", ["encdec_variant", "search"])
def test_old_vintage_scores_and_translations_are_unchanged(tmp_path, capsys, one_thread, case):
    src, dst = old_case(tmp_path, case, old_state=case == "encdec_variant")
    state, model = dst / f"{case}_state.pkl", dst / f"{case}_model.npz"
    r = cli(capsys, *sample_py_args(5, state, dst / "test.en", tmp_path / "t.txt", model))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "t.txt").read_bytes() == (src / "trans_beam5.txt").read_bytes()
    r = cli(capsys, *score_py_args(state, model, dst / "test.en", dst / "test.fr"))
    assert r.returncode == 0, r.stderr
    assert_scores_match(r.stdout, (src / "scores_batch.txt").read_text())


def test_strict_loading_still_refuses_anything_else(tmp_path):
    src, dst = old_case(tmp_path, "search", old_state=False)
    model = dst / "search_model.npz"
    with np.load(model) as npz:
        arrays = {k: npz[k] for k in npz.files}
    np.savez(model, W_0_dec_bogus=np.zeros((2, 2), np.float32), **arrays)
    with pytest.raises(LegacyInputError, match="unknown parameter W_0_dec_bogus"):
        open_experiment(dst / "search_state.pkl", model)
    del arrays["W_0_dec_repr_readout"]
    np.savez(model, **arrays)
    with pytest.raises(
        LegacyInputError, match="holds W_0_dec_back_repr_readout but not W_0_dec_repr_readout"
    ):
        open_experiment(dst / "search_state.pkl", model)


def test_convert_writes_the_converted_files(tmp_path, capsys):
    src, dst = old_case(tmp_path, "encdec_variant")
    out = tmp_path / "out"
    out.mkdir()
    # model
    r = cli(capsys, "convert", dst / "encdec_variant_model.npz", out / "m.npz")
    assert r.returncode == 0, r.stderr
    with np.load(out / "m.npz") as a, np.load(src / "encdec_variant_model.npz") as b:
        assert sorted(a.files) == sorted(b.files)
        assert all(np.array_equal(a[k], b[k]) and a[k].dtype == b[k].dtype for k in b.files)
    # state: a Python-2 protocol-0 pickle holding the original's enc_rec_* / dec_rec_* keys
    r = cli(capsys, "convert", dst / "encdec_variant_state.pkl", out / "s.pkl")
    assert r.returncode == 0, r.stderr
    assert (out / "s.pkl").read_bytes()[:2] == b"(d"
    assert legacy_states.safe_load_pickle(out / "s.pkl") == legacy_states.safe_load_pickle(
        src / "encdec_variant_state.pkl"
    )
    assert (
        pickle.load(open(out / "s.pkl", "rb"), encoding="bytes")[b"dec_rec_gater"]
        == b"lambda x: TT.nnet.sigmoid(x)"
    )
    # timing
    with np.load(src / "encdec_variant_timing.npz") as t:
        timing = {k: t[k] for k in t.files}
    old = {
        ("cost2_p" + k[len("log2_p") :] if k.startswith("log2_p_") else k): v
        for k, v in timing.items()
    }
    np.savez(dst / "timing.npz", **old)
    r = cli(capsys, "convert", dst / "timing.npz", out / "t.npz")
    assert r.returncode == 0, r.stderr
    with np.load(out / "t.npz") as t:
        assert sorted(t.files) == sorted(timing)
        for k in timing:  # NaN where GroundHog never validated: equal too
            np.testing.assert_array_equal(t[k], timing[k])
    # a current file: nothing to convert, nothing written; OUTPUT or --in-place required
    r = cli(capsys, "convert", src / "encdec_variant_model.npz", out / "none.npz")
    assert r.returncode == 0 and not (out / "none.npz").exists()
    r = cli(capsys, "convert", dst / "encdec_variant_model.npz")
    assert r.returncode == 2 and "--in-place" in r.stderr


def test_convert_in_place(tmp_path, capsys):
    src, dst = old_case(tmp_path, "search", old_state=False)
    model = dst / "search_model.npz"
    r = cli(capsys, "convert", "--in-place", model)
    assert r.returncode == 0, r.stderr
    with np.load(model) as a, np.load(src / "search_model.npz") as b:
        assert sorted(a.files) == sorted(b.files) and all(
            np.array_equal(a[k], b[k]) for k in b.files
        )
    assert sorted(p.name for p in dst.iterdir() if p.name.endswith(".partial")) == []
