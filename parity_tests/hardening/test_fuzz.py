"""Hostile and broken inputs: every loader loads the file or raises ONE clean error.

Hypothesis drives the mutators of :mod:`parity_tests.support.fuzzing` over the real fixture files
(truncation, flipped/overwritten/inserted bytes, "interesting" integers over headers, wrong
dtypes/shapes/NaN in models, hostile state values, broken HDF5 structure, broken text) and
every pickle payload we know; a handful of command runs check exit code 2, one stderr line,
no traceback.  ``derandomize=True``: the same examples on every run (CI budget well under a
minute).  ``tools/fuzz.py`` runs the same mutations by the thousand, one process per case,
with time and memory limits.
"""

import json
import os
import pickle
import random
import signal
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import legacy_states
from groundhog_port.errors import LegacyInputError
from groundhog_port.legacy import vocab
from parity_tests.support import fuzzing as F
from parity_tests.support.command_lines import score_args, translate_args

FX = F.Fixtures()
SETTINGS = dict(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUTF8="1")
OK = ("loaded", "clean error")

needs_traces = pytest.mark.skipif(not FX.has_traces, reason=f"no recorded traces at {FX.legacy}")
needs_bitexts = pytest.mark.skipif(not FX.has_bitexts, reason=f"no .h5 bitexts at {FX.legacy}/data")


pytestmark = pytest.mark.usefixtures("one_thread")


