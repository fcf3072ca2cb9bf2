"""Dynamic fit and bookings of Grid Engine jobs, shared by pull and the scheduling run.

The misfit cache (SQL, app/matching/gridengine/sql.py) has ruled out the workers whose static
values reject a category. For the survivors, this module loads the current picture (fixed,
built-in and load values, consumable capacities and bookings, free slots) into the
reference evaluator's objects (app/notations/gridengine/evaluator.py) and lets it decide per
queue instance, with load values and availability as they are now. The evaluator is the
oracle the SQL filter is tested against, so both speak the same semantics.

Bookings (docs/notations/gridengine.md#consumables-and-bookings): a per-slot consumable (YES) books
``request x slots`` on each queue instance, ``request x host slots`` on each host and
``request x total`` globally, wherever the attribute has a capacity; a per-job one (JOB)
books its request once on the master queue, its host and globally; EXCL attributes count
exclusive users in ``used`` and the others in ``used_nonexclusive``. The request is the
hard one or else the attribute's default; zero books nothing. Updates are guarded
(``used + amount <= capacity``) and the CHECKs keep usage within bounds, so concurrent
dispatches cannot overbook; a guard that fails undoes the job's dispatch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from sqlalchemy import and_, exists, func, or_, select
from sqlalchemy.orm import Session

from app.db.models import Allocation, AttributeValue, Category, Job, ParallelEnvironment
from app.matching.gridengine.bookings import (
    ConsumableBooking,
    apply_in_memory,
    bookings_for,
    write_bookings,
)
from app.matching.gridengine.groups import ensure_groups
from app.matching.gridengine.master import (
    choose_master,
    master_first,
    slave_only,
    spread_holding_master_slot,
)
from app.matching.gridengine.parallel import UNLIMITED, Offered, spread_slots
from app.matching.gridengine.queue_lists import (
    category_queue_lists,
    instance_parts,
    not_in_hard_list,
    not_master_queue,
    with_soft_queue_violations,
)
from app.matching.gridengine.queue_states import dropped
from app.matching.gridengine.quotas import (
    JobQuotas,
    QuotaAmount,
    QuotaBook,
    book_quotas,
    load_quota_book,
)
from app.matching.gridengine.state import ClusterState, QueueSlot
from app.matching.gridengine.table import prefetch_table
from app.notations.gridengine.attribute_table import ComplexTable
from app.notations.gridengine.evaluator import QueueFit
from app.notations.gridengine.queue_lists import QueueLists
from app.notations.gridengine.requests import RequestList, parse_request_list


@dataclass(frozen=True)
class Decision:
    """What the engine decided for one job: each considered queue instance's fit (in queue
    order), the chosen assignment (queue instance id -> slots), the master queue."""

    fits: list[tuple[QueueSlot, QueueFit]]
    assignment: dict[int, int] | None
    master: int | None
    #: What the assignment takes of the resource quotas that apply (app/matching/
    #: gridengine/quotas.py), and the quota that refused the job, in qstat -j's words.
    quota_amounts: tuple[QuotaAmount, ...] = ()
    quota_refusal: str | None = None
    #: Instances that may take slave tasks of a parallel job but cannot be its master,
    #: with their refusal as master (a per-job consumable they cannot supply).
    not_master: dict[int, QueueFit] = field(default_factory=dict)

    @property
    def soft_violations(self) -> int:
        chosen = dict(self.assignment or {})
        return sum(fit.soft_violations * chosen.get(slot.id, 0) for slot, fit in self.fits)


def decide(
    state: ClusterState,
    order: Sequence[QueueSlot],
    hard: RequestList,
    soft: RequestList,
    *,
    pe_rule: str | None = None,
    low: int = 1,
    high: int = 1,
    pe_limit: int = UNLIMITED,
    first_only: bool = False,
    quotas: JobQuotas | None = None,
    queues: QueueLists | None = None,
) -> Decision:
    """Evaluate the queue instances (all of them, or for a sequential job without soft
    requests up to the first fit when ``first_only``) and choose an assignment; the
    resource quotas that apply, if any, cap each instance and must hold the whole
    assignment. ``queues``: the job's ``-q``, ``-masterq`` and soft ``-q`` lists
    (app/matching/gridengine/queue_lists.py)."""
    queues = queues or QueueLists()
    fits = _instance_fits(state, order, hard, soft, queues, quotas, pe_rule, first_only)
    if pe_rule is None:
        fitting = _best_first(fits)
        if not fitting:
            return _refused(fits, quotas)
        slot = fitting[0][0]
        return _with_quotas(Decision(fits, {slot.id: 1}, slot.id), quotas)
    return _decide_parallel(state, fits, hard, soft, queues, quotas, pe_rule, low, high, pe_limit)


def _instance_fits(
    state: ClusterState,
    order: Sequence[QueueSlot],
    hard: RequestList,
    soft: RequestList,
    queues: QueueLists,
    quotas: JobQuotas | None,
    pe_rule: str | None,
    first_only: bool,
) -> list[tuple[QueueSlot, QueueFit]]:
    """Each instance's verdict in queue order, cheap refusals first (a suspended or
    disabled instance or one in load alarm, the
    job's queue lists, and with ``first_only`` a full instance or an exhausted quota);
    with ``first_only`` a sequential job without soft requests stops at the first fit."""
    fits: list[tuple[QueueSlot, QueueFit]] = []
    for slot in order:
        unavailable = dropped(state, slot)
        if unavailable is not None:
            # Suspended, in load alarm or disabled: dropped before any job is matched, as
            # 6.2u5's scheduler drops it (app/matching/gridengine/queue_states.py).
            fits.append((slot, unavailable))
            continue
        queue, host = instance_parts(slot.name)
        if not queues.allows(queue, host):
            # Checked before any value, as sge_queue_match_static() does.
            fits.append((slot, not_in_hard_list(slot.name)))
            continue
        if first_only and state.full(slot):
            # The same verdict without evaluating three levels: late in a run most
            # instances are full, and a category scans them all before it is rejected.
            fits.append((slot, slot.full_fit()))
            continue
        if first_only and quotas is not None:
            # A quota that leaves nothing here fails the instance whatever its values say;
            # only traces (scenarios, explanations) need the cluster's own reason first.
            blocked = quotas.blocked(slot)
            if blocked is not None:
                fits.append((slot, blocked))
                continue
        fit = with_soft_queue_violations(state.evaluate(slot, hard, soft), queues.soft, queue, host)
        if quotas is not None and fit.fits:
            fit = quotas.limit_fit(slot, fit)
        fits.append((slot, fit))
        if first_only and fit.fits and pe_rule is None and not soft.requests and not queues.soft:
            break
    return fits


def _decide_parallel(
    state: ClusterState,
    fits: list[tuple[QueueSlot, QueueFit]],
    hard: RequestList,
    soft: RequestList,
    queues: QueueLists,
    quotas: JobQuotas | None,
    pe_rule: str,
    low: int,
    high: int,
    pe_limit: int,
) -> Decision:
    """A parallel job's assignment over the fitting instances (best first): the slots
    each may take under its queue, host and global caps, placed by the PE's rule."""
    # First: an instance that may take slave tasks only gets its slave verdict in ``fits``.
    not_master = _not_master(state, fits, hard, soft, queues)
    if quotas is not None:
        _quota_not_master(fits, quotas, not_master)
    master_only = frozenset(
        slot.id for slot, fit in fits if fit.fits and queues.master_only(*instance_parts(slot.name))
    )
    fitting = _best_first(fits)
    global_cap = next(
        (fit.global_slots for _slot, fit in fitting if fit.global_slots is not None), None
    )
    offers = [
        Offered(
            slot.id,
            slot.host,
            # An instance only -masterq names offers one slot (the master task's, unless
            # a later instance of its host becomes the master).
            1 if slot.id in master_only else _slot_cap(fit.queue_slots),
            _slot_cap(fit.host_slots),
        )
        for slot, fit in fitting
    ]
    limit = min(pe_limit, global_cap if global_cap is not None else UNLIMITED)
    offers = [o for o in offers if o.slots > 0]
    placed = _place(pe_rule, offers, low, high, limit, not_master, master_only)
    if placed is None:
        return _refused(fits, quotas, not_master)
    assignment, master = placed
    return _with_quotas(Decision(fits, assignment, master, not_master=not_master), quotas)


