"""The trace format (docs/trace_format.md) against the reference recordings, and the reader's
refusals (unknown version, truncated / non-HDF5 file, wrong dtype)."""

import h5py
import numpy as np
import pytest

from groundhog_port.errors import LegacyInputError
from groundhog_port.harness.trace import (
    FORMAT_VERSION,
    SCHEMA,
    TraceFile,
    TraceWriter,
    parse_beam_label,
    split_flat,
    tolerance_for,
)

CASES = ("search", "encdec", "phrase", "search_variant", "encdec_variant")
BEAM_LABELS = ["1", "1_normalize", "5", "5_ignore_unk", "5_normalize", "10", "10_normalize"]

# documented dataset pattern -> dtype (docs/trace_format.md, "Groups and datasets")
DOCUMENTED = {}
for _kind, _fields in SCHEMA.items():
    for _name, (_dtype, _ndims) in _fields.items():
        DOCUMENTED[f"{_kind}/{_name}"] = _dtype
DOCUMENTED.update(
    {
        "beam/{label}/{i}/fin_trans_flat": "int64",
        "sampler/mrg_base_rstate_after_build": "int32",
        "sampler/rstate_shared_before_first_call/{j}": "int32",
        "sampler/rstate_shared_before_first_call/{j}_first8rows": "int32",
        "sampler/{i}/rstate_shared_after_call/{j}_first8rows": "int32",
        "train_step/params_after/{name}": "float32",
        "train_step/clipped_grads/{name}": "float32",
        "train_step/gnorm2_after/{name}": "float32",
        "train_step/dnorm2_after/{name}": "float32",
    }
)
# the group kinds whose every dataset must be present in a reference recording
REQUIRED_KINDS = (
    "pairs/{i}",
    "batch",
    "batch_all/{b}",
    "repr/{i}",
    "steps/{i}/{k:03d}",
    "steps/{i}",
    "beam/{label}/{i}",
    "sampler/{i}",
    "train_step",
)


def pattern(path):
    """A dataset path of a recording -> its documented pattern."""
    parts = path.split("/")
    top = parts[0]
    if top == "steps" and len(parts) == 4:
        return f"steps/{{i}}/{{k:03d}}/{parts[3]}"
    if top == "beam":
        return f"beam/{{label}}/{{i}}/{parts[3]}"
    if top == "batch_all":
        return f"batch_all/{{b}}/{parts[2]}"
    if top == "sampler":
        if parts[1] == "rstate_shared_before_first_call":
            return "sampler/rstate_shared_before_first_call/{j}" + (
                "_first8rows" if parts[2].endswith("_first8rows") else ""
            )
        if parts[1].isdigit() and parts[2] == "rstate_shared_after_call":
            return "sampler/{i}/rstate_shared_after_call/{j}_first8rows"
        if parts[1].isdigit():
            return f"sampler/{{i}}/{parts[2]}"
    if top == "train_step" and len(parts) == 3:
        return f"train_step/{parts[1]}/{{name}}"
    if top in ("pairs", "repr", "steps") and len(parts) == 3:
        return f"{top}/{{i}}/{parts[2]}"
    return path


@pytest.fixture(scope="module", params=CASES)
def case_trace(request, legacy_root):
    path = legacy_root / request.param / "trace.h5"
    if not path.is_file():
        pytest.skip(f"{path} not present")
    return request.param, path


def test_every_documented_dataset_with_its_dtype(case_trace):
    case, path = case_trace
    seen = {}
    with h5py.File(path, "r") as f:

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                seen.setdefault(pattern(name), set()).add(str(obj.dtype))

        f.visititems(visit)
        assert "format_version" not in f.attrs  # the reference files are version 1 by default
    undocumented = sorted(set(seen) - set(DOCUMENTED))
    assert not undocumented, f"{case}: datasets not in docs/trace_format.md: {undocumented}"
    for pat, dtypes in seen.items():
        assert dtypes == {DOCUMENTED[pat]}, (
            f"{case}: {pat} has dtype {dtypes}, documented {DOCUMENTED[pat]}"
        )
        tolerance_for(
            pat.replace("{i}", "0")
            .replace("{b}", "0")
            .replace("{k:03d}", "000")
            .replace("{label}", "5")
            .replace("{j}", "00")
            .replace("{name}", "W")
        )
    required = {p for p in DOCUMENTED if p.rsplit("/", 1)[0] in REQUIRED_KINDS}
    missing = sorted(required - set(seen))
    assert not missing, f"{case}: documented datasets missing: {missing}"


