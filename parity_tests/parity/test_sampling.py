"""The random sampler (sample.py without --beam-search): MRG31k3p, the seed, the draws.

The recorded ``/sampler`` groups themselves are checked by ``test_legacy_cases.py``
(group ``sampler``, through ``groundhog_port.harness.check``).  Here:

* the generator: the C kernel's wrapping int32 arithmetic against the recurrence it
  implements (mod M1 / M2 exactly), the jump matrices against repeated single steps, the
  float32 conversion, the stream order of a draw larger than the number of streams, the
  recorded stream states of a shared case;
* the multinomial draw's rule (strict ``>``, double running sum, the word-0 quirk);
* the seed derivation on every shared case, and that a wrong derivation FAILS parity;
* the batched sampler draws what the one-sentence sampler draws (recorded cases and random
  models), bit for bit;
* the command line in both forms.
"""

import io
import re

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groundhog_port.harness.check import check, find_case
from groundhog_port.harness.groups import sampler as sampling_parity
from groundhog_port.harness.trace import TraceFile
from groundhog_port.legacy.loading import open_experiment
from groundhog_port.sampling import mrg
from groundhog_port.sampling.sampler import (
    Sampler,
    SamplingFailed,
    draw_many,
    draw_sentence,
    legacy_order,
    multinomial_from_uniform,
    n_steps_for,
)
from groundhog_port.sampling.seed import derive_mrg_seed
from parity_tests.support.cases import CASE_DIRS, CASE_IDS, FIXTURES
from parity_tests.support.inprocess import journal_header
from parity_tests.support.models import build_model

pytestmark = pytest.mark.usefixtures("one_thread")


def _exp(case):
    f = find_case(case)
    return f, open_experiment(f.state, f.model, data_dir=f.dir)


# -- the generator ---------------------------------------------------------------------
states = st.lists(st.integers(0, mrg.M1 - 1), min_size=3, max_size=3).flatmap(
    lambda a: st.lists(st.integers(0, mrg.M2 - 1), min_size=3, max_size=3).map(lambda b: a + b)
)


@given(st.lists(states, min_size=1, max_size=8))
@settings(max_examples=200, deadline=None)
def test_step_is_the_recurrence_mod_m(rows):
    """The kernel's shifts, masks and wrapping int32 additions compute the MRG31k3p
    recurrence exactly (including states whose partial sums overflow int32)."""
    s = np.array(rows, dtype=np.int64)
    new, d = mrg.next_states(s)
    x11, x12, x13, x21, x22, x23 = s.T.tolist()
    for r in range(len(s)):
        want1 = ((1 << 22) * x12[r] + 129 * x13[r]) % mrg.M1
        want2 = ((1 << 15) * x21[r] + 32769 * x23[r]) % mrg.M2
        assert new[r].tolist() == [want1, x11[r], x12[r], want2, x21[r], x22[r]]
        diff = want1 - want2
        assert d[r] == (diff + mrg.M1 if want1 <= want2 else diff)


def test_overflowing_partial_sums():
    """States at the top of the range: the C sums overflow int32 and the ``y < 0`` tests
    repair them (this is what the int64 emulation must wrap like C)."""
    s = np.array(
        [[mrg.M1 - 1] * 3 + [mrg.M2 - 1] * 3, [mrg.M1 - 1, 1, mrg.M1 - 1, 1, mrg.M2 - 1, 2]]
    )
    new, _ = mrg.next_states(s)
    assert new[0, 0] == ((1 << 22) * (mrg.M1 - 1) + 129 * (mrg.M1 - 1)) % mrg.M1
    assert new[1, 3] == ((1 << 15) * 1 + 32769 * 2) % mrg.M2


@pytest.mark.parametrize("k", [1, 2, 3, 17, 1000])
def test_jump_is_k_single_steps(k):
    s = mrg.substream_states([12345] * 6, 4).astype(np.int64)
    stepped = s
    for _ in range(k):
        stepped, _ = mrg.next_states(stepped)
    jump = (mrg.matpow_mod(mrg.A1, k, mrg.M1), mrg.matpow_mod(mrg.A2, k, mrg.M2))
    assert np.array_equal(mrg.apply_jump(jump, s), stepped)


