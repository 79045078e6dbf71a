"""The activation strings GroundHog ``eval()``s, parsed against a whitelist.

A GroundHog state names its nonlinearities as Python source: ``'lambda x: TT.tanh(x)'``,
``'Maxout(2)'``, ``'lambda x: x'`` (state.py:74-100), which the layers ``eval`` in their own
module namespaces (encdec.py:220-224 and 702/938, ff_layers.py:133/160,
rec_layers.py:141, cost_layers.py:128).  :func:`parse_activation` never evaluates the
string: it parses it with :mod:`ast` (which runs nothing) and accepts only the shapes below,
so every spacing GroundHog's ``eval`` tolerated (``'lambda x:x'``, ``'lambda y: TT.tanh(y)'``,
``'(lambda x: (x))'``) is accepted too.

============  ======================================================================
name          accepted forms (``F(x)`` may also be written as the bare ``F``)
============  ======================================================================
identity      ``lambda x: x``
tanh          ``TT.tanh``, ``theano.tensor.tanh``
sigmoid       ``TT.nnet.sigmoid``, ``theano.tensor.nnet.sigmoid``
relu          ``lambda x: x*(x>0)`` (ff_layers.py:428 ``rectifier``), ``TT.maximum(x, 0)``
hard_sigmoid  ``lambda x: x*(x>0)*(x<1)`` (ff_layers.py:429; *not* a sigmoid)
hard_tanh     ``lambda x: x*(x>-1)*(x<1)`` (ff_layers.py:430; *not* a clipped tanh)
maxout        ``Maxout(k)`` (encdec.py:541-558), k a positive integer (``2.`` allowed)
============  ======================================================================

Numerics follow Theano's float32 C code: ``sigmoid`` is exactly 0 below -88 and exactly 1
above 15 (Theano's ``ScalarSigmoid.c_code``), where ``torch.sigmoid`` would give
``1 - 6e-8`` at 16.  GroundHog's ``hard_sigmoid``/``hard_tanh`` keep their literal
definitions (``x`` inside the interval, 0 outside).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from groundhog_port.errors import LegacyInputError, quoted

#: activation strings longer than this are refused unparsed
MAX_ACTIVATION_CHARS = 200

#: canonical spelling of every accepted function, for error messages
ACCEPTED_SPELLINGS = (
    "lambda x: x",
    "lambda x: TT.tanh(x)",
    "TT.tanh",
    "lambda x: TT.nnet.sigmoid(x)",
    "TT.nnet.sigmoid",
    "lambda x: x*(x>0)",
    "lambda x: TT.maximum(x, 0)",
    "lambda x: x*(x>0)*(x<1)",
    "lambda x: x*(x>-1)*(x<1)",
    "Maxout(k)",
)


# ---------------------------------------------------------------------------
# the functions
# ---------------------------------------------------------------------------

# Theano's ScalarSigmoid.c_code cut-offs: below LOW -> 0, above HIGH -> 1
_SIGMOID_CUTOFFS = {
    torch.float16: (-11.0, 7.0),
    torch.float32: (-88.0, 15.0),
    torch.float64: (-709.0, 19.0),
}


def theano_sigmoid(x: torch.Tensor) -> torch.Tensor:
    """``TT.nnet.sigmoid`` as Theano's C code computes it: ``1 / (1 + exp(-x))`` with the
    saturation cut-offs (float32: exactly 0 for x < -88, exactly 1 for x > 15)."""
    low, high = _SIGMOID_CUTOFFS.get(x.dtype, _SIGMOID_CUTOFFS[torch.float32])
    y = 1.0 / (1.0 + torch.exp(-x))
    y = torch.where(x > high, torch.ones_like(y), y)
    return torch.where(x < low, torch.zeros_like(y), y)


def rectifier(x: torch.Tensor) -> torch.Tensor:
    """``lambda x: x*(x>0)`` (ff_layers.py:428): ``-0.0`` for negative x, NaN stays NaN."""
    return x * (x > 0)


def hard_sigmoid(x: torch.Tensor) -> torch.Tensor:
    """GroundHog's ``hard_sigmoid`` = ``x*(x>0)*(x<1)`` (ff_layers.py:429): x on (0, 1), else 0."""
    return x * (x > 0) * (x < 1)


