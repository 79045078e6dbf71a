"""tools/mutation_sweep.py: its catalogue still applies to the code, a patch that no longer
applies stops it loudly, and a few representative porting mistakes fail parity (the fast CI
subset; the full sweep with the output check is run by hand: docs/mutation_sweep.md).

Each representative mutation is applied to a scratch copy of groundhog_port and checked with
``groundhog-port parity --case search --only <its group>`` (about 10 s each).
"""

from pathlib import Path

import pytest

from parity_tests.support.cases import recording_dir
from parity_tests.support.tools import load_tool

REPO = Path(__file__).resolve().parents[2]


sweep = load_tool("mutation_sweep")


def test_catalogue_applies_to_the_code():
    """Every patch's old text occurs exactly once: when code moves, this fails (and the tool
    exits 2) instead of the sweep silently testing nothing."""
    assert len(sweep.MUTATIONS) >= 25
    assert len({mu.name for mu in sweep.MUTATIONS}) == len(sweep.MUTATIONS)
    for mu in sweep.MUTATIONS:
        texts = sweep.check_patches(mu)
        for rel, old, new in mu.patches:
            assert new in texts[rel] and old != new, mu.name


def test_a_patch_that_does_not_apply_stops_the_sweep(monkeypatch, capsys):
    moved = sweep.m("moved", "test", [("model/layers.py", "this text is not in layers.py", "x")])
    with pytest.raises(sweep.PatchError, match="occurs 0 times"):
        sweep.check_patches(moved)
    monkeypatch.setattr(sweep, "MUTATIONS", sweep.MUTATIONS + (moved,))
    assert sweep.main(["--only", "moved", "--no-outputs"]) == sweep.EXIT_USAGE
    assert "did the code move?" in capsys.readouterr().err


def test_scratch_copy_leaves_the_worktree_alone(tmp_path):
    mu = {m.name: m for m in sweep.MUTATIONS}["gru_update_gate_swap"]
    rel = mu.patches[0][0]
    before = (REPO / "groundhog_port" / rel).read_text()
    sweep.scratch_copy(tmp_path, mu)
    assert (REPO / "groundhog_port" / rel).read_text() == before
    assert mu.patches[0][2] in (tmp_path / "groundhog_port" / rel).read_text()


@pytest.mark.parametrize(
    "name, row",
    [
        ("gru_update_gate_swap", "search:repr/c"),
        ("sampler_3len_steps", "search:sampler/n_steps"),
        ("normalize_len_plus_1", "search:beam/10_normalize/batched/fin_costs"),
        (
            "sample_normalize_words_plus_1",
            "search:outputs/user_outputs_search/sample_interactive_normalize_stdout.txt",
        ),
    ],
)
def test_representative_mutation_fails_parity(name, row, tmp_path):
    """Caught by a row (or, ending in '/', a group of rows) that compares what the mistake
    changes -- not by a crash: a scratch copy missing a package made parity exit 2 on every
    mutation once."""
    recording_dir("search")
    mu = {m.name: m for m in sweep.MUTATIONS}[name]
    r = sweep.run_mutation(mu, None, tmp_path, fast=True, check_outputs=False)
    assert r.caught, f"{name}: parity passed with the mutation applied"
    assert any(q.startswith(row) for q, _ in r.rows), r.rows
