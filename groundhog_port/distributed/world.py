"""Re-scoring and re-translating past one process: ``torchrun ... -m groundhog_port``.

GroundHog ran one process per experiment.  Under ``torchrun`` (which sets ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` and the rendezvous) ``translate`` and
``score --mode batch`` split their input into *units* -- a fixed number of source lines,
or one score.py batch -- and deal them out in rounds (:mod:`.runner`, which runs a plain
process as a world of one, :data:`SINGLE`): in round ``r`` rank ``i`` computes
unit ``r * WORLD_SIZE + i``.  After each round every rank hands its unit's output lines
(and their journal records) to rank 0 with ``gather_object``, and rank 0 appends them to
the ordinary journaled output file (:class:`~groundhog_port.outputs.Journal`) in unit
order.  So:

* the output is in the original line order and byte-identical to a single-process run:
  a unit's lines do not depend on which process computed them (beam search is per
  sentence, and score.py's scores are per batch; the batched search returns the literal
  search's numbers for any batch composition);
* only rank 0 writes files, so several nodes need no shared filesystem;
* ``--resume`` works as in one process (it is the same code): rank 0 keeps what one
  process keeps of the partial file (translate: every complete line; score: whole
  batches), broadcasts where that ends, and every rank continues from there;
* a rank that dies never leaves a short output: rank 0 waits for it in the next
  ``gather_object``, ``torchrun`` ends the whole job (its elastic agent stops the other
  workers when one fails), and the output stays ``FILE.partial`` for ``--resume``.

``archive`` deals out whole experiments instead (:func:`groundhog_port.tasks.archive.redo_tree`): rank
``i`` re-does experiments ``i, i + WORLD_SIZE, ...`` and rank 0 gathers the results and
writes the report.

Backends: ``gloo`` on CPU (each process gets ``cores / LOCAL_WORLD_SIZE`` torch threads
unless ``--threads`` or ``OMP_NUM_THREADS`` says otherwise), ``nccl`` with
``--device cuda`` (each rank on ``cuda:LOCAL_RANK``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from ..errors import EXIT_OK, LegacyInputError

logger = logging.getLogger(__name__)

#: how long a rank waits for the others at a collective before giving up; torchrun's agent
#: normally ends the job much sooner when a rank dies
COLLECTIVE_TIMEOUT = timedelta(minutes=30)

#: commands that can run under torchrun
SHARDED_COMMANDS = ("translate", "score", "archive")

#: said (at the end of the summary line) where one process exits with ``code``, a complete
#: output with a note (3: sentences the original crashed on): torchrun turns any non-zero
#: exit of a worker into a failed job (a ``ChildFailedError`` "FAILED" block and exit 1),
#: so rank 0 exits 0 instead
EXIT_NOTE = (
    "; the output is complete: one process exits {code} here, this torchrun job "
    "exits 0 (torchrun reports any other exit code as a failed job)"
)


#: what :func:`broadcast` hands on
_T = TypeVar("_T")


class PeerFailed(LegacyInputError):
    """A collective failed because another rank died or was stopped."""

    def __init__(self, problem: str) -> None:
        super().__init__(None, problem)


@dataclass
class World:
    rank: int
    size: int
    local_rank: int
    local_size: int

    @property
    def is_root(self) -> bool:
        return self.rank == 0

    def on_processes(self) -> str:
        """What a summary line says of the world: `` on N processes``, nothing for one."""
        return f" on {self.size} processes" if self.size > 1 else ""


#: a plain process: a world of one, with no process group (its collectives are no-ops)
SINGLE = World(rank=0, size=1, local_rank=0, local_size=1)


def exit_with_note(world: World | None, code: int) -> tuple[int, str]:
    """``(exit code, note for the summary line)`` of a complete output that one process
    ends with ``code``: ``(code, "")``; a torchrun worker exits 0 and says why (:data:`EXIT_NOTE`)."""
    if world is None or world.size == 1:
        return code, ""
    return EXIT_OK, EXIT_NOTE.format(code=code)


def world_from_env(environ: Mapping[str, str] | None = None) -> World | None:
    """The torchrun world this process belongs to, or None for a plain single process."""
    env = os.environ if environ is None else environ
    if "WORLD_SIZE" not in env or "RANK" not in env:
        return None
    try:
        size, rank = int(env["WORLD_SIZE"]), int(env["RANK"])
        local_rank = int(env.get("LOCAL_RANK", rank))
        local_size = int(env.get("LOCAL_WORLD_SIZE", size))
    except ValueError:
        raise LegacyInputError(
            None, "WORLD_SIZE/RANK/LOCAL_RANK/LOCAL_WORLD_SIZE must be integers (set by torchrun)"
        ) from None
    if size <= 1:
        return None
    if not (0 <= rank < size and 0 <= local_rank < local_size):
        raise LegacyInputError(
            None,
            f"inconsistent torchrun environment: RANK={rank} "
            f"WORLD_SIZE={size} LOCAL_RANK={local_rank} "
            f"LOCAL_WORLD_SIZE={local_size}",
        )
    return World(rank, size, local_rank, local_size)


def setup(device: str = "cpu", threads: int | None = None) -> tuple[World | None, str]:
    """Join the process group when run under torchrun: ``(world, device)``; ``(None,
    device)`` otherwise.

    Picks the rank's device (``device`` ``cuda`` becomes ``cuda:LOCAL_RANK``) and, unless
    ``threads`` (``--threads``) or ``OMP_NUM_THREADS`` says, its share of the CPU threads,
    and makes ranks other than 0 quiet (warnings only) so that the log reads like one run.
    """
    world = world_from_env()
    if world is None:
        return None, device
    import torch  # here, not at the top: the CLI asks world_from_env() of every command
    import torch.distributed as dist

    cuda = str(device).startswith("cuda")
    if cuda:
        if not torch.cuda.is_available():
            raise LegacyInputError(None, "--device cuda: CUDA is not available on this machine")
        if world.local_rank >= torch.cuda.device_count():
            raise LegacyInputError(
                None,
                f"local rank {world.local_rank} has no GPU "
                f"({torch.cuda.device_count()} visible): start at most "
                "one process per GPU (--nproc-per-node)",
            )
        device = f"cuda:{world.local_rank}"
        torch.cuda.set_device(world.local_rank)
    elif threads is None and "OMP_NUM_THREADS" not in os.environ:
        from ..legacy.experiment import set_threads

        set_threads(max(1, (os.cpu_count() or 1) // world.local_size))
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo", timeout=COLLECTIVE_TIMEOUT)
    for handler in logging.getLogger().handlers:  # the rank after the level (and --log-time)
        fmt = getattr(handler.formatter, "_fmt", None) or "%(levelname)s %(name)s: %(message)s"
        handler.setFormatter(
            logging.Formatter(
                fmt.replace("%(levelname)s", f"%(levelname)s [rank {world.rank}/{world.size}]", 1)
            )
        )
    if not world.is_root:
        logging.getLogger().setLevel(max(logging.getLogger().level, logging.WARNING))
    logger.info(
        "torchrun: %d processes, backend %s, %d torch threads each",
        world.size,
        dist.get_backend(),
        torch.get_num_threads(),
    )
    return world, device


def broadcast(world: World, value: _T) -> _T:
    """Rank 0's ``value`` on every rank."""
    if world.size == 1:
        return value
    import torch.distributed as dist

    box: list[Any] = [value if world.is_root else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def run_units(
    world: World,
    units: Sequence[Any],
    compute: Callable[[Any], tuple[Any, Any, int]],
    emit: Callable[[Any, Any, Any], object],
    progress: Any = None,
    workers: int = 1,
) -> None:
    """Compute ``units`` (a sequence of keys) across the world, in rounds: in round ``r``
    rank ``i`` computes ``units[r * size + i]``; a world of one computes them in turn, or
    with ``workers`` > 1 in that many forked worker processes, dealt out as they come free
    (:func:`~groundhog_port.distributed.pool.imap_in_workers`).

    ``compute(unit) -> (lines, records, count)`` runs on the rank that owns ``unit``;
    ``emit(unit, lines, records)`` runs on rank 0 for every unit, in order; ``count``
    (sentences, pairs) advances rank 0's progress line.
    """
    if world.size == 1 and workers > 1:
        from .pool import imap_in_workers

        for unit, (lines, records, count) in zip(units, imap_in_workers(workers, compute, units)):
            emit(unit, lines, records)
            if progress is not None:
                progress.update(count)
        return
    for start in range(0, len(units), world.size):
        k = start + world.rank
        mine = (units[k], *compute(units[k])) if k < len(units) else None
        gathered = [mine] if world.size == 1 else _gather(world, mine, start // world.size)
        if world.is_root:
            for item in gathered:
                if item is None:
                    continue
                unit, lines, records, count = item
                emit(unit, lines, records)
                if progress is not None:
                    progress.update(count)


def _gather(world, mine, round_number):
    """Every rank's ``mine`` on rank 0 (a list by rank; ``None`` elsewhere)."""
    import torch.distributed as dist

    gathered = [None] * world.size if world.is_root else None
    try:
        dist.gather_object(mine, gathered, dst=0)
    except RuntimeError as err:  # a peer died: gloo/nccl report it as a RuntimeError
        raise PeerFailed(
            f"another process of this torchrun job failed during round "
            f"{round_number} ({str(err).splitlines()[0][:200]}); the "
            "output is incomplete: rerun the same command with --resume"
        ) from None
    return gathered


def finish(world: World) -> None:
    """Wait until rank 0 has committed the output, then leave the process group."""
    if world.size == 1:
        return
    import torch.distributed as dist

    try:
        dist.barrier()
    except RuntimeError as err:
        raise PeerFailed(
            f"another process failed before the end ({str(err).splitlines()[0][:200]})"
        ) from None
    dist.destroy_process_group()
