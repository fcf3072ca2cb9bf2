"""A scheduling run's bookings, kept in memory and written at the end of the run.

A run holds every worker's lock (app/matching/gridengine/run.py), so no pull books anything
while it decides, and its in-memory cluster state (app/matching/gridengine/decide.py) is
the picture the database would show. Writing each job's bookings as it is decided cost
about eight statements per job (savepoint, job lock, queue instance, each consumable row,
allocation, bookings, job); here the run sums them per row and writes them with one
executemany per statement shape, still guarded (``used + amount <= capacity``, the
exclusive-use conditions, ``state = 'waiting'``), in the lock order of app/matching/
dispatch.py (jobs were locked as the run reached them, then queue instances, then
consumable rows in id order). A guard that fails means something changed under the
run's locks (an admin lowered a capacity): the run raises and its transaction rolls back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    ARRAY,
    ColumnElement,
    Float,
    Integer,
    Table,
    Update,
    bindparam,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.orm import Session
from sqlalchemy.types import TypeEngine

from app.db import dialect
from app.db.models import (
    Category,
    JobState,
    ParallelEnvironment,
)
from app.db.tables import ALLOCATIONS, CONSUMABLE_USAGE, JOB_BOOKINGS, JOBS, QUEUE_INSTANCES
from app.matching.errors import ConflictError
from app.matching.gridengine.bookings import ConsumableBooking, apply_in_memory
from app.matching.gridengine.decide import Decision, PeLookup, pe_slots_in_use, plan_job
from app.matching.gridengine.quotas import QuotaBook
from app.matching.gridengine.state import ClusterState, QueueSlot

#: (usage row id, counts in used_nonexclusive, exclusive use)
_UsageKey = tuple[int, bool, bool]


@dataclass
class RunBookings:
    """Everything the run has booked so far, per database row."""

    slots: dict[int, int] = field(default_factory=dict)
    usage: dict[_UsageKey, float] = field(default_factory=dict)
    allocations: list[dict[str, object]] = field(default_factory=list)
    job_bookings: list[dict[str, object]] = field(default_factory=list)
    started: list[dict[str, object]] = field(default_factory=list)
    #: Parallel environments: (allocation rule, slots) or None when unknown, and the
    #: slots in use including this run's jobs.
    pes: dict[str, tuple[str, int] | None] = field(default_factory=dict)
    pe_used: dict[str, int] = field(default_factory=dict)

    def pe_lookup(self, session: Session) -> PeLookup:
        def lookup(name: str) -> tuple[str, int] | None:
            if name not in self.pes:
                pe = session.scalar(
                    select(ParallelEnvironment).where(ParallelEnvironment.name == name)
                )
                self.pes[name] = None if pe is None else (pe.allocation_rule, pe.slots)
                self.pe_used[name] = pe_slots_in_use(session, name)
            entry = self.pes[name]
            if entry is None:
                return None
            rule, total = entry
            return rule, max(0, total - self.pe_used[name])

        return lookup

    def add(
        self,
        state: ClusterState,
        job_id: int,
        category: Category,
        decision: Decision,
        bookings: Sequence[ConsumableBooking],
        now: datetime,
    ) -> None:
        assert decision.assignment is not None and decision.master is not None
        assignment = decision.assignment
        for qi_id, count in assignment.items():
            self.slots[qi_id] = self.slots.get(qi_id, 0) + count
            self.allocations.append({"job_id": job_id, "queue_instance_id": qi_id, "slots": count})
        for booking in bookings:
            if booking.usage_id is None:
                continue  # a queue instance's slots, counted above
            key = (booking.usage_id, booking.nonexclusive, booking.exclusive)
            self.usage[key] = self.usage.get(key, 0.0) + booking.amount
            self.job_bookings.append(
                {
                    "job_id": job_id,
                    "usage_id": booking.usage_id,
                    "amount": booking.amount,
                    "nonexclusive": booking.nonexclusive,
                }
            )
        total = sum(assignment.values())
        if category.pe is not None:
            self.pe_used[category.pe] = self.pe_used.get(category.pe, 0) + total
        self.started.append(
            {
                "job_key": job_id,
                "new_worker": state.slots[decision.master].worker_id,
                "new_slots": total,
                "new_started": now,
            }
        )

    def started_jobs(self) -> list[int]:
        """The ids of the jobs this run started."""
        return [cast(int, row["job_key"]) for row in self.started]

    def write(self, session: Session) -> None:
        """The run's bookings in a few guarded statements, one per statement shape
        (rows in id order)."""
        session.flush()
        jobs = JOBS
        by_start: dict[object, list[tuple[object, ...]]] = {}
        for row in self.started:
            by_start.setdefault(row["new_started"], []).append(
                (row["job_key"], row["new_worker"], row["new_slots"])
            )
        for started_at, started in by_start.items():  # one start time per run
            _update_from(
                session,
                jobs,
                (Integer(), Integer(), Integer()),
                sorted(started, key=lambda row: cast(int, row[0])),
                lambda rows: [jobs.c.state == JobState.WAITING],
                _job_values(started_at),
                "a job left the waiting state during the scheduling run",
            )
        queues = QUEUE_INSTANCES
        _update_from(
            session,
            queues,
            (Integer(), Integer()),
            sorted(self.slots.items()),
            lambda rows: [queues.c.used_slots + rows.a <= queues.c.slots],
            lambda rows: {"used_slots": queues.c.used_slots + rows.a},
            "a queue instance's slots changed during the scheduling run",
        )
        usage = CONSUMABLE_USAGE
        shapes: dict[tuple[bool, bool], tuple[_Guard, _Values]] = {
            # (nonexclusive, exclusive): guard and new value, as write_bookings() has them
            (True, False): (
                lambda rows: [usage.c.used == 0],
                lambda rows: {"used_nonexclusive": usage.c.used_nonexclusive + rows.a},
            ),
            (False, False): (
                lambda rows: [usage.c.used + rows.a <= usage.c.capacity],
                lambda rows: {"used": usage.c.used + rows.a},
            ),
            (False, True): (
                lambda rows: [usage.c.used == 0, usage.c.used_nonexclusive == 0],
                lambda rows: {"used": usage.c.used + rows.a},
            ),
        }
        for shape, (guard, new_values) in shapes.items():
            _update_from(
                session,
                usage,
                (Integer(), Float()),
                [
                    (key[0], amount)
                    for key, amount in sorted(self.usage.items())
                    if (key[1], key[2]) == shape
                ],
                guard,
                new_values,
                "a consumable capacity changed during the scheduling run",
            )
        if self.allocations:
            session.execute(insert(ALLOCATIONS), self.allocations)
        if self.job_bookings:
            session.execute(insert(JOB_BOOKINGS), self.job_bookings)
        # Core statements bypass the identity map: loaded jobs and rows are stale now.
        session.expire_all()


def _job_values(started_at: object) -> _Values:
    def new_values(rows: _Given) -> dict[str, object]:
        return {
            "state": JobState.RUNNING,
            "worker_id": rows.a,
            "slots": rows.b,
            "started_at": started_at,
        }

    return new_values


@dataclass(frozen=True)
class _Given:
    """The columns of the rows an UPDATE is given: the row id, one or two values."""

    key: ColumnElement[Any]
    a: ColumnElement[Any]
    b: ColumnElement[Any]


_Guard = Callable[[_Given], list[ColumnElement[bool]]]
_Values = Callable[[_Given], dict[str, object]]


def _update_from(
    session: Session,
    table: Table,
    types: tuple[TypeEngine[Any], ...],
    rows: Sequence[tuple[object, ...]],
    guard: _Guard,
    new_values: _Values,
    why: str,
) -> None:
    """A guarded UPDATE of ``table`` for every row (its id, then the values ``a``, ``b``
    in that order): each row must have matched exactly one row of the table.

    PostgreSQL gets the rows as arrays, unnested and joined in one statement: an
    executemany costs the server a statement per row (some 25,000 jobs in a full-size
    run) and a VALUES list costs the client its compilation. SQLite, in process, takes
    the executemany."""
    if not rows:
        return
    names = ("run_key", "run_a", "run_b")[: len(types)]
    if dialect.binds_arrays(session.connection()):
        arrays = [
            bindparam(name, [row[index] for row in rows], type_=ARRAY(kind))
            for index, (name, kind) in enumerate(zip(names, types, strict=True))
        ]
        given = func.unnest(*arrays).table_valued(*names).render_derived(name="run_rows")
        columns = [given.c[name] for name in names]
        statement = update(table).where(table.c.id == columns[0])
        result = session.execute(_guarded(statement, columns, guard, new_values))
    else:
        columns = [bindparam(name, type_=kind) for name, kind in zip(names, types, strict=True)]
        statement = update(table).where(table.c.id == columns[0])
        result = session.execute(
            _guarded(statement, columns, guard, new_values),
            [dict(zip(names, row, strict=True)) for row in rows],
        )
    if result.rowcount != len(rows):  # type: ignore[attr-defined]
        raise ConflictError(why)


def _guarded(
    statement: Update,
    columns: Sequence[ColumnElement[Any]],
    guard: _Guard,
    new_values: _Values,
) -> Update:
    given = _Given(columns[0], columns[1], columns[-1])
    return statement.where(*guard(given)).values(**new_values(given))


def book_in_run(
    state: ClusterState,
    run: RunBookings,
    lookup: PeLookup,
    job_id: int,
    category: Category,
    order: Sequence[QueueSlot],
    now: datetime,
    *,
    trace: bool = False,
    quota_book: QuotaBook | None = None,
    user: str = "",
    project: str | None = None,
) -> tuple[Decision, bool]:
    """Decide a job and book it in memory: the decision and whether it was booked. The
    quotas it takes are kept in ``quota_book`` until the run writes them."""
    decision, bookings = plan_job(
        state,
        category,
        order,
        lookup,
        trace=trace,
        quota_book=quota_book,
        user=user,
        project=project,
    )
    if decision.assignment is None or decision.master is None:
        return decision, False
    if quota_book is not None and decision.quota_amounts:
        quota_book.apply(decision.quota_amounts)
        quota_book.pending_jobs.append((job_id, list(decision.quota_amounts)))
    apply_in_memory(bookings)
    run.add(state, job_id, category, decision, bookings, now)
    return decision, True
