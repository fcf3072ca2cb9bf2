"""Dynamic fit and bookings of Grid Engine jobs, shared by pull and the scheduling run.

The misfit cache (SQL, app/matching/complex_sql.py) has ruled out the workers whose static
values reject a category. For the survivors, this module loads the current picture (fixed,
built-in and load values, consumable capacities and bookings, free slots) into the
reference evaluator's objects (app/notations/complex_matching.py) and lets it decide per
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

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    CompoundSelect,
    Float,
    Integer,
    Select,
    Text,
    and_,
    bindparam,
    case,
    cast,
    delete,
    exists,
    func,
    insert,
    literal,
    null,
    or_,
    select,
    union_all,
    update,
)
from sqlalchemy.orm import Session

from app.db.models import (
    Allocation,
    Attribute,
    AttributeValue,
    Category,
    ConsumableUsage,
    Job,
    JobBooking,
    ParallelEnvironment,
    Queue,
    QueueInstance,
    Worker,
)
from app.db.tables import ALLOCATIONS, CONSUMABLE_USAGE, JOB_BOOKINGS, QUEUE_INSTANCES
from app.matching.complex_table import load_table, prefetch_table, table_of_rows, table_rows
from app.matching.parallel import UNLIMITED, Offered, allocate
from app.notations.complex_matching import (
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
from app.notations.complex_requests import RequestList, parse_request_list
from app.notations.complexes import (
    ComplexTable,
    Consumable,
    Relop,
    Requestable,
)


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
    _order: list[QueueSlot] | None = field(default=None, repr=False)

    def queue_order(self, worker_ids: Iterable[int] | None = None) -> list[QueueSlot]:
        """Queue instances in queue sort order (seq_no, then creation)."""
        if self._order is None:
            # Sorted once: a run asks for every category's order.
            self._order = sorted(self.slots.values(), key=lambda s: (s.seq_no, s.id))
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
    return builder.state(table)


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
        self, qi_id: int, worker_id: int, capacity: int, used_slots: int, queue: str, seq_no: int
    ) -> None:
        host = self.names[worker_id]
        name = f"{queue}@{host}"
        qi_state = ObjectState(Level.QUEUE, qi_id, name)
        qi_state.builtin["slots"] = str(capacity)
        qi_state.used["slots"] = float(used_slots)
        self.queues[qi_id] = qi_state
        self.slots[qi_id] = QueueSlot(qi_id, name, worker_id, host, seq_no, capacity)

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
            builder.add_queue(row[1], row[2], row[3], row[4], row[8], row[5])
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


def _queue_rows() -> Select[int, int, int, int, str, int]:
    return select(
        QueueInstance.id,
        QueueInstance.worker_id,
        QueueInstance.slots,
        QueueInstance.used_slots,
        Queue.name,
        Queue.seq_no,
    ).join(Queue, Queue.id == QueueInstance.queue_id)


def _value_rows() -> Select[str, int, str, str, str]:
    return select(
        AttributeValue.level,
        AttributeValue.object_key,
        AttributeValue.kind,
        AttributeValue.text,
        Attribute.name,
    ).join(Attribute, Attribute.id == AttributeValue.attribute_id)


def _usage_rows() -> Select[int, str, int, float, float, str]:
    return select(
        ConsumableUsage.id,
        ConsumableUsage.level,
        ConsumableUsage.object_key,
        ConsumableUsage.used,
        ConsumableUsage.used_nonexclusive,
        Attribute.name,
    ).join(Attribute, Attribute.id == ConsumableUsage.attribute_id)


#: The attribute table last read by a pull, with its digest (see :func:`_table_digest`).
_KNOWN_TABLE: tuple[str, ComplexTable] | None = None


def table_parameters() -> dict[str, Any]:
    """The parameters of :func:`worker_row_parts` ``with_table``: the digest of the table
    this process knows, so that the statement sends the table's rows only when the
    table has changed (71 rows of 9 columns were a fifth of a pull's Python time)."""
    return {"sge_known_table": None if _KNOWN_TABLE is None else _KNOWN_TABLE[0]}


def _table_of_parts(digest: str | None, attributes: list[Any]) -> ComplexTable:
    """The table of a state statement's rows: the known one when the digest (part 5) is
    the known digest, else the one its rows (part 3) give, which becomes the known one.
    The digest and the rows come from one statement, so they agree."""
    global _KNOWN_TABLE
    known = _KNOWN_TABLE
    if not attributes and digest is not None and known is not None and known[0] == digest:
        return known[1]
    attributes.sort(key=lambda row: row.i1)
    table = table_of_rows(
        (r.s1, r.s2, r.s3, r.s4, r.s5, r.s6, r.s7, r.f1, bool(r.i2)) for r in attributes
    )
    if digest is not None:
        _KNOWN_TABLE = (digest, table)
    return table


def _table_digest() -> ColumnElement[str]:
    """Every column of every attribute row in one text, rows in no particular order:
    equal texts are equal tables (names, shortcuts and keywords cannot hold the
    separators, and no column is NULL). A changed row order only costs one reading of
    the rows. The urgency's text may round on SQLite; it decides nothing in a pull."""
    columns = table_rows()
    separator = literal("\x1f", Text())
    text: ColumnElement[Any] = columns[0]
    for column in columns[1:]:
        # || converts numbers and booleans to text on both databases.
        text = text.op("||", return_type=Text())(separator).op("||", return_type=Text())(column)
    return func.aggregate_strings(text, "\x1e")


_ROW_TYPES: dict[str, Any] = {
    **{f"i{n}": Integer() for n in range(1, 6)},
    "f1": Float(),
    "f2": Float(),
    **{f"s{n}": Text() for n in range(1, 8)},
}


def row_columns(**given: Any) -> list[ColumnElement[Any]]:
    """The columns i1..i5, f1, f2, s1..s7 of a part of :func:`worker_row_parts` other
    than the first: the given expressions, untyped NULLs in the others (the database
    takes a column's type from the parts that have one, and the statement stays under
    psycopg's 4,096 characters, beyond which it is parsed again on every run)."""
    return [given.get(name, null()).label(name) for name in _ROW_TYPES]


def _first_row_columns(**given: Any) -> list[ColumnElement[Any]]:
    """:func:`row_columns` of the UNION's first part: its NULLs typed."""
    return [given.get(name, cast(null(), kind)).label(name) for name, kind in _ROW_TYPES.items()]


@lru_cache(maxsize=2)
def _worker_rows(*, with_table: bool) -> CompoundSelect[Any]:
    return union_all(*worker_row_parts(with_table=with_table))


@lru_cache(maxsize=2)
def worker_row_parts(*, with_table: bool) -> tuple[Select[Any], ...]:
    """Queue instances (part 0), values (1) and consumable rows (2) of the global host
    and the workers in the parameter ``sge_worker_ids``, and with ``with_table`` the
    attribute table's digest (5) and, when it differs from the parameter
    ``sge_known_table`` (:func:`table_parameters`), its rows (3, i1 their order by name
    as the database sorts), for one UNION ALL
    with typed NULLs in the unused columns: part, i1..i5, f1, f2, s1..s7 (see
    :func:`row_columns`). Built once (building it cost more than a pull's evaluation)."""
    worker_ids: BindParameter[int] = bindparam("sge_worker_ids", expanding=True)
    columns = row_columns

    queues = (
        select(
            literal(0).label("part"),
            *_first_row_columns(
                i1=QueueInstance.id,
                i2=QueueInstance.worker_id,
                i3=QueueInstance.slots,
                i4=QueueInstance.used_slots,
                i5=Queue.seq_no,
                s1=cast(Queue.name, Text()),
            ),
        )
        .join(Queue, Queue.id == QueueInstance.queue_id)
        .where(QueueInstance.worker_id.in_(worker_ids))
    )
    values = (
        select(
            literal(1).label("part"),
            *columns(
                i2=AttributeValue.object_key,
                s1=cast(AttributeValue.level, Text()),
                s2=cast(AttributeValue.kind, Text()),
                s3=AttributeValue.text,
                s4=cast(Attribute.name, Text()),
            ),
        )
        .join(Attribute, Attribute.id == AttributeValue.attribute_id)
        # Global values are exactly those without a worker (CHECK object_matches_level),
        # as for the consumable rows below: "level = 'global'" as a parameter of a
        # prepared statement's generic plan is estimated at a third of the table.
        .where(or_(AttributeValue.worker_id.is_(None), AttributeValue.worker_id.in_(worker_ids)))
    )
    usage = (
        select(
            literal(2).label("part"),
            *columns(
                i1=ConsumableUsage.id,
                i2=ConsumableUsage.object_key,
                f1=ConsumableUsage.used,
                f2=ConsumableUsage.used_nonexclusive,
                s1=cast(ConsumableUsage.level, Text()),
                s4=cast(Attribute.name, Text()),
            ),
        )
        .join(Attribute, Attribute.id == ConsumableUsage.attribute_id)
        # Global rows are exactly those without a worker (CHECK object_matches_level):
        # "worker_id IS NULL" uses the worker index, "level = 'global'" scanned the table.
        .where(or_(ConsumableUsage.worker_id.is_(None), ConsumableUsage.worker_id.in_(worker_ids)))
    )
    if not with_table:
        return queues, values, usage
    digest = select(_table_digest().label("digest")).cte("sge_table_digest")
    changed = (
        select(digest.c.digest)
        .scalar_subquery()
        .is_distinct_from(bindparam("sge_known_table", type_=Text()))
    )
    name, shortcut, kind, relop, requestable, consumable, default, urgency, builtin = table_rows()
    attributes = select(
        literal(3).label("part"),
        *columns(
            i1=func.row_number().over(order_by=name),
            i2=case((builtin, 1), else_=0),
            f1=urgency,
            **{
                f"s{n}": cast(column, Text())
                for n, column in enumerate(
                    (name, shortcut, kind, relop, requestable, consumable, default), start=1
                )
            },
        ),
    )
    return (
        queues,
        values,
        usage,
        attributes.where(changed),
        select(literal(5).label("part"), *columns(s1=digest.c.digest)),
    )


@dataclass(frozen=True)
class Decision:
    """What the engine decided for one job: each considered queue instance's fit (in queue
    order), the chosen assignment (queue instance id -> slots), the master queue."""

    fits: list[tuple[QueueSlot, QueueFit]]
    assignment: dict[int, int] | None
    master: int | None

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
) -> Decision:
    """Evaluate the queue instances (all of them, or for a sequential job without soft
    requests up to the first fit when ``first_only``) and choose an assignment."""
    fits: list[tuple[QueueSlot, QueueFit]] = []
    for slot in order:
        if first_only and state.full(slot):
            # The same verdict without evaluating three levels: late in a run most
            # instances are full, and a category scans them all before it is rejected.
            fits.append((slot, slot.full_fit()))
            continue
        fit = state.evaluate(slot, hard, soft)
        fits.append((slot, fit))
        if first_only and fit.fits and pe_rule is None and not soft.requests:
            break
    fitting = [(slot, fit) for slot, fit in fits if fit.fits]
    # Soft violations re-sort the fitting instances; sorted() is stable, so the queue
    # order breaks ties (docs/notations/gridengine.md#soft-requests).
    fitting.sort(key=lambda item: item[1].soft_violations)
    if pe_rule is None:
        if not fitting:
            return Decision(fits, None, None)
        slot = fitting[0][0]
        return Decision(fits, {slot.id: 1}, slot.id)
    global_cap = next(
        (fit.global_slots for _slot, fit in fitting if fit.global_slots is not None), None
    )
    offers = [
        Offered(
            slot.id,
            slot.host,
            _cap(fit.queue_slots) if fit.queue_slots is not None else UNLIMITED,
            _cap(fit.host_slots) if fit.host_slots is not None else UNLIMITED,
        )
        for slot, fit in fitting
    ]
    limit = min(pe_limit, global_cap if global_cap is not None else UNLIMITED)
    assignment = allocate(pe_rule, [o for o in offers if o.slots > 0], low, high, limit)
    if not assignment:
        return Decision(fits, None, None)
    master = next(slot.id for slot, _fit in fitting if slot.id in assignment)
    return Decision(fits, assignment, master)