def test_root_attrs_and_group_attrs(case_trace):
    case, path = case_trace
    with TraceFile(path) as tr:
        assert tr.format_version == FORMAT_VERSION == 1
        a = tr.attrs
        assert a["case"] == case and a["groundhog_commit"] == "4d2433b"
        assert (
            a["null_sym_source"],
            a["null_sym_target"],
            a["n_sym_source"],
            a["n_sym_target"],
        ) == (200, 320, 201, 321)
        assert (a["unk_sym_source"], a["unk_sym_target"]) == (1, 1)
        assert isinstance(a["param_names"], list) and a["param_names"] == sorted(a["param_names"])
        assert tr.steps_attrs == {"beam_size": 5, "ignore_unk": False}
        assert tr.beam_labels() == sorted(BEAM_LABELS, key=lambda s: (int(s.split("_")[0]), s))
        for label in BEAM_LABELS:
            run = tr.beam(label)
            expect = parse_beam_label(label)
            assert (run.beam_size, run.normalize, run.ignore_unk) == (
                expect["beam_size"],
                expect["normalize"],
                expect["ignore_unk"],
            )
            assert run.attrs["seconds_total"] > 0 and len(run.sentences) == 40
            # only search_variant has error records (sentence 35, see test below)
            assert set(run.errors) == ({35} if case == "search_variant" else set())
        assert tr.pair_indices() == list(range(40)) == tr.repr_indices()
        assert tr.steps_indices() == list(range(8))


def test_typed_records(case_trace):
    case, path = case_trace
    with TraceFile(path) as tr:
        p = tr.pairs(0)
        lt, ls = len(p["trg_ids"]), len(p["src_ids"])
        assert p["word_probs"].shape == (lt, 1) and p["score"].shape == (1,)
        assert p["alignment"].shape == ((lt, ls, 1) if case.startswith("search") else (1,))
        assert p["src_ids"][-1] == 200 and p["trg_ids"][-1] == 320
        assert p["src_line"] == "we have four hot schools ."
        batches = tr.batch_all()
        assert sum(b["x"].shape[1] for b in batches) == 40
        first = tr.batch()
        assert all(np.array_equal(first[k], batches[0][k], equal_nan=True) for k in batches[0])
        assert first["batch_size"] == (64 if case == "phrase" else 32)
        r = tr.repr(0)
        assert r["c"].shape[0] == len(r["seq"]) and r["init_states"].shape[0] == 1
        assert r["parsed_in"].endswith("<eos>")