def hard_tanh(x: torch.Tensor) -> torch.Tensor:
    """GroundHog's ``hard_tanh`` = ``x*(x>-1)*(x<1)`` (ff_layers.py:430): x on (-1, 1), else 0."""
    return x * (x > -1) * (x < 1)


def identity(x: torch.Tensor) -> torch.Tensor:
    return x


def maxout(x: torch.Tensor, k: int) -> torch.Tensor:
    """GroundHog's ``Maxout(k)`` (encdec.py:541-558) over the last axis.

    The pieces of an output unit are *consecutive* inputs: ``x.reshape(..., dim // k, k)``
    then the max over the last axis, for ``x`` of shape ``(..., dim)``.
    """
    dim = x.shape[-1]
    if dim % k:
        raise ValueError(f"maxout with {k} pieces needs a width divisible by {k}, got {dim}")
    return x.reshape(*x.shape[:-1], dim // k, k).amax(dim=-1)


_ELEMENTWISE: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "identity": identity,
    "tanh": torch.tanh,
    "sigmoid": theano_sigmoid,
    "relu": rectifier,
    "hard_sigmoid": hard_sigmoid,
    "hard_tanh": hard_tanh,
}


@dataclass(frozen=True)
class Activation:
    """A parsed activation: ``name`` (see the module table), ``k`` (maxout pieces, else
    None) and the original ``text`` (not part of equality: two spellings of one function
    are equal)."""

    name: str
    k: int | None = None
    text: str = field(default="", compare=False)

    @property
    def elementwise(self) -> bool:
        return self.name != "maxout"

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.name == "maxout":
            assert self.k is not None  # parse_activation gives every maxout its pieces
            return maxout(x, self.k)
        return _ELEMENTWISE[self.name](x)


# ---------------------------------------------------------------------------
# the parser
# ---------------------------------------------------------------------------

_NAMED_FUNCTIONS: dict[tuple[str, ...] | None, str] = {
    ("TT", "tanh"): "tanh",
    ("theano", "tensor", "tanh"): "tanh",
    ("TT", "nnet", "sigmoid"): "sigmoid",
    ("theano", "tensor", "nnet", "sigmoid"): "sigmoid",
}
_MAXIMUM = {("TT", "maximum"), ("theano", "tensor", "maximum")}


