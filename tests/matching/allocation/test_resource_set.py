"""R, the resources a job holds (after Flux RFC 20's R_lite): one builder renders it for the
allocator's placements and for a running job's booking rows, in one node order."""

from __future__ import annotations

from app.db.engine import Database
from app.db.models import Job
from app.matching import submission, workers
from app.matching.allocation import allocate
from app.matching.allocation import bookings as vertex_bookings
from app.matching.allocation.r import booked_r
from app.matching.allocation.resource_set import ResourceSet, placement_r
from app.matching.submission import JobSpec
from app.matching.workers import WorkerSpec


def test_nodes_come_by_rank_then_name_and_no_rank_counts_as_zero() -> None:
    resources = ResourceSet()
    for name, rank in (("c", 1), ("b", None), ("a", 0)):
        resources.hold(name, rank, type="core", unit=None, size=1, logical_id=3, leaf=True)
    assert [(item["node"], item["rank"]) for item in resources.render()] == [
        ("a", 0),
        ("b", None),
        ("c", 1),
    ]


def test_leaves_become_idsets_and_pools_add_up() -> None:
    """RFC 20 R_lite lists leaf ids as RFC 22 idsets; pools are summed per type and unit."""
    resources = ResourceSet()
    for core in (0, 1, 2, 5):
        resources.hold("n0", 0, type="core", unit=None, size=1, logical_id=core, leaf=True)
    # An inner vertex held shared (a socket) and the node itself name no ids.
    resources.hold("n0", 0, type="socket", unit=None, size=1, logical_id=0, leaf=False)
    resources.hold("n0", 0, type="node", unit=None, size=1, logical_id=0, leaf=True)
    resources.hold("n0", 0, type="memory", unit="GB", size=16, logical_id=0, leaf=True)
    resources.draw("n0", 0, "memory", "GB", 4)
    assert resources.render() == [
        {
            "rank": 0,
            "node": "n0",
            "children": {"core": "0-2,5"},
            "pools": {"memory": {"GB": 20}},
        }
    ]


def test_a_booked_placement_reads_back_as_the_r_it_was_placed_with(database: Database) -> None:
    # Names sort against the ranks, so that an order by name alone would fail.
    with database.transaction() as session:
        for name, rank in (("zeta", 0), ("alpha", 1)):
            workers.upsert_worker(
                session, WorkerSpec(name=name, rank=rank, slots=8, inventory="node/core=2")
            )
        job_id = submission.submit_job(
            session, JobSpec(shape="slot=2/node{-x}/core=2"), submitter="t"
        ).id
    with database.transaction() as session:
        job = session.get(Job, job_id)
        assert job is not None
        placement = allocate.find_placement(session, job, "first").outcome.placement
        assert placement is not None
        vertex_bookings.book_placement(session, job, placement)
        expected = placement_r(placement)
    with database.transaction(write=False) as session:
        assert booked_r(session, job_id) == expected
    assert [item["node"] for item in expected] == ["zeta", "alpha"]
