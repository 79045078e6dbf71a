"""A new model's weights, drawn as GroundHog drew them (``train.py`` without ``reload``).

``train.py:82-84`` makes ONE ``numpy.random.RandomState(state['seed'])``, builds
``RNNEncoderDecoder(state, rng).build()`` and calls ``create_lm_model()``; every layer
constructor draws from that generator, in the order the graph is built
(encdec.py:1299-1349): the forward encoder, the backward encoder (always built, even when
its annotations are not used), then the decoder.  :func:`build_plan` lists those layers,
and :func:`draw` replays their draws call for call:

* a ``MultiLayer`` / ``RecurrentLayer`` / ``SoftmaxLayer`` / ``RecursiveConvolutionalLayer``
  first draws ``rng.randint(int(1e6))``, the seed of its Theano MRG stream
  (ff_layers.py:162, rec_layers.py:973, cost_layers.py:131, rconv_layers.py:140);
  ``RecurrentLayerWithSearch`` does not (encdec.py:236-243);
* ``sample_weights_classic`` (utils.py:107-120): a float32 zero matrix; for each row,
  ``perm = rng.permutation(sizeY)`` then ``rng.normal(0, scale, (sparsity,))`` rounded to
  float32 at ``perm[:sparsity]``; ``sparsity`` < 0 means ``sizeY``, and ``MultiLayer``
  turns its default -1 into its width (ff_layers.py:144);
* ``sample_weights_orth`` (utils.py:122-141): the same draws, then ``u * scale`` of
  ``numpy.linalg.svd`` of that float32 matrix.  numpy's ``linalg`` computes a float32
  input in double and rounds the result to float32 (``_commonType``), so the recorded ``u``
  is ``fl32(U)`` of a double-precision LAPACK ``gesdd``: another LAPACK build can move an
  element by one float32 spacing (plus ``n * eps64 * s_1 / gap`` of the double SVD), and a
  LAPACK with another sign convention could flip a column -- the only place where the draw
  is not numpy-deterministic (:mod:`parity_tests.support.train_fidelity` bounds it);
* ``RecurrentLayerWithSearch``'s ``A``/``B`` use ``sample_weights_classic`` with the
  hard-coded scale ``1e-3`` whatever the state says (encdec.py:269-284), ``D`` is zeros;
* the grConv gaters ``GW``/``GU`` are ``float32(0.01 * rng.randn(dim, 3))``
  (rconv_layers.py:170-177);
* biases are ``init_bias``: a constant (``state['bias']`` for the decoder initializer and
  the grConv layer, 0 elsewhere), no draw;
* ``create_lm_model`` draws ``rng.randint(1000)`` (basic.py:510, ``Model.__init__``).

Layers whose parameters are never saved (``*_repr_contrib_0``, ``back_enc_approx_embdr``,
the backward encoder of RNNencdec) draw all the same; their values are dropped.
Verified call for call against GroundHog's recorded draws (``init_draws/rng_draws.jsonl.gz``)
by the test suite.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch

from ..errors import LegacyInputError
from ..legacy.checkpoint import legacy_param_table
from ..model.config import GRCONV, ModelConfig, prefix_lookup
from ..model.encdec import RNNEncoderDecoder

#: the initialisers a new model may name (others: the original asserts, e.g. ``sample_weights_orth``
#: on a non-square matrix, or was never used by a prototype)
SUPPORTED = {
    "weight_init_fn": ("sample_weights_classic",),
    "rec_weight_init_fn": ("sample_weights_orth", "sample_weights_classic"),
}


@dataclass(frozen=True)
class Matrix:
    """One drawn weight matrix: GroundHog's name, ``(sizeX, sizeY)``, its initialiser
    (``sample_weights_classic``, ``sample_weights_orth``, ``randn`` for the grConv gaters,
    ``zeros``), ``scale`` and ``sparsity`` (< 0: dense)."""

    name: str
    shape: tuple[int, int]
    fn: str
    scale: float
    sparsity: int = -1


@dataclass(frozen=True)
class Bias:
    """``init_bias``: a constant vector, no draw."""

    name: str
    size: int
    value: float


@dataclass(frozen=True)
class Layer:
    """One layer constructor: GroundHog's class, its name, whether it seeds an MRG stream
    (``randint(1e6)`` first) and its tensors in drawing order."""

    kind: str
    name: str
    mrg_seed: bool
    tensors: tuple[Matrix | Bias, ...]


def _multilayer(
    name: str, n_in: int, n_hids: int, state: dict[str, Any], bias: float = 0.0
) -> Layer:
    """``MultiLayer`` with one level (ff_layers.py:32-220): ``W_0`` then ``b_0``."""
    n_in, n_hids = int(n_in), int(n_hids)
    return Layer(
        "MultiLayer",
        name,
        True,
        (
            Matrix(
                f"W_0_{name}",
                (n_in, n_hids),
                state["weight_init_fn"],
                state["weight_scale"],
                n_hids,
            ),
            Bias(f"b_0_{name}", n_hids, bias),
        ),
    )


def _embedders(prefix: str, state: dict[str, Any]) -> list[Layer]:
    """``_create_embedding_layers`` (encdec.py:568-617)."""
    rank, dim = state["rank_n_approx"], state["dim"]
    n_in = state["n_sym_source"] if "enc" in prefix else state["n_sym_target"]
    out = [
        _multilayer(f"{prefix}_approx_embdr", n_in, rank, state),
        _multilayer(f"{prefix}_input_embdr_0", rank, dim, state),
    ]
    if prefix_lookup(state, prefix, "rec_gating"):
        out.append(_multilayer(f"{prefix}_update_embdr_0", rank, dim, state))
    if prefix_lookup(state, prefix, "rec_reseting"):
        out.append(_multilayer(f"{prefix}_reset_embdr_0", rank, dim, state))
    return out


def _transition(prefix: str, state: dict[str, Any], c_dim: int | None) -> Layer:
    """``_create_transition_layers`` (encdec.py:640-662) for level 0."""
    name, dim = f"{prefix}_transition_0", state["dim"]
    fn, scale = state["rec_weight_init_fn"], prefix_lookup(state, prefix, "rec_weight_scale")
    kind = prefix_lookup(state, prefix, "rec_layer")
    bias = state["bias"]

    def square(letter: str) -> Matrix:
        return Matrix(f"{letter}_{name}", (dim, dim), fn, scale)

    tensors: tuple[Matrix | Bias, ...] | list[Matrix | Bias]
    if kind == "RecurrentLayerWithSearch":  # draws no MRG seed (encdec.py:236-243)
        assert c_dim is not None  # the decoder's transition
        tensors = (
            square("W"),
            square("G"),
            square("R"),
            Matrix(f"A_{name}", (c_dim, dim), "sample_weights_classic", 1e-3),
            Matrix(f"B_{name}", (dim, dim), "sample_weights_classic", 1e-3),
            Matrix(f"D_{name}", (dim, 1), "zeros", 0.0),
        )
        return Layer(kind, name, False, tensors)
    if kind == GRCONV:
        tensors = (
            square("W"),
            square("U"),
            Bias(f"b_{name}", dim, bias),
            Matrix(f"GW_{name}", (dim, 3), "randn", 0.01),
            Matrix(f"GU_{name}", (dim, 3), "randn", 0.01),
            Bias(f"Gb_{name}", 3, bias),
        )
    else:
        tensors = [square("W")]
        if prefix_lookup(state, prefix, "rec_gating"):
            tensors.append(square("G"))
        if prefix_lookup(state, prefix, "rec_reseting"):
            tensors.append(square("R"))
    return Layer(kind, name, True, tuple(tensors))


def build_plan(cfg: ModelConfig, state: dict[str, Any]) -> list[Layer]:
    """The layers ``RNNEncoderDecoder.build()`` constructs, in construction order."""
    dim = state["dim"]
    plan = []
    for prefix in ("enc", "back_enc"):  # encdec.py:1307-1325
        plan += _embedders(prefix, state)
        plan.append(_transition(prefix, state, None))
        plan.append(_multilayer(f"{prefix}_repr_contrib_0", dim, dim * state["maxout_part"], state))
    c_dim = cfg.c_dim  # encdec.py:1345
    plan += _embedders("dec", state)  # Decoder.create_layers, :826-846
    plan.append(_transition("dec", state, c_dim))
    if cfg.bias_code:
        plan.append(_multilayer("dec_initializer_0", dim, dim, state, bias=state["bias"]))
    if cfg.decoding_inputs:
        plan.append(_multilayer("dec_dec_inputter_0", c_dim, dim, state))
        if cfg.dec.gating:
            plan.append(_multilayer("dec_dec_updater_0", c_dim, dim, state))
        if cfg.dec.reseting:
            plan.append(_multilayer("dec_dec_reseter_0", c_dim, dim, state))
    plan.append(_multilayer("dec_repr_readout", c_dim, dim, state))
    plan.append(_multilayer("dec_hid_readout_0", dim, dim, state))
    if cfg.bigram:
        plan.append(_multilayer("dec_prev_readout_0", cfg.rank_n_approx, dim, state))
    plan.append(_softmax(cfg, state))
    return plan


def _softmax(cfg: ModelConfig, state: dict[str, Any]) -> Layer:
    """``SoftmaxLayer(rng, n_in, n_sym_target, sparsity=-1, rank_n_approx)`` (encdec.py:941-960,
    cost_layers.py:148-180): sparsity -1 becomes ``n_out``, capped at each matrix's width."""
    sm, n_in, n_out, rank = cfg.softmax_name, cfg.softmax_in, cfg.n_sym_target, cfg.rank_n_approx
    fn, scale = state["weight_init_fn"], state["weight_scale"]
    mats: tuple[Matrix, ...]
    if rank:
        mats = (
            Matrix(f"W1_{sm}", (n_in, rank), fn, scale, n_out),
            Matrix(f"W2_{sm}", (rank, n_out), fn, scale, n_out),
        )
    else:
        mats = (Matrix(f"W_{sm}", (n_in, n_out), fn, scale, n_out),)
    return Layer("SoftmaxLayer", sm, True, mats + (Bias(f"b_{sm}", n_out, 0.0),))


