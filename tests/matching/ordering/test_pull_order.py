"""The pull under an ordering policy (app/matching/ordering/, docs/ordering.md): the rules
in their order, and fair share between submitters."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from sqlalchemy import select

from app.db.base import utcnow
from app.db.engine import Database
from app.db.models import SubmitterShare
from app.matching import submission
from app.matching.dispatch import pull as dispatch
from app.matching.ordering.policy import Ordering
from app.matching.ordering.shares import set_weight
from app.matching.ordering.usage import book
from app.matching.submission import JobSpec
from tests.support.pulls import add_worker, pull_job
from tests.support.statements import statements_sent


def _submit(database: Database, submitter: str, count: int = 1, priority: int = 0) -> list[int]:
    with database.transaction() as session:
        spec = JobSpec(resources="", priority=priority)
        return [submission.submit_job(session, spec, submitter=submitter).id for _ in range(count)]


def _pull_and_finish(database: Database, worker: str) -> int | None:
    with database.transaction() as session:
        job = dispatch.pull(session, worker)
        job_id = job.id if job else None
    if job_id is not None:
        with database.transaction() as session:
            dispatch.finish(session, job_id, worker, "finished")
    return job_id


def test_age_before_priority(database: Database, use_ordering: Callable[..., Ordering]) -> None:
    use_ordering("age,priority")
    add_worker(database, "w", slots=10)
    (old_low,) = _submit(database, "a", priority=0)
    (new_high,) = _submit(database, "a", priority=5)
    assert [pull_job(database, "w") for _ in range(2)] == [old_low, new_high]


def test_without_usage_fair_share_ties_by_priority_then_age(
    database: Database, use_ordering: Callable[..., Ordering]
) -> None:
    use_ordering("fair-share,priority,age")
    add_worker(database, "w", slots=10)
    alice = _submit(database, "alice", 2)
    bob = _submit(database, "bob", 1, priority=1)
    assert [pull_job(database, "w") for _ in range(3)] == [bob[0], *alice]


def test_the_submitter_furthest_below_its_share_goes_first(
    database: Database, use_ordering: Callable[..., Ordering]
) -> None:
    use_ordering("fair-share,priority,age")
    add_worker(database, "w", slots=1)
    alice = _submit(database, "alice", 5)
    first = _pull_and_finish(database, "w")
    assert first == alice[0]  # nobody had used anything: the oldest
    bob = _submit(database, "bob", 2)
    # alice has used the farm, bob not: bob's jobs go first although they are newer,
    # and bob's own usage then sends the turn back to whoever used less.
    assert _pull_and_finish(database, "w") == bob[0]
    with database.transaction() as session:
        usage = {r.submitter: r.usage for r in session.scalars(select(SubmitterShare))}
    assert usage["alice"] > 0 and usage["bob"] > 0


def test_weights_set_the_shares(database: Database, use_ordering: Callable[..., Ordering]) -> None:
    """Usage per weight decides: a submitter with twice the weight may use twice as much
    before another submitter with the same usage per weight goes first."""
    ordering = use_ordering("fair-share,priority,age", 3600.0)
    add_worker(database, "w", slots=1)
    (carol_job,) = _submit(database, "carol")
    (dave_job,) = _submit(database, "dave")
    now = utcnow()
    with database.transaction() as session:
        book(session, "carol", 300.0, now, ordering.halflife_seconds)
        book(session, "dave", 200.0, now, ordering.halflife_seconds)
    assert pull_job(database, "w") == dave_job
    with database.transaction() as session:
        dispatch.finish(session, dave_job, "w", "finished")
        set_weight(session, "carol", 2.0)
    assert pull_job(database, "w") == carol_job


def test_decayed_usage_counts_less(
    database: Database, use_ordering: Callable[..., Ordering]
) -> None:
    """Usage booked one half-life earlier counts half: 300 an hour ago (150 now) is less
    than 200 now, with a half-life of an hour."""
    ordering = use_ordering("fair-share,priority,age", 3600.0)
    add_worker(database, "w", slots=2)
    (erin_job,) = _submit(database, "erin")
    (frank_job,) = _submit(database, "frank")
    now = utcnow()
    with database.transaction() as session:
        book(session, "erin", 300.0, now - timedelta(hours=1), ordering.halflife_seconds)
        book(session, "frank", 200.0, now, ordering.halflife_seconds)
    assert pull_job(database, "w") == erin_job
    assert pull_job(database, "w") == frank_job


def test_fair_share_keeps_the_pull_s_statements(
    database: Database, use_ordering: Callable[..., Ordering]
) -> None:
    """The pull sends as many statements with fair share on as with today's order (on
    PostgreSQL the worker's lock and the one statement that takes the job), and the
    statement that takes it reads the heads per submitter."""
    add_worker(database, "w", slots=4)
    _submit(database, "alice", 2)
    counts = {}
    for text in ("priority,age", "fair-share,priority,age"):
        use_ordering(text)
        _submit(database, "bob")
        with database.transaction() as session, statements_sent(database.engine) as sent:
            assert dispatch.pull(session, "w") is not None
        counts[text] = len(sent)
        assert ("submitter_shares" in " ".join(sent)) == (text != "priority,age")
    assert counts["fair-share,priority,age"] == counts["priority,age"]
