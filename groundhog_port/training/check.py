"""Does training work?  Train from a checkpoint, then compare the training cost of the same
batches before and after, reload the saved checkpoint and score the test set.

Used by ``tools/train_check.py`` (the 100-update check, with figures) and, shorter, by the
test suite.
"""

from __future__ import annotations

import io
import itertools
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..legacy.data import iter_h5_batches
from ..legacy.loading import open_experiment
from ..model.encdec import RNNEncoderDecoder
from ..search.scoring import batches_for, score_batch
from .cost import training_cost
from .loop import MainLoop, new_timings


@dataclass
class CheckResult:
    updates: int
    cost_before: float  # summed cost of the trained-on batches, model before training
    cost_after: float  # the same batches, saved model
    words: float  # target words in those batches
    seconds: float  # wall time of the updates
    test_cost: float  # summed finite test-set costs of the reloaded checkpoint
    test_sentences: int  # sentences scored (score.py --mode batch)
    test_nan: int  # of which nan (the kept score.py quirk: inf * 0 on padding)
    log: str


def batches_cost(
    model: RNNEncoderDecoder,
    state: dict[str, Any],
    source: str | os.PathLike[str],
    target: str | os.PathLike[str],
    n: int,
) -> tuple[float, float]:
    """Summed training cost and word count of the first ``n`` training batches."""
    total = words = 0.0
    batches = iter_h5_batches(
        state,
        source,
        target,
        sort_k_batches=None,
        use_infinite_loop=bool(state["use_infinite_loop"]),
    )
    with torch.no_grad():
        for b in itertools.islice(batches, n):
            t = torch.as_tensor
            c = training_cost(model, t(b.x), t(b.x_mask), t(b.y), t(b.y_mask))
            total += float(c.cost)
            words += float(c.n_words)
    return total, words


def train_and_check(
    state_path: str | os.PathLike[str],
    model_path: str | os.PathLike[str],
    data_dir: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None,
    out_prefix: str,
    updates: int,
    test_src: str | os.PathLike[str],
    test_trg: str | os.PathLike[str],
) -> CheckResult:
    exp = open_experiment(state_path, model_path, f"prefix='{out_prefix}'", data_dir=data_dir)
    source, target = exp.path("source"), exp.path("target")
    before, words = batches_cost(exp.model, exp.state, source, target, updates)
    state = dict(exp.state)
    state["loopIters"] = updates
    log = io.StringIO()
    loop = MainLoop(exp.model, state, new_timings(state), source, target, out=log)
    t0 = time.perf_counter()
    loop.run()
    seconds = time.perf_counter() - t0
    saved = open_experiment(
        Path(out_prefix + "state.pkl"), Path(out_prefix + "model.npz"), data_dir=data_dir
    )
    after, _ = batches_cost(saved.model, saved.state, source, target, updates)
    costs = np.concatenate(
        [
            score_batch(saved.model, b).cost.numpy()
            for b in batches_for(saved, test_src, test_trg, allow_unk=True)
        ]
    )
    finite = np.isfinite(costs)
    return CheckResult(
        updates,
        before,
        after,
        words,
        seconds,
        float(costs[finite].sum()),
        int(costs.size),
        int((~finite).sum()),
        log.getvalue(),
    )
