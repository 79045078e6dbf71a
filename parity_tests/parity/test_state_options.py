"""Every architecture option of a state, varied: the port follows each as the original does.

The shared recordings run five prototypes, so many options (``bigram``, ``bias_code``,
``deep_out``, the gates and their activations, ``check_first_word``...) hold one value in
all of them, and a port that ignored such an option would pass every recording (issue 53,
item 2).  Here each variant below changes a prototype's options; a tiny random model of
that architecture is recorded by the numpy float32 stand-in (``tools/numpy_groundhog.py``,
written from the original's encdec.py / rec_layers.py, never from the port), which also
draws exactly the weights the original would save for it; then:

* ``parity`` passes on the recording (``/repr``, ``/pairs``, ``/steps``, ``/beam/5``:
  annotations, word probabilities, alignments, step probabilities and states, n-best
  translations and costs);
* each option of the variant changes what the stand-in computes: with that one option
  back at the prototype's value, the same weights give other word or step probabilities
  (or do not fit the architecture at all), so the recording pins it.

``docs/options.md`` names the variant of each option (``tools/option_table.py``), and
``tools/mutation_sweep.py --state-keys`` proves these tests fail when the port ignores it.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from parity_tests.support.tools import REPO

sys.path.insert(0, str(REPO / "tools"))

from numpy_trace_producer import VARIANTS  # noqa: E402

SIZES = dict(dim=12, rank=6, vocab=24)


def variant_keys(name: str) -> list[str]:
    return sorted(k for k in VARIANTS[name] if k != "prototype")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """``name -> case folder`` recorded on first use."""
    from numpy_trace_producer import produce

    made: dict[str, object] = {}

    def get(name):
        if name not in made:
            d = tmp_path_factory.mktemp(name)
            produce(
                d,
                **SIZES,
                sentences=3,
                labels=("5",),
                n_steps=1,
                seed=sorted(VARIANTS).index(name) + 11,
                log=lambda s: None,
                words=(3, 7),
                variant=VARIANTS[name],
            )
            made[name] = d
        return made[name]

    return get


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variant_passes_parity(name, recorded):
    """The port reproduces the stand-in on this architecture, every group within bound."""
    from groundhog_port.harness.check import check_case

    report = check_case(recorded(name))
    assert report.ok, report.table()
    checked = {r.quantity for r in report.rows if r.n}
    assert {"repr/c", "pairs/word_probs", "steps/next_probs", "beam/5/fin_costs"} <= checked


def fingerprint(state, params, src, trg):
    """What the stand-in computes on one pair: word probabilities by teacher forcing, and the
    step probabilities of the first two steps of a search (where ``check_first_word``
    acts)."""
    from numpy_groundhog import NumpyGroundHog

    m = NumpyGroundHog(state, params)
    word_probs, _, _ = m.score(src, trg)
    c = m.encode(src)
    p_from_c, s = m.p_from_c(c), m.initial_state(c)
    first = m.next_probs_fn(c, 0, p_from_c, np.zeros(1, np.int64), s)
    s = m.next_states_fn(c, 0, p_from_c, trg[:1], s)
    second = m.next_probs_fn(c, 1, p_from_c, trg[:1], s)
    return np.concatenate([word_probs, first.ravel(), second.ravel()])


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_each_option_of_the_variant_changes_the_outputs(name, recorded):
    """With any one option back at its prototype value (a prefixed key: removed, so the
    un-prefixed one is read), the recorded weights give other probabilities, or do not fit:
    no option of a variant is along for the ride."""
    import pickle

    import legacy_states

    case = recorded(name)
    state = pickle.loads((case / "random_state.pkl").read_bytes())
    params = dict(np.load(case / "random_model.npz"))
    src, trg = np.asarray([2, 5, 3, 23]), np.asarray([4, 2, 7, 23])
    base = fingerprint(state, params, src, trg)
    proto = getattr(legacy_states, VARIANTS[name]["prototype"])()
    for key in variant_keys(name):
        reset = {k: v for k, v in state.items() if k != key}
        if key in proto:
            reset[key] = proto[key]
        try:
            other = fingerprint(reset, params, src, trg)
        except (KeyError, ValueError):  # a weight missing or of another shape
            continue
        assert not np.allclose(other, base, rtol=1e-3, atol=1e-6), f"{key} changes nothing"
