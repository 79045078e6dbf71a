#!/usr/bin/env python3
"""Sensitivity of the parity check: perturb one weight, see whether parity catches it.

Each trial adds ``--delta`` to one random element of one of the chosen parameters (default:
every dense matrix -- transition, gates, attention, readout, output projections; not the
embedding tables, whose rows only matter for the words that occur), runs
``groundhog_port.harness.check.check`` of the perturbed model against the recorded trace, and
reports:

* **caught**: parity fails (some recorded quantity is beyond its derived bound);
* **beyond the bound**: the perturbation moves the EXACT value of some recorded quantity
  (the perturbed model's float64 shadow against the clean model's) by more than the
  derived bound ``2 K * noise + quantum`` (:mod:`groundhog_port.harness.tolerance`, eq. 1), or
  changes a token sequence;
* **detectable**: it moves some exact value by more than the bound PLUS the float32 error
  the recording already carries there (``|recorded - clean float64|``): no float32 rounding
  of the recording can explain that change.  (A change between the two can hide in the
  recording's own rounding when the two point the same way.)

Target: every detectable perturbation caught.  Usage::

    python tools/perturbation_sweep.py --case ../shared/legacy_traces/search --delta 1e-4 --trials 12
"""

import argparse
import inspect
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from groundhog_port.harness import check as P  # noqa: E402
from groundhog_port.harness import report as parity_report  # noqa: E402
from groundhog_port.harness.groups import scoring as parity_scoring  # noqa: E402
from groundhog_port.harness.groups import search as parity_search  # noqa: E402
from groundhog_port.harness.trace import TraceFile  # noqa: E402
from groundhog_port.legacy.checkpoint import legacy_param_table  # noqa: E402
from groundhog_port.legacy.loading import open_experiment  # noqa: E402

#: the comparison itself, before :class:`Capture` wraps it, and its parameters (by name)
JUDGE = parity_report.compare_values
COMPARE_VALUES = inspect.signature(JUDGE)
#: the modules whose comparisons :class:`Capture` wraps (the groups it sweeps and the report,
#: whose compare_costs_by_hypothesis calls compare_values)
COMPARING = (parity_report, parity_scoring, parity_search)
WRAPPED = ("compare_values", "compare_sequences", "compare_text")


def dense_params(model):
    """``{legacy name: tensor}`` of every 2-D weight that is not an embedding table."""
    table, _ = legacy_param_table(model.cfg)
    out = {}
    for entry in table:
        if len(entry.shape) != 2 or "approx_embdr" in entry.name:
            continue
        t = model
        for part in entry.path.split("."):
            t = getattr(t, part)
        out[entry.name] = t
    return out


class Capture:
    """Records what :func:`parity.check` compares: float values (port32, port64 and their
    arguments) and token sequences / strings, by location."""

    def __init__(self):
        self.values, self.seqs = {}, {}

    def __enter__(self):
        self._cv, self._cs, self._ct = (getattr(parity_report, n) for n in WRAPPED)
        self._saved = [(m, n, getattr(m, n)) for m in COMPARING for n in WRAPPED if hasattr(m, n)]
        cap = self

        def cv(*args, **kwargs):
            v = COMPARE_VALUES.bind(*args, **kwargs)
            v.apply_defaults()
            v = v.arguments
            cap.values[v["where"]] = (
                v["row"].quantity,
                v["row"].tolerance,
                np.array(v["port32"]),
                np.array(v["port64"]),
                None if v["probe"] is None else np.array(v["probe"]),
                v["magnitude_of"],
                v["quantum"],
                v["poolable"],
                np.array(v["recorded"], dtype=np.float64),
                v["n_terms"],
            )
            return cap._cv(*args, **kwargs)

        def cs(row, where, got, want):
            cap.seqs[where] = [tuple(int(t) for t in s) for s in got]
            return cap._cs(row, where, got, want)

        def ct(row, where, got, want):
            cap.seqs[where] = got
            return cap._ct(row, where, got, want)

        wrapper = dict(zip(WRAPPED, (cv, cs, ct)))
        for module, name, _ in self._saved:
            setattr(module, name, wrapper[name])
        return self

    def __exit__(self, *exc):
        for module, name, original in self._saved:
            setattr(module, name, original)


