"""The derived parity bounds (groundhog_port.harness.tolerance), the independent numpy float32 trace
producer (tools/numpy_trace_producer.py) and CI's refusal to run without the recordings."""

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from groundhog_port.harness import tolerance as tol
from parity_tests.support.nested_pytest import run_pytest

REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------
# the bound
# ---------------------------------------------------------------------------------------
def test_the_bound_comes_from_the_probe_not_from_the_output_under_test():
    """The allowed error is derived from the float64 runs (shadow and probe) only: a float32
    output far off its own float64 shadow fails instead of widening its bound."""
    rng = np.random.RandomState(0)
    exact = rng.uniform(-1, 1, 1000)
    probe = exact + rng.normal(0, 3e-8, exact.shape)  # what float32 arithmetic does here
    port32 = exact.astype(np.float32)
    res = tol.compare(port32, port32, exact, tol.ABS, probe=probe)
    assert res.ok and 3e-8 < res.scale < 2e-7
    # an independent float32 implementation with the same noise passes
    other = (exact + rng.normal(0, 3e-8, exact.shape)).astype(np.float32)
    assert tol.compare(other, port32, exact, tol.ABS, probe=probe).ok
    # the recording off by more than 2 K noise fails, whatever the port computed
    off = other.copy()
    off[7] += np.float32(2 * tol.K * res.noise[7] + 4 * 2.0**-23)
    bad = tol.compare(off, port32, exact, tol.ABS, probe=probe)
    assert bad.n_bad == 1 and bad.bad[7] and not bad.own_bad[7]
    # a noisy float32 path: same bound (it does not enter it), so it fails, against the
    # recording AND against its own float64 shadow
    noisy = port32 + rng.choice([-1.0, 1.0], exact.shape) * 1e-5
    res2 = tol.compare(other, noisy, exact, tol.ABS, probe=probe)
    assert np.array_equal(
        res2.allowed, tol.compare(other, port32, exact, tol.ABS, probe=probe).allowed
    )
    assert res2.n_bad == 1000 and res2.own_bad.sum() == 1000


def test_pooled_scale_is_the_largest_noise_not_the_rms():
    """Heavy-tailed noise: every element gets at least the largest probe noise per unit
    magnitude in its pool, so an element that happened to round exactly in the probe is
    still covered by the tail."""
    rng = np.random.RandomState(1)
    exact = rng.uniform(0.1, 1, 200)
    probe = exact + rng.standard_t(2, 200) * 1e-8  # heavy tails
    probe[3] = exact[3]
    res = tol.compare(exact, exact, exact, tol.ABS, probe=probe)
    assert res.scale == pytest.approx(np.abs(probe - exact).max())
    assert res.noise[3] == pytest.approx(res.scale)


def test_relative_kind_scales_with_the_value_and_subnormals_get_their_spacing():
    q = np.array([0.5, 1e-20, 1e-42, 0.0])
    p32 = q.astype(np.float32)
    res = tol.compare(p32, p32, q, tol.REL, scale=1e-7)
    assert res.allowed[0] == pytest.approx(
        2 * tol.K * 0.5e-7 + 2 * np.spacing(np.float32(0.5)), rel=1e-6
    )
    assert res.allowed[1] < 1e-25  # relative, not an absolute 1e-5
    assert res.allowed[2] >= 2.0**-149  # the subnormal spacing
    assert res.ok


def test_nonfinite_values_are_a_pattern_against_the_float32_run():
    q = np.array([1.0, 2.0, 3.0])  # float64 did not underflow
    p32 = np.array([1.0, np.inf, np.nan])  # float32 did, as Theano
    assert tol.compare(np.array([1.0, np.inf, np.nan]), p32, q, tol.ABS, scale=0.0).ok
    res = tol.compare(np.array([1.0, 2.0, np.nan]), p32, q, tol.ABS, scale=0.0)
    assert res.pattern_bad.tolist() == [False, True, False] and not res.ok


def test_terms_kind_and_pool():
    pool = tol.Pool(tol.TERMS)
    rng = np.random.RandomState(2)
    for i in range(40):
        n = rng.randint(3, 30)
        exact = rng.uniform(1, 50)
        pool.add(
            f"s{i}",
            exact + rng.normal(0, 1e-6 * n),
            exact + rng.normal(0, 1e-6 * n),
            exact,
            probe=exact + rng.normal(0, 1e-6 * n),
            magnitude_of=n,
        )
    assert 1e-6 < pool.scale < 1e-5
    assert all(res.ok for _, res in pool.results())
    with pytest.raises(ValueError, match="number of terms"):
        tol.compare([1.0], [1.0], [1.0], tol.TERMS)


