"""Scenario files that set an ordering policy and assert a pull order
(tests/scenarios/ordering/, docs/scenarios.md): run through the services the API calls, on
SQLite and on PostgreSQL. They sit apart from the family folders: the API's own run of a
case (tests/matching/scenarios/test_api_agrees.py) serves under the server's policy."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from app.db.engine import Database
from app.matching.ordering import policy
from app.matching.scenarios.cases import ScenarioError
from app.matching.scenarios.compare import differences
from app.matching.scenarios.run import read_scenarios, run_case

FOLDER = Path(__file__).resolve().parents[2] / "scenarios" / "ordering"
CASES = [case for path in sorted(FOLDER.glob("*.jsonl")) for case in read_scenarios(path)]


@pytest.mark.parametrize("case", CASES, ids=lambda case: str(case["id"]))
def test_case_matches_its_expected_order(database: Database, case: dict[str, Any]) -> None:
    outcome = run_case(database, case)
    assert not differences(case["expected"], outcome), json.dumps(outcome, indent=1)
    assert policy.active() == policy.DEFAULT  # the case's policy ends with the case


def test_a_bad_ordering_is_a_format_error(database: Database) -> None:
    case = {**CASES[0], "ordering": "fair-share,fair-share"}
    with pytest.raises(ScenarioError, match="ordering: rule 2 \\('fair-share'\\) is named twice"):
        run_case(database, case)


GROUPED = next(case for case in CASES if case["id"] == "ordering-04")


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"groups": ["course-a"]}, "'groups' maps submitters to group names (null: none)"),
        ({"groups": {"alice": 3}}, "groups: alice: 3 is not a group name"),
        ({"groups": {"alice": "bad name"}}, "groups: alice: 'bad name' is not a group name"),
        ({"groups": {"alice": ""}}, "groups: alice: '' is not a group name"),
        ({"group_weights": {"course-a": "much"}}, "'group_weights' maps groups to numbers"),
        ({"group_weights": {"course-a": True}}, "'group_weights' maps groups to numbers"),
        ({"group_weights": {"bad name": 2}}, "group_weights: 'bad name' is not a group name"),
        ({"group_weights": {"course-a": 0}}, "group_weights: course-a: weight: must be a number"),
        ({"group_weights": {"course-a": 1e12}}, "group_weights: course-a: weight: must be"),
    ],
)
def test_a_bad_group_is_a_format_error_naming_it(
    database: Database, fields: dict[str, Any], words: str
) -> None:
    with pytest.raises(ScenarioError, match=re.escape(f"case ordering-04: {words}")):
        run_case(database, {**GROUPED, **fields})


def test_a_null_group_leaves_the_submitter_on_its_own(database: Database) -> None:
    """bob out of course-a (``null``): a group of his own that used nothing goes first,
    before dave; course-a is alice's alone, and carol's course-b still goes last."""
    case = {**GROUPED, "groups": {**GROUPED["groups"], "bob": None}}
    outcome = run_case(database, case)
    assert [pull["job"] for pull in outcome["pull_order"]] == ["b1", "d1", "a1", "c1"]
