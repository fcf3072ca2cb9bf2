"""app/db/prebuilt.py: a statement compiled once and run on the driver's cursor gives the
rows SQLAlchemy's own execution gives, and refuses what it cannot run that way; several run
together (in one round trip on PostgreSQL) each give their own rows, in order."""

from __future__ import annotations

from pathlib import Path

import pytest
from psycopg import pq
from sqlalchemy import bindparam, func, literal, select, update
from sqlalchemy.exc import DBAPIError

from app.db import prebuilt
from app.db.engine import Database
from app.db.models import JobState
from app.db.prebuilt import MissingParameterError, NotPrebuildableError, Prebuilt, rows_together
from app.db.tables import JOBS, WORKERS
from app.matching import workers
from app.matching.workers import WorkerSpec

pytestmark = pytest.mark.db


def test_rows_and_conversions_equal_sqlalchemys(database: Database) -> None:
    statement = select(
        literal(JobState.RUNNING, JOBS.c.state.type).label("state"),
        bindparam("p_name", type_=WORKERS.c.name.type).label("name"),
    )
    with database.core_transaction() as connection:
        rows = Prebuilt(statement).rows(connection, {"p_name": "w1"})
        expected = [tuple(row) for row in connection.execute(statement, {"p_name": "w1"})]
    assert rows == expected == [(JobState.RUNNING, "w1")]


def test_a_missing_parameter_is_refused_not_sent_as_null(database: Database) -> None:
    statement = select(bindparam("p_name", type_=WORKERS.c.name.type).label("name"))
    with database.core_transaction() as connection, pytest.raises(MissingParameterError):
        Prebuilt(statement).rows(connection, {})


def test_an_expanding_parameter_cannot_be_compiled_once(database: Database) -> None:
    statement = select(WORKERS.c.id).where(WORKERS.c.id.in_(bindparam("ids", expanding=True)))
    with database.core_transaction() as connection, pytest.raises(NotPrebuildableError):
        Prebuilt(statement).rows(connection, {"ids": [1, 2]})


def test_a_python_side_default_cannot_be_compiled_once(database: Database) -> None:
    """workers.updated_at has an onupdate that SQLAlchemy computes per execution: sent as
    compiled it would be NULL."""
    statement = update(WORKERS).values(state_reason="x").returning(WORKERS.c.id)
    with database.core_transaction() as connection, pytest.raises(NotPrebuildableError):
        Prebuilt(statement).rows(connection, {})


def _names_written_then_read() -> tuple[Prebuilt, Prebuilt]:
    """A write and a read of what it wrote: run together, the read must come second."""
    write = (
        update(WORKERS)
        .where(WORKERS.c.name == bindparam("p_name"))
        .values(state_reason=bindparam("p_text"), updated_at=func.now())
        .returning(WORKERS.c.name)
    )
    read = select(WORKERS.c.state_reason).where(WORKERS.c.name == bindparam("p_name"))
    return Prebuilt(write), Prebuilt(read)


def _a_worker(database: Database) -> None:
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="w1"))


def test_statements_run_together_in_order_with_each_ones_rows(database: Database) -> None:
    """A later statement sees what an earlier one wrote (each takes its snapshot when it
    starts, app/matching/dispatch/express.py relies on it), and each gets its own rows."""
    _a_worker(database)
    write, read = _names_written_then_read()
    params = {"p_name": "w1", "p_text": "together"}
    with database.core_transaction() as connection:
        written, seen = rows_together(connection, (write, params), (read, params))
    assert written == [("w1",)]
    assert seen == [("together",)]


def test_statements_run_together_cost_one_round_trip_on_postgresql(
    database: Database, backend: str, tmp_path: Path
) -> None:
    """Issue 23: the pipeline sends both and reads both answers after one Sync."""
    if backend != "postgresql":
        pytest.skip("pipelines are psycopg's")
    _a_worker(database)
    write, read = _names_written_then_read()
    params = {"p_name": "w1", "p_text": "traced"}
    trace = tmp_path / "trace"
    with database.core_transaction() as connection:
        connection.exec_driver_sql("SELECT 1")  # BEGIN is its own round trip in psycopg
        pgconn = connection.connection.driver_connection.pgconn  # type: ignore[union-attr]
        with trace.open("w") as file:
            pgconn.trace(file.fileno())
            pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
            rows_together(connection, (write, params), (read, params))
            pgconn.untrace()
    # Lines read "F <length> <message> ..." for what the client sent.
    lines = [line.split("\t") for line in trace.read_text().splitlines()]
    sent = [parts[2] for parts in lines if len(parts) > 2 and parts[0] == "F"]
    assert sent.count("Execute") == 2, sent
    assert sent.count("Sync") == 1 and "Query" not in sent, sent


def test_an_error_stops_the_statements_after_it_and_is_wrapped(database: Database) -> None:
    _a_worker(database)
    # A NOT NULL column set to NULL: refused by both databases.
    failing = Prebuilt(
        update(WORKERS)
        .where(WORKERS.c.name == bindparam("p_name"))
        .values(name=None, updated_at=func.now())
        .returning(WORKERS.c.id)
    )
    write, _read = _names_written_then_read()
    with database.core_transaction() as connection:
        savepoint = connection.begin_nested()
        with pytest.raises(DBAPIError):
            rows_together(
                connection, (failing, {"p_name": "w1"}), (write, {"p_name": "w1", "p_text": "no"})
            )
        savepoint.rollback()
        reason = connection.scalar(select(WORKERS.c.state_reason).where(WORKERS.c.name == "w1"))
    assert reason != "no"


def test_without_pipelines_the_statements_go_one_by_one_alike(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A libpq older than 14 cannot pipeline (psycopg.Pipeline.is_supported()): the same
    rows come back, one round trip per statement, instead of an error on every call."""
    monkeypatch.setattr(prebuilt, "PIPELINES", False)
    _a_worker(database)
    write, read = _names_written_then_read()
    params = {"p_name": "w1", "p_text": "one by one"}
    with database.core_transaction() as connection:
        written, seen = rows_together(connection, (write, params), (read, params))
    assert written == [("w1",)]
    assert seen == [("one by one",)]
