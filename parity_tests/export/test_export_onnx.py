"""``groundhog-port export --format onnx``: the graphs against the recordings, the numpy
driver's translations against the port's, and the files read without groundhog_port.

* every shared recording (``legacy_traces/*``, ``pending_traces/grconv``): the encoder's
  ``c`` and ``init_state`` and the step graphs' ``probs`` and ``s``, fed with the recorded
  inputs, within the port's derived bounds (:mod:`groundhog_port.harness.onnx`);
* translations of the driver ``beam_search.py`` at beam 1, 5 and 10 == the port's (the
  fixture: all 40 sentences; the shared cases: every third sentence and the lines where the
  original crashed), the costs of the chosen hypotheses under the port's derived bound;
* the driver's search == the literal search (``search/literal.py``), every hypothesis of every
  n-best list token for token, in order, and the same crashes, at beam 1, 5 and 10, plain,
  ``--normalize`` and ``--ignore-unk`` (the fixture and the shared ``phrase`` case, all 40
  sentences); its copy of the length normalisation == ``search.common.length_normalized``;
* a fresh interpreter that never imports groundhog_port (nor torch) reads the safetensors
  and ONNX exports with the plain APIs and writes, with the driver, the fixture's recorded
  ``trans_beam10.txt`` byte for byte.
"""

import functools
import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from groundhog_port.export.onnx_graphs import DRIVER_FILE, GRAPH_FILES, OPSET, write_onnx
from groundhog_port.harness import tolerance as tol
from groundhog_port.harness.onnx import OnnxRow, check_onnx
from groundhog_port.harness.trace import TraceFile
from groundhog_port.legacy.exported import write_checkpoint
from groundhog_port.search.common import SearchFailed, length_normalized
from groundhog_port.search.literal import BeamSearch, path_costs, sample
from groundhog_port.search.translator import Translator
from parity_tests.support.cases import FIXTURES, case_dirs, case_path_id, pending_case_dirs
from parity_tests.support.models import exports_per_case, legacy_files, open_case

pytest.importorskip("onnxruntime", reason="the export extra (onnx, onnxruntime) is not installed")

REPO = Path(__file__).resolve().parents[2]
SHARED = case_dirs() + pending_case_dirs()
BEAMS = (1, 5, 10)