def _cap(value: int) -> int:
    return max(0, min(value, UNLIMITED))


@dataclass(frozen=True)
class Booking:
    usage_id: int | None  # None: a queue instance's slots (queue_instances.used_slots)
    queue_instance_id: int | None
    attribute: str
    amount: float
    nonexclusive: bool
    target: ObjectState
    #: An exclusive use of an EXCL attribute: needs nobody else there.
    exclusive: bool = False


def bookings_for(
    state: ClusterState, assignment: dict[int, int], master: int, hard: RequestList
) -> list[Booking]:
    """What a job with this assignment books, object by object (docs/notations/gridengine.md)."""
    table = state.table
    total = sum(assignment.values())
    per_host: dict[int, int] = {}
    for qi_id, count in assignment.items():
        worker_id = state.slots[qi_id].worker_id
        per_host[worker_id] = per_host.get(worker_id, 0) + count
    master_host = state.slots[master].worker_id
    objects: list[tuple[ObjectState, int, bool]] = [(state.global_host, total, True)]
    objects += [(state.hosts[w], n, w == master_host) for w, n in per_host.items()]
    objects += [(state.queues[q], n, q == master) for q, n in assignment.items()]
    result: list[Booking] = []
    for target, count, is_master in objects:
        queue_key = target.object_key if target.level is Level.QUEUE else None
        if queue_key is not None:
            result.append(Booking(None, queue_key, "slots", float(count), False, target))
        for name, usage_id in sorted(target.usage_ids.items(), key=lambda item: item[1]):
            definition = table[name]
            request = hard.get(name)
            if definition.relop is Relop.EXCL:
                if request is not None and request.parsed != 0:
                    result.append(Booking(usage_id, queue_key, name, 1.0, False, target, True))
                else:
                    result.append(Booking(usage_id, queue_key, name, 1.0, True, target))
                continue
            amount = request.parsed if request is not None else definition.default_value
            assert isinstance(amount, float)
            if amount == 0:
                continue
            if definition.consumable is Consumable.JOB:
                if is_master:
                    result.append(Booking(usage_id, queue_key, name, amount, False, target))
            else:
                result.append(Booking(usage_id, queue_key, name, amount * count, False, target))
    return result


