"""The four porting mistakes that used to pass parity (issue 24) now fail it.

Each test applies one plausible mistake to the code users run (by monkeypatching the
product's own function, as a careless port would have written it) and checks that
:func:`groundhog_port.harness.check.check` fails on a shared recording, in a row that names the
product function whose output was compared:

* ``--normalize`` dividing by ``len + 1`` (both searches share ``search.literal.normalized``);
* the batched search (translate's default) ignoring ``ignore_unk``;
* Adadelta's ``rho`` and ``1 - rho`` swapped in ``SGDAdadelta`` (what ``train`` runs);
* the sampler drawing ``3 * len(seq)`` steps instead of ``3 * (len(seq) - 1)``.

``groundhog-port parity --case`` runs the same :func:`check`; the exit codes and failing rows
of the hand-applied mistakes are in docs/trace_format.md ("What parity compares").
"""

import numpy as np
import pytest
import torch

from groundhog_port.harness.check import check, find_case
from groundhog_port.harness.trace import TraceFile
from groundhog_port.legacy.loading import open_experiment
from parity_tests.support.cases import LEGACY_ROOT


def _run(name, **kw):
    d = LEGACY_ROOT / name
    if not (d / "trace.h5").is_file():
        pytest.skip(f"recorded case {d} not found (set GROUNDHOG_LEGACY_TRACES)")
    files = find_case(d)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        exp = open_experiment(files.state, files.model, data_dir=files.dir)
        with TraceFile(files.trace) as tr:
            return check(exp, tr, source=files.source, target=files.target, **kw)
    finally:
        torch.set_num_threads(threads)


def _failed(report):
    return {r.quantity: r for r in report.failed}


def test_normalize_by_len_plus_one_fails(monkeypatch):
    from groundhog_port.search import batched, literal

    def normalized(hyps):
        return literal.Hypotheses(
            hyps.trans, hyps.costs / np.array([len(t) + 1 for t in hyps.trans], dtype=np.float64)
        )

    monkeypatch.setattr(literal, "normalized", normalized)
    monkeypatch.setattr(batched, "normalized", normalized)
    failed = _failed(_run("search", groups=("beam",), beam_labels=["10_normalize"]))
    for q, product in (
        ("beam/10_normalize/fin_costs", "Translator(batch_size=1)"),
        ("beam/10_normalize/batched/fin_costs", "Translator(batch_size=32)"),
    ):
        assert q in failed and failed[q].product.startswith(product), sorted(failed)
        assert failed[q].max_ratio > 100


def test_batched_search_ignoring_ignore_unk_fails(monkeypatch):
    from groundhog_port.search.batched import BatchedBeamSearch

    search_many = BatchedBeamSearch.search_many
    monkeypatch.setattr(
        BatchedBeamSearch,
        "search_many",
        lambda self, seqs, n, ignore_unk=False, *rest, **kw: search_many(
            self, seqs, n, False, *rest, **kw
        ),
    )
    report = _run("encdec", groups=("beam",), beam_labels=["5_ignore_unk"])
    failed = _failed(report)
    assert "beam/5_ignore_unk/batched/fin_trans" in failed, report.table()
    assert "BatchedBeamSearch" in failed["beam/5_ignore_unk/batched/fin_trans"].product
    assert not [q for q in failed if "/batched/" not in q]  # the literal search is right


def test_adadelta_rho_swapped_fails(monkeypatch):
    from groundhog_port.training.adadelta import SGDAdadelta

    init = SGDAdadelta.__init__

    def swapped(self, model, state):
        init(self, model, state)
        self.rho, self.one_minus_rho = self.one_minus_rho, self.rho

    monkeypatch.setattr(SGDAdadelta, "__init__", swapped)
    failed = _failed(_run("search", groups=("train_step",)))
    assert {"train_step/gnorm2_after", "train_step/params_after"} <= set(failed), sorted(failed)
    assert failed["train_step/params_after"].product.startswith("SGDAdadelta.step")


def test_sampler_drawing_3_len_steps_fails(monkeypatch):
    from groundhog_port.sampling import sampler

    monkeypatch.setattr(sampler, "n_steps_for", lambda seq: 3 * len(seq))
    failed = _failed(_run("search", groups=("sampler",)))
    assert {
        "sampler/n_steps",
        "sampler/sample_ids",
        "sampler/rstate_after_call",
        "sampler/batched/sample_ids",
        "sampler/batched/rstate_after_last_call",
    } <= set(failed), sorted(failed)
    assert failed["sampler/sample_ids"].product.startswith("Sampler.sample ")


def test_sampler_costs_summed_in_float64_fail(monkeypatch):
    """A float64 sum of the float32 ``-log p`` moves every printed sample cost but stays far
    inside the value bound: the exact float32 check of ``sampler/costs`` catches it (the
    mutation sweep's ``sample_cost_float64_sum``)."""
    import dataclasses

    from groundhog_port.sampling import sampler

    original = sampler.finish

    def finish64(draw, idx2word, normalize=False):
        s = original(draw, idx2word, normalize)
        costs = [
            -np.sum(np.asarray(draw.neg_log_probs[: len(p), i], np.float64))
            for i, p in enumerate(s.word_probs)
        ]
        return dataclasses.replace(s, costs=costs)

    monkeypatch.setattr(sampler, "finish", finish64)
    failed = _failed(_run("search", groups=("sampler",)))
    assert {"sampler/costs", "sampler/batched/costs"} <= set(failed), sorted(failed)
    assert any("not float32 values" in n for n in failed["sampler/costs"].notes)
