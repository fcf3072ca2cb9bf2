"""Leases (issue 8): a silent worker's jobs go back to waiting, or fail after N attempts;
what they booked is freed and the job's history shows it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.api.app import create_app
from app.db.base import utcnow
from app.db.engine import Database
from app.db.models import JobEventKind, JobState, QueueInstance
from app.matching import history, leases, submission, workers
from app.matching.dispatch import pull as dispatch
from app.matching.late_reports import LateReportError
from app.matching.submission import JobSpec
from app.matching.workers import WorkerSpec
from app.settings import Settings

LEASE = timedelta(minutes=5)


def _setup(database: Database) -> int:
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="w", slots=2))
        workers.upsert_worker(session, WorkerSpec(name="v", slots=2))
        job = submission.submit_job(session, JobSpec(slots=2), submitter="t")
        return job.id


def _pull(database: Database, name: str) -> int | None:
    with database.transaction() as session:
        job = dispatch.pull(session, name)
        return job.id if job else None


def _expire(
    database: Database, after: timedelta, max_attempts: int = 3
) -> list[leases.ExpiredLease]:
    with database.transaction() as session:
        return leases.expire_leases(
            session, lease=LEASE, max_attempts=max_attempts, now=utcnow() + after
        )


def test_silent_worker_loses_its_job_and_its_slots(database: Database) -> None:
    job_id = _setup(database)
    assert _pull(database, "w") == job_id
    assert _expire(database, after=LEASE - timedelta(seconds=5)) == []
    (expired,) = _expire(database, after=LEASE + timedelta(seconds=5))
    assert (expired.job_id, expired.worker, expired.outcome) == (job_id, "w", JobState.WAITING)
    with database.transaction() as session:
        job = submission.get_job(session, job_id)
        assert job.state is JobState.WAITING and job.worker_id is None
        assert all(qi.used_slots == 0 for qi in session.scalars(select(QueueInstance)))
        kinds = [e.kind for e in history.events(session, job_id)]
        assert kinds == [JobEventKind.SUBMITTED, JobEventKind.DISPATCHED, JobEventKind.REQUEUED]
    # The old worker can no longer report the job (its late report is explained, issue
    # 19); another worker gets it.
    with database.transaction() as session, pytest.raises(LateReportError):
        dispatch.finish(session, job_id, "w", "finished")
    assert _pull(database, "v") == job_id
    with database.transaction() as session:
        assert submission.get_job(session, job_id).attempts == 2


def test_heartbeat_renews_the_lease(database: Database) -> None:
    job_id = _setup(database)
    assert _pull(database, "w") == job_id
    with database.transaction() as session:
        worker = leases.heartbeat(session, "w")
        worker.last_seen = utcnow() + LEASE  # as if it spoke just before the sweep
    assert _expire(database, after=LEASE + timedelta(seconds=5)) == []


def test_job_fails_after_its_attempts(database: Database) -> None:
    job_id = _setup(database)
    for attempt in (1, 2):
        assert _pull(database, "w") == job_id
        (expired,) = _expire(database, after=LEASE * 2, max_attempts=2)
        assert expired.outcome is (JobState.WAITING if attempt == 1 else JobState.FAILED)
    with database.transaction() as session:
        job = submission.get_job(session, job_id)
        assert job.state is JobState.FAILED
        assert job.failure_reason and "lease expired" in job.failure_reason
        assert "2 attempts used" in job.failure_reason
        assert history.events(session, job_id)[-1].kind is JobEventKind.FAILED


def test_history_heartbeat_and_expiry_over_http(
    settings: Settings, database: Database, admin_headers: dict[str, str]
) -> None:
    fast = settings.model_copy(update={"lease_seconds": 0.0, "lease_sweep_seconds": 0.0})
    with TestClient(create_app(fast, database=database)) as client:
        token = client.post("/v1/workers", json={"name": "w"}, headers=admin_headers).json()[
            "token"
        ]
        worker = {"Authorization": f"Bearer {token}"}
        job = client.post("/v1/jobs", json={}, headers=admin_headers).json()
        assert client.post("/v1/workers/w/pull", headers=worker).json()["attempts"] == 1
        beat = client.post("/v1/workers/w/heartbeat", headers=worker)
        assert beat.status_code == 200 and beat.json()["last_seen"]
        assert client.post("/v1/workers/w/heartbeat", headers=admin_headers).status_code == 403
        assert client.post("/v1/leases/expire", headers=worker).status_code == 403
        assert client.post("/v1/leases/expire", headers=admin_headers).json() == {"expired": 1}
        events = client.get(f"/v1/jobs/{job['id']}/history", headers=admin_headers).json()
        assert [e["kind"] for e in events["events"]] == ["submitted", "dispatched", "requeued"]
        assert events["events"][1]["worker"] == "w"
        assert "lease expired" in events["events"][2]["detail"]
