"""sample.py's random sampler: ``create_sampler`` / ``build_sampler`` and ``sample()``.

``sample_fn(n_samples, n_steps, T, seq)`` (encdec.py:1426, the scan of
``Decoder.build_sampler``, encdec.py:1235) draws ``n_samples`` translations word by word,
all ``n_steps`` long (it never stops at end-of-sequence).  Step ``k`` (``sampling_step``,
encdec.py:1201) from previous words ``y`` (zeros at k = 0) and states ``s`` (the initial
state replicated)::

    p    = softmax(T * (readout(s, ctx_k, y) @ W + b))    fprop with temp, cost_layers.py:961
    u    = MRG uniforms, one per sample                    multinomial -> uniform, rng_mrg.py:906
    y'   = first word m with  sum_{j<=m} p_j > u  (double sum; 0 if none)   multinomial.py:112
    nlp  = -log p[y']                                      get_cost, cost_layers.py:1132
    s'   = GRU(s, y', ctx_k)                               the second build_decoder call

``p`` is the float32 softmax of :func:`groundhog_port.model.layers.softmax_with_bias` (Theano's
``Softmax`` op on ``T * z`` computes like ``SoftmaxWithBias`` on ``z``); ``T`` is the
float32 inverse temperature (``alpha``).  Without attention the context is
``c[min(k, S - 1)]`` (``PadLayer(n_steps)`` then ``c_pos``, encdec.py:1027 and 1242,
select the same row).

``sample()`` (sample.py:163-188) then cuts each sample at its first ``<eol>`` word and
returns ``cost = -sum(nlp[:len + 1])`` (the float32 sum numpy makes; a log-probability,
higher is better), with ``--normalize`` divided by the number of words of the sentence
(``len(s.strip().split(" "))``: an empty sentence counts 1).

The stream: one :class:`~groundhog_port.sampling.mrg.StateMatrix` per process, created
from the output layer's ``MRG_RandomStreams`` (:mod:`groundhog_port.sampling.seed`) and
continued by every call, as successive calls of one sample.py process continue it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..legacy.data import legacy_argsort
from ..legacy.experiment import Experiment
from ..legacy.vocab import indices_to_words
from ..model import decoding
from ..model.encdec import RNNEncoderDecoder
from ..model.output import probabilities_of_costs
from ..model.workspace import Workspace
from ..search.common import legacy_log
from .draw import (
    Draw,
    SamplingFailed,
    boundary_margin,
    check_call,
    multinomial_from_uniform,
    n_steps_for,
    temperature,
)
from .mrg import MRGRandomStreams, StateMatrix
from .seed import derive_mrg_seed


@dataclass
class Samples:
    """What ``sample()`` returns with a sampler (sample.py:163-188), plus the raw draw.

    ``costs[i]`` is sample ``i``'s log-probability (``numpy.float32``, also when
    normalised), ``word_probs[i]`` its per-word probabilities ``exp(-nlp)`` up to
    and including the first ``<eol>``.
    """

    sentences: list[str]
    costs: list[np.float32]
    word_probs: list[np.ndarray]
    draw: Draw
    normalize: bool = False
    order: list[int] = field(default_factory=list)  # numpy.argsort(costs), sample.py:183

    def verbose_lines(self) -> list[str]:
        """The lines ``sample(..., verbose=True)`` prints (sample.py:184-187).

        ``"{}".format`` of a numpy scalar under Python 2 wrote ``float(x)``'s repr: a
        float32 cost with all the digits of its float64 value (``15.752870559692383``, not
        numpy's own ``str``, ``15.752871``); the probabilities are numpy's array printing.
        """
        lines = [
            f"{i}: {legacy_format(-self.costs[i])} {self.word_probs[i]} {self.sentences[i]}"
            for i in self.order
        ]
        return lines + [""]


def legacy_format(x: float | np.floating[Any]) -> str:
    """``"{}".format(x)`` of a numpy float under Python 2 (sample.py:186): ``repr(float(x))``."""
    return repr(float(x))


class Sampler:
    """``sample_fn`` with its MRG stream, for one model (the literal, one-sentence path).

    ``mrg_seed``: the output layer's stream seed (default: derived from the state,
    :func:`~groundhog_port.sampling.seed.derive_mrg_seed`).  ``stream``: a
    :class:`StateMatrix` to continue instead (e.g. a copy of another sampler's).
    """

    def __init__(
        self,
        experiment: Experiment,
        mrg_seed: int | None = None,
        stream: StateMatrix | None = None,
    ) -> None:
        self.exp = experiment
        self.model = experiment.model
        if stream is None:
            if mrg_seed is None:
                mrg_seed = derive_mrg_seed(experiment.state, experiment.cfg, experiment.state_path)
            self.mrg_seed: int | None = int(mrg_seed)
            self.streams: MRGRandomStreams | None = MRGRandomStreams(self.mrg_seed)
            # build() creates two random ops in sampling_step (encdec.py:1228-1229); the
            # scan's draws use the first one, the second is never evaluated
            self.stream = self.streams.new_state_matrix()
            self.unused_stream: StateMatrix | None = self.streams.new_state_matrix()
        else:
            self.mrg_seed, self.streams, self.unused_stream = mrg_seed, None, None
            self.stream = stream

    @torch.no_grad()
    def sample_fn(
        self,
        n_samples: int,
        n_steps: int,
        inverse_temperature: float,
        seq: Sequence[int] | np.ndarray,
    ) -> Draw:
        """``sample_fn(n_samples, n_steps, T, seq)``: a :class:`Draw`; continues the stream."""
        check_call(n_samples, n_steps)
        unis = [self.stream.uniform(n_samples) for _ in range(n_steps)]
        return draw_sentence(
            self.model, seq, n_samples, n_steps, temperature(inverse_temperature), unis
        )

    def sample(
        self,
        seq: Sequence[int] | np.ndarray,
        n_samples: int,
        inverse_temperature: float = 1.0,
        normalize: bool = False,
    ) -> Samples:
        """``sample(lm_model, seq, n_samples, sampler=..., alpha=...)`` (sample.py:163; its
        ``alpha`` is the inverse temperature)."""
        draw = self.sample_fn(n_samples, n_steps_for(seq), inverse_temperature, seq)
        return finish(draw, self.exp.trg_idx2word, normalize)

    def sample_many(
        self,
        seqs: Sequence[Sequence[int] | np.ndarray],
        n_samples: int,
        inverse_temperature: float = 1.0,
        normalize: bool = False,
        batch_size: int = 32,
    ) -> list[Samples | SamplingFailed]:
        """:meth:`sample` on every ``seq`` in order, as successive calls of one process:
        a list of :class:`Samples` or :class:`SamplingFailed` (those draw nothing).

        ``batch_size > 1`` decodes that many sentences at once (:func:`draw_many`) with the
        same draws; 1 is the literal loop, sentence after sentence.
        """
        if batch_size <= 1:
            literal: list[Samples | SamplingFailed] = []
            for seq in seqs:
                try:
                    literal.append(self.sample(seq, n_samples, inverse_temperature, normalize))
                except SamplingFailed as err:
                    literal.append(err)
            return literal
        T = temperature(inverse_temperature)
        out: list[Samples | SamplingFailed | None] = [None] * len(seqs)
        todo = []
        for i, seq in enumerate(seqs):
            steps = n_steps_for(seq)
            try:
                check_call(n_samples, steps)
            except SamplingFailed as err:
                out[i] = err
                continue
            todo.append((i, steps, [self.stream.uniform(n_samples) for _ in range(steps)]))
        if todo:
            draws = draw_many(
                self.model,
                [seqs[i] for i, _, _ in todo],
                n_samples,
                [s for _, s, _ in todo],
                T,
                [u for _, _, u in todo],
                batch_size,
            )
            for (i, _, _), draw in zip(todo, draws):
                out[i] = finish(draw, self.exp.trg_idx2word, normalize)
        done = [o for o in out if o is not None]
        assert len(done) == len(out)  # each sentence got its samples or its failure
        return done

    def skip(self, seq: Sequence[int] | np.ndarray, n_samples: int) -> None:
        """Advance the stream as sampling ``seq`` would, without decoding (``--resume``)."""
        steps = n_steps_for(seq)
        try:
            check_call(n_samples, steps)
        except SamplingFailed:
            return
        for _ in range(steps):
            self.stream.uniform(n_samples)


def draw_sentence(
    model: RNNEncoderDecoder,
    seq: Sequence[int] | np.ndarray,
    n_samples: int,
    n_steps: int,
    T: float,
    unis: Sequence[np.ndarray] | None,
    forced_ids: np.ndarray | None = None,
) -> Draw:
    """The scan of ``build_sampler`` for one sentence with the given uniforms: the sampling
    loop (:func:`draw_group`) on a group of that one sentence, with each drawn word's margin.

    ``unis``: ``n_steps`` float32 arrays of ``n_samples`` uniforms.  ``forced_ids``
    (``(n_steps, n_samples)``): take these words instead of drawing (the float64 shadow
    replays a draw this way); then ``unis`` may be None.
    """
    return draw_group(
        model,
        [seq],
        n_samples,
        [n_steps],
        T,
        None if unis is None else [unis],
        None if forced_ids is None else [forced_ids],
        margins=forced_ids is None,
    )[0]


def draw_many(
    model: RNNEncoderDecoder,
    seqs: Sequence[Sequence[int] | np.ndarray],
    n_samples: int,
    n_steps: Sequence[int],
    T: float,
    unis: Sequence[Sequence[np.ndarray]],
    batch_size: int = 32,
) -> list[Draw]:
    """One :class:`Draw` per sentence, in input order, ``batch_size`` sentences decoded
    together (grouped by source length) with exactly the draws of one sentence at a time.

    sample.py samples its sentences one after the other from ONE MRG stream; how far a
    sentence's calls advance the stream depends only on how many uniforms they draw
    (``n_steps * n_samples``), never on their values, so the caller draws every sentence's
    uniforms first, in sentence order (``unis[i]``: sentence ``i``'s ``n_steps[i]`` float32
    arrays of ``n_samples`` uniforms).  A row's numbers are the one-sentence loop's bit for bit
    (the decoding interface's rows do not depend on the other rows), so the drawn words -- a
    double running sum compared with the uniform -- are the same too
    (``parity_tests/parity/test_sampling.py``)."""
    for s in n_steps:
        check_call(n_samples, s)
    seqs = [np.asarray(s, dtype=np.int64) for s in seqs]
    order = sorted(range(len(seqs)), key=lambda i: (len(seqs[i]), i))
    out: list[Draw | None] = [None] * len(seqs)
    workspace = Workspace(model.device)
    size = max(1, int(batch_size))
    for g in range(0, len(order), size):
        group = order[g : g + size]
        draws = draw_group(
            model,
            [seqs[i] for i in group],
            n_samples,
            [n_steps[i] for i in group],
            T,
            [unis[i] for i in group],
            workspace=workspace,
        )
        for i, d in zip(group, draws):
            out[i] = d
    workspace.release()
    done = [d for d in out if d is not None]
    assert len(done) == len(out)  # every sentence is in a group
    return done


@torch.no_grad()
def draw_group(
    model: RNNEncoderDecoder,
    seqs: Sequence[Sequence[int] | np.ndarray],
    n: int,
    steps: Sequence[int],
    T: float,
    unis: Sequence[Sequence[np.ndarray]] | None,
    forced_ids: Sequence[np.ndarray] | None = None,
    workspace: Workspace | None = None,
    margins: bool = False,
) -> list[Draw]:
    """The one sampling loop: ``build_sampler``'s scan for a group of sentences decoded
    together, sentence ``b``'s ``n`` samples consecutive rows, each sentence for its own
    ``steps[b]`` steps with its own uniforms ``unis[b][k]`` (or its ``forced_ids[b][k]``).
    ``margins``: also each drawn word's distance to the nearest running-sum boundary."""
    device = model.device
    src = decoding.encode(model, seqs)
    ids = [np.zeros((s, n), dtype=np.int64) for s in steps]
    nlp_dtype = np.float64 if model.dtype == torch.float64 else np.float32
    nlp = [np.zeros((s, n), dtype=nlp_dtype) for s in steps]
    margin = [np.zeros((s, n)) for s in steps] if margins else None
    states = decoding.init_states(model, src).repeat_interleave(n, 0)
    y = torch.zeros(states.shape[0], dtype=torch.int64, device=device)
    active = list(range(len(seqs)))
    k = 0
    while active:
        sizes = [(b, n) for b in active]
        ctx = decoding.context(model, src, k, states, sizes, workspace)
        probs = decoding.probs(model, states, ctx, y, sizes, workspace, T)
        edge = None
        if forced_ids is None:
            assert unis is not None  # drawing needs the uniforms
            p = probs.cpu().numpy()
            u = np.concatenate([unis[b][k] for b in active])
            word = multinomial_from_uniform(p, u)
            if margin is not None:
                edge = boundary_margin(p, u, word)
        else:
            word = np.concatenate([np.asarray(forced_ids[b][k], dtype=np.int64) for b in active])
        y = torch.as_tensor(word, device=device)
        logp = (-legacy_log(probs.gather(1, y[:, None])[:, 0])).cpu().numpy()
        for r, b in enumerate(active):
            ids[b][k] = word[r * n : (r + 1) * n]
            nlp[b][k] = logp[r * n : (r + 1) * n]
            if margin is not None and edge is not None:
                margin[b][k] = edge[r * n : (r + 1) * n]
        states = decoding.advance(model, y, states, ctx)
        k += 1
        keep = [r for r, b in enumerate(active) if k < steps[b]]
        if len(keep) < len(active):
            rows = (
                torch.cat([torch.arange(r * n, (r + 1) * n, device=device) for r in keep])
                if keep
                else torch.zeros(0, dtype=torch.int64, device=device)
            )
            states, y = decoding.reorder(states, rows), decoding.reorder(y, rows)
            active = [active[r] for r in keep]
    return [
        Draw(i, l, None if margin is None else m)
        for i, l, m in zip(ids, nlp, margin if margin is not None else [None] * len(ids))
    ]


def finish(draw: Draw, idx2word: dict[int, str], normalize: bool = False) -> Samples:
    """The rest of ``sample()`` (sample.py:169-188) on a :class:`Draw`."""
    sentences, word_probs, costs = [], [], []
    for i in range(draw.ids.shape[1]):
        words = indices_to_words(idx2word, draw.ids[:, i])
        sentences.append(" ".join(words))
        probs = np.array(draw.neg_log_probs[: len(words) + 1, i])
        word_probs.append(probabilities_of_costs(probs))
        costs.append(-np.sum(probs))  # numpy's float32 sum
    if normalize:
        # numpy.float32 / int (sample.py:180-182): a float32 quotient (numpy 1.x's value-based
        # casting; every normalised cost the original printed is a float32 value)
        counts = [len(s.strip().split(" ")) for s in sentences]
        costs = [co / cn for co, cn in zip(costs, counts)]  # numpy scalar / int: its dtype
    order = legacy_order(costs)
    return Samples(sentences, costs, word_probs, draw, normalize, order)


def legacy_order(costs: Sequence[float] | np.ndarray) -> list[int]:
    """``numpy.argsort(costs)`` with numpy 1.23's tie order (the verbose print order).

    ``data.legacy_argsort`` emulates numpy 1.23's introsort, which only compares keys with
    ``<``: order-preserving integer ranks of the costs give it the same comparisons.
    """
    if not costs:
        return []
    ranks = np.unique(np.asarray(costs, dtype=np.float64), return_inverse=True)[1]
    return [int(i) for i in legacy_argsort(ranks.ravel())]
