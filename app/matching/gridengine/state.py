"""The cluster as Grid Engine's reference evaluator sees it, in memory: every object's
values, capacities and bookings (ObjectState), the queue instances with their free slots
(QueueSlot), and the whole picture a decision is made on (ClusterState), built from the
rows app/matching/gridengine/loaders.py reads."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import Worker
from app.matching.gridengine.groups import ClusterGroups
from app.matching.gridengine.loaders import (
    _queue_rows,
    _table_of_parts,
    _usage_rows,
    _value_rows,
    _worker_rows,
    table_parameters,
)
from app.matching.gridengine.queue_sort import QueueSort, load_queue_sort
from app.matching.gridengine.table import load_table
from app.notations.gridengine.attribute_table import ComplexTable
from app.notations.gridengine.definitions import Requestable
from app.notations.gridengine.evaluator import (
    FitCode,
    Level,
    LevelFit,
    LevelObject,
    Offer,
    Offers,
    QueueFit,
    count_soft_violations,
    evaluate_level,
    evaluate_queue_instance,
    level_offers,
)
from app.notations.gridengine.requests import RequestList


@dataclass
class QueueSlot:
    """A queue instance as the scheduler sees it."""

    id: int
    name: str  # cq@host
    worker_id: int
    host: str
    seq_no: int
    #: The instance's slot capacity (its ``slots``; used slots are in the queue state).
    capacity: int = 0
    #: Its ``load_thresholds`` as stored (``NONE``: none): its own, else its queue's.
    thresholds: str = "NONE"
    #: Its ``qmod`` states as qstat's letters: ``d`` disabled, ``s`` suspended.
    states: str = ""
    #: The verdict on this instance when it is full (immutable, made once: a run's
    #: rejected categories scan every full instance).
    _full: QueueFit | None = field(default=None, repr=False, compare=False)

    def full_fit(self) -> QueueFit:
        if self._full is None:
            self._full = QueueFit(self.name, False, Level.QUEUE, FitCode.NO_FREE_SLOTS, "slots")
        return self._full


@dataclass
class _View:
    """An object's offers for one pair of request lists (the lists kept alive, as the key
    is their identity), and its evaluate_level verdict for the hard list once known."""

    hard: RequestList
    soft: RequestList
    offers: Offers
    fit: LevelFit | None = None


@dataclass(frozen=True)
class _TableFacts:
    """What every object's preparation asks of the attribute table, per table: the
    attribute name of each name or shortcut, and which attributes are FORCED or
    consumable (a pull prepares three objects of some sixty values each)."""

    table: ComplexTable
    names: Mapping[str, str]
    forced: frozenset[str]
    forced_or_consumable: frozenset[str]


_FACTS: dict[int, _TableFacts] = {}


def _facts(table: ComplexTable) -> _TableFacts:
    facts = _FACTS.get(id(table))
    if facts is None or facts.table is not table:
        if len(_FACTS) > 64:
            _FACTS.clear()
        names = {word: table.resolve(word).name for d in table for word in (d.shortcut, d.name)}
        forced = frozenset(d.name for d in table if d.requestable is Requestable.FORCED)
        facts = _TableFacts(
            table, names, forced, forced | {d.name for d in table if d.is_consumable}
        )
        _FACTS[id(table)] = facts
    return facts


@dataclass
class ObjectState:
    """Values of one object, with the mutable booking picture."""

    level: Level
    object_key: int
    name: str
    complex_values: dict[str, str] = field(default_factory=dict)
    load_values: dict[str, str] = field(default_factory=dict)
    builtin: dict[str, str] = field(default_factory=dict)
    used: dict[str, float] = field(default_factory=dict)
    used_nonexclusive: dict[str, float] = field(default_factory=dict)
    #: attribute name -> consumable_usage id
    usage_ids: dict[str, int] = field(default_factory=dict)
    #: The evaluator's offers of this object, per attribute, computed when first needed
    #: (a pull or a run looks at a few of the forty-odd attributes of a queue
    #: instance) and again when a booking changes the attribute's usage.
    _offers: dict[str, tuple[Offer, ...]] = field(default_factory=dict, repr=False)
    _table: ComplexTable | None = field(default=None, repr=False)
    #: Attribute name -> (kind, key) of its values, in the object's order (the order
    #: level_offers gives its offers in).
    _keys: dict[str, list[tuple[str, str]]] = field(default_factory=dict, repr=False)
    #: The attributes every evaluation of this object looks at, whatever the job asks:
    #: FORCED ones and consumables with a capacity here (docs/notations/gridengine.md).
    _always: tuple[str, ...] = field(default=(), repr=False)
    #: Per request lists (by identity, the lists kept alive here): the offers of the
    #: attributes the evaluator can look at for them, see :meth:`offers_for`.
    _views: dict[tuple[int, int], _View] = field(default_factory=dict, repr=False)
    _object: LevelObject | None = field(default=None, repr=False)

    def offers(self, table: ComplexTable) -> Offers:
        """All offers of the object, as level_offers gives them."""
        self._prepare(table)
        self._compute([name for name in self._keys if name not in self._offers])
        return {name: self._offers[name] for name in self._keys}

    def _prepare(self, table: ComplexTable) -> None:
        if self._table is table:
            return
        self._table = table
        self._offers = {}
        self._views.clear()
        self._keys = {}
        sources = (
            ("complex_values", self.complex_values),
            ("builtin", self.builtin),
            ("load_values", self.load_values),
        )
        facts = _facts(table)
        for kind, values in sources:
            for key in values:
                name = facts.names.get(key)
                if name is None:
                    name = table.resolve(key).name  # raises: an unknown attribute
                self._keys.setdefault(name, []).append((kind, key))
        candidates = [name for name in self._keys if name in facts.forced_or_consumable]
        self._compute(candidates)
        self._always = tuple(
            name
            for name in candidates
            if name in facts.forced or self._offers[name][0].capacity is not None
        )

    def _compute(self, names: Iterable[str]) -> None:
        """level_offers of the named attributes (it decides each attribute from its own
        values and usage, so a part of the object gives the same offers)."""
        assert self._table is not None
        parts: dict[str, dict[str, str]] = {
            "complex_values": {},
            "builtin": {},
            "load_values": {},
        }
        for name in names:
            for kind, key in self._keys.get(name, ()):
                parts[kind][key] = getattr(self, kind)[key]
        if not any(parts.values()):
            return
        partial = LevelObject(
            self.name,
            complex_values=parts["complex_values"],
            load_values=parts["load_values"],
            builtin=parts["builtin"],
            used=self.used,
            used_nonexclusive=self.used_nonexclusive,
        )
        self._offers.update(level_offers(self._table, partial, self.level))

    def offers_for(self, table: ComplexTable, hard: RequestList, soft: RequestList) -> Offers:
        """The object's offers cut down to what the evaluator reads for these lists: the
        FORCED attributes and the consumables with a capacity here (checked for every
        job, in the object's order) and the requested attributes. evaluate_level and
        count_soft_violations skip every other attribute (a FORCED check or a default
        only concerns unrequested FORCED attributes and consumables), so their verdicts
        are the same as on all offers, at the cost of a few attributes instead of all
        the built-in queue attributes and values of the object."""
        return self._view(table, hard, soft).offers

    def level_fit(self, table: ComplexTable, hard: RequestList, soft: RequestList) -> LevelFit:
        """evaluate_level of this object for the hard list, kept until its offers change
        (the global host's verdict for a category holds for a whole run without global
        consumables)."""
        view = self._view(table, hard, soft)
        if view.fit is None:
            view.fit = evaluate_level(
                table, self.level, self.level_object(), hard, offers=view.offers
            )
        return view.fit

    def _view(self, table: ComplexTable, hard: RequestList, soft: RequestList) -> _View:
        self._prepare(table)
        key = (id(hard), id(soft))
        view = self._views.get(key)
        if view is not None and view.hard is hard and view.soft is soft:
            return view
        offers = self._offers
        requested = [
            request.name
            for request in (*hard.requests, *soft.requests)
            if request.name in self._keys
        ]
        missing = [name for name in requested if name not in offers]
        if missing:
            self._compute(missing)
        cut = {name: offers[name] for name in self._always}
        for name in requested:
            cut[name] = offers[name]
        if len(self._views) > 4096:
            self._views.clear()
        view = self._views[key] = _View(hard, soft, cut)
        return view

    def changed(self, names: Iterable[str] | None = None) -> None:
        """Bookings of ``names`` (None: anything) changed: their offers are computed
        again (the others still hold)."""
        if self._table is None:
            return
        if names is None:
            self._table = None
            self._offers = {}
            self._views.clear()
            return
        self._compute([name for name in names if name in self._offers])
        self._views.clear()

    def level_object(self) -> LevelObject:
        # The dicts are shared, so the object always shows the current usage.
        if self._object is None:
            self._object = LevelObject(
                self.name,
                complex_values=self.complex_values,
                load_values=self.load_values,
                builtin=self.builtin,
                used=self.used,
                used_nonexclusive=self.used_nonexclusive,
            )
        return self._object


@dataclass
class ClusterState:
    """Global host, hosts and queue instances with their values, loaded once."""

    table: ComplexTable
    global_host: ObjectState
    hosts: dict[int, ObjectState]
    queues: dict[int, ObjectState]
    slots: dict[int, QueueSlot]
    #: The scheduler configuration (queue_sort_method, load_formula); None: seq_no, then
    #: creation (app/matching/gridengine/queue_sort.py).
    sort: QueueSort | None = None
    _order: list[QueueSlot] | None = field(default=None, repr=False)
    #: Host groups and access lists (app/matching/gridengine/groups.py), loaded only
    #: when a decision needs them (``ensure_groups``); None until then.
    groups: ClusterGroups | None = field(default=None, repr=False)

    def host_value(self, worker_id: int) -> float | None:
        """The host's load formula value, None without a scheduler configuration."""
        if self.sort is None:
            return None
        return self.sort.host_value(
            self.table, self.hosts[worker_id].load_values, self.global_host.load_values
        )

    def queue_order(self, worker_ids: Iterable[int] | None = None) -> list[QueueSlot]:
        """Queue instances in queue sort order: by the scheduler configuration's method,
        else seq_no, then creation."""
        if self._order is None:
            # Sorted once: a run asks for every category's order.
            sort = self.sort
            if sort is None:
                self._order = sorted(self.slots.values(), key=lambda s: (s.seq_no, s.id))
            else:
                values = {wid: self.host_value(wid) or 0.0 for wid in self.hosts}
                self._order = sorted(
                    self.slots.values(),
                    key=lambda s: sort.key(s.seq_no, values[s.worker_id], s.id),
                )
        if worker_ids is None:
            return list(self._order)
        wanted = set(worker_ids)
        return [s for s in self._order if s.worker_id in wanted]

    def full(self, slot: QueueSlot) -> bool:
        """No free slot: the evaluator would refuse the instance for any job."""
        return self.queues[slot.id].used.get("slots", 0.0) >= slot.capacity

    def evaluate(self, slot: QueueSlot, hard: RequestList, soft: RequestList) -> QueueFit:
        """evaluate_queue_instance on the three objects, each level's verdict memoised
        until its object's offers change. A fitting instance is put together here as the
        evaluator does it; any refusal is left to the evaluator itself (its message)."""
        table = self.table
        objects = (self.global_host, self.hosts[slot.worker_id], self.queues[slot.id])
        fits = [state.level_fit(table, hard, soft) for state in objects]
        views = (
            objects[0].offers_for(table, hard, soft),
            objects[1].offers_for(table, hard, soft),
            objects[2].offers_for(table, hard, soft),
        )
        levels = (objects[0].level_object(), objects[1].level_object(), objects[2].level_object())
        found = fits[0].found | fits[1].found | fits[2].found
        if not all(fit.ok for fit in fits) or any(r.name not in found for r in hard):
            return evaluate_queue_instance(table, *levels, hard, soft, offers=views)
        faithful, naive = count_soft_violations(table, levels, soft, offers=views)
        return QueueFit(
            levels[2].name,
            True,
            global_slots=fits[0].slots,
            host_slots=fits[1].slots,
            queue_slots=fits[2].slots,
            soft_violations=faithful,
            soft_violations_naive=naive,
        )


def load_state(
    session: Session,
    table: ComplexTable | None,
    worker_ids: Sequence[int] | None = None,
    *,
    names: Mapping[int, str] | None = None,
) -> ClusterState:
    """The values of the global host and of the given workers (all when None).
    ``names`` (worker id -> name of the given workers) saves a query when the caller
    has the workers loaded already (a pull). ``table`` None: the attribute table is
    read too, for given workers in the same statement as their values (what
    ``load_table(session)`` would give)."""
    if worker_ids is None or names is None:
        host_query = select(Worker.id, Worker.name)
        if worker_ids is not None:
            host_query = host_query.where(Worker.id.in_(worker_ids))
        names = {wid: name for wid, name in session.execute(host_query)}
    if worker_ids is not None:
        # A pull: the three reads in one statement (three round trips were a sixth of
        # the pull's statements).
        parameters: dict[str, Any] = {"sge_worker_ids": list(worker_ids)}
        if table is None:
            parameters.update(table_parameters())
        rows = session.execute(_worker_rows(with_table=table is None), parameters).all()
        return state_of_rows(rows, names, table)
    builder = _StateBuilder(names)
    if table is None:
        table = load_table(session)
    for qi_row in session.execute(_queue_rows()):
        builder.add_queue(*qi_row)
    for value_row in session.execute(_value_rows()):
        builder.add_value(*value_row)
    for usage_row in session.execute(_usage_rows()):
        builder.add_usage(*usage_row)
    state = builder.state(table)
    # The whole cluster (a run, an explanation): the hosts' order is the configuration's.
    state.sort = load_queue_sort(session, table)
    return state


class _StateBuilder:
    """The objects of a ClusterState, filled row by row."""

    _COLUMNS = {"fixed": "complex_values", "load": "load_values", "builtin": "builtin"}

    def __init__(self, names: Mapping[int, str]) -> None:
        self.names = names
        self.global_host = ObjectState(Level.GLOBAL, 0, "global")
        self.hosts = {wid: ObjectState(Level.HOST, wid, name) for wid, name in names.items()}
        self.queues: dict[int, ObjectState] = {}
        self.slots: dict[int, QueueSlot] = {}
        self.objects: dict[str, Mapping[int, ObjectState]] = {
            "global": {0: self.global_host},
            "host": self.hosts,
            "queue_instance": self.queues,
        }

    def add_queue(
        self,
        qi_id: int,
        worker_id: int,
        capacity: int,
        used_slots: int,
        queue: str,
        seq_no: int,
        thresholds: str = "NONE",
        states: str = "",
    ) -> None:
        host = self.names[worker_id]
        name = f"{queue}@{host}"
        qi_state = ObjectState(Level.QUEUE, qi_id, name)
        qi_state.builtin["slots"] = str(capacity)
        qi_state.used["slots"] = float(used_slots)
        self.queues[qi_id] = qi_state
        self.slots[qi_id] = QueueSlot(
            qi_id, name, worker_id, host, seq_no, capacity, thresholds, states or ""
        )

    def add_value(self, level: str, key: int, kind: str, text: str, name: str) -> None:
        target = self.objects[level].get(key)
        if target is not None:
            getattr(target, self._COLUMNS[kind])[name] = text

    def add_usage(
        self, usage_id: int, level: str, key: int, used: float, nonexclusive: float, name: str
    ) -> None:
        target = self.objects[level].get(key)
        if target is not None:
            target.used[name] = float(used)
            target.used_nonexclusive[name] = float(nonexclusive)
            target.usage_ids[name] = usage_id

    def state(self, table: ComplexTable) -> ClusterState:
        return ClusterState(table, self.global_host, self.hosts, self.queues, self.slots)


def state_of_rows(
    rows: Sequence[Any], names: Mapping[int, str], table: ComplexTable | None
) -> ClusterState:
    """The ClusterState of the rows of :func:`worker_row_parts` (the workers named in
    ``names``); ``table`` None: the rows hold the attribute table (parts 3 and 5, read
    with :func:`table_parameters`). Rows of other parts are ignored, so a caller may add
    its own to the statement."""
    builder = _StateBuilder(names)
    values: list[Any] = []
    usage: list[Any] = []
    attributes: list[Any] = []
    digest: str | None = None
    # One pass, by position (part, i1..i5, f1, f2, s1..s7). UNION ALL promises no order:
    # queue instances are added first so that their values find them.
    for row in rows:
        part = row[0]
        if part == 0:
            builder.add_queue(row[1], row[2], row[3], row[4], row[8], row[5], row[9], row[10])
        elif part == 1:
            values.append(row)
        elif part == 2:
            usage.append(row)
        elif part == 3:
            attributes.append(row)
        elif part == 5:
            digest = row[8]
    if table is None:
        table = _table_of_parts(digest, attributes)
    for row in values:
        builder.add_value(row[8], row[2], row[9], row[10], row[11])
    for row in usage:
        builder.add_usage(row[1], row[8], row[2], row[6], row[7], row[11])
    return builder.state(table)
