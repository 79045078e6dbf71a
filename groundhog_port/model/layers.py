"""GroundHog's layers, each a small module holding its legacy-named weights.

Weights keep GroundHog's ``(in, out)`` orientation: every affine map is ``x @ W + b``.
Parameters are registered under their role (``W``, ``b``, ``W1`` ...); the
legacy names they load from live in ONE table, :mod:`groundhog_port.legacy.checkpoint`.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import torch
from torch import nn

from . import functional
from .activations import Activation, parse_activation
from .config import RecurrentConfig
from .numerics import ROW_BLOCK, column_blocks, mm
from .workspace import Workspace

#: ``'lambda x:x'``, the activation of every projection GroundHog builds without one
IDENTITY = parse_activation("lambda x:x", "identity")


#: set by :func:`unwritten_parameters`
_UNWRITTEN = contextvars.ContextVar("unwritten_parameters", default=False)


@contextlib.contextmanager
def unwritten_parameters() -> Iterator[None]:
    """Parameters created inside get memory that is never written (``torch.empty``) instead
    of zeros: for a model whose parameters a model file replaces at once
    (:func:`groundhog_port.legacy.loading.open_experiment`), so that 300 MB of zeros are neither
    written nor held beside the file's arrays.  The caller zeroes whatever it does not fill.
    (A ``meta``-device model would do the same but imports sympy: a second of start-up.)"""
    token = _UNWRITTEN.set(True)
    try:
        yield
    finally:
        _UNWRITTEN.reset(token)


def _param(*shape: int) -> nn.Parameter:
    make = torch.empty if _UNWRITTEN.get() else torch.zeros
    return nn.Parameter(make(*shape, dtype=torch.float32), requires_grad=False)


class Layer(nn.Module):
    """A layer whose weights the definitions of :mod:`.functional` read by role."""

    def weight(self, name: str) -> torch.Tensor:
        """The weight ``name`` (``W``, ``b``, ``G`` ...) of this layer."""
        w: torch.Tensor = getattr(self, name)
        return w


class MultiLayer(Layer):
    """One-layer ``MultiLayer`` (groundhog/layers/ff_layers.py:28, fprop :247):
    ``y = act(x @ W + b)`` (:func:`~groundhog_port.model.functional.dense`, the one
    definition the ONNX export runs too).

    With ``learn_bias=False`` the bias is not a parameter: it is never saved and
    keeps its initial value ``init_bias(n, bias_scale) = zeros`` (utils.py:143),
    but GroundHog still adds it in fprop.  It is kept here as a zero buffer.
    (GroundHog's factorised ``rank_n_approx`` form of the layer is not used by its
    encoder-decoder: the embeddings are MultiLayers of their own.)
    """

    def __init__(
        self, n_in: int, n_out: int, activation: Activation, learn_bias: bool = True
    ) -> None:
        super().__init__()
        self.activation = activation
        self.W = _param(n_in, n_out)
        if learn_bias:
            self.b = _param(n_out)
        else:
            self.register_buffer("b", torch.zeros(n_out, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y: torch.Tensor = functional.dense(functional.TORCH, self.weight, x, self.activation)
        return y


class RecurrentLayer(Layer):
    """GroundHog's gated recurrent layer (rec_layers.py:839; its step_fprop at rec_layers.py:1018).

    With reset gate ``r`` and update gate ``z``::

        r   = reseter(h_prev @ R + x_r)
        h~  = activation((r * h_prev) @ W + x)
        z   = gater(h_prev @ G + x_z)
        h   = z * h~ + (1 - z) * h_prev
        h   = m * h + (1 - m) * h_prev        (where a mask m is given)

    Note GroundHog applies ``r`` before the matrix product and keeps ``z`` for the
    *new* state: ``torch.nn.GRU`` does neither, so it is not used.
    """

    def __init__(self, dim: int, rec: RecurrentConfig) -> None:
        super().__init__()
        self.rec = rec
        self.W = _param(dim, dim)
        if rec.gating:
            self.G = _param(dim, dim)
        if rec.reseting:
            self.R = _param(dim, dim)

    def step(
        self,
        x: torch.Tensor,
        x_z: torch.Tensor | None,
        x_r: torch.Tensor | None,
        h_prev: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """One step (:func:`~groundhog_port.model.functional.gru_step`, the one definition
        the ONNX export reads too); ``x_z``/``x_r`` are None when there is no such gate."""
        h: torch.Tensor = functional.gru_step(
            functional.TORCH, self.rec, self.weight, x, x_z, x_r, h_prev
        )
        if mask is not None:
            mask = mask[:, None]
            h = mask * h + (1 - mask) * h_prev
        return h

    def scan(
        self,
        x: torch.Tensor,
        x_z: torch.Tensor | None,
        x_r: torch.Tensor | None,
        h0: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Run over time: inputs ``(T, batch, dim)``, mask ``(T, batch)``; returns ``(T, batch, dim)``."""
        h, out = h0, []
        for t in range(x.shape[0]):
            h = self.step(
                x[t],
                None if x_z is None else x_z[t],
                None if x_r is None else x_r[t],
                h,
                None if mask is None else mask[t],
            )
            out.append(h)
        return torch.stack(out)