@contextmanager
def time_limit(seconds):
    """A Python-level hang fails the example instead of the whole run."""

    def on_alarm(signum, frame):
        raise TimeoutError(f"no result after {seconds}s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def check(case):
    with tempfile.TemporaryDirectory() as d, time_limit(60):
        result = F.run_case(FX, case, d)
    assert result.outcome in OK, f"{case.target} / {case.label}: {result.outcome}: {result.detail}"
    return result


# ---------------------------------------------------------------------------------------------
# strategies: byte-level mutations as (label, function of the bytes)
# ---------------------------------------------------------------------------------------------
POS = st.integers(0, 1 << 24)

byte_mutations = st.one_of(
    st.builds(lambda o: (f"truncate@{o}", lambda d: F.truncate(d, o % (len(d) + 1))), POS),
    st.builds(
        lambda e: (f"flip{e[:3]}", lambda d: F.flip(d, e)),
        st.lists(st.tuples(POS, st.integers(1, 255)), min_size=1, max_size=8),
    ),
    st.builds(
        lambda p, c: (f"overwrite@{p}", lambda d: F.overwrite(d, p, c)),
        POS,
        st.binary(min_size=1, max_size=16),
    ),
    st.builds(
        lambda p, c: (f"insert@{p}", lambda d: F.insert(d, p, c)),
        POS,
        st.binary(min_size=1, max_size=32),
    ),
    st.builds(
        lambda p, n: (f"delete@{p}-{n}", lambda d: F.delete(d, p, n)), POS, st.integers(1, 512)
    ),
    st.builds(
        lambda p, v, w: (f"int@{p}={v:#x}", lambda d: F.put_int(d, p, v, w)),
        POS,
        st.sampled_from(F.INTERESTING_INTS),
        st.sampled_from([1, 2, 4, 8]),
    ),
    st.just(("empty", lambda d: b"")),
)


# ---------------------------------------------------------------------------------------------
# the payloads themselves
# ---------------------------------------------------------------------------------------------
def test_payloads_do_run_code_when_unpickled_naively(tmp_path):
    """The marker is proof: each payload (bar the listed exceptions) creates it under
    plain ``pickle.loads``."""
    marker = tmp_path / F.MARKER_NAME
    executed = []
    for name, data in F.payload_pickles(marker).items():
        if name in F.NOT_DIRECTLY_EXECUTING:
            continue
        if marker.exists():
            marker.unlink()
        try:
            pickle.loads(data, encoding="latin1")
        except Exception:  # noqa: BLE001 - some payloads fail after running
            pass
        executed.append(name) if marker.exists() else None
    expected = sorted(set(F.payload_pickles(marker)) - F.NOT_DIRECTLY_EXECUTING)
    assert sorted(executed) == expected


LOADERS = {
    "load_state": legacy_states.load_state,
    "safe_load_pickle": legacy_states.safe_load_pickle,
    "load_word2idx": vocab.load_word2idx,
    "load_idx2word": vocab.load_idx2word,
}


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_no_payload_runs(loader, tmp_path):
    marker = tmp_path / F.MARKER_NAME
    for name, data in F.payload_pickles(marker).items():
        p = tmp_path / "x.pkl"
        p.write_bytes(data)
        with pytest.raises(LegacyInputError) as err:
            LOADERS[loader](p)
        assert str(p) in str(err.value) and "\n" not in str(err.value), name
        assert not marker.exists(), f"{name} ran under {loader}"


@pytest.mark.parametrize("depth", [150, 100_000])
@pytest.mark.parametrize("make", [F.deep_list_pickle, F.deep_tuple_pickle, F.deep_dict_pickle])
def test_deeply_nested_pickles(make, depth, tmp_path):
    p = tmp_path / "deep.pkl"
    p.write_bytes(make(depth))
    with pytest.raises(LegacyInputError, match="nested"):
        legacy_states.safe_load_pickle(p)


@pytest.mark.parametrize("wrap", [False, True])
def test_shared_pickle_is_refused_at_once(wrap, tmp_path):
    """The pickle billion laughs: 64 tuples holding the previous one twice, 2**64 paths.
    Walked once (the memo), then refused before anything downstream (repr in an error
    message, ==, json) could walk it as a tree."""
    p = tmp_path / "dag.pkl"
    p.write_bytes(F.shared_dag_pickle(64, wrap_in_state=wrap))
    with time_limit(10):
        for load in (legacy_states.load_state, vocab.load_word2idx):
            with pytest.raises(LegacyInputError, match="when expanded"):
                load(p)
    # sharing itself is fine: a state whose two keys hold the same list loads
    shared = ["/data/x.h5"]
    p.write_bytes(pickle.dumps({"source": shared, "target": shared}, protocol=2))
    assert legacy_states.load_state(p)["target"] == ["/data/x.h5"]


@pytest.mark.parametrize("put", [b"p127990723\n", b"r\xff\xff\xff\x7f"])
def test_huge_memo_index_is_refused_before_the_memo_grows(put, tmp_path):
    """``PUT 127990723`` (protocol 0, fuzz seed 17217 case 1494) or ``LONG_BINPUT 2**31-1``
    made the C unpickler grow its memo table to that index: 1-2 GB touched for a few
    bytes.  Refused from the index, before unpickling."""
    p = tmp_path / "memo.pkl"
    p.write_bytes(b"(dp0\nS'dim'\n" + put + b"I1000\ns.")
    with pytest.raises(LegacyInputError, match="memo index"):
        legacy_states.safe_load_pickle(p)
    p.write_bytes(b"(dp0\nS'dim'\np1\nI1000\ns.")  # a small index is fine
    assert legacy_states.safe_load_pickle(p) == {"dim": 1000}


_PEAK_RSS_OF_OPENING = """
import sys
from groundhog_port.errors import LegacyInputError
from groundhog_port.harness.trace import TraceFile
def hwm():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
before = hwm()
try:
    TraceFile(sys.argv[1])
    print("loaded", (hwm() - before) // 1024)
except LegacyInputError as err:
    print("clean", (hwm() - before) // 1024)
"""


@pytest.mark.skipif(
    bool({"trace", "bitext"} & set(F.unavailable_targets(FX))),
    reason="the recorded traces and .h5 bitexts are needed to generate the same cases",
)
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="peak RSS read from /proc")
def test_damaged_vlen_string_length_does_not_touch_gigabytes(tmp_path):
    """Fuzz seed 17204 case 1275: 20 overwritten bytes gave the ``python_version``
    attribute a length of ~1.9e9; HDF5 allocated and touched 1.9 GB before reporting the
    string missing (a clean error, so only the peak RSS shows it).  A fresh process
    opens the trace and reports its peak RSS growth."""
    case = F.seeded_case(FX, 17204, 1275, tmp_path, targets=F.TARGETS_BEFORE_ISSUE_25)
    trace = tmp_path / "trace.h5"
    trace.write_bytes(case.files["trace.h5"])
    out = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS_OF_OPENING, str(trace)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
        timeout=120,
    )
    outcome, mib = out.stdout.split()
    assert outcome == "clean" and int(mib) < 256, out.stdout + out.stderr


