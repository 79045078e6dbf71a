"""One runner for ``translate --beam-search --source`` and ``score --mode batch``, in one
process or dealt out over a torchrun world.

A plain process is a world of one (:data:`~groundhog_port.distributed.world.SINGLE`, whose
collectives are no-ops), so both paths run this code: rank 0 opens the journaled output
(:class:`~groundhog_port.outputs.Journal`) and keeps what ``--resume`` may keep, the
units are computed (:func:`~groundhog_port.distributed.world.run_units`: in rounds under
torchrun, gathered on rank 0) and appended in order, and rank 0 commits the file and
prints the summary.  One process and N give byte-identical files; each output line's
journal record holds what resuming needs (a translation's costs and hypotheses, a
score's batch).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import EXIT_INPUT, EXIT_OK, EXIT_PARTIAL, LegacyInputError
from ..legacy.data import Batch
from ..legacy.experiment import Experiment
from ..model import decoding
from ..outputs import Journal, Progress
from ..search import scoring
from ..search.translator import (
    Translation,
    Translator,
    report_failures,
    total_cost,
    write_nbest_then_commit,
)
from . import world as distributed

logger = logging.getLogger(__name__)


@dataclass
class Output:
    """A runner's output: ``path`` (``"-"``: standard output), ``resume`` (``--resume``),
    ``fingerprint`` (what makes the file; ``--resume`` refuses another run's journal:
    :class:`~groundhog_port.outputs.Journal`), ``progress`` (``--progress``: the progress
    line even when stderr is not a terminal)."""

    path: str | os.PathLike
    resume: bool = False
    fingerprint: dict | None = None
    progress: bool = False

    def bar(self, total: int, unit: str = "sent") -> Progress:
        """The progress line over ``total`` ``unit``: shown on a terminal, or always with
        ``progress``."""
        return Progress(total, unit=unit, enabled=True if self.progress else None)


def translate(
    exp: Experiment,
    translator: Translator,
    lines: Sequence[str],
    output: Output,
    *,
    source: str | os.PathLike[str],
    world: distributed.World | None = None,
    n_best: str | os.PathLike[str] | None = None,
    verbose: bool = False,
    workers: int = 1,
) -> int:
    """sample.py:249-281 on ``lines`` (read from ``source``): the chosen translations to
    ``output`` (every hypothesis to ``n_best``), then sample.py's ``Total cost`` line;
    ``verbose``: ``--verbose``; ``world``: the torchrun world (``None``: this process
    alone); ``workers``: forked worker processes of this one (``--workers``).

    A unit is ``4 x batch size`` lines (the batched search groups a unit's sentences by
    length: it gets several batches), or one line for the literal loop (batch size 1) in
    one process; with workers, at most a worker's even share (the batched search streams
    the output layer once per step for all of a batch's rows: splitting a batch finer costs
    more than it balances), so that long inputs are dealt out unit by unit as workers come
    free.  ``--resume`` keeps every complete line whose record reads back."""
    world = world or distributed.SINGLE
    journal = _open_on_root(world, output, _readable_records)
    done = distributed.broadcast(world, len(journal.done_lines) if journal else None)
    if done is None:
        return _refused_on_root(world)
    results, bar = [], None  # rank 0's: every line's Translation, the progress line
    if world.is_root:
        results = [
            Translation.from_record(*lr) for lr in zip(journal.done_lines, journal.done_records)
        ]
        if done:
            logger.info("resuming %s after %d of %d lines", output.path, done, len(lines))
        bar = output.bar(len(lines))
        bar.update(done)
    unit = 1 if translator.batch_size == 1 and world.size == 1 else 4 * translator.batch_size
    workers = max(1, min(workers, len(lines) - done))
    if workers > 1:  # an even share each (a batch as full as can be), dealt out past 4 x bs
        unit = min(unit, -(-(len(lines) - done) // workers))
        # read and made once here, for the workers forked next: the vocabularies a parse
        # reads, the packed weights of the search's products
        exp.parse_source(lines[done])
        decoding.prepare(exp.model)

    def compute(start):
        parsed = [exp.parse_source(line) for line in lines[start : start + unit]]
        ts = translator.translate_seqs([seq for seq, _ in parsed], first_line=start + 1)
        for i, ((_, parsed_in), t) in enumerate(zip(parsed, ts)):
            if verbose:
                print("Parsed Input:", parsed_in)
                print("Translation:", t.line)
            if t.error is not None:
                logger.error(
                    "line %d of %s: the original sample.py fails here (%s); writing an empty line",
                    start + i + 1,
                    source,
                    t.error,
                )
        return [t.line for t in ts], [t.record() for t in ts], len(ts)

    def emit(start, out_lines, records):
        for line, record in zip(out_lines, records):
            journal.append(line, record)
            results.append(Translation.from_record(line, record))

    def commit():
        write_nbest_then_commit(n_best, results, journal)

    _run(world, journal, range(done, len(lines), unit), compute, emit, bar, commit, workers)
    if not world.is_root:
        return EXIT_OK
    print(
        f"Total cost of the translations: {total_cost(results)}",
        file=sys.stderr if journal.to_stdout else sys.stdout,
    )
    code, note = distributed.exit_with_note(world, EXIT_PARTIAL)
    if report_failures(results, note=note):
        return code
    assert bar is not None  # rank 0's
    on = f" on {workers} worker processes" if workers > 1 else world.on_processes()
    logger.info("%d sentences%s, %.1f sentences/s", len(results), on, bar.rate())
    return EXIT_OK


def score(
    exp: Experiment,
    output: Output,
    batches: Callable[[], Iterator[Batch]],
    *,
    world: distributed.World | None = None,
    print_probs: bool = False,
    y_noise: float | None = None,
    workers: int = 1,
) -> int:
    """score.py:132-188: one ``{:.5e}`` line per sentence pair (the log-probability, or the
    probability with ``print_probs``), in batch order, to ``output``.  ``batches()``:
    score.py's batch iterator (:func:`~groundhog_port.search.scoring.batches_for`), made
    afresh on each call; ``y_noise``: ``--y-noise`` (numpy's global generator: one process
    only); ``world``: the torchrun world (``None``: this process alone); ``workers``: forked
    worker processes of this one (``--workers``), a batch each at a time.

    A unit is one batch: every rank walks the (model-free) batch iterator and scores only
    its own batches.  ``--resume`` keeps whole batches."""
    world = world or distributed.SINGLE
    # a cheap first pass (no model) counts the pairs, for the progress line; it meets bad
    # input (an unknown word...) before any output file is made
    sizes = [b.size for b in batches()]
    journal = _open_on_root(world, output, _complete_batches)
    first = distributed.broadcast(
        world, len({r.split()[0] for r in journal.done_records}) if journal else None
    )
    if first is None:
        return _refused_on_root(world)
    kept, bar = 0, None  # rank 0's: pairs kept from an interrupted run, the progress line
    if world.is_root:
        kept = len(journal.done_lines)
        if kept:
            logger.info(
                "resuming %s after %d of %d pairs (%d batches)",
                output.path,
                kept,
                sum(sizes),
                first,
            )
        bar = output.bar(sum(sizes) - kept, unit="pairs")
    mine = _Batches(batches())

    def compute(b):
        batch = mine.get(b)
        if y_noise:  # score.py:162-167
            random_words = np.random.randint(0, 100, batch.y.shape).astype("int64")
            change = np.random.binomial(1, y_noise, batch.y.shape).astype("int64")
            batch.y = change * random_words + (1 - change) * batch.y
        values = -scoring.score_batch(exp.model, batch).cost.numpy()
        if print_probs:
            values = np.exp(values)
        out_lines = [f"{float(s):.5e}" for s in values]
        return out_lines, [f"{b} {len(out_lines)}"] * len(out_lines), len(out_lines)

    def emit(b, out_lines, records):
        for line, record in zip(out_lines, records):
            journal.append(line, record)

    workers = max(1, min(workers, len(sizes) - first))
    if workers > 1:  # the packed weights of scoring's products, made once for the workers
        decoding.prepare(exp.model)
    commit = lambda: journal.commit()  # noqa: E731  (rank 0's journal; None elsewhere)
    _run(world, journal, range(first, len(sizes)), compute, emit, bar, commit, workers)
    if world.is_root:
        assert bar is not None  # rank 0's
        logger.info(
            "scored %d pairs%s%s, %.1f pairs/s",
            bar.count,
            f" on {workers} worker processes" if workers > 1 else world.on_processes(),
            f" (and kept {kept} from the interrupted run)" if kept else "",
            bar.rate(),
        )
    return EXIT_OK


def _run(world, journal, units, compute, emit, bar, commit, workers=1):
    """``units`` across the world, or ``workers`` forked processes of a world of one
    (:func:`~groundhog_port.distributed.world.run_units`); once all are in, rank 0 closes
    ``bar`` and calls ``commit()``.  On any failure rank 0 leaves the journal unfinished,
    for ``--resume``.  Then the world waits for rank 0."""
    try:
        distributed.run_units(world, units, compute, emit, bar, workers)
        if world.is_root:
            bar.close()
            commit()
    except BaseException:
        if world.is_root:
            bar.close()
            journal.close_unfinished()
        raise
    distributed.finish(world)


def _open_on_root(world, output, keep):
    """Rank 0's journaled output (``None`` on the other ranks).  When rank 0 refuses it
    (``--resume`` of another run, a busy file...) the other ranks are told (``None`` for
    where to start) before rank 0 raises, instead of waiting for a broadcast that never
    comes."""
    if not world.is_root:
        return None
    try:
        return Journal(output.path, output.resume, keep, output.fingerprint)
    except BaseException:
        distributed.broadcast(world, None)
        raise


def _refused_on_root(world):
    """A rank other than 0 after rank 0 refused the output: rank 0 says why; leave quietly."""
    import torch.distributed as dist

    dist.destroy_process_group()
    return EXIT_INPUT


def _readable_records(records):
    """How many journal records, from the first, can be read back (a damaged one ends them)."""
    for n, record in enumerate(records):
        try:
            Translation.from_record("", record)
        except (ValueError, KeyError, TypeError):
            return n
    return len(records)


class _Batches:
    """Batch ``b`` of score.py's iterator; asked for in increasing order on each rank."""

    def __init__(self, batches):
        self._it = enumerate(batches)

    def get(self, b):
        for i, batch in self._it:
            if i == b:
                return batch
        raise LegacyInputError(None, f"batch {b} vanished: the corpus changed during the run")


def _complete_batches(records):
    """Number of journal lines that form whole batches (record ``"b size"`` per line)."""
    n, i = 0, 0
    while i < len(records):
        try:
            b, size = records[i].split()
            j = i + int(size)
            if j > len(records) or any(r.split()[0] != b for r in records[i:j]):
                break
        except (ValueError, IndexError):  # a damaged record: keep the batches before it
            break
        n = i = j
    return n
