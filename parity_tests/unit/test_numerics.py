"""numerics: sum_positions adds in exactly the position-by-position order; the products
give a row the same bits whatever the rows beside it."""

import numpy as np
import pytest
import torch

from groundhog_port.model import attention, packed
from groundhog_port.model.numerics import _sum_positions_loop, mm, sum_positions


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_positions_equals_the_loop_bit_for_bit(dtype):
    rng = np.random.default_rng(7)
    shapes = [
        (2, 1),
        (3, 1),
        (1000, 1),
        (2, 2),
        (9, 3),
        (130, 4),
        (257, 17),
        (600, 80),
        (50, 320),
        (1, 5),
    ]
    shapes += [(int(rng.integers(2, 700)), int(rng.integers(1, 90))) for _ in range(60)]
    for S, n in shapes:
        # magnitudes spread over 16 orders: any other summation order changes the bits
        x = (rng.standard_normal((S, n)) * np.exp(rng.uniform(-18, 18, (S, n)))).astype(dtype)
        for t in (
            torch.from_numpy(x),
            torch.from_numpy(np.asfortranarray(x)),
            torch.from_numpy(x.T.copy()).t(),
        ):
            got, want = sum_positions(t), _sum_positions_loop(t)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert torch.equal(got, want), (S, n)


