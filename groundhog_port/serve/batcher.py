"""One decoding thread; the waiting sentences of every client are shared out fairly.

A request thread hands its sentences over (:meth:`Batcher.submit`, naming its client: the
peer address) and waits.  The decoding thread builds each batch by *fair queueing*: the
client that has been served least (in :attr:`Job.cost` units, beam x source length; a
client that starts waiting is set level with the least served waiting client, as in
start-time fair queueing) gives the first sentence, then the clients in that order give
one sentence each in turn, while the batch has fewer than ``max_batch`` sentences and
``max_rows`` hypotheses (beam sizes summed) and the sentence costs at most ``LIKE`` times
the first one's (and at least a ``LIKE``-th: a batch decodes in lockstep and answers when
its slowest sentence ends, so a 5-word request must not ride with 100-token ones).  A
heavy client therefore gets batches of bounded work, one after the other, and a light
client's request is the next batch after the one in progress.

The batch is decoded with the batched search, one call per ``ignore_unk`` value (the only
setting the batched search shares across a batch; beam sizes may differ per sentence).
The model is only ever used from this thread.  An exception while decoding fails the
requests of that batch (each gets it) and the thread goes on.

Admission: a client with more than ``max_pending`` waiting sentences is refused (the
server answers 503 to that client only); all clients together may have ``4 x max_pending``.

Shutdown (:meth:`close`): nothing new is accepted, every waiting sentence is answered
:class:`ShuttingDown` at once, and the batch in progress may finish until ``grace_s``;
past it the search stops between two steps (cooperatively) and its requests get
:class:`ShuttingDown` too; the thread is joined before :meth:`close` returns.

Time: the gathering window (``wait_s``) and the shutdown's grace period are read from a
:class:`Clock`, by default the :mod:`time` module itself (``time.monotonic``,
``time.sleep``).  A test gives a clock that moves only when told, so that "these requests
were queued together before the window ended" is ordered by events, not by how fast the
machine happens to be.
"""

import collections
import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Protocol

from .engine import Engine, Job

logger = logging.getLogger(__name__)

#: how much costlier (or cheaper) than a batch's first sentence another may be
LIKE = 4
#: all clients together may have this many times ``max_pending`` sentences waiting
TOTAL_PENDING = 4


class Clock(Protocol):
    """Where the server reads time (:mod:`time` is one: the default everywhere).

    An injection point for the tests, not a setting: with the real clock, whether
    concurrent requests share a batch, and whether a slow client is past its deadline,
    depend on the machine's speed; a clock that moves only when a test says so (its
    ``sleep`` returning once the test has advanced it) makes both decided by events."""

    def monotonic(self) -> float:
        """Seconds, never decreasing (``time.monotonic``)."""
        ...

    def sleep(self, seconds: float, /) -> None:
        """Return once ``seconds`` have passed on this clock (``time.sleep``)."""
        ...


class Busy(Exception):
    """Too many sentences are waiting."""


class ShuttingDown(Exception):
    """The server is stopping: the sentence was not (or not completely) decoded."""


