"""A batch pull's reports ended, and its jobs taken, each in one multi-row statement on
PostgreSQL (issue 38).

The express batch (app/matching/dispatch/express.py) used to end each reported job with
the single finish's two statements and take each job with the single pull's two: for ten
jobs, forty statements, each with its CTEs, and the take reading its 128 heads ten times.
PostgreSQL spent about as much per job of a batch of ten as per single pull and finish
(bench/peers.py). Here:

* :data:`END_MANY_QUIETLY` ends every reported job of the worker at once: the reports
  come as arrays (``unnest``), each job ends as :data:`~.finish_sql.END_BY_NAME_CORE`
  ends one (running on the worker, holding slots only), its slots are given back, its
  event recorded. The worker's room is announced by the take that follows. A report it
  cannot end (a resend, a late report, a job holding more than slots) has no row: the
  caller then leaves the whole batch to the general way, as it did.
* :func:`take_many_by_name` takes up to ``p_count`` jobs at once: the heads are read
  once; the best free ones (``FOR UPDATE SKIP LOCKED``), in the single take's order, are
  taken while they fit the worker's first open queue instance together. In that case
  the single take, run once per job, would have taken the same jobs in the same order
  and booked each on that same queue instance (each is the best free head left, and
  that queue instance is the first with room for it), so the statement books their
  slots there at once, allocates and records each, and announces them all taken in one
  notification (one for the listeners to read, not one per job). A batch that wants
  more jobs than it took (they did not fit together, or more heads wait beyond the
  window) goes on one take at a time, as before.

Both run after :data:`~.puller.LOCK_PULLER_ALONE` in the same pipeline, each a statement
of its own so that each reads after the lock and after the statements before it (READ
COMMITTED takes a statement's snapshot when it starts). The worker's lock is taken once
for the whole batch: it is the lock every writer of the worker's jobs, allocations and
queue instances holds, so what they read of those is final.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    ARRAY,
    Boolean,
    Select,
    String,
    bindparam,
    case,
    column,
    exists,
    func,
    insert,
    literal,
    literal_column,
    select,
    true,
    union_all,
    update,
)
from sqlalchemy import cast as sql_cast

from app.db import notify
from app.db.models import (
    InventoryBooking,
    JobBooking,
    JobEventKind,
    JobState,
    QuotaBooking,
)
from app.db.tables import ALLOCATIONS, JOB_EVENTS, JOBS, QUEUE_INSTANCES, WORKERS
from app.matching.announce import job_token_column
from app.matching.dispatch.finish_parts import give_back_slots_of, runs_on
from app.matching.dispatch.pull_claim import CLAIM_VALUES, still_waiting
from app.matching.dispatch.pull_plain import (
    BATCH_HEADS,
    by_name_facts,
    by_name_terms,
    plain_heads,
)
from app.matching.dispatch.record import dispatched_event_insert, dispatched_event_values
from app.matching.ordering.policy import DEFAULT, order_terms
from app.matching.slots import WAITING, first_open_queue_instance
from app.matching.wakeups import ROOM, TAKEN

_NOW: Any = bindparam("p_now")
_REPORTER_ID = select(WORKERS.c.id).where(WORKERS.c.name == bindparam("p_name")).scalar_subquery()
#: The announcement that the reporting worker's room changed (wakeups.room_changed).
_ROOM = literal(ROOM, String) + sql_cast(_REPORTER_ID, String)


def _array(name: str, of: Any) -> Any:
    return bindparam(name, type_=ARRAY(of))


#: One row per report, in the batch's order: the parameters the single end binds once.
_REPORTS: Any = (
    func.unnest(
        _array("p_job_ids", JOBS.c.id.type),
        _array("p_failed", Boolean()),
        _array("p_exit_codes", JOBS.c.exit_code.type),
        _array("p_outputs", JOBS.c.output.type),
        _array("p_reasons", JOBS.c.failure_reason.type),
        _array("p_details", JOB_EVENTS.c.detail.type),
    )
    .table_valued(
        column("job_id"),
        column("failed", Boolean()),
        column("exit_code"),
        column("output"),
        column("reason"),
        column("detail"),
        with_ordinality="ord",
    )
    .render_derived(name="rp")
)


def _end_many() -> Select[Any]:
    reports = _REPORTS
    failed = reports.c.failed
    job = JOBS.c.id
    ended = (
        update(JOBS)
        .where(
            job == reports.c.job_id,
            runs_on(_REPORTER_ID),
            JOBS.c.state == JobState.RUNNING,
            ~exists().where(InventoryBooking.job_id == job, InventoryBooking.released_at.is_(None)),
            ~exists().where(JobBooking.job_id == job),
            ~exists().where(QuotaBooking.job_id == job),
        )
        .values(
            state=case(
                (failed, literal(JobState.FAILED, JOBS.c.state.type)),
                else_=literal(JobState.FINISHED, JOBS.c.state.type),
            ),
            ended_at=_NOW,
            exit_code=reports.c.exit_code,
            output=reports.c.output,
            failure_reason=case((failed, reports.c.reason), else_=JOBS.c.failure_reason),
        )
        .returning(
            *JOBS.c,
            failed.label("rp_failed"),
            reports.c.detail.label("rp_detail"),
            reports.c.ord.label("rp_ord"),
        )
        .cte("ended")
    )
    give_back = give_back_slots_of(select(ended.c.id), _NOW)
    kind_type = JOB_EVENTS.c.kind.type
    record = insert(JOB_EVENTS).from_select(
        ["job_id", "kind", "worker", "detail", "at"],
        select(
            ended.c.id,
            case(
                (ended.c.rp_failed, literal(JobEventKind.FAILED, kind_type)),
                else_=literal(JobEventKind.FINISHED, kind_type),
            ),
            bindparam("p_worker", type_=JOB_EVENTS.c.worker.type),
            ended.c.rp_detail,
            _NOW,
        ).order_by(ended.c.rp_ord),
    )
    return (
        select(*(ended.c[c.name] for c in JOBS.c))
        .select_from(ended)
        .add_cte(give_back.cte("give_back"), record.cte("record"))
        .order_by(ended.c.rp_ord)
    )


#: The worker's reports (arrays ``p_job_ids``, ``p_failed``, ``p_exit_codes``,
#: ``p_outputs``, ``p_reasons``, ``p_details``; the worker ``p_name``) ended: one row
#: per job ended, its columns, in the reports' order; its events are recorded in that
#: order too. It announces nothing: the take after it announces the worker's room with
#: the jobs it takes, in one notification (:func:`take_many_by_name`'s ``p_room``, or
#: pull_plain.TAKE_BEST_BY_NAME_WITH_ROOM). See the module docstring.
END_MANY_QUIETLY = _end_many()

#: The limits a take of many is built for: a batch of N jobs locks at most the next
#: power of two of free heads (each limit is a statement of its own, see pull_plain.py's
#: note on literal limits), and takes N of them.
TAKE_LIMITS: tuple[int, ...] = tuple(1 << power for power in range(1, 9))


def take_many_by_name(limit: int) -> Select[Any]:
    """The take of up to ``p_count`` (at most ``limit``) jobs of a worker without an
    inventory, given its name (see the module docstring). One row per job taken, best
    first, shaped as the single take by name's (pull_plain.TAKE_BEST_BY_NAME): the job's
    columns, ``booked_queue_instance``, ``heads``, the announcement, ``eligible`` and
    the worker's four :data:`~.puller.PULLER_FACTS`; then ``free``, how many free heads
    it locked. One row without a job when it took none.

    The announcement names every job taken and, when ``p_room`` is true, the worker's
    room (its reports ended jobs in this transaction: :data:`END_MANY_QUIETLY`), in one
    notification. One statement per limit, which its caller builds on first use and
    keeps (express.py). (A batch of one takes with the single take by name: this
    statement's window sums and its count of free heads cost more than they save for
    one job.)"""
    terms = by_name_terms()
    worker_id = terms.id
    # As the single take: any head that needs more than SQL leaves the pull to the
    # general way.
    candidates, needs_more = plain_heads(False, BATCH_HEADS, terms)

    def best_first(jobs: Any) -> list[Any]:
        return order_terms(DEFAULT.rules, jobs.c.priority, jobs.c.submitted_at, jobs.c.id)

    free = (
        select(JOBS.c.id, JOBS.c.slots, JOBS.c.priority, JOBS.c.submitted_at)
        .join(candidates, candidates.c.id == JOBS.c.id)
        # Compared plainly, unlike the claim below (pull_claim.still_waiting): with
        # statistics the pick of free heads walks the waiting jobs in order and stops at
        # its limit, 3,035-3,093 jobs/s against 2,408-2,745 through the primary key
        # (issue 38, batches of ten). On a table never ANALYZEd the primary key's way is
        # the cheaper (0.20 against 0.34 ms of PostgreSQL CPU per job), but the steady
        # state has statistics.
        .where(JOBS.c.state == WAITING, ~needs_more)
        .order_by(*best_first(JOBS))
        .limit(literal_column(str(limit)))
        .with_for_update(of=JOBS, skip_locked=True)
        .cte("fr")
    )
    first_open = first_open_queue_instance(worker_id).cte("q0")
    ranked = select(
        free.c.id,
        func.sum(free.c.slots).over(order_by=best_first(free)).label("upto"),
        func.row_number().over(order_by=best_first(free)).label("n"),
    ).subquery("rk")
    # A prefix of the best free heads: running sums and row numbers only grow.
    chosen = select(ranked.c.id).where(
        ranked.c.upto <= select(first_open.c.room).scalar_subquery(),
        ranked.c.n <= bindparam("p_count"),
    )
    claimed = (
        update(JOBS)
        .where(JOBS.c.id.in_(chosen), still_waiting())
        .values(**{**CLAIM_VALUES, "worker_id": worker_id})
        .returning(*JOBS.c)
        .cte("cj")
    )
    room: Any = QUEUE_INSTANCES
    together = select(func.sum(claimed.c.slots)).scalar_subquery()
    booked = (
        update(room)
        .where(
            room.c.id == select(first_open.c.id).scalar_subquery(),
            room.c.used_slots + together <= room.c.slots,
        )
        .values(used_slots=room.c.used_slots + together)
        .returning(room.c.id)
        .cte("booked")
    )
    both = claimed.join(booked, true())
    allocate = insert(ALLOCATIONS).from_select(
        ["job_id", "queue_instance_id", "slots", "allocated_at"],
        select(claimed.c.id, booked.c.id, claimed.c.slots, _NOW)
        .select_from(both)
        .order_by(*best_first(claimed)),
    )
    # Rows are written best first, as the single takes one after the other write them.
    record = dispatched_event_insert(
        dispatched_event_values(claimed.c.id, "p_worker", claimed.c.attempts, _NOW)
        .select_from(both)
        .order_by(*best_first(claimed))
    )
    # Every job taken, and the worker's room when asked, announced in one notification
    # (a SELECT in WITH runs only when the answer reads it).
    tokens = union_all(
        select(
            job_token_column(TAKEN, claimed.c.category_id, claimed.c.id).label("token")
        ).select_from(both),
        select(_ROOM.label("token")).where(bindparam("p_room", type_=Boolean())),
    ).subquery("tokens")
    announced = select(notify.notify_all_column(tokens.c.token).label("sent")).cte("ann")
    found = select(
        select(func.count()).select_from(candidates).scalar_subquery().label("heads"),
        announced.c.sent,
        *by_name_facts(),
        select(func.count()).select_from(free).scalar_subquery().label("free"),
    ).subquery("found")
    return (
        select(*claimed.c, booked.c.id.label("booked_queue_instance"), *found.c)
        .select_from(found.outerjoin(claimed, true()).outerjoin(booked, true()))
        .add_cte(allocate.cte("allocate"), record.cte("record"))
        .order_by(*best_first(claimed))
    )


def take_limit(count: int) -> int:
    """The smallest limit of :data:`TAKE_LIMITS` that takes ``count`` jobs."""
    for limit in TAKE_LIMITS:
        if limit >= count:
            return limit
    raise ValueError(f"a take of many takes at most {TAKE_LIMITS[-1]} jobs, not {count}")
