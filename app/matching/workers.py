"""Registering and updating workers: their definition as tag rows, their queue instances,
and the misfit cache that depends on both."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import (
    InventoryCount,
    Queue,
    QueueInstance,
    Worker,
    WorkerInventory,
    WorkerProperty,
    WorkerState,
    WorkerTag,
)
from app.matching import announce
from app.matching.allocation.inventory import parse_worker_inventory, set_rank, store_inventory
from app.matching.errors import ConflictError, InvalidFieldError
from app.matching.flux.sql import store_worker_name_parts
from app.matching.gridengine.values import write_queue_builtins
from app.matching.misfits import recache_worker_misfits
from app.matching.momotor.rows import canonical_resources, parse_resources, tag_rows
from app.matching.named_rows import rows_by_name
from app.notations.errors import NotationError
from app.notations.flux.constraints import validate_property_name
from app.wire.queues import QueueSlots, QueueSpec
from app.words import plural

DEFAULT_QUEUE = "default"


@dataclass(frozen=True)
class WorkerSpec:
    """What an admin says about a worker. ``queues`` empty means one default queue
    instance with ``slots`` slots."""

    name: str
    resources: str = ""
    slots: int = 1
    rank: int | None = None
    state: WorkerState = WorkerState.ACTIVE
    queues: tuple[QueueSpec, ...] = field(default_factory=tuple)
    #: RFC 31 properties of the worker (what ``properties`` constraints test).
    properties: tuple[str, ...] = ()
    #: The worker's resource graph: a shape string or an RFC 14 resources list; None for
    #: a worker whose resources jobmatch does not manage.
    inventory: str | list[object] | None = None


def _queue(session: Session, name: str) -> Queue:
    queue = session.scalar(select(Queue).where(Queue.name == name))
    if queue is None:
        next_seq = session.scalar(select(func.coalesce(func.max(Queue.seq_no), -1) + 1))
        queue = Queue(name=name, seq_no=next_seq or 0)
        session.add(queue)
        session.flush()
    return queue


def _sync_queue_instances(session: Session, worker: Worker, specs: tuple[QueueSpec, ...]) -> bool:
    """Make the worker's queue instances equal ``specs``; True when anything changed."""
    wanted = {spec.name: spec.slots for spec in specs}
    current = {qi.queue.name: qi for qi in worker.queue_instances}
    changed = False
    for name, qi in current.items():
        if name not in wanted:
            if qi.used_slots:
                raise InvalidFieldError(
                    "queues", f"queue {name!r} still runs jobs on this worker; drain it first"
                )
            worker.queue_instances.remove(qi)
            changed = True
        elif qi.slots != wanted[name]:
            if wanted[name] < qi.used_slots:
                raise InvalidFieldError(
                    "queues",
                    f"queue {name!r} has {plural(qi.used_slots, 'slot')} in use; cannot shrink to "
                    f"{wanted[name]}",
                )
            qi.slots = wanted[name]
            changed = True
    for name, slots in wanted.items():
        if name not in current:
            worker.queue_instances.append(QueueInstance(queue=_queue(session, name), slots=slots))
            changed = True
    return changed


