"""What a what-if in progress holds on PostgreSQL (docs/whatif.md "Locks"): until its
savepoint is rolled back it holds the row locks of the workers it changes and the lock that
orders changes of the misfit cache, so pulls of other workers and submissions to existing
categories go ahead at once, while a pull of a worker it changes and a submission that
creates a category wait for it. Probed from other transactions with a 1 s lock_timeout
while the what-if is paused between its changes and its rollback."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from app.db.engine import Database
from app.matching import submission
from app.matching.dispatch.pull import pull
from app.matching.requests import JobSpec
from app.matching.whatif import run
from app.matching.whatif.changes import ChangeSet
from app.matching.whatif.runnable import Snapshot
from app.matching.workers import WorkerSpec, upsert_worker

pytestmark = pytest.mark.db

JAVA = "language: ?java"


def _probe(database: Database, action: Callable[[Session], object]) -> str:
    """``action`` in a transaction of its own that waits at most 1 s for a lock and is
    rolled back: ``ran`` or ``waited``."""
    with Session(database.engine) as session:
        session.execute(text("SET LOCAL lock_timeout = '1s'"))
        try:
            action(session)
            return "ran"
        except OperationalError as error:
            assert "lock timeout" in str(error), error
            return "waited"
        finally:
            session.rollback()


def test_a_whatif_blocks_only_what_it_changes(
    backend: str, database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    if backend != "postgresql":
        pytest.skip(
            "on SQLite a what-if holds the write lock (BEGIN IMMEDIATE): every writer waits"
        )
    with database.transaction() as session:
        for name in ("w1", "w2"):
            upsert_worker(session, WorkerSpec(name, JAVA, slots=2))
        for _ in range(3):
            submission.submit_job(session, JobSpec("language: java"), submitter="t")
    seen: dict[str, str] = {}
    snapshot = run.snapshot

    def paused(session: Session, policy: str) -> Snapshot:
        if seen.get("paused") is None and session.in_nested_transaction():
            seen["paused"] = "yes"
            seen["pull of another worker"] = _probe(database, lambda s: pull(s, "w2"))
            seen["pull of a drained worker"] = _probe(database, lambda s: pull(s, "w1"))
            seen["submission, existing category"] = _probe(
                database,
                lambda s: submission.submit_job(s, JobSpec("language: java"), submitter="t"),
            )
            seen["submission, new category"] = _probe(
                database,
                lambda s: submission.submit_job(s, JobSpec("language: ?java"), submitter="t"),
            )
        return snapshot(session, policy)  # type: ignore[arg-type]

    monkeypatch.setattr(run, "snapshot", paused)
    changes = ChangeSet(
        add_workers=(WorkerSpec("w9", JAVA),),
        drain_workers=("w1",),
        add_jobs=(JobSpec("language: java; java: 17"),),
    )
    with database.transaction() as session:
        run.what_if(session, changes, "first", by="test")

    assert seen == {
        "paused": "yes",
        "pull of another worker": "ran",
        "pull of a drained worker": "waited",
        "submission, existing category": "ran",
        "submission, new category": "waited",
    }
