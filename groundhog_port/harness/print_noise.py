"""Whether numbers ``score.py`` printed are the port's, within parity's bounds plus the
printing's own rounding: the judge of archived score files (``archive``'s scores check)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..legacy.data import Batch
    from ..legacy.experiment import Experiment
    from ..model.encdec import RNNEncoderDecoder


class PrintNoise:
    """Whether archived score.py lines lie within parity's ``batch/scores`` bounds of the
    port's scores (:mod:`groundhog_port.harness.tolerance`: the float64 shadow and the float32
    probe of the model set the bound, eq. (1)), plus half a unit in the last printed digit
    (:func:`~groundhog_port.harness.tolerance.printed_quantum`: score.py printed ``{:.5e}``).
    The same row and rule as ``groundhog-port parity``; nothing is fitted here."""

    def __init__(self, exp: Experiment) -> None:
        from .report import Rows

        self.exp = exp
        self.row = Rows().get("batch", "batch/scores")
        self._models: tuple[RNNEncoderDecoder, RNNEncoderDecoder] | None = None

    def add(self, batch: Batch, archived: Sequence[str], first: int) -> None:
        """Judge the first ``len(archived)`` sentences of ``batch`` (lines ``first + 1...``)."""
        import numpy as np

        from ..search.scoring import score_batch
        from . import tolerance as tolmod
        from .report import as_numpy, compare_values, normal_sentences, score_quantum

        n = min(len(archived), np.asarray(batch.x).shape[1])
        if n <= 0:
            return
        if self._models is None:
            self._models = (self.exp.model.float64_shadow(), self.exp.model.float32_probe())
        s32, s64, sp = (score_batch(m, batch) for m in (self.exp.model, *self._models))
        mask = np.asarray(batch.y_mask, dtype=np.float64)[:, :n]
        assert s64.token_costs is not None  # score_batch sets them
        recorded = np.array([float(a) for a in archived[:n]])
        compare_values(
            self.row,
            f"lines {first + 1}-{first + n}",
            -as_numpy(s32.cost)[:n].astype(np.float32),
            -as_numpy(s64.cost)[:n],
            recorded,
            probe=-as_numpy(sp.cost)[:n],
            magnitude_of=mask.sum(0),
            n_terms=mask.shape[0],
            poolable=normal_sentences(as_numpy(s64.token_costs)[:, :n], mask),
            quantum=score_quantum(-as_numpy(s64.cost)[:n], as_numpy(s64.token_costs)[:, :n], mask)
            + tolmod.printed_quantum(recorded),
        )

    def ok(self) -> bool:
        self.row.finish()
        return self.row.passed

    def restart(self) -> None:
        """Judge anew (the float64 shadow and probe of the model are kept)."""
        from .report import Rows

        self.row = Rows().get("batch", "batch/scores")


def last_digit(a: str, b: str) -> float:
    """One unit in the last printed digit of ``{:.5e}`` numbers ``a`` / ``b`` (the larger
    exponent).  Reported, not judged: a score is a float32 sum whose rounding error scales
    with its terms, not with the printed total, so a small total can differ by more
    (parity's ``batch/scores`` judges scores against bounds derived per model)."""
    exponent = max(int(t.lower().split("e")[1]) if "e" in t.lower() else 0 for t in (a, b))
    return 10.0 ** (exponent - 5) * (1 + 1e-9)