def test_uniform_float32_conversion():
    d = np.array([1, 2, mrg.M1 - 1, mrg.M1], dtype=np.int64)
    u = mrg.to_float32(d)
    assert u.dtype == np.float32
    assert u[0] == np.float32(4.6566126e-10) and (u > 0).all() and (u < 1).all()
    # float32(M1) = 2^31: times the float32 just below 2^-31 it is 1 - 2^-24, never 1.0
    assert u[-1] == np.float32(1 - 2.0**-24)


def test_draw_larger_than_the_streams_cycles_them_in_order():
    rows = mrg.substream_states([7] * 6, 3)
    m = mrg.StateMatrix(rows)
    u = m.uniform(7)
    s = rows.astype(np.int64)
    want = []
    for i in range(7):
        new, d = mrg.next_states(s[i % 3 : i % 3 + 1])
        s[i % 3] = new[0]
        want.append(mrg.to_float32(d)[0])
    assert np.array_equal(u, np.array(want, dtype=np.float32))
    assert np.array_equal(m.rows, s.astype(np.int32))


def test_zero_seed_is_refused_like_theano():
    with pytest.raises(ValueError, match="should not be 0"):
        mrg.MRGRandomStreams(0)


@pytest.mark.skipif(not CASE_DIRS, reason="recorded traces not found (set GROUNDHOG_LEGACY_TRACES)")
def test_recorded_stream_states_of_a_case():
    case = (
        next(d for d in CASE_DIRS if d.name == "search")
        if any(d.name == "search" for d in CASE_DIRS)
        else CASE_DIRS[0]
    )
    with h5py.File(case / "trace.h5", "r") as f:
        g = f["sampler"]
        streams = mrg.MRGRandomStreams(int(g.attrs["mrg_seed"]))
        first = streams.new_state_matrix()
        assert np.array_equal(first.rows, g["rstate_shared_before_first_call/00"][()])
        streams.new_state_matrix()
        # build() creates two random ops on the softmax layer's stream
        assert np.array_equal(streams.rstate, g["mrg_base_rstate_after_build"][()])


# -- the multinomial draw -------------------------------------------------------------
def test_multinomial_rule():
    p = np.array([[0.25, 0.25, 0.5]] * 4, dtype=np.float32)
    u = np.array([0.1, 0.25, 0.5, 0.99], dtype=np.float32)
    # first running sum strictly greater than u (multinomial.py C code: cummul > u)
    assert multinomial_from_uniform(p, u).tolist() == [0, 1, 2, 2]


def test_multinomial_quirk_row_sum_below_u_gives_word_0():
    p = np.array([[0.0, 0.25, 0.25, 0.25]], dtype=np.float32)
    assert multinomial_from_uniform(p, np.array([0.9], np.float32)).tolist() == [0]


def test_multinomial_sums_in_double():
    # 0.5 + 2^-26 is 0.5 in float32 but not in double: the double sum passes u = 0.5 at word 1
    p = np.array([[0.5, 2.0**-26, 0.5]], dtype=np.float32)
    assert np.float32(p[0, 0]) + np.float32(p[0, 1]) == np.float32(0.5)
    assert multinomial_from_uniform(p, np.array([0.5], np.float32)).tolist() == [1]


# -- the seed -------------------------------------------------------------------------
@pytest.mark.skipif(not CASE_DIRS, reason="recorded traces not found (set GROUNDHOG_LEGACY_TRACES)")
@pytest.mark.parametrize("case", CASE_DIRS, ids=CASE_IDS)
def test_seed_derivation_matches_recording(case):
    f, exp = _exp(case)
    with h5py.File(f.trace, "r") as h:
        if "sampler" not in h:
            pytest.skip(f"{case.name}: no /sampler recorded")
        assert derive_mrg_seed(exp.state, exp.cfg) == int(h["sampler"].attrs["mrg_seed"])


@pytest.mark.skipif(not CASE_DIRS, reason="recorded traces not found (set GROUNDHOG_LEGACY_TRACES)")
def test_wrong_derivation_fails_parity(monkeypatch):
    """A derivation off by one draw may not sample silently: the seed row and the draws fail."""
    case = next((d for d in CASE_DIRS if d.name == "encdec_variant"), CASE_DIRS[0])
    f, exp = _exp(case)
    right = derive_mrg_seed(exp.state, exp.cfg)

    def off_by_one_draw(state, cfg, path=None):
        rng = np.random.RandomState(state["seed"])
        from groundhog_port.sampling.seed import draws_before_softmax

        draws_before_softmax(rng, cfg)
        rng.randint(int(1e6))  # one layer too many
        return int(rng.randint(int(1e6)))

    monkeypatch.setattr(sampling_parity, "derive_mrg_seed", off_by_one_draw)
    assert off_by_one_draw(exp.state, exp.cfg) != right
    with TraceFile(f.trace) as tr:
        report = check(exp, tr, groups=("sampler",), source=f.source)
    failed = {r.quantity for r in report.failed}
    assert {"sampler/mrg_seed", "sampler/sample_ids", "sampler/rstate_before_first_call"} <= failed


