"""The legacy parameter table and checkpoint loading (strict, lenient, bad files)."""

import re

import numpy as np
import pytest
import torch

import legacy_states
from groundhog_port.errors import LegacyInputError, UnsupportedModelError
from groundhog_port.legacy import checkpoint
from groundhog_port.model.config import ModelConfig
from groundhog_port.model.encdec import RNNEncoderDecoder
from parity_tests.support.cases import FIXTURES, REPO, case_dirs, pending_case_dirs


def _case_files(case):
    return next(case.glob("*_state.pkl")), next(case.glob("*_model.npz"))


@pytest.mark.parametrize("case", case_dirs(), ids=lambda p: p.name)
def test_table_matches_every_recorded_checkpoint(case):
    """Every array GroundHog saved is in the table with its shape, and nothing else."""
    state_path, model_path = _case_files(case)
    cfg = ModelConfig.from_state(legacy_states.load_state(state_path), state_path)
    table, _ = checkpoint.legacy_param_table(cfg)
    arrays = checkpoint.read_npz(model_path)
    assert {p.name: p.shape for p in table} == {k: a.shape for k, a in arrays.items()}
    model = RNNEncoderDecoder(cfg)
    checkpoint.load_into(model, model_path)
    for p in table:  # every tensor received its legacy array
        assert np.array_equal(model.get_parameter(p.path).numpy(), arrays[p.name]), p.name


def _fixture_model():
    state_path = FIXTURES / "search" / "search_state.pkl"
    cfg = ModelConfig.from_state(legacy_states.load_state(state_path), state_path)
    return (
        cfg,
        RNNEncoderDecoder(cfg),
        checkpoint.read_npz(FIXTURES / "search" / "search_model.npz"),
    )


def _save(tmp_path, arrays, name="m.npz"):
    path = tmp_path / name
    np.savez(path, **arrays)
    return path


def test_strict_lists_every_offending_name(tmp_path):
    _, model, arrays = _fixture_model()
    arrays = dict(arrays)
    del arrays["W_0_dec_hid_readout_0"]
    arrays["b_dec_deep_softmax"] = arrays["b_dec_deep_softmax"][:10]
    arrays["W_0_stray"] = np.zeros((2, 2), np.float32)
    with pytest.raises(LegacyInputError) as err:
        checkpoint.load_into(model, _save(tmp_path, arrays))
    msg = str(err.value)
    assert "missing W_0_dec_hid_readout_0 (expected shape (32, 32))" in msg
    assert "b_dec_deep_softmax: expected shape (321,), found (10,)" in msg
    assert "unknown parameter W_0_stray" in msg


def test_lenient_is_groundhogs_container_load(tmp_path, caplog):
    """Missing -> stays zero (skip_init=True) with a loud log; unknown -> logged and ignored."""
    _, model, arrays = _fixture_model()
    arrays = dict(arrays)
    del arrays["W_0_dec_hid_readout_0"]
    arrays["W_0_stray"] = np.ones((2, 2), np.float32)
    checkpoint.load_into(model, _save(tmp_path, arrays), lenient=True)
    assert torch.count_nonzero(model.decoder.hid_readout.W) == 0
    assert np.array_equal(model.decoder.hid_readout.b.numpy(), arrays["b_0_dec_hid_readout_0"])
    text = caplog.text
    assert "LENIENT LOAD" in text and "W_0_dec_hid_readout_0" in text and "W_0_stray" in text


def test_lenient_still_refuses_a_shape_mismatch(tmp_path):
    _, model, arrays = _fixture_model()
    arrays = dict(arrays, W_0_dec_hid_readout_0=np.zeros((3, 3), np.float32))
    with pytest.raises(LegacyInputError, match="expected shape"):
        checkpoint.load_into(model, _save(tmp_path, arrays), lenient=True)


def test_unsaved_tensors_are_named():
    cfg, _, _ = _fixture_model()
    _, unsaved = checkpoint.legacy_param_table(cfg)
    names = " ".join(u.name for u in unsaved)
    for name in (
        "b_0_enc_update_embdr_0",
        "b_0_dec_repr_readout",
        "W_0_back_enc_approx_embdr",
        "b_0_dec_dec_inputter_0",
        "b_0_dec_prev_readout_0",
    ):
        assert name in names


