"""Issue 19: every change of a job's state ends its history with the matching event, and a
finish that comes too late or twice is told apart from one by a stranger."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.api.app import create_app
from app.api.lease_sweeper import LeaseSweeper
from app.db.base import utcnow
from app.db.engine import Database
from app.db.models import JobEventKind, JobState
from app.matching import history, leases, submission, workers
from app.matching.allocation import allocate as scheduling
from app.matching.dispatch import pull as dispatch
from app.matching.errors import ConflictError, ForbiddenError
from app.matching.late_reports import LateReportError
from app.matching.submission import JobSpec
from app.matching.workers import WorkerSpec
from app.settings import Settings

LEASE = timedelta(minutes=5)
RESTARTED = "agent restarted; the job's processes were killed"


def _job(database: Database, *, pulled_by: str | None = "w", resources: str = "") -> int:
    with database.transaction() as session:
        for name in ("w", "v"):
            workers.upsert_worker(session, WorkerSpec(name=name, slots=2))
        job_id = submission.submit_job(session, JobSpec(resources=resources), submitter="t").id
    if pulled_by is not None:
        with database.transaction() as session:
            pulled = dispatch.pull(session, pulled_by)
            assert pulled is not None and pulled.id == job_id
    return job_id


def _expire(session: Session, max_attempts: int = 3) -> None:
    later = utcnow() + LEASE + timedelta(seconds=5)
    leases.expire_leases(session, lease=LEASE, max_attempts=max_attempts, now=later)


def _last(database: Database, job_id: int) -> tuple[JobState, JobEventKind, str | None]:
    with database.transaction() as session:
        job = submission.get_job(session, job_id)
        last = history.events(session, job_id)[-1]
        return job.state, last.kind, last.worker


TRANSITIONS: dict[str, tuple[Callable[[Session, int], object], JobState, JobEventKind]] = {
    "finished": (
        lambda s, j: dispatch.finish(s, j, "w", "finished"),
        JobState.FINISHED,
        JobEventKind.FINISHED,
    ),
    "failed": (
        lambda s, j: dispatch.finish(s, j, "w", "failed", "exit status 3"),
        JobState.FAILED,
        JobEventKind.FAILED,
    ),
    "returned": (
        lambda s, j: dispatch.return_job(s, j, "w", "the worker stopped"),
        JobState.WAITING,
        JobEventKind.RETURNED,
    ),
    "lease requeue": (lambda s, j: _expire(s), JobState.WAITING, JobEventKind.REQUEUED),
    "lease failure": (
        lambda s, j: _expire(s, max_attempts=1),
        JobState.FAILED,
        JobEventKind.FAILED,
    ),
    "cancel running": (
        lambda s, j: submission.cancel_job(s, j),
        JobState.CANCELLED,
        JobEventKind.CANCELLED,
    ),
}


@pytest.mark.parametrize("name", TRANSITIONS)
def test_each_change_of_a_running_job_ends_its_history(database: Database, name: str) -> None:
    change, state, kind = TRANSITIONS[name]
    job_id = _job(database)
    assert _last(database, job_id) == (JobState.RUNNING, JobEventKind.DISPATCHED, "w")
    with database.transaction() as session:
        change(session, job_id)
    got_state, got_kind, _worker = _last(database, job_id)
    assert (got_state, got_kind) == (state, kind)


def test_waiting_jobs_history_submit_cancel_and_no_worker(database: Database) -> None:
    waiting = _job(database, pulled_by=None)
    assert _last(database, waiting) == (JobState.WAITING, JobEventKind.SUBMITTED, None)
    with database.transaction() as session:
        submission.cancel_job(session, waiting)
    assert _last(database, waiting)[:2] == (JobState.CANCELLED, JobEventKind.CANCELLED)
    nobody = _job(database, pulled_by=None, resources="language: cobol")
    assert _last(database, nobody)[:2] == (JobState.FAILED, JobEventKind.FAILED)


def test_return_is_recorded_with_its_reason(database: Database) -> None:
    """Before issue 19 a returned job's history still ended with "dispatched"."""
    job_id = _job(database)
    with database.transaction() as session:
        dispatch.return_job(
            session, job_id, "w", "agent restarted; the job's processes were killed"
        )
    with database.transaction() as session:
        last = history.events(session, job_id)[-1]
        assert last.kind is JobEventKind.RETURNED and last.worker == "w"
        assert last.detail == RESTARTED
        assert submission.get_job(session, job_id).attempts == 1  # counted at dispatch


