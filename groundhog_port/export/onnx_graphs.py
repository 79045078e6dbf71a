"""The model as ONNX graphs: the encoder and one decoder step, built node by node.

Three graphs (opset :data:`OPSET`, IR version :data:`IR_VERSION`), the weights as float32
initializers under their export names (:mod:`groundhog_port.legacy.export_names`):

``encoder.onnx``  (``create_representation_computer`` + ``create_initializers``, encdec.py:1409-1424)
    in  ``seq`` int64 ``(S,)`` (word ids, end-of-sequence included)
    out ``c`` float32 ``(S, c_dim)`` annotations, ``init_state`` ``(1, dim)`` (s_0),
        and for RNNsearch ``p_from_c`` ``(S, dim)`` = ``c @ U_a``, the attention's cached
        projection (computed once per sentence, encdec.py:462)
``decoder_next_probs.onnx``  (``create_next_probs_computer``, encdec.py:1457)
    in  ``c``, [``p_from_c``], ``step`` int64 ``()``, ``y_prev`` int64 ``(n,)``,
        ``s_prev`` float32 ``(n, dim)``
    out ``probs`` float32 ``(n, n_sym_target)``: p(y_i | y_<i, x) read out from ``s_{i-1}``
``decoder_next_states.onnx``  (``create_next_states_computer``, encdec.py:1466)
    in  ``c``, [``p_from_c``], ``step``, ``y`` int64 ``(n,)`` (the chosen words),
        ``s_prev`` float32 ``(n, dim)`` (the states they were chosen from)
    out ``s`` float32 ``(n, dim)``

Together the two decoder graphs are one step of sample.py's beam search (sample.py:70 and
:104), which :mod:`groundhog_port.export.beam_search` drives.  ``step`` selects the fixed
context ``c[min(step, S-1)]`` of RNNencdec (encdec.py:1023) and is unused by RNNsearch.

The network's arithmetic is not written here: the graph builder runs the port's own
definitions on graph values (:class:`GraphOps`, a backend of
:class:`groundhog_port.model.functional.Ops` and
:class:`groundhog_port.model.attention.AttentionOps`) -- the layers
(``functional.dense``: the embeddings with ``Gather``), the word and context signals, the GRU
step, the grConv level, the attention (``attention.attend``), the readout with the bigram
term and its ``y_prev > 0`` check, the logits and Theano's ``SoftmaxWithBias`` -- so a change
there changes the graphs too (``parity_tests/parity/test_one_network.py``).  What is written
here is graph plumbing: inputs and outputs, the encoder's ``Scan`` / ``Loop``, the
concatenation of the annotation's components (as encoder.compose), ``s_0`` from the first
annotation (Decoder.initial_state) and RNNencdec's fixed context row.  Legacy quirks come with
the definitions: the attention weights are ``exp(e) / sum exp(e)`` WITHOUT subtracting the
maximum (overflow to inf/nan as in Theano), the output softmax subtracts it and sums in double,
sigmoid has Theano's float32 cut-offs; the backward encoder embeds with the forward encoder's
embedding (encdec.py:1330).  Only summation orders inside the runtime's kernels differ from the
port's: float32 rounding noise, which ``test_export_onnx.py`` bounds with the port's
derived bounds against the recordings.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast, overload

import numpy as np
from numpy.typing import ArrayLike, DTypeLike
from torch import nn

from ..errors import LegacyInputError
from ..legacy.export_names import FORMAT_NAME, FORMAT_VERSION
from ..legacy.exported import architecture, encode_state, raw_target_idx2word
from ..model import attention, functional
from ..model.config import GRCONV
from ..outputs import atomic_write_bytes, atomic_write_text, file_in

if TYPE_CHECKING:
    import onnx

    from ..legacy.experiment import Experiment
    from ..model.activations import Activation
    from ..model.config import ModelConfig, RecurrentConfig
    from ..model.encdec import RNNEncoderDecoder
    from ..model.layers import MultiLayer

#: the ONNX operator set the graphs use (onnxruntime >= 1.14 runs it)
OPSET = 17
#: the IR version written (the one of opset 17), so older runtimes load the files too
IR_VERSION = 8
GRAPH_FILES = ("encoder.onnx", "decoder_next_probs.onnx", "decoder_next_states.onnx")
DRIVER_FILE = "beam_search.py"
#: Theano's float32 sigmoid cut-offs (activations.theano_sigmoid)
SIGMOID_LOW, SIGMOID_HIGH = -88.0, 15.0


class _Graph:
    """A graph under construction: nodes, weights (initializers) and unique value names."""

    def __init__(self, model: RNNEncoderDecoder, name: str) -> None:
        from onnx import TensorProto, helper

        self.helper, self.TensorProto = helper, TensorProto
        self.model, self.name = model, name
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: dict[str, onnx.TensorProto] = {}
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self.ids: set[str] = set()  # the integer inputs (word ids, a step)
        self._n = 0

    def fresh(self, hint: str) -> str:
        self._n += 1
        return f"{self.name}/{hint}_{self._n}"  # unique across a graph and its bodies

    @overload
    def op(
        self,
        op_type: str,
        *inputs: str,
        n_out: Literal[1] = 1,
        hint: str | None = None,
        **attrs: Any,
    ) -> str: ...
    @overload
    def op(
        self, op_type: str, *inputs: str, n_out: int, hint: str | None = None, **attrs: Any
    ) -> list[str]: ...
    def op(
        self, op_type: str, *inputs: str, n_out: int = 1, hint: str | None = None, **attrs: Any
    ) -> str | list[str]:
        outs = [self.fresh(hint or op_type.lower()) for _ in range(n_out)]
        self.nodes.append(self.helper.make_node(op_type, list(inputs), outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, value: ArrayLike, dtype: DTypeLike = np.float32, hint: str = "const") -> str:
        from onnx import numpy_helper

        name = self.fresh(hint)
        self.initializers[name] = numpy_helper.from_array(np.asarray(value, dtype=dtype), name)
        return name

    def weight(self, path: str) -> str:
        """The parameter at ``path`` (its export name) as an initializer."""
        from onnx import numpy_helper

        if path not in self.initializers:
            a = self.model.get_parameter(path).detach().cpu().numpy().astype(np.float32)
            self.initializers[path] = numpy_helper.from_array(np.ascontiguousarray(a), path)
        return path

    def add_input(self, name: str, elem: int, shape: Sequence[int | str]) -> str:
        self.inputs.append(self.helper.make_tensor_value_info(name, elem, shape))
        if elem == self.TensorProto.INT64:
            self.ids.add(name)
        return name

    def add_output(self, value: str, name: str, elem: int, shape: Sequence[int | str]) -> None:
        self.nodes.append(self.helper.make_node("Identity", [value], [name]))
        self.outputs.append(self.helper.make_tensor_value_info(name, elem, shape))

    def proto(self) -> onnx.ModelProto:
        """The ``ModelProto`` (checked with ``onnx.checker``)."""
        import onnx

        graph = self.helper.make_graph(
            self.nodes, self.name, self.inputs, self.outputs, list(self.initializers.values())
        )
        model = self.helper.make_model(
            graph,
            producer_name="groundhog-port",
            opset_imports=[self.helper.make_opsetid("", OPSET)],
        )
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model)
        return model


# -- elementwise pieces ---------------------------------------------------------------
def activation(g: _Graph, act: Activation, x: str) -> str:
    """``act`` (a parsed :class:`~groundhog_port.model.activations.Activation`) applied to ``x``."""
    if act.name == "identity":
        return x
    if act.name == "tanh":
        return g.op("Tanh", x)
    if act.name == "sigmoid":  # 1 / (1 + exp(-x)), 0 below -88, 1 above 15
        y = g.op("Div", g.const(1.0), g.op("Add", g.const(1.0), g.op("Exp", g.op("Neg", x))))
        y = g.op("Where", g.op("Greater", x, g.const(SIGMOID_HIGH)), g.const(1.0), y)
        return g.op("Where", g.op("Less", x, g.const(SIGMOID_LOW)), g.const(0.0), y)
    if act.name == "maxout":  # consecutive groups of k inputs (encdec.py:541-558)
        shape = g.op(
            "Concat",
            g.op("Slice", g.op("Shape", x), g.const([0], np.int64), g.const([-1], np.int64)),
            g.const([-1, cast(int, act.k)], np.int64),  # a maxout has its k
            axis=0,
        )
        return g.op("ReduceMax", g.op("Reshape", x, shape), axes=[-1], keepdims=0)
    conditions = {
        "relu": [("Greater", 0.0)],
        "hard_sigmoid": [("Greater", 0.0), ("Less", 1.0)],
        "hard_tanh": [("Greater", -1.0), ("Less", 1.0)],
    }[act.name]
    for cmp, bound in conditions:  # x * (x > a) [* (x < b)], GroundHog's literal products
        x = g.op("Mul", x, g.op("Cast", g.op(cmp, x, g.const(bound)), to=g.TensorProto.FLOAT))
    return x


def layer(g: _Graph, path: str, x: str) -> str:
    """The ``MultiLayer`` at module ``path`` applied to ``x``:
    :func:`groundhog_port.model.functional.dense` (word ids picked by ``Gather``, a zero
    unsaved bias left out)."""
    module = cast("MultiLayer", g.model.get_submodule(path))
    bias = isinstance(module.b, nn.Parameter)
    y: str = functional.dense(GraphOps(g), _weights(g, path), x, module.activation, bias)
    return y


def _layers(g: _Graph, path: str) -> functional.Layer:
    """``layer(name, x)`` of the encoder or decoder at module ``path`` (:func:`layer`), as
    the definitions in ``model/`` take their layers."""
    return lambda name, x: layer(g, f"{path}.{name}", x)


def _weights(g: _Graph, path: str) -> Callable[[str], str]:
    """``weight(name)`` of the layer at module ``path``, as the definitions in ``model/``
    take their weights: the initializer, added when first used."""
    return lambda name: g.weight(f"{path}.{name}")


class GraphOps:
    """The backend of :mod:`groundhog_port.model.functional` that builds graph ``g``: each
    operation appends its node (float32 values; the softmax's sum in double)."""

    def __init__(self, g: _Graph) -> None:
        self.g = g

    def mm(self, x: str, w: str) -> str:
        if x in self.g.ids:  # utils.dot on word ids: rows of w
            return self.g.op("Gather", w, x, axis=0)
        return self.g.op("MatMul", x, w)

    def affine(self, x: str, w: str, b: str) -> str:
        return self.g.op("Add", self.mm(x, w), b)

    def add(self, a: str, b: str) -> str:
        return self.g.op("Add", a, b)

    def sub(self, a: str, b: str) -> str:
        return self.g.op("Sub", a, b)

    def mul(self, a: str, b: str) -> str:
        return self.g.op("Mul", a, b)

    def one_minus(self, z: str) -> str:
        return self.g.op("Sub", self.g.const(1.0), z)

    def act(self, act: Activation, x: str) -> str:
        return activation(self.g, act, x)

    def exp(self, x: str) -> str:
        return self.g.op("Exp", x)

    def row_max(self, x: str) -> str:
        return self.g.op("ReduceMax", x, axes=[-1], keepdims=1)

    def to_double(self, x: str) -> str:
        return self.g.op("Cast", x, to=self.g.TensorProto.DOUBLE)

    def row_sum(self, x: str) -> str:
        return self.g.op("ReduceSum", x, self.g.const([-1], np.int64), keepdims=1)

    def reciprocal(self, x: str) -> str:
        return self.g.op("Div", self.g.const(1.0, np.float64), x)

    def cast_like(self, x: str, like: str) -> str:
        return self.g.op("Cast", x, to=self.g.TensorProto.FLOAT)  # the graphs are float32

    def positive(self, ids: str, like: str) -> str:
        g = self.g
        flags = g.op("Cast", g.op("Greater", ids, g.const(0, np.int64)), to=g.TensorProto.FLOAT)
        return g.op("Unsqueeze", flags, g.const([1], np.int64))

    def left_neighbours(self, level: str) -> str:
        g = self.g
        first = g.op("Slice", level, g.const([0], np.int64), g.const([1], np.int64))
        zero_row = g.op("Mul", first, g.const(0.0))
        rest = g.op("Slice", level, g.const([0], np.int64), g.const([-1], np.int64))
        return g.op("Concat", zero_row, rest, axis=0)

    def columns(self, x: str, n: int) -> list[str]:
        return self.g.op("Split", x, axis=1, n_out=n)  # the graphs' values are (rows, n)

    # the attention's (model.attention.AttentionOps): one sentence, S positions, n rows
    def tanh(self, x: str) -> str:
        return self.g.op("Tanh", x)

    def div(self, a: str, b: str) -> str:
        return self.g.op("Div", a, b)

    def over_positions(self, p_from_h: str, p_from_c: str) -> str:
        g = self.g
        h = g.op("Unsqueeze", p_from_h, g.const([0], np.int64))
        return g.op("Add", h, g.op("Unsqueeze", p_from_c, g.const([1], np.int64)))  # (S, n, dim)

    def project(self, t: str, v: str) -> str:
        return self.g.op("Squeeze", self.g.op("MatMul", t, v), self.g.const([2], np.int64))

    def position_max(self, e: str) -> str:
        raise LegacyInputError(
            None, "the ONNX graphs compute GroundHog's attention: no --stable-softmax"
        )

    def position_sum(self, e: str) -> str:
        return self.g.op("ReduceSum", e, self.g.const([0], np.int64), keepdims=1)

    def weighted_context(self, alpha: str, c: str) -> str:
        return self.g.op("MatMul", self.g.op("Transpose", alpha, perm=[1, 0]), c)


# -- the encoder ----------------------------------------------------------------------
def _scan_direction(
    g: _Graph,
    model: RNNEncoderDecoder,
    enc_path: str,
    rec: RecurrentConfig,
    emb: str,
    reverse: bool,
) -> str:
    """One GRU direction over ``emb (S, rank)`` as an ONNX ``Scan``: ``(S, dim)`` states,
    for ``reverse`` read from the last word and written back in source order (the
    port's ``x.flip(0)`` ... ``.flip(0)``, encoder.annotations)."""
    dim = model.cfg.dim
    x, x_z, x_r = functional.word_signals(rec, _layers(g, enc_path), emb)
    body = _Graph(model, f"{enc_path}_step")
    body.initializers = g.initializers  # weights are read from the outer scope
    F = g.TensorProto.FLOAT
    h = body.add_input("h_prev", F, [dim])
    xt = body.add_input("x_t", F, [dim])
    zt = body.add_input("xz_t", F, [dim]) if x_z is not None else None
    rt = body.add_input("xr_t", F, [dim]) if x_r is not None else None
    h_new = functional.gru_step(
        GraphOps(body), rec, _weights(body, f"{enc_path}.transition"), xt, zt, rt, h
    )
    body.add_output(h_new, "h", F, [dim])
    body.add_output(h_new, "h_out", F, [dim])
    graph = g.helper.make_graph(body.nodes, body.name, body.inputs, body.outputs)
    scans = [v for v in (x, x_z, x_r) if v is not None]
    h0 = g.const(np.zeros(dim, np.float32), hint="h0")
    _, states = g.op(
        "Scan",
        h0,
        *scans,
        n_out=2,
        body=graph,
        num_scan_inputs=len(scans),
        scan_input_directions=[int(reverse)] * len(scans),
        scan_output_directions=[int(reverse)],
    )
    return states


def _grconv_root(g: _Graph, model: RNNEncoderDecoder, emb: str) -> str:
    """The grConv's root ``(1, dim)`` (layers.RecursiveConvolutionalLayer, rconv_layers.py:
    196-311): ``S - 1`` levels as an ONNX ``Loop``, each from the (left, right) pairs."""
    dim = model.cfg.dim
    rec, path = model.cfg.enc, "encoder.transition"
    x = layer(g, "encoder.input_embedder", emb)
    body = _Graph(model, "grconv_level")
    body.initializers = g.initializers
    F = g.TensorProto.FLOAT
    body.add_input("iter", g.TensorProto.INT64, [])
    cond = body.add_input("cond_in", g.TensorProto.BOOL, [])
    level = body.add_input("level", F, ["S", dim])
    out, _ = functional.grconv_level(GraphOps(body), rec, _weights(body, path), level)
    body.add_output(cond, "cond_out", g.TensorProto.BOOL, [])
    body.add_output(out, "level_out", F, ["S", dim])
    graph = g.helper.make_graph(body.nodes, body.name, body.inputs, body.outputs)
    n_levels = g.op("Sub", g.op("Shape", x, start=0, end=1), g.const([1], np.int64))
    trips = g.op("Squeeze", n_levels, g.const([0], np.int64))
    top = g.op("Loop", trips, g.const(True, np.bool_), x, body=graph)
    return g.op("Slice", top, g.const([-1], np.int64), g.const([2**62], np.int64))


def encoder_graph(model: RNNEncoderDecoder) -> onnx.ModelProto:
    """``encoder.onnx`` (see the module docstring); encoder.annotations, Decoder.initial_state."""
    cfg = model.cfg
    g = _Graph(model, "encoder")
    F, I64 = g.TensorProto.FLOAT, g.TensorProto.INT64
    seq = g.add_input("seq", I64, ["S"])
    emb = layer(g, "encoder.approx_embedder", seq)
    if cfg.enc.layer == GRCONV:
        forward = _grconv_root(g, model, emb)
    else:
        forward = _scan_direction(g, model, "encoder", cfg.enc, emb, reverse=False)
    n_rows = g.op("Shape", seq)

    def spread(row: str) -> str:  # a (1, dim) row repeated on every position
        return g.op("Expand", row, g.op("Concat", n_rows, g.const([cfg.dim], np.int64), axis=0))

    parts = []
    if cfg.forward:
        parts.append(forward)
    if cfg.last_forward:
        parts.append(
            spread(g.op("Slice", forward, g.const([-1], np.int64), g.const([2**62], np.int64)))
        )
    if cfg.needs_backward_encoder:
        backward = _scan_direction(g, model, "backward_encoder", cfg.back_enc, emb, reverse=True)
        if cfg.backward:
            parts.append(backward)
        if cfg.last_backward:
            parts.append(
                spread(g.op("Slice", backward, g.const([0], np.int64), g.const([1], np.int64)))
            )
    c = parts[0] if len(parts) == 1 else g.op("Concat", *parts, axis=-1)
    init_c = g.op("Slice", c, g.const([0, -cfg.dim], np.int64), g.const([1, 2**62], np.int64))
    if cfg.bias_code:
        s0 = layer(g, "decoder.initializer", init_c)
    else:  # ZeroLayer (bias_code=False)
        s0 = g.const(np.zeros((1, cfg.dim), np.float32), hint="zero_state")
    g.add_output(c, "c", F, ["S", cfg.c_dim])
    g.add_output(s0, "init_state", F, [1, cfg.dim])
    if cfg.search:
        g.add_output(g.op("MatMul", c, g.weight("decoder.A")), "p_from_c", F, ["S", cfg.dim])
    return g.proto()


# -- one decoder step ---------------------------------------------------------------------
def _step_inputs(
    g: _Graph, cfg: ModelConfig, word_name: str
) -> tuple[str, str | None, str | None, str, str]:
    F, I64 = g.TensorProto.FLOAT, g.TensorProto.INT64
    c = g.add_input("c", F, ["S", cfg.c_dim])
    p_from_c = g.add_input("p_from_c", F, ["S", cfg.dim]) if cfg.search else None
    step = None if cfg.search else g.add_input("step", I64, [])
    y = g.add_input(word_name, I64, ["n"])
    s_prev = g.add_input("s_prev", F, ["n", cfg.dim])
    return c, p_from_c, step, y, s_prev


def context(
    g: _Graph,
    cfg: ModelConfig,
    c: str,
    p_from_c: str | None,
    step: str | None,
    s_prev: str,
) -> str:
    """``ctx (n, c_dim)``: the port's attention (:func:`groundhog_port.model.attention.attend`,
    exp-then-normalise without the maximum, encdec.py:299-345) or the fixed
    ``c[min(step, S-1)]`` (encdec.py:1023)."""
    if cfg.search:  # p_from_c: an input of the graphs with attention (_step_inputs)
        ctx, _ = attention.attend(GraphOps(g), _weights(g, "decoder"), s_prev, c, p_from_c)
        return cast(str, ctx)
    last = g.op(
        "Sub",
        g.op("Squeeze", g.op("Shape", c, start=0, end=1), g.const([0], np.int64)),
        g.const(1, np.int64),
    )
    # step: an input of the graphs without attention (_step_inputs)
    row = g.op("Gather", c, g.op("Min", cast(str, step), last), axis=0)  # (c_dim,)
    n = g.op("Shape", s_prev, start=0, end=1)
    return g.op("Expand", row, g.op("Concat", n, g.const([cfg.c_dim], np.int64), axis=0))


def next_probs_graph(model: RNNEncoderDecoder) -> onnx.ModelProto:
    """``decoder_next_probs.onnx``: RNNEncoderDecoder.next_probs (encdec.py:1457, readout :1153)."""
    cfg = model.cfg
    g = _Graph(model, "decoder_next_probs")
    c, p_from_c, step, y_prev, s_prev = _step_inputs(g, cfg, "y_prev")
    ctx = context(g, cfg, c, p_from_c, step, s_prev)
    ops, decoder = GraphOps(g), _layers(g, "decoder")
    emb = decoder("approx_embedder", y_prev) if cfg.bigram else None
    term = functional.prev_word_term(ops, cfg, decoder, y_prev, emb)
    t = functional.readout(ops, cfg, decoder, ctx, s_prev, term)
    z = functional.logits(ops, _weights(g, "decoder.output_layer"), t, bool(cfg.rank_n_approx))
    probs = functional.softmax_with_bias(ops, z)
    g.add_output(probs, "probs", g.TensorProto.FLOAT, ["n", cfg.n_sym_target])
    return g.proto()


def next_states_graph(model: RNNEncoderDecoder) -> onnx.ModelProto:
    """``decoder_next_states.onnx``: RNNEncoderDecoder.next_states (encdec.py:1466)."""
    cfg = model.cfg
    rec = cfg.dec
    g = _Graph(model, "decoder_next_states")
    c, p_from_c, step, y, s_prev = _step_inputs(g, cfg, "y")
    ops, decoder = GraphOps(g), _layers(g, "decoder")
    x, x_z, x_r = functional.word_signals(rec, decoder, decoder("approx_embedder", y))
    ctx = context(g, cfg, c, p_from_c, step, s_prev)
    x, x_z, x_r = functional.context_signals(ops, cfg, decoder, x, x_z, x_r, ctx)
    s = functional.gru_step(ops, rec, _weights(g, "decoder.transition"), x, x_z, x_r, s_prev)
    g.add_output(s, "s", g.TensorProto.FLOAT, ["n", cfg.dim])
    return g.proto()


#: config.json "graphs": the driver's name of each graph -> its file
GRAPHS = dict(zip(("encoder", "next_probs", "next_states"), GRAPH_FILES))


def search_settings(state: Mapping[str, Any], cfg: ModelConfig) -> dict[str, Any]:
    """config.json "search": the ids and flags the driver's search and parsing read."""
    keys = (
        "null_sym_source",
        "unk_sym_source",
        "n_sym_source",
        "null_sym_target",
        "unk_sym_target",
        "oov",
    )
    return dict(
        {k: state[k] for k in keys}, attention=bool(cfg.search), grconv=cfg.enc.layer == GRCONV
    )


def write_graphs(model: RNNEncoderDecoder, outdir: str | os.PathLike[str]) -> list[Path]:
    """The three graphs of ``model`` into ``outdir``; returns their paths."""
    paths = []
    for name, build in zip(GRAPH_FILES, (encoder_graph, next_probs_graph, next_states_graph)):
        path = file_in(outdir, name)  # a link inside OUTDIR is never followed
        atomic_write_bytes(path, build(model).SerializeToString())
        paths.append(path)
    return paths


def onnx_config(exp: Experiment) -> dict[str, Any]:
    """``config.json`` of an ONNX export: what the driver needs (no torch, no pickle)."""
    return {
        "format": FORMAT_NAME + "-onnx",
        "format_version": FORMAT_VERSION,
        "opset": OPSET,
        "graphs": GRAPHS,
        "search": search_settings(exp.state, exp.cfg),
        "state": encode_state(exp.state),
        "architecture": architecture(exp.cfg),
        "vocabularies": {
            "source_word2idx": exp.src_word2idx,
            "source_idx2word": {str(k): v for k, v in exp.src_idx2word.items()},
            "target_idx2word": {str(k): v for k, v in raw_target_idx2word(exp).items()},
        },
    }


def write_onnx(exp: Experiment, outdir: str | os.PathLike[str]) -> list[Path]:
    """The three graphs, ``config.json`` and the driver ``beam_search.py`` into ``outdir``;
    returns their paths."""
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise LegacyInputError(
            None,
            "export --format onnx needs the onnx package: pip install 'groundhog-port[export]'",
        ) from None
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    paths = write_graphs(exp.model, outdir)
    cfg_path = file_in(outdir, "config.json")
    atomic_write_text(
        cfg_path, json.dumps(onnx_config(exp), indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    )
    driver = file_in(outdir, DRIVER_FILE)  # a new file renamed into place, as the others
    atomic_write_bytes(driver, Path(__file__).with_name(DRIVER_FILE).read_bytes())
    return paths + [cfg_path, driver]