def beyond(clean: Capture, pert: Capture, with_recording_error: bool):
    """``(yes, where)``: the perturbed exact values beyond the bound around the clean exact
    values (``with_recording_error``: the bound plus ``|recorded - clean float64|``), or
    another token sequence / line."""
    from groundhog_port.harness import tolerance as tolmod

    for where, got in pert.seqs.items():
        if where in clean.seqs and clean.seqs[where] != got:
            return True, where
    rows = {}
    for where, (
        quantity,
        tol,
        p32,
        p64,
        probe,
        m,
        quantum,
        poolable,
        rec,
        n_terms,
    ) in pert.values.items():
        if where not in clean.values:
            continue
        clean32, ref = clean.values[where][2], clean.values[where][3]
        if ref.shape != p64.shape:
            return True, where
        # where the clean float32 run is not finite (underflow, masking) the clean run's
        # float32 value is the reference: the non-finite pattern is a float32 property
        ref = np.where(np.isfinite(clean32), ref, clean32)
        fin = np.isfinite(rec) & np.isfinite(ref)
        if quantum is None:
            quantum = 2 * tolmod.ulp32(
                np.maximum(np.where(fin, np.abs(rec), 0), np.where(fin, np.abs(ref), 0))
            )
        if with_recording_error:
            quantum = quantum + np.where(fin, np.abs(rec - np.where(fin, ref, 0)), 0.0)
        row = rows.setdefault(quantity, parity_report.Row("sweep", quantity, tol))
        # the perturbed exact value judged against the clean exact one, with the perturbed
        # model's probe noise (tolerance eq. 1); non-finite where its float32 run is
        exact = np.where(np.isfinite(p32), p64, p32)
        JUDGE(row, where, exact, exact, ref, probe, m, quantum, poolable, n_terms)
    for row in rows.values():
        row.finish()
        if row.n_bad:
            return True, row.worst
    return False, None


def run_check(exp, tr, files, groups, labels):
    return P.check(
        exp, tr, groups=groups, beam_labels=labels, source=files.source, target=files.target
    )


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--case", default=str(REPO.parent / "shared" / "legacy_traces" / "search"))
    ap.add_argument("--delta", type=float, default=1e-4, help="added to the chosen element")
    ap.add_argument("--trials", type=int, default=12)
    ap.add_argument(
        "--params", nargs="+", help="legacy parameter names (default: every dense matrix)"
    )
    ap.add_argument(
        "--groups",
        default="repr,pairs,steps",
        help=f"parity groups compared (default repr,pairs,steps; all: {','.join(P.GROUPS)})",
    )
    ap.add_argument("--beam-labels", nargs="+", help="with the beam group: these labels only")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    groups = tuple(g for g in args.groups.split(",") if g)
    files = P.find_case(args.case)
    exp = open_experiment(files.state, files.model, data_dir=files.dir)
    params = dense_params(exp.model)
    names = args.params or sorted(params)
    unknown = [n for n in names if n not in params]
    if unknown:
        ap.error(f"not dense parameters of this model: {', '.join(unknown)}")
    rng = np.random.RandomState(args.seed)
    caught = n_detectable = caught_detectable = n_beyond = 0
    t0 = time.perf_counter()
    with TraceFile(files.trace) as tr, torch.no_grad():
        with Capture() as clean:
            base = run_check(exp, tr, files, groups, args.beam_labels)
        if not base.ok:
            print(
                "the unperturbed model does not pass parity; the sweep needs a passing case",
                file=sys.stderr,
            )
            return 2
        for trial in range(args.trials):
            name = names[rng.randint(len(names))]
            w = params[name]
            idx = tuple(int(rng.randint(s)) for s in w.shape)
            old = w[idx].item()
            w[idx] = old + args.delta
            try:
                with Capture() as pert:
                    rep = run_check(exp, tr, files, groups, args.beam_labels)
            finally:
                w[idx] = old
            is_caught = not rep.ok
            is_det, where = beyond(clean, pert, with_recording_error=True)
            is_beyond = is_det or beyond(clean, pert, with_recording_error=False)[0]
            caught += is_caught
            n_beyond += is_beyond
            n_detectable += is_det
            caught_detectable += is_caught and is_det
            fails = ", ".join(r.quantity for r in rep.failed[:4]) or "-"
            print(
                f"trial {trial + 1:3d}: {name}{list(idx)} += {args.delta:g}: "
                f"{'CAUGHT' if is_caught else 'missed'} (failing: {fails}); "
                f"{'detectable' if is_det else 'beyond the bound only' if is_beyond else 'within float32 noise'}"
                + (f" (first at {where})" if is_det else ""),
                flush=True,
            )
    print(
        f"delta {args.delta:g}, {args.trials} trials on {files.name} ({', '.join(groups)}): caught "
        f"{caught}/{args.trials}; beyond the bound {n_beyond}/{args.trials}; detectable "
        f"{n_detectable}/{args.trials}; detectable and caught "
        f"{caught_detectable}/{n_detectable}; {time.perf_counter() - t0:.0f} s"
    )
    return 0 if caught_detectable == n_detectable else 1


if __name__ == "__main__":
    sys.exit(main())
