"""explain never contradicts itself, the SQL view or a pull (issue 21): on generated small
clusters (Momotor tags, slots, slots in use, worker states, an RFC 31 property constraint,
the job a task of an array whose ``-tc`` limit its running tasks may have reached),
each worker's ``eligible`` is ``v_category_fit``'s ``fits`` and its ``reason`` that view's
code, and ``can_run_now`` is what a pull by that worker does with this one waiting job and
no competitor: it gets the job exactly when explain says it can run it now."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, select, text, update
from sqlalchemy.orm import Session

from app.db.engine import Database
from app.db.models import Category, Job, JobState, QueueInstance, Worker, WorkerState
from app.matching import misfits, submission
from app.matching.dispatch.pull import pull
from app.matching.locks import worker_by_name
from app.matching.readiness import DYNAMIC_REASONS, explain_workers
from app.matching.requests import JobSpec
from app.matching.submission.bulk import BulkItem, submit_jobs
from app.matching.workers import WorkerSpec, upsert_worker
from tests.support.thoroughness import examples

TAGS = ("a", "b")
#: How a worker offers a tag, and how a job asks for it (Momotor's modes; "" absent).
WORKER_MODES = st.sampled_from(["", "?", "", "~", "r"])
JOB_MODES = st.sampled_from(["", "", "r", "?", "~"])
STATES = st.sampled_from(
    [WorkerState.ACTIVE, WorkerState.ACTIVE, WorkerState.DRAINING, WorkerState.DISABLED]
)


def _resources(modes: tuple[str, ...]) -> str:
    """``tags: ?a, ~b``: the items of one group, ``r`` (required) written bare."""
    items = [
        ("" if mode == "r" else mode) + tag for mode, tag in zip(modes, TAGS, strict=True) if mode
    ]
    return f"tags: {', '.join(items)}" if items else ""


@st.composite
def workers(draw: st.DrawFn) -> dict[str, Any]:
    slots = draw(st.integers(min_value=1, max_value=2))
    return {
        "resources": _resources(tuple(draw(WORKER_MODES) for _ in TAGS)),
        "slots": slots,
        "used": draw(st.integers(min_value=0, max_value=slots)),
        "state": draw(STATES),
        "properties": tuple(draw(st.sampled_from([(), ("ssd",)]))),
    }


@st.composite
def jobs(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "resources": _resources(tuple(draw(JOB_MODES) for _ in TAGS)),
        "slots": draw(st.integers(min_value=1, max_value=2)),
        "requires": draw(st.sampled_from([None, None, "ssd", "-ssd"])),
        # None: a job of its own; else (tasks of its array running, the array's -tc).
        "array": draw(st.sampled_from([None, None, (0, 1), (1, 1), (1, 2), (2, 2)])),
    }


def _submit(session: Session, wanted: dict[str, Any]) -> Job:
    """The job to explain: alone, or the last task of an array whose other tasks run
    (marked running without a worker: only their count matters to -tc)."""
    spec = JobSpec(
        resources=wanted["resources"], slots=wanted["slots"], requires=wanted["requires"]
    )
    if wanted["array"] is None:
        return submission.submit_job(session, spec, submitter="t")
    running, limit = wanted["array"]
    tasks = submit_jobs(
        session, [BulkItem(spec, f"1-{running + 1}", limit)], submitter="t", max_tasks=10
    )
    session.execute(
        update(Job)
        .where(Job.id.in_([task.id for task in tasks[:running]]))
        .values(state=JobState.RUNNING)
    )
    return submission.get_job(session, tasks[-1].id)


def _empty(database: Database) -> None:
    with database.transaction() as session:
        for table in (Job, Category, Worker):
            session.execute(delete(table))


def _build(session: Session, fleet: list[dict[str, Any]]) -> None:
    for index, spec in enumerate(fleet):
        worker, _ = upsert_worker(
            session,
            WorkerSpec(
                name=f"w{index}",
                resources=spec["resources"],
                slots=spec["slots"],
                state=spec["state"],
                properties=spec["properties"],
            ),
        )
        # Slots in use, as running jobs of other categories would hold them.
        session.execute(
            update(QueueInstance)
            .where(QueueInstance.worker_id == worker.id)
            .values(used_slots=spec["used"])
        )


def _view(session: Session, category_id: int) -> dict[str, tuple[bool, str | None]]:
    rows = session.execute(
        text("SELECT worker_name, fits, reason FROM v_category_fit WHERE category_id = :c"),
        {"c": category_id},
    )
    return {name: (bool(fits), reason) for name, fits, reason in rows}


def _pull_takes(session: Session, worker: str, job_id: int) -> bool:
    """Whether a pull by ``worker`` takes the job; undone afterwards."""
    savepoint = session.begin_nested()
    try:
        taken = pull(session, worker)
        return taken is not None and taken.id == job_id
    finally:
        savepoint.rollback()
        session.expire_all()


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(fleet=st.lists(workers(), min_size=1, max_size=4), wanted=jobs())
@pytest.mark.parametrize("always_listed", [misfits.MISFITS_ALWAYS_LISTED, 0])
def test_explain_agrees_with_the_view_and_with_pull(
    database: Database,
    fleet: list[dict[str, Any]],
    wanted: dict[str, Any],
    always_listed: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With 0 as the threshold a category whose misfits outnumber its fits lists its fits
    (issue 23), and explain, the view and a pull must still agree."""
    monkeypatch.setattr(misfits, "MISFITS_ALWAYS_LISTED", always_listed)
    _empty(database)
    with database.transaction() as session:
        _build(session, fleet)
        job = _submit(session, wanted)
        job_id, category_id = job.id, job.category_id
    with database.transaction() as session:
        listed = bool(session.scalar(select(Category.lists_fits).where(Category.id == category_id)))
        job = submission.get_job(session, job_id)
        verdicts, summary = explain_workers(session, job, None, "first", [])
        view = _view(session, category_id)
        assert {v.worker for v in verdicts} == set(view)
        for verdict in verdicts:
            fits, code = view[verdict.worker]
            assert verdict.eligible == fits, (verdict, view)
            if not fits and code == misfits.NOT_LISTED:
                # A fit-listing category: the view knows the pair misfits, explain says why.
                assert listed and verdict.clauses[0].reason == verdict.reason
            elif not fits:
                assert verdict.reason == code and verdict.clauses[0].reason == code
            else:
                assert verdict.reason is None or verdict.reason in DYNAMIC_REASONS
        if job.state is not JobState.WAITING:
            assert summary is None
            assert all(v.can_run_now is None for v in verdicts)
            return
        assert summary is not None
        assert summary.can_run_now == sum(bool(v.can_run_now) for v in verdicts)
        assert summary.eligible == summary.can_run_now + summary.fit_but_busy
        for verdict in verdicts:
            assert verdict.can_run_now == _pull_takes(session, verdict.worker, job_id), verdict
            assert verdict.can_run_now == (verdict.reason is None)
        if wanted["array"] is not None and wanted["array"][0] >= wanted["array"][1]:
            # A full array: no worker takes the task, and explain names -tc, not a shrug.
            assert not any(v.can_run_now for v in verdicts)
            assert not any(v.reason == "pull-declines" for v in verdicts), verdicts
        worker_by_name(session, verdicts[0].worker)  # the session is still usable
