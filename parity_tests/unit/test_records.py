"""The archive's records checked against their one definition (issue 50 item 7):
:func:`groundhog_port.tasks.archive.records.problem` reads the ``TypedDict`` the producer
fills; the cache (``test_bounded_readers::test_crafted_cache_entries_are_redone``) and the
plan reader use it."""

from typing import TypedDict

import pytest

from groundhog_port.errors import LegacyInputError
from groundhog_port.file_names import VOCABULARY_FILE_KEYS
from groundhog_port.tasks.archive import records
from groundhog_port.tasks.archive.result import Files, ResultRecord


class _Row(TypedDict):
    n: int
    cost: float
    text: str | None


class Row(_Row, total=False):
    note: str
    rows: list[_Row]


def test_each_departure_is_named():
    good = {"n": 1, "cost": 2, "text": None}
    assert records.problem(good, Row) is None
    assert records.problem({**good, "cost": "nan", "note": "x"}, Row) is None  # strict_json
    cases = [
        ({"n": 1, "cost": 2.0}, "r has no 'text'"),
        ({**good, "n": True}, "r['n'] is of the wrong type (bool)"),  # a flag is no count
        ({**good, "n": "nan"}, "r['n'] is of the wrong type (str)"),
        ({**good, "cost": float("inf")}, "r['cost'] is of the wrong type (float)"),
        ({**good, "cost": "1e3"}, "r['cost'] is of the wrong type (str)"),
        ({**good, "note": None}, "r['note'] is of the wrong type (NoneType)"),
        ({**good, "extra": 1}, "r has an unknown key 'extra'"),
        ({**good, "rows": [good, {**good, "text": 3}]}, "r['rows'][1]['text'] is of the wrong"),
        ({**good, "rows": {}}, "r['rows'] is not a list"),
        ([good], "r is not an object"),
    ]
    for value, said in cases:
        got = records.problem(value, Row, "r")
        assert got is not None and got.startswith(said), (value, got)


def test_the_result_record_names_the_vocabulary_keys_once():
    assert records.keys(Files) == {*VOCABULARY_FILE_KEYS, "test", "holdout"}
    assert {"id", "reproduction", "not_outputs"} <= records.keys(ResultRecord)


def test_the_plan_entry_holds_each_file_with_its_why():
    from groundhog_port.tasks.archive import plan_file

    files = (*plan_file.FILE_KEYS, *plan_file.HOLDOUT_KEYS)
    assert {*files, *(k + "_why" for k in files)} <= plan_file.EXPERIMENT_KEYS
    # read back whole against the record: a plan's experiment of the wrong shape is refused
    text = 'version = 1\n[[experiment]]\nid = "a/run_"\nsnapshots = "x"\n'
    with pytest.raises(LegacyInputError, match="line 4.*snapshots must be list"):
        plan_file.loads(text)
