"""The statements of a pull, built once.

A pull runs a handful of short statements; building their expression trees anew for
every pull cost more Python time than PostgreSQL spent running them. Here they are built
once with bind parameters, so that each pull only binds values (SQLAlchemy's compiled
cache then serves the SQL text too), and they are Core statements on the tables: the
ORM's bulk UPDATE/INSERT machinery adds nothing a pull needs.

The heads query depends on the database (LATERAL with several heads per category on
PostgreSQL, one head per category on SQLite), on whether the worker has an inventory,
and on whether a plug-in refused some tasks; the first two give four variants, built on
first use; the rare third case is built per pull.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    String,
    Update,
    and_,
    bindparam,
    func,
    insert,
    literal,
    literal_column,
    or_,
    select,
    true,
    update,
)
from sqlalchemy import cast as sql_cast
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from app.db import dialect, notify
from app.db.base import utcnow
from app.db.models import (
    AttributeValue,
    Category,
    CategoryTask,
    Job,
    JobState,
    QueueInstance,
    WorkerInventory,
    WorkerState,
)
from app.db.tables import ALLOCATIONS, JOBS, WORKERS
from app.matching.allocation import coarse_filter
from app.matching.dispatch.record import (
    Dispatch,
    dispatched_event_insert,
    dispatched_event_values,
    record_dispatches,
)
from app.matching.gridengine.queue_lists import names_no_queues
from app.matching.misfits import worker_fits
from app.matching.slots import WAITING, book_room_statement
from app.matching.wakeups import TAKEN, job_taken


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

_LOCK_PULLER = (
    update(WORKERS)
    .where(WORKERS.c.name == bindparam("p_name"))
    .values(last_seen=bindparam("p_now"), updated_at=bindparam("p_now"))
    .returning(
        WORKERS.c.id,
        WORKERS.c.generation,
        WORKERS.c.state == WorkerState.ACTIVE,
        select(func.max(QueueInstance.slots - QueueInstance.used_slots))
        .where(QueueInstance.worker_id == _PULLER_ID)
        .scalar_subquery(),
        select(WorkerInventory.worker_id).where(WorkerInventory.worker_id == _PULLER_ID).exists(),
        _complex_values_exist(_PULLER_ID),
        WORKERS.c.metadata_reported_at,
        select(JOBS.c.id)
        .where(
            JOBS.c.worker_id == _PULLER_ID,
            JOBS.c.state == JobState.RUNNING,
            JOBS.c.awaiting_pickup.is_(True),
        )
        .exists(),
    )
)


def lock_puller(session: Session, worker_name: str, now: datetime) -> Puller | None:
    """Lock the worker's row by stamping ``last_seen`` (the first lock of the pull, as the
    lock order wants) and read, in the same statement, its state, generation, largest free
    slot count, and whether it has an inventory or Grid Engine values: one round trip
    instead of five. None when there is no such worker. The free count may predate a pull
    that committed while this one waited for the lock; booking is conditional, so a stale
    count only costs that pull its job."""
    row = session.execute(_LOCK_PULLER, {"p_name": worker_name, "p_now": now}).one_or_none()
    if row is None:
        return None
    worker_id, generation, active, max_free, managed, complex_cluster, reported_at, placed = row
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
    )


#: ``state = 'waiting'`` written as a literal, not a bound parameter: the partial indexes
#: on waiting jobs (``ix_jobs_waiting_order``) are usable only when the planner can prove
#: their predicate, which a generic plan of a prepared statement (psycopg prepares a
#: statement on its fifth use on a connection) cannot do for ``state = $n``; forced
#: generic, the heads query took 25 ms instead of 3.
_WORKER_ID: Any = bindparam("p_worker_id")
_GENERATION: Any = bindparam("p_generation")
_MAX_FREE: Any = bindparam("p_max_free")
_LIMIT: Any = bindparam("p_limit")
#: How many heads one pull considers before giving up on a round (others may hold them).
HEADS_PER_ROUND = 8
#: LIMIT 1 in the text, not a bound parameter: a generic plan guesses a tenth of the rows
#: for LIMIT $n (4,000 of 40,000 waiting jobs per category), which made every generic
#: plan of the heads look dearer than a custom one.
_ONE: Any = literal_column("1")
_REFUSED: Any = bindparam("p_refused", expanding=True)


def _heads(
    skip_locked: bool, managed: bool, refusals: bool, limit: Any = _LIMIT
) -> Select[int, int | None, bool]:
    fit: list[ColumnElement[bool]] = [
        worker_fits(Category.id, _WORKER_ID, _GENERATION),
        Category.slots <= _MAX_FREE,
    ]
    plain = and_(Category.hard == "NONE", Category.pe.is_(None), names_no_queues())
    if managed:
        fit.append(
            or_(
                Category.jobspec.is_(None),
                and_(
                    coarse_filter.single_node(Category.id),
                    coarse_filter.has_room(Category.id, _WORKER_ID),
                ),
            )
        )
        plain = and_(plain, Category.jobspec.is_(None))
    else:
        # One worker is one node: a job asking for N > 1 nodes (RFC 14) is never the pull
        # of one worker, with or without an inventory (issue 22); it waits for an
        # allocation on N distinct workers (app/matching/allocation/allocate.py).
        fit.append(or_(Category.jobspec.is_(None), coarse_filter.single_node(Category.id)))
    if refusals:
        fit.append(or_(CategoryTask.task_id.is_(None), CategoryTask.task_id.not_in(_REFUSED)))
    order = (Job.priority.desc(), Job.submitted_at, Job.id)
    if skip_locked:
        # PostgreSQL: the best categories by their head job first (one index seek each),
        # then several jobs of each of those, so that a pull that finds the best head
        # locked by a concurrent pull takes the next job of the same category. The
        # overall best ``limit`` jobs all lie in the best ``limit`` categories: each of
        # their categories has a head at least as good as they are.
        first = (
            select(Job.id, Job.priority, Job.submitted_at)
            .where(Job.category_id == Category.id, Job.state == WAITING)
            .order_by(*order)
            .limit(_ONE)
            .lateral("first")
        )
        best = (
            select(Category.id.label("category_id"), CategoryTask.task_id, plain.label("plain"))
            .select_from(Category)
            .join(first, true())
            .outerjoin(CategoryTask, CategoryTask.category_id == Category.id)
            .where(*fit)
            .order_by(first.c.priority.desc(), first.c.submitted_at, first.c.id)
            .limit(limit)
            .subquery("best")
        )
        head = (
            select(Job.id, Job.priority, Job.submitted_at)
            .where(Job.category_id == best.c.category_id, Job.state == WAITING)
            .order_by(*order)
            .limit(limit)
            .lateral("head")
        )
        return (
            select(head.c.id, best.c.task_id, best.c.plain)
            .select_from(best)
            .join(head, true())
            .order_by(head.c.priority.desc(), head.c.submitted_at, head.c.id)
            .limit(limit)
        )
    head_id = (
        select(Job.id)
        .where(Job.category_id == Category.id, Job.state == WAITING)
        .order_by(*order)
        .limit(1)
        .scalar_subquery()
    )
    heads = (
        select(head_id.label("job_id"), CategoryTask.task_id, plain.label("plain"))
        .select_from(Category)
        .outerjoin(CategoryTask, CategoryTask.category_id == Category.id)
        .where(*fit)
        .subquery()
    )
    return (
        select(Job.id, heads.c.task_id, heads.c.plain)
        .join(heads, Job.id == heads.c.job_id)
        .order_by(*order)
        .limit(limit)
    )


_cached_heads = lru_cache(maxsize=8)(_heads)


def heads(session: Session, puller: Puller, limit: int, refused_tasks: set[int]) -> Sequence[Any]:
    """(job id, task id, plain) of the best waiting jobs of the categories the worker
    fits, best first, leaving out the tasks whose plug-in already refused the worker.
    ``plain`` says that the category needs neither Grid Engine evaluation nor an
    allocation on this worker. A worker with an inventory only gets jobspec jobs that fit
    on one node and that its free counts could hold (the allocation itself is decided
    after the claim)."""
    skip_locked = dialect.supports_skip_locked(session.connection())
    statement = _cached_heads(skip_locked, puller.managed, bool(refused_tasks))
    parameters: dict[str, Any] = {
        "p_worker_id": puller.id,
        "p_generation": puller.generation,
        "p_max_free": puller.max_free,
        "p_limit": limit,
    }
    if refused_tasks:
        parameters["p_refused"] = sorted(refused_tasks)
    return session.execute(statement, parameters).all()


#: What a claim writes: the job runs on the puller, one attempt more.
_CLAIM_VALUES: dict[str, Any] = {
    "state": JobState.RUNNING,
    "worker_id": bindparam("p_worker_id"),
    "started_at": bindparam("p_now"),
    "attempts": JOBS.c.attempts + 1,
    "awaiting_pickup": False,
}


def _claim(skip_locked: bool) -> Update:
    claim = update(JOBS).where(JOBS.c.id == bindparam("p_job_id"), JOBS.c.state == WAITING)
    if skip_locked:
        # The job's lock without waiting: a concurrent pull holding it makes this one
        # move on to the next head (SQLite's BEGIN IMMEDIATE already serialises pulls).
        claim = claim.where(
            JOBS.c.id.in_(
                select(JOBS.c.id)
                .where(JOBS.c.id == bindparam("p_job_id"), JOBS.c.state == WAITING)
                .with_for_update(skip_locked=True)
            )
        )
    return claim.values(**_CLAIM_VALUES).returning(*JOBS.c)


_CLAIM = {skip_locked: _claim(skip_locked) for skip_locked in (False, True)}
#: The same, loading the claimed row as a Job (built once: building it costs more than
#: running it).
_CLAIM_JOB = {key: select(Job).from_statement(claim) for key, claim in _CLAIM.items()}

_UNCLAIM = (
    update(JOBS)
    .where(JOBS.c.id == bindparam("p_job_id"))
    .values(
        state=JobState.WAITING,
        worker_id=None,
        started_at=None,
        attempts=JOBS.c.attempts - 1,
    )
)

_SLOTS: Any = bindparam("p_slots")


_BOOK = book_room_statement(_SLOTS)


def book_first_room(session: Session, worker_id: int, slots: int) -> int | None:
    """Book ``slots`` on the worker's first queue instance (in queue order) with room:
    its id, or None when none has room. One conditional UPDATE."""
    booked: int | None = session.scalar(_BOOK, {"p_worker_id": worker_id, "p_slots": slots})
    return booked


_ALLOCATE = insert(ALLOCATIONS).values(
    job_id=bindparam("p_job_id"),
    queue_instance_id=bindparam("p_queue_instance_id"),
    slots=bindparam("p_slots"),
    allocated_at=bindparam("p_now"),
)


def _claim_and_start_pg(claim: Update, heads: Any = None) -> Select[Any]:
    """PostgreSQL: claim, book, allocate and record in one statement (data-modifying
    CTEs). The room it books is exact: every writer of a worker's queue instances holds
    the worker's row lock, which this pull took in an earlier statement, and READ
    COMMITTED reads with a fresh snapshot per statement. The booking still checks
    ``used_slots``; when it finds no room, nothing is allocated or recorded and the
    caller puts the claimed job back. With ``heads`` (a scalar subquery), the answer is
    one row even when nothing was claimed, with that value in its column ``heads``, and
    the statement announces the job taken itself (``pg_notify``, sent at the commit), in
    the round trip it makes anyway."""
    # Short names ("cj", the claimed job): psycopg parses a statement's text again on every
    # execution once it is over 4,096 characters, and the claimed row's columns are named
    # twice over (RETURNING and the answer).
    claimed = claim.cte("cj")
    booked = book_room_statement(select(claimed.c.slots).scalar_subquery()).cte("booked")
    both = claimed.join(booked, true())
    allocate = insert(ALLOCATIONS).from_select(
        ["job_id", "queue_instance_id", "slots", "allocated_at"],
        select(claimed.c.id, booked.c.id, claimed.c.slots, bindparam("p_now")).select_from(both),
    )
    record = dispatched_event_insert(
        dispatched_event_values(
            claimed.c.id, "p_worker", claimed.c.attempts, bindparam("p_now")
        ).select_from(both)
    )
    columns = [*claimed.c, booked.c.id.label("booked_queue_instance")]
    frame: Any = claimed.outerjoin(booked, true())
    if heads is not None:
        found = select(heads.label("heads")).subquery("found")
        # A SELECT in WITH runs only when read: the answer reads it.
        announced = (
            select(
                notify.notify_column(
                    literal(TAKEN, String) + sql_cast(claimed.c.category_id, String)
                )
            )
            .select_from(both)
            .cte("ann")
        )
        columns += [found.c.heads, *announced.c]
        frame = (
            found.outerjoin(claimed, true()).outerjoin(booked, true()).outerjoin(announced, true())
        )
    return (
        select(*columns).select_from(frame).add_cte(allocate.cte("allocate"), record.cte("record"))
    )


_TAKE_IN_ONE = _claim_and_start_pg(_CLAIM[True])
_TAKE_IN_ONE_JOB = select(Job, _TAKE_IN_ONE.selected_columns.booked_queue_instance).from_statement(
    _TAKE_IN_ONE
)


def _take_best(managed: bool) -> Any:
    """PostgreSQL: the heads query and :data:`_TAKE_IN_ONE` in one statement, for the
    common pull whose best heads are all plain jobs without a task: the first of them
    that no concurrent pull holds is claimed, booked, allocated and recorded.

    It runs after :func:`lock_puller`, in a statement of its own, and that order is what
    makes one statement correct: under READ COMMITTED a statement reads with the
    snapshot taken when it starts, so the worker's lock must be granted before this
    statement starts, or its heads and its booking would read the worker's queue
    instances and the waiting jobs as they were before a concurrent pull of this worker
    committed. The jobs themselves are locked here (FOR UPDATE SKIP LOCKED, then
    re-checked as still waiting), as the separate claim did.

    When a head needs a plug-in's verdict, Grid Engine rules or an allocation, nothing is
    claimed and the caller goes the general way, never taking a worse plain job instead
    (tests/matching/debusine/test_registry.py has a plug-in refuse the better head). The
    ``heads`` column says how many heads there were, so that an empty answer needs no
    second query."""
    # The number of heads is written into the text too (see _ONE): with LIMIT $n the
    # generic plan looked dearer than any custom plan, and PostgreSQL planned this
    # statement anew on every pull (1.5 to 2 ms of its CPU, more than running it); with
    # literal limits it settles on the generic plan after five runs.
    candidates = _heads(True, managed, False, literal_column(str(HEADS_PER_ROUND))).cte("heads")
    needs_more = (
        select(candidates.c.id)
        .where(or_(~candidates.c.plain, candidates.c.task_id.is_not(None)))
        .exists()
    )
    first_free = (
        select(JOBS.c.id)
        .join(candidates, candidates.c.id == JOBS.c.id)
        .where(JOBS.c.state == WAITING, ~needs_more)
        .order_by(JOBS.c.priority.desc(), JOBS.c.submitted_at, JOBS.c.id)
        .limit(literal_column("1"))
        .with_for_update(of=JOBS, skip_locked=True)
        .scalar_subquery()
    )
    claim = (
        update(JOBS)
        .where(JOBS.c.id == first_free, JOBS.c.state == WAITING)
        .values(**_CLAIM_VALUES)
        .returning(*JOBS.c)
    )
    take = _claim_and_start_pg(
        claim, select(func.count()).select_from(candidates).scalar_subquery()
    )
    columns = take.selected_columns
    return select(Job, columns.booked_queue_instance, columns.heads).from_statement(take)


_TAKE_BEST = {managed: _take_best(managed) for managed in (False, True)}


def take_best_plain(session: Session, puller: Puller, now: datetime) -> Taken:
    """Claim and start the best job of the worker in one statement, when its best heads
    need nothing but SQL (:func:`_take_best`; PostgreSQL only). ``decided`` is False when
    the general way must look at the heads instead."""
    if not (
        dialect.supports_skip_locked(session.connection())
        and dialect.supports_writing_ctes(session.connection())
    ):
        return Taken(decided=False)
    row = session.execute(
        _TAKE_BEST[puller.managed],
        {
            "p_worker_id": puller.id,
            "p_generation": puller.generation,
            "p_max_free": puller.max_free,
            "p_now": now,
            "p_worker": puller.name,
        },
        execution_options={"populate_existing": True},
    ).one()
    job, booked_queue_instance, heads_found = row
    if job is None:
        return Taken(decided=heads_found == 0)
    if booked_queue_instance is None:
        # The worker's room was gone after all (its free count was read before the lock
        # was granted): the job waits again as it was.
        session.execute(_UNCLAIM, {"p_job_id": job.id})
        session.expire(job)
        return Taken(decided=True)
    notify.sent_by_statement(session, job_taken(job.category_id))
    return Taken(decided=True, job=job)


@dataclass(frozen=True)
class Taken:
    """What :func:`take_best_plain` did: ``decided`` with the job it started (None: no
    job for this worker now), or not decided (the general way looks again)."""

    decided: bool
    job: Job | None = None


def _claim_with_category(skip_locked: bool) -> Select[Job, Category]:
    claim = (
        select(Job, Category)
        .join(Category, Category.id == Job.category_id)
        .where(Job.id == bindparam("p_job_id"), Job.state == WAITING)
    )
    if skip_locked:
        claim = claim.with_for_update(of=Job, skip_locked=True)
    return claim


_CLAIM_WITH_CATEGORY = {key: _claim_with_category(key) for key in (False, True)}


def claim_with_category(session: Session, job_id: int) -> tuple[Job, Category] | None:
    """Lock a waiting job (skipping it when a concurrent pull holds it) and read its
    category in the same statement; None when another pull holds or took it."""
    skip_locked = dialect.supports_skip_locked(session.connection())
    row = session.execute(_CLAIM_WITH_CATEGORY[skip_locked], {"p_job_id": job_id}).one_or_none()
    return None if row is None else (row[0], row[1])


def start_statement(attempts: ColumnElement[int]) -> Update:
    """The UPDATE that marks a job running on a worker (binds ``p_job_id``,
    ``p_worker_id``, ``p_slots``, ``p_now``). ``attempts`` is the one part the pulls
    differ in: :func:`start` binds the count it already knows from the Job object, the
    Core Grid Engine pull, which has no object, counts up in SQL and reads the row back."""
    return (
        update(JOBS)
        .where(JOBS.c.id == bindparam("p_job_id"))
        .values(
            state=JobState.RUNNING,
            worker_id=bindparam("p_worker_id"),
            slots=bindparam("p_slots"),
            started_at=bindparam("p_now"),
            attempts=attempts,
            # A pulled job is in its worker's hands (app/matching/dispatch/record.py).
            awaiting_pickup=False,
        )
    )


_START = start_statement(bindparam("p_attempts"))


def start(session: Session, job: Job, worker_id: int, worker_name: str) -> Job:
    """Mark a claimed and booked job running on the worker and record it, in two Core
    statements; the Job object is told the new values without another flush."""
    now = utcnow()
    attempts = job.attempts + 1
    slots = job.slots
    # The object first: values set on it by the booking (slots, worker) would otherwise
    # be flushed by an UPDATE of their own before this statement.
    for key, value in (
        ("state", JobState.RUNNING),
        ("worker_id", worker_id),
        ("slots", slots),
        ("started_at", now),
        ("attempts", attempts),
        ("awaiting_pickup", False),
    ):
        set_committed_value(job, key, value)
    session.execute(
        _START,
        {
            "p_job_id": job.id,
            "p_worker_id": worker_id,
            "p_slots": slots,
            "p_now": now,
            "p_attempts": attempts,
        },
    )
    record_dispatches(session, [Dispatch(job.id, worker_name, attempts)], now)
    return job


def allocate_slots(
    session: Session, job_id: int, queue_instance_id: int, slots: int, now: datetime
) -> None:
    """The allocation row of slots booked on a queue instance."""
    session.execute(
        _ALLOCATE,
        {
            "p_job_id": job_id,
            "p_queue_instance_id": queue_instance_id,
            "p_slots": slots,
            "p_now": now,
        },
    )


def claim_plain_job(
    session: Session, job_id: int, puller: Puller, now: datetime
) -> tuple[bool, Job | None]:
    """Claim, book and start a job whose category needs no Grid Engine evaluation and no
    allocation, in four statements. (False, None) when a concurrent pull holds or took
    it; (True, the running job); (True, None) when the worker has no room for it after
    all (its free count was stale) and the job waits again."""
    skip_locked = dialect.supports_skip_locked(session.connection())
    if skip_locked and dialect.supports_writing_ctes(session.connection()):
        row = session.execute(
            _TAKE_IN_ONE_JOB,
            {"p_job_id": job_id, "p_worker_id": puller.id, "p_now": now, "p_worker": puller.name},
            execution_options={"populate_existing": True},
        ).one_or_none()
        if row is None:
            return False, None
        job, booked_queue_instance = row
        if booked_queue_instance is None:
            session.execute(_UNCLAIM, {"p_job_id": job_id})
            session.expire(job)
            return True, None
        return True, job
    claimed = session.execute(
        _CLAIM_JOB[skip_locked],
        {"p_job_id": job_id, "p_worker_id": puller.id, "p_now": now},
        execution_options={"populate_existing": True},
    ).scalar_one_or_none()
    if claimed is None:
        return False, None
    queue_instance_id = book_first_room(session, puller.id, claimed.slots)
    if queue_instance_id is None:
        # Another pull of this worker booked the room this one counted on (its count was
        # read before the worker's lock was granted): the job waits again as it was.
        session.execute(_UNCLAIM, {"p_job_id": job_id})
        session.expire(claimed)
        return True, None
    allocate_slots(session, job_id, queue_instance_id, claimed.slots, now)
    record_dispatches(session, [Dispatch(job_id, puller.name, claimed.attempts)], now)
    return True, claimed