def apply_in_memory(bookings: Iterable[Booking], sign: float = 1.0) -> None:
    changed: dict[int, tuple[ObjectState, set[str]]] = {}
    for booking in bookings:
        counter = booking.target.used_nonexclusive if booking.nonexclusive else booking.target.used
        counter[booking.attribute] = counter.get(booking.attribute, 0.0) + sign * booking.amount
        changed.setdefault(id(booking.target), (booking.target, set()))[1].add(booking.attribute)
    for target, names in changed.values():
        target.changed(names)


# book()'s guarded updates, built once (Core tables: nothing in a pull's session holds
# these rows as objects). A slot booking needs used + count <= slots; a consumable one
# used + amount <= capacity, an exclusive use nobody else there, a non-exclusive use
# of an EXCL attribute no exclusive user.
_BOOK_SLOTS = (
    update(QUEUE_INSTANCES)
    .where(
        QUEUE_INSTANCES.c.id == bindparam("qi_key"),
        QUEUE_INSTANCES.c.used_slots + bindparam("count") <= QUEUE_INSTANCES.c.slots,
    )
    .values(used_slots=QUEUE_INSTANCES.c.used_slots + bindparam("count"))
)
_USAGE_ROW = CONSUMABLE_USAGE.c.id == bindparam("usage_key")
_BOOK_USAGE = {
    # (nonexclusive, exclusive)
    (True, False): update(CONSUMABLE_USAGE)
    .where(_USAGE_ROW, CONSUMABLE_USAGE.c.used == 0)
    .values(used_nonexclusive=CONSUMABLE_USAGE.c.used_nonexclusive + bindparam("amount")),
    (False, False): update(CONSUMABLE_USAGE)
    .where(_USAGE_ROW, CONSUMABLE_USAGE.c.used + bindparam("amount") <= CONSUMABLE_USAGE.c.capacity)
    .values(used=CONSUMABLE_USAGE.c.used + bindparam("amount")),
    (False, True): update(CONSUMABLE_USAGE)
    .where(_USAGE_ROW, CONSUMABLE_USAGE.c.used == 0, CONSUMABLE_USAGE.c.used_nonexclusive == 0)
    .values(used=CONSUMABLE_USAGE.c.used + bindparam("amount")),
}


