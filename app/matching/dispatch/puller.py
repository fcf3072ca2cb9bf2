"""The pulling worker, locked and read in the pull's first statement (built once, as
every statement of a pull: building an expression tree anew for every pull cost more Python
time than PostgreSQL spent running it; SQLAlchemy's compiled cache then serves the text).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, bindparam, func, literal_column, or_, select, update
from sqlalchemy.orm import Session

from app.db.models import AttributeValue, JobState, QueueInstance, WorkerInventory, WorkerState
from app.db.tables import JOBS, WORKERS
from app.matching import liveness


@dataclass(frozen=True)
class Puller:
    """The pulling worker as its locking UPDATE returned it: what the pull needs to know,
    read in the same round trip as the lock."""

    id: int
    name: str
    generation: int
    active: bool
    max_free: int
    managed: bool
    complex_cluster: bool
    #: When the worker last reported its dynamic metadata (the pull's answer may ask it
    #: to report again).
    metadata_reported_at: datetime | None
    #: The scheduler placed a job on the worker that it has not received yet: this pull
    #: delivers it (app/matching/dispatch/record.py) instead of looking for new work.
    placed_waiting: bool = False
    #: The worker was ``unknown`` (silent past its timeout) when this pull locked it: the
    #: pull is a word from it, which makes it active again (app/matching/liveness.py).
    unknown: bool = False


def _complex_values_exist(worker_id: ColumnElement[int]) -> ColumnElement[bool]:
    """``gridengine.decide.has_complex_values`` as an expression over a worker id: two
    EXISTS, each an index seek (one EXISTS over the OR scanned every worker's built-in
    values on SQLite).

    Global values are found as ``worker_id IS NULL`` (the CHECK ``object_matches_level``
    makes it the same as ``level = 'global'``): once psycopg prepares the statement and
    PostgreSQL switches to a generic plan, ``level = $n`` is estimated at a third of the
    table and every built-in value was scanned (15 ms at 5,000 hosts)."""
    return or_(
        select(AttributeValue.id).where(AttributeValue.worker_id.is_(None)).exists(),
        select(AttributeValue.id)
        .where(AttributeValue.worker_id == worker_id, AttributeValue.kind != "builtin")
        .exists(),
    )


# The worker's id by name, not a correlation with the updated row: SQLite's RETURNING
# clause is compiled without table qualifiers, so a correlated ``worker_id = workers.id``
# inside it would read ``worker_id = id`` and compare the subquery's own columns.
_PULLER_ID = select(WORKERS.c.id).where(WORKERS.c.name == bindparam("p_name")).scalar_subquery()


#: A queue instance takes jobs: neither disabled nor suspended
#: (app/matching/gridengine/queue_states.py).
_TAKES_JOBS = QueueInstance.states == literal_column("''")
_FREE = QueueInstance.slots - QueueInstance.used_slots


def _max_free(worker_id: ColumnElement[int]) -> ColumnElement[int]:
    """The most free slots of one of the worker's queue instances that takes jobs."""
    return (
        select(func.max(_FREE))
        .where(QueueInstance.worker_id == worker_id, _TAKES_JOBS)
        .scalar_subquery()
    )


def workers_with_room() -> Any:
    """(worker_id, max_free) of every worker with a free slot, by the rule of
    :func:`_max_free` (the pull's), grouped in one pass over the queue instances: for
    statements about many workers at once (app/matching/dispatch/plain_starts.py)."""
    return (
        select(QueueInstance.worker_id, func.max(_FREE).label("max_free"))
        .where(_TAKES_JOBS)
        .group_by(QueueInstance.worker_id)
        .having(func.max(_FREE) > 0)
        .subquery("with_room")
    )


def plain_take_serves(worker_id: ColumnElement[int]) -> ColumnElement[bool]:
    """What :data:`PLAIN_PULLER` asks of a worker besides its state and room, over any
    worker id column: no inventory, no Grid Engine values and no placed job to deliver."""
    return (
        ~_has_inventory(worker_id) & ~_complex_values_exist(worker_id) & ~_placed_waiting(worker_id)
    )


def _has_inventory(worker_id: ColumnElement[int]) -> ColumnElement[bool]:
    return select(WorkerInventory.worker_id).where(WorkerInventory.worker_id == worker_id).exists()


def _placed_waiting(worker_id: ColumnElement[int]) -> ColumnElement[bool]:
    """Whether the worker has a placed job it has not received yet: looked for among the
    placed jobs only (ix_jobs_awaiting_pickup), and their state checked after.

    ``OFFSET 0`` keeps the state test out of the inner query, where it would let the
    planner read ``state = 'running'`` through ix_jobs_state_id instead: every pull did
    so when the statistics saw few running jobs (after a bulk load, bench/pg_work.py),
    and that scan walks the index entries of every job that ran since the last VACUUM
    (each finish leaves its ``running`` entry behind): 22 index blocks per pull+finish
    after 4,000 jobs, growing until autovacuum."""
    placed = (
        select(JOBS.c.state)
        .where(JOBS.c.worker_id == worker_id, JOBS.c.awaiting_pickup.is_(True))
        .offset(0)
        # A subquery in FROM is not correlated by itself: without this, a worker column
        # two levels up (PULLER_FACTS) got a FROM of its own, and any worker's placed
        # job counted as every worker's.
        .correlate_except(JOBS)
        .subquery("placed")
    )
    return select(placed.c.state).where(placed.c.state == JobState.RUNNING).exists()


