"""Would a pull start each waiting job, asked of many jobs in one statement
(app/matching/dispatch/plain_starts.py), against the reference: a pull by each worker,
rehearsed on that job in a savepoint (``would_start``, app/matching/dispatch/pull.py),
on generated farms. The worker it names would start the job; where it says its answer is
the whole answer, no worker of the plain kind would start it otherwise; where it says
no worker has room, no worker at all would start it."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from app.db.engine import Database
from app.db.models import (
    Category,
    Job,
    JobState,
    QueueInstance,
    Worker,
    WorkerInventory,
    WorkerState,
)
from app.matching import submission
from app.matching.dispatch.plain_starts import starts_now
from app.matching.dispatch.pull import would_start
from app.matching.readiness import rehearse
from app.matching.requests import JobSpec
from app.matching.workers import WorkerSpec, upsert_worker
from tests.support.thoroughness import examples

TAGS = ("11", "12", "17")


@st.composite
def farm_workers(draw: st.DrawFn) -> dict[str, Any]:
    versions = draw(st.lists(st.sampled_from(TAGS[:2]), max_size=2, unique=True))
    return {
        "resources": "java: " + ", ".join(f"?{v}" for v in versions) if versions else "",
        "slots": draw(st.integers(min_value=1, max_value=3)),
        "inventory": draw(st.sampled_from([None, None, None, "node/[core=4]"])),
        "used": draw(st.integers(min_value=0, max_value=3)),
        "state": draw(st.sampled_from(["active", "active", "active", "draining"])),
    }


@st.composite
def waiting_jobs(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["tag", "tag", "any", "shape"]))
    slots = draw(st.integers(min_value=1, max_value=2))
    if kind == "tag":
        return {"resources": f"java: {draw(st.sampled_from(TAGS))}", "shape": None, "slots": slots}
    if kind == "any":
        return {"resources": "", "shape": None, "slots": slots}
    shape = draw(st.sampled_from(["slot/core=2", "slot/core=8"]))
    return {"resources": "", "shape": shape, "slots": 1}


def _build(session: Session, fleet: list[dict[str, Any]], wanted: list[dict[str, Any]]) -> None:
    for table in (Job, Category, Worker):
        session.execute(delete(table))
    for index, spec in enumerate(fleet):
        upsert_worker(
            session,
            WorkerSpec(
                name=f"w{index}",
                resources=spec["resources"],
                slots=spec["slots"],
                inventory=spec["inventory"],
            ),
        )
        # Room taken as running jobs would take it; a draining worker takes no work.
        session.execute(
            update(QueueInstance)
            .where(QueueInstance.worker_id == _worker_id(session, f"w{index}"))
            .values(used_slots=min(spec["used"], spec["slots"]))
        )
        if spec["state"] != "active":
            session.execute(
                update(Worker)
                .where(Worker.name == f"w{index}")
                .values(state=WorkerState(spec["state"]))
            )
    for job in wanted:
        submission.submit_job(
            session,
            JobSpec(resources=job["resources"], shape=job["shape"], slots=job["slots"]),
            submitter="t",
        )


def _worker_id(session: Session, name: str) -> int:
    worker_id = session.scalar(select(Worker.id).where(Worker.name == name))
    assert worker_id is not None
    return worker_id


def _plain_worker(session: Session, name: str) -> bool:
    """No inventory (no Grid Engine values in these farms, no placed jobs)."""
    return (
        session.scalar(
            select(WorkerInventory.worker_id)
            .join(Worker, Worker.id == WorkerInventory.worker_id)
            .where(Worker.name == name)
        )
        is None
    )


@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    fleet=st.lists(farm_workers(), min_size=1, max_size=4),
    wanted=st.lists(waiting_jobs(), min_size=1, max_size=5),
)
def test_the_one_statement_answers_as_a_rehearsed_pull_by_each_worker(
    database: Database, fleet: list[dict[str, Any]], wanted: list[dict[str, Any]]
) -> None:
    """Source: ``would_start`` (app/matching/dispatch/pull.py) is the reference."""
    with database.transaction() as session:
        _build(session, fleet, wanted)
        names = [f"w{index}" for index in range(len(fleet))]
        job_ids = list(session.scalars(select(Job.id).where(Job.state == JobState.WAITING)))
        everywhere = starts_now(session, job_ids)
        for job_id in job_ids:
            starters = {
                name
                for name in names
                if rehearse(
                    session, lambda name=name, job_id=job_id: would_start(session, name, job_id)
                )
            }
            start = everywhere[job_id]
            if start.starter is not None:
                assert start.starter in starters, (job_id, start)
            elif start.decided:
                plain = {name for name in starters if _plain_worker(session, name)}
                assert not plain, (job_id, start, plain)
            if not start.room:
                assert not starters, (job_id, start, starters)
            for name in names:
                one = starts_now(session, [job_id], worker_id=_worker_id(session, name))[job_id]
                if one.decided:
                    assert (one.starter is not None) == (name in starters), (job_id, name, one)
                    assert one.starter in (None, name)
        session.rollback()
