"""Issue 36's host groups, access lists, projects and qsub -w e on both databases: the
cases of tests/scenarios/sge/hostgroups_acl_projects.jsonl (each naming its man page or
Grid Engine 6.2u5 source function) run through the engine on SQLite and PostgreSQL; an
untraced scheduling run (the SQL misfit cache's path) places host group jobs as the traced
one does; a case whose cluster cannot be set up fails alone, with an error in its outcome;
and a quota set written while jobs run counts their projects.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from app.cli import cli
from app.db.engine import Database
from app.db.models import Allocation
from app.matching.gridengine import scenarios
from app.matching.gridengine.quota_sets import create_quota_set, list_quota_sets, usage_lines
from app.matching.gridengine.run import schedule
from app.matching.scenarios.compare import differences
from app.matching.scenarios.run import read_scenarios, run_file

pytestmark = pytest.mark.db

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios" / "sge"
FILE = SCENARIOS / "hostgroups_acl_projects.jsonl"
CASES = read_scenarios(FILE)


def test_the_file_covers_every_feature_with_sources() -> None:
    tags = {tag for case in CASES for tag in case["tags"]}
    assert {"hostgroup", "access_list", "project", "verify", "nesting", "quota"} <= tags
    assert all(case["source"] for case in CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda case: str(case["id"]))
def test_case_matches_its_expected_on_this_database(
    database: Database, case: dict[str, Any]
) -> None:
    outcome = scenarios.run_case(database, case)
    assert "sql_disagrees" not in outcome, outcome["sql_disagrees"]
    assert "error" not in outcome, outcome["error"]
    assert not differences(case["expected"], outcome), json.dumps(outcome, indent=1)


def _by_id(case_id: str) -> dict[str, Any]:
    return next(case for case in CASES if case["id"] == case_id)


@pytest.mark.parametrize("case_id", ["G01", "G02", "G03", "G06", "G26"])
def test_an_untraced_run_places_host_group_jobs_as_the_traced_one(
    database: Database, case_id: str
) -> None:
    """The misfit SQL lets every host through for a host group item; the run that only
    looks at the workers SQL keeps must still book what the traced scenario expects."""
    case = _by_id(case_id)
    with database.transaction() as session:
        scenarios._setup_table(session, case)
        names = scenarios._setup_cluster(session, case["cluster"])
        scenarios._setup_groups(session, case["cluster"])
        job_id, _outcome = scenarios._submit(session, case["job"], 0)
        assert job_id is not None
        assert schedule(session).dispatched == 1
        by_id = {qi_id: name for name, qi_id in names.items()}
        placed: dict[str, int] = {}
        for qi_id, slots in session.execute(
            select(Allocation.queue_instance_id, Allocation.slots).where(
                Allocation.job_id == job_id
            )
        ):
            placed[by_id[qi_id]] = placed.get(by_id[qi_id], 0) + slots
        session.rollback()
    assert placed == case["expected"]["assignment"]


def test_a_cycle_in_the_case_s_host_groups_fails_that_case_with_the_message(
    database: Database,
) -> None:
    case = dict(_by_id("G02"))
    case["cluster"] = {**case["cluster"], "host_groups": {"@a": ["@b"], "@b": ["h1", "@a"]}}
    outcome = scenarios.run_case(database, case)
    assert outcome == {
        "error": 'cluster: Hostgroup "@a" in specification of "@b" would create a cycle'
    }


BAD_SET = "{\n   name bad\n   enabled TRUE\n   limit users {alice to slots=1\n}\n"


def test_a_quota_set_the_engine_refuses_fails_its_case_only(tmp_path: Path) -> None:
    bad = dict(_by_id("G13"), id="BAD", quota_sets=[BAD_SET])
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps(bad) + "\n" + json.dumps(_by_id("G14")) + "\n")
    first, second = run_file(path)
    assert first.matched is False
    assert first.outcome["error"].startswith("quota_sets[0]: unclosed '{'")
    assert second.matched is True
    # The command runs every case and says which differ (exit 1), not a server error (5).
    result = CliRunner().invoke(cli, ["scenario", "run", "--json", str(path)])
    assert result.exit_code == 1, result.output
    records = [json.loads(line) for line in result.output.splitlines()]
    assert [(r["id"], r["matched"]) for r in records] == [("BAD", False), ("G14", True)]
    assert "unclosed '{'" in records[0]["outcome"]["error"]


def test_a_case_without_expected_that_errs_does_not_match(tmp_path: Path) -> None:
    bad = {key: value for key, value in _by_id("G13").items() if key != "expected"}
    path = tmp_path / "referee.jsonl"
    path.write_text(json.dumps({**bad, "quota_sets": [BAD_SET]}) + "\n")
    (result,) = run_file(path)
    assert result.matched is False and "error" in result.outcome


def test_a_set_written_while_jobs_run_counts_their_projects(database: Database) -> None:
    """Grid Engine counts running jobs against a new set (the usage key holds the project
    when the rule expands projects: rqs_get_rue_string())."""
    case = _by_id("G18")
    with database.transaction() as session:
        scenarios._setup_table(session, case)
        scenarios._setup_cluster(session, case["cluster"])
        scenarios._setup_groups(session, case["cluster"])
        for index, job in enumerate(case["jobs"]):
            scenarios._submit(session, job, index)
        assert schedule(session).dispatched == 5
        row = create_quota_set(
            session, "name late\nenabled TRUE\nlimit projects {p1,p2} to slots=1\n"
        )
        used = {line.key: line.used for line in usage_lines(session, row)}
        assert [r.name for r in list_quota_sets(session, limit=10, offset=0)] == ["late"]
        session.rollback()
    # Two p1 jobs run (no quota yet), so its key is over the new limit; p2 holds one.
    assert used == {"/p1////": 2.0, "/p2////": 1.0}


CONFORMANCE = (
    Path(__file__).resolve().parents[3]
    / "conformance"
    / "gridengine"
    / "cases"
    / "hostgroups_acl_projects.jsonl"
)


def test_the_referee_cases_are_valid_and_within_what_the_referee_can_set_up() -> None:
    """12+ cases without expected outcomes (the real Grid Engine gives them): logical hosts
    h1 and h2, users alice/bob/carol/dave, no `used` bookings, no load values."""
    cases = read_scenarios(CONFORMANCE)
    assert len(cases) >= 12
    assert len({case["id"] for case in cases}) == len(cases)
    for case in cases:
        assert str(case["id"]).startswith("HG")
        assert case["title"] and case["tags"] and case["source"]
        assert "expected" not in case
        text = json.dumps(case)
        assert '"used"' not in text and "load_values" not in text
        hosts = {queue["host"] for queue in case["cluster"]["queues"]}
        assert hosts <= {"h1", "h2"}
        for job in case.get("jobs", [case.get("job")]):
            assert job.get("user", "alice") in {"alice", "bob", "carol", "dave"}
    # jobmatch can run every one of them (no set-up error).
    assert all("error" not in result.outcome for result in run_file(CONFORMANCE))