def book(
    session: Session, job_id: int, assignment: dict[int, int], bookings: list[Booking]
) -> bool:
    """Write the job's allocations and bookings; False (nothing changed) when a guard
    fails because a concurrent dispatch took the capacity first."""
    guarded = len(assignment) + sum(1 for b in bookings if b.usage_id is not None)
    # A single guarded update that fails has changed nothing: no savepoint needed (it
    # costs two round trips, a third of a simple pull's statements after the claim).
    savepoint = session.begin_nested() if guarded > 1 else None
    # Queue instances first (lock order worker -> job -> queue instances), then the
    # consumable rows in id order.
    for qi_id in sorted(assignment):
        booked = session.execute(_BOOK_SLOTS, {"qi_key": qi_id, "count": assignment[qi_id]})
        if booked.rowcount != 1:  # type: ignore[attr-defined]
            if savepoint is not None:
                savepoint.rollback()
            return False
    rows = []
    for booking in sorted(
        (b for b in bookings if b.usage_id is not None), key=lambda b: b.usage_id or 0
    ):
        statement = _BOOK_USAGE[booking.nonexclusive, booking.exclusive]
        result = session.execute(
            statement, {"usage_key": booking.usage_id, "amount": booking.amount}
        )
        if result.rowcount != 1:  # type: ignore[attr-defined]
            if savepoint is not None:
                savepoint.rollback()
            return False
        rows.append(
            {
                "job_id": job_id,
                "usage_id": booking.usage_id,
                "amount": booking.amount,
                "nonexclusive": booking.nonexclusive,
            }
        )
    # Core inserts: nothing reads these rows through the session in this transaction,
    # and the unit of work cost more CPU than the two statements themselves.
    session.execute(
        insert(ALLOCATIONS),
        [
            {"job_id": job_id, "queue_instance_id": qi_id, "slots": count}
            for qi_id, count in assignment.items()
        ],
    )
    if rows:
        session.execute(insert(JOB_BOOKINGS), rows)
    if savepoint is not None:
        savepoint.commit()
    return True


