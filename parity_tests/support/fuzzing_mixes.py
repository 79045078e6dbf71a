"""Fuzz targets of issue 53: inputs whose variation no hand-written case reaches.

* ``ties``: costs with many equal values, in the order ``numpy.argsort`` gave them on the
  original's numpy (1.23: insertion sort up to 16 items, stable; introsort above, whose
  partitions reorder equal keys) -- the sampler's ``--verbose`` listing and the training
  batches' order.  The oracle is that numpy itself, run in ``.venv-theano`` (the real-Theano
  environment, numpy 1.23.5): the target is unavailable, and ``tools/fuzz.py`` says so,
  where that environment is not built.
* ``serve-batch``: concurrent requests of several clients that differ in every per-request
  option (beam size, ``ignore_unk``, normalisation, attention, the demo's legacy choice),
  queued together so that the server's decoding thread batches them; each must get what it
  gets decoded alone.  The output bias of ``UNK`` is raised in some cases so that
  ``ignore_unk`` changes the n-best lists.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np

from parity_tests.support.cases import REPO

LEGACY_PYTHON = REPO / ".venv-theano" / "bin" / "python"
_legacy_numpy: list[str] = []


def legacy_numpy_version() -> str | None:
    """numpy's version in ``.venv-theano`` (None: no such environment, or no numpy 1.23)."""
    if not _legacy_numpy:
        version = ""
        if LEGACY_PYTHON.is_file():
            run = subprocess.run(
                [str(LEGACY_PYTHON), "-c", "import numpy; print(numpy.__version__)"],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            version = run.stdout.strip() if run.returncode == 0 else ""
        _legacy_numpy.append(version)
    return _legacy_numpy[0] if _legacy_numpy[0].startswith("1.23.") else None


# ---------------------------------------------------------------------------------------------
# ties
# ---------------------------------------------------------------------------------------------
def gen_ties(rng, fx, workdir):
    """Costs as a sampler prints them: ``n`` samples (mostly past 16) over a few distinct
    values, some a float32 ulp apart, in random order."""
    n = rng.choice([rng.randint(2, 16), rng.randint(17, 40), rng.randint(41, 600)])
    distinct = rng.randint(1, 6)
    base = [round(rng.uniform(0.5, 60.0), rng.choice([0, 2, 6])) for _ in range(distinct)]
    if rng.random() < 0.4:  # neighbours one float32 ulp apart
        v = np.float32(base[0])
        base.append(float(np.nextafter(v, np.float32(np.inf))))
    costs = [rng.choice(base) for _ in range(n)]
    label = f"{n} costs over {len(set(costs))} values"
    return _case("ties", label, {"costs.json": json.dumps(costs).encode()}, {})


def load_ties(fx, paths, opts):
    from groundhog_port.sampling.sampler import legacy_order

    costs = json.loads(Path(paths["costs.json"]).read_text())
    mine = legacy_order(costs)
    run = subprocess.run(
        [
            str(LEGACY_PYTHON),
            "-c",
            "import json, sys, numpy; "
            "print(json.dumps(numpy.argsort(numpy.array(json.load(open(sys.argv[1])))).tolist()))",
            str(paths["costs.json"]),
        ],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    numpy_1_23 = json.loads(run.stdout)
    if mine != numpy_1_23:
        first = next(i for i, (a, b) in enumerate(zip(mine, numpy_1_23)) if a != b)
        raise AssertionError(
            f"{len(costs)} costs: listed in another order than numpy 1.23's argsort from "
            f"position {first} ({mine[first : first + 4]} against {numpy_1_23[first : first + 4]})"
        )
    return f"{len(costs)} costs in numpy 1.23's order"


# ---------------------------------------------------------------------------------------------
# serve-batch
# ---------------------------------------------------------------------------------------------
BEAMS = (1, 2, 3, 5, 8, 12)


def gen_serve_batch(rng, fx, workdir):
    """2-8 requests of 1-4 clients: fixture sentences (some cut, some with an unknown word),
    each with its own beam size and flags."""
    lines = fx.read(fx.text_files[0]).decode("utf-8").splitlines()
    requests = []
    for _ in range(rng.randint(2, 8)):
        words = rng.choice(lines).split()
        if rng.random() < 0.3:
            words = words[: rng.randint(1, len(words))]
        if rng.random() < 0.3:
            words.insert(rng.randint(0, len(words)), "zzunknownzz")
        requests.append(
            dict(
                client=f"client{rng.randint(1, 4)}",
                text=" ".join(words),
                beam_size=rng.choice(BEAMS),
                ignore_unk=rng.random() < 0.5,
                normalize=rng.random() < 0.5,
                attention=rng.random() < 0.3,
                legacy=rng.random() < 0.2,
            )
        )
    opts = {"unk_boost": rng.choice([0.0, 0.0, 8.0, 12.0])}
    label = f"{len(requests)} requests, UNK bias +{opts['unk_boost']:g}"
    return _case("serve-batch", label, {"requests.json": json.dumps(requests).encode()}, opts)


def _outcome(job):
    o = job.outcome
    attention = None if o.attention is None else np.asarray(o.attention).tolist()
    return (o.sentences, o.raw_costs, o.costs, o.best, o.trans, attention, o.error)


def load_serve_batch(fx, paths, opts):
    import torch

    from groundhog_port.legacy.loading import open_experiment
    from groundhog_port.serve.batcher import Batcher
    from groundhog_port.serve.engine import Engine, Job
    from parity_tests.support.serve import ManualClock

    requests = json.loads(Path(paths["requests.json"]).read_text())
    exp = open_experiment(fx.main.state, fx.main.model, data_dir=fx.main.data_dir)
    with torch.no_grad():
        exp.model.decoder.output_layer.b[exp.state["unk_sym_target"]] += opts["unk_boost"]
    engine = Engine(exp)

    def jobs():
        return [
            Job(
                engine.prepare(r["text"], pretokenized=True),
                r["beam_size"],
                r["ignore_unk"],
                normalize=r["normalize"],
                legacy=r["legacy"],
                attention=r["attention"],
            )
            for r in requests
        ]

    alone = []
    for job in jobs():
        engine.decode([job])
        alone.append(_outcome(job))
    clock = ManualClock()
    batcher = Batcher(engine, wait_s=1.0, clock=clock)
    try:
        futures = [batcher.submit([j], client=r["client"])[0] for j, r in zip(jobs(), requests)]
        clock.run_free()  # every request queued before the gathering window ends
        together = [_outcome(f.result(timeout=300)) for f in futures]
    finally:
        batcher.close()
    for i, (a, b) in enumerate(zip(together, alone)):
        if a != b:
            raise AssertionError(
                f"request {i} ({requests[i]}) decoded in a batch of {len(requests)} differs "
                f"from alone: {a[0][:2] if a[0] else a[-1]} against {b[0][:2] if b[0] else b[-1]}"
            )
    return f"{len(requests)} requests, {batcher.stats['batches']} batches, each as alone"


def _case(target, label, files, opts):
    from parity_tests.support.fuzzing import Case

    return Case(target, label, files, opts)
