"""``MainLoop.main`` (groundhog/mainLoop.py:258-361) as train.py runs it.

Order of events, as in the original:

1. ``timings`` hold ``step`` and ``next_offset`` (``{'step': 0, 'next_offset': -1}`` for a new
   run, else the loaded ``<prefix>timing.npz``) plus one float32 array per returned value;
2. a save right away (mainLoop.py:271), then the data iterator starts at ``next_offset``
   (``-1``: offset 0, or a random one with ``shuffle``);
3. while ``step < loopIters``, the last cost ``> 0.1 * minerr``, the minutes run
   ``< timeStop`` and ``lr > minlr``: save if ``saveFreq`` minutes passed since the last save,
   one ``algo()`` update, its values stored at ``timings[name][step]``, a NaN/Inf cost with
   ``on_nan='raise'`` saves and stops; ``step`` and ``next_offset`` advance;
4. an interruption (Ctrl-C, SIGTERM) ends the loop after the update in progress;
5. ``state['wholetime']`` and a final save.

Running the same command again resumes (``reload=True``): the model and the timings are
read back, training goes on at ``next_offset``.  As in GroundHog, the Adadelta
accumulators restart from zero and the batches left in the current ``sort_k_batches``
group when the run stopped are skipped (the fetcher restarts after that group).

Deliberate differences: a run continued past the ``loopIters`` the timing arrays were sized
for extends them (the original raised IndexError at the first step past them, so it could
not continue a finished run with its timing file as saved); ``keep_accumulators`` (off by
default, ``train --keep-accumulators``) saves Adadelta's accumulators with every checkpoint;
``RandomSamplePrinter`` (``hookFreq``) is not run (the port has no random sampler yet; the
hook never changed the batches); validation never ran in train.py (``valid_data=None``).
"""

from __future__ import annotations

import logging
import math
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import torch

from ..errors import LegacyInputError
from ..legacy.data import Batch, iter_h5_batches, read_h5_bitext
from ..model.encdec import RNNEncoderDecoder
from . import files
from .adadelta import SGDAdadelta

logger = logging.getLogger(__name__)

#: ``LM_Model.valid_costs`` (LM_model.py:119): the keys of the validation arrays
VALID_COSTS = ("cost", "ppl")


def print_time(secs: float) -> str:
    """groundhog/utils/utils.py:21 ``print_time``."""
    if secs < 120.0:
        return "%6.3f sec" % secs
    if secs <= 3600:
        return "%6.3f min" % (secs / 60.0)
    return "%6.3f h  " % (secs / 3600.0)


def _positive(state: dict[str, Any], key: str) -> int | float:
    v = state.get(key)
    if not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0:
        raise LegacyInputError(
            None,
            f"state[{key!r}] = {v!r}: expected a positive number "
            "(the original computes the timing array sizes from it)",
        )
    return v


