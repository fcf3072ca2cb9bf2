"""Explain's account of where a waiting job stands is what the pull does (issue 41, the
house rule that every answer predicting dispatch comes from the pull's own decision): on
generated clusters (a few workers fitting some categories, a few submitters with random
weights, groups and decayed usage, groups with random weights, jobs of varied priority,
age, category and submitter), under fair share, group share and today's order, each
worker pulls in a savepoint until it gets nothing, and for every waiting job the count of
jobs ahead of it on that worker
(app/matching/ordering/standing.py, what explain's ``outranked`` words carry) is the
number of jobs those pulls took before it, submitter by submitter; explain's own answer
for the worker (``now``, or ``outranked`` with that count in its words) agrees.

Pulls start jobs but end none, and usage is booked only when a job ends
(app/matching/ordering/usage.py), so the standings do not move between the pulls of one
rehearsal: the job's place in the sequence is the count explain must give. The worker
has room for every job, so room never reorders the pulls (the counts leave room aside).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.engine import Database
from app.db.models import Job, JobState, SubmitterShare, Worker
from app.matching import readiness, submission
from app.matching.dispatch.pull import pull
from app.matching.ordering.policy import Ordering
from app.matching.ordering.shares import set_group, set_group_weight, set_weight
from app.matching.ordering.standing import fitting_categories, jobs_ahead
from app.matching.ordering.usage import book
from app.matching.requests import JobSpec
from app.matching.workers import WorkerSpec, upsert_worker
from tests.support.table_digest import empty_tables
from tests.support.thoroughness import examples

HALFLIFE = 3600.0
TAGS = ("11", "12", "17")
SUBMITTERS = ("alice", "bob", "carol", "dave")
POLICIES = st.sampled_from(
    [
        "fair-share,priority,age",
        "fair-share,priority,age",
        "priority,age",
        "priority,fair-share,age",
        "age,fair-share",
        "group-share,fair-share,priority,age",
        "group-share,fair-share,priority,age",
        "group-share,priority,age",
    ]
)
GROUPS = ("g1", "g2")
AHEAD = re.compile(r"(?:at least )?(\d+) jobs? ahead of it on this worker")


@st.composite
def submitters(draw: st.DrawFn) -> dict[str, Any]:
    """A submitter's weight and usage: amounts and weights from small sets, booked now or
    a half-life ago, so that standings tie as often as they differ."""
    return {
        "weight": draw(st.sampled_from([1.0, 1.0, 2.0, 3.0])),
        "usage": draw(st.sampled_from([0.0, 0.0, 100.0, 200.0, 300.0])),
        "half_lives_ago": draw(st.sampled_from([0, 0, 1])),
        "group": draw(st.sampled_from([None, None, *GROUPS])),
    }


@st.composite
def jobs(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "submitter": draw(st.sampled_from(SUBMITTERS)),
        "tag": draw(st.sampled_from(TAGS)),
        "priority": draw(st.integers(0, 2)),
        # Seconds before the newest: equal ages leave the id to decide.
        "age": draw(st.integers(0, 3)),
    }


def _build(
    database: Database,
    fleet: list[list[str]],
    people: dict[str, dict[str, Any]],
    wanted: list[dict[str, Any]],
    group_weights: dict[str, float],
) -> list[int]:
    """The workers, the jobs (their ages set), the submitters' weights and usage, then
    their groups (each takes its usage along) and the groups' weights; the ids of the
    waiting jobs."""
    now = utcnow()
    with database.transaction() as session:
        for index, tags in enumerate(fleet):
            resources = "java: " + ", ".join(f"?{tag}" for tag in tags) if tags else ""
            upsert_worker(
                session, WorkerSpec(name=f"w{index}", resources=resources, slots=len(wanted) + 1)
            )
        ids = []
        for job in wanted:
            made = submission.submit_job(
                session,
                JobSpec(resources=f"java: {job['tag']}", priority=job["priority"]),
                submitter=job["submitter"],
            )
            ids.append(made.id)
            session.execute(
                update(Job)
                .where(Job.id == made.id)
                .values(submitted_at=now - timedelta(seconds=job["age"]))
            )
    with database.transaction() as session:
        for name, person in people.items():
            if person["weight"] != 1.0:
                set_weight(session, name, person["weight"])
            if person["usage"] > 0:
                at = now - timedelta(seconds=HALFLIFE * person["half_lives_ago"])
                book(session, name, person["usage"], at, HALFLIFE)
        for name, person in people.items():
            if person["group"] is not None:
                set_group(session, name, person["group"], HALFLIFE)
        for group, weight in group_weights.items():
            set_group_weight(session, group, weight)
    with database.transaction() as session:
        return list(
            session.scalars(select(Job.id).where(Job.id.in_(ids), Job.state == JobState.WAITING))
        )


def _pulls(session: Session, worker: str) -> list[tuple[int, str]]:
    """(job id, submitter) of every job the worker's successive pulls take, in order,
    rehearsed in a savepoint and rolled back."""
    taken: list[tuple[int, str]] = []
    savepoint = session.begin_nested()
    try:
        while (job := pull(session, worker)) is not None:
            taken.append((job.id, job.submitter))
    finally:
        savepoint.rollback()
        session.expire_all()
    return taken


def _explained(session: Session, job: Job) -> dict[str, tuple[str, str]]:
    """Explain's answer and first clause per worker, as GET /v1/jobs/{id}/explain gives."""
    verdicts, _summary = readiness.explain_workers(session, job, None, "first", [])
    return {v.worker: (v.answer or "", v.clauses[0].message if v.clauses else "") for v in verdicts}