def test_resent_finish_is_answered_again_but_not_another_outcome(database: Database) -> None:
    job_id = _job(database)
    with database.transaction() as session:
        dispatch.finish(session, job_id, "w", "failed", "exit status 2", exit_code=2)
    with database.transaction() as session:
        again = dispatch.finish(session, job_id, "w", "failed", "exit status 2", exit_code=2)
        assert again.state is JobState.FAILED
    with database.transaction() as session, pytest.raises(ConflictError) as refused:
        dispatch.finish(session, job_id, "w", "failed", exit_code=3)
    assert not isinstance(refused.value, LateReportError)  # w ended it itself: not late
    with database.transaction() as session:
        kinds = [e.kind for e in history.events(session, job_id)]
        assert kinds.count(JobEventKind.FAILED) == 1


def test_finish_after_the_lease_failed_the_job_is_late_not_a_resend(database: Database) -> None:
    job_id = _job(database)
    with database.transaction() as session:
        _expire(session, max_attempts=1)
    with database.transaction() as session, pytest.raises(LateReportError):
        dispatch.finish(session, job_id, "w", "failed")


def test_finish_after_requeue_over_http_is_recorded_and_explained(
    settings: Settings, database: Database, admin_headers: dict[str, str]
) -> None:
    app = create_app(settings.model_copy(update={"lease_sweep_seconds": 0}), database=database)
    with TestClient(app) as client:
        tokens = {
            name: client.post("/v1/workers", json={"name": name}, headers=admin_headers).json()[
                "token"
            ]
            for name in ("w", "v")
        }
        job_id = client.post("/v1/jobs", json={}, headers=admin_headers).json()["id"]

        def as_worker(name: str) -> dict[str, str]:
            return {"Authorization": f"Bearer {tokens[name]}"}

        assert client.post("/v1/workers/w/pull", headers=as_worker("w")).json()["id"] == job_id
        with database.transaction() as session:
            _expire(session)
        assert client.post("/v1/workers/v/pull", headers=as_worker("v")).json()["id"] == job_id
        late = client.post(
            f"/v1/jobs/{job_id}/finish",
            json={"outcome": "finished", "exit_code": 0},
            headers=as_worker("w"),
        )
        assert late.status_code == 409
        assert late.headers["content-type"] == "application/problem+json"
        problem = late.json()
        assert problem["type"] == "urn:jobmatch:problem:late-report"
        assert (problem["state"], problem["worker"], problem["job"]) == ("running", "v", job_id)
        assert problem["lost_at"] and "lease expired" in problem["detail"]
        assert "not applied" in problem["detail"]
        events = client.get(f"/v1/jobs/{job_id}/history", headers=admin_headers).json()["events"]
        assert [e["kind"] for e in events][-3:] == ["requeued", "dispatched", "late_report"]
        assert events[-1]["worker"] == "w"
        # The job still runs on v, which finishes it; v's resend is answered 200 again.
        done = client.post(
            f"/v1/jobs/{job_id}/finish", json={"outcome": "finished"}, headers=as_worker("v")
        )
        assert done.status_code == 200 and done.json()["state"] == "finished"
        resend = client.post(
            f"/v1/jobs/{job_id}/finish", json={"outcome": "finished"}, headers=as_worker("v")
        )
        assert resend.status_code == 200


def test_finish_by_a_worker_that_never_held_the_job_stays_forbidden(database: Database) -> None:
    job_id = _job(database)
    with database.transaction() as session, pytest.raises(ForbiddenError):
        dispatch.finish(session, job_id, "v", "finished")


def test_sweeper_expires_nothing_until_a_lease_has_passed_since_it_started(
    settings: Settings, database: Database
) -> None:
    """A worker silent because the server was down keeps its job: the restarted server's
    sweeper waits a full lease before it expires anything (issue 19)."""
    job_id = _job(database)
    with database.transaction() as session:
        worker = dispatch.worker_by_name(session, "w")
        worker.last_seen = utcnow() - timedelta(hours=1)  # silent while the server was down
    sweeper = LeaseSweeper(database, settings.model_copy(update={"lease_seconds": 0.3}))
    assert sweeper.in_grace() and sweeper.sweep() == 0
    assert _last(database, job_id)[:2] == (JobState.RUNNING, JobEventKind.DISPATCHED)
    time.sleep(0.35)
    assert not sweeper.in_grace() and sweeper.sweep() == 1
    assert _last(database, job_id)[:2] == (JobState.WAITING, JobEventKind.REQUEUED)


def test_a_scheduler_start_is_recorded_as_dispatched(database: Database) -> None:
    """POST /v1/jobs/{id}/allocate's service starts a job on its first node: that change
    of state is in the history too, naming the node."""
    with database.transaction() as session:
        spec = WorkerSpec(name="n0", rank=0, slots=8, inventory="node/socket=2/core=4")
        workers.upsert_worker(session, spec)
        job_id = submission.submit_job(session, JobSpec(shape="slot/core=2"), submitter="t").id
    with database.transaction() as session:
        scheduling.schedule_job(session, job_id, "first")
    assert _last(database, job_id) == (JobState.RUNNING, JobEventKind.DISPATCHED, "n0")