def test_seed_needs_an_integer_state_seed():
    exp = open_experiment(
        FIXTURES / "search" / "search_state.pkl", FIXTURES / "search" / "search_model.npz"
    )
    state = dict(exp.state, seed="1234")
    with pytest.raises(Exception, match="seed"):
        derive_mrg_seed(state, exp.cfg)


# -- batched == one at a time ----------------------------------------------------------
def _same(a, b):
    assert np.array_equal(a.ids, b.ids)
    assert np.array_equal(a.neg_log_probs.view(np.int32), b.neg_log_probs.view(np.int32))


@pytest.mark.skipif(not CASE_DIRS, reason="recorded traces not found (set GROUNDHOG_LEGACY_TRACES)")
@pytest.mark.parametrize(
    "case", [d for d in CASE_DIRS if d.name in ("search", "encdec_variant")], ids=lambda p: p.name
)
def test_batched_sampler_draws_what_the_literal_one_draws(case):
    f, exp = _exp(case)
    lines = f.source.read_text(encoding="utf-8").splitlines()[:12] + [""]
    seqs = [exp.parse_source(l)[0] for l in lines]
    one_sampler = Sampler(exp)
    one = one_sampler.sample_many(seqs, 3, 0.6, batch_size=1)
    many_sampler = Sampler(exp)
    many = many_sampler.sample_many(seqs, 3, 0.6, batch_size=5)
    for a, b in zip(one, many):
        if isinstance(a, SamplingFailed):  # the empty line: no draw, same message
            assert isinstance(b, SamplingFailed) and str(a) == str(b)
            continue
        _same(a.draw, b.draw)
        assert a.sentences == b.sentences and [str(c) for c in a.costs] == [str(c) for c in b.costs]
    # both continued the stream equally (and further than a fresh stream)
    assert np.array_equal(one_sampler.stream.rows, many_sampler.stream.rows)
    assert not np.array_equal(Sampler(exp).stream.rows, many_sampler.stream.rows)


@given(
    st.integers(0, 2**31),
    st.sampled_from(["search", "encdec"]),
    st.integers(1, 4),
    st.lists(st.integers(1, 6), min_size=1, max_size=4),
    st.sampled_from([1.0, 0.3, 2.5]),
)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_batched_equals_literal_on_random_models(seed, family, n, lengths, alpha):
    model = build_model(family, 9, 17, 6, 3, {}, seed, (1.0, 3.0, 6.0, 4.0, 1.0))
    rng = np.random.RandomState(seed % 1000)
    seqs = [np.append(rng.randint(0, 8, size=L), 8) for L in lengths]
    stream = mrg.MRGRandomStreams(1 + seed % 1000).new_state_matrix(5)
    unis = [[stream.uniform(n) for _ in range(n_steps_for(s))] for s in seqs]
    T = float(np.float32(alpha))
    literal = [draw_sentence(model, s, n, n_steps_for(s), T, u) for s, u in zip(seqs, unis)]
    batched = draw_many(model, seqs, n, [n_steps_for(s) for s in seqs], T, unis, batch_size=3)
    for a, b in zip(literal, batched):
        _same(a, b)


# -- the command line (in-process: no interpreter start-up per case) --------------------
def cli(capsys, *args, stdin=None, monkeypatch=None):
    from groundhog_port.cli.main import main

    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    capsys.readouterr()
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


F = FIXTURES / "search"
MODEL_ARGS = ("--state", F / "search_state.pkl", F / "search_model.npz")


def _sampling(src, trans, n_samples, *options):
    """``translate`` drawing ``n_samples`` translations of each line of ``src`` into
    ``trans`` with the bundled model."""
    return (
        "translate",
        "--source",
        src,
        "--trans",
        trans,
        "--n-samples",
        n_samples,
        *options,
        *MODEL_ARGS,
    )


