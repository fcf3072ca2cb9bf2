"""Demand's suggestion is what the cluster does (issue 40): on generated clusters (workers
with Momotor tags, some with inventories, some draining, some busy), worker templates and
waiting jobs (tagged jobs, single-node and multi-node shapes), the suggested mix is
registered for real and the new workers pull (and the jobs on several nodes are
allocated) until nothing more starts: they start at least as many jobs as the answer
said, a job of every category the mix was for, and no job of a category the answer said
no template could run."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.engine import Database
from app.db.models import Category, CategoryShape, Job, JobState, Worker, WorkerTemplate
from app.matching import submission
from app.matching.allocation import allocate
from app.matching.demand.report import demand
from app.matching.demand.templates import Template, list_templates, put_template
from app.matching.dispatch.pull import pull
from app.matching.errors import ConflictError
from app.matching.requests import JobSpec
from app.matching.workers import WorkerSpec, upsert_worker
from app.wire.demand import CAPACITY, NEVER
from tests.support.thoroughness import examples

VERSIONS = ("11", "12", "17")
INVENTORIES = st.sampled_from([None, None, "node/[core=4]", "node/[core=8]"])


def _tags(versions: list[str]) -> str:
    return "java: " + ", ".join(f"?{v}" for v in versions) if versions else ""


@st.composite
def workers(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "resources": _tags(draw(st.lists(st.sampled_from(VERSIONS[:2]), max_size=2, unique=True))),
        "slots": draw(st.integers(min_value=1, max_value=3)),
        "inventory": draw(INVENTORIES),
        "busy": draw(st.sampled_from([True, True, False])),
    }


@st.composite
def templates(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "resources": _tags(
            draw(st.lists(st.sampled_from(VERSIONS), min_size=1, max_size=3, unique=True))
        ),
        "slots": draw(st.integers(min_value=1, max_value=4)),
        "inventory": draw(INVENTORIES),
        "cost": float(draw(st.integers(min_value=1, max_value=4))),
        "max_count": draw(st.sampled_from([None, None, 1, 2])),
    }


@st.composite
def jobs(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["tag", "tag", "shape"]))
    if kind == "tag":
        return {"resources": f"java: {draw(st.sampled_from(VERSIONS))}", "shape": None}
    shape = draw(st.sampled_from(["slot/core=2", "node=2/slot/core=4", "node=3/slot/core=4"]))
    return {"resources": "", "shape": shape}


def _empty(database: Database) -> None:
    with database.transaction() as session:
        for table in (Job, Category, Worker, WorkerTemplate):
            session.execute(delete(table))


def _register(session: Session, name: str, spec: dict[str, Any]) -> None:
    """A worker (of the fleet, or of a template) registered for real."""
    upsert_worker(
        session,
        WorkerSpec(
            name=name, resources=spec["resources"], slots=spec["slots"], inventory=spec["inventory"]
        ),
    )


def _quiesce(database: Database, names: list[str]) -> set[int]:
    """Pull with each named worker and allocate every waiting job on several nodes until
    nothing more starts; the jobs started."""
    started: set[int] = set()
    progress = True
    while progress:
        progress = False
        with database.transaction() as session:
            several = session.scalars(
                select(Job.id)
                .join(CategoryShape, CategoryShape.category_id == Job.category_id)
                .where(Job.state == JobState.WAITING, CategoryShape.min_nodes > 1)
                .order_by(Job.id)
            ).all()
        for job_id in several:
            try:
                with database.transaction() as session:
                    allocate.schedule_job(session, job_id, "first")
                started.add(job_id)
                progress = True
            except ConflictError:
                pass
        for name in names:
            with database.transaction() as session:
                job = pull(session, name)
                if job is not None:
                    started.add(job.id)
                    progress = True
    return started


@settings(
    max_examples=examples(30),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    fleet=st.lists(workers(), min_size=1, max_size=3),
    kinds=st.lists(templates(), min_size=1, max_size=3),
    wanted=st.lists(jobs(), min_size=2, max_size=6),
)
def test_the_suggested_workers_start_what_demand_said(
    database: Database,
    fleet: list[dict[str, Any]],
    kinds: list[dict[str, Any]],
    wanted: list[dict[str, Any]],
) -> None:
    _empty(database)
    names = [f"w{index}" for index in range(len(fleet))]
    with database.transaction() as session:
        for name, spec in zip(names, fleet, strict=True):
            _register(session, name, spec)
        for index, kind in enumerate(kinds):
            body = {key: kind[key] for key in ("resources", "slots", "inventory") if kind[key]}
            put_template(session, Template(f"t{index}", body, kind["cost"], kind["max_count"]))
    # Busy workers hold their room with a job of their own.
    with database.transaction() as session:
        for spec in fleet:
            if spec["busy"]:
                submission.submit_job(
                    session, JobSpec(resources=spec["resources"].replace("?", "")), submitter="t"
                )
    _quiesce(database, names)
    with database.transaction() as session:
        for job in wanted:
            submission.submit_job(
                session, JobSpec(resources=job["resources"], shape=job["shape"]), submitter="t"
            )
    # What today's workers can start, they start first.
    _quiesce(database, names)

    with database.transaction() as session:
        answer = demand(
            session,
            "first",
            utcnow(),
            templates=list_templates(session),
            limit=1000,
            offset=0,
        )
        session.rollback()
    suggestion = answer.suggestion
    assert suggestion is not None
    answers = {item.category_id: item.answer for item in answer.categories}
    for item in suggestion.mix:
        for category_id in item.categories:
            assert answers[category_id] in (NEVER, CAPACITY), (answers, suggestion)
    nobody = {u.category_id for u in suggestion.unrunnable if not u.beyond_limits}

    # The suggested workers, added for real.
    bodies = {f"t{index}": kind for index, kind in enumerate(kinds)}
    added = []
    with database.transaction() as session:
        for item in suggestion.mix:
            kind = bodies[item.template]
            for count in range(item.workers):
                name = f"{item.template}-real{count}"
                _register(session, name, kind)
                added.append(name)
    started = _quiesce(database, added)
    with database.transaction() as session:
        categories = {
            job_id: category_id
            for job_id, category_id in session.execute(
                select(Job.id, Job.category_id).where(Job.id.in_(sorted(started)))
            )
        }
    started_in = set(categories.values())
    event(f"mix of {suggestion.workers} workers starting {suggestion.starts} jobs")
    event(f"{len(nobody)} categories no template runs")
    context = (fleet, kinds, wanted, suggestion)
    assert len(started) >= suggestion.starts, context
    for item in suggestion.mix:
        assert set(item.categories) <= started_in, context
    assert not (started_in & nobody), context
