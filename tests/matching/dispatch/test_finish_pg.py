"""PostgreSQL's two-statement end of a job that holds vertices
(app/matching/dispatch/finish_pg.py) leaves every row as the general finish path does,
for finished and failed jobs, each tried in a savepoint, compared and rolled back
(issue 9).
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from app.db.engine import Database
from app.db.models import Job
from app.matching.dispatch import finish_pg as release_statements
from app.matching.dispatch import pull as dispatch
from tests.support.inventory_cluster import (
    build_cluster,
    fragment,
    skip_unless_postgresql,
    touched_rows,
)


@pytest.mark.parametrize("outcome", ["finished", "failed"])
def test_two_statement_finish_releases_as_the_general_path(
    backend: str, database: Database, monkeypatch: pytest.MonkeyPatch, outcome: str
) -> None:
    skip_unless_postgresql(backend)
    build_cluster(database)
    running = fragment(database, random.Random(5), 14)
    assert running
    general = release_statements.finish_holding_vertices
    fast_ends: list[Job] = []

    def spy(*args: Any) -> Job | None:
        ended = general(*args)
        if ended is not None:
            fast_ends.append(ended)
        return ended

    for job_id, leader in running:
        with database.transaction() as session:
            results = {}
            for fast in (True, False):
                savepoint = session.begin_nested()
                monkeypatch.setattr(
                    dispatch,
                    "finish_holding_vertices",
                    spy if fast else (lambda *_args: None),
                )
                ended = dispatch.finish(
                    session,
                    job_id,
                    leader,
                    outcome,
                    "why" if outcome == "failed" else None,
                    exit_code=3,
                    output="out",
                )
                assert ended.state.value == outcome
                results[fast] = touched_rows(session)
                savepoint.rollback()
                session.expire_all()
            assert results[True] == results[False], job_id
    # Every end took the two statements (none was handed to the general path).
    assert len(fast_ends) == len(running)
    assert {"shared", "draw", "exclusive"} <= {row[3] for row in results[True]["bookings"]}
