"""Plain jobs (no Grid Engine evaluation, no allocation): claimed, booked, allocated and
recorded in one statement on PostgreSQL (data-modifying CTEs), in four elsewhere. The
statements are built once (building them costs more than running them).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    Select,
    String,
    Update,
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

from app.db import dialect, notify
from app.db.models import Job
from app.db.tables import ALLOCATIONS, JOBS
from app.matching.announce import job_token_column
from app.matching.dispatch.pull_claim import (
    CLAIM,
    CLAIM_JOB,
    CLAIM_VALUES,
    UNCLAIM,
    allocate_slots,
    book_first_room,
    still_waiting,
)
from app.matching.dispatch.pull_heads import BOUND, HEADS_PER_ROUND, PullerTerms, heads_statement
from app.matching.dispatch.puller import PLAIN_PULLER, PULLER_FACTS, Puller
from app.matching.dispatch.record import (
    Dispatch,
    dispatched_event_insert,
    dispatched_event_values,
    record_dispatches,
)
from app.matching.ordering.policy import DEFAULT, Ordering, active, order_terms
from app.matching.slots import book_room_statement
from app.matching.wakeups import ROOM, TAKEN, job_taken


def _claim_and_start_pg(
    claim: Update, heads: Any = None, worker_id: Any = None, also: Any = None
) -> Select[Any]:
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
    booked = book_room_statement(select(claimed.c.slots).scalar_subquery(), worker_id).cte("booked")
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
        token = job_token_column(TAKEN, claimed.c.category_id, claimed.c.id)
        if also is not None:
            token = also + literal(" ", String) + token
        announced = select(notify.notify_column(token)).select_from(both).cte("ann")
        columns += [found.c.heads, *announced.c]
        frame = (
            found.outerjoin(claimed, true()).outerjoin(booked, true()).outerjoin(announced, true())
        )
    return (
        select(*columns).select_from(frame).add_cte(allocate.cte("allocate"), record.cte("record"))
    )


_TAKE_IN_ONE = _claim_and_start_pg(CLAIM[True])
_TAKE_IN_ONE_JOB = select(Job, _TAKE_IN_ONE.selected_columns.booked_queue_instance).from_statement(
    _TAKE_IN_ONE
)


def plain_heads(
    managed: bool, window: int, puller: PullerTerms, ordering: Ordering = DEFAULT
) -> tuple[Any, Any]:
    """The heads a one-statement take looks at (a CTE, ``window`` written into the
    text), and whether any of them needs more than SQL: a plug-in's verdict, Grid
    Engine rules or an allocation, which leaves the pull to the general way."""
    candidates = heads_statement(
        True, managed, False, literal_column(str(window)), puller, ordering
    ).cte("heads")
    needs_more = (
        select(candidates.c.id)
        .where(or_(~candidates.c.plain, candidates.c.task_id.is_not(None)))
        .exists()
    )
    return candidates, needs_more


def _take_best(
    managed: bool,
    puller: PullerTerms = BOUND,
    window: int = HEADS_PER_ROUND,
    ordering: Ordering = DEFAULT,
    also_announce: Any = None,
) -> Any:
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
    candidates, needs_more = plain_heads(managed, window, puller, ordering)
    first_free = (
        select(JOBS.c.id)
        .join(candidates, candidates.c.id == JOBS.c.id)
        .where(still_waiting(), ~needs_more)
        .order_by(
            *order_terms(
                ordering.rules,
                JOBS.c.priority,
                JOBS.c.submitted_at,
                JOBS.c.id,
                candidates.c.share_key if ordering.fair_share else None,
                candidates.c.group_key if ordering.fair_share else None,
            )
        )
        .limit(literal_column("1"))
        .with_for_update(of=JOBS, skip_locked=True)
        .scalar_subquery()
    )
    claim = (
        update(JOBS)
        .where(JOBS.c.id == first_free, still_waiting())
        .values(**{**CLAIM_VALUES, "worker_id": puller.id})
        .returning(*JOBS.c)
    )
    return _claim_and_start_pg(
        claim,
        select(func.count()).select_from(candidates).scalar_subquery(),
        puller.id,
        also_announce,
    )


#: The Core statement of :func:`_take_best`, by whether the worker has an inventory: the
#: claimed job's columns, then ``booked_queue_instance``, ``heads`` and the announcement
#: (app/matching/dispatch/express.py runs it without the ORM).
TAKE_BEST_CORE = {managed: _take_best(managed) for managed in (False, True)}
#: The heads a pull of a batch looks at (app/matching/dispatch/batch.py). A batch holds
#: the jobs it claimed locked until it commits, so concurrent batches skip past each
#: other's jobs: with the single pull's 8 heads, eight workers taking ten jobs each found
#: every head locked and went the general way (bench/peers.py: 95 jobs/s instead of 226).
BATCH_HEADS = 128
#: :data:`TAKE_BEST_CORE` looking at :data:`BATCH_HEADS` heads.
TAKE_BEST_CORE_WIDE = {
    managed: _take_best(managed, window=BATCH_HEADS) for managed in (False, True)
}


def _take_best_by_name(window: int = HEADS_PER_ROUND, room: bool = False) -> Select[Any]:
    """:data:`TAKE_BEST_CORE` for a worker without an inventory, given the worker's name
    only: its id, generation and free slots come from :data:`~.puller.PLAIN_PULLER` in
    the statement itself, so that it can be sent with :data:`~.puller.LOCK_PULLER` in
    one round trip (app/matching/dispatch/express.py pipelines them).

    Its snapshot is still taken after the lock is granted, which is what
    :func:`_take_best` needs of the order: PostgreSQL runs the statements of a pipeline
    one after the other, and each takes its snapshot when it starts. A worker the plain
    take may not serve (see PLAIN_PULLER) has no row there: every category then fails
    ``slots <= NULL``, nothing is claimed, and the column ``eligible`` (the worker's id,
    or NULL) says so; the four after it are the worker's
    :data:`~.puller.PULLER_FACTS`, for the express pull to decide by (it locks with
    :data:`~.puller.LOCK_PULLER_ALONE`, which does not read them)."""
    terms = by_name_terms()
    take: Select[Any] = _take_best(
        False,
        terms,
        window,
        # The worker's room, in the taken job's notification: room_changed's token.
        also_announce=literal(ROOM, String) + sql_cast(terms.id, String) if room else None,
    )
    # What the express pull decides by when nothing was taken (express.py).
    return take.add_columns(*by_name_facts())


def by_name_terms() -> PullerTerms:
    """The worker of a take by name, as its statement reads it (:data:`~.puller.PLAIN_PULLER`:
    no row, and so NULL terms, for a worker the plain take may not serve)."""
    me = PLAIN_PULLER
    return PullerTerms(
        id=select(me.c.id).scalar_subquery(),
        generation=select(me.c.generation).scalar_subquery(),
        max_free=select(me.c.max_free).scalar_subquery(),
    )


def by_name_facts() -> list[Any]:
    """The columns a take by name answers after its own: ``eligible`` (the worker's id
    when the plain take may serve it, else NULL), then the worker's four
    :data:`~.puller.PULLER_FACTS` (``max_free``, ``managed``, ``complex_cluster``,
    ``placed``)."""
    facts = PULLER_FACTS
    return [
        select(PLAIN_PULLER.c.id).scalar_subquery().label("eligible"),
        *(
            select(column).scalar_subquery().label(column.name)
            for column in (
                facts.c.max_free,
                facts.c.managed,
                facts.c.complex_cluster,
                facts.c.placed,
            )
        ),
    ]


#: See :func:`_take_best_by_name`: PostgreSQL only, as TAKE_BEST_CORE.
TAKE_BEST_BY_NAME = _take_best_by_name()
TAKE_BEST_BY_NAME_WIDE = _take_best_by_name(BATCH_HEADS)
#: :data:`TAKE_BEST_BY_NAME` whose notification of the job taken also says that the
#: worker's room changed (``r<worker>``), for a pull that carries the worker's reports
#: (app/matching/dispatch/express.py's batch_on_loop): one notification, not two. When
#: it takes no job, it announces nothing.
TAKE_BEST_BY_NAME_WITH_ROOM = _take_best_by_name(room=True)


def _orm_take(take: Any) -> Any:
    return select(
        Job, take.selected_columns.booked_queue_instance, take.selected_columns.heads
    ).from_statement(take)


_TAKE_BEST = {managed: _orm_take(take) for managed, take in TAKE_BEST_CORE.items()}


@lru_cache(maxsize=8)
def _take_best_ordered(managed: bool, ordering: Ordering) -> Any:
    """:data:`_TAKE_BEST` under another ordering policy than today's, built on first use."""
    return _orm_take(_take_best(managed, ordering=ordering))


