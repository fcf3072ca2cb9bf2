"""The survivors filter of the scheduler path (issue 9): requests that take nodes or
sockets exclusively only see workers with an entirely free node or socket, so the
allocator no longer loads node after node whose free counts pass but whose vertices are
partly used (the 4,096-node slowdown of slot/node and slot/socket jobs)."""

from __future__ import annotations

from sqlalchemy import select

from app.db.engine import Database
from app.db.models import Job
from app.matching import dispatch, scheduling, submission, workers
from app.matching.submission import JobSpec
from app.matching.workers import WorkerSpec

NODE = "node/socket=2/core=4"


def _setup(database: Database) -> None:
    """n0..n3; n0 runs a 5-core job (no socket entirely free), n1 and n2 one core each
    (one socket entirely free), n3 nothing."""
    with database.transaction() as session:
        for rank in range(4):
            workers.upsert_worker(
                session, WorkerSpec(name=f"n{rank}", rank=rank, slots=8, inventory=NODE)
            )
    for name, shape in (("n0", "slot/core=5"), ("n1", "slot/core=1"), ("n2", "slot/core=1")):
        with database.transaction() as session:
            submission.submit_job(session, JobSpec(shape=shape), submitter="t")
        with database.transaction() as session:
            job = dispatch.pull(session, name, "first")
            assert job is not None and job.state.value == "running"


def _attempt(database: Database, shape: str, policy: str) -> scheduling.Attempt:
    with database.transaction() as session:
        job_id = submission.submit_job(session, JobSpec(shape=shape), submitter="t").id
    with database.transaction() as session:
        job = session.get(Job, job_id)
        assert job is not None
        return scheduling.find_placement(session, job, policy)  # type: ignore[arg-type]


def test_whole_node_requests_see_only_untouched_nodes(database: Database) -> None:
    _setup(database)
    for policy in ("first", "pack"):
        attempt = _attempt(database, "slot/node", policy)
        # Every node has a free node vertex and free cores; only n3 is entirely free.
        assert attempt.survivors == 1
        assert attempt.outcome.placement is not None
        assert [n.worker for n in attempt.outcome.placement.nodes()] == ["n3"]


def test_whole_socket_requests_skip_nodes_without_a_free_socket(database: Database) -> None:
    _setup(database)
    attempt = _attempt(database, "slot/socket", "first")
    assert attempt.survivors == 3
    placement = attempt.outcome.placement
    assert placement is not None
    assert [n.worker for n in placement.nodes()] == ["n1"]
    # Two sockets on one node: only n3 has both free.
    two = _attempt(database, "slot/node{-x}/socket=2", "first")
    assert two.survivors == 3 and two.outcome.placement is not None
    assert [n.worker for n in two.outcome.placement.nodes()] == ["n3"]


def test_no_worker_left_explains_the_shortfall(database: Database) -> None:
    """When the filter leaves nobody, the job is unplaceable with zero candidates."""
    _setup(database)
    with database.transaction() as session:
        submission.submit_job(session, JobSpec(shape="slot/node"), submitter="t")
    with database.transaction() as session:
        job_id = session.scalars(select(Job.id).order_by(Job.id.desc())).first()
        assert job_id is not None
        scheduling.schedule_job(session, job_id, "first")
    attempt = _attempt(database, "slot/node", "first")
    assert attempt.survivors == 0
    assert attempt.outcome.placement is None
