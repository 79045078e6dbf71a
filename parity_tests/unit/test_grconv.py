"""The grConv encoder (``RecursiveConvolutionalLayer``) against the ``grconv`` recording.

``test_legacy_cases.py`` runs the full parity check on ``pending_traces/grconv``; this file
holds what is particular to the grConv: the refusals, its parameters in the legacy-name
table, the masked batch (score.py) against the single sentence (sample.py), the batched
search, and sample.py's outputs of the folder (the crash on line 37, ``train20``).
score.py's ``scores_batch.txt`` (24 ``nan``, one ``-inf``) is the parity ``batch`` group.
"""

import numpy as np
import pytest
import torch

import legacy_states
from groundhog_port.cli.commands.inspect import report as inspect_report
from groundhog_port.cli.main import main
from groundhog_port.errors import UnsupportedModelError
from groundhog_port.harness.trace import TraceFile
from groundhog_port.legacy import checkpoint
from groundhog_port.legacy.loading import open_experiment
from groundhog_port.model.config import ModelConfig
from groundhog_port.model.encoder import annotations, grconv_gates
from groundhog_port.search.batched import BatchedBeamSearch
from groundhog_port.search.common import SCAN_ZERO_STEPS, SearchFailed
from groundhog_port.search.literal import BeamSearch, sample
from parity_tests.support.cases import FIXTURES, PENDING_ROOT
from parity_tests.support.command_lines import translate_args

CASE = PENDING_ROOT / "grconv"
needs_case = pytest.mark.skipif(
    not (CASE / "trace.h5").is_file(),
    reason=f"grconv recording not found at {CASE} (set GROUNDHOG_PENDING_TRACES)",
)
STATE, MODEL = CASE / "grconv_state.pkl", CASE / "grconv_model.npz"


def grconv_state(**changes):
    state = legacy_states.prototype_encdec_state()
    state.update(
        enc_rec_layer="RecursiveConvolutionalLayer",
        enc_rec_gating=False,
        enc_rec_reseting=False,
        dim=8,
        rank_n_approx=4,
    )
    state.update(changes)
    return state


@pytest.mark.parametrize("key", ["enc_rec_gating", "enc_rec_reseting"])
def test_gate_embedders_are_refused_with_the_originals_reason(key):
    with pytest.raises(UnsupportedModelError, match="DisconnectedInputError") as err:
        ModelConfig.from_state(grconv_state(**{key: True}))
    assert key in str(err.value) and "rconv_layers.py" in str(err.value)


def test_prototype_with_only_the_layer_changed_is_refused():
    state = legacy_states.prototype_encdec_state()
    state["enc_rec_layer"] = "RecursiveConvolutionalLayer"  # enc_rec_gating stays True
    with pytest.raises(UnsupportedModelError, match="DisconnectedInputError"):
        ModelConfig.from_state(state)


def test_forward_root_with_other_components_is_refused():
    with pytest.raises(UnsupportedModelError, match="one position instead of one per word"):
        ModelConfig.from_state(grconv_state(forward=True))  # + last_forward
    cfg = ModelConfig.from_state(grconv_state(forward=True, last_forward=False))
    assert cfg.c_dim == 8  # the root alone: allowed


def test_table_has_the_six_grconv_parameters():
    cfg = ModelConfig.from_state(grconv_state())
    table, unsaved = checkpoint.legacy_param_table(cfg)
    enc = {p.name: p.shape for p in table if "enc_transition" in p.name}
    assert enc == {
        "W_enc_transition_0": (8, 8),
        "U_enc_transition_0": (8, 8),
        "b_enc_transition_0": (8,),
        "GW_enc_transition_0": (8, 3),
        "GU_enc_transition_0": (8, 3),
        "Gb_enc_transition_0": (3,),
    }
    assert not any("enc_update_embdr" in p.name or "enc_reset_embdr" in p.name for p in table)


