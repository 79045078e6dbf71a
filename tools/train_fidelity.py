#!/usr/bin/env python
"""The figures of docs/training.md, "Reproduced draw for draw": ``train`` against GroundHog's
recorded training runs (``init_draws``: a new model and its first update;
``continue_search_variant``: 30 continued updates), as the test suite judges them.

    python tools/train_fidelity.py [--shared ../shared] [--siblings 8] [--seed 0]
"""

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from parity_tests.support import train_fidelity as fidelity  # noqa: E402


def recording(shared, name):
    """legacy_traces/<name>, else pending_traces/<name> (where it was delivered)."""
    for sub in ("legacy_traces", "pending_traces"):
        if (shared / sub / name).is_dir():
            return shared / sub / name
    sys.exit(f"{name} not found under {shared}/legacy_traces or {shared}/pending_traces")


def worst(comparisons):
    """(units, max error, where) of the comparison closest to its bound."""
    return max(((c.units() or 0.0), c.max_err() or 0.0, w) for w, c in comparisons.items())


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    p.add_argument("--siblings", type=int, default=8)
    args = p.parse_args()
    torch.set_num_threads(1)
    data = args.shared / "legacy_traces" / "data"
    with tempfile.TemporaryDirectory() as tmp:
        r = fidelity.check_new_model(recording(args.shared, "init_draws"), data, Path(tmp) / "new")
        c = fidelity.check_continued(
            recording(args.shared, "continue_search_variant"),
            args.shared / "legacy_traces" / "search_variant",
            data,
            Path(tmp) / "continued",
            args.siblings,
        )
    print(
        f"draws: {r.n_draws} calls compared, first difference: {r.first_bad}, generator state "
        f"after the build equal: {r.rng_state}"
    )
    same = sum(v.identical for v in r.initial.values())
    orth = max((v.max_err, v.bound, n) for n, v in r.initial.items() if n in r.orthogonal)
    print(
        f"initial model: {same}/{len(r.initial)} parameters bit-identical; orthogonal "
        f"(SVD) parameters: max error {orth[0]:.3g}, largest bound {max(v.bound for v in r.initial.values()):.3g}"
    )
    u, e, w = worst(r.first_update)
    n_same = sum(int(np.count_nonzero(c.recorded == c.port32)) for c in r.first_update.values())
    n_all = sum(c.err.size for c in r.first_update.values())
    print(
        f"first update: within bounds: {all(x.ok for x in r.first_update.values())}; "
        f"{n_same}/{n_all} elements bit-identical; worst {u:.2f} units of K ({w}, error {e:.3g}); "
        f"max error {max(x.max_err() for x in r.first_update.values()):.3g}"
    )
    v = c.verdict
    print(
        f"continued 30 updates: ok {v.ok}, same batches {v.same_batches}, branch-unstable "
        f"values {v.unstable}"
    )
    print("update  recorded cost  port cost   rel. error  noise (rel.)    units")
    for i in range(30):
        cmp = v.updates.get((i, "cost"))
        rc, pc = c.recorded.values["cost"][i], c.port.values["cost"][i]
        if cmp is None or not np.isfinite(rc):
            print(f"{10000 + i:6d}  {rc:13.3f}  {pc:10.3f}   (non-finite: pattern compared)")
            continue
        rel = abs(rc - pc) / abs(rc)
        noise = float(cmp.noise[0]) / abs(pc)  # the siblings' spread, pooled per update
        print(
            f"{10000 + i:6d}  {rc:13.3f}  {pc:10.3f}   {rel:10.2e}  {noise:14.2e}  "
            f"{cmp.units() or 0:5.2f}"
        )
    u, e, w = worst(v.updates)
    print(f"per-update values: worst {u:.2f} units ({w[1]} of update {10000 + w[0]})")
    u, e, w = worst(v.model)
    print(
        f"model after update 10030: worst {u:.2f} units ({w}, max error {e:.3g}); max error "
        f"over all parameters {max(x.max_err() for x in v.model.values()):.3g}"
    )


if __name__ == "__main__":
    main()
