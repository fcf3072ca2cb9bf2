"""The scheduler-side allocation path: a waiting job with a jobspec gets vertices on one or
several workers at once (multi-node requests such as ``slot=4/node``, which no single pull
can place), booked in one transaction; and the explanation of a job that cannot be placed.

Workers pass a SQL filter first (active, no cached misfit for the category, free counts
per type covering the per-node needs, an entirely free vertex of each type the request
takes exclusively), in policy order; the allocator then walks
the survivors' trees, loading each node's rows only when it looks inside. When the first
batch of survivors is not enough, the batch grows.

Lock order, as everywhere: the chosen workers (in id order), then the job, then queue
instances and inventory rows. The placement is computed before the locks; booking is
conditional, so a placement that went stale meanwhile fails with a conflict to retry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from sqlalchemy import (
    ColumnElement,
    Connection,
    FromClause,
    Integer,
    Row,
    Select,
    Subquery,
    bindparam,
    case,
    func,
    insert,
    literal_column,
    select,
    update,
)
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from app.db import dialect
from app.db.base import utcnow
from app.db.models import (
    Job,
    JobState,
    QueueInstance,
    Worker,
    WorkerInventory,
    WorkerState,
)
from app.db.tables import ALLOCATIONS, CATEGORIES, INVENTORY_COUNTS, JOBS, WORKERS
from app.matching import announce
from app.matching.allocation import book_pg, coarse_filter, trees
from app.matching.allocation import bookings as vertex_bookings
from app.matching.allocation.allocator import Policy, place_requests
from app.matching.allocation.placement import Outcome
from app.matching.allocation.vertex_requests import (
    VertexRequest,
    min_nodes,
    node_needs,
    whole_types,
)
from app.matching.allocation.vertices import Key, Vertex, dismantle
from app.matching.dispatch import pull as dispatch
from app.matching.dispatch import task_limits
from app.matching.dispatch.record import record_placements
from app.matching.errors import ConflictError, InvalidFieldError, NotFoundError
from app.matching.misfits import fits
from app.matching.slots import book_room_statement

#: Survivors loaded beyond the nodes a job needs at least, in the first batch: the filter
#: below is close to exact, so the first batch nearly always holds the placement.
MARGIN = 4
#: SQLite, policy ``pack``: workers per batch of the listed survivors query, times its
#: limit (the filter after the pack sort is close to exact too).
BATCH = 4


# Statements of the hot path, built once (building one costs more than running it).
_JOBSPEC = select(CATEGORIES.c.id, CATEGORIES.c.jobspec).where(
    CATEGORIES.c.id == bindparam("category_id")
)
_JOB_WITH_JOBSPEC = (
    select(Job, CATEGORIES.c.jobspec)
    .outerjoin(CATEGORIES, CATEGORIES.c.id == Job.category_id)
    .where(Job.id == bindparam("job_id"))
)
#: PostgreSQL: the same, and for the rest of the transaction generic plans for prepared
#: statements (set_config(..., true) is SET LOCAL, in the same round trip). The survivors
#: query and the one-statement start were planned afresh on every execution (custom
#: plans: 6 ms and 1.2 ms of planning at 4,096 nodes, more than running them): their
#: generic plans looked dearer only because they do not know the LIMIT and array sizes.
_JOB_WITH_JOBSPEC_GENERIC = _JOB_WITH_JOBSPEC.add_columns(dialect.generic_plans_from_here())
_LOCKED_WORKERS = (
    select(WORKERS.c.id)
    .where(WORKERS.c.id.in_(bindparam("worker_ids", expanding=True)))
    .order_by(WORKERS.c.id)
    .with_for_update()
    .subquery("locked_workers")
)
#: The workers' rows (in id order), then the job's, in one round trip: the count of the
#: locked workers is an uncorrelated subquery, evaluated before any job row is read and
#: locked (FOR UPDATE OF jobs locks at the top of the plan).
_LOCK_WORKERS_AND_JOB = (
    select(JOBS.c.state)
    .where(
        JOBS.c.id == bindparam("job_id"),
        select(func.count()).select_from(_LOCKED_WORKERS).scalar_subquery() >= 0,
    )
    .with_for_update(of=JOBS)
)
_ALLOCATE = insert(ALLOCATIONS)
#: pull_statements.book_first_room's UPDATE, run on the connection: through the ORM
#: session (book_first_room) the same statement cost 60 us more per allocation.
_BOOK_ROOM = book_room_statement(bindparam("p_slots", type_=Integer))
_START = (
    update(JOBS)
    .where(JOBS.c.id == bindparam("job_id"))
    .values(
        state=bindparam("b_state"),
        worker_id=bindparam("b_worker"),
        started_at=bindparam("b_started"),
    )
)


#: The columns of trees.node_select that the survivors' filter carries out (besides
#: the id, which it selects first).
_CARRIED = tuple(column.label(name) for name, column in trees.NODE_WORKER_COLUMNS if name != "id")

#: What drives the survivors query: nothing (every worker), the entirely free nodes, or
#: the workers with some of the first per-node need.
Driver = Literal["workers", "untouched", "room"]


def _driver(policy: Policy, whole: frozenset[str], needs: dict[Key, int]) -> Driver:
    # Both policies: ``first`` walks the driver's index in rank order, ``pack`` sorts the
    # driver's rows by its keys before the filter (see _pack_candidates).
    if "node" in whole:
        return "untouched"
    return "room" if needs else "workers"


@lru_cache(maxsize=128)
def _survivors(
    policy: Policy,
    whole: frozenset[str],
    driver: Driver,
    json_rows: tuple[str, str],
    bounded: bool = False,
    listed: bool = False,
) -> Select[*tuple[Any, ...]]:
    """The workers that pass the filter for the category ``:category_id``, in policy order,
    at most ``:limit``, as rows of trees.node_select (built once per policy, set of
    whole types and driver).

    The filter picks the ids in a subquery of its own, as a query of ids only, and only
    those few rows are joined to their nodes: with the node's rows joined inside the
    filter, PostgreSQL evaluated the whole-vertex conditions for every worker.

    With policy ``first`` the walk in rank order starts from a partial index that holds
    only workers that may qualify (migration 0012): the entirely free nodes for requests
    that take a node whole, else the workers with some of the need ``:d_type``/``:d_unit``
    free. Walking every worker, the query passed the full low-rank nodes one by one
    (1,400 of them, 4 ms, at 4,096 nodes). The rank copied onto those rows equals the
    worker's, so the order is the same; the other conditions still filter as before.
    With policy ``pack`` the same driver's rows are sorted in pack order first
    (_pack_candidates).

    ``bounded``: the room driver's type is taken whole, so a worker needs at least as many
    untouched vertices as the type's smallest subtree (InventoryCount.span, 0013). The
    driver's row carries the span and the worker's counters are joined already: the test
    costs no lookup, and it spares the subtree scan of whole_room for most workers the
    walk meets (for slot/socket at 4,096 nodes, about 200 workers whose sockets are not
    held but have cores in use, for each one with a socket entirely free).

    ``listed``: only the workers of the list ``:worker_ids`` (find_placement's batches of
    the pack order on SQLite)."""
    category_id = bindparam("category_id", type_=Integer)
    filtered, order, conditions = _walk_order(policy, driver, bounded)
    if listed:
        conditions.append(Worker.id.in_(bindparam("worker_ids", expanding=True)))
    # Rank among the survivors: the first ``:prefetch`` come with the rows below their
    # node (the allocator looks into the first ones nearly always).
    ordinal = func.row_number().over(order_by=order).label("ordinal")
    ids = (
        # The node_select columns of the worker and its inventory come out of the filter,
        # whose joins have them already: joined again outside it, the generic plan (which
        # cannot see the LIMIT) hashed all 4,096 workers to meet a handful (0.4 ms).
        filtered.add_columns(*order, ordinal, *_CARRIED)
        .join(WorkerInventory, WorkerInventory.worker_id == Worker.id)
        .where(
            *conditions,
            Worker.state == WorkerState.ACTIVE,
            fits(category_id, Worker.id, Worker.generation),
            coarse_filter.has_room(category_id, Worker.id),
            # The untouched driver is the whole-node condition already.
            *coarse_filter.whole_room(whole - {"node"} if driver == "untouched" else whole),
        )
        .order_by(*order)
        .limit(bindparam("limit"))
        .subquery("survivors")
    )
    return trees.node_select_of(
        ids,
        # The nodes' summaries in the same round trip (a JSON array per survivor), and
        # the rows below the first nodes (CASE evaluates the subquery only for them).
        trees.free_counts_column(json_rows, ids.c.id),
        case(
            (
                ids.c.ordinal <= bindparam("prefetch"),
                trees.rows_below_column(json_rows, ids.c.id),
            ),
            else_=None,
        ),
    ).order_by(*(ids.c[f"k{i}"] for i in range(len(order))))


def _walk_order(
    policy: Policy, driver: Driver, bounded: bool
) -> tuple[Select[tuple[int]], tuple[ColumnElement[Any], ...], list[ColumnElement[bool]]]:
    """Where :func:`_survivors` walks the workers from and in which order: the id query to
    filter, its sort keys ``k0``.. and the conditions the driver adds (see _survivors)."""
    order: tuple[ColumnElement[Any], ...]
    conditions: list[ColumnElement[bool]] = []
    filtered: Select[tuple[int]] = select(Worker.id.label("id"))
    if policy == "pack" and driver != "workers":
        candidates = _pack_candidates(driver, bounded)
        order = tuple(candidates.c[f"k{i}"] for i in range(4))
        filtered = select(candidates.c.id.label("id")).select_from(candidates)
        filtered = filtered.join(Worker, Worker.id == candidates.c.id)
    elif policy == "pack":
        # Most used first: partly used nodes before untouched ones.
        order = (
            (WorkerInventory.untouched == WorkerInventory.vertices).label("k0"),
            WorkerInventory.untouched.label("k1"),
            Worker.rank.label("k2"),
            Worker.id.label("k3"),
        )
    elif driver == "untouched":
        # The literal condition is the partial index's predicate (both databases use a
        # partial index only when the query states it).
        order = (WorkerInventory.rank.label("k0"), WorkerInventory.worker_id.label("k1"))
        conditions.append(WorkerInventory.untouched == WorkerInventory.vertices)
    elif driver == "room":
        room = INVENTORY_COUNTS.alias("room")
        order = (room.c.rank.label("k0"), room.c.worker_id.label("k1"))
        filtered = filtered.select_from(room).join(Worker, Worker.id == room.c.worker_id)
        conditions += _room_conditions(room, bounded)
    else:
        order = (Worker.rank.label("k0"), Worker.id.label("k1"))
    return filtered, order, conditions


def _room_conditions(room: FromClause, bounded: bool) -> list[ColumnElement[bool]]:
    """The room driver's row (an alias of inventory_counts) has some of the need
    ``:d_type``/``:d_unit`` free (the literal 0 is the partial index's predicate), and
    with ``bounded`` the worker has untouched vertices enough for one of its subtrees."""
    conditions = [
        room.c.type == bindparam("d_type"),
        room.c.unit == bindparam("d_unit"),
        room.c.free > literal_column("0"),
        room.c.free >= bindparam("d_amount"),
    ]
    if bounded:
        conditions.append(room.c.span <= WorkerInventory.untouched)
    return conditions


def _pack_order(driver: Driver, bounded: bool) -> Select[*tuple[Any, ...]]:
    """The workers the driver admits, as rows (id, k0..k3) in ``pack`` order."""
    keys = (
        (WorkerInventory.untouched == WorkerInventory.vertices).label("k0"),
        WorkerInventory.untouched.label("k1"),
        WorkerInventory.rank.label("k2"),
        WorkerInventory.worker_id.label("k3"),
    )
    candidates = select(WorkerInventory.worker_id.label("id"), *keys)
    if driver == "untouched":
        candidates = candidates.where(WorkerInventory.untouched == WorkerInventory.vertices)
    else:
        room = INVENTORY_COUNTS.alias("room")
        candidates = candidates.select_from(room).join(
            WorkerInventory, WorkerInventory.worker_id == room.c.worker_id
        )
        candidates = candidates.where(*_room_conditions(room, bounded))
    return candidates.order_by(*keys)


def _pack_candidates(driver: Driver, bounded: bool) -> Subquery:
    """The workers the driver admits (the entirely free nodes, or the workers with some of
    the need ``:d_type``/``:d_unit`` free), sorted in ``pack`` order (partly used first,
    fewest untouched vertices first, then rank): a subquery of their ids and keys k0..k3.

    No index holds that order (the keys change with every booking), so the driver's rows
    are sorted first, from the cheap tables only, and the filter's dear conditions then
    meet them one by one until the LIMIT. OFFSET 0 keeps the sort inside: PostgreSQL does
    not pull a subquery with an OFFSET up into its parent, where it evaluated every
    condition for every worker before sorting (20-31 ms a job at 4,096 nodes)."""
    return _pack_order(driver, bounded).offset(0).subquery("candidates")


def survivors_query(
    policy: Policy,
    requests: Sequence[VertexRequest],
    category_id: int,
    json_rows: tuple[str, str],
    driver: Driver | None = None,
    listed: bool = False,
) -> tuple[Select[*tuple[Any, ...]], dict[str, Any]]:
    """The survivors query of a category's requests and its parameters but ``:limit``
    (``driver``: the one the policy and requests choose, unless given; tests compare;
    ``json_rows``: dialect.json_rows_function). Its rows are node_select's and the
    worker's free counts (trees.free_counts_column). ``listed``: the walk over every
    worker restricted to the list ``:worker_ids``, whatever the driver."""
    whole, driver, parameters, bounded = _driven(policy, requests, category_id, driver)
    if listed:
        return _survivors(policy, whole, "workers", json_rows, listed=True), parameters
    return _survivors(policy, whole, driver, json_rows, bounded), parameters


def pack_order_query(
    requests: Sequence[VertexRequest], category_id: int
) -> tuple[Select[*tuple[Any, ...]], dict[str, Any]] | None:
    """The ids of the workers the ``pack`` driver admits, in pack order, and the query's
    parameters; None when no driver narrows the walk (every worker is a candidate)."""
    _, driver, parameters, bounded = _driven("pack", requests, category_id, None)
    if driver == "workers":
        return None
    return _pack_order(driver, bounded), parameters


def _driven(
    policy: Policy, requests: Sequence[VertexRequest], category_id: int, driver: Driver | None
) -> tuple[frozenset[str], Driver, dict[str, Any], bool]:
    """The types the requests take whole, the driver (the given one or the policy's), the
    parameters of the queries it drives, and whether its room test is bounded by the
    type's span."""
    whole = whole_types(requests)
    needs = node_needs(requests)
    if driver is None:
        driver = _driver(policy, whole, needs)
    parameters: dict[str, Any] = {"category_id": category_id}
    bounded = False
    if driver == "room":
        (type_, unit), amount = next(iter(needs.items()))
        parameters.update(d_type=type_, d_unit=unit or "", d_amount=amount)
        bounded = type_ in whole
    return whole, driver, parameters, bounded


def listed_survivors(
    connection: Connection,
    query: Select[*tuple[Any, ...]],
    parameters: dict[str, Any],
    ranked: Sequence[int],
    limit: int,
    batch: int = BATCH,
) -> list[Row[*tuple[Any, ...]]]:
    """The first ``limit`` survivors of ``query`` (survivors_query(..., listed=True)) over
    the workers ``ranked`` in policy order, asked for in batches of ``batch`` x ``limit``:
    each batch's survivors come in the same order, so their concatenation is in order.
    Nothing is prefetched: this is SQLite's path, where the loader query is cheaper."""
    rows: list[Row[*tuple[Any, ...]]] = []
    size = batch * limit
    for start in range(0, len(ranked), size):
        arguments = {
            **parameters,
            "worker_ids": list(ranked[start : start + size]),
            "limit": limit - len(rows),
            "prefetch": 0,
        }
        rows += connection.execute(query, arguments).all()
        if len(rows) >= limit:
            break
    return rows


@dataclass(frozen=True)
class Attempt:
    outcome: Outcome
    survivors: int
    #: The tree the outcome was found on (allocation.dismantle it when done).
    tree: Vertex = field(compare=False, repr=False)


def considered_workers(tree: Vertex) -> list[str]:
    """The workers whose nodes the tree holds (the ones an attempt considered), by name;
    lazy nodes are not loaded."""
    names: set[str] = set()
    level = [tree]
    while level:
        below = []
        for vertex in level:
            if vertex.worker is not None:
                names.add(vertex.worker)
            else:
                below += vertex.loaded_children
        level = below
    return sorted(names)


def find_placement(
    session: Session, job: Job, policy: Policy, jobspec: str | None = None
) -> Attempt:
    """The allocation the job would get now, over the workers that pass the SQL filter
    (``jobspec``: the category's, when the caller read it with the job)."""
    session.flush()
    connection = session.connection()
    if jobspec is None:
        category = connection.execute(_JOBSPEC, {"category_id": job.category_id}).one_or_none()
        jobspec = None if category is None else category.jobspec
    if jobspec is None:
        raise InvalidFieldError("jobspec", f"job {job.id} has no shape or jobspec to allocate")
    requests = dispatch.category_requests(jobspec)
    nodes = min_nodes(requests)
    json_rows = dialect.json_rows_function(connection)
    # SQLite would evaluate the filter for every pack candidate before its sort: the
    # candidates are ranked first, and the filter meets them in batches (12.4 ms a match
    # at 4,096 nodes in one query).
    ranking = None
    if policy == "pack" and not dialect.keeps_subquery_order(connection):
        ranking = pack_order_query(requests, job.category_id)
    ranked: list[int] = []
    if ranking is not None:
        ranked = list(connection.execute(*ranking).scalars())
    survivors, parameters = survivors_query(
        policy, requests, job.category_id, json_rows, listed=ranking is not None
    )
    limit = nodes + MARGIN
    # PostgreSQL: the rows below the first nodes come with the survivors (a round trip
    # less). SQLite has no round trips; its loader query costs less than the JSON.
    prefetch = max(1, nodes) if dialect.supports_writing_ctes(connection) else 0
    while True:
        rows: Sequence[Row[*tuple[Any, ...]]]
        if ranking is not None:
            rows = listed_survivors(connection, survivors, parameters, ranked, limit)
        else:
            rows = connection.execute(
                survivors, {**parameters, "limit": limit, "prefetch": prefetch}
            ).all()
        counts = {row[0]: trees.parse_free_counts(row[-2]) for row in rows}
        below = {row[0]: trees.parse_rows_below(row[-1]) for row in rows}
        prefetched = {w: found for w, found in below.items() if found is not None}
        tree = trees.tree_of(session, [row[:-2] for row in rows], nodes, counts, prefetched)
        outcome = place_requests(tree, requests, policy)
        if outcome.placement is not None or len(rows) < limit:
            return Attempt(outcome, len(rows), tree)
        dismantle(tree)
        limit *= 4


def schedule_job(session: Session, job_id: int, policy: Policy) -> Job:
    """Allocate a waiting job's vertices on as many workers as it needs and start it; the
    first node is the job's worker (it reports the end). ConflictError when it cannot be
    placed now (GET /v1/jobs/{id}/explain says why)."""
    generic = dialect.supports_skip_locked(session.connection())
    row = session.execute(
        _JOB_WITH_JOBSPEC_GENERIC if generic else _JOB_WITH_JOBSPEC, {"job_id": job_id}
    ).one_or_none()
    if row is None:
        raise NotFoundError(f"no job with id {job_id}")
    job: Job = row[0]
    jobspec: str | None = row[1]
    if job.state is not JobState.WAITING:
        raise ConflictError(f"job {job_id} is {job.state.value}, not waiting")
    if job.array_id is not None and task_limits.array_is_full(session, job):
        # Before the placement's work: a full array's answer needs no placement (qsub -tc).
        raise _array_full(job)
    attempt = find_placement(session, job, policy, jobspec)
    try:
        placement = attempt.outcome.placement
        if placement is None:
            raise ConflictError(f"job {job_id} cannot be placed now; see its explanation")
        # Nodes of a tree built from rows know their worker's id.
        worker_ids = [node.place[0] for node in placement.nodes() if node.place is not None]
        plan = vertex_bookings.plan_bookings(session, job, placement)
    finally:
        # The plan holds what booking needs; the tree is garbage from here on.
        dismantle(attempt.tree)
    leader = worker_ids[0]
    connection = session.connection()
    # A task of an array that limits its running tasks is counted under the array's lock,
    # taken after the workers and the job (a pull takes the job with SKIP LOCKED, so it
    # never waits for it while it holds the array): statement by statement.
    array_id = job.array_id
    one_statement = (
        array_id is None and dialect.supports_writing_ctes(connection) and book_pg.disjoint(plan)
    )
    if dialect.supports_skip_locked(connection) and not one_statement:
        # Row locks (PostgreSQL), in the usual order, in one statement; the one-statement
        # start takes the same locks first thing. SQLite serialises writers at BEGIN
        # (IMMEDIATE): nothing changed since the job was read, and there are no row locks.
        state = connection.execute(
            _LOCK_WORKERS_AND_JOB, {"worker_ids": sorted(set(worker_ids)), "job_id": job_id}
        ).scalar_one()
        if state != JobState.WAITING:
            raise _not_waiting(session, job)
    if array_id is not None and not task_limits.array_has_room(session, array_id):
        raise _array_full(job)
    return start_placed(session, job, plan, leader, one_statement=one_statement, lock=worker_ids)


def _array_full(job: Job) -> ConflictError:
    return ConflictError(
        f"job {job.id} is a task of array {job.array_id}, which runs as many tasks as its "
        "task_concurrency (qsub -tc) allows; see its explanation"
    )


def placement_now(session: Session, job: Job, policy: Policy) -> list[int] | None:
    """The workers (ids, the leader first) that ``POST /v1/jobs/{id}/allocate`` would
    start the waiting job on now, or None when it would answer 409: the decision of
    :func:`schedule_job` (the placement, then a free slot on the leader) without its
    bookings, for the explanation to say what an allocation does (issue 35)."""
    if job.array_id is not None and task_limits.array_is_full(session, job):
        return None
    attempt = find_placement(session, job, policy)
    try:
        placement = attempt.outcome.placement
        if placement is None:
            return None
        worker_ids = [node.place[0] for node in placement.nodes() if node.place is not None]
    finally:
        dismantle(attempt.tree)
    room = session.scalar(
        select(QueueInstance.id)
        .where(
            QueueInstance.worker_id == worker_ids[0],
            QueueInstance.slots - QueueInstance.used_slots >= job.slots,
        )
        .limit(1)
    )
    return worker_ids if room is not None else None


def _not_waiting(session: Session, job: Job) -> ConflictError:
    job_id = job.id
    session.refresh(job)
    return ConflictError(f"job {job_id} is {job.state.value}, not waiting")


def start_placed(
    session: Session,
    job: Job,
    plan: vertex_bookings.BookingPlan,
    leader: int,
    *,
    one_statement: bool,
    lock: Sequence[int] = (),
) -> Job:
    """Take a room on the leader, book the plan and start the job: in one statement that
    first locks the workers (``lock``, the plan's and the leader) and the job (PostgreSQL),
    or statement by statement, the caller having locked them."""
    job_id = job.id
    connection = session.connection()
    now = utcnow()
    if one_statement:
        started = book_pg.book_and_start(session, job, plan, leader, list(lock), now)
        if started.at is None:
            raise _not_waiting(session, job)
        if not started.room:
            raise _no_room(session, leader, job_id)
        if not started.booked:
            raise vertex_bookings.conflict(job)
        # The statement's own time, taken after its locks (booking_statements).
        now = started.at
    else:
        queue_instance_id = connection.execute(
            _BOOK_ROOM, {"p_worker_id": leader, "p_slots": job.slots}
        ).scalar()
        if queue_instance_id is None:
            raise _no_room(session, leader, job_id)
        connection.execute(
            _ALLOCATE,
            {
                "job_id": job.id,
                "queue_instance_id": queue_instance_id,
                "slots": job.slots,
                "allocated_at": now,
                "released_at": None,
            },
        )
        vertex_bookings.book_plan(session, job, plan)
        connection.execute(
            _START,
            {"job_id": job.id, "b_state": JobState.RUNNING, "b_worker": leader, "b_started": now},
        )
    # The row is written; the object says so without another UPDATE.
    set_committed_value(job, "state", JobState.RUNNING)
    set_committed_value(job, "worker_id", leader)
    set_committed_value(job, "started_at", now)
    # A placement is a dispatch: an attempt, its history event, and a job the leader
    # receives on its next pull (issue 22).
    attempts = record_placements(session, [job_id], now)
    set_committed_value(job, "attempts", attempts.get(job_id, job.attempts))
    set_committed_value(job, "awaiting_pickup", True)
    announce.rooms_changed(session, {leader, *lock})
    return job


def _no_room(session: Session, leader: int, job_id: int) -> ConflictError:
    name = session.scalar(select(Worker.name).where(Worker.id == leader))
    return ConflictError(f"worker {name!r} has no free slot for job {job_id}")
