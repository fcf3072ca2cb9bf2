"""The plans the express end and take run on, made on statistics taken before any job
ran (issue 38): the cost of an end must not grow with the worker's history or with the
allocations ever made, nor a take's with the number of waiting jobs.

A drain ANALYZEd before its first pull (as after a bulk submission) plans with every job
of ``worker_id`` NULL and no allocation at all. Found in issue 38 with auto_explain and
``pg_stat_user_tables``: the finish's cached generic plan read the worker's every job
through ``ix_jobs_worker_id`` and every allocation with a sequential scan, once per
finish. The end compares the worker through ``coalesce``
(app/matching/dispatch/finish_parts.py ``runs_on``) and the event loop's connections
price sequential scans out (app/db/event_loop.py ``KEYED_PLANS``). On a jobs table
without statistics, the take's claim read every waiting job through the state's indexes
and joined them to its eight heads, once per pull: it checks that the job still waits
through ``coalesce`` (app/matching/dispatch/pull_claim.py ``still_waiting``)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest
from sqlalchemy import text

from app.db.base import utcnow
from app.db.engine import Database
from app.matching import submission, workers
from app.matching.dispatch import express
from app.matching.submission import JobSpec
from app.matching.workers import WorkerSpec
from tests.databases import migrated_database, run_directory
from tests.support.express_rows import on_loop_then_undo


@pytest.fixture(autouse=True)
def _postgresql_only(backend: str) -> None:
    if backend != "postgresql":
        pytest.skip("the express way and its plans are PostgreSQL's")


def _analyze(database: Database) -> None:
    with database.engine.connect() as connection:
        connection.execute(text("COMMIT"))
        connection.execute(text("ANALYZE"))


def _farm(database: Database) -> None:
    """A worker and 300 waiting jobs."""
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="w", slots=4))
        for _ in range(300):
            submission.submit_job(session, JobSpec(command=["true"]), submitter="t")


def _stale_farm(database: Database) -> None:
    """A worker and 300 waiting jobs, ANALYZEd: no job has a worker, no allocation."""
    _farm(database)
    _analyze(database)


def _scans(plan: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """Every scan of a table in the plan: (node, table, index)."""
    found = []
    if "Scan" in plan["Node Type"] and ("Relation Name" in plan or "Index Name" in plan):
        # A bitmap index scan names its index only; its heap scan, the table.
        found.append((plan["Node Type"], plan.get("Relation Name", ""), plan.get("Index Name")))
    for child in plan.get("Plans", []):
        found += _scans(child)
    return found


def _generic_plans(database: Database, statements: dict[str, tuple[Any, Any]]) -> dict[str, Any]:
    """The generic plan of each prebuilt statement (with its parameters), as the event
    loop's connection would cache it (explained in a transaction rolled back after)."""
    dialect = database.engine.dialect

    async def explain(transaction: Any) -> dict[str, Any]:
        plans = {}
        await transaction.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        for name, (prebuilt, params) in statements.items():
            compiled, sent = prebuilt._bound(dialect, params)
            await transaction.execute(f"PREPARE jm_{name} AS {compiled.sql}")
            cursor = psycopg.AsyncClientCursor(transaction.connection)
            values = ", ".join(["%s"] * len(sent))
            await cursor.execute(f"EXPLAIN (FORMAT JSON) EXECUTE jm_{name}({values})", sent)
            row = await cursor.fetchone()
            assert row is not None
            document = row[0] if not isinstance(row[0], str) else json.loads(row[0])
            plans[name] = document[0]["Plan"]
        return plans

    plans, _rows = on_loop_then_undo(database, explain)
    return dict(plans)


def test_the_express_ends_find_the_job_by_id_and_its_allocation_by_index(
    database: Database,
) -> None:
    _stale_farm(database)
    report = SimpleNamespace(job_id=7, outcome="finished", reason=None, exit_code=0, output=None)
    now = utcnow()
    single = express._finish_params(7, "w", report, now)
    assert single is not None
    many = {
        **express._pull_params("w", now),
        **(
            express._end_many_params([report, SimpleNamespace(**{**vars(report), "job_id": 8})])
            or {}
        ),
    }
    plans = _generic_plans(
        database,
        {
            "end": (express._END_BY_NAME_QUIETLY[False], single),
            "end_many": (express._END_MANY_QUIETLY, many),
        },
    )
    for name, plan in plans.items():
        scans = _scans(plan)
        assert "jobs" in {table for _, table, _ in scans}, (name, scans)
        by_worker = [scan for scan in scans if scan[2] == "ix_jobs_worker_id"]
        assert not by_worker, (name, scans)  # every job the worker ever ran
        whole = [
            scan for scan in scans if scan[0] == "Seq Scan" and scan[1] in ("jobs", "allocations")
        ]
        assert not whole, (name, scans)  # every job, or every allocation ever made


def _claims(
    plan: dict[str, Any], pick: bool, inside: bool = False
) -> list[tuple[str, str, str | None]]:
    """The scans of jobs under the claim: the UPDATE of jobs and, with ``pick``, the
    LockRows that picks the free heads (the heads themselves are read elsewhere, by
    their order's index)."""
    here = (pick and plan.get("Node Type") == "LockRows") or (
        plan.get("Node Type") == "ModifyTable" and plan.get("Relation Name") == "jobs"
    )
    found = []
    if inside or here:
        found += [scan for scan in _scans({**plan, "Plans": []}) if scan[1] in ("jobs", "")]
    for child in plan.get("Plans", []):
        found += _claims(child, pick, inside or here)
    return found


def test_the_express_takes_claim_their_heads_by_id_on_a_table_without_statistics(
    backend: str, tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    """A new deployment's database: migrated, never ANALYZEd (autovacuum analyzes a table
    only after its first fifty changes, and not at all where it is off)."""
    with migrated_database(backend, tmp_path, run_directory(pytestconfig)) as url:
        fresh = Database(url)
        try:
            _farm(fresh)
            now = utcnow()
            pull = {**express._pull_params("w", now), "p_count": 4, "p_room": True}
            plans = _generic_plans(
                fresh,
                {
                    "take": (express._TAKE_BY_NAME_WITH_ROOM, pull),
                    "take_many": (express._take_many(4), pull),
                },
            )
        finally:
            fresh.dispose()
    for name, plan in plans.items():
        # A batch picks its free heads by the state on purpose (batch_sql.py says why).
        claims = _claims(plan, pick=name == "take")
        assert claims, (name, _scans(plan))
        assert all(index == "pk_jobs" for _, _, index in claims), (name, claims)
