"""The pull's statements keep their indexes under a generic plan (issues 4 and 6).

psycopg prepares a statement on its fifth use on a connection, and PostgreSQL then may
run it with a generic plan, one that cannot see the parameters' values. Two predicates
lost their index that way and turned index seeks into scans that grow with the cluster:

* ``attribute_values.level = $n`` (is there any global value?) was estimated at a third
  of the table and scanned every built-in value: 15 ms per pull at 5,000 hosts. It is
  now ``worker_id IS NULL``, which the CHECK ``object_matches_level`` makes equivalent.
* ``jobs.state = $n`` cannot prove the predicate of the partial index
  ``ix_jobs_waiting_order``, so the heads query read the waiting jobs without it (25 ms
  instead of 3 at 100,000 waiting jobs). The state is now a literal.

Each statement is prepared here under ``plan_cache_mode = force_generic_plan`` with
sequential scans priced out, and its plan must use the index: a scan left in such a plan
is one the planner had no index for. Rows of a small cluster only matter for the
statements to be valid; the plans do not depend on them.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Connection

from app.db.engine import Database
from app.matching.dispatch.pull_claim import CLAIM
from app.matching.dispatch.pull_heads import heads_statement
from app.matching.dispatch.pull_plain import _TAKE_IN_ONE, TAKE_BEST_BY_NAME
from app.matching.dispatch.puller import LOCK_PULLER
from tests.support.generic_plans import generic_plan

pytestmark = pytest.mark.db


@pytest.fixture
def postgres(database: Database) -> Database:
    if database.dialect_name != "postgresql":
        pytest.skip("generic plans of prepared statements are PostgreSQL's")
    return database


def test_lock_finds_global_values_through_the_worker_index(postgres: Database) -> None:
    with postgres.engine.connect() as connection:
        plan = generic_plan(
            connection,
            LOCK_PULLER,
            {"p_name": "w1", "p_now": "2026-11-21T00:00:00+00:00"},
        )
        connection.rollback()
    # The global EXISTS is keyed on the worker index: a seek, whatever the planner
    # estimates for a level (with ``level = $n`` it was keyed on the level, and without
    # the scan penalty of this test PostgreSQL preferred a sequential scan).
    assert "Index Cond: (worker_id IS NULL)" in plan, plan
    assert "Seq Scan on attribute_values" not in plan, plan


def test_a_placed_job_is_looked_for_among_placed_jobs_only(postgres: Database) -> None:
    """Issue 23: the lock of every pull asks whether the worker has a placed job to deliver,
    and the take by name asks again. Through ix_jobs_worker_id that read every job the
    worker ever ran (41 buffer reads per lock after some 400 jobs per worker in
    bench/http_floor.py); ix_jobs_awaiting_pickup holds the placed jobs only."""
    values = {"p_name": "w1", "p_now": "2026-11-28T00:00:00+00:00", "p_worker": "w1"}
    with postgres.engine.connect() as connection:
        for statement in (LOCK_PULLER, TAKE_BEST_BY_NAME):
            plan = generic_plan(connection, statement, values)
            assert "ix_jobs_awaiting_pickup" in plan, plan
            assert "using ix_jobs_worker_id" not in plan, plan
        connection.rollback()


def _backlog(connection: Connection, categories: int = 20, jobs: int = 20_000) -> None:
    """A backlog of waiting jobs behind as many finished ones, analysed (rolled back
    after). The heads plan depends on the statistics of ``jobs``: on the shared test
    database they were whatever autovacuum last saw, and when it saw a few finished jobs
    per category the planner preferred ix_jobs_category_id with a sort (the test failed
    or passed by the order and timing of the tests before it)."""
    connection.exec_driver_sql(
        "INSERT INTO categories (key_hash, key, resources, slots, created_at)"
        " SELECT 'backlog' || i, 'backlog' || i, '{}', 1, now()"
        f" FROM generate_series(1, {categories}) AS i"
    )
    connection.exec_driver_sql(
        "INSERT INTO jobs (state, priority, slots, category_id, resources, submitter,"
        " submitted_at, attempts)"
        " SELECT CASE WHEN mod(i, 2) = 0 THEN 'waiting' ELSE 'finished' END, 0, 1, c.id, '{}',"
        " 't', now(), 0"
        f" FROM generate_series(1, {jobs}) AS i"
        f" JOIN categories c ON c.key = 'backlog' || (1 + mod(i, {categories}))"
    )
    connection.exec_driver_sql("ANALYZE jobs")
    connection.exec_driver_sql("ANALYZE categories")


def _clear_backlog(connection: Connection) -> None:
    """What the pulls of a backlog left, deleted and committed, and no backlog's
    statistics left behind for the tests after."""
    connection.exec_driver_sql("DELETE FROM allocations")
    connection.exec_driver_sql("DELETE FROM job_events")
    connection.exec_driver_sql("DELETE FROM jobs")
    connection.exec_driver_sql("ANALYZE jobs")
    connection.commit()


@pytest.mark.parametrize("managed", [False, True])
def test_heads_use_the_waiting_jobs_index(postgres: Database, managed: bool) -> None:
    statement = heads_statement(True, managed, False)
    with postgres.engine.connect() as connection:
        _backlog(connection)
        plan = generic_plan(
            connection,
            statement,
            {"p_worker_id": 1, "p_generation": 1, "p_max_free": 4, "p_limit": 8},
        )
        connection.rollback()
    assert "ix_jobs_waiting_order" in plan, plan
    assert "Seq Scan on jobs" not in plan, plan


def test_waiting_is_a_literal_in_every_claim() -> None:
    """The claims find the job by primary key either way; the literal keeps every
    statement of the pull free of a parameter that a partial index would need."""
    for statement in (*CLAIM.values(), _TAKE_IN_ONE):
        sql = str(statement.compile())
        assert "state = 'waiting'" in sql, sql


def test_the_literal_matches_the_partial_index_predicate(postgres: Database) -> None:
    with postgres.engine.connect() as connection:
        predicate = connection.scalar(
            text(
                "SELECT pg_get_expr(indpred, indrelid) FROM pg_index "
                "WHERE indexrelid = 'ix_jobs_waiting_order'::regclass"
            )
        )
    assert predicate is not None
    assert "'waiting'" in predicate


def test_grid_engine_claim_switches_the_rest_of_the_pull_to_generic_plans() -> None:
    """The Grid Engine pull's write is one large statement over arrays that PostgreSQL
    re-planned on every pull (its generic plan looked dearer only for not knowing the
    arrays' lengths); the claim, which runs after the heads query, turns generic plans
    on for the rest of the transaction in its own round trip. SQLite has no such
    setting, and its variant (no SKIP LOCKED) does not carry it."""
    from sqlalchemy.dialects import postgresql, sqlite

    from app.matching.gridengine import pull as complex_pull

    on_postgres = complex_pull._CLAIMS_WITH_STATE[True].compile(dialect=postgresql.dialect())
    on_sqlite = complex_pull._CLAIMS_WITH_STATE[False].compile(dialect=sqlite.dialect())
    assert "set_config(" in str(on_postgres)
    assert "force_generic_plan" in on_postgres.params.values()
    assert "set_config" not in str(on_sqlite)


def test_the_one_statement_pull_settles_on_a_generic_plan(postgres: Database) -> None:
    """Issue 23: with LIMIT $n in its heads, every generic plan of the one-statement pull
    looked dearer than a custom one, and PostgreSQL planned it anew on every pull (more of
    its CPU than running it). With literal limits it keeps the generic plan once psycopg
    has prepared the statement (fifth run) and PostgreSQL has compared five custom plans."""
    from sqlalchemy.orm import Session

    from app.matching.dispatch import pull as dispatch
    from tests.support.pulls import add_worker

    add_worker(postgres, "w", slots=12)
    with postgres.engine.connect() as connection:
        # The plans' costs depend on the statistics of a real backlog (rolled back by no
        # one here: the pulls commit; the next test starts from empty tables).
        _backlog(connection)
        connection.commit()
        for _ in range(12):
            with Session(bind=connection) as session:
                assert dispatch.pull(session, "w") is not None
                session.commit()
        generic = connection.scalar(
            text(
                "SELECT generic_plans FROM pg_prepared_statements"
                " WHERE statement LIKE 'WITH heads AS%'"
            )
        )
        _clear_backlog(connection)
    assert generic is not None and generic > 0


def test_the_take_by_name_settles_on_a_generic_plan(postgres: Database) -> None:
    """Issue 23: the express pull's take reads the worker by name in the statement itself
    (app/matching/dispatch/pull_plain.py, TAKE_BEST_BY_NAME), so no custom plan can see
    the worker either; it must keep the generic plan as the take by id does."""
    from app.db.base import utcnow
    from app.matching.dispatch import express
    from tests.support.pulls import add_worker

    add_worker(postgres, "w", slots=12)
    with postgres.engine.connect() as connection:
        _backlog(connection)
        connection.commit()
    # One pooled connection at a time: the express way's transactions reuse it.
    postgres.engine.dispose()
    for _ in range(12):
        with postgres.core_transaction() as connection:
            pulled = express.pull(connection, "w", utcnow())
            assert pulled is not None and pulled.job is not None
            generic = connection.scalar(
                text(
                    "SELECT generic_plans FROM pg_prepared_statements"
                    " WHERE statement LIKE 'WITH facts AS%'"
                )
            )
    with postgres.engine.connect() as connection:
        _clear_backlog(connection)
    assert generic is not None and generic > 0