#: what a logged draw returns
_T = TypeVar("_T")


class Draws:
    """The build's ``RandomState`` with every call logged: ``(method, args, kwargs, layer,
    sha256 of the output bytes)``, the fields of GroundHog's recorded draw log."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.RandomState(seed)
        self.layer: str | None = None
        self.log: list[tuple[str, tuple[str, ...], dict[str, str], str | None, str]] = []

    def _note(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], out: _T) -> _T:
        digest = hashlib.sha256(np.ascontiguousarray(out).tobytes()).hexdigest()
        self.log.append(
            (
                method,
                tuple(str(a) for a in args),
                {k: str(v) for k, v in kwargs.items()},
                self.layer,
                digest,
            )
        )
        return out

    def randint(self, high: int) -> np.int64:
        return self._note("randint", (high,), {}, np.int64(self.rng.randint(high)))

    def permutation(self, n: int) -> np.ndarray:
        return self._note("permutation", (n,), {}, self.rng.permutation(n))

    def normal(self, scale: float, size: int) -> np.ndarray:
        kw: dict[str, Any] = {"loc": 0, "scale": scale, "size": (size,)}
        return self._note("normal", (), kw, self.rng.normal(**kw))

    def randn(self, *shape: int) -> np.ndarray:
        return self._note("randn", shape, {}, self.rng.randn(*shape))


def _sparse_rows(d: Draws, shape: tuple[int, int], sparsity: int, scale: float) -> np.ndarray:
    """The rows of ``sample_weights_classic`` / ``_orth`` (float32, normals rounded once)."""
    size_x, size_y = shape
    sparsity = size_y if sparsity < 0 else min(size_y, sparsity)
    values = np.zeros(shape, dtype=np.float32)
    for row in range(size_x):
        perm = d.permutation(size_y)
        values[row, perm[:sparsity]] = d.normal(scale, sparsity)
    return values


def _matrix(d: Draws, m: Matrix, svd_inputs: dict[str, np.ndarray]) -> np.ndarray:
    if m.fn == "zeros":
        return np.zeros(m.shape, dtype=np.float32)
    if m.fn == "randn":
        gates: np.ndarray = np.float32(m.scale * d.randn(*m.shape))
        return gates
    values = _sparse_rows(d, m.shape, m.sparsity, m.scale)
    if m.fn == "sample_weights_orth":
        if m.shape[0] != m.shape[1]:
            raise LegacyInputError(
                None,
                f"{m.name}: sample_weights_orth needs a square matrix "
                f"(utils.py:126 asserts), not {m.shape}",
            )
        svd_inputs[m.name] = values.copy()
        u, _, _ = np.linalg.svd(values)  # float32 in, computed in double, float32 out
        return (u * float(m.scale)).astype(np.float32)
    return values


@dataclass
class Drawn:
    """What :func:`draw` returns: ``params`` (every drawn tensor by GroundHog name, float32),
    ``log`` (every call on the generator, see :class:`Draws`), ``svd_inputs`` (the matrix
    each orthogonal parameter was the SVD of) and the generator's final ``state``."""

    params: dict[str, Any]
    log: list[tuple[str, tuple[str, ...], dict[str, str], str | None, str]]
    svd_inputs: dict[str, Any]
    rng: np.random.RandomState