def test_pairwise_summation_would_differ():
    """The test above can fail: numpy's pairwise sum of one contiguous column is another order."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((1000, 1)) * np.exp(rng.uniform(-18, 18, (1000, 1)))).astype(
        np.float32
    )
    assert not np.array_equal(
        np.add.reduce(x[:, 0])[None], _sum_positions_loop(torch.from_numpy(x)).numpy()
    )


def test_gradients_keep_the_loop():
    x = torch.rand(5, 3, requires_grad=True)
    sum_positions(x).sum().backward()
    assert torch.equal(x.grad, torch.ones(5, 3))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("k", [1000, 2000])
def test_deep_products_are_row_count_invariant(threads, k):
    """A row of ``numerics.mm`` has the same bits in a product of 4 rows as in one of 512,
    for the inner dimensions of RNNsearch-50 (dim 1000, annotations 2000) and up to the row
    counts of the batched search (without the ROW_CHUNK cut, MKL gives rows of products of
    128-256 rows and more other bits on this project's CPU)."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        g = torch.Generator().manual_seed(k)
        x = torch.randn(512, k, generator=g)
        w = torch.randn(k, 256, generator=g) / k**0.5
        full = mm(x, w)
        for rows in (4, 6, 64, 128, 200, 256):
            assert torch.equal(mm(x[:rows], w), full[:rows]), rows
    finally:
        torch.set_num_threads(before)


def test_energy_scores_are_row_count_invariant():
    """The attention's ``tanh(.) @ D`` of a row does not depend on the rows beside it (a
    matrix-vector ``torch.mm`` did, from 20 rows on with 2 threads)."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        g = torch.Generator().manual_seed(0)
        t = torch.randn(600, 1000, generator=g)
        D = torch.randn(1000, 1, generator=g)
        full = attention.energy_scores(t.clone(), D)
        for rows in (1, 4, 36, 100, 300):
            assert torch.equal(attention.energy_scores(t[:rows].clone(), D), full[:rows]), rows
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("threads", [1, 2])
def test_tasked_products_are_row_count_invariant(threads):
    """Without gradients ``numerics.mm`` runs single-threaded MKL calls (row tiles of
    ROW_TILE rows when k > DEEP; at 2 threads, column halves too, on the pool): a row has
    the same bits in a product of 1-1000 rows, for the shapes of the search's products
    (k = 620, 1000, 2000; 1000 columns, and 30,001 in column blocks)."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        g = torch.Generator().manual_seed(threads)
        with torch.inference_mode():
            for k, n, R in (
                (1000, 1000, 1000),
                (2000, 1000, 1000),
                (620, 1000, 300),
                (620, 30001, 300),
            ):
                x = torch.randn(R, k, generator=g)
                w = torch.randn(k, n, generator=g) / k**0.5
                full = mm(x, w)
                for rows in (1, 3, 4, 6, 12, 100, 130, 260):
                    assert torch.equal(mm(x[:rows], w), full[:rows]), (k, n, rows)
    finally:
        torch.set_num_threads(before)


def test_parameters_with_and_without_gradients():
    """Scoring multiplies under ``no_grad`` by parameters that require gradients (training's
    validation): the packed product (:mod:`~groundhog_port.model.packed`), on any thread
    count the same bits; with gradients the product is torch's, recorded for autograd, and
    the two agree to float32's rounding of a sum of k products (each within
    ``k u sum_i |x_i w_i|`` of the exact one, ``u = 2^-24``).  A tensor that is no
    parameter but requires a gradient goes through the pool of single-threaded MKL calls,
    whose threads (their grad mode is their own) must not refuse ``out=``: the same bits as
    the product autograd records."""
    before = torch.get_num_threads()
    try:
        g = torch.Generator().manual_seed(5)
        k = 1000
        w = torch.nn.Parameter(torch.randn(k, k, generator=g) / k**0.5)
        x = torch.randn(300, k, generator=g)
        torch.set_num_threads(1)
        with torch.no_grad():
            one = mm(x, w)
        torch.set_num_threads(2)
        with torch.no_grad():
            fast = mm(x, w)
            plain = w.detach().clone().requires_grad_()
            pooled = mm(x, plain)
        assert torch.equal(fast, one)
        slow = mm(x, w)
        slow.sum().backward()
        bound = 2 * k * 2.0**-24 * (x.abs() @ w.detach().abs())
        assert ((fast - slow.detach()).abs() <= bound).all()
        assert not torch.equal(fast, slow.detach())  # two kernels: the bound is what holds
        assert torch.equal(pooled, mm(x, plain).detach())
        # d(sum)/dw = column sums of x, whatever order autograd adds them in
        assert torch.allclose(w.grad, x.sum(0)[:, None].expand(k, k), atol=1e-3)
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("threads", [1, 2])
def test_packed_products_are_row_count_invariant(threads):
    """A product by a parameter (no gradient: search, scoring) is MLAS's on the packed
    weight: a row has the same bits in a product of 1-1000 rows, and on 1 or 2 threads, for
    the shapes of RNNsearch-50's products (k = 500, 620, 1000, 2000; 620 x 30,001 the output
    layer) and narrow ones (the widths MKL needed widened, 5-11 columns)."""
    before = torch.get_num_threads()
    g = torch.Generator().manual_seed(threads)
    try:
        for k, n, R in (
            (1000, 1000, 1000),
            (2000, 1000, 600),
            (620, 1000, 300),
            (500, 620, 300),
            (620, 30001, 260),
            (1000, 7, 300),
            (64, 11, 300),
        ):
            x = torch.randn(R, k, generator=g)
            w = torch.nn.Parameter(torch.randn(k, n, generator=g) / k**0.5, False)
            with torch.inference_mode():
                torch.set_num_threads(1)
                full = mm(x, w)
                torch.set_num_threads(threads)
                for rows in (1, 3, 4, 6, 12, 100, 130, 260, R):
                    assert torch.equal(mm(x[:rows], w), full[:rows]), (k, n, rows)
                assert torch.equal(mm(x, w), full), (k, n, threads)
    finally:
        torch.set_num_threads(before)


def test_packed_weight_follows_its_parameter():
    """The packed form is remade when its parameter changes: in place (training's updates,
    the version counter) or given new memory (``param.data = ...``, how loading fills a
    model); and it goes when its parameter goes."""
    g = torch.Generator().manual_seed(7)
    w = torch.nn.Parameter(torch.randn(64, 48, generator=g), requires_grad=False)
    x = torch.randn(8, 64, generator=g)
    with torch.no_grad():
        before = mm(x, w)
        w.mul_(2)
        assert torch.allclose(mm(x, w), 2 * before, rtol=0, atol=0)
        w.data = torch.randn(64, 48, generator=g)
        assert torch.allclose(mm(x, w), x.double().mm(w.double()).float(), atol=1e-4)
    key = id(w)
    assert key in packed._PACKED
    del w
    assert key not in packed._PACKED


def test_the_matmul_model_is_what_onnx_writes():
    """:func:`packed.matmul_model` writes the ModelProto onnx's helpers build (without
    importing onnx, a second): the same message, field for field."""
    onnx = pytest.importorskip("onnx", reason="onnx is in the test and export extras")
    from onnx import TensorProto, helper

    k, n = 620, 30001
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])],
        "packed_matmul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["M", k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", n])],
    )
    weight = graph.initializer.add()
    weight.name, weight.data_type = "W", TensorProto.FLOAT
    weight.dims.extend([k, n])
    weight.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "W"), ("offset", "0"), ("length", str(4 * k * n))):
        entry = weight.external_data.add()
        entry.key, entry.value = key, value
    want = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    got = onnx.load_model_from_string(packed.matmul_model(k, n))
    assert got == want