@pytest.mark.parametrize("op", F.HUGE_OPCODES)
def test_huge_declared_sizes(op, tmp_path):
    p = tmp_path / "huge.pkl"
    for size in (2**33, 2**62):
        p.write_bytes(F.huge_size_pickle(op, size))
        with pytest.raises(LegacyInputError):
            legacy_states.safe_load_pickle(p)


# ---------------------------------------------------------------------------------------------
# hypothesis over every loader
# ---------------------------------------------------------------------------------------------
def experiment_case(target, exp, label, data, **opts):
    """The ``state`` or ``model`` case where ``data`` stands for that file of experiment
    ``exp`` (its label begins with the experiment's name)."""
    file = {"state": "state.pkl", "model": "model.npz"}[target]
    return F.Case(target, f"{exp.name}: {label}", {file: data}, {"experiment": exp.name, **opts})


@settings(max_examples=120, **SETTINGS)
@given(exp=st.sampled_from(FX.experiments), mutation=byte_mutations)
def test_state_bytes(exp, mutation):
    label, fn = mutation
    check(experiment_case("state", exp, label, fn(FX.read(exp.state))))


@settings(max_examples=120, **SETTINGS)
@given(
    exp=st.sampled_from(FX.experiments),
    key=st.sampled_from(F.STATE_KEYS),
    value=st.sampled_from(F.HOSTILE_VALUES),
    protocol=st.sampled_from([0, 2]),
)
def test_state_values(exp, key, value, protocol, tmp_path_factory):
    state = legacy_states.safe_load_pickle(exp.state)
    marker = tmp_path_factory.getbasetemp() / "never" / F.MARKER_NAME
    data = F.state_with(state, key, value, protocol, marker)
    check(experiment_case("state", exp, f"state[{key!r}] = {value!r:.40}", data))
    assert not marker.exists()


@settings(max_examples=120, **SETTINGS)
@given(
    path=st.sampled_from(FX.vocab_files),
    kind=st.sampled_from(["word2idx", "idx2word"]),
    mutation=byte_mutations,
)
def test_vocab_bytes(path, kind, mutation):
    label, fn = mutation
    check(
        F.Case("vocab", f"{path.name}: {label}", {"vocab.pkl": fn(FX.read(path))}, {"kind": kind})
    )


@settings(max_examples=60, **SETTINGS)
@given(
    path=st.sampled_from(FX.vocab_files),
    kind=st.sampled_from(["word2idx", "idx2word"]),
    edit=st.sampled_from(["set", "set", "del", "empty", "list", "swap", "nested"]),
    value=st.sampled_from(F.HOSTILE_VALUES[:24]),
    rnd=st.randoms(use_true_random=False),
)
def test_vocab_entries(path, kind, edit, value, rnd):
    v = legacy_states.safe_load_pickle(path)
    key = rnd.choice(sorted(v, key=repr))
    if rnd.random() < 0.5:
        key, value = value, 5
    try:
        data = F.vocab_with(v, edit, key, value)
    except TypeError:  # unhashable key
        data = F.vocab_with(v, "list")
    check(
        F.Case(
            "vocab",
            f"{path.name}: {edit} {key!r:.20}={value!r:.20}",
            {"vocab.pkl": data},
            {"kind": kind},
        )
    )


