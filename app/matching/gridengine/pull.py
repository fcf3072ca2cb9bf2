"""The Grid Engine branch of a pull in Core statements, built once (issue 6, speed).

A Grid Engine pull used to claim the job as ORM objects, read the cluster state, then book
in up to nine statements (savepoint, queue instance, each consumable row, allocation,
bookings, release, job, event). Here it takes two round trips after the heads query, or
three when the job books consumables:

1. the claim (the job's lock, skipping a job a concurrent pull holds, with its category's
   ``-l`` lists) in the statement that reads the worker's values, usage and the attribute
   table (app/matching/gridengine/decide.py ``worker_row_parts``);
2. on PostgreSQL, every write in one statement of data-modifying CTEs (:func:`_claim_and_book_pg`):
   the guarded updates of the queue instances and consumable rows, and, only when every
   one of them matched, the allocations, bookings, job start and event. When the job books
   more than one guarded row, their rows are first locked in id order by one statement
   (:func:`_lock_rows`: queue instances, then consumable rows, the order of every writer)
   and the guards checked in Python on the latest values the locks return; a guard that
   fails writes nothing, so no savepoint is needed (write_bookings()'s savepoint pair existed
   because undoing a float consumable by subtraction is inexact: here nothing is undone).
   The write statement then starts after the locks were granted, so it sees exactly the
   values that were checked. (Checking the guards on rows locked inside the write
   statement itself is not enough: under load on PostgreSQL, an update in the same
   statement saw a later version than the lock had returned.)

The decision is the evaluator's, as in the ORM path (``plan_job``); nothing about what is
booked changes. SQLite (no concurrent writers: BEGIN IMMEDIATE) keeps ``write_bookings()`` and
starts the job with one UPDATE ... RETURNING.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    ARRAY,
    Boolean,
    CompoundSelect,
    Float,
    Integer,
    Select,
    and_,
    bindparam,
    case,
    func,
    insert,
    literal,
    literal_column,
    null,
    select,
    union_all,
    update,
)
from sqlalchemy import cast as sql_cast
from sqlalchemy.orm import Session

from app.db import dialect
from app.db.base import utcnow
from app.db.models import Job, JobState
from app.db.tables import (
    ALLOCATIONS,
    CATEGORIES,
    CONSUMABLE_USAGE,
    JOB_BOOKINGS,
    JOBS,
    QUEUE_INSTANCES,
)
from app.matching.dispatch.pull_claim import start_statement
from app.matching.dispatch.puller import Puller
from app.matching.dispatch.record import (
    Dispatch,
    dispatched_event_insert,
    dispatched_event_values,
    record_dispatches,
)
from app.matching.errors import ConflictError
from app.matching.gridengine.bookings import ConsumableBooking, write_bookings
from app.matching.gridengine.decide import pe_from_database, plan_job
from app.matching.gridengine.groups import ensure_groups
from app.matching.gridengine.loaders import row_columns, table_parameters, worker_row_parts
from app.matching.gridengine.quotas import QuotaBook, book_quotas, load_quota_book
from app.matching.gridengine.state import ClusterState, state_of_rows


@dataclass(frozen=True)
class ClaimedJob:
    """A locked waiting job with what deciding it reads of its category."""

    id: int
    attempts: int
    hard: str
    soft: str
    pe: str | None
    pe_min: int
    pe_max: int
    queue_list: str = "NONE"
    master_queue_list: str = "NONE"
    soft_queue_list: str = "NONE"


#: The claim's part of the state statement (see loaders.worker_row_parts).
_CLAIM_PART = 4


def _claim(skip_locked: bool) -> Select[Any]:
    claim = (
        select(
            JOBS.c.id,
            JOBS.c.attempts,
            CATEGORIES.c.hard,
            CATEGORIES.c.soft,
            CATEGORIES.c.pe,
            CATEGORIES.c.pe_min,
            CATEGORIES.c.pe_max,
            CATEGORIES.c.queue_list,
            CATEGORIES.c.master_queue_list,
            CATEGORIES.c.soft_queue_list,
        )
        .join_from(JOBS, CATEGORIES, CATEGORIES.c.id == JOBS.c.category_id)
        .where(JOBS.c.id == bindparam("p_job_id"), JOBS.c.state == JobState.WAITING)
    )
    if skip_locked:
        # The job's lock without waiting: a concurrent pull holding it makes this one
        # move on to the next head (SQLite's BEGIN IMMEDIATE already serialises pulls).
        claim = claim.with_for_update(of=JOBS, skip_locked=True)
    return claim


def _claim_with_state(skip_locked: bool) -> CompoundSelect[Any]:
    """The claim as one more part of the worker's state rows: the job's lock is taken in
    a CTE (PostgreSQL allows no FOR UPDATE beside a UNION)."""
    claim = _claim(skip_locked)
    if skip_locked:
        # PostgreSQL: generic plans for the rest of the transaction, set in this round
        # trip (the claimed row is materialised with every column, so this runs when a
        # job is claimed). The write that follows is one large statement over arrays
        # that PostgreSQL otherwise planned afresh on every pull; its generic plan is
        # the same plan. The heads query, whose custom plans matter, ran before.
        claim = claim.add_columns(dialect.generic_plans_from_here())
    claimed = claim.cte("claimed")
    part = select(
        literal(_CLAIM_PART).label("part"),
        *row_columns(
            i1=claimed.c.id,
            i2=claimed.c.attempts,
            i3=claimed.c.pe_min,
            i4=claimed.c.pe_max,
            s1=claimed.c.hard,
            s2=claimed.c.soft,
            s3=claimed.c.pe,
            s4=claimed.c.queue_list,
            s5=claimed.c.master_queue_list,
            s6=claimed.c.soft_queue_list,
        ),
    )
    return union_all(*worker_row_parts(with_table=True), part)


_CLAIMS = {skip_locked: _claim(skip_locked) for skip_locked in (False, True)}
_CLAIMS_WITH_STATE = {skip_locked: _claim_with_state(skip_locked) for skip_locked in (False, True)}


class GridEnginePull:
    """One pull's Grid Engine decisions: the worker's state is read with the first claim
    and kept for the next heads of the same pull, as the ORM path kept it."""

    def __init__(self, session: Session, puller: Puller) -> None:
        self._session = session
        self._puller = puller
        self._skip_locked = dialect.supports_skip_locked(session.connection())
        self._in_one = self._skip_locked and dialect.supports_writing_ctes(session.connection())
        self.state: ClusterState | None = None
        #: The enabled resource quota sets and their usage, read at the first claim
        #: (False: not read yet; None: no set is enabled).
        self._quotas: QuotaBook | bool | None = False

    def claim(self, job_id: int) -> ClaimedJob | None:
        """Lock a waiting job and read its category (and, the first time, the state);
        None when another pull holds or took it."""
        parameters: dict[str, Any] = {"p_job_id": job_id}
        connection = self._session.connection()
        if self.state is None:
            parameters["sge_worker_ids"] = [self._puller.id]
            parameters.update(table_parameters())
            # Core statements on the connection: nothing in the session is pending (the
            # pull changed no object), and the ORM's result machinery adds nothing here.
            rows = connection.execute(_CLAIMS_WITH_STATE[self._skip_locked], parameters).all()
            # The attribute table comes in the same statement as the values.
            self.state = state_of_rows(rows, {self._puller.id: self._puller.name}, None)
            found = [row for row in rows if row.part == _CLAIM_PART]
            if not found:
                return None
            row = found[0]
            return ClaimedJob(
                row.i1, row.i2, row.s1, row.s2, row.s3, row.i3, row.i4, row.s4, row.s5, row.s6
            )
        claimed = connection.execute(_CLAIMS[self._skip_locked], parameters).one_or_none()
        return None if claimed is None else ClaimedJob(*claimed)

    def take(self, job_id: int) -> Job | None:
        """Claim, decide and start the job on this worker: the running job, or None when
        another pull holds it, it does not fit now, or a guard failed (nothing written)."""
        claimed = self.claim(job_id)
        if claimed is None:
            return None
        state = self.state
        assert state is not None
        if self._quotas is False:
            self._quotas = load_quota_book(self._session)
        quota_book = self._quotas if isinstance(self._quotas, QuotaBook) else None
        user, project = "", None
        if quota_book is not None:
            owner = self._session.execute(
                select(JOBS.c.submitter, JOBS.c.project).where(JOBS.c.id == claimed.id)
            ).one_or_none()
            if owner is not None:
                user, project = owner.submitter or "", owner.project
        ensure_groups(
            self._session,
            state,
            claimed.queue_list,
            claimed.master_queue_list,
            claimed.soft_queue_list,
            quotas=quota_book,
        )
        decision, bookings = plan_job(
            state,
            claimed,
            state.queue_order(),
            pe_from_database(self._session),
            quota_book=quota_book,
            user=user,
            project=project,
        )
        if decision.assignment is None or decision.master is None:
            return None
        if not decision.quota_amounts:
            return self._book(claimed, decision.assignment, decision.master, bookings)
        # The quotas are booked after the slots and consumables (the lock order of
        # every writer), in one savepoint with them: a quota guard that fails undoes all.
        savepoint = self._session.begin_nested()
        job = self._book(claimed, decision.assignment, decision.master, bookings)
        if job is None or not book_quotas(
            self._session, [(claimed.id, list(decision.quota_amounts))]
        ):
            savepoint.rollback()
            return None
        savepoint.commit()
        return job

    def _book(
        self,
        claimed: ClaimedJob,
        assignment: dict[int, int],
        master: int,
        bookings: list[ConsumableBooking],
    ) -> Job | None:
        state = self.state
        assert state is not None
        worker_id = state.slots[master].worker_id
        if self._in_one:
            return take_in_one(
                self._session,
                claimed.id,
                assignment,
                bookings,
                worker_id,
                self._puller.name,
            )
        if not write_bookings(self._session, claimed.id, assignment, bookings):
            return None
        return _start(
            self._session, claimed, sum(assignment.values()), worker_id, self._puller.name
        )


_START = select(Job).from_statement(start_statement(JOBS.c.attempts + 1).returning(*JOBS.c))


def _start(
    session: Session, claimed: ClaimedJob, slots: int, worker_id: int, worker_name: str
) -> Job:
    """Mark a booked job running and record it (SQLite: two statements in process)."""
    now = utcnow()
    job: Job = session.execute(
        _START,
        {"p_job_id": claimed.id, "p_worker_id": worker_id, "p_slots": slots, "p_now": now},
        execution_options={"populate_existing": True},
    ).scalar_one()
    record_dispatches(session, [Dispatch(claimed.id, worker_name, job.attempts)], now)
    return job


def _lock_rows() -> CompoundSelect[Any]:
    """Lock the queue instances ``l_qi`` and consumable rows ``l_usage`` in id order,
    queue instances first, and read their latest values: (part, id, a, b, c) with part
    0 (used_slots, slots) or 1 (used, used_nonexclusive, capacity)."""
    qi, usage = QUEUE_INSTANCES, CONSUMABLE_USAGE
    slots = (
        select(qi.c.id, qi.c.used_slots, qi.c.slots)
        .where(qi.c.id == func.any(bindparam("l_qi", type_=ARRAY(Integer()))))
        .order_by(qi.c.id)
        .with_for_update()
        .cte("q")
    )
    consumables = (
        select(usage.c.id, usage.c.used, usage.c.used_nonexclusive, usage.c.capacity)
        .where(usage.c.id == func.any(bindparam("l_usage", type_=ARRAY(Integer()))))
        .order_by(usage.c.id)
        .with_for_update()
        .cte("c")
    )
    # UNION ALL runs its parts in order: the queue instances are locked first.
    return union_all(
        select(
            literal(0).label("part"),
            slots.c.id,
            sql_cast(slots.c.used_slots, Float()).label("a"),
            sql_cast(slots.c.slots, Float()).label("b"),
            sql_cast(null(), Float()).label("c"),
        ),
        select(
            literal(1),
            consumables.c.id,
            consumables.c.used,
            consumables.c.used_nonexclusive,
            consumables.c.capacity,
        ),
    )


_LOCK_ROWS = _lock_rows()


def _guards_hold(
    session: Session, slots: list[tuple[int, int]], usage: list[ConsumableBooking]
) -> bool:
    """Lock the rows a dispatch books and check write_bookings()'s guards on their latest values."""
    rows = session.connection().execute(
        _LOCK_ROWS,
        {"l_qi": [qi_id for qi_id, _count in slots], "l_usage": [b.usage_id for b in usage]},
    )
    locked_slots: dict[int, tuple[float, float]] = {}
    locked_usage: dict[int, tuple[float, float, float]] = {}
    for part, row_id, a, b, c in rows:
        if part == 0:
            locked_slots[row_id] = (a, b)
        else:
            locked_usage[row_id] = (a, b, c)
    for qi_id, count in slots:
        if qi_id not in locked_slots:
            return False
        used_slots, capacity = locked_slots[qi_id]
        if not used_slots + count <= capacity:
            return False
    for booking in usage:
        assert booking.usage_id is not None
        if booking.usage_id not in locked_usage:
            return False
        used, nonexclusive_used, capacity = locked_usage[booking.usage_id]
        if booking.nonexclusive:
            fits = used == 0
        elif booking.exclusive:
            fits = used == 0 and nonexclusive_used == 0
        else:
            fits = used + booking.amount <= capacity
        if not fits:
            return False
    return True