def release_bookings(session: Session, job_id: int) -> None:
    """Give back every consumable amount the job holds (its slots are released with its
    allocations by app/matching/dispatch.py)."""
    bookings = session.scalars(
        select(JobBooking).where(JobBooking.job_id == job_id).order_by(JobBooking.usage_id)
    ).all()
    for booking in bookings:
        if booking.nonexclusive:
            values = {"used_nonexclusive": ConsumableUsage.used_nonexclusive - booking.amount}
        else:
            values = {"used": ConsumableUsage.used - booking.amount}
        session.execute(
            update(ConsumableUsage).where(ConsumableUsage.id == booking.usage_id).values(**values)
        )
    if bookings:
        session.execute(delete(JobBooking).where(JobBooking.job_id == job_id))
    session.flush()


_LISTS: dict[tuple[int, str, str], tuple[RequestList, RequestList]] = {}


def category_lists(table: ComplexTable, hard: str, soft: str) -> tuple[RequestList, RequestList]:
    """A category's stored ``-l`` lists (category form, ``NONE`` when empty) parsed again
    against the current table; memoised per table."""
    key = (id(table), hard, soft)
    lists = _LISTS.get(key)
    if lists is None:
        if len(_LISTS) > 10_000:
            _LISTS.clear()
        lists = (
            parse_request_list("" if hard == "NONE" else hard, table),
            parse_request_list("" if soft == "NONE" else soft, table, soft=True),
        )
        _LISTS[key] = lists
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


def plan_job(
    state: ClusterState,
    category: CategoryRequests,
    order: Sequence[QueueSlot],
    pe_lookup: PeLookup,
    *,
    trace: bool = False,
) -> tuple[Decision, list[Booking]]:
    """Decide a job of the category on the given queue instances and what it would book
    (nothing when it does not fit). ``trace`` evaluates every instance (for scenarios and
    explanations)."""
    hard, soft = category_lists(state.table, category.hard, category.soft)
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
    decision, bookings = plan_job(state, category, order, pe_from_database(session), trace=trace)
    if decision.assignment is None or decision.master is None:
        return decision, False
    if not book(session, job.id, decision.assignment, bookings):
        return decision, False
    apply_in_memory(bookings)
    job.slots = sum(decision.assignment.values())
    job.worker_id = state.slots[decision.master].worker_id
    return decision, True