@settings(max_examples=80, **SETTINGS)
@given(exp=st.sampled_from(FX.experiments), mutation=byte_mutations, allow_nonfinite=st.booleans())
def test_model_bytes(exp, mutation, allow_nonfinite):
    label, fn = mutation
    check(
        experiment_case(
            "model", exp, label, fn(FX.read(exp.model)), allow_nonfinite=allow_nonfinite
        )
    )


@settings(max_examples=80, **SETTINGS)
@given(
    exp=st.sampled_from(FX.experiments),
    edit=st.sampled_from(F.NPZ_EDITS),
    lenient=st.booleans(),
    allow_nonfinite=st.booleans(),
    rnd=st.randoms(use_true_random=False),
)
def test_model_arrays(exp, edit, lenient, allow_nonfinite, rnd, tmp_path_factory):
    arrays = F.read_npz_arrays(FX.read(exp.model))
    name = rnd.choice(sorted(arrays))
    marker = tmp_path_factory.getbasetemp() / "never" / F.MARKER_NAME
    data = F.npz_edit(arrays, edit, name, rnd, marker)
    result = check(
        experiment_case(
            "model", exp, f"{edit} {name}", data, lenient=lenient, allow_nonfinite=allow_nonfinite
        )
    )
    assert not marker.exists()
    if edit in ("nan", "inf", "-inf") and not allow_nonfinite:
        assert result.outcome == "clean error" and "--allow-nonfinite" in result.detail
    square = arrays[name].ndim == 2 and arrays[name].shape[0] == arrays[name].shape[1]
    if (
        edit in ("float64", "delete", "extra", "huge-header") or edit == "transpose" and not square
    ) and not lenient:
        assert result.outcome == "clean error"


@needs_traces
@settings(max_examples=50, **SETTINGS)
@given(mutation=byte_mutations)
def test_trace_bytes(mutation):
    label, fn = mutation
    check(F.Case("trace", label, {"trace.h5": fn(FX.read(FX.small_trace()))}))


@needs_traces
@settings(max_examples=30, **SETTINGS)
@given(edit=st.sampled_from(F.H5_EDITS), rnd=st.randoms(use_true_random=False))
def test_trace_structure(edit, rnd):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "t.h5"
        p.write_bytes(FX.read(FX.small_trace()))
        F.h5_edit(p, edit, rnd, "trace")
        data = p.read_bytes()
    check(F.Case("trace", f"h5 {edit}", {"trace.h5": data}))


@needs_bitexts
@settings(max_examples=50, **SETTINGS)
@given(which=st.sampled_from(["src", "trg"]), mutation=byte_mutations)
def test_bitext_bytes(which, mutation):
    label, fn = mutation
    a, b = FX.bitext_pairs[0]
    check(
        F.Case(
            "bitext",
            f"{which}: {label}",
            {f"{which}.h5": fn(FX.read(a if which == "src" else b))},
            {"src": str(a), "trg": str(b)},
        )
    )


@needs_bitexts
@settings(max_examples=40, **SETTINGS)
@given(
    which=st.sampled_from(["src", "trg"]),
    edit=st.sampled_from(F.H5_EDITS),
    rnd=st.randoms(use_true_random=False),
)
def test_bitext_structure(which, edit, rnd):
    a, b = FX.bitext_pairs[0]
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "x.h5"
        p.write_bytes(FX.read(a if which == "src" else b))
        F.h5_edit(p, edit, rnd, "bitext")
        data = p.read_bytes()
    check(
        F.Case(
            "bitext", f"{which}: h5 {edit}", {f"{which}.h5": data}, {"src": str(a), "trg": str(b)}
        )
    )


@settings(max_examples=120, **SETTINGS)
@given(
    which=st.sampled_from(["src", "trg"]),
    mutation=st.one_of(
        byte_mutations,
        st.builds(
            lambda e, r: (e, lambda d: F.text_edit(d, e, r)),
            st.sampled_from(F.TEXT_EDITS),
            st.randoms(use_true_random=False),
        ),
    ),
    allow_unk=st.booleans(),
)
def test_text(which, mutation, allow_unk):
    label, fn = mutation
    p = FX.text_files[0 if which == "src" else 1]
    check(
        F.Case(
            "text", f"{which}: {label}", {f"{which}.txt": fn(FX.read(p))}, {"allow_unk": allow_unk}
        )
    )