def test_every_parameter_has_its_paper_symbol_as_documented():
    """The one vocabulary table: every saved parameter of every recorded architecture (the
    grConv encoder too) carries its symbol from Bahdanau et al. (2015) appendix A, and
    docs/export.md's symbol column (what docstrings and the export metadata cite) shows it
    for that name.  Proven: swapping ``W_a`` and ``U_a`` in ``checkpoint._DECODER`` fails."""
    text = (REPO / "docs" / "export.md").read_text(encoding="utf-8")
    cells = {}
    for name, legacy, cell in re.findall(r"^\| `([\w.]+)` \| `(\w+)` \| (.*) \|$", text, re.M):
        cells[(name, legacy)] = cell
    states = [FIXTURES / "search" / "search_state.pkl"]
    states += [next(c.glob("*_state.pkl")) for c in case_dirs() + pending_case_dirs()]
    for state_path in states:
        cfg = ModelConfig.from_state(legacy_states.load_state(state_path), state_path)
        table, _ = checkpoint.legacy_param_table(cfg)
        for p in table:
            assert p.symbol, p
            cell = cells[(p.path, p.name)]
            if not cell.startswith("as above"):
                assert f"`{p.symbol}`" in cell, (state_path.name, p, cell)
    cfg, _, _ = _fixture_model()
    symbols = {p.path: p.symbol for p in checkpoint.legacy_param_table(cfg)[0]}
    assert (symbols["decoder.A"], symbols["decoder.B"], symbols["decoder.D"]) == (
        "U_a",
        "W_a",
        "v_a",
    )
    assert symbols["backward_encoder.transition.G"] == "\\overleftarrow{U}_z"


@pytest.mark.parametrize(
    "mutate, problem",
    [
        (lambda p: p.write_bytes(p.read_bytes()[:2000]), "truncated or corrupt"),
        (lambda p: p.write_bytes(b"not a zip file at all"), "not a .npz archive"),
        (lambda p: np.savez(p, W=np.array([object()], dtype=object)), "object arrays"),
    ],
)
def test_bad_npz_is_one_clear_error(tmp_path, mutate, problem):
    path = tmp_path / "m.npz"
    np.savez(path, W=np.zeros((50, 50), np.float32))
    mutate(path)
    with pytest.raises(LegacyInputError, match=problem) as err:
        checkpoint.read_npz(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_missing_npz():
    with pytest.raises(LegacyInputError, match="no such file"):
        checkpoint.read_npz("/nonexistent/model.npz")


def test_wrong_dtype_and_nonfinite(tmp_path):
    _, model, arrays = _fixture_model()
    bad = dict(arrays, W_0_dec_hid_readout_0=arrays["W_0_dec_hid_readout_0"].astype(np.float64))
    with pytest.raises(LegacyInputError, match="expected float32, found float64"):
        checkpoint.load_into(model, _save(tmp_path, bad))
    w = arrays["b_dec_deep_softmax"].copy()
    w[3] = np.nan
    path = _save(tmp_path, dict(arrays, b_dec_deep_softmax=w), "nan.npz")
    with pytest.raises(LegacyInputError, match="non-finite weights .*b_dec_deep_softmax"):
        checkpoint.load_into(model, path)
    checkpoint.load_into(model, path, allow_nonfinite=True)
    assert torch.isnan(model.decoder.output_layer.b[3])


def test_state_disagreeing_with_embeddings(tmp_path):
    """n_sym_source in the state larger than the saved embedding: strict error naming both shapes."""
    state_path = FIXTURES / "search" / "search_state.pkl"
    state = legacy_states.load_state(state_path, "n_sym_source=300")
    model = RNNEncoderDecoder(ModelConfig.from_state(state))
    with pytest.raises(
        LegacyInputError,
        match=r"W_0_enc_approx_embdr: expected shape \(300, 16\), "
        r"found \(201, 16\)",
    ):
        checkpoint.load_into(model, FIXTURES / "search" / "search_model.npz")


@pytest.mark.parametrize(
    "changes, reason",
    [
        ("enc_rec_layer='LSTMLayer'", "LSTMLayer models cannot run in the original"),
        ("encoder_stack=2", "stacked encoders"),
        ("weight_noise=True", "weight noise"),
        ("dropout=0.5", "dropout"),
        ("use_nce=True", "NCE"),
        ("dec_rec_layer='RecurrentLayer'", "search=True needs dec_rec_layer"),
    ],
)
def test_unsupported_options_are_refused(changes, reason):
    state_path = FIXTURES / "search" / "search_state.pkl"
    state = legacy_states.load_state(state_path, changes)
    with pytest.raises(UnsupportedModelError, match=reason):
        ModelConfig.from_state(state, state_path)


def test_lstm_prototype_is_refused():
    state = legacy_states.prototype_phrase_lstm_state()
    with pytest.raises(UnsupportedModelError, match="phrase_lstm/FAILURE.txt"):
        ModelConfig.from_state(state)
