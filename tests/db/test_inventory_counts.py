"""The cached free counts (inventory_counts) always equal the aggregate view over the vertex
rows (v_inventory_free), whatever sequence of pulls, multi-node allocations, finishes and
cancels ran; and the vertex rows agree with the active bookings (issue 9)."""

from __future__ import annotations

import random

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from app.db.engine import Database
from app.db.models import (
    InventoryBooking,
    InventoryCount,
    InventoryVertex,
    Job,
    JobState,
    Worker,
    WorkerInventory,
)
from app.matching import submission, workers
from app.matching.allocation import allocate as scheduling
from app.matching.dispatch import pull as dispatch
from app.matching.errors import ConflictError
from app.matching.invariants import violations
from app.matching.submission import JobSpec
from app.matching.workers import WorkerSpec

INVENTORIES = [
    "node/[socket=2/[core=4;gpu=1];memory=16{unit:GB}]",
    "node/[core=6;memory=8{unit:GB};memory=8{unit:GB}]",
    "cluster{id:c0}/node/socket=2/core=2",
]
SHAPES = [
    "slot/[core=2;gpu=1]",
    "slot/core=3",
    "core=2",
    "slot/[core=1;memory=4{unit:GB}]",
    "memory=10{unit:GB}",
    "node/socket/core=1",
    "node=2/slot/core=2",
    "slot=2/node",
    "slot=2/socket",
]


def _counts(session: Session) -> set[tuple[int, str, str, int, int]]:
    rows = session.execute(
        select(
            InventoryCount.worker_id,
            InventoryCount.type,
            InventoryCount.unit,
            InventoryCount.total,
            InventoryCount.free,
        )
    ).all()
    return {(w, t, u, int(total), int(free)) for w, t, u, total, free in rows}


def _view(session: Session) -> set[tuple[int, str, str, int, int]]:
    rows = session.execute(
        text("SELECT worker_id, type, unit, total, free FROM v_inventory_free")
    ).all()
    return {(w, t, u, int(total), int(free)) for w, t, u, total, free in rows}


def _check(database: Database) -> None:
    with database.transaction(write=False) as session:
        # The checker of `jobmatch db check` agrees with the checks spelled out below.
        assert violations(session) == []
        assert _counts(session) == _view(session)
        # Every held vertex lies in the subtree of an active exclusive booking of its job,
        # and pools hold exactly what active draws took.
        held = {
            (vertex_id, job_id)
            for vertex_id, job_id in session.execute(
                select(InventoryVertex.id, InventoryVertex.held_by).where(
                    InventoryVertex.held_by.is_not(None)
                )
            )
        }
        root = InventoryVertex.__table__.alias("root")
        inner = InventoryVertex.__table__.alias("inner")
        booked = {
            (vertex_id, job_id)
            for vertex_id, job_id in session.execute(
                select(inner.c.id, InventoryBooking.job_id)
                .join(root, root.c.id == InventoryBooking.vertex_id)
                .join(
                    inner,
                    (inner.c.worker_id == root.c.worker_id)
                    & inner.c.position.between(root.c.position, root.c.last_position),
                )
                .where(InventoryBooking.mode == "exclusive", InventoryBooking.released_at.is_(None))
            )
        }
        assert held == booked
        drawn = dict(
            session.execute(
                select(InventoryBooking.vertex_id, func.sum(InventoryBooking.amount))
                .where(InventoryBooking.mode == "draw", InventoryBooking.released_at.is_(None))
                .group_by(InventoryBooking.vertex_id)
            ).all()
        )
        used = dict(
            session.execute(
                select(InventoryVertex.id, InventoryVertex.used).where(InventoryVertex.used > 0)
            ).all()
        )
        assert {k: int(v) for k, v in drawn.items()} == {k: int(v) for k, v in used.items()}
        # Each count's span is the size of the smallest subtree of its type (0013): a
        # bound the scheduler trusts to skip workers, so it must never exceed the truth.
        v = InventoryVertex
        unit = func.coalesce(v.unit, "")
        smallest = {
            (w, t, u): int(span)
            for w, t, u, span in session.execute(
                select(
                    v.worker_id, v.type, unit, func.min(v.last_position - v.position + 1)
                ).group_by(v.worker_id, v.type, unit)
            )
        }
        assert smallest == {
            (w, t, u): span
            for w, t, u, span in session.execute(
                select(
                    InventoryCount.worker_id,
                    InventoryCount.type,
                    InventoryCount.unit,
                    InventoryCount.span,
                )
            )
        }
        # untouched counts what no job uses at all.
        for worker_id, untouched in session.execute(
            select(WorkerInventory.worker_id, WorkerInventory.untouched)
        ):
            assert untouched == session.scalar(
                select(func.count()).where(
                    InventoryVertex.worker_id == worker_id,
                    InventoryVertex.held_by.is_(None),
                    InventoryVertex.shared == 0,
                    InventoryVertex.used == 0,
                )
            )


def test_counts_equal_the_view_after_bookings_and_releases(database: Database) -> None:
    rng = random.Random(20261121)
    names = [f"n{i}" for i in range(6)]
    with database.transaction() as session:
        for rank, name in enumerate(names):
            workers.upsert_worker(
                session,
                WorkerSpec(
                    name=name, rank=rank, slots=16, inventory=INVENTORIES[rank % len(INVENTORIES)]
                ),
            )
    _check(database)
    steps = {"pull": 0, "allocate": 0, "finish": 0, "cancel": 0}
    for _ in range(70):
        action = rng.choice(["submit", "pull", "pull", "allocate", "finish", "cancel"])
        with database.transaction() as session:
            if action == "submit":
                submission.submit_job(session, JobSpec(shape=rng.choice(SHAPES)), submitter="t")
            elif action == "pull":
                steps["pull"] += dispatch.pull(session, rng.choice(names), "first") is not None
            elif action == "allocate":
                waiting = session.scalars(
                    select(Job.id).where(Job.state == JobState.WAITING).order_by(Job.id)
                ).all()
                if waiting:
                    try:
                        scheduling.schedule_job(session, rng.choice(waiting), "pack")
                        steps["allocate"] += 1
                    except ConflictError:
                        pass
            else:
                running = session.execute(
                    select(Job.id, Worker.name)
                    .join(Worker, Worker.id == Job.worker_id)
                    .where(Job.state == JobState.RUNNING)
                    .order_by(Job.id)
                ).all()
                if running:
                    job_id, worker = rng.choice(running)
                    if action == "finish":
                        dispatch.finish(session, job_id, worker, "finished")
                    else:
                        submission.cancel_job(session, job_id)
                    steps[action] += 1
        _check(database)
    assert all(steps.values()), steps
    # Everything ends: the counts are full again and equal the view.
    with database.transaction() as session:
        for job in session.scalars(select(Job).where(Job.state == JobState.RUNNING)):
            submission.cancel_job(session, job.id)
    _check(database)
    with database.transaction(write=False) as session:
        assert all(free == total for _, _, _, total, free in _counts(session))
        assert (
            session.scalar(select(func.count()).where(InventoryBooking.released_at.is_(None))) == 0
        )