def _source(tmp_path, n, extra=""):
    src = tmp_path / "src.txt"
    src.write_text(
        "\n".join(F.joinpath("test.en").read_text(encoding="utf-8").splitlines()[:n])
        + "\n"
        + extra,
        encoding="utf-8",
    )
    return src


def test_batch_form(tmp_path, capsys, caplog):
    src = _source(tmp_path, 4, "\n")  # and an empty last line
    outs = []
    for bs in (1, 8):
        out = tmp_path / f"out{bs}.txt"
        caplog.clear()
        rc, _, _ = cli(capsys, *_sampling(src, out, 3, "--alpha", 0.8, "--batch-size", bs))
        # the empty line: sample_fn's scan of 0 steps fails in the original
        assert rc == 3
        assert "0 iteration" in caplog.text
        outs.append(out.read_text(encoding="utf-8"))
    assert outs[0] == outs[1]
    lines = outs[0].splitlines()
    assert len(lines) == 4 * 3
    assert [l.split(" ||| ")[0] for l in lines] == [str(i) for i in range(4) for _ in range(3)]
    assert all(float(l.rsplit(" ||| ", 1)[1]) < 0 for l in lines)  # log-probabilities


def test_batch_form_seed_changes_the_draw_and_resume_continues_the_stream(tmp_path, capsys):
    src = _source(tmp_path, 5)
    full, other = tmp_path / "full.txt", tmp_path / "other.txt"
    assert cli(capsys, *_sampling(src, full, 4))[0] == 0
    assert cli(capsys, *_sampling(src, other, 4, "--seed", 99))[0] == 0
    assert full.read_text() != other.read_text()
    # an interrupted run: 2 source lines and half of the third were written
    resumed = tmp_path / "resumed.txt"
    done = full.read_text(encoding="utf-8").splitlines()[:10]
    (tmp_path / "resumed.txt.partial").write_text("\n".join(done) + "\n", encoding="utf-8")
    (tmp_path / "resumed.txt.partial.journal").write_text(
        journal_header(*_sampling(src, resumed, 4))
        + "\n".join(l.split(" ||| ")[0] for l in done)
        + "\n",
        encoding="utf-8",
    )
    rc, _, _ = cli(capsys, *_sampling(src, resumed, 4, "--resume"))
    assert rc == 0
    assert resumed.read_text() == full.read_text()


def test_interactive_form(capsys, monkeypatch):
    rc, out, _ = cli(
        capsys,
        "translate",
        *MODEL_ARGS,
        stdin="the cat is red .\n2\n1.0\nhello\nx\n",
        monkeypatch=monkeypatch,
    )
    assert rc == 0
    assert out.count("Input Sequence: ") == 3
    assert "How many samples? Inverse Temperature? Parsed Input: the cat is red . <eos>" in out
    assert "Exception while parsing your input:" in out  # 'x' is not a number
    body = out.split("Parsed Input: the cat is red . <eos>\n", 1)[1].split("\n\n", 1)[0]
    entries = re.split(r"\n(?=\d+: )", body)
    assert sorted(int(e.split(":", 1)[0]) for e in entries) == [0, 1]


@pytest.mark.skipif(not CASE_DIRS, reason="recorded traces not found (set GROUNDHOG_LEGACY_TRACES)")
def test_interactive_form_reproduces_the_recorded_first_call(capsys, monkeypatch):
    case = next((d for d in CASE_DIRS if d.name == "search"), None)
    if case is None:
        pytest.skip("the shared 'search' case is absent")
    with TraceFile(case / "trace.h5") as tr:
        call = tr.sampler()["calls"][0]
    line = (case / "test.en").read_text(encoding="utf-8").splitlines()[call["attrs"]["test_index"]]
    f = find_case(case)
    rc, out, _ = cli(
        capsys,
        "translate",
        "--state",
        f.state,
        "--data-dir",
        f.dir,
        f.model,
        stdin=f"{line}\n5\n1.0\n",
        monkeypatch=monkeypatch,
    )
    assert rc == 0
    body = out.split("Parsed Input: ", 1)[1].split("\n", 1)[1].split("\n\n", 1)[0]
    # one entry per sample; numpy may wrap the probability array over several lines
    entries = re.split(r"\n(?=\d+: )", body)
    got = {int(e.split(":", 1)[0]): e.rsplit("] ", 1)[1] for e in entries}
    assert [got[i] for i in range(5)] == call["sentences"]


