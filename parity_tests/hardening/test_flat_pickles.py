"""The quick pass over flat dicts (:mod:`legacy_states.flat`, issue 54) against the walk.

A pickle the quick pass accepts is unpickled without the general walk of
:mod:`legacy_states.prescan`; these tests hold it to what the walk would have let through:
the same value or the same error through :func:`safe_load_pickle`, and the walk's
estimate, on every vocabulary recorded and on mutations of them.
"""

import pickle
import random
from unittest import mock

import pytest

from groundhog_port import budget
from groundhog_port.errors import LegacyInputError
from legacy_states import safe_load_pickle, unpickle
from legacy_states.flat import flat_dict
from legacy_states.prescan import _Stop, _Walk
from parity_tests.support.cases import LEGACY_ROOT

VOCABULARIES = sorted(LEGACY_ROOT.glob("*/*vocab*.pkl"))
#: opcodes a mutation inserts: the ones the quick pass knows and a few it must not accept
OPCODES = b"().}dsuqrpSVIXUTKMJ\x8c\x94\x95\x8a\x80N]l"


def _outcome(path, general: bool):
    """``safe_load_pickle(path)``'s value or error line, by the quick pass or (``general``)
    by the walk alone."""
    patch = mock.patch.object(unpickle, "flat_dict", lambda data, limit: None)
    try:
        if general:
            with patch:
                value = safe_load_pickle(path)
        else:
            value = safe_load_pickle(path)
    except LegacyInputError as err:
        return ("error", str(err))
    return ("value", value, sorted({type(x).__name__ for kv in value.items() for x in kv}))


def _walk_cost(data: bytes) -> int:
    walk = _Walk(data, "x")
    try:
        walk.run()
    except _Stop:
        pass
    return walk.cost


