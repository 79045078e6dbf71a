"""Open an archived GroundHog experiment the way sample.py / score.py do.

``state = prototype_state(); state.update(pickle); state.update(changes)``, build the
model the state describes, fill it from ``*_model.npz`` through the legacy name
table, and find the vocabularies the state names (legacy absolute paths are looked
up next to the state file and in each ``--data-dir``: :mod:`groundhog_port.lookup`).

From Python (docs/api.md, "Examples")::

    exp = open_experiment("search_state.pkl", "search_model.npz", data_dir=["vocab/"])
    exp.model                      # the torch module (eval mode), exp.cfg its architecture
    exp.state                      # the state dict as sample.py would hold it
    seq, words = exp.parse_source("the cat .")    # ids with null_sym_source appended
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

import legacy_states

from .. import lookup
from ..model.config import ModelConfig
from ..model.encdec import packed_product_weight
from ..model.packed import PackingAhead
from . import checkpoint
from .experiment import Experiment, allocate, auto_threads, resolve_device
from .exported import open_checkpoint

logger = logging.getLogger(__name__)


def open_experiment(
    state_path: str | os.PathLike[str],
    model_path: str | os.PathLike[str] | None = None,
    changes: str | list[str] | None = "",
    data_dir: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    device: str = "cpu",
    lenient: bool = False,
    allow_nonfinite: bool = False,
    stable_softmax: bool = False,
    strict: bool = False,
    pack: bool = False,
) -> Experiment:
    """Load state, build the model, load the weights; see the module docstring.

    ``changes``: GroundHog's ``"key=value,..."`` (literals only, never evaluated), or a list
    of them applied in turn; a key no GroundHog code reads is warned about, or refused with
    ``strict`` (:func:`legacy_states.check_change_keys`);
    ``lenient`` / ``allow_nonfinite`` / ``stable_softmax``: the CLI's ``--lenient``,
    ``--allow-nonfinite``, ``--stable-softmax``.  Returns an :class:`Experiment`; raises
    :class:`~groundhog_port.errors.LegacyInputError` (one line saying what is wrong) on bad
    input.

    Without ``model_path``, ``state_path`` is an exported checkpoint (a directory written
    by ``groundhog-port export --format safetensors``, or its ``config.json``):
    :func:`groundhog_port.legacy.exported.open_checkpoint`.
    ``data_dir``: one folder or a list of folders (``--data-dir``, in order).
    ``pack``: the weights of the products are packed for this process's torch threads while
    the model file is read (:class:`~groundhog_port.model.packed.PackingAhead`; CPU only):
    for commands that search or score next (their products run without gradients).
    """
    if model_path is None:
        return open_checkpoint(
            state_path,
            changes,
            device=device,
            allow_nonfinite=allow_nonfinite,
            stable_softmax=stable_softmax,
            data_dir=data_dir,
            strict=strict,
        )
    state_path = Path(state_path)
    state = legacy_states.load_state(state_path, changes or "", data_dir, strict)
    cfg = ModelConfig.from_state(state, state_path)
    auto_threads()
    # the model file is checked against the state before the model is allocated: a state
    # declaring absurd sizes then fails on the shapes instead of exhausting memory
    table, _ = checkpoint.legacy_param_table(cfg)
    device_ = resolve_device(device)
    ahead = PackingAhead(torch.get_num_threads()) if pack and device_.type == "cpu" else None
    handed_over = None
    if ahead is not None:
        packs = {p.name for p in table if packed_product_weight(p.path, p.shape)}

        def handed_over(name: str, a: np.ndarray) -> None:
            if name in packs:
                ahead.submit(a)

    try:
        arrays = checkpoint.read_npz(model_path, table, handed_over)
        checkpoint.check_arrays(arrays, table, model_path, lenient)
        model = allocate(
            cfg,
            table,
            state_path,
            stable_softmax,
            filled={p.path for p in table if p.name in arrays},
        )
        checkpoint.load_into(
            model, model_path, lenient=lenient, allow_nonfinite=allow_nonfinite, arrays=arrays
        )
        if ahead is not None:
            ahead.adopt(model.parameters())
    finally:
        if ahead is not None:
            ahead.close()
    model.to(device_)
    model.eval()
    explicit = frozenset(legacy_states.parse_changes(changes or ""))
    return Experiment(state_path, state, cfg, model, lookup.data_dirs(data_dir), explicit)