def _driver(out):
    """The exported ``beam_search.py`` as a module (each export its own module object)."""
    spec = importlib.util.spec_from_file_location(
        f"beam_search_{abs(hash(out))}", out / DRIVER_FILE
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def onnx_export(tmp_path_factory, one_thread):
    """case dir -> (legacy experiment, driver module, OnnxTranslator, export dir)."""
    exported = exports_per_case(tmp_path_factory, "onnx", write_onnx)

    @functools.cache
    def get(case):
        exp, out = exported(case)
        mod = _driver(out)
        return exp, mod, mod.OnnxTranslator(out), out

    return get


@pytest.mark.parametrize("case", SHARED, ids=lambda p: p.name)
def test_graphs_within_derived_bounds_of_recordings(case, onnx_export):
    exp, _, translator, _ = onnx_export(case)
    with TraceFile(case / "trace.h5") as trace:
        rows = check_onnx(exp.model, translator, trace)
    report = "\n".join(r.line() + "".join("\n    " + n for n in r.notes[:5]) for r in rows.values())
    assert all(r.ok for r in rows.values()), report
    assert set(rows) == {"repr/c", "repr/init_states", "steps/next_probs", "steps/next_states"}


def _sentences(case):
    lines = (case / "test.en").read_text(encoding="utf-8").split("\n")[:-1]
    if case.parent == FIXTURES:
        return list(range(len(lines))), lines
    crashed = {len((case / "trans_beam1.txt").read_text(encoding="utf-8").split("\n")) - 1}
    return sorted(set(range(0, len(lines), 3)) | {i for i in crashed if i < len(lines)}), lines


@pytest.mark.parametrize("case", [FIXTURES / "search"] + SHARED, ids=case_path_id)
def test_driver_translations_equal_the_ports(case, onnx_export):
    """Beam 1/5/10: the same line (or the same crash) for every sentence; the chosen
    hypothesis' cost within the port's derived bounds of its exact (float64) cost and of the
    port's float32 cost."""
    exp, mod, translator, _ = onnx_export(case)
    picked, lines = _sentences(case)
    seqs = [exp.parse_source(lines[i])[0] for i in picked]
    model64, probe = exp.model.float64_shadow(), exp.model.float32_probe()
    pool, differences = tol.Pool(tol.TERMS), []
    for beam in BEAMS:
        port = Translator(exp, beam, batch_size=32).translate_seqs(seqs)
        for i, seq, want in zip(picked, seqs, port):
            np.testing.assert_array_equal(translator.parse_source(lines[i]), seq)
            try:
                trans, costs = translator.sample(seq, beam)
            except mod.SearchFailed as err:
                if want.error is None or str(err) != want.error:
                    differences.append((beam, i, f"ONNX failed: {err}", want.line, want.error))
                continue
            best = int(np.argmin(costs))
            line = translator.render(trans[best])
            if (line, None) != (want.line, want.error):
                differences.append((beam, i, line, want.line, want.error))
                continue
            # the ONNX cost is the product; the port's float32 cost stands as the other
            # float32 implementation (the recording's place)
            pool.add(
                f"beam{beam}/{i}",
                [want.cost],
                [costs[best]],
                path_costs(model64, seq, [trans[best]]),
                probe=path_costs(probe, seq, [trans[best]]),
                magnitude_of=len(trans[best]),
                n_terms=len(trans[best]),
            )
    assert not differences, differences
    bad = [(where, res.err.max(), res.allowed.max()) for where, res in pool.results() if not res.ok]
    assert not bad, bad
    assert len(pool) > 0


#: the driver's search against the literal one: the fixture (RNNsearch) and the shared
#: ``phrase`` case (RNNencdec, where --ignore-unk changes lines)
LITERAL_CASES = [FIXTURES / "search"] + [c for c in SHARED if c.name == "phrase"]


@pytest.mark.parametrize("case", LITERAL_CASES, ids=case_path_id)
def test_driver_search_equals_literal_search(case, onnx_export):
    """The standalone driver is a third beam search kept by hand: its n-best lists must be
    the literal search's (sample.py's semantics), every hypothesis token for token and in
    order, the same crash where it crashes, at beam 1/5/10, plain, --normalize and
    --ignore-unk; each cost within the port's derived bound of its exact (float64) value."""
    exp, mod, translator, _ = onnx_export(case)
    lines = (case / "test.en").read_text(encoding="utf-8").split("\n")[:-1]
    seqs = [exp.parse_source(line)[0] for line in lines]
    literal = BeamSearch(exp.model)
    model64, probe = exp.model.float64_shadow(), exp.model.float32_probe()
    pool, differences, compared = tol.Pool(tol.TERMS), [], 0
    for beam in BEAMS:
        for normalize, ignore_unk in ((False, False), (True, False), (False, True)):
            for i, seq in enumerate(seqs):
                where = (beam, normalize, ignore_unk, i)
                try:
                    want = sample(literal, seq, beam, ignore_unk=ignore_unk, normalize=normalize)
                except SearchFailed as err:
                    want = err
                try:
                    trans, costs = translator.sample(seq, beam, ignore_unk, normalize)
                except mod.SearchFailed as err:
                    if not isinstance(want, SearchFailed) or str(err) != str(want):
                        differences.append((where, f"ONNX failed: {err}", str(want)))
                    continue
                if isinstance(want, SearchFailed):
                    differences.append((where, "ONNX did not fail", str(want)))
                    continue
                got = [[int(w) for w in t] for t in trans]
                if got != [[int(w) for w in t] for t in want.trans]:
                    differences.append((where, got, want.trans))
                    continue
                compared += len(got)
                exact = path_costs(model64, seq, got)
                noisy = path_costs(probe, seq, got)
                if normalize:
                    exact, noisy = length_normalized(exact, got), length_normalized(noisy, got)
                lengths = np.array([len(t) for t in got])
                # the literal search's float32 costs stand as the other implementation; the
                # noise magnitude is the number of terms, 1 once divided by it (as parity)
                pool.add(
                    f"{where}",
                    want.costs,
                    costs,
                    exact,
                    probe=noisy,
                    magnitude_of=np.ones(len(got)) if normalize else lengths,
                    n_terms=lengths,
                )
    assert not differences, differences[:5]
    bad = [(where, res.err.max(), res.allowed.max()) for where, res in pool.results() if not res.ok]
    assert not bad, bad[:5]
    assert compared > 0


def test_driver_length_normalisation_is_the_ports():
    """The driver's copy of ``--normalize`` (it runs without the package) gives the bits of
    ``search.common.length_normalized``: random float64 costs, lengths 1-300."""
    mod = _driver(REPO / "groundhog_port" / "export")
    rng = np.random.default_rng(0)
    for n in (1, 2, 10, 500):
        trans = [list(range(int(k))) for k in rng.integers(1, 300, n)]
        costs = rng.random(n) * 10.0 ** rng.integers(-3, 4, n)
        want = length_normalized(costs, trans)
        got = mod.length_normalized(costs, trans)
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))


