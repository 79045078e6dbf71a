"""The whole archive: the output folder checked, every experiment re-done (or taken from
the cache), dealt out over the ranks under ``torchrun``."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ... import contained
from ...errors import LegacyInputError
from ...outputs import check_partial, file_in, folder_in
from .cache import cached, store
from .context import OUTSIDE, Options, Run, not_read
from .discover import discover, pack_files, unpacked
from .inputs import key_inputs, plan_files
from .plan import plan_experiment
from .redo import redo
from .result import Result, ResultRecord

if TYPE_CHECKING:
    from ...outputs import Progress
    from .discover import Entry


class Ranks(Protocol):
    """The processes the experiments are dealt out over:
    :class:`groundhog_port.distributed.world.World` (a sibling layer, which this one may
    not import, even for typing)."""

    @property
    def rank(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def is_root(self) -> bool: ...


logger = logging.getLogger("groundhog_port.tasks.archive")


# ----------------------------------------------------------------------------------------
# the whole archive
# ----------------------------------------------------------------------------------------
def check_out_dir(root: str | os.PathLike[str], out: str | os.PathLike[str]) -> None:
    """``out`` must not lie inside ``root``: nothing is written into the archive.  Nor is
    anything written through a link inside ``out`` (``OUT/report.md -> ROOT/exp/test.fr``,
    ``OUT/cache -> ROOT/exp``): every name archive writes there, and everything already
    under ``OUT/cache`` and ``OUT/plots``, must be a real file or folder (checked before any
    work; the writes check again, :func:`groundhog_port.outputs.file_in`)."""
    from .report import REPORT_FILES

    r, o = Path(root).resolve(), Path(out).resolve()
    if o == r or r in o.parents:
        raise LegacyInputError(
            out,
            f"the output folder lies inside the archive {root}; give "
            "one outside it (nothing is written into the archive)",
        )
    if not Path(out).is_dir():
        return
    for name in REPORT_FILES:
        check_partial(file_in(out, name + ".partial"))  # a link there would be written through
        file_in(out, name)
    for name in ("cache", "plots"):
        if not os.path.lexists(Path(out) / name):
            continue
        folder_in(out, name, create=False)
        for folder, dirs, files in os.walk(Path(out) / name):  # links not followed
            rel = Path(folder).relative_to(out).parts
            for d in dirs:
                folder_in(out, *rel, d, create=False)
            for f in files:
                file_in(out, *rel, f)


def write_plan(run: Run, out: str | os.PathLike[str], opts: Options) -> Path:
    """``archive ROOT --plan-only``: the discovered plan of every experiment in
    ``OUT/plan.toml`` (:mod:`groundhog_port.tasks.archive.plan_file`); nothing is re-done."""
    from ...outputs import atomic_write_text
    from . import plan_file as planmod

    check_out_dir(run.root, out)
    Path(out).mkdir(parents=True, exist_ok=True)
    with unpacked(run) as packed:
        found = sorted(discover(run) + packed, key=lambda e: e.id)
        entries = [plan_experiment(run, e, opts) for e in found]
    path = file_in(out, "plan.toml")
    atomic_write_text(path, planmod.dumps({"root": str(run.root), "experiment": entries}))
    return path


def check_plan(
    run: Run,
    plan: dict,
    path: str | os.PathLike[str] | None,
    packed: Sequence[Entry] | None = None,
) -> None:
    """Every experiment of a ``--plan`` is one of ROOT's (else one line naming the closest),
    and every file it names lies in ROOT or a ``--data-dir`` (a plan may not have the report
    quote ``/proc/self/environ``).  ``packed``: the packed experiments, once unpacked: an
    id inside a pack must be one of them (a misspelt one was silently ignored)."""
    import difflib

    ids = [e.id for e in discover(run)]
    packs_in = [run.rel(p) + "/" for p in pack_files(run.root)]
    if packed is not None:
        ids += [e.id for e in packed]
    for pid, e in plan.items():
        in_pack = packed is None and any(pid.startswith(p) for p in packs_in)
        if pid not in ids and not in_pack:  # (a pack's ids are checked once it is unpacked)
            close = difflib.get_close_matches(pid, ids, n=1)
            raise LegacyInputError(
                path,
                f"experiment {pid!r} is not under {run.root}"
                + (" (nor in its packs)" if packed is not None else "")
                + (f" (did you mean {close[0]!r}?)" if close else ""),
            )
        for key, file in plan_files(run, e):
            why = not_read(file, run.allowed())
            if why is not None and why.startswith(("lies outside", OUTSIDE)):
                value = run.rel(file)
                raise LegacyInputError(path, f"experiment {pid!r}: {key} = {value!r} {why}")


def redo_tree(
    run: Run,
    out: str | os.PathLike[str],
    opts: Options,
    world: Ranks | None = None,
    progress: Progress | None = None,
    fresh: bool = False,
    packed: Sequence[Entry] = (),
) -> tuple[list[Entry], list[ResultRecord] | None]:
    """Re-do every experiment under ROOT and the ``packed`` ones (:func:`unpacked`; this
    rank's share under torchrun), each in a worker process under ``run.limits``
    (:func:`redo_contained`), caching each result in ``out/cache``; returns
    ``(entries, results)`` on rank 0 (results in entry order; ``run.from_cache``: the ids of
    those taken from the cache), ``(entries, None)`` elsewhere."""
    if not run.root.is_dir():
        raise LegacyInputError(run.root, "archive folder not found")
    check_out_dir(run.root, out)
    Path(out).mkdir(parents=True, exist_ok=True)
    entries = sorted(discover(run) + list(packed), key=lambda e: e.id)
    rank, size = (world.rank, world.size) if world else (0, 1)
    mine = {}
    for i, entry in enumerate(entries):
        if i % size != rank:
            continue
        extra = key_inputs(run, entry, opts)
        result = None if fresh else cached(out, entry, opts, run.rel, extra, run.digests)
        if result is None:
            logger.info("%s: re-doing", entry.id)
            result, whole = redo_contained(run, entry, opts, out, run.limits)
            if whole:  # a breach is not cached: the next run tries again
                result = store(out, entry, opts, result, extra, run.digests)
            mine[i] = (result, False)
        else:
            logger.info("%s: done before (cached in %s/cache)", entry.id, out)
            mine[i] = (result, True)
        if progress is not None:
            progress.update(1)
    if world is not None:
        import torch.distributed as dist

        gathered: list[Any] | None = [None] * size if world.is_root else None
        dist.gather_object(mine, gathered, dst=0)
        if not world.is_root or gathered is None:
            return entries, None
        for part in gathered:
            mine.update(part)
    # which results came from OUT/cache, for the report to say (the run's context)
    run.from_cache = [entries[i].id for i in range(len(entries)) if mine[i][1]]
    return entries, [mine[i][0] for i in range(len(entries))]


def redo_contained(
    run: Run, entry: Entry, opts: Options, out: str | os.PathLike[str], limits: contained.Limits
) -> tuple[ResultRecord, bool]:
    """:func:`redo` of ``entry`` in a worker process under ``limits``
    (:mod:`groundhog_port.contained`); what the worker learnt of the files comes back to
    ``run``.  Returns ``(result, whole)``: ``whole`` is ``False`` when a limit stopped the
    worker, the result then saying so in one "not done" line naming the file it was
    reading and the limit.  With ``--device cuda``, or where the platform cannot fork,
    the re-doing runs in this process, unlimited (said once per run)."""
    if opts.device.startswith("cuda") or not contained.available():
        from ... import lookup

        if lookup.say_once(("not contained", opts.device)):
            logger.warning(
                "experiments are re-done in this process, without the memory and CPU-time "
                "limits: %s",
                "a forked worker cannot use CUDA once this process has"
                if opts.device.startswith("cuda")
                else "this platform has no os.fork / resource module",
            )
        try:
            return redo(run, entry, opts, out), True
        except MemoryError as err:
            breach = contained.Breach("memory", f"ran out of memory ({err})", None, None)
            return _stopped(run, entry, breach), False
    outcome = contained.run(
        _redo_learning, run, entry, opts, out, limits=limits, on_threaded_parent=_one_thread
    )
    if outcome.peak_mib is not None:
        logger.info(
            "%s: worker peak +%.0f MiB, %.1f s of CPU%s",
            entry.id,
            outcome.peak_mib,
            outcome.cpu_s or 0.0,
            " (one thread: this process has a thread pool a worker cannot share)"
            if outcome.single_threaded
            else "",
        )
    if outcome.breach is not None:
        return _stopped(run, entry, outcome.breach), False
    result, learnt = outcome.value
    run.learn(learnt)
    return result, True


def _redo_learning(run: Run, entry, opts: Options, out):
    """In the worker: :func:`redo`, and what the run learnt meanwhile."""
    mark = run.mark()
    return redo(run, entry, opts, out), run.learnt_since(mark)


def _one_thread():
    import torch

    torch.set_num_threads(1)


def _stopped(run: Run, entry, breach: contained.Breach):
    """The result of an experiment whose worker a limit stopped: one "not done" line."""
    res = Result(run, entry)
    if breach.file:
        breach.file = run.rel(breach.file)
    res.not_done("everything (the experiment stopped part way)", breach.text())
    res.flush()
    return res.data