def upsert_worker(session: Session, spec: WorkerSpec) -> tuple[Worker, bool]:
    """Create the worker, or update the one with that name. Returns (worker, created).

    Any change that can alter what the worker fits bumps its generation and rewrites its
    misfit rows in this transaction.
    """
    resources = parse_resources(spec.resources)
    for index, name in enumerate(spec.properties):
        try:
            validate_property_name(name)
        except NotationError as error:
            raise InvalidFieldError(f"properties.{index}", str(error), error) from error
    properties = set(spec.properties)
    parsed_inventory = (
        parse_worker_inventory(spec.inventory) if spec.inventory is not None else None
    )
    if spec.slots < 0:
        raise InvalidFieldError("slots", "must be zero or more")
    queues = spec.queues or (QueueSpec(DEFAULT_QUEUE, spec.slots),)
    if len({q.name for q in queues}) != len(queues):
        raise InvalidFieldError("queues", "a queue is named twice")

    if spec.rank is not None:
        holder = session.scalar(
            select(Worker.name).where(Worker.rank == spec.rank, Worker.name != spec.name)
        )
        if holder is not None:
            raise ConflictError(f"rank {spec.rank} belongs to worker {holder!r}")
    # The worker row first, as every writer does (see app/matching/dispatch/pull.py).
    worker = session.scalar(select(Worker).where(Worker.name == spec.name).with_for_update())
    created = worker is None
    if worker is None:
        worker = Worker(name=spec.name, generation=1, resources=spec.resources)
        session.add(worker)
        session.flush()
        store_worker_name_parts(session, worker.id, worker.name)
    old_properties = set(
        session.scalars(select(WorkerProperty.name).where(WorkerProperty.worker_id == worker.id))
    )
    facts_changed = old_properties != properties or worker.rank != spec.rank
    if old_properties != properties:
        session.execute(delete(WorkerProperty).where(WorkerProperty.worker_id == worker.id))
        if properties:
            session.execute(
                insert(WorkerProperty),
                [{"worker_id": worker.id, "name": name} for name in sorted(properties)],
            )
    canonical_changed = created or canonical_resources(
        parse_resources(worker.resources)
    ) != canonical_resources(resources)
    worker.resources = spec.resources
    worker.rank = spec.rank
    worker.state = spec.state
    queues_changed = _sync_queue_instances(session, worker, queues)
    inventory_changed = store_inventory(session, worker.id, spec.inventory, parsed_inventory)
    if not created:
        # The copies of the rank that the scheduler's room indexes order by (a new
        # worker's inventory rows were written with it).
        set_rank(session, worker.id, spec.rank)
    if canonical_changed:
        session.execute(delete(WorkerTag).where(WorkerTag.worker_id == worker.id))
        rows = [
            {"worker_id": worker.id, "group_name": g, "value": v, "mode": m}
            for g, v, m in tag_rows(resources)
        ]
        if rows:
            session.execute(insert(WorkerTag), rows)
    if canonical_changed or queues_changed or facts_changed or inventory_changed:
        if not created:
            worker.generation += 1
        session.flush()
        if queues_changed:
            write_queue_builtins(session, worker)
        recache_worker_misfits(session, worker.id)
    announce.workers_changed(session, [worker.id])
    session.flush()
    return worker, created


def list_workers(session: Session, *, limit: int, offset: int) -> list[Worker]:
    return rows_by_name(session, Worker, limit=limit, offset=offset)


def worker_name(session: Session, worker_id: int) -> str | None:
    """The name of the worker with that id (from the session when it is loaded already),
    None when there is none."""
    worker = session.get(Worker, worker_id)
    return worker.name if worker is not None else None


@dataclass(frozen=True)
class WorkerDescription:
    """What the API shows of a worker besides its own columns: its RFC 31 properties in
    name order, its inventory as given, the free units per resource type (``type`` or
    ``type:unit`` for pools) and its queue instances."""

    worker: Worker
    properties: list[str]
    inventory: str | None
    free: dict[str, int]
    queues: list[QueueSlots]


def describe_worker(session: Session, worker: Worker) -> WorkerDescription:
    """Read what :class:`WorkerDescription` adds to the worker row."""
    inventory = session.get(WorkerInventory, worker.id)
    properties = session.scalars(
        select(WorkerProperty.name).where(WorkerProperty.worker_id == worker.id)
    )
    counts = session.scalars(
        select(InventoryCount)
        .where(InventoryCount.worker_id == worker.id)
        .order_by(InventoryCount.type, InventoryCount.unit)
    )
    return WorkerDescription(
        worker=worker,
        properties=sorted(properties),
        inventory=inventory.inventory if inventory is not None else None,
        free={f"{c.type}:{c.unit}" if c.unit else c.type: c.free for c in counts},
        queues=[
            QueueSlots(qi.queue.name, qi.slots, qi.used_slots) for qi in worker.queue_instances
        ],
    )


def touch(worker: Worker) -> None:
    worker.last_seen = utcnow()