@pytest.mark.parametrize(
    "case_name,name,beam,normalize,ignore_unk",
    [
        ("search", "trans_beam10_normalize.txt", 10, True, False),
        # phrase: the recording where --ignore-unk changes two lines
        ("phrase", "trans_beam5_ignore_unk.txt", 5, False, True),
    ],
)
def test_driver_normalize_ignore_unk_write_the_recorded_lines(
    case_name, name, beam, normalize, ignore_unk, onnx_export
):
    """sample.py --normalize / --ignore-unk: the driver writes the recorded lines (all 40
    sentences; the port writes them too, test_legacy_cases.py)."""
    case = next((c for c in SHARED if c.name == case_name), None)
    if case is None:
        pytest.skip(f"the shared {case_name!r} recording is not present")
    _, _, translator, _ = onnx_export(case)
    lines = (case / "test.en").read_text(encoding="utf-8").split("\n")[:-1]
    want = (case / name).read_text(encoding="utf-8").split("\n")[:-1]
    for i in range(len(lines)):
        got = translator.translate_line(lines[i], beam, ignore_unk, normalize)[0]
        assert got == want[i], (i, got, want[i])


@pytest.mark.parametrize(
    "case_name,name,plain,flags",
    [
        (
            "search",
            "trans_beam10_normalize.txt",
            "trans_beam10.txt",
            ["--beam-size", "10", "--normalize"],
        ),
        (
            "phrase",
            "trans_beam5_ignore_unk.txt",
            "trans_beam5.txt",
            ["--beam-size", "5", "--ignore-unk"],
        ),
    ],
    ids=["normalize", "ignore_unk"],
)
def test_driver_command_line_writes_the_recorded_lines(
    case_name, name, plain, flags, onnx_export, tmp_path
):
    """``python beam_search.py --model-dir D --beam-size N [--normalize] [--ignore-unk]``, as a
    user runs it (the package's copy of the driver, so that ``--model-dir`` is needed): the
    recorded lines, on the sentences where the option changes the original's output."""
    case = next((c for c in SHARED if c.name == case_name), None)
    if case is None:
        pytest.skip(f"the shared {case_name!r} recording is not present")
    out = onnx_export(case)[3]
    lines = (case / "test.en").read_text(encoding="utf-8").split("\n")[:-1]
    want = (case / name).read_text(encoding="utf-8").split("\n")[:-1]
    other = (case / plain).read_text(encoding="utf-8").split("\n")[:-1]
    changed = [i for i in range(len(want)) if want[i] != other[i]]
    assert changed  # the option changes the original's output on these sentences
    source, trans = tmp_path / "src.txt", tmp_path / "trans.txt"
    source.write_text("".join(lines[i] + "\n" for i in changed), encoding="utf-8")
    mod = _driver(REPO / "groundhog_port" / "export")
    argv = ["--model-dir", str(out), *flags, "--source", str(source), "--trans", str(trans)]
    assert mod.main(argv) == 0
    assert trans.read_text(encoding="utf-8") == "".join(want[i] + "\n" for i in changed)