def test_the_probe_scales_with_the_fan_in():
    """float32_probe perturbs every weight by 2**-24 * sqrt(fan-in) relative (RMS)."""
    import torch

    from groundhog_port.harness.check import find_case
    from groundhog_port.legacy.loading import open_experiment
    from parity_tests.support.cases import LEGACY_ROOT

    d = LEGACY_ROOT / "search"
    if not (d / "trace.h5").is_file():
        pytest.skip("recorded case search not found (set GROUNDHOG_LEGACY_TRACES)")
    files = find_case(d)
    model = open_experiment(files.state, files.model, data_dir=files.dir).model
    shadow, probe = model.float64_shadow(), model.float32_probe()
    rel = lambda name: (
        (probe.get_parameter(name) - shadow.get_parameter(name)) / shadow.get_parameter(name)
    ).flatten()
    w2 = rel("decoder.output_layer.W2")  # (16, 321): fan-in 16
    assert torch.sqrt((w2**2).mean()) / tol.U32 == pytest.approx(4.0, rel=0.1)
    emb = rel("decoder.approx_embedder.W")  # a lookup: fan-in 1
    assert torch.sqrt((emb[torch.isfinite(emb)] ** 2).mean()) / tol.U32 == pytest.approx(
        1.0, rel=0.1
    )
    assert probe.dtype == torch.float64


def test_printed_quantum():
    assert tol.printed_quantum(-132.728) == pytest.approx(0.5e-3)
    assert tol.printed_quantum(6.2e-5) == pytest.approx(0.5e-10)


# ---------------------------------------------------------------------------------------
# an independent float32 producer: parity must pass, a perturbed weight must fail
# ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def numpy_case(tmp_path_factory):
    import torch

    sys.path.insert(0, str(REPO / "tools"))
    from numpy_trace_producer import produce

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    d = tmp_path_factory.mktemp("numpy_mid")
    produce(
        d,
        dim=48,
        rank=32,
        vocab=301,
        sentences=3,
        labels=("1", "5_normalize"),
        n_steps=1,
        seed=7,
        log=lambda s: None,
    )
    yield d
    torch.set_num_threads(threads)


def test_numpy_float32_trace_passes_parity(numpy_case):
    from groundhog_port.harness.check import check_case

    report = check_case(numpy_case)
    rows = {r.quantity: r for r in report.rows}
    assert report.ok, report.table()
    for q in (
        "repr/c",
        "pairs/word_probs",
        "pairs/score",
        "steps/next_probs",
        "steps/flat_next_costs",
        "steps/next_states",
        "steps/fin_costs",
        "beam/1/fin_costs",
        "beam/5_normalize/fin_costs",
    ):
        assert rows[q].n > 0 and rows[q].max_abs is not None, q
    # another implementation really differs (it is not the port's own numbers)
    assert rows["repr/c"].max_abs > 0 and rows["steps/next_probs"].max_abs > 0


def test_numpy_trace_catches_a_perturbed_weight(numpy_case):
    import torch

    from groundhog_port.harness.check import check, find_case
    from groundhog_port.harness.trace import TraceFile
    from groundhog_port.legacy.loading import open_experiment

    files = find_case(numpy_case)
    exp = open_experiment(files.state, files.model, data_dir=files.dir)
    with torch.no_grad():
        exp.model.decoder.hid_readout.W[5, 7] += 1e-3
    with TraceFile(files.trace) as tr:
        report = check(
            exp, tr, groups=("repr", "pairs", "steps"), source=files.source, target=files.target
        )
    failed = {r.quantity for r in report.failed}
    assert {"steps/next_probs", "steps/flat_next_costs", "pairs/word_probs"} <= failed, (
        report.table()
    )
    assert not {q for q in failed if q.startswith("repr/")}  # the encoder does not use it


# ---------------------------------------------------------------------------------------
# CI never goes green without the recordings
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("ci, expect_rc", [("true", 1), ("", 0)])
def test_ci_fails_without_the_recordings(tmp_path, ci, expect_rc):
    env = dict(os.environ, GROUNDHOG_LEGACY_TRACES=str(tmp_path / "nowhere"), CI=ci)
    out = run_pytest(Path(__file__), "-k", "test_printed_quantum", env=env, timeout=300)
    assert out.returncode == expect_rc, out.stdout + out.stderr
    if ci:
        assert "recorded traces are required but missing" in out.stdout + out.stderr


@pytest.fixture(scope="module")
def long_numpy_case(tmp_path_factory):
    """The numpy float32 stand-in on long sentences (64-120 words: sums of 64+ terms, the
    risk docs/trace_format.md names), /repr, /pairs and one greedy search (beam 1)."""
    import torch

    sys.path.insert(0, str(REPO / "tools"))
    from numpy_trace_producer import produce

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    d = tmp_path_factory.mktemp("numpy_long")
    produce(d, dim=48, rank=32, vocab=301, sentences=3, labels=("1",), n_steps=0, seed=11,
            log=lambda s: None, words=(64, 120))  # fmt: skip
    yield d
    torch.set_num_threads(threads)


def test_long_sentences_within_the_derived_bounds(long_numpy_case):
    """Sentences of 64-120 words: every quantity within its derived bound (the sums over
    positions and steps are longer than any recording's); the worst ratio is printed."""
    from groundhog_port.harness.check import check_case

    text = (long_numpy_case / "test.en").read_text(encoding="utf-8").splitlines()
    assert min(len(s.split()) for s in text) >= 64
    report = check_case(long_numpy_case)
    assert report.ok, report.table()
    ratios = {r.quantity: r.max_ratio for r in report.rows if r.max_ratio is not None}
    assert ratios and max(ratios.values()) <= 1.0
    worst = max(ratios, key=ratios.get)
    print(f"worst error/bound on 64-120 words: {ratios[worst]:.3f} ({worst})")
