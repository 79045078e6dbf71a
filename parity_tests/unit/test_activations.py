"""groundhog_port.model.activations: whitelist parsing of GroundHog's activation strings.

Every activation string of the five prototypes and of every recorded state must parse
to the function GroundHog's ``eval`` gave; nothing may ever be evaluated.
"""

import numpy as np
import pytest
import torch

from groundhog_port.errors import LegacyInputError
from groundhog_port.model.activations import (
    ACCEPTED_SPELLINGS,
    Activation,
    maxout,
    parse_activation,
    theano_sigmoid,
)
from legacy_states import PROTOTYPES, load_state
from parity_tests.support.cases import case_dirs
from parity_tests.support.evaluation import assert_never_evaluated

#: state keys holding activation strings (state.py:74-100)
ACTIVATION_KEYS = (
    "rank_n_activ",
    "activ",
    "unary_activ",
    "enc_rec_gater",
    "enc_rec_reseter",
    "dec_rec_gater",
    "dec_rec_reseter",
    "rec_gater",
    "rec_reseter",
)


@pytest.mark.parametrize(
    "text, name, k",
    [
        # state.py spellings
        ("lambda x: x", "identity", None),
        ("lambda x: TT.tanh(x)", "tanh", None),
        ("Maxout(2)", "maxout", 2),
        ("lambda x: TT.nnet.sigmoid(x)", "sigmoid", None),
        # encdec.py / ff_layers.py defaults and layer arguments
        ("lambda x:x", "identity", None),
        ("TT.tanh", "tanh", None),  # MultiLayer default (ff_layers.py:36)
        ("lambda x: x*(x>0)", "relu", None),  # ff_layers.py:428 rectifier
        ("lambda x: x*(x>0)*(x<1)", "hard_sigmoid", None),  # ff_layers.py:429
        ("lambda x: x*(x>-1)*(x<1)", "hard_tanh", None),  # ff_layers.py:430
        # recorded encdec_variant / other spacings GroundHog's eval accepted
        ("Maxout(4)", "maxout", 4),
        ("Maxout(2.)", "maxout", 2),
        ("Maxout( maxout_part = 3 )", "maxout", 3),
        ("lambda x:TT.tanh(x)", "tanh", None),
        ("  lambda  x :  TT.tanh( x )  ", "tanh", None),
        ("lambda h: TT.tanh(h)", "tanh", None),
        ("(lambda x: (TT.nnet.sigmoid(x)))", "sigmoid", None),
        ("TT.nnet.sigmoid", "sigmoid", None),
        ("theano.tensor.nnet.sigmoid", "sigmoid", None),
        ("lambda x: TT.maximum(x, 0)", "relu", None),
        ("lambda x: TT.maximum(0., x)", "relu", None),
        ("lambda x: (x > 0) * x", "relu", None),
    ],
)
def test_spellings(text, name, k):
    act = parse_activation(text, "unary_activ")
    assert (act.name, act.k, act.text) == (name, k, text)
    assert act.elementwise == (name != "maxout")


def test_every_prototype_and_recorded_activation_parses():
    expect = {"rank_n_activ": "identity", "activ": "tanh", "unary_activ": "maxout"}
    states = [fn() for fn in PROTOTYPES.values()]
    states += [load_state(next(d.glob("*state.pkl"))) for d in case_dirs()]
    seen = set()
    for state in states:
        for key in ACTIVATION_KEYS:
            act = parse_activation(state[key], key)
            assert act.name == expect.get(key, "sigmoid"), (key, state[key])
            seen.add(state[key])
    assert {"Maxout(2)", "Maxout(4)"} <= seen or not case_dirs()


@pytest.mark.parametrize(
    "text",
    [
        "lambda x: TT.exp(x)",
        "TT.nnet.softmax",
        "tanh",  # not a name in any eval namespace of GroundHog's NMT code
        "lambda x: TT.tanh(y)",
        "lambda x, y: x",
        "lambda x=1: x",
        "lambda x: x*(x>1)",
        "lambda x: x*x*(x>0)",
        "Maxout",
        "Maxout(0)",
        "Maxout(-2)",
        "Maxout(2.5)",
        "Maxout(True)",
        "Maxout('2')",
        "Maxout(2, 3)",
        "",
        "lambda x: ",
        "lambda x: x\nimport os",
        "__import__('os').system('echo hi')",
        "[linear]",
    ],
)
def test_unknown_activation(text):
    with pytest.raises(LegacyInputError) as err:
        parse_activation(text, "dec_rec_gater" if "Maxout" not in text else "unary_activ")
    message = str(err.value)
    assert message.startswith(
        ("dec_rec_gater: unknown activation ", "unary_activ: unknown activation ")
    )
    assert repr(text) in message
    assert all(repr(s) in message for s in ACCEPTED_SPELLINGS)


def test_never_evaluated(tmp_path):
    templates = ("{touch}", "lambda x: {touch}", "Maxout({touch})", "{open}")
    assert_never_evaluated(
        lambda text: parse_activation(text, "activ"), templates, "unknown activation", tmp_path
    )