def _best_first(fits: list[tuple[QueueSlot, QueueFit]]) -> list[tuple[QueueSlot, QueueFit]]:
    """The fitting instances, best first."""
    fitting = [(slot, fit) for slot, fit in fits if fit.fits]
    # Soft violations re-sort the fitting instances; sorted() is stable, so the queue
    # order breaks ties (docs/notations/gridengine.md#soft-requests).
    fitting.sort(key=lambda item: item[1].soft_violations)
    return fitting


def _place(
    pe_rule: str,
    offers: list[Offered],
    low: int,
    high: int,
    limit: int,
    not_master: Mapping[int, QueueFit],
    master_only: frozenset[int],
) -> tuple[dict[int, int], int] | None:
    """The assignment of a parallel job and its master: the rule's spread, whose master
    Grid Engine's way picks (:func:`choose_master`); when only instances that cannot be
    master got slots, the slots are handed out again: as Grid Engine does, holding one
    slot back for a later instance that can be master (:func:`spread_holding_master_slot`,
    recorded vector RV-PE-18), or under ``$round_robin`` with the first instance that can
    be master in front and the other master-only instances left out. An instance only
    ``-masterq`` names offers one slot; when another instance of its host becomes the
    master, that slot is a slave task's, as Grid Engine 8.1.9 answered (the recorded vector
    RV-QL-12): parallel_tag_queues_suitable4job() caps it at one slot and moves each
    master-capable instance to the front, so the last one is the master."""
    order_ids = [o.queue_instance_id for o in offers]
    capable = frozenset(q for q in order_ids if q not in not_master)
    assignment = spread_slots(pe_rule, offers, low, high, limit)
    if assignment:
        master = choose_master(assignment, offers, capable, pe_rule)
        if master is not None:
            return assignment, master
    held = spread_holding_master_slot(pe_rule, offers, low, high, limit, capable)
    if held is not None:
        master = choose_master(held, offers, capable, pe_rule)
        return None if master is None else (held, master)
    reordered = master_first(order_ids, capable)
    if reordered is None:
        return None
    by_id = {o.queue_instance_id: o for o in offers}
    kept = [q for q in reordered if q == reordered[0] or q not in master_only]
    kept_offers = [by_id[q] for q in kept]
    assignment = spread_slots(pe_rule, kept_offers, low, high, limit)
    master = None if not assignment else choose_master(assignment, kept_offers, capable, pe_rule)
    if not assignment or master is None:
        return None
    return assignment, master


