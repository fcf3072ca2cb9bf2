"""Scenario files that set an ordering policy and assert a pull order
(tests/scenarios/ordering/, docs/scenarios.md): run through the services the API calls, on
SQLite and on PostgreSQL. They sit apart from the family folders: the API's own run of a
case (tests/matching/scenarios/test_api_agrees.py) serves under the server's policy."""

from __future__ import annotations

import json
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