class RecursiveConvolutionalLayer(Layer):
    """The gated recursive convolutional network, grConv (Cho et al. 2014b;
    groundhog/layers/rconv_layers.py:27, ``step_fprop`` :196, ``fprop`` :259).

    Level 0 is the input signal ``x`` (the ``input_embdr`` projection of each word).  Each
    scan step (``T - 1`` of them, rconv_layers.py:288) builds the next level at *every*
    position ``t`` from the pair (left ``h_{t-1}``, right ``h_t``) of the level below, the
    left neighbour of position 0 being zeros (``prev_shifted``, :215)::

        h~_t            = activation(h_t @ W + h_{t-1} @ U + b)               (:219-221)
        (w_c, w_l, w_r) = softmax(h_{t-1} @ GU + h_t @ GW + Gb)                (:223-228)
        h'_t            = w_c * h~_t + w_l * h_{t-1} + w_r * h_t               (:241)

    so after ``l`` levels position ``t`` summarises words ``t-l .. t``: the pyramid of the
    paper, kept as full-length levels as the original computes it.  In a padded batch the
    step for level ``k`` is taken only by sentences with ``mask[k] != 0`` (``TT.switch``,
    :250; the mask of the ``scan`` step is ``mask[1:]``), the others keep their level, and
    the root of sentence ``b`` is position ``len_b - 1`` of the top level (``seqlens =
    mask.sum(0) - 1``, ``_grab_root``, :295-309): the whole sentence, its end-of-sequence
    symbol included.  ``fprop`` returns the root alone, one vector per sentence.

    ``T = 1`` (an empty source line: ``<eos>`` alone) is a scan of 0 steps, which Theano
    refuses: sample.py crashes there, and the searches report it as such
    (``search.common.check_encodable``).  Scoring such a pair returns the input signal as
    the root (no level is built) where score.py would crash: a deliberate difference.

    The layer's ``gating``/``reseting`` arguments are accepted and ignored (:45-48, "NOT
    USED"); the gates above are always on.  ``W``/``U`` are GroundHog's left/right names
    (``W`` multiplies the right child ``h_t``, ``U`` the left one ``h_{t-1}``).
    """

    def __init__(self, dim: int, rec: RecurrentConfig) -> None:
        super().__init__()
        self.rec = rec
        self.W = _param(dim, dim)
        self.U = _param(dim, dim)
        self.b = _param(dim)
        self.GW = _param(dim, 3)
        self.GU = _param(dim, 3)
        self.Gb = _param(3)

    def step(self, level: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One level up (:func:`~groundhog_port.model.functional.grconv_level`, the one
        definition the ONNX export runs too): ``(new level, gates)``; ``level``
        ``(T, batch, dim)``, gates ``(T, batch, 3)`` ordered (new, left, right)."""
        out: torch.Tensor
        gates: torch.Tensor
        out, gates = functional.grconv_level(functional.TORCH, self.rec, self.weight, level)
        return out, gates

    def climb(
        self, x: torch.Tensor, mask: torch.Tensor | None = None
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """The ``scan`` of ``fprop`` (rconv_layers.py:288): yields ``(level_k, gates_k)`` for
        k = 1 .. T-1, each ``(T, batch, dim)`` / ``(T, batch, 3)``, over inputs
        ``x (T, batch, dim)``; where ``mask[k] == 0`` a sentence keeps level k-1."""
        level = x
        for k in range(1, x.shape[0]):
            new, gates = self.step(level)
            if mask is not None:
                new = torch.where(mask[k][None, :, None] != 0, new, level)
            level = new
            yield level, gates

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The roots ``(1, batch, dim)`` over inputs ``x (T, batch, dim)``, mask ``(T, batch)``
        (None: every position is a word, as for the single sentence of sample.py)."""
        level = x
        for level, _ in self.climb(x, mask):  # noqa: B007 -- the loop leaves the top level in it
            pass
        if mask is None:
            return level[-1:]
        last = mask.sum(0).long() - 1
        return level[last, torch.arange(x.shape[1], device=x.device)][None]


#: rows of logits :meth:`SoftmaxLayer.target_probs` computes at once (a multiple of
#: numerics.ROW_BLOCK; 128 x 30,001 float32 logits are 15 MB, inside a 32 MB L3)
TARGET_BLOCK_ROWS = 128


class SoftmaxLayer(Layer):
    """Output layer (groundhog/layers/cost_layers.py:878; its fprop at cost_layers.py:961).

    ``p = softmax(rank_n_activ(x @ W1) @ W2 + b)`` (``rank_n_activ`` is the
    CostLayer default ``lambda x: x``; the decoder never passes another).

    GroundHog wrote ``exp(x) / sum(exp(x))`` (utils.py:78) but Theano's optimizer
    rewrote that graph into ``SoftmaxWithBias``, which subtracts the row maximum:
    the recordings hold the max-subtracted result, so that is what is computed here
    (docs/recordings.md, "Quirks").  Probabilities stay float32, so tiny ones underflow to
    exactly 0 as they did in Theano.
    """

    def __init__(self, n_in: int, n_out: int, rank_n_approx: int) -> None:
        super().__init__()
        if rank_n_approx:
            self.W1 = _param(n_in, rank_n_approx)
            self.W2 = _param(rank_n_approx, n_out)
        else:
            self.W = _param(n_in, n_out)
        self.b = _param(n_out)

    def logits(
        self, x: torch.Tensor, workspace: Workspace | None = None, T: float | None = None
    ) -> torch.Tensor:
        """``z = T * (x @ W + b)`` (``W = W1 @ W2`` applied as two products with
        ``rank_n_approx``): :func:`~groundhog_port.model.functional.logits`, the one
        definition the ONNX export runs too.

        ``T``: the float32 inverse temperature of ``fprop(state_below, temp=T)``
        (cost_layers.py:961; the sampler's), None for 1.  ``workspace`` (no gradients, rows
        ``x (R, n_in)``): the logits are written into its buffer ``"z"`` (a fresh ``(R, V)``
        matrix costs its page faults every step)."""
        t = None if T is None else torch.as_tensor(T, dtype=x.dtype, device=x.device)
        ops = functional.TORCH if workspace is None else _InWorkspace(workspace)
        z: torch.Tensor = functional.logits(ops, self.weight, x, hasattr(self, "W1"), t)
        return z

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_with_bias(self.logits(x))

    @torch.no_grad()
    def target_probs(
        self, x: torch.Tensor, y: torch.Tensor, block: int = TARGET_BLOCK_ROWS
    ) -> torch.Tensor:
        """``forward(x)`` read at the words ``y`` only: ``p[..., y]`` with ``y`` of shape
        ``x.shape[:-1]`` (teacher-forced scoring), the arithmetic of
        :func:`softmax_with_bias` without its ``(rows, n_out)`` matrices.

        At 4,080 rows x 30,001 words those are 490 MB of logits and twice that as
        doubles.  Here ``block`` rows go through at a time, their logits in column blocks
        of the output matrix (:func:`~groundhog_port.model.numerics.column_blocks`), so that
        they stay in the cache from the product to the sum.  Each logit is the same dot
        product (:func:`mm` gives a row the same bits in any block of rows), the maximum
        is exact, and ``exp`` is elementwise; only the order of the double sum differs
        where the vocabulary is cut into blocks (per block, then across the blocks), which
        changes a probability only where the double sum lands within 1e-16 of a float32
        rounding boundary.
        """
        W = self.W2 if hasattr(self, "W2") else self.W
        cols = column_blocks(W.shape[1])
        x2 = x.reshape(-1, x.shape[-1])
        y2 = y.reshape(-1)
        out = x2.new_empty(x2.shape[0])
        for i in range(0, x2.shape[0], block):
            h = x2[i : i + block]
            h = mm(h, self.W1) if hasattr(self, "W1") else h
            # one product, then its column blocks: a parameter's is the packed product the
            # search multiplies by (numerics.mm); any other W's, MKL's by the same blocks
            logits = mm(h, W)
            z = [logits[:, j0:j1].add_(self.b[j0:j1]) for j0, j1 in cols]
            zmax = torch.stack([zj.amax(-1) for zj in z]).amax(0)[:, None]
            total = torch.zeros(h.shape[0], dtype=torch.float64, device=h.device)
            e_y = torch.empty(h.shape[0], dtype=h.dtype, device=h.device)
            yb = y2[i : i + block]
            for (j0, j1), zj in zip(cols, z):
                e = zj.sub_(zmax).exp_()
                total += e.sum(-1, dtype=torch.float64)
                hit = (yb >= j0) & (yb < j1)
                e_y[hit] = e[hit, yb[hit] - j0]
            out[i : i + block] = (e_y.double() * (1.0 / total)).to(h.dtype)
        return out.reshape(y.shape)


class _InWorkspace(functional.TorchOps):
    """The logits of a search step (no gradients): the output product written into the
    workspace's buffer ``"z"`` (a fresh ``(R, V)`` matrix costs its page faults every
    step), the bias added and the temperature applied in place there."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def affine(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        R = x.shape[0]
        z = self.workspace.buffer("z", (R + (-R % ROW_BLOCK), w.shape[1]), x.dtype)
        return mm(x, w, out=z).add_(b)

    def mul(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a.mul_(b)


def softmax_with_bias(z: torch.Tensor) -> torch.Tensor:
    """Theano 1.0.5's ``SoftmaxWithBias`` C kernel on float32 rows ``z``: the one definition,
    :func:`groundhog_port.model.functional.softmax_with_bias`, on torch tensors."""
    p: torch.Tensor = functional.softmax_with_bias(functional.TORCH, z)
    return p
