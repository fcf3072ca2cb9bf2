"""app/db/prebuilt.py: a statement compiled once and run on the driver's cursor gives the
rows SQLAlchemy's own execution gives, and refuses what it cannot run that way."""

from __future__ import annotations

import pytest
from sqlalchemy import bindparam, literal, select

from app.db.engine import Database
from app.db.models import JobState
from app.db.prebuilt import MissingParameterError, NotPrebuildableError, Prebuilt
from app.db.tables import JOBS, WORKERS

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