# ---------------------------------------------------------------------------------------------
# the command line: exit code 2, one line on stderr, no traceback, nothing run
# ---------------------------------------------------------------------------------------------
def _cli_cases(tmp):
    """{name: argv}: hostile or broken files handed to each command (a few here, in one
    process; test_hardening.py runs many more in-process)."""
    fx = FX.fixture_dir
    marker = tmp / F.MARKER_NAME
    payloads = F.payload_pickles(marker)
    state, model = fx / "search_state.pkl", fx / "search_model.npz"
    d = {}

    def put(name, data):
        p = tmp / name
        p.write_bytes(data)
        return p

    d["translate: state runs os.system"] = translate_args(
        fx / "test.en",
        "--trans",
        tmp / "t1.txt",
        state=put("evil_state.pkl", payloads["nested in a dict (p2)"]),
        model=model,
    )
    d["score: truncated model"] = score_args(
        "batch",
        fx / "test.en",
        fx / "test.fr",
        "--allow-unk",
        state=state,
        model=put("cut_model.npz", FX.read(model)[:50_000]),
    )
    d["inspect: vocabulary runs eval"] = [
        "inspect",
        "--state",
        state,
        model,
        f"word_indx='{put('evil_vocab.pkl', payloads['builtins.eval (p2)'])}'",
    ]
    if FX.has_bitexts:
        a, b = FX.bitext_pairs[0]
        d["score: truncated .h5 bitext"] = score_args(
            "batch", put("cut.en.h5", FX.read(a)[:100_000]), b, state=state, model=model
        )
    return d


#: run in a fresh interpreter: each command of argv[1] (JSON {name: argv}) in turn through
#: ``groundhog_port.cli.main.main`` (stdout/stderr captured at the descriptors, as a process
#: prints them); prints {name: [exit status, stdout, stderr]} as JSON
_DRIVER = """
import json, sys
from groundhog_port.cli.main import main
from parity_tests.support.fuzzing import run_cli_inprocess
res = {name: run_cli_inprocess(main, ['--log-level', 'WARNING', *argv])
       for name, argv in json.loads(sys.argv[1]).items()}
sys.stdout.write(json.dumps(res))
"""


def run_clis(argvs, timeout=300):
    """Run several ``groundhog-port`` commands in ONE fresh process, one after the other
    (a crash in C or a hang fails the test, not the run; one torch import instead of one per
    command); returns {name: CompletedProcess}."""
    p = subprocess.run(
        [
            sys.executable,
            "-c",
            _DRIVER,
            json.dumps({n: [str(a) for a in argv] for n, argv in argvs.items()}),
        ],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=timeout,
    )
    assert p.returncode == 0, f"the command runner died (exit {p.returncode}):\n{p.stderr}"
    return {
        name: subprocess.CompletedProcess(argvs[name], rc, out, err)
        for name, (rc, out, err) in json.loads(p.stdout).items()
    }


def test_cli_broken_inputs(tmp_path):
    cases = _cli_cases(tmp_path)
    results = run_clis(cases)
    assert set(results) == set(cases)
    for name, r in results.items():
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2, f"{name}: exit {r.returncode}\n{r.stderr}"
        assert "Traceback" not in r.stderr, f"{name}:\n{r.stderr}"
        assert len(lines) == 1 and " error: " in lines[0], f"{name}: {r.stderr!r}"
    assert not (tmp_path / F.MARKER_NAME).exists()


# ---------------------------------------------------------------------------------------------
# every crash tools/fuzz.py found, replayed (each was a traceback, a hang or a segfault)
# ---------------------------------------------------------------------------------------------
def _state_case(key, value):
    state = legacy_states.safe_load_pickle(FX.main.state)
    return F.Case(
        "state",
        f"state[{key!r}] = {value!r}",
        {"state.pkl": F.state_with(state, key, value, 2)},
        {"experiment": "fixture"},
    )


