"""The batched beam search returns exactly what the literal one returns.

``legacy.BeamSearch`` / ``legacy.sample`` (the port of sample.py) is the reference:
for every sentence ``BatchedBeamSearch`` must give the same finished hypotheses in
the same order with bitwise-identical float64 costs, or the same ``SearchFailed``
message.  Checked on

* random small RNNsearch / RNNencdec models of many shapes (hypothesis), including
  the retry paths (no hypothesis finished: ignore_unk dropped, beam doubled), the
  ``kth`` crash of numpy.argpartition and "Translation failed" at beam 500;
* the recorded cases: the 40 test sentences of every ``trace.h5``, against the
  literal search (bitwise) and against the recorded ``/beam/{label}`` lists;
* the pieces: ``select_cheapest`` against a NumPy lexsort reference (ties, inf, NaN,
  -0.0), the padded batched encoder against ``model.encode``, ``sum_positions``.
"""

import logging

import h5py
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groundhog_port.legacy.loading import open_experiment
from groundhog_port.model import output
from groundhog_port.model.numerics import ROW_BLOCK, column_blocks, mm, sum_positions
from groundhog_port.search import batched as batched_module
from groundhog_port.search import defaults
from groundhog_port.search.batched import TRANSLATION_FAILED, BatchedBeamSearch
from groundhog_port.search.common import SearchFailed, select_cheapest
from groundhog_port.search.literal import BeamSearch, Hypotheses, sample
from parity_tests.support.cases import CASE_DIRS, CASE_IDS
from parity_tests.support.models import build_model

#: small models: one thread avoids OpenMP overhead (results do not depend on it)
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(autouse=True)
def _quiet():
    """The retry warnings of both searches are expected here."""
    logging.disable(logging.ERROR)
    yield
    logging.disable(logging.NOTSET)


# -- helpers -------------------------------------------------------------------------------
def literal(model, seqs, n, ignore_unk=False, normalize=False, minlens=None):
    """legacy.sample (or legacy search with ``minlens``) on each sentence."""
    bs, out = BeamSearch(model), []
    for i, seq in enumerate(seqs):
        try:
            if minlens is None:
                out.append(sample(bs, seq, n, ignore_unk=ignore_unk, normalize=normalize))
            else:
                out.append(bs.search(seq, n, ignore_unk=ignore_unk, minlen=minlens[i]))
        except SearchFailed as err:
            out.append(err)
    return out


def assert_same(expected, got, context=""):
    """Identical outcomes: hypotheses ==, costs bitwise, or the same failure message."""
    assert len(expected) == len(got), context
    for i, (a, b) in enumerate(zip(expected, got)):
        where = f"{context} sentence {i}"
        if isinstance(a, SearchFailed):
            assert isinstance(b, SearchFailed), f"{where}: literal failed ({a}), batched did not"
            assert str(a) == str(b), where
            continue
        assert isinstance(b, Hypotheses), f"{where}: batched failed ({b}), literal did not"
        assert a.trans == b.trans, where
        assert a.costs.dtype == b.costs.dtype == np.float64, where
        # bitwise, NaN included
        assert np.array_equal(a.costs.view(np.int64), b.costs.view(np.int64)), (
            f"{where}: max |diff| {np.max(np.abs(a.costs - b.costs))}"
        )


@st.composite
def models(draw):
    family = draw(st.sampled_from(["search", "encdec"]))
    deep_out = draw(st.booleans())
    dim = draw(st.integers(1, 6)) * 2 if deep_out else draw(st.integers(1, 11))
    comps = draw(
        st.sampled_from(
            [
                (True, True, False, False),
                (False, False, True, False),
                (False, False, True, True),
                (True, False, False, True),
                (False, True, False, False),
                (True, True, True, True),
            ]
        )
    )
    flags = dict(zip(("forward", "backward", "last_forward", "last_backward"), comps))
    flags.update(
        deep_out=deep_out,
        bigram=draw(st.booleans()),
        bias_code=draw(st.booleans()),
        check_first_word=draw(st.booleans()),
    )
    V_trg = draw(st.sampled_from([6, 9, 12, 17, 30, 61]))
    scales = (
        draw(st.sampled_from([0.5, 2.0])),
        draw(st.sampled_from([1.0, 3.0])),
        draw(st.sampled_from([1.5, 3.0, 6.0])),
        draw(st.sampled_from([1.0, 4.0, 4.0, 300.0])),  # 300: attention overflows (NaN)
        draw(st.sampled_from([1.0, 3.0, 5.0, 5.0, -3.0, -40.0])),
    )
    model = build_model(
        family,
        draw(st.integers(3, 15)),
        V_trg,
        dim,
        draw(st.integers(1, 5)),
        flags,
        draw(st.integers(0, 2**31)),
        scales,
        stable=draw(st.integers(0, 7)) == 0,
    )
    return model


