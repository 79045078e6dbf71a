"""``translate`` and ``score --mode batch`` dealt out over a torchrun world.

The single-process commands (:mod:`groundhog_port.cli.commands.translate`,
:mod:`groundhog_port.cli.commands.score`) call these when :func:`distributed.setup` found a
world; the rounds, the gathering and the resume rule are in :mod:`groundhog_port.distributed.world`.
The output file, its journal records and the final summary are those of the
single-process run, so the two give byte-identical files.
"""

import logging
import sys

import numpy as np

from ..errors import EXIT_INPUT, EXIT_OK, EXIT_PARTIAL, LegacyInputError
from ..outputs import Journal, Progress
from ..search.scoring import batches_for, score_batch
from ..search.translator import Translation, report_failures, total_cost, write_nbest_then_commit
from . import world as distributed

logger = logging.getLogger(__name__)


def translate(
    exp,
    translator,
    lines,
    unit_lines,
    *,
    source,
    trans,
    n_best=None,
    resume=False,
    progress=False,
    fingerprint=None,
):
    """Units of ``unit_lines`` lines of ``source``; rank 0 writes ``trans`` (and ``n_best``);
    ``resume``, ``progress``: ``--resume``, ``--progress``."""
    world = distributed.world_from_env()
    n_units = -(-len(lines) // unit_lines)
    journal, first, out_lines, out_records = None, None, [], []
    if world.is_root:
        keep = _whole_units(unit_lines, len(lines))
        journal = _open_or_tell(world, Journal, trans, resume, keep, fingerprint)
        out_lines, out_records = list(journal.done_lines), list(journal.done_records)
        first = (
            len(journal.done_lines) // unit_lines
            if len(journal.done_lines) < len(lines)
            else n_units
        )
        if journal.done_lines:
            logger.info(
                "resuming %s after %d of %d lines", trans, len(journal.done_lines), len(lines)
            )
    first = distributed.broadcast(world, first if world.is_root else None)
    if first is None:
        return _refused_on_root(world)
    bar = Progress(len(lines), enabled=True if progress else None) if world.is_root else None
    if bar:
        bar.update(min(first * unit_lines, len(lines)))

    def compute(k):
        chunk = lines[k * unit_lines : (k + 1) * unit_lines]
        seqs = [exp.parse_source(line)[0] for line in chunk]
        ts = translator.translate_seqs(seqs, first_line=k * unit_lines + 1)
        for i, t in enumerate(ts):
            if t.error is not None:
                logger.error(
                    "line %d of %s: the original sample.py fails here (%s); writing an empty line",
                    k * unit_lines + i + 1,
                    source,
                    t.error,
                )
        return [t.line for t in ts], [t.record() for t in ts], len(chunk)

    def emit(k, lines, records):
        for line, record in zip(lines, records):
            journal.append(line, record)
        journal.flush()
        out_lines.extend(lines)
        out_records.extend(records)

    try:
        distributed.run_units(world, n_units, first, compute, emit, bar)
    except BaseException:
        if journal:
            journal.close_unfinished()
        raise
    if not world.is_root:
        distributed.finish(world)
        return EXIT_OK
    bar.close()
    results = [Translation.from_record(l, r) for l, r in zip(out_lines, out_records)]
    try:
        write_nbest_then_commit(n_best, results, journal)
    except BaseException:
        journal.close_unfinished()
        raise
    distributed.finish(world)
    print(
        f"Total cost of the translations: {total_cost(results)}",
        file=sys.stderr if journal.to_stdout else sys.stdout,
    )
    if report_failures(results, note=distributed.EXIT_NOTE.format(code=EXIT_PARTIAL)):
        return EXIT_OK  # not EXIT_PARTIAL, which torchrun cannot pass on (EXIT_NOTE)
    logger.info(
        "%d sentences on %d processes, %.1f sentences/s", len(results), world.size, bar.rate()
    )
    return EXIT_OK


def score(
    exp,
    complete_batches,
    *,
    src,
    trg,
    scores,
    allow_unk=False,
    n_batches=None,
    print_probs=False,
    resume=False,
    progress=False,
    fingerprint=None,
):
    """One unit per score.py batch of ``src``/``trg`` (``--allow-unk``, ``--n-batches``);
    every rank walks the (model-free) batch iterator and scores only its own batches; rank 0
    writes ``scores`` (probabilities with ``print_probs``).  ``complete_batches`` is the
    single-process resume rule."""
    world = distributed.world_from_env()
    sizes = [b.size for b in batches_for(exp, src, trg, allow_unk, n_batches)]
    journal, first = None, None
    if world.is_root:
        journal = _open_or_tell(world, Journal, scores, resume, complete_batches, fingerprint)
        first = len({r.split()[0] for r in journal.done_records})
        if first:
            logger.info(
                "resuming %s after %d of %d pairs (%d batches)",
                scores,
                len(journal.done_lines),
                sum(sizes),
                first,
            )
    first = distributed.broadcast(world, first)
    if first is None:
        return _refused_on_root(world)
    bar = (
        Progress(sum(sizes), unit="pairs", enabled=True if progress else None)
        if world.is_root
        else None
    )
    if bar:
        bar.update(sum(sizes[:first]))
    batches = _Batches(batches_for(exp, src, trg, allow_unk, n_batches))

    def compute(b):
        values = -score_batch(exp.model, batches.get(b)).cost.numpy()
        if print_probs:
            values = np.exp(values)
        lines = [f"{float(s):.5e}" for s in values]
        return lines, [f"{b} {len(lines)}"] * len(lines), len(lines)

    def emit(b, lines, records):
        for line, record in zip(lines, records):
            journal.append(line, record)
        journal.flush()

    try:
        distributed.run_units(world, len(sizes), first, compute, emit, bar)
    except BaseException:
        if journal:
            journal.close_unfinished()
        raise
    if world.is_root:
        bar.close()
        journal.commit()
        logger.info(
            "scored %d pairs on %d processes, %.1f pairs/s", bar.count, world.size, bar.rate()
        )
    distributed.finish(world)
    return EXIT_OK


def _open_or_tell(world, journal_class, path, resume, keep, fingerprint):
    """Rank 0 opens the output; when it refuses (``--resume`` of another run, a busy file...)
    the other ranks are told (``None`` for the first unit) before rank 0 raises, instead of
    waiting for a broadcast that never comes."""
    try:
        return journal_class(path, resume=resume, keep=keep, fingerprint=fingerprint)
    except BaseException:
        distributed.broadcast(world, None)
        raise


def _refused_on_root(world):
    """A rank other than 0 after rank 0 refused the output: rank 0 says why; leave quietly."""
    import torch.distributed as dist

    dist.destroy_process_group()
    return EXIT_INPUT


class _Batches:
    """Batch ``b`` of score.py's iterator; asked for in increasing order on each rank."""

    def __init__(self, batches):
        self._it = enumerate(batches)

    def get(self, b):
        for i, batch in self._it:
            if i == b:
                return batch
        raise LegacyInputError(None, f"batch {b} vanished: the corpus changed during the run")


def _whole_units(unit_lines, total):
    """Resume keeps whole units only (or everything, when the run had finished)."""

    def keep(records):
        n = len(records)
        return n if n >= total else n - n % unit_lines

    return keep