def _dotted(node: ast.AST) -> tuple[str, ...] | None:
    """``TT.nnet.sigmoid`` -> ``('TT', 'nnet', 'sigmoid')``; None for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return tuple(reversed(parts))
    return None


def _is_var(node: ast.AST, var: str) -> bool:
    return isinstance(node, ast.Name) and node.id == var


def _is_number(node: ast.AST, value: float) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _is_number(node.operand, -value)
    return (
        isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value == value
    )


def _compare(node: ast.AST, var: str) -> tuple[str, int] | None:
    """``x > c`` / ``x < c`` -> ('>', c) / ('<', c); None otherwise."""
    if (
        isinstance(node, ast.Compare)
        and len(node.ops) == 1
        and _is_var(node.left, var)
        and isinstance(node.ops[0], (ast.Gt, ast.Lt))
    ):
        for c in (0, 1, -1):
            if _is_number(node.comparators[0], c):
                return (">" if isinstance(node.ops[0], ast.Gt) else "<", c)
    return None


def _product_factors(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _product_factors(node.left) + _product_factors(node.right)
    return [node]


def _lambda_body(body: ast.AST, var: str) -> str | None:
    """Name of the function ``lambda var: body`` computes, or None."""
    if _is_var(body, var):
        return "identity"
    if isinstance(body, ast.Call) and not body.keywords:
        func = _dotted(body.func)
        if func in _NAMED_FUNCTIONS and len(body.args) == 1 and _is_var(body.args[0], var):
            return _NAMED_FUNCTIONS[func]
        if func in _MAXIMUM and len(body.args) == 2:
            a, b = body.args
            if (_is_var(a, var) and _is_number(b, 0)) or (_is_var(b, var) and _is_number(a, 0)):
                return "relu"
        return None
    factors = _product_factors(body)
    if len(factors) < 2 or sum(_is_var(f, var) for f in factors) != 1:
        return None
    conditions = sorted(_compare(f, var) or ("?", 0) for f in factors if not _is_var(f, var))
    return {
        ((">", 0),): "relu",
        (("<", 1), (">", 0)): "hard_sigmoid",
        (("<", 1), (">", -1)): "hard_tanh",
    }.get(tuple(conditions))


def _maxout_pieces(node: ast.Call) -> int | None:
    if len(node.args) + len(node.keywords) != 1:
        return None
    if node.keywords:
        if node.keywords[0].arg != "maxout_part":
            return None
        arg = node.keywords[0].value
    else:
        arg = node.args[0]
    if not isinstance(arg, ast.Constant):
        return None
    k = arg.value  # a whole or float number only (a bool is an int: refused)
    if isinstance(k, bool) or not isinstance(k, (int, float)):
        return None
    # Maxout casts shape / k and k to int64 (encdec.py:549-556): 2. acts as 2, 2.5 breaks
    if isinstance(k, float):
        if not k.is_integer():
            return None
        k = int(k)
    return k if k >= 1 else None


def parse_activation(text: str, key: str | None = None) -> Activation:
    """Parse one activation string of a GroundHog state.

    ``key`` is the state key it came from (used in error messages; when given, ``Maxout`` is
    accepted only for ``unary_activ``, the one key GroundHog eval()s where ``Maxout`` is
    defined and meaningful).  Unknown or malformed
    strings raise :class:`LegacyInputError` listing the accepted spellings; nothing is ever
    evaluated.
    """
    where = key if key is not None else "activation"

    def unknown(reason: str = "") -> LegacyInputError:
        return LegacyInputError(
            where,
            f"unknown activation {quoted(text)}{reason}; accepted spellings (any spacing, any "
            f"argument name): {', '.join(repr(s) for s in ACCEPTED_SPELLINGS)}",
        )

    if not isinstance(text, str):
        raise LegacyInputError(
            where, f"activation must be a string, got {type(text).__name__} {quoted(text)}"
        )
    if len(text) > MAX_ACTIVATION_CHARS:
        raise LegacyInputError(
            where,
            f"activation string of {len(text)} characters is too long "
            f"(at most {MAX_ACTIVATION_CHARS})",
        )
    source = text.strip()
    try:
        node = ast.parse(source, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise unknown(" (not valid Python)") from None

    if isinstance(node, ast.Call) and _dotted(node.func) == ("Maxout",):
        k = _maxout_pieces(node)
        if k is None:
            raise unknown(" (Maxout needs one positive whole number of pieces)")
        if key is not None and not str(key).endswith("unary_activ"):
            # only encdec.py's namespace defines Maxout, and only unary_activ is eval()ed
            # there as a readout (encdec.py:702, 938); elsewhere the original fails
            raise LegacyInputError(
                where,
                f"{text!r}: Maxout is only usable as unary_activ "
                "(GroundHog cannot use it for this key)",
            )
        return Activation("maxout", k, text)

    name = None
    if isinstance(node, ast.Lambda):
        args = node.args
        if len(args.args) == 1 and not (
            args.posonlyargs or args.kwonlyargs or args.vararg or args.kwarg or args.defaults
        ):
            name = _lambda_body(node.body, args.args[0].arg)
    else:
        name = _NAMED_FUNCTIONS.get(_dotted(node))
    if name is None:
        raise unknown()
    return Activation(name, None, text)
