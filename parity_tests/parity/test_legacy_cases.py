"""Forward-pass and beam-search parity with recorded GroundHog/Theano traces.

This is the repository's forward/beam parity suite and the pytest form of
``groundhog-port parity`` (both run :func:`groundhog_port.harness.check.check`).  For every case
folder -- the shared recordings (``search``, ``encdec``, ``phrase``, ``search_variant``,
``encdec_variant``) and the pending ones (``grconv``), or only the folders given with ``--legacy-case DIR`` (repeatable) --
there is one test per quantity group:

* ``repr``   annotations ``c`` and initial decoder states; the parsed source ``seq``
* ``pairs``  parsed ids, word probabilities, alignments and score of every test pair
* ``batch``  score.py --mode=batch: the padded batches (==) and their scores
* ``steps``  every instrumented search step fed with the recorded inputs: next_probs,
             flat_next_costs, survivors (as a set), states_gathered, next_states; the
             whole search re-run (finished hypotheses ==, costs)
* ``beam[L]`` sample.py with beam label L on every sentence: n-best lists ==, costs, the
             written line, and the original's crashes (same message)
* ``sampler`` the random sampler: MRG seed and stream states, drawn ids and sentences (==),
             -log p and costs under the derived bound (groundhog_port.harness.groups.sampler)
* ``train_step`` one SGD_adadelta update: batch, cost, gradient norm, clipped gradients,
             the Adadelta update (groundhog_port.harness.groups.train_step)

A failing test's message is the parity table of its group (max abs / max rel error per
quantity, the tolerance from ``groundhog_port.harness.trace.TOLERANCES``, the worst element).

Beam labels: every label a trace holds is checked (the shared cases: ``1``, ``5``,
``10``, ``1_normalize``, ``5_normalize``, ``10_normalize``, ``5_ignore_unk``).

Floating-point quantities are judged by the derived float32-noise bounds of
:mod:`groundhog_port.harness.tolerance`; ``steps/last_words`` and ``steps/states_gathered`` compare
the recording with itself and are checked as trace self-consistency, apart.

Known divergences of the shared cases (``KNOWN_DIVERGENCES``) are separate
``xfail(strict=True)`` tests with the reason, never edited expectations; the group test
checks every other quantity of the group.
"""

from pathlib import Path

import pytest
import torch

from groundhog_port import lookup
from groundhog_port.errors import LegacyInputError
from groundhog_port.harness.check import GROUPS, NOT_COVERED, check, find_case
from groundhog_port.harness.trace import TraceFile
from groundhog_port.legacy.loading import open_experiment
from parity_tests.support.cases import LEGACY_ROOT, PENDING_ROOT, legacy_case_dirs, legacy_data_dirs
from parity_tests.support.tools import load_tool

#: the frozen parity rows (issue 52 step 0, ``tools/freeze_outputs.py``): every row of a
#: recorded case is also compared with its frozen self, so a change that moves a product
#: while staying inside the bounds is seen
freeze = load_tool("freeze_outputs")
FROZEN_ROWS = freeze.json.loads(freeze.FROZEN.read_text(encoding="utf-8"))["parity"]

#: (case, quantity) -> reason; only for the shared recordings (the folders under LEGACY_ROOT
#: and PENDING_ROOT).
#: Empty today: the grConv recording's beam costs (now up to 2.5e-5 relative off) were known
#: divergences of the constant bounds and pass under the derived ones.
KNOWN_DIVERGENCES: dict = {}

#: NOT COVERED rows follow the rule of ``groundhog-port parity`` (docs/exit-codes.md), with no
#: list by case name: a row the recording cannot discriminate (``Row.recording_gap``: the
#: mechanism gives the same recording either way, ``groundhog_port.harness.groups.search.
#: _beam_coverage``) is expected and passes, reported; a row the recording holds but the
#: port did not compare (``Report.unexpected_uncovered``) fails, as the command exits 1.


# ---------------------------------------------------------------------------------------
# parametrisation: one test per (case, group)
# ---------------------------------------------------------------------------------------
def _is_shared(case_dir: Path) -> bool:
    try:
        return case_dir.resolve().parent in (LEGACY_ROOT.resolve(), PENDING_ROOT.resolve())
    except OSError:
        return False


def _known(case_dir: Path):
    if not _is_shared(case_dir):
        return {}
    return {q: why for (c, q), why in KNOWN_DIVERGENCES.items() if c == case_dir.name}


def _params(config):
    dirs = legacy_case_dirs(config)
    if not dirs:
        return [
            pytest.param(
                None,
                None,
                marks=pytest.mark.skip(
                    reason=f"no recorded cases at {LEGACY_ROOT} (set GROUNDHOG_LEGACY_TRACES or pass "
                    "--legacy-case DIR)"
                ),
                id="no-cases",
            )
        ]
    out = []
    for d in dirs:
        trace = d / "trace.h5"
        with TraceFile(trace) as tr:
            present = {
                "repr": tr.has("repr"),
                "pairs": tr.has("pairs"),
                "batch": tr.has("batch_all") or tr.has("batch"),
                "steps": tr.has("steps"),
                "sampler": tr.has("sampler"),
                "train_step": tr.has("train_step"),
            }
            labels = tr.beam_labels()
            extra = [g for g in NOT_COVERED if tr.has(g)]
        for g in GROUPS[:-1]:
            if present[g]:
                out.append(pytest.param(d, g, id=f"{d.name}-{g}"))
        out += [pytest.param(d, f"beam:{l}", id=f"{d.name}-beam[{l}]") for l in labels]
        out += [pytest.param(d, g, id=f"{d.name}-{g}") for g in extra]
        out += [
            pytest.param(
                d,
                f"known:{q}",
                id=f"{d.name}-{q}-known",
                marks=pytest.mark.xfail(strict=True, reason=why),
            )
            for q, why in _known(d).items()
            if not q.startswith("beam/") or q.split("/")[1] in labels
        ]
    return out