# -- against the recording ------------------------------------------------------------------
@pytest.fixture(scope="module")
def exp(one_thread):
    if not (CASE / "trace.h5").is_file():
        pytest.skip(f"grconv recording not found at {CASE} (set GROUNDHOG_PENDING_TRACES)")
    return open_experiment(STATE, MODEL, data_dir=CASE)


def test_table_matches_the_recorded_checkpoint(exp):
    table, _ = checkpoint.legacy_param_table(exp.cfg)
    arrays = checkpoint.read_npz(MODEL)
    assert {p.name: p.shape for p in table} == {k: a.shape for k, a in arrays.items()}
    with TraceFile(CASE / "trace.h5") as tr:
        assert sorted(p.name for p in table) == sorted(tr.attrs["param_names"])


def test_padded_batch_roots_equal_single_sentence_roots(exp):
    """score.py's masked (T, batch) pyramid stops at each sentence's length: its roots are
    bitwise those of sample.py's one-sentence encoder, and match the recorded ``c``."""
    model = exp.model
    with TraceFile(CASE / "trace.h5") as tr:
        seqs = [tr.repr(i)["seq"] for i in range(12)]
        recorded = [tr.repr(i)["c"] for i in range(12)]
    T = max(len(s) for s in seqs)
    x = torch.zeros((T, len(seqs)), dtype=torch.int64)
    mask = torch.zeros((T, len(seqs)))
    for b, s in enumerate(seqs):
        x[: len(s), b], mask[: len(s), b] = torch.as_tensor(s), 1
    with torch.no_grad():
        batch_c = annotations(model, x, mask)
    for b, s in enumerate(seqs):
        single = model.encode(s)
        assert single.shape == (len(s), exp.cfg.dim)
        assert torch.equal(batch_c[0, b], single[0])  # root replicated over T
        assert (single == single[0]).all()
        assert np.abs(single.numpy() - recorded[b]).max() <= 1e-6


def test_batched_search_equals_literal(exp):
    model = exp.model
    with TraceFile(CASE / "trace.h5") as tr:
        seqs = [tr.repr(i)["seq"] for i in range(0, 40, 4)] + [tr.repr(36)["seq"]]
    seqs.append(np.array([exp.cfg.null_sym_source]))  # an empty line: no level to build
    got = BatchedBeamSearch(model, batch_size=8).sample_many(seqs, 5)
    assert str(got[-1]) == SCAN_ZERO_STEPS and "kth(=640)" in str(got[-2])
    bs = BeamSearch(model)
    for seq, hyps in zip(seqs, got):
        try:
            want = sample(bs, seq, 5)
        except SearchFailed as err:
            assert isinstance(hyps, SearchFailed) and str(hyps) == str(err)
            continue
        assert hyps.trans == want.trans and np.array_equal(hyps.costs, want.costs)


def _translate(tmp_path, source, beam_size):
    """``translate --beam-search`` of the recorded model on the case's ``source`` file: the
    exit status and the ``--trans`` file written."""
    out = tmp_path / "t.txt"
    recorded = dict(state=STATE, model=MODEL)
    argv = translate_args(
        CASE / source, "--trans", out, "--data-dir", CASE, beam=beam_size, batch=None, **recorded
    )
    return main([str(a) for a in argv]), out