LOCK_PULLER = (
    update(WORKERS)
    .where(WORKERS.c.name == bindparam("p_name"))
    .values(last_seen=bindparam("p_now"), updated_at=bindparam("p_now"))
    .returning(
        WORKERS.c.id,
        WORKERS.c.generation,
        WORKERS.c.state == WorkerState.ACTIVE,
        _max_free(_PULLER_ID),
        _has_inventory(_PULLER_ID),
        _complex_values_exist(_PULLER_ID),
        WORKERS.c.metadata_reported_at,
        _placed_waiting(_PULLER_ID),
        WORKERS.c.state == WorkerState.UNKNOWN,
    )
)

#: The express pull's lock (app/matching/dispatch/express.py): the worker by name,
#: stamped, and what its row says; the rest of what :data:`LOCK_PULLER` reads (free
#: slots, inventory, Grid Engine values, a placed job) the take by name reads in its own
#: statement anyway (:data:`PULLER_FACTS`), after this lock and so no less exactly. Each
#: was read twice per pull, five subqueries of each lock (issue 38).
LOCK_PULLER_ALONE = (
    update(WORKERS)
    .where(WORKERS.c.name == bindparam("p_name"))
    .values(last_seen=bindparam("p_now"), updated_at=bindparam("p_now"))
    .returning(
        WORKERS.c.id,
        WORKERS.c.generation,
        WORKERS.c.state == WorkerState.ACTIVE,
        WORKERS.c.metadata_reported_at,
        WORKERS.c.state == WorkerState.UNKNOWN,
    )
)

#: The worker named ``p_name`` and what a pull must know of it (one row, none for an
#: unknown name): :data:`LOCK_PULLER`'s subqueries, read once for the take by name's
#: eligibility (:data:`PLAIN_PULLER`) and returned by it for the express pull's
#: decisions (:func:`puller_of_lock_and_facts`).
PULLER_FACTS = (
    select(
        WORKERS.c.id,
        WORKERS.c.generation,
        (WORKERS.c.state == WorkerState.ACTIVE).label("active"),
        _max_free(WORKERS.c.id).label("max_free"),
        _has_inventory(WORKERS.c.id).label("managed"),
        _complex_values_exist(WORKERS.c.id).label("complex_cluster"),
        _placed_waiting(WORKERS.c.id).label("placed"),
    )
    .where(WORKERS.c.name == bindparam("p_name"))
    .cte("facts")
)

#: The worker (id, generation, largest free slot count) when a plain take may serve it:
#: active, with room, no inventory, no Grid Engine values and no placed job to deliver;
#: no row otherwise. What :data:`LOCK_PULLER` returns, read by a statement that runs
#: after it (app/matching/dispatch/pull_plain.py's take by name), so that the two can be
#: sent together.
PLAIN_PULLER = (
    select(PULLER_FACTS.c.id, PULLER_FACTS.c.generation, PULLER_FACTS.c.max_free)
    .where(
        PULLER_FACTS.c.active,
        PULLER_FACTS.c.max_free > 0,
        ~PULLER_FACTS.c.managed,
        ~PULLER_FACTS.c.complex_cluster,
        ~PULLER_FACTS.c.placed,
    )
    .cte("me")
)


def lock_puller(session: Session, worker_name: str, now: datetime) -> Puller | None:
    """Lock the worker's row by stamping ``last_seen`` (the first lock of the pull, as the
    lock order wants) and read, in the same statement, its state, generation, largest free
    slot count, and whether it has an inventory or Grid Engine values: one round trip
    instead of five. None when there is no such worker. The free count may predate a pull
    that committed while this one waited for the lock; booking is conditional, so a stale
    count only costs that pull its job. A worker that was ``unknown`` is made active
    again first: the pull is a word from it."""
    row = session.execute(LOCK_PULLER, {"p_name": worker_name, "p_now": now}).one_or_none()
    if row is None:
        return None
    puller = puller_of(tuple(row), worker_name)
    if puller.unknown and liveness.revive(session, worker_name, now):
        puller = replace(puller, active=True, unknown=False)
    return puller


def puller_of(row: tuple[Any, ...], worker_name: str) -> Puller:
    """The :class:`Puller` of a row :data:`LOCK_PULLER` returned."""
    (
        worker_id,
        generation,
        active,
        max_free,
        managed,
        complex_cluster,
        reported_at,
        placed,
        unknown,
    ) = row
    return Puller(
        worker_id,
        worker_name,
        generation,
        bool(active),
        int(max_free or 0),
        bool(managed),
        bool(complex_cluster),
        reported_at,
        bool(placed),
        bool(unknown),
    )


def puller_of_lock_and_facts(
    locked: tuple[Any, ...], facts: tuple[Any, ...], worker_name: str
) -> Puller:
    """The :class:`Puller` of a row :data:`LOCK_PULLER_ALONE` returned and the
    :data:`PULLER_FACTS` columns (max_free, managed, complex_cluster, placed) the take by
    name returned after it."""
    worker_id, generation, active, reported_at, unknown = locked
    max_free, managed, complex_cluster, placed = facts
    return puller_of(
        (
            worker_id,
            generation,
            active,
            max_free,
            managed,
            complex_cluster,
            reported_at,
            placed,
            unknown,
        ),
        worker_name,
    )