def test_steps_survivors_rebuild_the_finished_hypotheses(case_trace):
    case, path = case_trace
    with TraceFile(path) as tr:
        eos = tr.attrs["null_sym_target"]
        for i in tr.steps_indices():
            s = tr.steps(i)
            assert s.error is None and s.n_steps == len(s.steps) > 0
            assert s.minlen == len(s.seq) // 2
            assert [st["k"] for st in s.steps] == list(range(len(s.steps)))
            for st in s.steps:
                n = st["n_samples"]
                assert st["costs"].shape == (n,) and st["next_probs"].shape[1] == 321
                assert st["flat_next_costs"].shape == (st["next_probs"].size,)
                assert np.array_equal(st["trans_indices"], st["best_costs_indices"] // 321)
                assert np.array_equal(st["word_indices"], st["best_costs_indices"] % 321)
                assert np.array_equal(st["costs"], st["flat_next_costs"][st["best_costs_indices"]])
                assert st["states_gathered"].shape[1] == n == st["next_states"].shape[1]
            fin = sorted(
                (prefix + (w,), c) for step in s.survivors(eos) for prefix, w, c in step if w == eos
            )
            assert sorted(s.finished) == fin
            assert all(t[-1] == eos for t in s.trans) and list(s.costs) == sorted(s.costs)


def test_search_variant_error_records(legacy_root):
    path = legacy_root / "search_variant" / "trace.h5"
    if not path.is_file():
        pytest.skip(f"{path} not present")
    expected = {
        "1": "ValueError: kth(=512) out of bounds (321)",
        "1_normalize": "ValueError: kth(=512) out of bounds (321)",
    }
    with TraceFile(path) as tr, h5py.File(path, "r") as f:
        for label in BEAM_LABELS:
            run = tr.beam(label)
            msg = expected.get(label, "ValueError: kth(=640) out of bounds (321)")
            assert run.errors == {35: msg}
            s = run.sentences[35]
            assert s.trans == [] and s.best is None and s.best_sentence is None
            # stored as a group with no datasets and a single 'error' attribute
            g = f[f"beam/{label}/35"]
            assert len(g) == 0 and dict(g.attrs) == {"error": msg}
            assert run.sentences[36].error is None and run.sentences[36].best == 0


def test_best_sentence_is_the_archived_line(legacy_root):
    case = legacy_root / "search"
    if not (case / "trace.h5").is_file():
        pytest.skip("search trace not present")
    lines = (case / "trans_beam10.txt").read_text(encoding="utf-8").split("\n")[:40]
    with TraceFile(case / "trace.h5") as tr:
        run = tr.beam("10")
        assert [run.sentences[i].best_sentence for i in range(40)] == lines
        assert all(s.best == int(np.argmin(s.costs)) for s in run.sentences.values())


# ---------------------------------------------------------------------------------------
# refusals
# ---------------------------------------------------------------------------------------
def test_unknown_version_rejected(tmp_path):
    p = tmp_path / "v2.h5"
    with h5py.File(p, "w") as f:
        f.attrs["format_version"] = np.int64(2)
    with pytest.raises(LegacyInputError, match="unsupported trace format version 2"):
        TraceFile(p)
    with h5py.File(p, "w") as f:
        f.attrs["format_version"] = "one"
    with pytest.raises(LegacyInputError, match="not an integer"):
        TraceFile(p)


def test_truncated_file_rejected(tmp_path, legacy_root):
    src = legacy_root / "encdec" / "trace.h5"
    if not src.is_file():
        pytest.skip(f"{src} not present")
    data = src.read_bytes()
    for cut in (len(data) // 2, 4096, 100):
        p = tmp_path / f"cut{cut}.h5"
        p.write_bytes(data[:cut])
        with pytest.raises(LegacyInputError) as err:
            with TraceFile(p) as tr:
                tr.validate()
        assert str(err.value).startswith(str(p))


def test_not_hdf5_and_missing(tmp_path):
    p = tmp_path / "x.h5"
    p.write_text("not hdf5\n")
    with pytest.raises(LegacyInputError, match="not a readable HDF5 trace file"):
        TraceFile(p)
    with pytest.raises(LegacyInputError, match="not found"):
        TraceFile(tmp_path / "nope.h5")


def test_missing_group_and_wrong_dtype(tmp_path):
    p = tmp_path / "t.h5"
    with TraceWriter(p, case="t") as w:
        w.write_repr(
            0,
            seq=[3, 4, 9],
            c=np.zeros((3, 4)),
            init_states=np.zeros((1, 2)),
            parsed_in="a b <eos>",
        )
    with h5py.File(p, "a") as f:
        del f["repr/0/c"]
        f["repr/0/c"] = np.zeros((3, 4), dtype=np.float64)
    with TraceFile(p) as tr:
        with pytest.raises(
            LegacyInputError, match=r"/repr/0/c: dtype float64, the format says float32"
        ):
            tr.repr(0)
        with pytest.raises(LegacyInputError, match=r"/pairs/0: group missing"):
            tr.pairs(0)
        with pytest.raises(LegacyInputError, match=r"/steps: group missing"):
            tr.steps(0)


# ---------------------------------------------------------------------------------------
# writer round trip
# ---------------------------------------------------------------------------------------
def test_writer_round_trip_of_a_real_recording(tmp_path, legacy_root):
    src = legacy_root / "search_variant" / "trace.h5"
    if not src.is_file():
        pytest.skip(f"{src} not present")
    out = tmp_path / "copy.h5"
    with TraceFile(src) as tr:
        attrs = {k: v for k, v in tr.attrs.items()}
        with TraceWriter(out, **attrs) as w:
            for i in (0, 35):
                w.write_pair(i, **tr.pairs(i))
                w.write_repr(i, **tr.repr(i))
            for b, batch in enumerate(tr.batch_all()):
                w.write_batch(b, batch_size=32, **batch)
            s = tr.steps(1)
            w.write_steps(
                1,
                steps=s.steps,
                seq=s.seq,
                minlen=s.minlen,
                fin_trans=s.trans,
                fin_costs=s.costs,
                beam_size=s.beam_size,
                ignore_unk=s.ignore_unk,
            )
            for label in ("5", "10_normalize"):
                run = tr.beam(label)
                for i in (0, 35):
                    bs = run.sentences[i]
                    w.write_beam(
                        label,
                        i,
                        fin_trans=bs.trans,
                        fin_costs=bs.costs,
                        best=bs.best,
                        best_sentence=bs.best_sentence,
                        error=bs.error,
                        seconds_total=run.attrs["seconds_total"],
                    )
        with TraceFile(out) as cp:
            assert cp.format_version == 1
            assert cp.attrs["param_names"] == tr.attrs["param_names"]
            assert cp.attrs["null_sym_target"] == 320
            for i in (0, 35):
                for k, v in tr.pairs(i).items():
                    assert np.array_equal(cp.pairs(i)[k], v), k
                for k, v in tr.repr(i).items():
                    assert np.array_equal(cp.repr(i)[k], v), k
            for a, b in zip(cp.batch_all(), tr.batch_all()):
                assert all(np.array_equal(a[k], b[k], equal_nan=True) for k in b)
            c, s = cp.steps(1), tr.steps(1)
            assert (c.minlen, c.n_steps, c.finished) == (s.minlen, s.n_steps, s.finished)
            for x, y in zip(c.steps, s.steps):
                assert x.keys() == y.keys()
                assert all(np.array_equal(x[k], y[k]) for k in y)
            for label in ("5", "10_normalize"):
                a, b = cp.beam(label), tr.beam(label)
                assert (a.beam_size, a.normalize, a.ignore_unk) == (
                    b.beam_size,
                    b.normalize,
                    b.ignore_unk,
                )
                for i in (0, 35):
                    x, y = a.sentences[i], b.sentences[i]
                    assert (x.finished, x.best, x.best_sentence, x.error) == (
                        y.finished,
                        y.best,
                        y.best_sentence,
                        y.error,
                    )
    # same dtypes and ranks as the original for everything written
    with h5py.File(out, "r") as f, h5py.File(src, "r") as g:

        def check(name, obj):
            if isinstance(obj, h5py.Dataset):
                assert obj.dtype == g[name].dtype and obj.shape == g[name].shape, name

        f.visititems(check)
    with pytest.raises(LegacyInputError, match="refusing to overwrite"):
        TraceWriter(out)


def test_split_flat_and_labels():
    parts = split_flat(np.array([5, 6, 320, 7, 320]), np.array([3, 2]))
    assert [list(p) for p in parts] == [[5, 6, 320], [7, 320]]
    assert split_flat(np.zeros(0, np.int64), np.zeros(0, np.int64)) == []
    with pytest.raises(LegacyInputError, match="sum to 4"):
        split_flat(np.array([1, 2, 3]), np.array([2, 2]))
    assert parse_beam_label("5_ignore_unk") == {
        "beam_size": 5,
        "normalize": False,
        "ignore_unk": True,
    }
    with pytest.raises(ValueError):
        parse_beam_label("five")


def test_tolerance_table():
    """Every float quantity is judged by the derived float32-noise bound, with the noise kind
    its arithmetic calls for (groundhog_port.harness.tolerance); ids and sequences are exact."""
    score = tolerance_for("pairs/3/score")
    assert (score.kind, score.noise) == ("derived", "terms")
    assert score.nonfinite_pattern
    assert tolerance_for("batch_all/1/scores").noise == "terms"
    assert tolerance_for("batch/x").kind == "exact"
    assert (
        tolerance_for("steps/2/004/next_probs").kind,
        tolerance_for("steps/2/004/next_probs").noise,
    ) == ("derived", "rel")
    assert tolerance_for("steps/2/004/next_states").noise == "abs"
    assert tolerance_for("steps/2/004/word_indices").kind == "set"
    cost = tolerance_for("beam/10_normalize/3/fin_costs")
    assert (cost.kind, cost.noise) == ("derived", "terms")
    assert tolerance_for("beam/10_normalize/3/fin_trans_flat").kind == "exact"
    assert tolerance_for("train_step/params_after/W_0_enc_approx_embdr").kind == "derived"
    with pytest.raises(KeyError):
        tolerance_for("nowhere/x")