@needs_case
def test_translate_writes_36_lines_then_an_empty_line_and_exits_3(tmp_path, caplog, one_thread):
    """sample.py died on test line 37 (``hello``) at every beam size (docs/recordings.md, "Quirks")."""
    rc, out = _translate(tmp_path, "test.en", 1)
    assert rc == 3
    lines = out.read_text(encoding="utf-8").split("\n")[:-1]
    recorded = (CASE / "trans_beam1.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(lines) == 40 and len(recorded) == 36
    assert lines[:36] == recorded and lines[36] == ""
    crash = (CASE / "sample_beam1_error.txt").read_text().strip().splitlines()[-1]
    assert crash.split(": ", 1)[1] in caplog.text and "line 37" in caplog.text


@needs_case
def test_train20_translations_are_byte_identical(tmp_path, capsys, one_thread):
    rc, out = _translate(tmp_path, "train20.en", 10)
    assert rc == 0
    assert out.read_bytes() == (CASE / "trans_train20_beam10.txt").read_bytes()
    total = float(capsys.readouterr().out.strip().rsplit(" ", 1)[1])
    recorded = float((CASE / "sample_train20_beam10_stdout.txt").read_text().split()[-1])
    # 20 sums of float64 costs of float32 words (rel 1e-5 per sentence cost, as the beam costs)
    assert abs(total - recorded) <= 1e-5 * recorded


@needs_case
def test_inspect_lists_the_grconv_parameters():
    rep = inspect_report(STATE, MODEL, data_dir=CASE)
    assert rep["architecture"]["encoder"] == "RecursiveConvolutionalLayer (grConv)"
    names = {p["name"]: p for p in rep["parameters"]}
    for n in ("W", "U", "b", "GW", "GU", "Gb"):
        assert names[f"{n}_enc_transition_0"]["in_checkpoint"]
        assert names[f"{n}_enc_transition_0"]["module"] == f"encoder.transition.{n}"
    assert rep["checkpoint"]["problems"] == []


def test_gates_are_distributions_and_compose_the_recorded_root(exp):
    """``grconv_gates`` (what tree.py steps through): three weights summing to 1 per node,
    and the levels they build end in the recorded annotation."""
    model = exp.model
    with TraceFile(CASE / "trace.h5") as tr:
        seq, c = tr.repr(0)["seq"], tr.repr(0)["c"]
    gates = grconv_gates(model, seq)
    assert gates.shape == (len(seq) - 1, len(seq), 3)
    assert torch.allclose(gates.sum(-1), torch.ones(()), atol=1e-6) and (gates >= 0).all()
    with torch.no_grad():
        enc = model.encoder
        h = enc.input_embedder(enc.approx_embedder(torch.as_tensor(seq)[:, None]))
        top = [level for level, _ in enc.transition.climb(h)][-1]
    assert np.abs(top[-1, 0].numpy() - c[0]).max() <= 1e-6


@needs_case
def test_score_plot_tree_writes_one_png_per_sentence(tmp_path, one_thread):
    pytest.importorskip("matplotlib")
    src, trg = tmp_path / "s.en", tmp_path / "s.fr"
    src.write_text(
        "".join((CASE / "test.en").read_text(encoding="utf-8").splitlines(True)[:2]),
        encoding="utf-8",
    )
    trg.write_text(
        "".join((CASE / "test.fr").read_text(encoding="utf-8").splitlines(True)[:2]),
        encoding="utf-8",
    )
    out = tmp_path / "trees"
    rc = main(
        [
            "score",
            "--mode",
            "txt",
            "--src",
            str(src),
            "--trg",
            str(trg),
            "--allow-unk",
            "--plot-tree",
            str(out),
            "--state",
            str(STATE),
            "--data-dir",
            str(CASE),
            str(MODEL),
        ]
    )
    assert rc == 0
    pngs = sorted(out.glob("*.png"))
    assert [p.name for p in pngs] == ["tree_0001.png", "tree_0002.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


def test_plot_tree_refuses_a_gru_encoder(tmp_path, capsys):
    F = FIXTURES / "search"
    rc = main(
        [
            "score",
            "--mode",
            "txt",
            "--src",
            str(F / "test.en"),
            "--trg",
            str(F / "test.fr"),
            "--plot-tree",
            str(tmp_path),
            "--state",
            str(F / "search_state.pkl"),
            str(F / "search_model.npz"),
        ]
    )
    assert rc == 2 and "no gating tree" in capsys.readouterr().err