@pytest.mark.parametrize(
    "args,problem",
    [
        (("--source", "x.txt", "--trans", "y.txt"), "--n-samples"),
        (("--beam-size", 5), "--beam-size only applies with --beam-search"),
        (("--seed", 0), "--seed must be in"),
        (("--beam-search", "--beam-size", 2, "--n-samples", 3), "--n-samples only applies"),
        (("--n-samples", 3), "batch form"),
    ],
)
def test_usage_errors(args, problem, capsys):
    rc, _, err = cli(capsys, "translate", *args, *MODEL_ARGS)
    assert rc == 2
    assert problem in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "mode", [(), ("--beam-search", "--beam-size", "2")], ids=["sampler", "beam search"]
)
def test_interactive_input_is_parsed_unstripped(capsys, monkeypatch, mode):
    """sample.py:285-290 passed ``raw_input``'s line to ``parse_input`` as it was: Python 2's
    byte ``split()`` cuts at ASCII whitespace only, so a trailing U+00A0 stays in the last word
    (here an unknown one).  A Python 3 ``strip()`` first would drop it and parse a known word."""
    line = "the cat is red .\u00a0"
    exp = open_experiment(F / "search_state.pkl", F / "search_model.npz", "", data_dir=F)
    want, stripped = exp.parse_source(line)[1], exp.parse_source(line.strip())[1]
    assert want != stripped  # the case tells the two apart
    rc, out, _ = cli(
        capsys,
        "translate",
        *mode,
        *MODEL_ARGS,
        stdin=f"{line}\n" + ("" if mode else "1\n1.0\n"),
        monkeypatch=monkeypatch,
    )
    assert rc == 0
    assert f"Parsed Input: {want}\n" in out


@pytest.mark.parametrize("oov", ["<unk>", "##"])
@pytest.mark.parametrize(
    "mode",
    [("--n-samples", "2"), ("--beam-search", "--beam-size", "2")],
    ids=["sampler", "beam search"],
)
def test_verbose_parsed_input_shows_the_states_oov(capsys, monkeypatch, tmp_path, oov, mode):
    """``parse_input`` (encdec.py:1510-1514) prints the source's unknown words as
    ``state['oov']`` and the end of the sentence as ``<eos>``: ``--verbose``'s Parsed Input
    under ``--changes "oov=..."``."""
    src = tmp_path / "src.en"
    src.write_text("the zzqxj cat\n", encoding="utf-8")
    rc, out, _ = cli(
        capsys,
        "translate",
        *mode,
        *MODEL_ARGS,
        "--changes",
        f"oov={oov!r}",
        "--source",
        src,
        "--trans",
        tmp_path / "out.txt",
        "--verbose",
        monkeypatch=monkeypatch,
    )
    assert rc == 0
    assert f"Parsed Input: the {oov} cat <eos>\n" in out


def test_verbose_listing_orders_ties_as_numpy_1_23(capsys, monkeypatch):
    """sample.py:183 lists the samples in ``numpy.argsort(costs)`` order.  numpy sorts up to 16
    items by insertion sort (stable) and more by introsort, whose Hoare partition reorders equal
    costs: 40 samples at inverse temperature 10 give more than 16 identical ones, listed in
    numpy 1.23's order (``sampler.legacy_order``; ``legacy_argsort`` is pinned to numpy 1.23's
    own results in ``test_data.py``), which is not the stable order."""
    rc, out, _ = cli(
        capsys,
        "translate",
        *MODEL_ARGS,
        "--batch-size",
        "1",
        stdin="the cat .\n40\n10.0\n",
        monkeypatch=monkeypatch,
    )
    assert rc == 0
    listing = out.split("Parsed Input: ", 1)[1].split("\n")[1:41]
    printed = [(int(l.split(":", 1)[0]), float(l.split(" ", 2)[1])) for l in listing]
    costs = [0.0] * 40
    for i, minus_cost in printed:
        costs[i] = -minus_cost
    assert max(costs.count(c) for c in costs) > 16  # the case reaches introsort's ties
    numpy_1_23 = legacy_order(costs)
    assert numpy_1_23 != sorted(range(40), key=lambda i: costs[i])  # not the stable order
    assert [i for i, _ in printed] == numpy_1_23
