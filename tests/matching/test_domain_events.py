"""Domain events (issue 25): every change of a job or a worker is one log record of
``app.events``, written once its transaction committed; the lease and requeue counters
follow the same commits."""

from __future__ import annotations

from datetime import timedelta

import pytest
from prometheus_client import REGISTRY

from app.db.base import utcnow
from app.db.engine import Database
from app.db.models import WorkerState
from app.matching import leases, submission, worker_lifecycle, workers
from app.matching.dispatch import pull as dispatch
from app.matching.submission import JobSpec
from app.matching.worker_lifecycle import WorkerChanges
from app.matching.workers import WorkerSpec

LEASE = timedelta(minutes=5)


def _events(caplog: pytest.LogCaptureFixture) -> list[tuple[str, dict[str, object]]]:
    return [
        (r.getMessage(), {k: getattr(r, k) for k in ("job_id", "worker", "cause") if hasattr(r, k)})
        for r in caplog.records
        if r.name == "app.events"
    ]


def _counter(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_a_job_s_life_is_logged_after_each_commit(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="app.events")
    with database.transaction() as session:
        worker_lifecycle.register_worker(
            session, WorkerSpec(name="w", slots=1), by="admin", replace=False
        )
        job_id = submission.submit_job(session, JobSpec(slots=1), submitter="t").id
    with database.transaction() as session:
        assert dispatch.pull(session, "w") is not None
    expired_before = _counter("jobmatch_lease_expiries_total", outcome="requeued")
    requeued_before = _counter("jobmatch_job_requeues_total", reason="lease_expired")
    with database.transaction() as session:
        leases.expire_leases(session, lease=LEASE, max_attempts=3, now=utcnow() + 2 * LEASE)
    assert _events(caplog) == [
        ("worker.registered", {"worker": "w"}),
        ("job.submitted", {"job_id": job_id}),
        ("job.dispatched", {"job_id": job_id, "worker": "w"}),
        ("job.requeued", {"job_id": job_id, "worker": "w", "cause": "lease_expired"}),
    ]
    assert _counter("jobmatch_lease_expiries_total", outcome="requeued") == expired_before + 1
    assert _counter("jobmatch_job_requeues_total", reason="lease_expired") == requeued_before + 1


def test_a_rolled_back_change_logs_nothing(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="app.events")
    with pytest.raises(RuntimeError), database.transaction() as session:
        submission.submit_job(session, JobSpec(slots=1), submitter="t")
        raise RuntimeError("the request failed after the change")
    assert _events(caplog) == []


def test_drain_and_delete_are_logged(database: Database, caplog: pytest.LogCaptureFixture) -> None:
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="w", slots=1))
    caplog.set_level("INFO", logger="app.events")
    with database.transaction() as session:
        worker_lifecycle.update_worker(
            session, "w", WorkerChanges(state=WorkerState.DRAINING, reason="upgrade"), by="admin"
        )
    with database.transaction() as session:
        worker_lifecycle.delete_worker(session, "w", requeue=False, by="admin")
    records = [r for r in caplog.records if r.name == "app.events"]
    assert [r.getMessage() for r in records] == ["worker.state_changed", "worker.deleted"]
    drained = records[0]
    assert (drained.previous, drained.state, drained.reason) == ("active", "draining", "upgrade")  # type: ignore[attr-defined]
