"""The scheduler's placement search (app/matching/allocation/allocate.py) on a fragmented cluster
whose ranks run against the ids (issue 9):

* the survivors query driven by a room index (migration 0012) returns the same workers in
  the same order as the walk over every worker, for every shape and limit, under both
  policies (``pack`` sorts the driver's rows before the filter), and so do SQLite's pack
  batches over the ranked workers;
* scheduling leaves no tree or search to the cyclic garbage collector.
"""

from __future__ import annotations

import gc
import random
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db import dialect
from app.db.engine import Database
from app.db.models import InventoryCount, Job
from app.db.tables import CATEGORIES
from app.matching import submission
from app.matching.allocation import allocate as scheduling
from app.matching.allocation import allocator as allocation
from app.matching.allocation import trees
from app.matching.allocation.allocator import POLICIES, Policy
from app.matching.allocation.vertex_requests import node_needs, whole_types
from app.matching.allocation.vertices import Vertex
from app.matching.dispatch import pull as dispatch
from app.matching.errors import ConflictError
from tests.support.inventory_cluster import NODES, SHAPES, build_cluster, fragment, submit_shape


@pytest.mark.parametrize("policy", POLICIES)
def test_room_drivers_return_the_workers_the_full_walk_returns(
    database: Database, policy: Policy
) -> None:
    build_cluster(database)
    rng = random.Random(7)
    compared = 0
    drivers: set[str] = set()
    for _ in range(6):
        fragment(database, rng, 6, policy)
        for shape in SHAPES:
            job_id = submit_shape(database, shape)
            with database.transaction() as session:
                job = session.get(Job, job_id)
                assert job is not None and job.category_id is not None
                requests = dispatch.category_requests(_jobspec(session, job.category_id))
                drivers.add(scheduling._driver(policy, whole_types(requests), node_needs(requests)))
                json_rows = dialect.json_rows_function(session.connection())
                driven, parameters = scheduling.survivors_query(
                    policy, requests, job.category_id, json_rows
                )
                walked, _ = scheduling.survivors_query(
                    policy, requests, job.category_id, json_rows, driver="workers"
                )
                for limit in (1, 2, 3, NODES + 1):
                    got = _survivors(session, driven, {**parameters, "limit": limit})
                    want = _survivors(session, walked, {**parameters, "limit": limit})
                    assert got == want, (shape, limit)
                    if policy == "pack":
                        plain = {**parameters, "limit": limit, "prefetch": 0}
                        walked_rows = [tuple(row) for row in session.execute(walked, plain)]
                        # The default batches, and batches of one limit each (several
                        # batches on eight nodes, the last one cut short).
                        for batch in (scheduling.BATCH, 1):
                            batched = _batched(
                                session, requests, job.category_id, json_rows, limit, batch
                            )
                            assert batched == walked_rows, (shape, limit, batch)
                compared += 1
            with database.transaction() as session:
                submission.cancel_job(session, job_id)
    assert compared == 6 * len(SHAPES)
    assert drivers == {"room", "untouched"}


def _batched(
    session: Session,
    requests: Any,
    category_id: int,
    json_rows: tuple[str, str],
    limit: int,
    batch: int,
) -> list[tuple[Any, ...]]:
    """The pack survivors as SQLite's find_placement gets them: the driver's workers
    ranked in pack order, then the filter over them in batches (batch x limit each)."""
    connection = session.connection()
    ranking = scheduling.pack_order_query(requests, category_id)
    # Every shape here has a driver (the test asserts it of the drivers seen).
    assert ranking is not None
    ranked = list(connection.execute(*ranking).scalars())
    listed, parameters = scheduling.survivors_query(
        "pack", requests, category_id, json_rows, listed=True
    )
    rows = scheduling.listed_survivors(connection, listed, parameters, ranked, limit, batch)
    return [tuple(row) for row in rows]


def _survivors(session: Session, query: Any, parameters: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The survivors' rows, their free counts and the rows below their nodes (for the
    first two) parsed and checked against the tables."""
    out = []
    for ordinal, row in enumerate(session.execute(query, {**parameters, "prefetch": 2})):
        below = trees.parse_rows_below(row[-1])
        if ordinal < 2:
            stored_below = session.execute(trees._BELOW_NODES, {"worker_ids": [row[0]]}).all()
            assert below is not None
            assert sorted(map(tuple, below)) == sorted(map(tuple, stored_below))
        else:
            assert below is None
        counts = trees.parse_free_counts(row[-2])
        stored = {
            (type_, unit or None): free
            for type_, unit, free in session.execute(
                select(InventoryCount.type, InventoryCount.unit, InventoryCount.free).where(
                    InventoryCount.worker_id == row[0]
                )
            )
        }
        assert counts == stored
        out.append((*row[:-2], sorted(counts.items())))
    return out


def _jobspec(session: Session, category_id: int) -> str:
    jobspec = session.scalar(select(CATEGORIES.c.jobspec).where(CATEGORIES.c.id == category_id))
    assert jobspec is not None
    return str(jobspec)


def test_scheduling_leaves_no_cyclic_garbage(database: Database) -> None:
    """The allocator's trees (parents and children, lazy nodes and their loader) are
    unlinked once booked, and its helpers make no self-referencing closures: nothing of
    an allocation waits for the cyclic collector, whose runs cost more than the walk."""
    build_cluster(database)
    rng = random.Random(9)
    fragment(database, rng, 8)
    scheduled = 0
    # What the process held before is set aside (gc.freeze): the collections below then
    # walk only what the scheduling made, not the whole heap of the test run (seconds
    # each, late in a run). A process that froze its heap already (tests/conftest.py)
    # keeps it frozen: unfreezing is all or nothing.
    frozen_before = gc.get_freeze_count() > 0
    gc.collect()
    gc.freeze()
    try:
        for shape in SHAPES:
            scheduled += _schedule_saving_garbage(database, shape)
    finally:
        if not frozen_before:
            gc.unfreeze()
    assert scheduled >= len(SHAPES) // 2


def _schedule_saving_garbage(database: Database, shape: str) -> int:
    """Schedule a job of the shape, with the cyclic garbage it leaves kept for a look
    (none of it may be the allocator's); 1 when it was placed, 0 when the cluster could
    not hold it now."""
    job_id = submit_shape(database, shape)
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    scheduled = 0
    try:
        with database.transaction() as session:
            scheduling.schedule_job(session, job_id, "first")
        scheduled = 1
    except ConflictError:
        pass
    finally:
        gc.collect()
        left = [o for o in gc.garbage if isinstance(o, (Vertex, allocation._Search))]
        gc.garbage.clear()
        gc.set_debug(0)
        gc.enable()
    assert not left, shape
    return scheduled