def pytest_generate_tests(metafunc):
    if {"case_dir", "group"} <= set(metafunc.fixturenames):
        metafunc.parametrize(("case_dir", "group"), _params(metafunc.config))


# ---------------------------------------------------------------------------------------
# fixtures: each case is opened once, each group computed once
# ---------------------------------------------------------------------------------------
class _Cases:
    def __init__(self, data_dirs=()):
        self.data_dirs = data_dirs
        self.opened = {}
        self.reports = {}

    def get(self, case_dir):
        if case_dir not in self.opened:
            dirs = lookup.case_data_dirs(case_dir, self.data_dirs)
            files = find_case(case_dir, data_dirs=dirs)
            exp = open_experiment(files.state, files.model, data_dir=dirs)
            exp.data_dirs = tuple(exp.data_dirs) + lookup.near_case_dirs(exp.state, case_dir)
            self.opened[case_dir] = (files, exp, TraceFile(files.trace))
        return self.opened[case_dir]

    def report(self, case_dir, group):
        """The group's report; ``beam`` covers every label of the trace in one check (the
        labels ``N`` and ``N_normalize`` share their searches), each label's test reads its
        own rows.  A file the case needs and the lookup cannot find (vocabularies kept
        elsewhere) fails the test with the lookup's one-line message, no traceback."""
        key = (case_dir, group)
        if key not in self.reports:
            try:
                files, exp, tr = self.get(case_dir)
                self.reports[key] = check(
                    exp, tr, groups=(group,), source=files.source, target=files.target
                )
            except LegacyInputError as err:
                self.reports[key] = err
        if isinstance(self.reports[key], LegacyInputError):
            pytest.fail(
                f"{case_dir.name}: {self.reports[key]} (pytest: --legacy-data-dir DIR)",
                pytrace=False,
            )
        return self.reports[key]

    def close(self):
        for _, _, tr in self.opened.values():
            tr.close()


@pytest.fixture(scope="module")
def cases(request):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: more threads only add synchronisation
    c = _Cases(tuple(legacy_data_dirs(request.config)))
    yield c
    c.close()
    torch.set_num_threads(threads)


def _message(report, rows):
    lines = [f"{report.trace}:"]
    lines += [
        f"  {r.quantity}: {r.status}; n={r.n}, max abs err {r.max_abs}, max rel err "
        f"{r.max_rel}, rule {r.tolerance_text}; at the worst element {r.worst}: error "
        f"{r.worst_err} allowed {r.worst_allowed} (float32 noise {r.worst_noise}); "
        f"{r.n_bad} bad"
        for r in rows
    ]
    lines += [f"    {r.quantity}: {n}" for r in rows for n in r.notes]
    return "\n".join(lines) + "\n" + report.table(notes=False, float64_reference=True)


# ---------------------------------------------------------------------------------------
# the test
# ---------------------------------------------------------------------------------------
def test_parity(cases, case_dir, group):
    if group in NOT_COVERED:
        pytest.skip(f"/{group}: {NOT_COVERED[group]}")
    known = _known(case_dir)
    if group.startswith("known:"):
        quantity = group[len("known:") :]
        group0, label = quantity.split("/")[:2]
        report = cases.report(case_dir, group0)
        rows = [r for r in report.rows if r.quantity == quantity]
        assert rows, f"{quantity} not in the report"
        failing = [r for r in rows if not r.passed]
        assert not failing, _message(report, failing)
        return
    if group.startswith("beam:"):
        report = cases.report(case_dir, "beam")
        prefix = f"beam/{group[len('beam:') :]}/"
        rows = [r for r in report.rows if r.quantity.startswith(prefix)]
    else:
        report = cases.report(case_dir, group)
        rows = report.rows
    # the command's rule (docs/exit-codes.md): NOT COVERED only where the recording cannot
    # tell the mechanism apart; the report keeps every such row (never dropped)
    unexpected = [r for r in rows if not r.covered and not r.recording_gap]
    assert not unexpected, _message(report, unexpected) + (
        "\nNOT COVERED although the recording holds what these rows need"
    )
    frozen = FROZEN_ROWS.get(freeze.case_name(case_dir), {})
    now = {r.quantity: freeze.row_record(r) for r in rows if r.quantity in frozen}
    moved = [f"{q}: {got} != frozen {frozen[q]}" for q, got in now.items() if got != frozen[q]]
    rows = [r for r in rows if r.covered and r.quantity not in known]
    assert rows and sum(r.n for r in rows) > 0, f"{group}: nothing compared in {report.trace}"
    failing = [r for r in rows if not r.passed]
    assert not failing, _message(report, failing)
    assert not moved, "rows differ from tools/freeze_outputs.py's record:\n" + "\n".join(moved)
