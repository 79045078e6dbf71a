"""float32's rounding simulated on a float64 computation, operation by operation.

:meth:`~groundhog_port.model.encdec.RNNEncoderDecoder.float32_probe` perturbs the weights
(backward error analysis of a dot product).  That misses the rounding of a quantity whose
terms cancel whatever the weights are: with every annotation position holding the same
vector, the attention is uniform for any ``A``, ``B``, ``D``, and the exact gradient of
those weights is 0 -- a weight-perturbed float64 run returns 0 as well (~1e-20), where
float32 returns the rounding of each term of the sums (~1e-11).

:class:`Float32Rounding` instead perturbs what float32 rounds (Monte Carlo arithmetic,
Parker 1997), forward and backward alike (autograd's backward operations pass through it
too), in a float64 run of the port's own code:

* every operation in :data:`CONTRACTING` (a product, a sum, a softmax's backward, an
  embedding gradient's accumulation) gets its first floating input multiplied elementwise
  by ``1 + U32 * z``: each term of each dot product or sum then carries its own rounding,
  so a sum that cancels returns ``sum_k U32 z_k t_k`` -- the size of the terms, not of the
  result;
* every result of an operation in :data:`CONTRACTING` or :data:`ROUNDING` is multiplied by
  ``1 + U32 * z`` (its own final rounding; an in-place operation's too, its inputs left);

``z`` uniform in [-1, 1] from a seeded generator, ``U32 = 2**-24`` (round to nearest:
``|fl(x) - x| <= U32 |x|``).  Operations that do not round (copies, views, indexing,
comparisons, maxima, ``where``, negation) are left alone.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

#: float32 unit roundoff
U32 = 2.0**-24

#: operations whose result is a sum of products or of terms: each term rounds
CONTRACTING = frozenset(
    {
        "mm", "bmm", "addmm", "baddbmm", "addbmm", "matmul", "dot", "mv", "addmv",
        "sum", "mean", "cumsum", "prod", "linalg_vector_norm", "norm", "index_add",
        "scatter_add", "embedding_dense_backward", "_index_put_impl", "index_put",
        "_softmax_backward_data",
        "_log_softmax_backward_data", "_softmax", "_log_softmax",
    }
)  # fmt: skip
#: element-wise operations that round their result once
ROUNDING = frozenset(
    {
        "add", "sub", "rsub", "mul", "div", "exp", "log", "log1p", "expm1", "tanh",
        "sigmoid", "pow", "sqrt", "rsqrt", "reciprocal", "tanh_backward", "sigmoid_backward",
        "addcmul", "addcdiv", "lerp",
        "_to_copy",  # a conversion (the double -> float32 of the output softmax)
    }
)  # fmt: skip


class Float32Rounding(TorchDispatchMode):
    """``with Float32Rounding(seed):`` float64 operations round as float32 would (see the
    module docstring); other dtypes pass through."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        self.gen = torch.Generator(device="cpu").manual_seed(int(seed))

    def _jitter(self, t: torch.Tensor) -> torch.Tensor:
        z = torch.rand(t.shape, generator=self.gen, dtype=torch.float64).to(t.device)
        return z.mul_(2 * U32).add_(1 - U32)  # 1 + U32 * uniform(-1, 1)

    def _rounds(self, t: Any) -> bool:
        return isinstance(t, torch.Tensor) and t.dtype == torch.float64 and t.numel() > 0

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__.rstrip("_")
        if name in CONTRACTING:
            i = next((k for k, a in enumerate(args) if self._rounds(a)), None)
            if i is not None and not func.overloadpacket.__name__.endswith("_"):
                args = (*args[:i], args[i] * self._jitter(args[i]), *args[i + 1 :])
        out = func(*args, **kwargs)
        if (name in CONTRACTING or name in ROUNDING) and self._rounds(out):
            out.mul_(self._jitter(out))
        return out