def new_timings(state: dict[str, Any]) -> dict[str, Any]:
    """The timing dict of a new run (mainLoop.py:132-148), with the original's keys."""
    n = int(state["loopIters"] // _positive(state, "trainFreq") + 1)
    t: dict[str, Any] = {"step": 0, "next_offset": -1}
    for name in SGDAdadelta.RETURN_NAMES:
        t[name] = np.zeros((n,), dtype=np.float32)
    n = int(state["loopIters"] // _positive(state, "validFreq") + 1)
    for p in VALID_COSTS:
        for what in ("fulltrain", "valid", "test"):
            t[what + p] = np.zeros((n,), dtype=np.float32)
    return t


def prepare_state(state: dict[str, Any]) -> None:
    """What MainLoop.__init__ and SGD.__init__ add to the state before the first save."""
    if state.get("reset", -1) != -1:
        raise LegacyInputError(
            None, f"state['reset'] = {state['reset']!r}: MainLoop.main asserts reset == -1"
        )
    state.setdefault("profile", 0)
    state["bvalidcost"] = 1e21
    for name in ("grad_norm", "log2_p_word", "log2_p_expl"):
        state[name] = 1e20
    for p in VALID_COSTS:
        state["valid" + p] = 1e20
        state["test" + p] = 1e20


class Stop:
    """SIGINT/SIGTERM end the loop after the update in progress (the original caught
    KeyboardInterrupt around ``algo()``); a second signal interrupts at once."""

    def __init__(self) -> None:
        self.requested = False

    def __enter__(self) -> Stop:
        self.old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        for s in self.old:
            signal.signal(s, self._handler)
        return self

    def _handler(self, signum: int, frame: object) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        logger.warning("interrupted: stopping after this update and saving")

    def __exit__(self, *exc: object) -> None:
        for s, h in self.old.items():
            signal.signal(s, h)


class MainLoop:
    """One training run: ``model`` (on its device), the GroundHog ``state`` (``prefix``
    names the files), ``timings`` (new or loaded), the two ``.h5`` corpora."""

    def __init__(
        self,
        model: RNNEncoderDecoder,
        state: dict[str, Any],
        timings: dict[str, Any],
        source: str | os.PathLike[str],
        target: str | os.PathLike[str],
        out: TextIO | None = None,
        max_updates: int | None = None,
        keep_accumulators: bool = False,
    ) -> None:
        self.model, self.state, self.timings = model, state, timings
        self.source, self.target = source, target
        self.out = out  # None: sys.stdout at the time of printing (it may be replaced)
        self.max_updates = max_updates
        self.keep_accumulators = keep_accumulators  # DEVIATION (opt-in): <prefix>adadelta.npz
        prepare_state(state)
        self.algo = SGDAdadelta(model, state)
        self.save_iter = 0
        self.extended = False  # timing arrays grown past their saved size (logged once)
        self.saved_step: int | None = None  # the update of this run's last checkpoint
        self.device = next(iter(self.algo.params)).device

    # -- files ------------------------------------------------------------------------
    def paths(self) -> tuple[Path, Path, Path]:
        prefix = str(self.state["prefix"])
        model = (
            prefix + "model.npz"
            if self.state.get("overwrite", 1)
            else prefix + "model%d.npz" % self.save_iter
        )
        return Path(model), Path(prefix + "timing.npz"), Path(prefix + "state.pkl")

    def save(self) -> None:
        """mainLoop.py:222-239: the model, the state and the timings -- replaced together,
        once all three are written (:func:`files.save_checkpoint`)."""
        t0 = time.time()
        model_path, timing_path, state_path = self.paths()
        last = (
            f"the checkpoint of update {self.saved_step}"
            if self.saved_step is not None
            else "any checkpoint saved before"
        )
        kept = (
            f"{last} is left as it was: free space (or make the folder writable) and run "
            "the same command again to resume from it"
        )
        acc = None
        if self.keep_accumulators:
            arrays = self.algo.accumulators()
            arrays["step"] = np.int64(self.timings["step"])
            acc_path = files.accumulators_path(model_path)
            assert acc_path is not None  # paths() names the model <prefix>model[N].npz
            acc = (acc_path, arrays)
        files.save_checkpoint(
            model_path,
            state_path,
            timing_path,
            self.model,
            self.state,
            self.timings,
            kept,
            acc,
            diverged=f"nothing was saved: {last} is left as it was",
        )
        self.saved_step = int(self.timings["step"])
        self.save_iter += 1
        logger.info(
            "saved %s, %s, %s (%.2f s)", model_path, timing_path, state_path, time.time() - t0
        )

    def _store(self, name: str, value: float) -> None:
        arr = self.timings[name]
        if self.step >= arr.shape[0]:  # DEVIATION: grow (to this run's size) instead of IndexError
            size = max(self.step + 1, int(self.state["loopIters"] // self.state["trainFreq"] + 1))
            if not self.extended:
                self.extended = True
                logger.info(
                    "timing arrays extended from %d to %d entries for loopIters=%s (GroundHog "
                    "stops here with IndexError, mainLoop.py:298)",
                    arr.shape[0],
                    size,
                    self.state["loopIters"],
                )
            self.timings[name] = arr = np.concatenate(
                [arr, np.zeros(size - arr.shape[0], dtype=arr.dtype)]
            )
        arr[self.step] = value

    # -- the loop ---------------------------------------------------------------------
    def batches(self, start_offset: int) -> Iterator[Batch]:
        st = self.state
        offset = int(start_offset)
        if offset == -1:
            offset = 0
            if st.get("shuffle"):
                n = len(read_h5_bitext(self.source))
                offset = int(np.random.randint(n))  # TM_dataset.py:188-190 (numpy global RNG)
        return iter_h5_batches(
            st,
            self.source,
            self.target,
            sort_k_batches=None,
            use_infinite_loop=bool(st["use_infinite_loop"]),
            start_offset=offset,
        )

    def run(self) -> int:
        st, tm = self.state, self.timings
        st["gotNaN"] = 0
        start = time.time()
        self.step = int(tm["step"])
        if self.step > 0:  # resumed: the checkpoint on disk is the one these timings came from
            self.saved_step = self.step
        self.algo.step_timer = start
        self.save()
        save_time = time.time()
        last_cost = 1.0
        st["clr"] = st["lr"]
        batches = self.batches(tm.get("next_offset", -1))
        done = 0
        dev = self.device
        with Stop() as stop:
            while (
                self.step < st["loopIters"]
                and last_cost > 0.1 * st["minerr"]
                and (time.time() - start) / 60.0 < st["timeStop"]
                and st["lr"] > st["minlr"]
                and not stop.requested
                and (self.max_updates is None or done < self.max_updates)
            ):
                if self.step > 0 and (time.time() - save_time) / 60.0 >= st["saveFreq"]:
                    self.save()
                    save_time = time.time()
                batch = next(batches, None)
                if batch is None:
                    logger.info("end of the training data (use_infinite_loop=False)")
                    break

                def t(a: np.ndarray, dt: torch.dtype | None = None) -> torch.Tensor:
                    return torch.as_tensor(a, dtype=dt, device=dev)

                fdt = self.algo.params[0].dtype
                rvals = self.algo.step(
                    t(batch.x), t(batch.x_mask, fdt), t(batch.y), t(batch.y_mask, fdt)
                )
                st["traincost"] = float(rvals["cost"])
                st["step"] = self.step
                last_cost = rvals["cost"]
                for name, value in rvals.items():
                    self._store(name, value)
                if self.step % st["trainFreq"] == 0:
                    self.progress(rvals, float(batch.y_mask.sum()))
                if not math.isfinite(rvals["cost"]) and st["on_nan"] == "raise":
                    st["gotNaN"] = 1
                    self.save()
                    print("Got NaN while training", file=self.out or sys.stdout)
                    last_cost = 0
                self.step += 1
                done += 1
                tm["step"] = self.step
                tm["next_offset"] = batch.next_offset
        st["wholetime"] = float(time.time() - start)
        self.save()
        if self.step:
            steps = tm["time_step"][: self.step]
            logger.info(
                "average step %.4f s, average log2 per example %.3f",
                float(steps.mean()),
                float(tm["log2_p_expl"][: self.step].mean()),
            )
        return done

    def progress(self, r: dict[str, float], n_words: float) -> None:
        """SGD_adadelta.py:191-201's line, plus target words per second of the update."""
        wps = n_words / r["time_step"] if r["time_step"] > 0 else float("inf")
        print(
            ".. iter %4d cost %.3f grad_norm %.2e log2_p_word %.2e log2_p_expl %.2e "
            "step time %s whole time %s lr %.2e words/s %.0f"
            % (
                self.step,
                r["cost"],
                r["grad_norm"],
                r["log2_p_word"],
                r["log2_p_expl"],
                print_time(r["time_step"]),
                print_time(r["whole_time"]),
                r["lr"],
                wps,
            ),
            file=self.out or sys.stdout,
            flush=True,
        )
