"""Fair share between groups of submitters (docs/ordering.md, ``group-share``): the group
furthest below its share goes first, then the rules after it; a submitter without a group
is a group of its own; a group's usage is its members' and follows a submitter that
changes group; explain names the group that put jobs ahead."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import select

from app.db.base import utcnow
from app.db.engine import Database
from app.db.models import Job, SubmitterGroup, Worker
from app.matching import submission
from app.matching.dispatch import pull as dispatch
from app.matching.ordering.policy import Ordering
from app.matching.ordering.shares import (
    group_standings,
    set_group,
    set_group_weight,
    standings,
)
from app.matching.ordering.standing import fitting_categories, jobs_ahead, words
from app.matching.ordering.usage import book
from app.matching.submission import JobSpec
from tests.support.pulls import add_worker, pull_job
from tests.support.statements import statements_sent

HALFLIFE = 3600.0


def _submit(database: Database, submitter: str, count: int = 1) -> list[int]:
    with database.transaction() as session:
        spec = JobSpec(resources="")
        return [submission.submit_job(session, spec, submitter=submitter).id for _ in range(count)]


def _courses(database: Database) -> None:
    """course-a: alice (300 used) and bob (none); course-b: carol (200 used)."""
    with database.transaction() as session:
        set_group(session, "alice", "course-a", HALFLIFE)
        set_group(session, "bob", "course-a", HALFLIFE)
        set_group(session, "carol", "course-b", HALFLIFE)
        now = utcnow()
        book(session, "alice", 300.0, now, HALFLIFE)
        book(session, "carol", 200.0, now, HALFLIFE)


def test_the_group_furthest_below_its_share_goes_first(
    database: Database, use_ordering: Callable[..., Ordering]
) -> None:
    use_ordering("group-share,fair-share,priority,age", HALFLIFE)
    add_worker(database, "w", slots=10)
    (bob_job,) = _submit(database, "bob")
    (carol_job,) = _submit(database, "carol")
    _courses(database)
    # bob used nothing, but his course used 300 against course-b's 200: carol first.
    assert pull_job(database, "w") == carol_job
    assert pull_job(database, "w") == bob_job


def test_by_fair_share_alone_the_submitter_decides(
    database: Database, use_ordering: Callable[..., Ordering]
) -> None:
    use_ordering("fair-share,priority,age", HALFLIFE)
    add_worker(database, "w", slots=10)
    (bob_job,) = _submit(database, "bob")
    (carol_job,) = _submit(database, "carol")
    _courses(database)
    assert [pull_job(database, "w") for _ in range(2)] == [bob_job, carol_job]


def test_a_group_weight_sets_the_group_s_share(
    database: Database, use_ordering: Callable[..., Ordering]
) -> None:
    use_ordering("group-share,fair-share,priority,age", HALFLIFE)
    add_worker(database, "w", slots=10)
    (alice_job,) = _submit(database, "alice")
    (bob_job,) = _submit(database, "bob")
    (carol_job,) = _submit(database, "carol")
    _courses(database)
    with database.transaction() as session:
        set_group_weight(session, "course-a", 2.0)
    # course-a: 300 / 2 = 150 per weight, below course-b's 200; within it, bob (none).
    assert [pull_job(database, "w") for _ in range(3)] == [bob_job, alice_job, carol_job]


def test_a_submitter_without_a_group_is_a_group_of_its_own(
    database: Database, use_ordering: Callable[..., Ordering]
) -> None:
    use_ordering("group-share,priority,age", HALFLIFE)
    add_worker(database, "w", slots=10)
    (bob_job,) = _submit(database, "bob")
    (dave_job,) = _submit(database, "dave")
    _courses(database)
    with database.transaction() as session:
        book(session, "dave", 250.0, utcnow(), HALFLIFE)
    # dave alone used 250, bob's course 300: dave first, though bob used nothing.
    assert [pull_job(database, "w") for _ in range(2)] == [dave_job, bob_job]
    with database.transaction() as session:
        listed = group_standings(session, HALFLIFE)
        assert [(g.group, g.members) for g in listed] == [
            ("course-b", ("carol",)),
            (None, ("dave",)),
            ("course-a", ("alice", "bob")),
        ]
        assert sum(g.share for g in listed) == pytest.approx(1.0)
        assert [s.submitter for s in standings(session, HALFLIFE, by_group=True)] == [
            "carol",
            "dave",
            "bob",
            "alice",
        ]


def test_a_group_s_usage_is_its_members_and_moves_with_them(
    database: Database, use_ordering: Callable[..., Ordering]
) -> None:
    use_ordering("group-share,fair-share,priority,age", HALFLIFE)
    _courses(database)
    with database.transaction() as session:
        book(session, "bob", 50.0, utcnow(), HALFLIFE)
        usage = {g.group: g.usage for g in group_standings(session, HALFLIFE)}
        assert usage["course-a"] == pytest.approx(350.0, rel=1e-3)
        assert usage["course-b"] == pytest.approx(200.0, rel=1e-3)
        set_group(session, "alice", "course-b", HALFLIFE)
        usage = {g.group: g.usage for g in group_standings(session, HALFLIFE)}
        assert usage["course-a"] == pytest.approx(50.0, rel=1e-3)
        assert usage["course-b"] == pytest.approx(500.0, rel=1e-3)
        set_group(session, "bob", None, HALFLIFE)
        # course-a has no member left, and none of its usage.
        emptied = session.get_one(SubmitterGroup, "course-a")
        assert emptied.usage == 0.0 and emptied.usage_log2 is None


def test_explain_names_the_group_that_put_jobs_ahead(
    database: Database, use_ordering: Callable[..., Ordering]
) -> None:
    ordering = use_ordering("group-share,fair-share,priority,age", HALFLIFE)
    add_worker(database, "w", slots=10)
    (bob_job,) = _submit(database, "bob")
    _submit(database, "carol", 2)
    (dave_job,) = _submit(database, "dave")
    _courses(database)
    with database.transaction() as session:
        book(session, "dave", 250.0, utcnow(), HALFLIFE)
        worker_id = session.scalar(select(Worker.id).where(Worker.name == "w"))
        assert worker_id is not None
        job = session.get_one(Job, bob_job)
        ahead = jobs_ahead(session, job, fitting_categories(session, worker_id), ordering)
        said = words(ahead, ordering)
    assert said == (
        "3 jobs ahead of it on this worker by the ordering group-share, fair-share, "
        "priority, age: 2 of carol (group course-b further below its share), "
        "1 of dave (as a group of one, further below its share)"
    )
    assert pull_job(database, "w") != dave_job  # carol's course goes first


def test_group_share_keeps_the_pull_s_statements(
    database: Database, use_ordering: Callable[..., Ordering]
) -> None:
    """The pull sends as many statements under group share as under today's order, and
    the statement that takes the job reads the groups."""
    add_worker(database, "w", slots=4)
    counts = {}
    for text in ("priority,age", "group-share,fair-share,priority,age", "group-share,age"):
        use_ordering(text)
        _submit(database, "bob")
        with database.transaction() as session:
            set_group(session, "bob", "course-a", HALFLIFE)
        with database.transaction() as session, statements_sent(database.engine) as sent:
            assert dispatch.pull(session, "w") is not None
        counts[text] = len(sent)
        assert ("submitter_groups" in " ".join(sent)) == (text != "priority,age")
    assert len(set(counts.values())) == 1, counts


def test_the_example_of_docs_ordering(
    database: Database, use_ordering: Callable[..., Ordering]
) -> None:
    """docs/ordering.md's groups example: course-a (alice, bob) weighs 2, course-b
    (carol) and dave (no group) 1; alice used 6,000, carol 5,400, dave 1,800."""
    ordering = use_ordering("group-share,fair-share,priority,age", 86_400.0)
    add_worker(database, "w", slots=10)
    jobs = {name: _submit(database, name)[0] for name in ("alice", "bob", "carol", "dave")}
    with database.transaction() as session:
        set_group(session, "alice", "course-a", 86_400.0)
        set_group(session, "bob", "course-a", 86_400.0)
        set_group(session, "carol", "course-b", 86_400.0)
        set_group_weight(session, "course-a", 2.0)
        now = utcnow()
        for name, used in (("alice", 6000.0), ("carol", 5400.0), ("dave", 1800.0)):
            book(session, name, used, now, 86_400.0)
        listed = group_standings(session, 86_400.0, at=now)
        assert [(g.group, g.share, g.below_share) for g in listed] == [
            (None, 0.25, True),
            ("course-a", 0.5, True),
            ("course-b", 0.25, False),
        ]
        assert [round(100 * g.usage_fraction, 1) for g in listed] == [13.6, 45.5, 40.9]
        worker_id = session.scalar(select(Worker.id).where(Worker.name == "w"))
        assert worker_id is not None
        job = session.get_one(Job, jobs["carol"])
        said = words(
            jobs_ahead(session, job, fitting_categories(session, worker_id), ordering), ordering
        )
    assert said == (
        "3 jobs ahead of it on this worker by the ordering group-share, fair-share, priority, "
        "age: 1 of alice (group course-a further below its share), 1 of bob (group course-a "
        "further below its share), 1 of dave (as a group of one, further below its share)"
    )
    order = [jobs[name] for name in ("dave", "bob", "alice", "carol")]
    assert [pull_job(database, "w") for _ in range(4)] == order
