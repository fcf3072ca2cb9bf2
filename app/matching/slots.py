"""Queue-instance slots: the room every job books, whatever its family.

The slot clause of the misfit cache (a worker none of whose queue instances has as many
slots as the category asks for can never run its jobs), and the statement pieces that
book room and find waiting jobs, shared by the pull and the scheduler's allocation, and a
worker's free slots as candidates and the explanation read them.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    ScalarSelect,
    Select,
    Update,
    alias,
    bindparam,
    func,
    literal_column,
    select,
    update,
)

from app.db.models import Category, JobState, QueueInstance, Worker
from app.db.tables import QUEUE_INSTANCES, QUEUES
from app.matching.reasons import MisfitClauses, MisfitPair, ReasonClause

#: A waiting job's state as a literal: a bound constant would render as a parameter
#: with a cast and lengthen statements psycopg caches only below 4,096 characters.
WAITING: Any = literal_column(f"'{JobState.WAITING.value}'")

REASONS = {"too-few-slots": "no queue instance of the worker has enough slots"}


@lru_cache(maxsize=8)
def _slot_clauses(category: type[Category], worker: type[Worker]) -> tuple[ReasonClause, ...]:
    """Built once per pair of entities: expressions are immutable."""
    largest_slots = (
        select(func.coalesce(func.max(QueueInstance.slots), 0))
        .where(QueueInstance.worker_id == worker.id)
        .scalar_subquery()
    )
    return ((largest_slots < category.slots, "too-few-slots"),)


def worker_free_slots(aggregate: Callable[[Any], Any]) -> ScalarSelect[Any]:
    """The free slots of the enclosing query's Worker over its queue instances, taken
    together by ``aggregate`` (``func.sum``: all of them, ``func.max``: the roomiest);
    0 for a worker without queue instances."""
    return (
        select(func.coalesce(aggregate(QueueInstance.slots - QueueInstance.used_slots), 0))
        .where(QueueInstance.worker_id == Worker.id)
        .scalar_subquery()
    )


def _misfit_clauses(pair: MisfitPair) -> tuple[ReasonClause, ...]:
    return _slot_clauses(pair.category, pair.worker)


MISFITS = MisfitClauses(REASONS, _misfit_clauses)


def _queue_order(candidate: Any) -> tuple[Any, ...]:
    """The order in which a worker's queue instances take jobs: the queue instance's own
    seq_no, else its queue's, then creation (``candidate`` joined to QUEUES)."""
    return (func.coalesce(candidate.c.seq_no, QUEUES.c.seq_no), candidate.c.id)


def first_open_queue_instance(worker_id: Any) -> Select[Any]:
    """The worker's first queue instance in queue order that is neither disabled nor
    suspended, whatever its room: its ``id`` and free slots (``room``). While every job
    of a batch fits its room together, :func:`book_room_statement` would book each of
    them there in turn (app/matching/dispatch/batch_sql.py books them at once)."""
    candidate: Any = alias(QUEUE_INSTANCES, "oq")
    return (
        select(candidate.c.id, (candidate.c.slots - candidate.c.used_slots).label("room"))
        .join(QUEUES, QUEUES.c.id == candidate.c.queue_id)
        .where(candidate.c.worker_id == worker_id, candidate.c.states == literal_column("''"))
        .order_by(*_queue_order(candidate))
        .limit(literal_column("1"))
    )


def book_room_statement(slots: Any, worker_id: Any = None) -> Update:
    """Add ``slots`` to the worker's first queue instance, in queue order (its own seq_no,
    else its queue's, then creation), that is neither disabled nor suspended and has room
    for them (``worker_id``, the parameter ``p_worker_id`` unless given); conditional, so
    it books nothing when none has room (app/matching/gridengine/queue_states.py).

    Shared by the pull's statements (app/matching/dispatch/pull_claim.py) and the
    scheduler's one-statement start (app/matching/allocation/book_pg.py), which embeds
    it. Short aliases (``fq`` and ``rq``): psycopg re-parses statements over 4,096
    characters on every execution."""
    candidate: Any = alias(QUEUE_INSTANCES, "fq")
    first_room = (
        select(candidate.c.id)
        .join(QUEUES, QUEUES.c.id == candidate.c.queue_id)
        .where(
            candidate.c.worker_id == (bindparam("p_worker_id") if worker_id is None else worker_id),
            candidate.c.used_slots + slots <= candidate.c.slots,
            candidate.c.states == literal_column("''"),
        )
        .order_by(*_queue_order(candidate))
        .limit(literal_column("1"))
        .scalar_subquery()
    )
    room: Any = alias(QUEUE_INSTANCES, "rq")
    return (
        update(room)
        .where(room.c.id == first_room, room.c.used_slots + slots <= room.c.slots)
        .values(used_slots=room.c.used_slots + slots)
        .returning(room.c.id)
    )