@pytest.mark.skipif(not VOCABULARIES, reason="no ../shared/legacy_traces beside the checkout")
@pytest.mark.parametrize("path", VOCABULARIES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_recorded_vocabularies_take_the_quick_pass(path):
    """Every vocabulary GroundHog wrote (protocol 2 vocab, protocol 0 ivocab) is a flat dict
    to the quick pass, loads to what the walk's route loads, with the walk's estimate."""
    data = path.read_bytes()
    flat = flat_dict(data, budget.budget_bytes())
    assert flat is not None and flat.entries == len(safe_load_pickle(path))
    assert flat.estimate == _walk_cost(data)
    assert _outcome(path, general=False) == _outcome(path, general=True)


def _sources():
    """Flat dicts as GroundHog (Python 2) and Python 3 write them: the recorded files and
    the same words re-pickled with text keys at protocols 0, 2 and 4 (FRAME, MEMOIZE)."""
    words = [f"w{i}" for i in range(120)] + ["café", "naïve", "x'y", 'q"z', "a\\b"]
    out = [(f"recorded {p.name}", p.read_bytes()) for p in VOCABULARIES[:4]]
    for proto in (0, 2, 4):
        out.append((f"vocab p{proto}", pickle.dumps({w: i for i, w in enumerate(words)}, proto)))
        out.append((f"ivocab p{proto}", pickle.dumps(dict(enumerate(words)), proto)))
    out.append(("bytes keys p3", pickle.dumps({w.encode(): i for i, w in enumerate(words)}, 3)))
    return out


def _mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    kind = rng.randrange(5)
    pos = rng.randrange(len(b))
    if kind == 0:  # flip bytes
        for _ in range(rng.randint(1, 3)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif kind == 1:  # truncate
        del b[pos:]
    elif kind == 2:  # an opcode inserted
        b[pos:pos] = bytes([rng.choice(OPCODES)])
    elif kind == 3:  # a run duplicated
        n = rng.randint(1, 12)
        b[pos:pos] = b[pos : pos + n]
    else:  # a run deleted
        del b[pos : pos + rng.randint(1, 12)]
    return bytes(b)


def test_mutated_flat_dicts_get_what_the_walk_gives(tmp_path):
    """Mutated vocabularies: whenever the quick pass accepts one, the walk's route returns
    the same value (or the same error from the unpickler), and the quick pass estimates
    what the walk charges.  Many mutations stay flat dicts (a flipped byte
    in a word, a duplicated entry) and take the quick pass."""
    rng = random.Random(54)
    accepted = errors = total = 0
    for name, data in _sources():
        assert flat_dict(data, budget.budget_bytes()) is not None, name
        for i in range(120):
            mutated = _mutate(data, rng)
            total += 1
            flat = flat_dict(mutated, budget.budget_bytes())
            if flat is None:
                continue
            accepted += 1
            path = tmp_path / f"m{i}.pkl"
            path.write_bytes(mutated)
            quick, general = _outcome(path, False), _outcome(path, True)
            assert quick == general, (name, i, mutated)
            assert flat.estimate == _walk_cost(mutated), (name, i)
            errors += quick[0] == "error"
    # the route is exercised: one mutation in ten or more stays a flat dict, some of them
    # fail in the unpickler (a flipped byte in a length, a word that is not UTF-8)
    assert accepted * 10 >= total and errors >= 20, (accepted, errors, total)


@pytest.mark.parametrize(
    "data, refusal",
    [
        # an INT key of 2**31: hashable alike with others far apart (the walk refuses it)
        (b"(dp0\nI2147483648\nS'w'\np1\ns.", "a dict key that is an integer of 2"),
        # a memo index beyond the file: the C unpickler would size its memo to it
        (b"\x80\x02}q\x00(X\x01\x00\x00\x00wr\x00\x00\x00\x10K\x01u.", "memo index"),
        # a key of 5000 digits (int() refuses past 4300): the walk calls it a big integer
        (b"(dp0\nI" + b"7" * 5000 + b"\nS'w'\np1\ns.", "a dict key that is an integer of 2"),
        # a PUT of 5000 digits (int() refuses past 4300: it escaped the walk as ValueError)
        (b"(dp" + b"1" * 5000 + b"\n.", "memo index of 5000 digits"),
        # a tuple key: not a flat dict
        (b"\x80\x02}(K\x01K\x02\x86X\x01\x00\x00\x00wu.", "a dict key that is a tuple"),
        # a MARK above a lone item: the big key under it is still a key to the walk
        (b"(dp0\nI1\n(I9999999999\nS'w'\nI2\nu.", "a dict key that is an integer of 2"),
        # a key without its value: the unpickler says so
        (b"\x80\x02}(K\x01u.", "corrupt pickle"),
    ],
)
def test_what_the_quick_pass_leaves_to_the_walk(tmp_path, data, refusal):
    """Keys the walk refuses, memo indices it refuses, containers: the quick pass answers
    None, and the walk's refusal is what the user gets."""
    assert flat_dict(data, budget.budget_bytes()) is None
    assert flat_dict(b"\x80\x02}}.", budget.budget_bytes()) is None  # two dicts are not one
    path = tmp_path / "v.pkl"
    path.write_bytes(data)
    with pytest.raises(LegacyInputError, match=refusal):
        safe_load_pickle(path)


def test_the_quick_pass_leaves_an_estimate_over_the_budget_to_the_walk(tmp_path, monkeypatch):
    """A vocabulary over the parse budget: the quick pass declines and the walk's
    over-budget error names the file."""
    data = pickle.dumps({f"w{i}": i for i in range(20_000)}, 2)
    estimate = flat_dict(data, 1 << 40).estimate
    assert flat_dict(data, estimate) is not None and flat_dict(data, estimate - 1) is None
    monkeypatch.setenv(budget.ENV, "1")  # 1 MiB
    assert estimate > budget.budget_bytes()
    path = tmp_path / "vocab.pkl"
    path.write_bytes(data)
    with pytest.raises(LegacyInputError, match="parse budget"):
        safe_load_pickle(path)