def _not_master(
    state: ClusterState,
    fits: list[tuple[QueueSlot, QueueFit]],
    hard: RequestList,
    soft: RequestList,
    queues: QueueLists,
) -> dict[int, QueueFit]:
    """The fitting instances that may take slave tasks only, with their refusal as
    master: a per-job consumable they cannot supply (app/matching/gridengine/master.py)
    or no ``-masterq`` item naming them."""
    not_master = slave_only(state, fits, hard, soft)
    if queues.master:
        for slot, fit in fits:
            capable = queues.can_be_master(*instance_parts(slot.name))
            if fit.fits and slot.id not in not_master and not capable:
                not_master[slot.id] = not_master_queue(slot.name)
    return not_master


def _quota_not_master(
    fits: list[tuple[QueueSlot, QueueFit]], quotas: JobQuotas, not_master: dict[int, QueueFit]
) -> None:
    """Add to ``not_master`` the fitting instances a per-job consumable's quota keeps from
    being the master (they may still take slave tasks: JobQuotas.master_refusal)."""
    for slot, fit in fits:
        if fit.fits and slot.id not in not_master:
            refusal = quotas.master_refusal(slot)
            if refusal is not None:
                not_master[slot.id] = refusal


def _slot_cap(slots: int | None) -> int:
    return UNLIMITED if slots is None else _cap(slots)