def test_cli_exports_opset_and_driver(tmp_path, one_thread):
    """The command's files, the opset, the encoder's interface; the same graphs from the
    legacy files and from their safetensors export."""
    import onnx

    case = FIXTURES / "search"
    state, model = legacy_files(case)
    from parity_tests.support.inprocess import run_cli

    r = run_cli("export", "--format", "onnx", "--state", state, model, tmp_path / "o")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == sorted(
        list(GRAPH_FILES) + ["config.json", DRIVER_FILE]
    )
    for name in GRAPH_FILES:
        m = onnx.load(str(tmp_path / "o" / name))
        assert [o.version for o in m.opset_import] == [OPSET]
    enc = onnx.load(str(tmp_path / "o" / "encoder.onnx"))
    assert [i.name for i in enc.graph.input] == ["seq"]
    assert [o.name for o in enc.graph.output] == ["c", "init_state", "p_from_c"]
    # from an exported safetensors checkpoint: the same graphs, byte for byte
    assert (
        run_cli(
            "export", "--format", "safetensors", "--state", state, model, tmp_path / "st"
        ).returncode
        == 0
    )
    r = run_cli("export", "--format", "onnx", "--checkpoint", tmp_path / "st", tmp_path / "o2")
    assert r.returncode == 0, r.stderr
    for name in GRAPH_FILES:
        assert (tmp_path / "o2" / name).read_bytes() == (tmp_path / "o" / name).read_bytes()


#: run in a fresh interpreter: plain safetensors / onnxruntime, then the copied driver
NO_PORT_SCRIPT = r"""
import json, sys
import numpy as np
st_dir, onnx_dir, source, trans = sys.argv[1:5]
from safetensors import safe_open
from safetensors.numpy import load_file
weights = load_file(st_dir + "/model.safetensors")
with safe_open(st_dir + "/model.safetensors", framework="numpy") as f:
    meta = f.metadata()
config = json.load(open(st_dir + "/config.json", encoding="utf-8"))
assert weights["decoder.A"].dtype == np.float32 and meta["legacy:decoder.A"] == "A_dec_transition_0"
assert {t["name"] for t in config["tensors"]} == set(weights)
import onnxruntime as ort
enc = ort.InferenceSession(onnx_dir + "/encoder.onnx", providers=["CPUExecutionProvider"])
c, s0, pfc = enc.run(None, {"seq": np.array([3, 17, 200], dtype=np.int64)})
assert c.shape == (3, 64) and s0.shape == (1, 32) and pfc.shape == (3, 32)
probs = ort.InferenceSession(onnx_dir + "/decoder_next_probs.onnx",
                             providers=["CPUExecutionProvider"]).run(
    None, {"c": c, "p_from_c": pfc, "y_prev": np.zeros(1, np.int64), "s_prev": s0})[0]
assert probs.shape == (1, 321) and abs(float(probs.sum(dtype=np.float64)) - 1) < 1e-5
sys.path.insert(0, onnx_dir)
import beam_search
rc = beam_search.main(["--beam-size", "10", "--source", source, "--trans", trans])
assert rc == 0, rc
bad = sorted(m for m in sys.modules if m.split(".")[0] in ("groundhog_port", "legacy_states", "torch"))
assert not bad, bad
print("OK", len(weights))
"""


