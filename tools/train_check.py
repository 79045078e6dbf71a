#!/usr/bin/env python
"""Train the bundled RNNsearch fixture for N updates (default 100) and report the figures:
training cost of the trained-on batches before/after, updates/s and target words/s, and the
test-set cost of the saved checkpoint, reloaded.

    python tools/train_check.py --data-dir ../shared/legacy_traces/data [--updates 100]
"""

import argparse
import sys
import tempfile
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from groundhog_port.training.check import train_and_check  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--data-dir",
        default=str(REPO.parent / "shared" / "legacy_traces" / "data"),
        help="folder with binarized_text.shuffled.{en,fr}.h5",
    )
    p.add_argument("--updates", type=int, default=100)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    fx = REPO / "fixtures" / "search"
    with tempfile.TemporaryDirectory() as tmp:
        r = train_and_check(
            fx / "search_state.pkl",
            fx / "search_model.npz",
            args.data_dir,
            f"{tmp}/search_",
            args.updates,
            fx / "test.en",
            fx / "test.fr",
        )
    print(r.log, end="")
    print(
        f"updates: {r.updates} in {r.seconds:.1f} s ({r.updates / r.seconds:.2f} updates/s, "
        f"{r.words / r.seconds:.0f} target words/s incl. the saves)"
    )
    print(
        f"training cost of the {r.updates} trained-on batches ({r.words:.0f} target words): "
        f"before {r.cost_before:.1f} ({r.cost_before / r.words:.4f}/word), after "
        f"{r.cost_after:.1f} ({r.cost_after / r.words:.4f}/word)"
    )
    print(
        f"test set scored with the saved checkpoint: {r.test_sentences} sentences, total cost "
        f"of the finite ones {r.test_cost:.2f} ({r.test_nan} nan, score.py's padding quirk)"
    )
    return 0 if r.cost_after < r.cost_before else 1


if __name__ == "__main__":
    sys.exit(main())
