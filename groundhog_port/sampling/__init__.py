"""Random sampling as GroundHog's sample.py does it without ``--beam-search``.

* :mod:`.mrg` -- Theano's MRG31k3p generator (streams, substreams, float32 uniforms), exact;
* :mod:`.seed` -- the stream seed, derived from the state as GroundHog's layer construction
  draws it;
* :mod:`.draw` -- one step's primitives (the calls the scan refuses, the multinomial draw);
* :mod:`.sampler` -- ``sample_fn`` and ``sample()``: one sampling loop over the model's
  decoding interface (:mod:`groundhog_port.model.decoding`), for one sentence (the literal
  path) or many at once (the same draws).

The ``/sampler`` checks of ``groundhog-port parity`` are
:mod:`groundhog_port.harness.groups.sampler`; the command (``translate`` without
``--beam-search``) is :mod:`groundhog_port.cli.sample`.

Library use::

    from groundhog_port.legacy.loading import open_experiment
    from groundhog_port.sampling import Sampler
    exp = open_experiment("search_state.pkl", "search_model.npz")
    sampler = Sampler(exp)                        # stream seeded as sample.py seeds it
    seq, _ = exp.parse_source("the cat is red .")
    s = sampler.sample(seq, n_samples=5, inverse_temperature=1.0)
    s.sentences, s.costs                          # what sample() returns
    many = sampler.sample_many(seqs, 5, 1.0, batch_size=32)   # continues the same stream
"""

from .draw import Draw, SamplingFailed, multinomial_from_uniform
from .mrg import MRGRandomStreams, StateMatrix
from .sampler import Sampler, Samples
from .seed import derive_mrg_seed

__all__ = [
    "MRGRandomStreams",
    "StateMatrix",
    "Draw",
    "Sampler",
    "Samples",
    "SamplingFailed",
    "multinomial_from_uniform",
    "derive_mrg_seed",
]
