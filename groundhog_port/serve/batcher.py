"""One decoding thread; concurrent requests are gathered into batches.

A request thread hands its sentences over (:meth:`Batcher.submit`) and waits.  The
decoding thread takes the first waiting sentence, then keeps collecting for at most
``wait_s`` (or until ``max_batch`` sentences), and decodes what it has with the
batched search, one call per ``ignore_unk`` value (the only setting the batched
search shares across a batch; beam sizes may differ per sentence).  The model is
only ever used from this thread.

An exception while decoding fails the requests of that batch (each gets it) and the
thread goes on; more than ``max_pending`` waiting sentences make :meth:`submit`
refuse (the server answers 503).
"""
import logging
import queue
import threading
import time
from concurrent.futures import Future

logger = logging.getLogger(__name__)


class Busy(Exception):
    """Too many sentences are waiting."""


class Batcher:
    def __init__(self, engine, wait_s=0.005, max_batch=32, max_pending=256):
        self.engine = engine
        self.wait_s, self.max_batch, self.max_pending = wait_s, max_batch, max_pending
        self._queue = queue.Queue()
        self._lock = threading.Lock()
        self._pending = 0
        self.stats = dict(batches=0, sentences=0, largest_batch=0, failures=0)
        self._thread = threading.Thread(target=self._loop, name="groundhog-decoder", daemon=True)
        self._thread.start()

    @property
    def pending(self):
        return self._pending

    def submit(self, jobs):
        """Queue ``jobs``; returns one Future per job (its result: the job, decoded)."""
        with self._lock:
            if self._pending + len(jobs) > self.max_pending:
                raise Busy(f"{self._pending} sentences are waiting; try again shortly")
            self._pending += len(jobs)
        futures = []
        for job in jobs:
            fut = Future()
            futures.append(fut)
            self._queue.put((job, fut))
        return futures

    def close(self):
        self._queue.put(None)
        self._thread.join(timeout=30)

    def _take(self, item):
        with self._lock:
            self._pending -= 1
        job, fut = item
        # a request that gave up (timeout) cancelled its futures: skip them
        return (job, fut) if fut.set_running_or_notify_cancel() else None

    def _loop(self):
        stop = False
        while not stop:
            item = self._queue.get()
            if item is None:
                break
            batch = [x for x in [self._take(item)] if x]
            deadline = time.monotonic() + self.wait_s
            while len(batch) < self.max_batch:
                left = deadline - time.monotonic()
                try:
                    item = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                taken = self._take(item)
                if taken:
                    batch.append(taken)
            if batch:
                self._run(batch)

    def _run(self, batch):
        self.stats["batches"] += 1
        self.stats["sentences"] += len(batch)
        self.stats["largest_batch"] = max(self.stats["largest_batch"], len(batch))
        for ignore_unk in (False, True):
            group = [(j, f) for j, f in batch if j.ignore_unk == ignore_unk]
            if not group:
                continue
            try:
                self.engine.decode([j for j, _ in group])
            except Exception as err:        # a request must never stop the decoding thread
                self.stats["failures"] += 1
                logger.exception("decoding a batch of %d sentences failed", len(group))
                for _, f in group:
                    f.set_exception(err)
                continue
            for j, f in group:
                f.set_result(j)
