"""The derived parity bounds (groundhog_port.tolerance), the independent numpy float32 trace
producer (tools/numpy_trace_producer.py) and CI's refusal to run without the recordings."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from groundhog_port import tolerance as tol

REPO = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------------------
# the bound
# ---------------------------------------------------------------------------------------
def test_noise_is_measured_from_the_float32_and_float64_runs():
    rng = np.random.RandomState(0)
    exact = rng.uniform(-1, 1, 1000)
    port32 = exact.astype(np.float32)                     # one rounding: noise ~ 3e-8
    res = tol.compare(port32, port32, exact, tol.ABS)
    assert res.ok and 1e-8 < res.sigma < 1e-7
    # an independent float32 result with the same noise passes; one off by twice the bound
    # (K noise units, the noise at least the unit roundoff, plus one spacing) fails
    other = (exact + rng.normal(0, res.sigma, exact.shape)).astype(np.float32)
    assert tol.compare(other, port32, exact, tol.ABS).ok
    off = other.copy()
    off[7] += np.float32(2 * (tol.K * tol.U32 + 2.0 ** -23))
    bad = tol.compare(off, port32, exact, tol.ABS)
    assert bad.n_bad == 1 and bad.bad[7]


def test_accidentally_exact_elements_get_the_pooled_noise():
    """An element whose own |p32 - p64| is 0 (it happened to round exactly) still gets the
    typical noise of its kind, not a zero bound."""
    rng = np.random.RandomState(1)
    exact = rng.uniform(0.1, 1, 200)
    port32 = exact + rng.normal(0, 1e-7, 200)
    port32[3] = exact[3]
    res = tol.compare(exact + 3e-7, port32, exact, tol.ABS)
    assert res.ok
    assert res.noise[3] == pytest.approx(res.sigma)
    assert res.allowed[3] >= tol.K * res.sigma


def test_relative_kind_scales_with_the_value_and_subnormals_get_their_spacing():
    q = np.array([0.5, 1e-20, 1e-42, 0.0])
    p32 = q.astype(np.float32)
    res = tol.compare(p32, p32, q, tol.REL, sigma=1e-7)
    assert res.allowed[0] == pytest.approx(tol.K * 0.5e-7 + np.spacing(np.float32(0.5)), rel=1e-6)
    assert res.allowed[1] < 1e-25                           # relative, not an absolute 1e-5
    assert res.allowed[2] >= 2.0 ** -149                    # the subnormal spacing
    assert res.ok


def test_nonfinite_values_are_a_pattern_against_the_float32_run():
    q = np.array([1.0, 2.0, 3.0])                          # float64 did not underflow
    p32 = np.array([1.0, np.inf, np.nan])                  # float32 did, as Theano
    assert tol.compare(np.array([1.0, np.inf, np.nan]), p32, q, tol.ABS, sigma=0.0).ok
    res = tol.compare(np.array([1.0, 2.0, np.nan]), p32, q, tol.ABS, sigma=0.0)
    assert res.pattern_bad.tolist() == [False, True, False] and not res.ok


def test_terms_kind_and_pool():
    pool = tol.Pool(tol.TERMS)
    rng = np.random.RandomState(2)
    for i in range(40):
        n = rng.randint(3, 30)
        exact = rng.uniform(1, 50)
        pool.add(f"s{i}", exact + rng.normal(0, 1e-6 * n), exact + rng.normal(0, 1e-6 * n), exact,
                 magnitude_of=n)
    assert 3e-7 < pool.sigma < 3e-6
    assert all(res.ok for _, res in pool.results())
    with pytest.raises(ValueError, match="number of terms"):
        tol.compare([1.0], [1.0], [1.0], tol.TERMS)


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
    produce(d, dim=48, rank=32, vocab=301, sentences=3, labels=("1", "5_normalize"), n_steps=1,
            seed=7, log=lambda s: None)
    yield d
    torch.set_num_threads(threads)


def test_numpy_float32_trace_passes_parity(numpy_case):
    from groundhog_port.parity import check_case
    report = check_case(numpy_case)
    rows = {r.quantity: r for r in report.rows}
    assert report.ok, report.table()
    for q in ("repr/c", "pairs/word_probs", "pairs/score", "steps/next_probs", "steps/flat_next_costs",
              "steps/next_states", "steps/fin_costs", "beam/1/fin_costs", "beam/5_normalize/fin_costs"):
        assert rows[q].n > 0 and rows[q].max_abs is not None, q
    # another implementation really differs (it is not the port's own numbers)
    assert rows["repr/c"].direct_max_abs > 0 and rows["steps/next_probs"].direct_max_abs > 0


def test_numpy_trace_catches_a_perturbed_weight(numpy_case):
    import torch
    from groundhog_port.loading import open_experiment
    from groundhog_port.parity import check, find_case
    from groundhog_port.trace import TraceFile
    files = find_case(numpy_case)
    exp = open_experiment(files.state, files.model, data_dir=files.dir)
    with torch.no_grad():
        exp.model.decoder.hid_readout.W[5, 7] += 1e-4
    with TraceFile(files.trace) as tr:
        report = check(exp, tr, groups=("repr", "pairs", "steps"), source=files.source, target=files.target)
    failed = {r.quantity for r in report.failed}
    assert {"steps/next_probs", "steps/flat_next_costs", "pairs/word_probs"} <= failed, report.table()
    assert not {q for q in failed if q.startswith("repr/")}   # the encoder does not use it


# ---------------------------------------------------------------------------------------
# CI never goes green without the recordings
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("ci, expect_rc", [("true", 1), ("", 0)])
def test_ci_fails_without_the_recordings(tmp_path, ci, expect_rc):
    env = dict(os.environ, GROUNDHOG_LEGACY_TRACES=str(tmp_path / "nowhere"), CI=ci)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(Path(__file__)), "-k", "test_printed_quantum"],
                         capture_output=True, text=True, env=env, timeout=300, cwd=REPO)
    assert out.returncode == expect_rc, out.stdout + out.stderr
    if ci:
        assert "recorded traces are required but missing" in out.stdout + out.stderr
