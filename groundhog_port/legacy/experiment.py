"""An opened experiment: the state, the model it describes and the vocabularies it names
(:class:`Experiment`), and what opening one needs whatever the checkpoint's format -- the
thread count, the device, the model's allocation -- shared by the ``*_model.npz`` reader
(:mod:`groundhog_port.legacy.loading`) and the exported-checkpoint reader
(:mod:`groundhog_port.legacy.exported`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence, Set
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

import legacy_states

from ..errors import LegacyInputError
from ..model.config import ModelConfig
from ..model.encdec import RNNEncoderDecoder
from ..model.layers import unwritten_parameters
from . import vocab

if TYPE_CHECKING:
    from .checkpoint import LegacyParam

_threads_chosen = False


def set_threads(n: int) -> None:
    """``--threads N``: the user's choice, kept for the whole process."""
    global _threads_chosen
    if n < 1:
        raise LegacyInputError(None, "--threads must be at least 1")
    torch.set_num_threads(n)
    _threads_chosen = True


def auto_threads() -> None:
    """One torch thread unless ``--threads`` (or ``OMP_NUM_THREADS``) chose otherwise: a
    torch operation of several threads waits for all of them, so on a machine where another
    process keeps a core busy two threads ran 4 to 30 times slower than alone (issue 54).
    More cores are used by worker processes of one thread each (``--workers``), whose
    parallelism survives a shared machine; small models were fastest on one thread anyway
    (10x faster per score batch of the fixtures than two threads on a busy machine)."""
    if not _threads_chosen and "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)


def resolve_device(name: str | None) -> torch.device:
    """``cpu`` or ``cuda[:n]``; a clear error when CUDA is asked for but absent."""
    name = name or "cpu"
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise LegacyInputError(None, f"--device {name}: CUDA is not available on this machine")
        # parity runs: no TF32 shortcuts in float32 matrix products
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    elif name != "cpu":
        raise LegacyInputError(None, f"--device {name!r}: expected cpu or cuda")
    return torch.device(name)


@dataclass
class Experiment:
    """A state, its model and its vocabularies (``data_dirs``: where files the state names
    are looked for when their stored path does not exist, in order)."""

    state_path: Path
    state: dict[str, Any]
    cfg: ModelConfig
    model: RNNEncoderDecoder
    data_dirs: tuple = ()
    explicit_keys: frozenset = field(default_factory=frozenset)
    _paths: dict = field(default_factory=dict, repr=False)

    def path(self, key: str) -> Path:
        """The file ``state[key]`` names, resolved (and its resolution logged) once."""
        if key not in self._paths:
            self._paths[key] = legacy_states.resolve_path(
                self.state, key, self.state_path, self.data_dirs, explicit=key in self.explicit_keys
            )
        return self._paths[key]

    @cached_property
    def src_word2idx(self) -> dict[str, int]:
        """``state['word_indx']``: source word -> id (sample.py:237, score.py:129)."""
        return vocab.load_word2idx(self.path("word_indx"))

    @cached_property
    def trg_word2idx(self) -> dict[str, int]:
        """``state['word_indx_trgt']``: target word -> id (score.py:130)."""
        return vocab.load_word2idx(self.path("word_indx_trgt"))

    @cached_property
    def src_idx2word(self) -> dict[int, str]:
        """``state['indx_word']``: source id -> word (sample.py:247)."""
        return vocab.load_idx2word(self.path("indx_word"))

    @cached_property
    def trg_idx2word(self) -> dict[int, str]:
        """Target id -> word with ``<eol>``/``UNK`` set as ``LM_Model.load_dict`` does."""
        path = self.path("indx_word_target")
        return vocab.target_idx2word(self.state, vocab.load_idx2word(path), path)

    def parse_source(self, line: str) -> tuple[np.ndarray, str | list[str]]:
        """``parse_input(state, indx_word, line, idx2word=idict_src)`` (sample.py:264)."""
        return vocab.parse_input(self.state, self.src_word2idx, line, idx2word=self.src_idx2word)


def allocate(
    cfg: ModelConfig,
    table: Sequence[LegacyParam],
    state_path: str | os.PathLike[str],
    stable_softmax: bool,
    filled: Set[str] = frozenset(),
) -> RNNEncoderDecoder:
    """The model of ``cfg`` (zeros), or a clear error when the state's sizes cannot be held
    (reachable with ``lenient``, where parameters missing from the model file are not
    checked against it).  ``filled``: the parameters the model file will fill, left
    unwritten here."""
    n = sum(math.prod(p.shape) for p in table)
    try:
        # the saved parameters take the model file's arrays (checkpoint.load_into): only
        # the tensors the file does not fill are zeroed, as RNNEncoderDecoder's own zeros
        with unwritten_parameters():
            model = RNNEncoderDecoder(cfg, stable_softmax=stable_softmax)
        for name, t in [*model.named_parameters(), *model.named_buffers()]:
            if name not in filled:
                t.detach().zero_()
        return model
    except (MemoryError, RuntimeError, OverflowError, TypeError) as err:
        raise LegacyInputError(
            state_path,
            f"cannot allocate the model the state describes "
            f"({n} parameters: dim={cfg.dim}, rank_n_approx="
            f"{cfg.rank_n_approx}, n_sym={cfg.n_sym_source}/"
            f"{cfg.n_sym_target}): {' '.join(str(err).split())[:200]}",
        ) from None
