"""Allocation's statements reach the workers they change by key under a generic plan
(issue 9).

The allocation path runs its statements under generic plans (``dialect.
generic_plans_from_here``), which cannot see how few workers a job touches. Two joins
were planned as hashes over every worker's row, 0.4-0.6 ms each at 4,096 nodes
(auto_explain on bench/allocation.py):

* the booking statement's move of the untouched counters joined ``worker_inventories``
  to the per-worker counts; it now also names the plan's workers as an array;
* the release's lock took ``workers.id IN (booked workers) ... FOR UPDATE`` as a hash
  semi join over a sequential scan of ``workers`` (0.5 ms of a 0.8 ms lock); it is now a
  join with the distinct booked workers.

Each statement is prepared under ``force_generic_plan`` (see tests/support/generic_plans.py) in
a transaction that gave ``workers`` and ``worker_inventories`` the bench's 4,096 rows and
fresh statistics: the plan must seek those rows by the job's own keys. (With sequential
scans merely priced out, the old statements found an index too; at this size they did
not.)
"""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Connection

from app.db.engine import Database
from app.matching.allocation import book_pg as booking_statements
from app.matching.dispatch import finish_pg as release_statements
from tests.support.generic_plans import generic_plan

pytestmark = pytest.mark.db


@pytest.fixture
def postgres(database: Database) -> Database:
    if database.dialect_name != "postgresql":
        pytest.skip("generic plans of prepared statements are PostgreSQL's")
    return database


def _cluster_of(connection: Connection, nodes: int = 4096) -> None:
    """Workers with inventories as the bench has them, analysed (rolled back after)."""
    connection.exec_driver_sql(
        "INSERT INTO workers (name, rank, state, generation, resources, created_at, updated_at)"
        " SELECT 'n' || i, i, 'active', 1, '{}', now(), now()"
        f" FROM generate_series(1, {nodes}) AS i"
    )
    connection.exec_driver_sql(
        "INSERT INTO worker_inventories"
        " (worker_id, inventory, syntax, upper, vertices, untouched, rank)"
        " SELECT id, 'node', 'shape', '[]', 70, 70, rank FROM workers"
    )
    connection.exec_driver_sql("ANALYZE workers")
    connection.exec_driver_sql("ANALYZE worker_inventories")


def _arrays(*names: str) -> dict[str, str]:
    # An empty array literal: a generic plan does not depend on the values.
    return {name: "{}" for name in names}


def test_booking_moves_untouched_counters_by_worker_key(postgres: Database) -> None:
    values = {
        "p_job_id": 1,
        "p_worker_id": 1,
        "p_slots": 1,
        "p_now": "2026-11-22T00:00:00+00:00",
        "n_held": 0,
        "n_shared": 0,
        "n_drawn": 0,
        **_arrays(
            "h_worker",
            "h_first",
            "h_last",
            "s_ids",
            "d_ids",
            "d_amounts",
            "b_vertex",
            "b_worker",
            "b_mode",
            "b_amount",
            "p_workers",
            "l_workers",
        ),
    }
    with postgres.engine.connect() as connection:
        _cluster_of(connection)
        plan = generic_plan(
            connection, booking_statements._BOOK_AND_START, values, price_out_scans=False
        )
        connection.rollback()
    section = plan.split("CTE move_untouched", 1)[1]
    assert "Seq Scan on worker_inventories" not in section, plan
    assert "worker_id = ANY" in section, plan


def test_release_locks_booked_workers_through_a_join() -> None:
    """The lock's hash semi join needs statistics of active bookings that a test database
    does not have (at 4,096 nodes PostgreSQL estimated 17 booked workers per job and
    hashed them against every worker); so this checks the statement's shape: the
    workers are joined to the job's distinct booked workers, not filtered by IN."""
    from sqlalchemy.dialects import postgresql

    sql = str(release_statements._LOCK.compile(dialect=postgresql.dialect()))
    locked = sql.split("FOR UPDATE OF workers", 1)[0].rsplit("FROM workers", 1)[1]
    assert "JOIN (SELECT DISTINCT inventory_bookings.worker_id" in locked, sql
    assert "workers.id IN" not in locked, sql


def test_release_runs_under_generic_plans_that_seek_by_key(postgres: Database) -> None:
    """The release's lock (its first statement) switches the transaction to generic
    plans: planned afresh on every execution, the release statement spent 1.1 ms
    planning against 0.9 ms running (bench/allocation.py, log_min_duration_statement).
    Its generic plan, over the bench's 4,096 workers with 39 vertices and 4 counts each
    and statistics, must reach the rows of those tables through an index."""
    from sqlalchemy.dialects import postgresql

    lock = str(release_statements._LOCK.compile(dialect=postgresql.dialect()))
    assert "set_config(" in lock and "plan_cache_mode" in str(
        release_statements._LOCK.compile().params
    ), lock
    values = {
        "p_job_id": 1,
        "p_now": "2026-11-22T00:00:00+00:00",
        "p_exit_code": 0,
        "p_output": "",
        "p_reason": "",
        "p_worker": "n1",
        "p_detail": "",
        **_arrays("p_workers"),
    }
    with postgres.engine.connect() as connection:
        _cluster_of(connection)
        connection.exec_driver_sql(
            "INSERT INTO inventory_vertices (worker_id, position, last_position, depth, type,"
            " logical_id, size, used, shared)"
            " SELECT w.id, p, p, 1, 'core', p, 1, 0, 0"
            " FROM workers AS w, generate_series(0, 38) AS p"
        )
        connection.exec_driver_sql(
            "INSERT INTO inventory_counts (worker_id, type, unit, total, free, rank)"
            " SELECT w.id, t, '', 39, 39, w.rank"
            " FROM workers AS w, unnest(ARRAY['node', 'socket', 'core', 'gpu']) AS t"
        )
        connection.exec_driver_sql("ANALYZE inventory_vertices")
        connection.exec_driver_sql("ANALYZE inventory_counts")
        plan = generic_plan(
            connection,
            release_statements._RELEASE[False],
            values,
            price_out_scans=False,
        )
        connection.rollback()
    for table in ("inventory_vertices", "inventory_counts", "worker_inventories", "workers"):
        assert f"Seq Scan on {table}" not in plan, plan
    assert "worker_id = ANY" in plan.split("CTE unheld", 1)[1].split("CTE ended", 1)[0], plan