def _model_case(label, data, **opts):
    return F.Case("model", label, {"model.npz": data}, {"experiment": "fixture", **opts})


def _zip_patch(offset, value, width=2):
    return F.put_int(FX.read(FX.main.model), offset, value, width)


def _arrays():
    return F.read_npz_arrays(FX.read(FX.main.model))


REGRESSIONS = {
    # config.py: bool()/comparisons on arrays, '<' on strings, division by maxout_part
    "state rec_gating array": lambda: _state_case("rec_gating", np.array([1, 2])),
    "state enc_rec_layer array": lambda: _state_case("enc_rec_layer", np.array([1, 2])),
    "state last_forward array": lambda: _state_case("last_forward", np.array([1, 2])),
    "state dropout string": lambda: _state_case("dropout", "Maxout(10**9)"),
    "state maxout_part 0": lambda: _state_case("maxout_part", 0),
    "state unk_sym_source string": lambda: _state_case("unk_sym_source", "32"),
    "state rank_n_approx 10**30": lambda: _state_case("rank_n_approx", 10**30),
    # data.py: int() of a list
    "state bs list": lambda: _state_case("bs", []),
    # legacy_states/load.py: Path.is_file() raised ENAMETOOLONG
    "state path too long": lambda: _state_case("word_indx", "x" * 5000),
    "state path with NUL": lambda: _state_case("indx_word", "vocab\x00.pkl"),
    # an exception message holding a newline (a float opcode too large): two stderr lines
    "pickle float overflow": lambda: F.Case(
        "state", "F1e+208125", {"state.pkl": b"F1e+208125\n."}, {"experiment": "fixture"}
    ),
    # checkpoint.py: zipfile / numpy header errors, lenient conversion of text arrays
    "npz flag bit 5": lambda: _model_case(
        "flag bit 5", _zip_patch(FX.read(FX.main.model).find(b"PK\x01\x02") + 8, 0x20)
    ),
    "npz central directory version 9.3": lambda: _model_case(
        "version", _zip_patch(FX.read(FX.main.model).find(b"PK\x01\x02") + 6, 93)
    ),
    "npz header unbalanced": lambda: _model_case(
        "bad header",
        F.npz_with_members({}, {"W_x": b"\x93NUMPY\x01\x00\x10\x00" + b"[" * 15 + b"\n"}),
    ),
    "npz text array lenient": lambda: _model_case(
        "string lenient",
        F.npz_edit(_arrays(), "string", "W_0_dec_initializer_0", random.Random(0)),
        lenient=True,
    ),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_regressions(name):
    check(REGRESSIONS[name]())


#: (seed, case) of tools/fuzz.py runs that found a failure, replayed exactly (the same
#: generator, targets and weights as ``tools/fuzz.py --seed S --only I``)
SEEDED_REGRESSIONS = [
    # a corrupted compound-type field name of /indices: h5py raised UnicodeDecodeError (issue 17)
    (424242, 736),
    # fresh seeds of issue 17's 100,000-case run: a model .npz member that is not a .npy
    # array (numpy returned its bytes: AttributeError), and state['oov'] = False / None
    # (TypeError when the words were joined)
    (17216, 882),
    (17217, 1964),
    (17218, 1112),
    # PUT 127990723 in a 3 KB state: the unpickler touched 1.9 GB before failing cleanly
    (17217, 1494),
    # an id -> word vocabulary missing an id the model can emit: the error named no file
    (17303, 1613),
]


@pytest.mark.skipif(
    bool({"trace", "bitext"} & set(F.unavailable_targets(FX))),
    reason="the recorded traces and .h5 bitexts are needed to generate the same cases",
)
@pytest.mark.parametrize("seed, index", SEEDED_REGRESSIONS)
def test_seeded_regressions(seed, index):
    with tempfile.TemporaryDirectory() as d:
        case = F.seeded_case(FX, seed, index, d, targets=F.TARGETS_BEFORE_ISSUE_25)
    check(case)


def _isolated(fn, timeout=60):
    """``fn()`` in a forked process: a crash or an endless loop in C fails the test instead
    of killing or hanging the run.  Returns ``fn``'s outcome as (kind, message)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)

    def target():
        try:
            fn()
            child.send(("loaded", ""))
        except LegacyInputError as err:
            child.send(("clean error", str(err)))
        except BaseException as err:  # noqa: BLE001
            child.send(("CRASH", f"{type(err).__name__}: {err}"))

    p = ctx.Process(target=target)
    p.start()
    p.join(timeout)
    if p.is_alive():
        p.kill()
        p.join()
        return "hang", f"no result after {timeout}s"
    if not parent.poll():
        return "CRASH", f"exit code {p.exitcode}"
    return parent.recv()


@needs_traces
def test_trace_regressions(tmp_path):
    import h5py

    from groundhog_port.harness.trace import TraceFile

    def validate(p):
        return lambda: TraceFile(p).validate()

    data = FX.read(FX.small_trace())
    cases = {}
    # a zeroed object header in the global heap: HDF5 looped forever
    g = data.find(b"GCOL")
    cases["global heap loop"] = F.overwrite(data, g + 16, b"\x00" * 32)
    # a vlen string attribute turned into a vlen sequence: HDF5 segfaulted reading it
    a = data.find(b"test_src_file\x00\x00\x00\x19\x01\x01")
    cases["vlen sequence attribute"] = F.overwrite(data, a + 17, b"\xff\xff")
    for name, blob in cases.items():
        p = tmp_path / f"{name}.h5"
        p.write_bytes(blob)
        kind, msg = _isolated(validate(p))
        assert kind == "clean error", f"{name}: {kind}: {msg}"
    # a soft link where /sampler expects a dataset: refused when the trace is opened (links
    # are never followed, h5guard.check_links); a chunked dataset declaring 8 TiB
    p = tmp_path / "links.h5"
    p.write_bytes(data)
    with h5py.File(p, "r+") as f:
        f.create_group("sampler")["mrg_base_rstate_after_build"] = h5py.SoftLink("/sampler")
    with pytest.raises(LegacyInputError, match="mrg_base_rstate_after_build: a soft link"):
        TraceFile(p)
    p = tmp_path / "huge.h5"
    p.write_bytes(data)
    with h5py.File(p, "r+") as f:
        del f["pairs/0/score"]
        f["pairs/0"].create_dataset("score", shape=(2**40,), dtype="f4", chunks=(4096,))
    with TraceFile(p) as tf:
        with pytest.raises(LegacyInputError, match="declares shape"):
            tf.pairs(0)


@needs_bitexts
def test_bitext_regressions(tmp_path):
    """Datasets that declare far more than the file holds were allocated (32 GiB and up)."""
    import h5py

    from groundhog_port.legacy.data import read_h5_bitext

    a, _ = FX.bitext_pairs[0]
    edits = {
        "never-written chunks": lambda f: f.create_dataset(
            "phrases", shape=(2**33,), dtype="i4", chunks=(4096,), maxshape=(None,)
        ),
        "external /dev/zero": lambda f: f.create_dataset(
            "phrases", shape=(2**32,), dtype="i4", external=[("/dev/zero", 0, h5py.h5f.UNLIMITED)]
        ),
        "external link": lambda f: f.__setitem__("phrases", h5py.ExternalLink("/etc/passwd", "/")),
    }
    for i, (name, edit) in enumerate(edits.items()):
        p = tmp_path / f"case{i}.h5"
        p.write_bytes(FX.read(a))
        with h5py.File(p, "r+") as f:
            del f["phrases"]
            edit(f)
        kind, msg = _isolated(lambda p=p: read_h5_bitext(p))
        assert kind == "clean error" and str(p) in msg, f"{name}: {kind}: {msg}"


# ---------------------------------------------------------------------------------------------
# issue 40: checkpoint folders, archive trees (special files, links, caches), timing files
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("target, cases", [("checkpoint", 16), ("timing", 16), ("archive", 4)])
def test_issue40_targets_hold(target, cases, tmp_path):
    """A few seeded cases of each issue-40 target (``parity_tests/support/fuzzing_trees.py``),
    as ``tools/fuzz.py --targets T --seed 40`` draws them: none may fail (for ``archive``:
    no input changed, nothing raw in the report, no hang on its FIFOs)."""
    for i in range(cases):
        d = tmp_path / str(i)
        case = F.seeded_case(FX, 40, i, d, targets=[target])
        out = F.run_case(FX, case, d)
        assert out.outcome not in F.FAILURES, (i, case.label, out)


def test_targets_before_issue_40_replay_as_before():
    """Earlier seeds replay with the targets of their time (the new ones come after)."""
    assert F.TARGETS[: len(F.TARGETS_BEFORE_ISSUE_40)] == F.TARGETS_BEFORE_ISSUE_40
    assert F.TARGETS[: len(F.TARGETS_BEFORE_ISSUE_51)] == F.TARGETS_BEFORE_ISSUE_51
    new = {"collisions", "checkpoint", "archive", "timing"}
    assert new == set(F.TARGETS_BEFORE_ISSUE_51) - set(F.TARGETS_BEFORE_ISSUE_40)
    assert F.TARGETS[: len(F.TARGETS_BEFORE_ISSUE_53)] == F.TARGETS_BEFORE_ISSUE_53
    assert {"pack", "compressed", "plan"} == set(F.TARGETS_BEFORE_ISSUE_53) - set(
        F.TARGETS_BEFORE_ISSUE_51
    )
    assert {"ties", "serve-batch"} == set(F.TARGETS) - set(F.TARGETS_BEFORE_ISSUE_53)


@pytest.mark.parametrize("target", ["pack", "compressed", "plan"])
def test_issue51_targets_hold(target, tmp_path):
    """16 seeded cases of each issue-51 target (``parity_tests/support/fuzzing_containers.py``:
    packs, compressed text, plans with the red team's lies), as ``tools/fuzz.py --targets T
    --seed 51`` draws them: none may fail."""
    for i in range(16):
        d = tmp_path / str(i)
        case = F.seeded_case(FX, 51, i, d, targets=[target])
        out = F.run_case(FX, case, d)
        assert out.outcome not in F.FAILURES, (i, case.label, out)


# ---------------------------------------------------------------------------------------------
# issue 53: tie-heavy costs against numpy 1.23, concurrent requests with different options
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("target, cases", [("ties", 24), ("serve-batch", 4)])
def test_issue53_targets_hold(target, cases, tmp_path):
    """Seeded cases of each issue-53 target (``parity_tests/support/fuzzing_mixes.py``), as
    ``tools/fuzz.py --targets T --seed 53`` draws them: none may fail (``ties``: listed in
    numpy 1.23's own argsort order; ``serve-batch``: each request as decoded alone)."""
    if target in F.unavailable_targets(FX):
        pytest.skip(f"{target}: {F.unavailable_targets(FX)[target]}")
    for i in range(cases):
        d = tmp_path / str(i)
        case = F.seeded_case(FX, 53, i, d, targets=[target])
        out = F.run_case(FX, case, d)
        assert out.outcome not in F.FAILURES, (i, case.label, out)


def test_ties_unavailable_without_numpy_1_23(monkeypatch):
    """Without ``.venv-theano`` the ``ties`` target is named unavailable, with why (the fuzzer
    prints it), never run against another numpy."""
    from parity_tests.support import fuzzing_mixes

    monkeypatch.setattr(fuzzing_mixes, "_legacy_numpy", ["1.26.4"])
    assert "numpy 1.23" in F.unavailable_targets(FX)["ties"]
    assert "ties" not in F.available_targets(FX)