def test_exports_load_without_groundhog_port(tmp_path, one_thread):
    case = FIXTURES / "search"
    exp = open_case(case)
    write_checkpoint(exp, tmp_path / "st")
    write_onnx(exp, tmp_path / "onnx")
    out = tmp_path / "trans_beam10.txt"
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            NO_PORT_SCRIPT,
            str(tmp_path / "st"),
            str(tmp_path / "onnx"),
            str(case / "test.en"),
            str(out),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
    )
    assert r.returncode == 0 and "OK 40" in r.stdout, r.stdout[-2000:] + r.stderr[-3000:]
    assert out.read_bytes() == (case / "trans_beam10.txt").read_bytes()


def test_attention_overflow_quirk_kept_in_graph(one_thread):
    """exp-then-normalise without the maximum (encdec.py:299-345): with energies above ~88
    the port's float32 attention gives inf / inf = nan, and so must the graph (a
    max-subtracted softmax would give finite probabilities)."""
    import copy

    import onnxruntime as ort

    from groundhog_port.export.onnx_graphs import encoder_graph, next_probs_graph

    exp = open_case(FIXTURES / "search")
    m = copy.deepcopy(exp.model)
    with torch.no_grad():
        m.decoder.D.mul_(1e4)
    seq = exp.parse_source("the small red cat is sleeping .")[0]
    c = m.encode(seq)
    s = torch.randn(3, m.cfg.dim, generator=torch.Generator().manual_seed(0))
    y = torch.tensor([0, 5, 7])
    want = m.next_probs(c, m.p_from_c(c), 1, y, s).numpy()
    assert np.isnan(want).all()
    run = lambda proto, feed: ort.InferenceSession(
        proto.SerializeToString(), providers=["CPUExecutionProvider"]
    ).run(None, feed)
    oc, _, opfc = run(encoder_graph(m), {"seq": seq})
    got = run(
        next_probs_graph(m), {"c": oc, "p_from_c": opfc, "y_prev": y.numpy(), "s_prev": s.numpy()}
    )[0]
    assert np.isnan(got).all()