def take_best_plain(session: Session, puller: Puller, now: datetime) -> Taken:
    """Claim and start the best job of the worker in one statement, when its best heads
    need nothing but SQL (:func:`_take_best`; PostgreSQL only). ``decided`` is False when
    the general way must look at the heads instead."""
    if not (
        dialect.supports_skip_locked(session.connection())
        and dialect.supports_writing_ctes(session.connection())
    ):
        return Taken(decided=False)
    ordering = active()
    statement = (
        _TAKE_BEST[puller.managed]
        if ordering.is_default
        else _take_best_ordered(puller.managed, ordering)
    )
    row = session.execute(
        statement,
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
        session.execute(UNCLAIM, {"p_job_id": job.id})
        session.expire(job)
        return Taken(decided=True)
    notify.sent_by_statement(session, job_taken(job.category_id, job.id))
    return Taken(decided=True, job=job)


@dataclass(frozen=True)
class Taken:
    """What :func:`take_best_plain` did: ``decided`` with the job it started (None: no
    job for this worker now), or not decided (the general way looks again)."""

    decided: bool
    job: Job | None = None


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
            session.execute(UNCLAIM, {"p_job_id": job_id})
            session.expire(job)
            return True, None
        return True, job
    claimed = session.execute(
        CLAIM_JOB[skip_locked],
        {"p_job_id": job_id, "p_worker_id": puller.id, "p_now": now},
        execution_options={"populate_existing": True},
    ).scalar_one_or_none()
    if claimed is None:
        return False, None
    queue_instance_id = book_first_room(session, puller.id, claimed.slots)
    if queue_instance_id is None:
        # Another pull of this worker booked the room this one counted on (its count was
        # read before the worker's lock was granted): the job waits again as it was.
        session.execute(UNCLAIM, {"p_job_id": job_id})
        session.expire(claimed)
        return True, None
    allocate_slots(session, job_id, queue_instance_id, claimed.slots, now)
    record_dispatches(session, [Dispatch(job_id, puller.name, claimed.attempts)], now)
    return True, claimed
