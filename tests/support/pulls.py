"""One-transaction steps of the pull cycle (submit, register a worker, pull), for the
dispatch tests that pin the pull and the finish (tests/matching/dispatch/)."""

from __future__ import annotations

from app.db.engine import Database
from app.matching import submission, workers
from app.matching.dispatch import pull as dispatch
from app.matching.submission import JobSpec
from app.matching.workers import WorkerSpec


def submit_job(
    database: Database, resources: str = "", *, priority: int = 0, slots: int = 1
) -> int:
    """Submit a job in its own transaction; its id."""
    with database.transaction() as session:
        spec = JobSpec(resources=resources, priority=priority, slots=slots)
        return submission.submit_job(session, spec, submitter="t").id


def pull_job(database: Database, worker: str) -> int | None:
    """Let ``worker`` pull in its own transaction; the id of the job it got, if any."""
    with database.transaction() as session:
        job = dispatch.pull(session, worker)
        return job.id if job else None


def add_worker(database: Database, name: str, resources: str = "", slots: int = 1, **kw) -> None:  # type: ignore[no-untyped-def]
    """Register or update worker ``name`` in its own transaction."""
    with database.transaction() as session:
        workers.upsert_worker(
            session, WorkerSpec(name=name, resources=resources, slots=slots, **kw)
        )