#: architectures the recordings do not cover: every activation spelling family, maxout 4,
#: no bigram / bias_code / deep_out, last_forward + last_backward, the grConv encoder
ARCHITECTURES = {
    "search_relu_hard_sigmoid": (
        "search",
        dict(
            rank_n_activ="lambda x: x*(x>0)",
            activ="lambda x: TT.maximum(x, 0)",
            rec_gater="lambda x: x*(x>0)*(x<1)",
            dec_rec_gater="lambda x: x*(x>0)*(x<1)",
            enc_rec_gater="lambda x: TT.nnet.sigmoid(x)",
            bigram=True,
            check_first_word=True,
        ),
    ),
    "encdec_hard_tanh_maxout4": (
        "encdec",
        dict(
            activ="lambda x: x*(x>-1)*(x<1)",
            dec_activ="lambda x: x*(x>-1)*(x<1)",
            enc_activ="lambda x: TT.tanh(x)",
            unary_activ="Maxout(4)",
            maxout_part=4,
            forward=False,
            last_forward=True,
            backward=False,
            last_backward=True,
            bias_code=False,
        ),
    ),
    "encdec_plain_readout": (
        "encdec",
        dict(deep_out=False, bigram=False, forward=True, backward=True, last_forward=False),
    ),
    "grconv": (
        "encdec",
        dict(
            enc_rec_layer="RecursiveConvolutionalLayer",
            enc_rec_gating=False,
            enc_rec_reseting=False,
            forward=False,
            last_forward=True,
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_graphs_equal_port_on_other_architectures(name, one_thread):
    """Random weights (test_batched_search.build_model): each graph output within the port's
    derived bound of its exact value (the float64 shadow; noise from the float32 probe),
    the rule parity applies to the port's own float32 output."""
    import onnxruntime as ort

    from groundhog_port.export.onnx_graphs import encoder_graph, next_probs_graph, next_states_graph
    from parity_tests.support.models import build_model

    family, flags = ARCHITECTURES[name]
    model = build_model(family, 13, 17, 8, 4, flags, seed=7, scales=(1.0, 3.0, 3.0, 4.0, 1.0))
    ref = {"p64": model.float64_shadow(), "probe": model.float32_probe()}
    sess = {
        f.__name__: ort.InferenceSession(
            f(model).SerializeToString(), providers=["CPUExecutionProvider"]
        )
        for f in (encoder_graph, next_probs_graph, next_states_graph)
    }
    rng = np.random.default_rng(1)
    checked = 0
    for length in (1, 2, 6):
        seq = np.append(rng.integers(0, 12, length), 12).astype(np.int64)
        enc = sess["encoder_graph"].run(None, {"seq": seq})
        c = {r: m.encode(seq) for r, m in ref.items()}
        pfc = {r: m.p_from_c(c[r]) for r, m in ref.items()}
        pairs = [
            (enc[0], {r: c[r] for r in ref}, tol.ABS),
            (enc[1], {r: m.initial_states(c[r]) for r, m in ref.items()}, tol.ABS),
        ]
        if model.cfg.search:
            pairs.append((enc[2], {r: pfc[r][:, 0] for r in ref}, tol.ABS))
        y = np.array([0, 3, 16, 5], dtype=np.int64)
        s = rng.standard_normal((4, 8)).astype(np.float32)
        ty, ts = torch.as_tensor(y), torch.as_tensor(s, dtype=torch.float64)
        for k in (0, 1, 9):
            feed = {"c": enc[0], "s_prev": s}
            feed.update({"p_from_c": enc[2]} if model.cfg.search else {"step": np.array(k)})
            pairs.append(
                (
                    sess["next_probs_graph"].run(None, dict(feed, y_prev=y))[0],
                    {r: m.next_probs(c[r], pfc[r], k, ty, ts) for r, m in ref.items()},
                    tol.REL,
                )
            )
            pairs.append(
                (
                    sess["next_states_graph"].run(None, dict(feed, y=y))[0],
                    {r: m.next_states(c[r], pfc[r], k, ty, ts) for r, m in ref.items()},
                    tol.ABS,
                )
            )
        rows = {kind.name: OnnxRow(name, kind.name) for kind in (tol.ABS, tol.REL)}
        for i, (got, exact, kind) in enumerate(pairs):
            rows[kind.name].add(f"{length}/{i}", got, exact["p64"].numpy(), exact["probe"].numpy())
        for row in rows.values():
            row.finish()
            assert row.ok, (row.line(), row.notes[:3])
            checked += row.n
    assert checked > 0


#: an edit of each shared definition (doubling its result), applied through the one place
EDITS = {
    "readout": lambda f: lambda ops, *a: (lambda t: ops.add(t, t))(f(ops, *a)),
    "gru_step": lambda f: lambda ops, *a: (lambda h: ops.add(h, h))(f(ops, *a)),
    "softmax_with_bias": lambda f: lambda ops, z: f(ops, ops.add(z, z)),
}


@pytest.mark.parametrize("name", sorted(EDITS))
def test_graphs_follow_an_edit_of_the_models_definition(name, monkeypatch, one_thread):
    """The readout, the GRU step and the output softmax of the graphs are
    ``model.functional``'s: one edit there changes the port's step functions and the
    graphs alike (the graphs stay within float32 noise of the edited port)."""
    import onnxruntime as ort

    from groundhog_port.export.onnx_graphs import encoder_graph, next_probs_graph, next_states_graph
    from groundhog_port.model import functional

    exp = open_case(FIXTURES / "search")
    m = exp.model
    seq = exp.parse_source("the small red cat is sleeping .")[0]
    s = torch.randn(3, m.cfg.dim, generator=torch.Generator().manual_seed(0)) * 0.1
    y = torch.tensor([0, 5, 7])

    def both():
        c = m.encode(seq)
        port = [m.next_probs(c, m.p_from_c(c), 1, y, s), m.next_states(c, m.p_from_c(c), 1, y, s)]
        run = lambda proto, feed: ort.InferenceSession(
            proto.SerializeToString(), providers=["CPUExecutionProvider"]
        ).run(None, feed)
        oc, _, opfc = run(encoder_graph(m), {"seq": seq})
        feed = {"c": oc, "p_from_c": opfc, "s_prev": s.numpy()}
        onnx = [
            run(next_probs_graph(m), dict(feed, y_prev=y.numpy()))[0],
            run(next_states_graph(m), dict(feed, y=y.numpy()))[0],
        ]
        return [p.numpy() for p in port], onnx

    before = both()
    monkeypatch.setattr(functional, name, EDITS[name](getattr(functional, name)))
    after = both()
    for port, onnx in (before, after):
        for p, o in zip(port, onnx):
            np.testing.assert_allclose(o, p, rtol=1e-4, atol=1e-6)
    changed = [not np.allclose(a, b, rtol=1e-3) for a, b in zip(before[0], after[0])]
    assert any(changed), name


def _with_external_data(graph, location):
    """``graph`` with its largest initializer moved to external data at ``location``."""
    import onnx

    model = onnx.load(str(graph))
    init = max(model.graph.initializer, key=lambda t: len(t.raw_data))
    init.ClearField("raw_data")
    init.data_location = onnx.TensorProto.EXTERNAL
    entry = init.external_data.add()
    entry.key, entry.value = "location", str(location)
    onnx.save(model, str(graph))


@pytest.mark.parametrize("where", ["../outside/w.bin", "/etc/hostname", "fifo.bin", "link.bin"])
def test_driver_refuses_foreign_external_data_in_one_line(tmp_path, onnx_export, capsys, where):
    """An exported graph whose weights are external data outside the folder, at an absolute
    path, in a FIFO or through a link out: one ``beam_search.py: error:`` line, exit 2 (was
    onnxruntime's traceback); a config.json whose target vocabulary lacks an id the graphs
    produce is one line too (was ``KeyError: 32``)."""
    import os
    import shutil

    _, _, _, out = onnx_export(FIXTURES / "search")
    d = tmp_path / "export"
    shutil.copytree(out, d)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "w.bin").write_bytes(bytes(1 << 20))
    if where == "fifo.bin":
        os.mkfifo(d / where)
    elif where == "link.bin":
        (d / where).symlink_to(tmp_path / "outside" / "w.bin")
    _with_external_data(d / GRAPH_FILES[0], where)
    driver = _driver(d)
    src = tmp_path / "src.en"
    src.write_text("a b\n", encoding="utf-8")
    argv = ["--model-dir", str(d), "--beam-size", "2", "--source", str(src)]
    assert driver.main([*argv, "--trans", str(tmp_path / "o.txt")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    # refused before onnxruntime sees it: the export never writes external data (round five:
    # 1 GiB of it, sparse, was read whole)
    assert len(err) == 1 and "holds a tensor whose data lies in another file" in err[0], err


def test_driver_missing_target_word_is_one_line(tmp_path, onnx_export, capsys):
    """``target_idx2word`` without the ids the graphs produce: one line naming the id."""
    import json
    import shutil

    _, _, _, out = onnx_export(FIXTURES / "search")
    d = tmp_path / "export"
    shutil.copytree(out, d)
    config = json.loads((d / "config.json").read_text(encoding="utf-8"))
    config["vocabularies"]["target_idx2word"] = {"0": "a"}
    (d / "config.json").write_text(json.dumps(config), encoding="utf-8")
    src = tmp_path / "src.en"
    src.write_bytes((FIXTURES / "search" / "test.en").read_bytes().splitlines(keepends=True)[0])
    argv = ["--model-dir", str(d), "--beam-size", "2", "--source", str(src)]
    assert _driver(d).main([*argv, "--trans", str(tmp_path / "o.txt")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "target_idx2word has no word for id" in err[0], err