class Batcher:
    """The decoding thread and the queues of the clients (see the module docstring).

    ``clock``: where the gathering window (``wait_s``) is slept and the shutdown's grace
    period is measured; the :mod:`time` module unless a test injects one (:class:`Clock`).
    """

    def __init__(
        self,
        engine: Engine,
        wait_s: float = 0.005,
        max_batch: int = 32,
        max_pending: int = 256,
        max_rows: int = 320,
        clock: Clock = time,
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.wait_s, self.max_batch, self.max_pending = wait_s, max_batch, max_pending
        self.max_rows = max_rows
        self._cond = threading.Condition()
        self._queues: dict[str, collections.deque[tuple[Job, Future[Job]]]] = {}  # per client
        self._served: dict[str, int] = {}  # client -> cost served (virtual time)
        self._pending = 0
        self._closing = False
        self._cancel_at: float | None = None  # clock time: in-progress decoding stops after it
        self.stats = dict(batches=0, sentences=0, largest_batch=0, failures=0, cancelled=0)
        self._thread = threading.Thread(target=self._loop, name="groundhog-decoder", daemon=True)
        self._thread.start()

    @property
    def pending(self) -> int:
        """Sentences waiting (of every client)."""
        return self._pending

    def submit(self, jobs: Sequence[Job], client: str = "-") -> list[Future[Job]]:
        """Queue ``jobs`` of ``client``; returns one Future per job (its result: the job,
        decoded)."""
        with self._cond:
            if self._closing:
                raise ShuttingDown("the server is shutting down")
            queue = self._queues.get(client)
            mine = len(queue) if queue else 0
            if mine + len(jobs) > self.max_pending:
                raise Busy(f"{mine} of your sentences are waiting; try again shortly")
            if self._pending + len(jobs) > TOTAL_PENDING * self.max_pending:
                raise Busy(f"{self._pending} sentences are waiting; try again shortly")
            if not queue:
                queue = self._queues[client] = collections.deque()
                self._served[client] = max(self._served.get(client, 0), self._virtual_time())
            futures = []
            for job in jobs:
                fut: Future[Job] = Future()
                futures.append(fut)
                queue.append((job, fut))
            self._pending += len(jobs)
            self._cond.notify()
        return futures

    def close(self, grace_s: float = 5.0) -> None:
        """Stop: refuse new work, answer the waiting sentences, let the batch in progress
        finish within ``grace_s`` (then stop it), and join the decoding thread."""
        with self._cond:
            self._closing = True
            self._cancel_at = self.clock.monotonic() + grace_s
            for queue in self._queues.values():
                for _, fut in queue:
                    if fut.set_running_or_notify_cancel():
                        fut.set_exception(ShuttingDown("the server is shutting down"))
                        self.stats["cancelled"] += 1
            self._queues.clear()
            self._pending = 0
            self._cond.notify()
        self._thread.join(timeout=grace_s + 5)

    # -- decoding thread --------------------------------------------------------------------
    def _virtual_time(self) -> int:
        """The least service among the clients with waiting sentences (0 when none)."""
        waiting = [self._served[c] for c, q in self._queues.items() if q]
        return min(waiting) if waiting else 0

    def _next_batch(self) -> list[tuple[Job, Future[Job]]]:
        """Take the next batch from the queues (under the lock); see the module docstring."""
        order = sorted(
            (c for c, q in self._queues.items() if q),
            key=lambda c: (self._served[c], self._queues[c][0][0].cost),
        )
        batch: list[tuple[Job, Future[Job]]] = []
        rows, unit = 0, None
        while order and len(batch) < self.max_batch:
            for client in list(order):
                queue = self._queues[client]
                job, fut = queue[0]
                if unit is not None and (
                    rows + job.beam_size > self.max_rows
                    or not unit / LIKE <= job.cost <= unit * LIKE
                ):
                    order.remove(client)  # not with this batch: it waits its turn
                    continue
                queue.popleft()
                self._pending -= 1
                if not queue:
                    order.remove(client)
                if not fut.set_running_or_notify_cancel():
                    continue  # the request gave up (timeout) meanwhile
                batch.append((job, fut))
                rows += job.beam_size
                self._served[client] += job.cost
                unit = job.cost if unit is None else unit
                if len(batch) >= self.max_batch:
                    break
        for client in [c for c, q in self._queues.items() if not q]:
            del self._queues[client]
        if not self._queues:
            self._served.clear()  # nobody waits: everyone starts level
        return batch

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closing:
                    self._cond.wait()
                if self._closing:
                    return
                full = self._pending >= self.max_batch
            if not full and self.wait_s > 0:
                self.clock.sleep(self.wait_s)  # gather concurrent requests
            with self._cond:
                if self._closing:
                    return
                batch = self._next_batch()
            if batch:
                self._run(batch)

    def _stop_if_closing(self) -> None:
        """Called between decoding steps: past the grace period of a shutdown, stop."""
        if self._cancel_at is not None and self.clock.monotonic() > self._cancel_at:
            raise ShuttingDown("the server is shutting down: decoding was stopped")

    def _run(self, batch: list[tuple[Job, Future[Job]]]) -> None:
        self.stats["batches"] += 1
        self.stats["sentences"] += len(batch)
        self.stats["largest_batch"] = max(self.stats["largest_batch"], len(batch))
        for ignore_unk in (False, True):
            group = [(j, f) for j, f in batch if j.ignore_unk == ignore_unk]
            if not group:
                continue
            logger.debug("decoding a batch of %d sentences", len(group))
            try:
                self.engine.decode([j for j, _ in group], stop=self._stop_if_closing)
            except ShuttingDown as err:
                self.stats["cancelled"] += len(group)
                for _, f in group:
                    f.set_exception(err)
                continue
            except Exception as err:  # a request must never stop the decoding thread
                self.stats["failures"] += 1
                logger.exception("decoding a batch of %d sentences failed", len(group))
                for _, f in group:
                    f.set_exception(err)
                continue
            for j, f in group:
                f.set_result(j)