def draw(cfg: ModelConfig, state: dict[str, Any], plan: list[Layer] | None = None) -> Drawn:
    """Replay GroundHog's build on ``RandomState(state['seed'])``."""
    for key, ok in SUPPORTED.items():
        if state.get(key) not in ok:
            raise LegacyInputError(
                None,
                f"state[{key!r}] = {state.get(key)!r}: a new model can be "
                f"initialised with {' or '.join(ok)} only",
            )
    d = Draws(state["seed"])
    params: dict[str, np.ndarray] = {}
    svd_inputs: dict[str, np.ndarray] = {}
    for layer in build_plan(cfg, state) if plan is None else plan:
        d.layer = f"{layer.kind}:{layer.name}"
        if layer.mrg_seed:
            d.randint(int(1e6))
        for t in layer.tensors:
            if isinstance(t, Bias):
                params[t.name] = np.ones((t.size,), dtype=np.float32) * np.float32(t.value)
            else:
                params[t.name] = _matrix(d, t, svd_inputs)
    d.layer = None
    d.randint(1000)  # create_lm_model: Model.__init__ (basic.py:510)
    return Drawn(params, d.log, svd_inputs, d.rng)


def initialize(model: RNNEncoderDecoder, state: dict[str, Any]) -> Drawn:
    """Set ``model``'s parameters to GroundHog's initial values; returns the :class:`Drawn`."""
    drawn = draw(model.cfg, state)
    table, _ = legacy_param_table(model.cfg)
    for p in table:
        value = drawn.params[p.name].reshape(p.shape)
        with torch.no_grad():
            model.get_parameter(p.path).copy_(torch.as_tensor(value))
    return drawn