def _refused(
    fits: list[tuple[QueueSlot, QueueFit]],
    quotas: JobQuotas | None,
    not_master: dict[int, QueueFit] | None = None,
) -> Decision:
    return Decision(
        fits,
        None,
        None,
        quota_refusal=None if quotas is None else quotas.refusal,
        not_master=not_master or {},
    )


def _with_quotas(decision: Decision, quotas: JobQuotas | None) -> Decision:
    """The decision with what it takes of the quotas, or refused when, summed over its
    instances, it exceeds a limit (a parallel job: each instance was capped alone)."""
    if quotas is None or decision.assignment is None or decision.master is None:
        return decision
    amounts = quotas.check(decision.assignment, decision.master)
    if amounts is None:
        return _refused(decision.fits, quotas, decision.not_master)
    return replace(decision, quota_amounts=tuple(amounts))


def _cap(value: int) -> int:
    return max(0, min(value, UNLIMITED))


#: Parsed lists by (table identity, hard, soft). Each entry holds its table too: an id is
#: only unique among live objects, so a table freed and a new one allocated at the same
#: address must not find the old table's parse.
_LISTS: dict[tuple[int, str, str], tuple[ComplexTable, tuple[RequestList, RequestList]]] = {}


def category_lists(table: ComplexTable, hard: str, soft: str) -> tuple[RequestList, RequestList]:
    """A category's stored ``-l`` lists (category form, ``NONE`` when empty) parsed again
    against the current table; memoised per table."""
    key = (id(table), hard, soft)
    entry = _LISTS.get(key)
    if entry is not None and entry[0] is table:
        return entry[1]
    if len(_LISTS) > 10_000:
        _LISTS.clear()
    lists = (
        parse_request_list("" if hard == "NONE" else hard, table),
        parse_request_list("" if soft == "NONE" else soft, table, soft=True),
    )
    _LISTS[key] = (table, lists)
    return lists


def pe_slots_in_use(session: Session, pe: str) -> int:
    return int(
        session.scalar(
            select(func.coalesce(func.sum(Allocation.slots), 0))
            .join(Job, Job.id == Allocation.job_id)
            .where(Job.pe == pe, Allocation.released_at.is_(None))
        )
        or 0
    )


def has_complex_values(session: Session, worker_id: int) -> bool:
    """Whether the global host or the worker carries any complex value or capacity (then
    every job is checked by the evaluator: FORCED attributes, defaults, slot capacities).
    Read with the attribute table, which the transaction's next load_table then reuses."""
    flag = exists().where(
        or_(
            AttributeValue.level == "global",
            and_(AttributeValue.worker_id == worker_id, AttributeValue.kind != "builtin"),
        )
    )
    found = prefetch_table(session, flag)
    if found is not None:
        return found
    return bool(session.scalar(select(flag)))


#: A parallel environment's allocation rule and free slots, or None when it is unknown.
PeLookup = Callable[[str], tuple[str, int] | None]


def pe_from_database(session: Session) -> PeLookup:
    """Each lookup asks the database (a pull: one PE job at most)."""

    def lookup(name: str) -> tuple[str, int] | None:
        # The PE's slot limit is shared by every host: lock its row (after worker, job,
        # before queue instances and consumables) so that concurrent dispatches count the
        # slots in use one after another. Without it two pulls on different hosts both saw
        # room and lent 16 of 12 slots under bench/load.py on PostgreSQL; the lock is
        # granted after the other's commit, and READ COMMITTED lets the next statement see
        # it. (A scheduling run holds every worker's lock, so its cached lookup needs none.)
        pe = session.scalar(
            select(ParallelEnvironment).where(ParallelEnvironment.name == name).with_for_update()
        )
        if pe is None:
            return None
        return pe.allocation_rule, max(0, pe.slots - pe_slots_in_use(session, pe.name))

    return lookup


