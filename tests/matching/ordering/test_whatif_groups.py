"""The what-if of groups that docs/ordering.md shows ("Groups in a what-if and in a
scenario"), through the service the route calls: on the page's example (course-a at
weight 2 with alice's 6,000 slot-seconds, course-b's carol 5,400, dave alone 1,800) dave's
job goes first; course-a at weight 10, or alice out of it, would send bob's first; and
nothing of either is stored."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from app.db.base import utcnow
from app.db.engine import Database
from app.matching import submission
from app.matching.ordering.policy import Ordering
from app.matching.ordering.shares import group_standings, set_group, set_group_weight
from app.matching.ordering.usage import book
from app.matching.submission import JobSpec
from app.matching.whatif.changes import ChangeSet, GroupWeightChange, WeightChange
from app.matching.whatif.run import what_if
from tests.support.pulls import add_worker

HALFLIFE = 86_400.0


def _the_example(database: Database) -> dict[str, int]:
    """The page's groups and usage, a job of each submitter waiting; their ids."""
    with database.transaction() as session:
        jobs = {
            name: submission.submit_job(session, JobSpec(resources=""), submitter=name).id
            for name in ("carol", "alice", "bob", "dave")
        }
        for name, group in (("alice", "course-a"), ("bob", "course-a"), ("carol", "course-b")):
            set_group(session, name, group, HALFLIFE)
        set_group_weight(session, "course-a", 2)
        now = utcnow()
        for name, used in (("alice", 6000.0), ("carol", 5400.0), ("dave", 1800.0)):
            book(session, name, used, now, HALFLIFE)
    return jobs


def _first_pull(database: Database, changes: ChangeSet) -> int | None:
    with database.transaction() as session:
        (pull,) = what_if(session, changes, "first", by="admin").first_pulls
    return pull.job


@pytest.mark.parametrize(
    "changes",
    [
        ChangeSet(set_group_weights=(GroupWeightChange("course-a", 10),), pull_workers=("w",)),
        ChangeSet(set_weights=(WeightChange("alice", 1, None, moves=True),), pull_workers=("w",)),
    ],
    ids=["course-a-at-10", "alice-out"],
)
def test_the_page_s_what_ifs_send_bob_first_and_store_nothing(
    database: Database, use_ordering: Callable[..., Ordering], changes: ChangeSet
) -> None:
    use_ordering("group-share,fair-share,priority,age", HALFLIFE)
    add_worker(database, "w", slots=4)
    jobs = _the_example(database)
    with database.transaction() as session:
        before = [(g.group, g.members, g.weight) for g in group_standings(session, HALFLIFE)]
    assert _first_pull(database, ChangeSet(pull_workers=("w",))) == jobs["dave"]
    assert _first_pull(database, changes) == jobs["bob"]
    with database.transaction() as session:
        after = [(g.group, g.members, g.weight) for g in group_standings(session, HALFLIFE)]
    assert after == before
    assert before == [
        (None, ("dave",), 1.0),
        ("course-a", ("alice", "bob"), 2.0),
        ("course-b", ("carol",), 1.0),
    ]


def test_moving_without_a_group_named_leaves_the_submitter_where_it_is(
    database: Database, use_ordering: Callable[..., Ordering]
) -> None:
    """``moves`` False (a body without ``group``): alice stays in course-a, and a weight
    of hers changes nothing between groups: dave's job still goes first."""
    use_ordering("group-share,fair-share,priority,age", HALFLIFE)
    add_worker(database, "w", slots=4)
    jobs = _the_example(database)
    stays = ChangeSet(set_weights=(WeightChange("alice", 1000),), pull_workers=("w",))
    assert _first_pull(database, stays) == jobs["dave"]