@lru_cache(maxsize=1)
def _claim_and_book_pg() -> Any:
    """PostgreSQL: book, allocate, start and record in one statement (see the module
    docstring). The rows come as arrays (one statement text whatever their number, so
    the driver prepares it once): queue instances ``t_qi``/``t_count``, consumable rows
    ``t_usage``/``t_amount``/``t_nonexclusive``/``t_exclusive``. The statement is the
    job's UPDATE, returning the job and the numbers of rows booked, or no row when a
    guarded update matched nothing (every other write is conditional on all of them;
    the consumable rows are not even tried when a queue instance's guard failed). Names
    are short: psycopg parses a statement longer than 4,096 characters again on every
    execution."""
    qi, usage = QUEUE_INSTANCES, CONSUMABLE_USAGE
    job_id = bindparam("t_job", type_=Integer())
    now = bindparam("t_now", type_=JOBS.c.started_at.type)
    zero: Any = literal_column("0")
    n_slots = bindparam("t_n_slots", type_=Integer())
    n_usage = bindparam("t_n_usage", type_=Integer())
    given = select(
        func.unnest(
            bindparam("t_qi", type_=ARRAY(Integer())),
            bindparam("t_count", type_=ARRAY(Integer())),
        )
        .table_valued("id", "n")
        .render_derived(name="r")
    ).cte("s")
    row = select(
        func.unnest(
            bindparam("t_usage", type_=ARRAY(Integer())),
            bindparam("t_amount", type_=ARRAY(Float())),
            bindparam("t_nonexclusive", type_=ARRAY(Boolean())),
            bindparam("t_exclusive", type_=ARRAY(Boolean())),
        )
        .table_valued("id", "amount", "nonexclusive", "exclusive")
        .render_derived(name="r")
    ).cte("u")
    booked_slots = (
        update(qi)
        .where(qi.c.id == given.c.id, qi.c.used_slots + given.c.n <= qi.c.slots)
        .values(used_slots=qi.c.used_slots + given.c.n)
        .returning(qi.c.id)
        .cte("bs")
    )
    slots_done = select(func.count()).select_from(booked_slots).scalar_subquery()
    c = row.c
    booked_usage = (
        update(usage)
        .where(
            usage.c.id == c.id,
            slots_done == n_slots,
            # write_bookings()'s guards: a non-exclusive use of an EXCL attribute needs no
            # exclusive user, an exclusive use nobody there, any other use room below
            # the capacity.
            case(
                (c.nonexclusive, usage.c.used == zero),
                (c.exclusive, and_(usage.c.used == zero, usage.c.used_nonexclusive == zero)),
                else_=usage.c.used + c.amount <= usage.c.capacity,
            ),
        )
        .values(
            used=case((c.nonexclusive, usage.c.used), else_=usage.c.used + c.amount),
            used_nonexclusive=case(
                (c.nonexclusive, usage.c.used_nonexclusive + c.amount),
                else_=usage.c.used_nonexclusive,
            ),
        )
        .returning(usage.c.id)
        .cte("bu")
    )
    usage_done = select(func.count()).select_from(booked_usage).scalar_subquery()
    go = select(and_(slots_done == n_slots, usage_done == n_usage).label("ok")).cte("g")
    ok = select(go.c.ok).scalar_subquery()
    allocate = insert(ALLOCATIONS).from_select(
        ["job_id", "queue_instance_id", "slots", "allocated_at"],
        select(job_id, given.c.id, given.c.n, now).where(ok),
    )
    record_bookings = insert(JOB_BOOKINGS).from_select(
        ["job_id", "usage_id", "amount", "nonexclusive"],
        select(job_id, c.id, c.amount, c.nonexclusive).where(ok),
    )
    # The event reads the job before this statement's update (one snapshot): its
    # attempts plus the one this dispatch adds.
    record = dispatched_event_insert(
        dispatched_event_values(JOBS.c.id, "t_worker", JOBS.c.attempts + 1, now).where(
            JOBS.c.id == job_id, ok
        )
    )
    started = (
        update(JOBS)
        .where(JOBS.c.id == job_id, ok)
        .values(
            state=JobState.RUNNING,
            worker_id=bindparam("t_worker_id", type_=Integer()),
            slots=bindparam("t_slots", type_=Integer()),
            started_at=now,
            attempts=JOBS.c.attempts + 1,
            awaiting_pickup=False,
        )
        .returning(*JOBS.c)
        .add_cte(allocate.cte("a"), record_bookings.cte("b"), record.cte("e"))
    )
    return select(Job).from_statement(started)


