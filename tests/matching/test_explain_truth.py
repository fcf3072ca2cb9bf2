"""explain's ``can_run_now`` is what a pull (or, for a job on several nodes, an
allocation) does (issue 35): on generated clusters of workers with and without inventories
(``node/[core=k]``, some with a GPU), some of their room held by running jobs, some with a
Grid Engine value, each probe job (plain, single-node shapes with and without a GPU,
multi-node shapes, a Grid Engine ``-l`` request) is explained, and for every worker
``can_run_now`` is true exactly when a pull by that worker, rehearsed and rolled back,
starts that job (for a multi-node job: when ``POST /v1/jobs/{id}/allocate`` would place it
with that worker among its nodes). The summary's answers add up to the workers."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.db.engine import Database
from app.db.models import Category, CategoryShape, Job, JobState, Worker, WorkerState
from app.db.tables import INVENTORY_BOOKINGS
from app.matching import readiness, submission
from app.matching.allocation import allocate
from app.matching.dispatch.pull import pull
from app.matching.errors import ConflictError
from app.matching.gridengine.admin import set_values
from app.matching.gridengine.values import resolve_target
from app.matching.requests import JobSpec
from app.matching.worker_lifecycle import WorkerChanges, update_worker
from app.matching.workers import WorkerSpec, upsert_worker
from tests.support.thoroughness import examples

INVENTORIES = st.sampled_from([None, None, "node/[core=4]", "node/[core=8]", "node/[core=8;gpu=1]"])
SHAPES = st.sampled_from(
    [
        None,
        "slot/core=2",
        "slot/core=6",
        "slot/[core=2;gpu=1]",
        "node=2/slot/core=4",
        "node=3/slot/core=4",
        "slot/[core=1;memory=1{unit:GB}]",
    ]
)


@st.composite
def workers(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "slots": draw(st.integers(min_value=1, max_value=8)),
        "inventory": draw(INVENTORIES),
        "arch": draw(st.sampled_from([None, "lx-amd64"])),
        "busy": draw(st.sampled_from([None, None, "slot/core=4", "slot/gpu=1"])),
        "state": draw(st.sampled_from([WorkerState.ACTIVE] * 4 + [WorkerState.DRAINING])),
    }


@st.composite
def probes(draw: st.DrawFn) -> dict[str, Any]:
    shape = draw(SHAPES)
    hard = draw(st.sampled_from(["", "", "arch=lx*"])) if shape is None else ""
    return {"shape": shape, "hard": hard, "priority": draw(st.integers(0, 1))}


def _empty(database: Database) -> None:
    with database.transaction() as session:
        for table in (Job, Category, Worker):
            session.execute(delete(table))


def _build(database: Database, fleet: list[dict[str, Any]]) -> None:
    with database.transaction() as session:
        for index, spec in enumerate(fleet):
            upsert_worker(
                session,
                WorkerSpec(
                    name=f"w{index}", slots=spec["slots"], rank=index, inventory=spec["inventory"]
                ),
            )
            if spec["arch"] is not None:
                target = resolve_target(session, "host", f"w{index}", None)
                set_values(session, target, "load_values", {"arch": spec["arch"]})
    # Room held by running jobs: each worker pulls its hog, if it can.
    for index, spec in enumerate(fleet):
        if spec["busy"] is None:
            continue
        with database.transaction() as session:
            hog = submission.submit_job(session, JobSpec(shape=spec["busy"]), submitter="t")
            hog_id = hog.id
        with database.transaction() as session:
            pull(session, f"w{index}")
        with database.transaction() as session:
            left = session.get(Job, hog_id)
            if left is not None and left.state is JobState.WAITING:
                submission.cancel_job(session, hog_id)
    with database.transaction() as session:
        for index, spec in enumerate(fleet):
            if spec["state"] is not WorkerState.ACTIVE:
                update_worker(session, f"w{index}", WorkerChanges(state=spec["state"]), by="t")


def _rehearsed_pull(session: Session, worker: str) -> int | None:
    savepoint = session.begin_nested()
    try:
        taken = pull(session, worker)
        return None if taken is None else taken.id
    finally:
        savepoint.rollback()
        session.expire_all()


def _allocation_workers(session: Session, job_id: int) -> set[str]:
    savepoint = session.begin_nested()
    try:
        job = allocate.schedule_job(session, job_id, "first")
        del job
        rows = session.execute(
            select(Worker.name).where(
                Worker.id.in_(
                    select(INVENTORY_BOOKINGS.c.worker_id).where(
                        INVENTORY_BOOKINGS.c.job_id == job_id,
                        INVENTORY_BOOKINGS.c.released_at.is_(None),
                    )
                )
            )
        )
        return set(rows.scalars())
    except ConflictError:
        return set()
    finally:
        savepoint.rollback()
        session.expire_all()


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    fleet=st.lists(workers(), min_size=1, max_size=4),
    wanted=st.lists(probes(), min_size=1, max_size=3),
)
def test_can_run_now_is_what_a_pull_or_an_allocation_does(
    database: Database, fleet: list[dict[str, Any]], wanted: list[dict[str, Any]]
) -> None:
    _empty(database)
    _build(database, fleet)
    job_ids = []
    with database.transaction() as session:
        for probe in wanted:
            job = submission.submit_job(
                session,
                JobSpec(shape=probe["shape"], hard=probe["hard"], priority=probe["priority"]),
                submitter="t",
            )
            if job.state is JobState.WAITING:
                job_ids.append(job.id)
    for job_id in job_ids:
        with database.transaction() as session:
            job = submission.get_job(session, job_id)
            verdicts, summary = readiness.explain_workers(session, job, None, "first", [])
            assert summary is not None
            assert (
                summary.can_run_now + summary.outranked + summary.not_now + summary.never
                == summary.workers
                == len(fleet)
            )
            nodes = session.scalar(
                select(CategoryShape.min_nodes).where(CategoryShape.category_id == job.category_id)
            )
            several = nodes is not None and nodes > 1
            placed = _allocation_workers(session, job_id) if several else set()
            for verdict in verdicts:
                if several:
                    starts = verdict.worker in placed
                    where = "an allocation"
                else:
                    starts = _rehearsed_pull(session, verdict.worker) == job_id
                    where = "a pull"
                assert verdict.can_run_now == starts, (where, verdict, fleet, wanted)
                event(f"{where}: {verdict.answer} ({verdict.reason})")
                # Busy only where something is held (issue 35).
                if verdict.reason == "inventory-busy":
                    assert "held by running job" in verdict.clauses[0].message
            session.rollback()
