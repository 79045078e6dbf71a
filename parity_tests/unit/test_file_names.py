"""GroundHog's file names, one rule each (:mod:`groundhog_port.file_names`, issue 50 item 7):
what sample.py / score.py wrote is an output for discovery and never a test set for the
lookup by content, from the same functions."""

from groundhog_port import lookup
from groundhog_port.file_names import TRANS_NAME, is_output, never_a_test_set

OUTPUTS = ("trans_beam10.txt", "dev_trans.txt", "scores_batch.txt", "sample_x_error.txt")
LOGS = ("sample_trans_beam10_stdout.txt", "timings.txt")
TEXTS = ("newstest2012.en", "test.en", "output", "notes.txt")


def test_one_rule_for_outputs_and_test_sets(tmp_path):
    assert all(map(is_output, OUTPUTS)) and not any(map(is_output, LOGS + TEXTS))
    assert all(map(never_a_test_set, OUTPUTS + LOGS)) and not any(map(never_a_test_set, TEXTS))
    for name in OUTPUTS + LOGS + TEXTS:
        (tmp_path / name).write_text("a b c\n" * 4, encoding="utf-8")
    with lookup.remembering():
        found = {p.name for p, _ in lookup.text_files([lookup.Place(tmp_path, "here")], tmp_path)}
    assert found == set(TEXTS)


def test_the_recordings_names_say_their_settings():
    m = TRANS_NAME.match("trans_holdout_beam12_normalize_ignore_unk_run2.txt")
    assert m and m.group("set", "beam", "flags", "run") == (
        "holdout",
        "12",
        "_normalize_ignore_unk",
        "2",
    )
    assert TRANS_NAME.match("trans_beam0.txt") is None  # no beam of 0 was ever searched