def test_bad_types_and_lengths():
    with pytest.raises(LegacyInputError, match="must be a string"):
        parse_activation(None, "activ")
    with pytest.raises(LegacyInputError, match="too long"):
        parse_activation("lambda x: " + "(" * 500 + "x" + ")" * 500, "activ")
    with pytest.raises(LegacyInputError, match="^activation: unknown"):
        parse_activation("nope")


def test_maxout_only_for_unary_activ():
    assert parse_activation("Maxout(2)", "unary_activ").k == 2
    assert parse_activation("Maxout(2)").k == 2
    for key in ("activ", "dec_activ", "rank_n_activ", "rec_gater"):
        with pytest.raises(
            LegacyInputError, match=f"^{key}: 'Maxout\\(2\\)': Maxout is only usable as unary_activ"
        ):
            parse_activation("Maxout(2)", key)


def test_equality_ignores_spelling():
    assert parse_activation("lambda x: TT.tanh(x)") == parse_activation("TT.tanh")
    assert parse_activation("Maxout(2)") != parse_activation("Maxout(4)")
    assert hash(parse_activation("lambda x:x")) == hash(Activation("identity"))
    with pytest.raises(AttributeError):
        parse_activation("TT.tanh").name = "sigmoid"


# --- numerics -----------------------------------------------------------------------------


def _x():
    return torch.linspace(-100, 100, 20001, dtype=torch.float32)


def test_tanh_and_identity_values():
    x = _x()
    assert torch.equal(parse_activation("lambda x: TT.tanh(x)")(x), torch.tanh(x))
    assert parse_activation("lambda x: x")(x) is x


def test_sigmoid_is_theanos_float32_formula():
    x = _x()
    y = parse_activation("lambda x: TT.nnet.sigmoid(x)")(x)
    assert y.dtype == torch.float32
    # Theano ScalarSigmoid.c_code, float32: x < -88 -> 0, x > 15 -> 1, else 1/(1+exp(-x))
    xn = x.numpy()
    with np.errstate(over="ignore"):
        ref = np.float32(1) / (np.float32(1) + np.exp(-xn))
    ref = np.where(xn > 15, np.float32(1), np.where(xn < -88, np.float32(0), ref))
    inside = (xn >= -88) & (xn <= 15)
    assert np.array_equal(y.numpy()[~inside], ref[~inside])
    # inside, only the float32 exp implementations (torch / numpy / glibc expf) differ
    np.testing.assert_allclose(y.numpy()[inside], ref[inside], rtol=1e-6, atol=0)
    # the cut-offs themselves: torch.sigmoid(16) is not 1 in float32, Theano's is
    at = torch.tensor([15.5, 16.0, -88.5, 15.0], dtype=torch.float32)
    got = theano_sigmoid(at)
    assert got[:3].tolist() == [1.0, 1.0, 0.0] and got[3].item() < 1.0
    assert torch.sigmoid(torch.tensor(16.0)).item() < 1.0
    # float64: cut-offs at -709 / 19
    assert theano_sigmoid(torch.tensor([19.5, -709.5], dtype=torch.float64)).tolist() == [1.0, 0.0]


def test_sigmoid_row_independent():
    x = torch.randn(37, 101) * 8
    full = theano_sigmoid(x)
    assert all(torch.equal(theano_sigmoid(x[i : i + 1]), full[i : i + 1]) for i in range(0, 37, 5))


def test_relu_and_hard_functions_literal():
    x = torch.tensor([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, float("nan")])
    relu = parse_activation("lambda x: x*(x>0)")(x)
    assert relu[:-1].tolist() == [0.0, 0.0, 0.0, 0.0, 0.5, 1.0, 2.0] and torch.isnan(relu[-1])
    assert torch.signbit(relu[0])  # -2 * False = -0.0, as x*(x>0) gives
    assert torch.equal(parse_activation("lambda x: TT.maximum(x, 0)")(x[:-1]), relu[:-1])
    assert parse_activation("lambda x: x*(x>0)*(x<1)")(x)[:-1].tolist() == [0, 0, 0, 0, 0.5, 0, 0]
    assert parse_activation("lambda x: x*(x>-1)*(x<1)")(x)[:-1].tolist() == [
        0,
        0,
        -0.5,
        0,
        0.5,
        0,
        0,
    ]


def test_maxout_groups_consecutive_units():
    x = torch.arange(24, dtype=torch.float32).reshape(2, 12) * torch.tensor([1.0, -1.0]).repeat(6)
    for k in (2, 3, 4):
        want = x.numpy().reshape(2, 12 // k, k).max(-1)  # encdec.py:553-556 (2-D input)
        assert np.array_equal(parse_activation(f"Maxout({k})")(x).numpy(), want)
        assert np.array_equal(
            maxout(x[0], k).numpy(), x[0].numpy().reshape(12 // k, k).max(-1)
        )  # 1-D
    with pytest.raises(ValueError, match="divisible"):
        maxout(torch.zeros(3, 10), 4)
