"""What a dispatched Grid Engine job books, and the guarded writes that book and release
it (Grid Engine's complex(5) consumables): slots on its queue instances, and per-slot (YES),
per-job (JOB) and exclusive (EXCL) consumables on the queue instance, host and global
levels. Updates are guarded (``used + amount <= capacity``), so concurrent dispatches
cannot overbook; a guard that fails undoes the job's dispatch."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import bindparam, delete, insert, select, update
from sqlalchemy.orm import Session

from app.db.models import ConsumableUsage, JobBooking
from app.db.tables import ALLOCATIONS, CONSUMABLE_USAGE, JOB_BOOKINGS, QUEUE_INSTANCES
from app.matching.gridengine.quotas import release_quota_bookings
from app.matching.gridengine.state import ClusterState, ObjectState
from app.notations.gridengine.definitions import Consumable, Relop
from app.notations.gridengine.evaluator import Level
from app.notations.gridengine.requests import RequestList


@dataclass(frozen=True)
class ConsumableBooking:
    usage_id: int | None  # None: a queue instance's slots (queue_instances.used_slots)
    queue_instance_id: int | None
    attribute: str
    amount: float
    nonexclusive: bool
    target: ObjectState
    #: An exclusive use of an EXCL attribute: needs nobody else there.
    exclusive: bool = False


def bookings_for(
    state: ClusterState, assignment: dict[int, int], master: int, hard: RequestList
) -> list[ConsumableBooking]:
    """What a job with this assignment books, object by object (docs/notations/gridengine.md)."""
    table = state.table
    total = sum(assignment.values())
    per_host: dict[int, int] = {}
    for qi_id, count in assignment.items():
        worker_id = state.slots[qi_id].worker_id
        per_host[worker_id] = per_host.get(worker_id, 0) + count
    master_host = state.slots[master].worker_id
    objects: list[tuple[ObjectState, int, bool]] = [(state.global_host, total, True)]
    objects += [(state.hosts[w], n, w == master_host) for w, n in per_host.items()]
    objects += [(state.queues[q], n, q == master) for q, n in assignment.items()]
    result: list[ConsumableBooking] = []
    for target, count, is_master in objects:
        queue_key = target.object_key if target.level is Level.QUEUE else None
        if queue_key is not None:
            result.append(ConsumableBooking(None, queue_key, "slots", float(count), False, target))
        for name, usage_id in sorted(target.usage_ids.items(), key=lambda item: item[1]):
            definition = table[name]
            request = hard.get(name)
            if definition.relop is Relop.EXCL:
                if request is not None and request.parsed != 0:
                    result.append(
                        ConsumableBooking(usage_id, queue_key, name, 1.0, False, target, True)
                    )
                else:
                    result.append(ConsumableBooking(usage_id, queue_key, name, 1.0, True, target))
                continue
            amount = request.parsed if request is not None else definition.default_value
            assert isinstance(amount, float)
            if amount == 0:
                continue
            if definition.consumable is Consumable.JOB:
                if is_master:
                    result.append(
                        ConsumableBooking(usage_id, queue_key, name, amount, False, target)
                    )
            else:
                result.append(
                    ConsumableBooking(usage_id, queue_key, name, amount * count, False, target)
                )
    return result


def apply_in_memory(bookings: Iterable[ConsumableBooking], sign: float = 1.0) -> None:
    changed: dict[int, tuple[ObjectState, set[str]]] = {}
    for booking in bookings:
        counter = booking.target.used_nonexclusive if booking.nonexclusive else booking.target.used
        counter[booking.attribute] = counter.get(booking.attribute, 0.0) + sign * booking.amount
        changed.setdefault(id(booking.target), (booking.target, set()))[1].add(booking.attribute)
    for target, names in changed.values():
        target.changed(names)


# write_bookings()'s guarded updates, built once (Core tables: nothing in a pull's session holds
# these rows as objects). A slot booking needs used + count <= slots; a consumable one
# used + amount <= capacity, an exclusive use nobody else there, a non-exclusive use
# of an EXCL attribute no exclusive user.
_BOOK_SLOTS = (
    update(QUEUE_INSTANCES)
    .where(
        QUEUE_INSTANCES.c.id == bindparam("qi_key"),
        QUEUE_INSTANCES.c.used_slots + bindparam("count") <= QUEUE_INSTANCES.c.slots,
    )
    .values(used_slots=QUEUE_INSTANCES.c.used_slots + bindparam("count"))
)


_USAGE_ROW = CONSUMABLE_USAGE.c.id == bindparam("usage_key")


_BOOK_USAGE = {
    # (nonexclusive, exclusive)
    (True, False): update(CONSUMABLE_USAGE)
    .where(_USAGE_ROW, CONSUMABLE_USAGE.c.used == 0)
    .values(used_nonexclusive=CONSUMABLE_USAGE.c.used_nonexclusive + bindparam("amount")),
    (False, False): update(CONSUMABLE_USAGE)
    .where(_USAGE_ROW, CONSUMABLE_USAGE.c.used + bindparam("amount") <= CONSUMABLE_USAGE.c.capacity)
    .values(used=CONSUMABLE_USAGE.c.used + bindparam("amount")),
    (False, True): update(CONSUMABLE_USAGE)
    .where(_USAGE_ROW, CONSUMABLE_USAGE.c.used == 0, CONSUMABLE_USAGE.c.used_nonexclusive == 0)
    .values(used=CONSUMABLE_USAGE.c.used + bindparam("amount")),
}


def write_bookings(
    session: Session, job_id: int, assignment: dict[int, int], bookings: list[ConsumableBooking]
) -> bool:
    """Write the job's allocations and bookings; False (nothing changed) when a guard
    fails because a concurrent dispatch took the capacity first."""
    guarded = len(assignment) + sum(1 for b in bookings if b.usage_id is not None)
    # A single guarded update that fails has changed nothing: no savepoint needed (it
    # costs two round trips, a third of a simple pull's statements after the claim).
    savepoint = session.begin_nested() if guarded > 1 else None
    # Queue instances first (lock order worker -> job -> queue instances), then the
    # consumable rows in id order.
    for qi_id in sorted(assignment):
        booked = session.execute(_BOOK_SLOTS, {"qi_key": qi_id, "count": assignment[qi_id]})
        if booked.rowcount != 1:  # type: ignore[attr-defined]
            if savepoint is not None:
                savepoint.rollback()
            return False
    rows = []
    for booking in sorted(
        (b for b in bookings if b.usage_id is not None), key=lambda b: b.usage_id or 0
    ):
        statement = _BOOK_USAGE[booking.nonexclusive, booking.exclusive]
        result = session.execute(
            statement, {"usage_key": booking.usage_id, "amount": booking.amount}
        )
        if result.rowcount != 1:  # type: ignore[attr-defined]
            if savepoint is not None:
                savepoint.rollback()
            return False
        rows.append(
            {
                "job_id": job_id,
                "usage_id": booking.usage_id,
                "amount": booking.amount,
                "nonexclusive": booking.nonexclusive,
            }
        )
    # Core inserts: nothing reads these rows through the session in this transaction,
    # and the unit of work cost more CPU than the two statements themselves.
    session.execute(
        insert(ALLOCATIONS),
        [
            {"job_id": job_id, "queue_instance_id": qi_id, "slots": count}
            for qi_id, count in assignment.items()
        ],
    )
    if rows:
        session.execute(insert(JOB_BOOKINGS), rows)
    if savepoint is not None:
        savepoint.commit()
    return True


def release_bookings(session: Session, job_id: int) -> None:
    """Give back every consumable and resource quota amount the job holds (its slots are
    released with its allocations by app/matching/dispatch/pull.py)."""
    bookings = session.scalars(
        select(JobBooking).where(JobBooking.job_id == job_id).order_by(JobBooking.usage_id)
    ).all()
    for booking in bookings:
        if booking.nonexclusive:
            values = {"used_nonexclusive": ConsumableUsage.used_nonexclusive - booking.amount}
        else:
            values = {"used": ConsumableUsage.used - booking.amount}
        session.execute(
            update(ConsumableUsage).where(ConsumableUsage.id == booking.usage_id).values(**values)
        )
    if bookings:
        session.execute(delete(JobBooking).where(JobBooking.job_id == job_id))
    release_quota_bookings(session, job_id)
    session.flush()
