"""R, the description of the resources a job holds (RFC 20-like ``R_lite``): per node its
rank, name, the ids of each leaf type as an idset, and the amounts drawn from pools."""

from __future__ import annotations

from sqlalchemy import (
    select,
)
from sqlalchemy.orm import Session

from app.db.models import (
    InventoryBooking,
    InventoryVertex,
    Worker,
)
from app.matching.allocation.inventory import _active
from app.notations.flux.idset import encode_idset


def booked_r(session: Session, job_id: int) -> list[dict[str, object]]:
    """RFC 20-like R of the job's active bookings: per node its rank, name, the ids of each
    leaf type as an idset, and the amounts drawn from pools."""
    bookings = session.execute(
        select(InventoryBooking, InventoryVertex)
        .join(InventoryVertex, InventoryVertex.id == InventoryBooking.vertex_id)
        .where(InventoryBooking.job_id == job_id, _active())
    ).all()
    per_worker: dict[int, tuple[dict[str, set[int]], dict[str, dict[str, int]]]] = {}
    for booking, vertex in bookings:
        ids, pools = per_worker.setdefault(booking.worker_id, ({}, {}))
        if booking.mode == "draw":
            amounts = pools.setdefault(vertex.type, {})
            amounts[vertex.unit or ""] = amounts.get(vertex.unit or "", 0) + booking.amount
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
            if row.unit is not None:
                amounts = pools.setdefault(row.type, {})
                amounts[row.unit] = amounts.get(row.unit, 0) + row.size
            elif row.last_position == row.position and row.type != "node":
                ids.setdefault(row.type, set()).add(row.logical_id)
    workers = {
        w.id: w for w in session.scalars(select(Worker).where(Worker.id.in_(list(per_worker))))
    }
    out: list[dict[str, object]] = []
    for worker_id, (ids, pools) in sorted(
        per_worker.items(), key=lambda e: (workers[e[0]].rank or 0, workers[e[0]].name)
    ):
        item: dict[str, object] = {
            "rank": workers[worker_id].rank,
            "node": workers[worker_id].name,
            "children": {t: encode_idset(sorted(s)) for t, s in sorted(ids.items())},
        }
        if pools:
            item["pools"] = {t: dict(sorted(u.items())) for t, u in sorted(pools.items())}
        out.append(item)
    return out
