"""Issue 24's Grid Engine scenarios on both databases: the cases of fidelity.jsonl (the
scenario format's EXCL and failed-job fields), job_consumables.jsonl (``complex(5)``: JOB
consumables on the master queue only), queue_lists.jsonl (``qsub -q``, ``-masterq``,
``-soft -q``) and load_thresholds.jsonl (queue_conf(5) ``load_thresholds``) run through
the engine on SQLite and PostgreSQL, and a scheduling run without tracing (the SQL misfit
cache's path) places the parallel JOB consumable job with a slave-only queue as the
traced run does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from app.db.engine import Database
from app.db.models import Allocation
from app.matching.gridengine import scenarios
from app.matching.gridengine.run import schedule
from app.matching.scenarios.compare import differences
from app.matching.scenarios.run import read_scenarios

pytestmark = pytest.mark.db

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios" / "sge"
FILES = (
    "fidelity.jsonl",
    "job_consumables.jsonl",
    "queue_lists.jsonl",
    "load_thresholds.jsonl",
)
CASES = [case for name in FILES for case in read_scenarios(SCENARIOS / name)]


@pytest.mark.parametrize("case", CASES, ids=lambda case: str(case["id"]))
def test_case_matches_its_expected_on_this_database(
    database: Database, case: dict[str, Any]
) -> None:
    outcome = scenarios.run_case(database, case)
    assert "sql_disagrees" not in outcome, outcome["sql_disagrees"]
    assert not differences(case["expected"], outcome), json.dumps(outcome, indent=1)


def _by_id(case_id: str) -> dict[str, Any]:
    return next(case for case in CASES if case["id"] == case_id)


@pytest.mark.parametrize("case_id", ["J01", "J03", "J08"])
def test_an_untraced_run_places_slave_tasks_where_the_job_consumable_is_missing(
    database: Database, case_id: str
) -> None:
    """The misfit cache must keep a worker whose host or queue lacks a JOB consumable for
    a parallel job (it may take slave tasks), so the run without tracing, which only
    looks at the workers SQL keeps, books what the traced scenario expects."""
    case = _by_id(case_id)
    with database.transaction() as session:
        scenarios._setup_table(session, case)
        names = scenarios._setup_cluster(session, case["cluster"])
        job_id, _outcome = scenarios._submit(session, case["job"], 0)
        assert job_id is not None
        report = schedule(session)
        assert report.dispatched == 1
        by_id = {qi_id: name for name, qi_id in names.items()}
        placed = {
            by_id[qi_id]: slots
            for qi_id, slots in session.execute(
                select(Allocation.queue_instance_id, Allocation.slots).where(
                    Allocation.job_id == job_id
                )
            )
        }
        session.rollback()
    assert placed == case["expected"]["assignment"]
