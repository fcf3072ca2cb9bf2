"""Master and slave queues of a parallel job with per-job (JOB) consumables
(docs/notations/gridengine.md#per-job-consumables-and-the-master-queue).

complex(5) of Grid Engine 6.2u2 and later: a consumable of ``consumable JOB`` is requested
per job, not per slot, and is checked and booked once, on the *master* queue (the one that
runs the job script), its host and the global host. The slave queues of a parallel job need
not have it: a queue instance that cannot supply the amount may still take slave tasks but
cannot be the master. For a sequential job JOB and YES behave the same (its one queue is
the master), so this module only changes how parallel jobs are decided.

An instance is judged twice when it is refused for a JOB consumable: as master (every
check, what :meth:`ClusterState.evaluate` does) and as slave (the same checks without the
JOB consumables the job requests, neither their requests nor their capacities; an
unrequested one's non-zero default is checked as for the master, as Grid Engine's
default-request loop does, so such an instance is refused outright). Every
check of the slave judgement is also a check of the master one, so an instance refused as
master for any other attribute is refused as slave too and is not judged again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from app.matching.gridengine.parallel import Offered
from app.matching.gridengine.state import ClusterState, QueueSlot
from app.notations.gridengine.attribute_table import ComplexTable
from app.notations.gridengine.definitions import Consumable, Relop
from app.notations.gridengine.evaluator import Level, QueueFit, evaluate_queue_instance
from app.notations.gridengine.requests import RequestList

_JOB_NAMES: dict[int, tuple[ComplexTable, frozenset[str]]] = {}
_SLAVE_LISTS: dict[int, tuple[RequestList, RequestList]] = {}


def job_consumables(table: ComplexTable) -> frozenset[str]:
    """The names of the table's per-job consumables (EXCL ones count users, not amounts,
    and stay checked everywhere)."""
    known = _JOB_NAMES.get(id(table))
    if known is None or known[0] is not table:
        if len(_JOB_NAMES) > 64:
            _JOB_NAMES.clear()
        names = frozenset(
            d.name for d in table if d.consumable is Consumable.JOB and d.relop is not Relop.EXCL
        )
        known = _JOB_NAMES[id(table)] = (table, names)
    return known[1]


def slave_requests(table: ComplexTable, hard: RequestList) -> RequestList:
    """The hard list a slave queue is checked with: without the JOB consumables' requests
    (memoised per list, so the state's per-list caches keep working)."""
    kept = _SLAVE_LISTS.get(id(hard))
    if kept is not None and kept[0] is hard:
        return kept[1]
    names = job_consumables(table)
    slave = RequestList(tuple(r for r in hard.requests if r.name not in names), soft=hard.soft)
    if len(_SLAVE_LISTS) > 4096:
        _SLAVE_LISTS.clear()
    _SLAVE_LISTS[id(hard)] = (hard, slave)
    return slave


def refused_for_job_consumable(table: ComplexTable, fit: QueueFit) -> bool:
    """The instance was refused (as master) because its host or itself cannot supply a
    per-job consumable. A refusal by the global host stands: the master runs under it
    too, so no instance could be master."""
    return (
        not fit.fits and fit.level is not Level.GLOBAL and fit.attribute in job_consumables(table)
    )


def slave_fit(
    state: ClusterState, slot: QueueSlot, hard: RequestList, soft: RequestList
) -> QueueFit:
    """Whether the instance can take slave tasks of the job: every check but those of
    the JOB consumables the job requests, at its three levels. An unrequested JOB
    consumable's default is still checked: Grid Engine 6.2u5 and 8.1.9
    parallel_rc_slots_by_time() (source/libs/sched/sge_select_queue.c) has no
    CONSUMABLE_JOB exception in its default-request loop, so an instance (or host) that
    cannot supply a non-zero default is refused outright, as slave too."""
    table = state.table
    names = job_consumables(table) & {request.name for request in hard.requests}
    slave = slave_requests(table, hard)
    objects = (state.global_host, state.hosts[slot.worker_id], state.queues[slot.id])
    views = tuple(
        {
            name: offer
            for name, offer in obj.offers_for(table, slave, soft).items()
            if name not in names
        }
        for obj in objects
    )
    levels = tuple(obj.level_object() for obj in objects)
    return evaluate_queue_instance(
        table, levels[0], levels[1], levels[2], slave, soft, offers=(views[0], views[1], views[2])
    )


def slave_only(
    state: ClusterState,
    fits: list[tuple[QueueSlot, QueueFit]],
    hard: RequestList,
    soft: RequestList,
) -> dict[int, QueueFit]:
    """Judge again, as slaves, the instances refused for a JOB consumable: each that fits
    as slave gets its slave verdict in ``fits`` (in place) and is returned with its
    refusal as master."""
    not_master: dict[int, QueueFit] = {}
    if not job_consumables(state.table):
        return not_master
    for index, (slot, fit) in enumerate(fits):
        if refused_for_job_consumable(state.table, fit):
            slave = slave_fit(state, slot, hard, soft)
            if slave.fits:
                fits[index] = (slot, slave)
                not_master[slot.id] = fit
    return not_master


def choose_master(
    assignment: Mapping[int, int],
    offers: Sequence[Offered],
    capable: frozenset[int],
    rule: str,
) -> int | None:
    """The master of an assignment, as Grid Engine picks it (6.2u5 and 8.1.9
    source/libs/sched/sge_select_queue.c, parallel_tag_queues_suitable4job()): hosts are
    visited in order of their first instance; on each, every instance that gets slots is
    added to the granted list in queue order, and one that can be master is moved to the
    front while no earlier host visit gave the job a master. So the master is on the first
    host visit that gives slots to an instance that can be master, and it is the *last*
    such instance of that visit, not the first. Under ``$round_robin`` a host is visited
    once per round and adds at most one new instance each time; a visit that only adds
    slots to an instance already granted moves nothing."""
    visits: dict[tuple[int, int], list[int]] = {}
    for key, qi_id in _grants(assignment, offers, rule):
        visits.setdefault(key, []).append(qi_id)
    for key in sorted(visits):
        masters = [q for q in visits[key] if q in capable]
        if masters:
            return masters[-1]
    return None


def _grants(
    assignment: Mapping[int, int], offers: Sequence[Offered], rule: str
) -> list[tuple[tuple[int, int], int]]:
    """Each assigned instance with the visit that first grants it slots: (round, host's
    position), in queue order. Only ``$round_robin`` has rounds after the first: an
    instance whose host gave ``k`` slots to the instances before it is first granted in
    round ``k`` (within a host the instances are filled in order)."""
    hosts: dict[str, int] = {}
    given: dict[str, int] = {}
    grants = []
    for offer in offers:
        host = hosts.setdefault(offer.host, len(hosts))
        slots = assignment.get(offer.queue_instance_id, 0)
        if slots <= 0:
            continue
        before = given.get(offer.host, 0)
        given[offer.host] = before + slots
        round_ = before if rule == "$round_robin" else 0
        grants.append(((round_, host), offer.queue_instance_id))
    return grants


def master_first(order: Sequence[int], capable: frozenset[int]) -> list[int] | None:
    """The order with the first master-capable instance moved to the front (None when no
    instance can be master), for a second spread when the first gave slots only to
    instances that cannot be master."""
    first = next((q for q in order if q in capable), None)
    if first is None:
        return None
    return [first, *(q for q in order if q != first)]


def spread_holding_master_slot(
    rule: str, offers: Sequence[Offered], low: int, high: int, limit: int, capable: frozenset[int]
) -> dict[int, int] | None:
    """The spread when the rule's own gave slots only to instances that cannot be master,
    as Grid Engine 6.2u5 and 8.1.9 make it (parallel_tag_queues_suitable4job(),
    source/libs/sched/sge_select_queue.c): hosts and their instances in order; until an
    instance that can be master has slots, an instance that cannot gives one slot less
    when its slots would complete the job ("we need at least one slot on the masterq"),
    so a later master-capable instance takes it. The largest count in ``low..high`` within
    ``limit`` that places, or None. ``$round_robin`` is not spread this way (None)."""
    if rule == "$round_robin":
        return None
    hosts: dict[str, list[Offered]] = {}
    for offer in offers:
        hosts.setdefault(offer.host, []).append(offer)
    total = sum(min(items[0].host_slots, sum(o.slots for o in items)) for items in hosts.values())
    for n in range(min(high, total, limit), low - 1, -1):
        placed = _holding_exactly(rule, list(hosts.values()), n, capable)
        if placed is not None:
            return placed
    return None


def _holding_exactly(
    rule: str, hosts: list[list[Offered]], n: int, capable: frozenset[int]
) -> dict[int, int] | None:
    result: dict[int, int] = {}
    given = 0
    have_master = False
    for items in hosts:
        capacity = min(items[0].host_slots, sum(o.slots for o in items))
        if rule == "$pe_slots":
            wanted = n
        elif rule == "$fill_up":
            wanted = min(capacity, n - given)
        else:
            wanted = int(rule)
        if capacity < wanted or wanted <= 0:
            continue
        host_result: dict[int, int] = {}
        got = 0
        had_master = have_master
        for offer in items:
            slots = min(offer.slots, wanted - got)
            if not have_master:
                is_capable = offer.queue_instance_id in capable
                if not is_capable and given + got + slots == n:
                    slots -= 1
                if is_capable and slots > 0:
                    have_master = True
            if slots > 0:
                host_result[offer.queue_instance_id] = slots
                got += slots
            if got == wanted:
                break
        if rule != "$fill_up" and got < wanted:
            have_master = had_master
            continue  # the host cannot give its share: Grid Engine reverts it
        result.update(host_result)
        given += got
        if given == n:
            return result if have_master else None
        if rule == "$pe_slots":
            return None
    return None
