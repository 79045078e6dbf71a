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


def test_a_beam_no_sample_py_searched_is_never_tried_first(caplog):
    """``hyp.beam7000`` or a README's ``--beam-size 7000``: not believed (some 2 GiB to
    search at 7000: round five's +563 MiB), said once per run; the settings by content."""
    import logging

    from groundhog_port.tasks.archive.outputs import settings_order
    from groundhog_port.tasks.reproduce import Settings, inferable_settings

    caplog.set_level(logging.WARNING)
    every = inferable_settings()
    with lookup.remembering():
        for _ in range(2):
            assert settings_order("hyp.beam7000", {}, Settings, every) == (every, None, "")
        readme = {"output": (7000, False, False)}
        assert settings_order("output", readme, Settings, every) == (every, None, "")
    said = [r.getMessage() for r in caplog.records if "more than the 500" in r.getMessage()]
    assert len(said) == 2 and "a README's sample.py command says beam 7000" in said[1], said
    order, hint, _ = settings_order("hyp.beam500", {}, Settings, every)
    assert hint == Settings(500, False, False) and order[0] == hint