def take_in_one(
    session: Session,
    job_id: int,
    assignment: dict[int, int],
    bookings: list[ConsumableBooking],
    worker_id: int,
    worker_name: str,
) -> Job | None:
    """Write a decided job's bookings and start it (PostgreSQL): the running job, or None
    when a guard failed because a concurrent dispatch took the capacity first (then
    nothing was written)."""
    slots = sorted(assignment.items())
    usage = sorted((b for b in bookings if b.usage_id is not None), key=lambda b: b.usage_id or 0)
    if len({b.usage_id for b in usage}) != len(usage):
        # One UPDATE changes a row once; bookings_for gives each row one booking.
        raise ValueError("a consumable row booked twice in one dispatch")
    checked = len(slots) + len(usage) > 1
    if checked and not _guards_hold(session, slots, usage):
        return None
    parameters = {
        "t_qi": [qi_id for qi_id, _count in slots],
        "t_count": [count for _qi_id, count in slots],
        "t_usage": [b.usage_id for b in usage],
        "t_amount": [b.amount for b in usage],
        "t_nonexclusive": [b.nonexclusive for b in usage],
        "t_exclusive": [b.exclusive for b in usage],
        "t_n_slots": len(slots),
        "t_n_usage": len(usage),
        "t_job": job_id,
        "t_now": utcnow(),
        "t_worker_id": worker_id,
        "t_slots": sum(assignment.values()),
        "t_worker": worker_name,
    }
    job: Job | None = session.execute(
        _claim_and_book_pg(), parameters, execution_options={"populate_existing": True}
    ).scalar_one_or_none()
    if job is not None or not checked:
        # Started, or the single guarded update (a queue instance's slots) matched
        # nothing and so nothing was written.
        return job
    # Cannot happen (the rows were locked and their guards checked): refuse rather than
    # keep a partial booking; the transaction rolls back.
    raise ConflictError(f"job {job_id}: its bookings changed while they were written; retry")
