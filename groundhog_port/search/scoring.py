"""Scoring sentence pairs as score.py did (experiments/nmt/score.py).

Library API: :func:`score_batch` (costs, word probabilities, alignments of one
``(time, batch)`` batch as tensors), :func:`score_pair` (one pair, as the
single-sentence ``create_probs_computer`` / ``create_scorer`` do) and
:func:`batches_for` (the batches ``--mode batch`` scores for given files).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

import numpy as np
import torch

from .. import budget
from ..errors import LegacyInputError
from ..legacy.data import Batch, iter_h5_batches, iter_text_batches
from ..legacy.experiment import Experiment
from ..legacy.vocab import parse_input
from ..model.encdec import RNNEncoderDecoder, Scores

#: bytes the teacher-forced attention holds per (target word, source word, pair) cell: the
#: weights of every step are kept for the alignment (float32), with the copies on their way
#: out; measured at about 9 per cell (``score`` of one 8,000 x 8,000-word pair took +560 MiB),
#: charged at 16.  Everything else scoring holds grows with the length, not its square.
ATTENTION_CELL_BYTES = 16


def charge_attention(model: RNNEncoderDecoder, src_len: int, trg_len: int, pairs: int) -> None:
    """Refuse (one :class:`~groundhog_port.errors.LegacyInputError` line, before any work) a
    batch whose attention weights -- the only part of scoring quadratic in the length --
    would pass the parse budget; RNNencdec has none."""
    if model.cfg.search:
        need = src_len * trg_len * pairs * ATTENTION_CELL_BYTES
        budget.check(
            None, f"the attention weights of {pairs} pair(s) of {trg_len} x {src_len} words", need
        )


def score_batch(model: RNNEncoderDecoder, batch: Batch) -> Scores:
    """:class:`~groundhog_port.model.encdec.Scores` of a :class:`~groundhog_port.legacy.data.Batch`.

    The score printed by score.py is ``-cost`` (``create_scorer``, encdec.py:1441).
    """
    dev = model.device

    def t(a: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(a, device=dev)

    charge_attention(model, batch.x.shape[0], batch.y.shape[0], batch.x.shape[1])
    s = model.score(t(batch.x), t(batch.x_mask), t(batch.y), t(batch.y_mask))
    return s.cpu()


def score_pair(
    model: RNNEncoderDecoder,
    src_seq: Sequence[int] | np.ndarray,
    trg_seq: Sequence[int] | np.ndarray,
) -> Scores:
    """One unpadded pair (``create_probs_computer(return_alignment=True)``, encdec.py:1476):
    cost ``(1,)``, word probabilities ``(T, 1)``, alignment ``(T, S, 1)`` or None."""
    dev = model.device
    charge_attention(model, len(src_seq), len(trg_seq), 1)
    x = torch.as_tensor(np.asarray(src_seq), device=dev)[:, None]
    y = torch.as_tensor(np.asarray(trg_seq), device=dev)[:, None]
    s = model.score(x, torch.ones(x.shape, device=dev), y, torch.ones(y.shape, device=dev))
    return s.cpu()


def parse_pair(
    exp: Experiment, src_line: str, trg_line: str, allow_unk: bool
) -> tuple[tuple[np.ndarray, str | list[str]], tuple[np.ndarray, str | list[str]]]:
    """Both sides through ``parse_input`` as score.py's txt/interact modes (score.py:218-223)."""
    st = exp.state

    def side(word2idx: dict[str, int], line: str, name: str) -> tuple[np.ndarray, str | list[str]]:
        return parse_input(
            st,
            word2idx,
            line,
            raise_unk=not allow_unk,
            unk_sym=st[f"unk_sym_{name}"],
            null_sym=st[f"null_sym_{name}"],
        )

    return side(exp.src_word2idx, src_line, "source"), side(exp.trg_word2idx, trg_line, "target")


def batches_for(
    exp: Experiment,
    src: str | os.PathLike[str] | None,
    trg: str | os.PathLike[str] | None,
    allow_unk: bool,
    n_batches: int = -1,
) -> Iterator[Batch]:
    """The batches of ``score.py --mode batch`` (score.py:132-160).

    Both files ending in ``.h5``: GroundHog's bitext iterator with score.py's settings
    (``sort_k_batches=1``, no shuffle, finite); no files: the training corpora the state
    names; otherwise text files through ``BatchBiTxtIterator`` with ``state['bs']``.
    """
    if src is None and trg is None:
        src, trg = exp.path("source"), exp.path("target")
        h5 = True
    else:
        h5 = str(src).endswith(".h5") and str(trg).endswith(".h5")
    n = None if n_batches is None or n_batches < 0 else n_batches
    try:
        if h5:
            return iter_h5_batches(exp.state, src, trg, n_batches=n)
        batches = iter_text_batches(
            exp.state, src, trg, exp.src_word2idx, exp.trg_word2idx, allow_unk=allow_unk
        )
    except LegacyInputError as err:
        if err.path is None:  # a state value (bs, seqlen, ...) that cannot build batches
            raise LegacyInputError(exp.state_path, err.problem) from None
        raise
    if n is None:
        return batches
    return (b for i, b in zip(range(n), batches))