def test_weights_packed_while_the_model_is_read(legacy_root):
    """``open_experiment(pack=True)`` packs every product's weight while the file is read
    (:class:`packed.PackingAhead`): each parameter then has its form for this process's
    threads, made from its own memory (not remade on use), and every product by it has the
    bits of a form packed on first use.  The embedding tables (looked up) are not packed."""
    from groundhog_port.legacy.loading import open_experiment
    from groundhog_port.model.encdec import looked_up

    case = legacy_root / "search"
    state, model_path = next(case.glob("*state.pkl")), next(case.glob("*model.npz"))
    ahead = open_experiment(state, model_path, pack=True).model
    lazy = open_experiment(state, model_path).model
    threads = torch.get_num_threads()
    g = torch.Generator().manual_seed(3)
    products = 0
    for (name, w), (_, v) in zip(ahead.named_parameters(), lazy.named_parameters()):
        entry = packed._PACKED.get(id(w))
        if w.dim() != 2 or w.shape[1] == 1 or looked_up(name):
            assert entry is None, name
            continue
        assert entry is not None and threads in entry[1], f"{name} was not packed ahead"
        form = entry[1][threads]
        assert form.source == packed._source(w)
        assert id(v) not in packed._PACKED  # the other model packs on first use
        x = torch.randn(5, w.shape[0], generator=g)
        with torch.no_grad():
            assert torch.equal(packed.product(x, w), packed.product(x, v)), name
        assert packed.packed(w, threads) is form  # used as made, not remade
        products += 1
    assert products >= 10


def test_packing_ahead_adopts_only_a_parameter_on_the_arrays_memory():
    """A parameter holding a copy of a submitted array (a converted old vintage, a dtype
    change) gets no form from it: it would be packed from memory it does not read."""
    g = torch.Generator().manual_seed(5)
    a = torch.randn(32, 24, generator=g).numpy()
    on_it = torch.nn.Parameter(torch.from_numpy(a), requires_grad=False)
    copied = torch.nn.Parameter(torch.from_numpy(a.copy()), requires_grad=False)
    other = torch.randn(32, 24, generator=g).numpy()
    with packed.PackingAhead(1) as ahead:
        ahead.submit(a)
        ahead.submit(other)
        ahead.adopt([copied, on_it])
    assert id(copied) not in packed._PACKED
    assert packed._PACKED[id(on_it)][1][1].source == packed._source(on_it)


@pytest.mark.parametrize("case", ["search", "encdec"])
def test_prepare_packs_every_weight_the_search_multiplies_by(legacy_root, case):
    """``decoding.prepare`` (what the runner calls before forking workers, so that they
    share the packed weights) packs every weight a whole search then multiplies by: the
    search makes no packed form of its own."""
    from groundhog_port.legacy.loading import open_experiment
    from groundhog_port.model import decoding
    from groundhog_port.search.batched import BatchedBeamSearch

    case_dir = legacy_root / case
    state, model_path = next(case_dir.glob("*state.pkl")), next(case_dir.glob("*model.npz"))
    exp = open_experiment(state, model_path)
    mine = {id(p) for p in exp.model.parameters()}

    def forms() -> dict[int, set[int]]:
        return {k: set(f) for k, (_, f) in packed._PACKED.items() if k in mine}

    decoding.prepare(exp.model)
    made = forms()
    assert made
    seqs = [exp.parse_source("the european union is a good thing .")[0]]
    BatchedBeamSearch(exp.model).search_many(seqs, 3)
    assert forms() == made