def _count_in(words: str) -> int:
    if "no waiting job goes before it" in words:
        return 0
    found = AHEAD.search(words)
    assert found is not None, words
    return int(found.group(1))


@settings(
    max_examples=examples(20),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    text=POLICIES,
    fleet=st.lists(
        st.lists(st.sampled_from(TAGS), min_size=1, max_size=2, unique=True),
        min_size=1,
        max_size=3,
    ),
    people=st.fixed_dictionaries({name: submitters() for name in SUBMITTERS}),
    wanted=st.lists(jobs(), min_size=1, max_size=9),
    group_weights=st.fixed_dictionaries(
        {group: st.sampled_from([1.0, 1.0, 2.0, 3.0]) for group in GROUPS}
    ),
)
def test_jobs_ahead_is_what_the_pulls_take_first(
    database: Database,
    use_ordering: Callable[..., Ordering],
    text: str,
    fleet: list[list[str]],
    people: dict[str, dict[str, Any]],
    wanted: list[dict[str, Any]],
    group_weights: dict[str, float],
) -> None:
    empty_tables(database)
    ordering = use_ordering(text, HALFLIFE)
    waiting = _build(database, fleet, people, wanted, group_weights)
    with database.transaction() as session:
        workers = dict(session.execute(select(Worker.name, Worker.id).order_by(Worker.name)).all())
        shares = {row.submitter: row.usage_log2 for row in session.scalars(select(SubmitterShare))}
        # Under fair share every submitter has its row (made when it submitted).
        assert not ordering.fair_share or set(shares) >= {job["submitter"] for job in wanted}
        sequences = {name: _pulls(session, name) for name in workers}
        for job_id in waiting:
            job = session.get_one(Job, job_id)
            explained = _explained(session, job)
            for name, worker_id in workers.items():
                taken = sequences[name]
                order = [taken_id for taken_id, _who in taken]
                if job_id not in order:
                    # The worker does not fit the job: explain says it never starts it.
                    assert explained[name][0] not in ("now", "outranked"), (name, explained)
                    continue
                place = order.index(job_id)
                ahead = jobs_ahead(session, job, fitting_categories(session, worker_id), ordering)
                by_submitter: Counter[str] = Counter()
                for item in ahead:
                    by_submitter[item.submitter] += item.count
                pulled_first = Counter(who for _id, who in taken[:place])
                context = (text, name, job_id, taken, ahead, fleet, people, wanted, group_weights)
                assert by_submitter == pulled_first, context
                answer, words = explained[name]
                if place == 0:
                    assert answer == "now", (answer, words, context)
                else:
                    assert answer == "outranked", (answer, words, context)
                    assert _count_in(words) == place, (words, context)
                    assert f"takes job {order[0]} first" in words, (words, context)
                event(f"{text}: {'now' if place == 0 else 'outranked'}")
        session.rollback()
