"""WorkerClient.pull_batch against a real `jobmatch serve` (issue 38): a worker with
free slots takes several jobs in one request, and its next request carries their ends."""

from __future__ import annotations

from app.client import AdminClient, EndReport, JobSpec, JobState, WorkerClient, WorkerSpec
from tests.live_server import LiveServer


def test_a_worker_takes_a_batch_and_carries_its_ends_with_the_next(
    server: LiveServer, admin: AdminClient
) -> None:
    registered = admin.register_worker(WorkerSpec(name="w1", slots=2))
    assert registered.token is not None
    submitted = [admin.submit_job(JobSpec(resources="")) for _ in range(3)]
    with WorkerClient(server.base_url, registered.token, "w1") as worker:
        first = worker.pull_batch(max_jobs=2)
        assert [job.id for job in first.jobs] == [job.id for job in submitted[:2]]
        assert first.finished == [] and first.placed == []
        reports = [
            EndReport(first.jobs[0].id, "finished", exit_code=0),
            EndReport(first.jobs[1].id, "failed", reason="exit 1", exit_code=1),
        ]
        second = worker.pull_batch(reports, max_jobs=2)
    assert [(e.job_id, e.state, e.late) for e in second.finished] == [
        (first.jobs[0].id, JobState.FINISHED, False),
        (first.jobs[1].id, JobState.FAILED, False),
    ]
    assert [job.id for job in second.jobs] == [submitted[2].id]
    assert admin.get_job(first.jobs[1].id).failure_reason == "exit 1"
