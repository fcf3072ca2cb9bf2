"""Issue 24 item 4: the Momotor, Flux and debusine scenario files (tests/scenarios/<family>/)
run through the services the API calls, on SQLite and on PostgreSQL, and each case's outcome
matches the expected answer its ``source`` names."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from app.db.engine import Database
from app.matching.scenarios.compare import differences
from app.matching.scenarios.run import read_scenarios, run_case

pytestmark = pytest.mark.db

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
FAMILIES = ("momotor", "flux", "debusine")
CASES = [
    case
    for family in FAMILIES
    for path in sorted((SCENARIOS / family).glob("*.jsonl"))
    for case in read_scenarios(path)
]


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_has_ten_cases_with_their_source(family: str) -> None:
    cases = [case for case in CASES if case["family"] == family]
    assert len(cases) >= 10
    assert all(case["source"].strip() and case.get("expected") for case in cases)


def test_case_ids_are_unique() -> None:
    ids = [case["id"] for case in CASES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("case", CASES, ids=lambda case: str(case["id"]))
def test_case_matches_its_expected_on_this_database(
    database: Database, case: dict[str, Any]
) -> None:
    outcome = run_case(database, case)
    assert not differences(case["expected"], outcome), json.dumps(outcome, indent=1)


MOMOTOR_CASES = [case for case in CASES if case["family"] == "momotor"]
STRENGTH_NAMES = {-math.inf: "STRONGEST", -1.0: "STRONG", 0.0: "NEUTRAL", 1.0: "WEAK"}
STRENGTH_NAMES[math.inf] = "WEAKEST"


@pytest.mark.parametrize("case", MOMOTOR_CASES, ids=lambda case: str(case["id"]))
def test_momotor_expectations_are_what_momotor_itself_answers(case: dict[str, Any]) -> None:
    """The expected candidates and strengths of the Momotor files are Momotor's own
    (momotor-engine-shared 2.1.3, momotor/shared/resources/__init__.py Resources.match):
    the upstream package decides, not jobmatch."""
    from momotor.shared.resources import NoMatch, Resources

    workers = case["cluster"]["workers"]
    for number, job in enumerate(case["jobs"], start=1):
        expected = case["expected"]["jobs"][job.get("label", f"j{number}")]
        if expected.get("submit") == "rejected":
            with pytest.raises(ValueError):
                Resources.from_string(job["resources"])
            continue
        task = Resources.from_string(job["resources"])
        ranked = []
        for worker in workers:
            try:
                strength = task.match(Resources.from_string(worker.get("resources", "")))
            except NoMatch:
                continue
            ranked.append((strength, worker["name"]))
        ranked.sort()
        assert expected["candidates"] == [name for _strength, name in ranked]
        assert expected["strengths"] == {name: STRENGTH_NAMES[s] for s, name in ranked}
