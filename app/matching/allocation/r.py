"""R of a running job, read from its inventory booking rows; the rendering is
app/matching/allocation/resource_set.py's, shared with the allocator's placements."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import InventoryBooking, InventoryVertex, Worker
from app.matching.allocation.inventory import _active
from app.matching.allocation.resource_set import ResourceSet


def booked_r(session: Session, job_id: int) -> list[dict[str, object]]:
    """R of the job's active bookings (see :class:`ResourceSet` for its form and order)."""
    bookings = session.execute(
        select(InventoryBooking, InventoryVertex)
        .join(InventoryVertex, InventoryVertex.id == InventoryBooking.vertex_id)
        .where(InventoryBooking.job_id == job_id, _active())
    ).all()
    workers = {
        w.id: w
        for w in session.scalars(
            select(Worker).where(Worker.id.in_({booking.worker_id for booking, _ in bookings}))
        )
    }
    resources = ResourceSet()
    for booking, vertex in bookings:
        worker = workers[booking.worker_id]
        if booking.mode == "draw":
            resources.draw(worker.name, worker.rank, vertex.type, vertex.unit or "", booking.amount)
            continue
        if booking.mode == "exclusive":
            inside = session.scalars(
                select(InventoryVertex).where(
                    InventoryVertex.worker_id == booking.worker_id,
                    InventoryVertex.position.between(vertex.position, vertex.last_position),
                )
            ).all()
        else:
            inside = [vertex]
        for row in inside:
            resources.hold(
                worker.name,
                worker.rank,
                type=row.type,
                unit=row.unit,
                size=row.size,
                logical_id=row.logical_id,
                leaf=row.last_position == row.position,
            )
    return resources.render()