class CategoryRequests(Protocol):
    """What deciding a job reads of its category (a Category row, or the columns a
    Core pull read with the job's claim)."""

    @property
    def hard(self) -> str: ...
    @property
    def soft(self) -> str: ...
    @property
    def pe(self) -> str | None: ...
    @property
    def pe_min(self) -> int: ...
    @property
    def pe_max(self) -> int: ...
    @property
    def queue_list(self) -> str: ...
    @property
    def master_queue_list(self) -> str: ...
    @property
    def soft_queue_list(self) -> str: ...


def plan_job(
    state: ClusterState,
    category: CategoryRequests,
    order: Sequence[QueueSlot],
    pe_lookup: PeLookup,
    *,
    trace: bool = False,
    quota_book: QuotaBook | None = None,
    user: str = "",
    project: str | None = None,
) -> tuple[Decision, list[ConsumableBooking]]:
    """Decide a job of the category on the given queue instances and what it would book
    (nothing when it does not fit). ``trace`` evaluates every instance (for scenarios and
    explanations). With a ``quota_book`` the job's ``user`` and ``project`` are held to
    the enabled resource quota sets. Host group items of the queue lists match the hosts
    of ``state.groups`` (none when the caller did not load them: ``ensure_groups``)."""
    hard, soft = category_lists(state.table, category.hard, category.soft)
    quotas = (
        None
        if quota_book is None
        else quota_book.for_job(state, user, category.pe, hard, project=project)
    )
    groups = state.groups.host_groups if state.groups is not None else {}
    rule, limit = None, UNLIMITED
    if category.pe is not None:
        pe = pe_lookup(category.pe)
        if pe is None:
            return Decision([], None, None), []
        rule, limit = pe
    decision = decide(
        state,
        order,
        hard,
        soft,
        pe_rule=rule,
        low=category.pe_min,
        high=category.pe_max,
        pe_limit=limit,
        first_only=not trace,
        quotas=quotas,
        queues=category_queue_lists(
            category.queue_list, category.master_queue_list, category.soft_queue_list
        ).resolved(groups),
    )
    if decision.assignment is None or decision.master is None:
        return decision, []
    return decision, bookings_for(state, decision.assignment, decision.master, hard)


def dispatch_on(
    session: Session,
    state: ClusterState,
    job: Job,
    category: Category,
    order: Sequence[QueueSlot],
    *,
    trace: bool = False,
) -> tuple[Decision, bool]:
    """Decide and book the job on the given queue instances: the decision and whether it
    was booked. ``trace`` evaluates every instance (for scenarios and explanations)."""
    quota_book = load_quota_book(session)
    ensure_groups(
        session,
        state,
        category.queue_list,
        category.master_queue_list,
        category.soft_queue_list,
        quotas=quota_book,
    )
    decision, bookings = plan_job(
        state,
        category,
        order,
        pe_from_database(session),
        trace=trace,
        quota_book=quota_book,
        user=job.submitter,
        project=job.project,
    )
    if decision.assignment is None or decision.master is None:
        return decision, False
    # The quota books after the slots and consumables, undone with them.
    savepoint = session.begin_nested() if decision.quota_amounts else None
    if not write_bookings(session, job.id, decision.assignment, bookings):
        if savepoint is not None:
            savepoint.rollback()
        return decision, False
    if savepoint is not None:
        if not book_quotas(session, [(job.id, list(decision.quota_amounts))]):
            savepoint.rollback()
            return decision, False
        savepoint.commit()
    apply_in_memory(bookings)
    job.slots = sum(decision.assignment.values())
    job.worker_id = state.slots[decision.master].worker_id
    return decision, True