@st.composite
def sentences(draw, model):
    V, eos = model.cfg.n_sym_source, model.cfg.null_sym_source
    lengths = draw(st.lists(st.integers(0, 7), min_size=1, max_size=5))
    return [
        np.array(
            draw(st.lists(st.integers(0, V - 2), min_size=L, max_size=L)) + [eos], dtype=np.int64
        )
        for L in lengths
    ]


# -- random models -------------------------------------------------------------------------
def examples(n):
    """``n`` reproducible (derandomized) examples, no deadline: building random models is slow
    and draws much data."""
    return settings(
        max_examples=n,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@examples(30)
@given(data=st.data())
def test_random_models_sample(data):
    """sample() of the literal search == sample_many, for many shapes and options."""
    model = data.draw(models())
    seqs = data.draw(sentences(model))
    n = data.draw(st.integers(1, 10))
    ignore_unk, normalize = data.draw(st.booleans()), data.draw(st.booleans())
    batch_size = data.draw(st.integers(1, len(seqs) + 1))
    max_rows = data.draw(st.sampled_from([1, 16, 2048]))
    expected = literal(model, seqs, n, ignore_unk, normalize)
    got = BatchedBeamSearch(model, batch_size=batch_size, max_rows=max_rows).sample_many(
        seqs, n, ignore_unk=ignore_unk, normalize=normalize
    )
    assert_same(expected, got, f"n={n} ignore_unk={ignore_unk} normalize={normalize}")


@examples(12)
@given(data=st.data())
def test_random_models_search_minlen(data):
    """search() with explicit minlens (incl. none reachable: every retry up to the crash)."""
    model = data.draw(models())
    seqs = data.draw(sentences(model))
    minlens = [data.draw(st.sampled_from([0, 1, len(s), 3 * len(s)])) for s in seqs]
    n = data.draw(st.integers(1, 6))
    expected = literal(model, seqs, n, minlens=minlens)
    got = BatchedBeamSearch(model, batch_size=data.draw(st.integers(1, 5))).search_many(
        seqs, n, minlens=minlens
    )
    assert_same(expected, got, f"n={n} minlens={minlens}")


SEARCH_FLAGS = dict(
    forward=True,
    backward=True,
    last_forward=False,
    last_backward=False,
    deep_out=True,
    bigram=True,
    bias_code=True,
    check_first_word=True,
)


def test_retry_paths_and_kth_crash():
    """12-word vocabulary, beam 5, end-of-sequence almost impossible: the literal search
    retries (without UNK, then beam 10, 20) and crashes in argpartition; both agree."""
    model = build_model("search", 10, 12, 4, 3, SEARCH_FLAGS, 7, (1.0, 1.0, 6.0, 1.0, -60.0))
    seqs = [np.array([2, 3, 9]), np.array([4, 9]), np.array([5, 6, 7, 8, 2, 9])]
    expected = literal(model, seqs, 5, ignore_unk=True)
    assert all(
        isinstance(r, SearchFailed) and str(r) == "kth(=20) out of bounds (12)" for r in expected
    )
    assert_same(
        expected, BatchedBeamSearch(model, batch_size=2).sample_many(seqs, 5, ignore_unk=True)
    )


def test_translation_failed_at_beam_500():
    """A vocabulary above 500 words and no reachable end: beams 1, 2, ..., 512, then the
    original's "Translation failed" (sample.py then dies in numpy.argmin([]))."""
    model = build_model(
        "encdec",
        6,
        601,
        2,
        2,
        dict(SEARCH_FLAGS, forward=False, backward=False, last_forward=True),
        3,
        (1.0, 1.0, 2.0, 1.0, 0.0),
    )
    seqs = [np.array([1, 5]), np.array([5])]
    minlens = [10, 10]  # > 3 * len(seq): EOS never allowed
    expected = literal(model, seqs, 1, minlens=minlens)
    assert [str(r) for r in expected] == [TRANSLATION_FAILED] * 2
    assert_same(expected, BatchedBeamSearch(model).search_many(seqs, 1, minlens=minlens))


@pytest.mark.parametrize(
    "n, batch_size, max_rows, sizes",
    [
        (10, 8, 2048, [10]),  # a remainder under half a batch joins: one group, not 8 + 2
        (12, 8, 2048, [6, 6]),  # from half a batch on, even groups: not 8 + 4
        (17, 4, 2048, [4, 4, 4, 5]),
        (10, 8, 6, [3, 3, 3, 1]),  # max_rows (a memory cap; beam 2: 3 sentences) cuts greedily
    ],
)
def test_groups_are_even_and_a_small_remainder_joins_them(n, batch_size, max_rows, sizes):
    """``round(n / batch_size)`` groups of even sizes (issue 54: a small last group pays a
    whole step for few rows), sorted by length, each cut at ``max_rows`` hypotheses; the
    hypotheses are the literal search's whatever the grouping."""
    model = build_model("search", 9, 11, 4, 3, SEARCH_FLAGS, 3, (1.0, 1.0, 3.0, 1.0, 0.0))
    rng = np.random.default_rng(5)
    seqs = [np.append(rng.integers(1, 8, size=1 + i % 5), 8) for i in range(n)]
    search = BatchedBeamSearch(model, batch_size=batch_size, max_rows=max_rows)
    jobs = [batched_module._Job(i, 2, False, 1) for i in range(n)]
    groups = list(search._groups(jobs, seqs))
    assert [len(g) for g in groups] == sizes
    order = [j.index for g in groups for j in g]
    assert order == sorted(range(n), key=lambda i: (len(seqs[i]), i))
    assert_same(literal(model, seqs, 2), search.sample_many(seqs, 2))


def test_default_batch_size_gives_small_beams_128_rows():
    """translate's default ``--batch-size``: 32 sentences, or 128 hypotheses' worth under
    beam 4; a size asked for is kept."""
    assert [defaults.batch_size(b) for b in (1, 2, 3, 4, 5, 10)] == [128, 64, 42, 32, 32, 32]
    assert defaults.batch_size(1, 7) == 7


@pytest.mark.parametrize("family", ["search", "encdec"])
def test_large_vocabulary_prefilter(family):
    """Vocabulary above CHUNKED_VOCAB (chunked candidate prefilter, short last chunk)."""
    flags = (
        SEARCH_FLAGS
        if family == "search"
        else dict(SEARCH_FLAGS, forward=False, backward=False, last_forward=True)
    )
    eos_bias = 12.0 if family == "search" else 16.0  # hypotheses end after 2-18 words
    model = build_model(family, 50, 5003, 8, 6, flags, 11, (1.0, 1.5, 2.0, 2.0, eos_bias))
    rng = np.random.default_rng(0)
    seqs = [np.append(rng.integers(0, 49, L), 49) for L in (3, 5, 9, 2)]
    for n in (1, 5, 10):
        bb = BatchedBeamSearch(model, batch_size=3)
        assert_same(literal(model, seqs, n), bb.sample_many(seqs, n), f"n={n}")
        assert bb.stats["fallbacks"] <= bb.stats["steps"] // 4, bb.stats


# -- pieces ----------------------------------------------------------------------------------
def lexsort_reference(flat, n):
    """First n[b] of each row in the order (NaN flag, value, index)."""
    out = np.full((flat.shape[0], max(n, default=0)), -1)
    for b, row in enumerate(flat):
        order = np.lexsort(
            (np.arange(row.size), np.where(np.isnan(row), np.inf, row), np.isnan(row))
        )
        out[b, : min(n[b], row.size)] = order[: n[b]]
    return out


def test_select_cheapest_matches_lexsort():
    rng = np.random.default_rng(12345)
    pool = np.array([0.0, -0.0, 0.5, 1.0, 1.0 + 2**-52, 2.0, np.inf, -np.inf, np.nan])
    for _ in range(1500):
        B, L = rng.integers(1, 6), rng.integers(1, 50)
        flat = np.where(
            rng.random((B, L)) < rng.random(),
            rng.choice(pool, (B, L)),
            np.round(rng.normal(size=(B, L)), int(rng.integers(0, 3))),
        )
        n = rng.integers(0, L + 1, B)
        got = select_cheapest(torch.from_numpy(flat), n.tolist()).numpy()
        np.testing.assert_array_equal(got, lexsort_reference(flat, n))


def test_sum_positions_ignores_padding_and_neighbours():
    g = torch.Generator().manual_seed(0)
    for S in (1, 2, 5, 16, 17, 40):
        x = torch.rand((S, 7), generator=g) * torch.exp(torch.randn((S, 7), generator=g) * 4)
        ref = sum_positions(x)
        padded = torch.zeros((S + 9, 30))
        padded[:S, 11:18] = x
        assert torch.equal(sum_positions(padded)[11:18], ref)
        for j in range(7):
            assert torch.equal(sum_positions(x[:, j : j + 1])[0], ref[j])


@pytest.mark.parametrize("k, V", [(6, 5003), (16, 4097 + 2048), (45, 2 * 2048 + 7), (620, 30001)])
def test_output_blocks_equal_numerics_mm(k, V):
    """Products by the output matrix's column blocks (views of a W that is no parameter:
    MKL's path, which ``numerics.mm`` cuts the same way) and ``numerics.mm`` written into a
    reused buffer of padded rows (the batched search): the same bits as ``numerics.mm`` in a
    new tensor."""
    g = torch.Generator().manual_seed(k)
    W = torch.randn((k, V), generator=g)
    blocks = [(j0, j1, W[:, j0:j1]) for j0, j1 in column_blocks(V)]
    assert [b[0] for b in blocks][0] == 0 and blocks[-1][1] == V
    assert all(j1 - j0 > 16 for j0, j1, _ in blocks)
    for rows in (1, 3, 4, 9, 30):
        h = torch.randn((rows, k), generator=g)
        want = mm(h, W)
        got = torch.cat([mm(h, Wb) for _, _, Wb in blocks], 1)
        assert torch.equal(got, want), (k, V, rows)
        buf = torch.full((rows + 4, V), float("nan"))[: rows + (-rows % ROW_BLOCK)]
        assert torch.equal(mm(h, W, out=buf), want), (k, V, rows)


@pytest.mark.parametrize("threads", [1, 2])
def test_float64_normaliser_in_chunks_equals_one_sum(threads):
    """The decoding softmax normaliser, summed SUM64_ROWS rows at a time through a reused
    float64 buffer (``output.sum64``), is ``e.double().sum(-1)`` as ``softmax_with_bias`` sums it,
    bit for bit, for 1-300 rows of 500-40,000 words (values over 20 orders of magnitude)."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        g = torch.Generator().manual_seed(threads)
        for V in (500, 30001, 40000):
            for R in (1, 2, 33, 47, 48, 100, 300):
                e = torch.rand((R, V), generator=g) * torch.exp(
                    torch.randn((R, V), generator=g) * 5
                )
                assert torch.equal(output.sum64(e), e.double().sum(-1, keepdim=True)), (V, R)
    finally:
        torch.set_num_threads(before)


@examples(20)
@given(data=st.data())
def test_batched_encoder_equals_encode(data):
    model = data.draw(models())
    seqs = data.draw(sentences(model))
    got = BatchedBeamSearch(model).encode(seqs)
    for seq, c in zip(seqs, got):
        assert torch.equal(model.encode(seq), c)


# -- recorded cases --------------------------------------------------------------------------
#: the searches behind the recorded labels: (beam, ignore_unk) -> labels (normalize only
#: divides the costs afterwards)
SEARCHES = {
    (1, False): ("1", "1_normalize"),
    (5, False): ("5", "5_normalize"),
    (10, False): ("10", "10_normalize"),
    (5, True): ("5_ignore_unk",),
}


def recorded(group, i):
    """(trans, costs) of sentence i of /beam/{label}, or the recorded error message."""
    g = group[str(i)]
    if "error" in g.attrs:
        return str(g.attrs["error"]).split(": ", 1)[-1]
    lengths = g["fin_trans_lengths"][()]
    flat = g["fin_trans_flat"][()]
    return [t.tolist() for t in np.split(flat, np.cumsum(lengths)[:-1])], g["fin_costs"][()]


@pytest.mark.parametrize("case_dir", CASE_DIRS, ids=CASE_IDS)
def test_recorded_cases(legacy_root, case_dir):
    """The 40 test sentences: batched == literal (bitwise) and the recorded n-best lists
    (hypotheses and their order; crashes with sample.py's message).  The literal search runs
    on every sentence for beam 5 and on every fourth sentence for the other searches (time);
    the recordings cover all.  The costs are judged against the recordings by parity's
    derived bounds (``beam/*/batched/fin_costs`` in test_legacy_cases.py), not here: a fixed
    relative bound of 1e-5 was fitted, and a beam-1 cost of ``search`` (sentence 22, 1.3e-5
    off the recording, 0.09 of its derived bound) moves past it with MKL's kernel choice."""
    state = next(case_dir.glob("*state.pkl"))
    model_path = next(case_dir.glob("*model.npz"))
    model = open_experiment(state, model_path).model
    with h5py.File(case_dir / "trace.h5", "r") as trace:
        seqs = [trace[f"repr/{i}/seq"][()] for i in range(40)]
        batched = BatchedBeamSearch(model, batch_size=16)
        for (n, ignore_unk), labels in SEARCHES.items():
            got = batched.sample_many(seqs, n, ignore_unk=ignore_unk)
            subset = range(40) if (n, ignore_unk) == (5, False) else range(0, 40, 4)
            expected = literal(model, [seqs[i] for i in subset], n, ignore_unk)
            assert_same(expected, [got[i] for i in subset], f"{case_dir.name} n={n}")
            for label in labels:
                group = trace[f"beam/{label}"]
                assert int(group.attrs["beam_size"]) == n
                assert bool(group.attrs["ignore_unk"]) == ignore_unk
                for i, hyps in enumerate(got):
                    ref = recorded(group, i)
                    where = f"{case_dir.name} {label} sentence {i}"
                    if isinstance(ref, str):
                        assert isinstance(hyps, SearchFailed) and str(hyps) == ref, where
                        continue
                    assert isinstance(hyps, Hypotheses), f"{where}: {hyps}"
                    assert hyps.trans == ref[0], where
