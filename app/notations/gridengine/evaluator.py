"""Reference evaluator: does a job's ``-l`` list fit a queue instance
(docs/notations/gridengine.md)?

Pure functions that the SQL engine is tested against. Three objects carry values: the
global pseudo host, the execution host and the queue instance (:class:`LevelObject`).

Within one object the sources of an attribute are merged into *offers*
(docs/notations/gridengine.md#levels-and-the-strict-hierarchy):

1. ``complex_values`` gives a fixed value, or for a consumable the capacity, of which
   ``capacity - used`` is available;
2. a queue's built-in attribute (``h_rt``, ``qname``, ``slots``, ...) merges with it by
   the same rule as a load value, except that a consumable keeps its capacity check and the
   built-in is checked in addition as a per-slot limit; ``slots`` alone is a capacity;
3. a load value counts only when there is no configured value or the relop is not
   ``==``/``!=``; strings are replaced, numbers keep the more restrictive value (``<=``,
   ``<``: smaller; ``>=``, ``>``: larger).

Across levels the hard requests are checked strictly hierarchically: global, then host,
then queue instance, each against its own offers only; a present, non-matching attribute
fails that level (and everything below it); an attribute absent at a level is skipped
there; a request found at no level fails the queue instance as an unknown resource. Per
level the order is: FORCED attributes, the implicit ``slots=1``, defaults of unrequested
consumables configured there, then the hard requests. Non-consumable values are compared
once (one slot); consumables also yield a slot capacity ``floor(available / request)``.

Soft requests never make an instance ineligible; they are counted two ways: faithfully
(a level that defines the request and does not match adds 1; at the queue level a request
neither defined there nor matched above adds 1 more) and naively (requests that would fail
as hard requests).

Not modelled here (the scenario runner and SQL engine do it): host slot sums over several
queue instances, PE allocation rules, bookings, per-job (JOB) consumables on slave queues,
load adjustments, reservations, quotas, access lists, queue states.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from app.notations.gridengine.attribute_table import ComplexTable
from app.notations.gridengine.definitions import (
    ComplexDefinition,
    Consumable,
    Relop,
    Requestable,
    Value,
)
from app.notations.gridengine.requests import RequestList
from app.notations.gridengine.strings import Semantics, check_semantics
from app.notations.gridengine.values import (
    compare,
    consumable_slot_capacity,
    exclusive_fits,
    format_value,
    parse_value,
)

__all__ = [
    "QUEUE_LIMITS",
    "FitCode",
    "Level",
    "LevelFit",
    "LevelObject",
    "Offer",
    "Offers",
    "QueueFit",
    "Source",
    "check_offers",
    "count_soft_violations",
    "evaluate_level",
    "evaluate_queue_instance",
    "level_offers",
    "queue_builtins",
]


#: Built-in resource limits of every queue instance; INFINITY unless configured.
QUEUE_LIMITS = (
    *("s_rt", "h_rt", "s_cpu", "h_cpu", "s_fsize", "h_fsize", "s_data", "h_data"),
    *("s_stack", "h_stack", "s_core", "h_core", "s_rss", "h_rss", "s_vmem", "h_vmem"),
)


class Level(enum.Enum):
    """Where a value lives; the first letter is Grid Engine's diagnostic prefix."""

    GLOBAL = "global"
    HOST = "host"
    QUEUE = "queue"

    @property
    def letter(self) -> str:
        return self.value[0]


class Source(enum.Enum):
    """Kind of an offered value (second letter of the diagnostic code, e.g. ``hl``)."""

    FIXED = "f"
    LOAD = "l"
    CONSUMABLE = "c"


class FitCode(enum.Enum):
    """Why a queue instance cannot take the job (scenario ``code`` values)."""

    MISMATCH = "mismatch"
    DEFAULT_REQUEST_MISMATCH = "default_request_mismatch"
    UNKNOWN_RESOURCE = "unknown_resource"
    FORCED_NOT_REQUESTED = "forced_not_requested"
    NO_FREE_SLOTS = "no_free_slots"
    EXCLUSIVE_IN_USE = "exclusive_in_use"
    #: A resource quota set's limit leaves the job nothing here (sge_resource_quota(5)).
    QUOTA_EXCEEDED = "quota_exceeded"
    #: No item of the job's hard queue list (``-q``) names the instance (qsub(1)).
    NOT_IN_QUEUE_LIST = "not_in_queue_list"
    #: No item of the job's ``-masterq`` list names the instance: slave tasks only.
    NOT_IN_MASTER_QUEUE_LIST = "not_in_master_queue_list"
    #: A threshold of the queue's ``load_thresholds`` is exceeded (queue_conf(5)).
    OVERLOADED = "overloaded"
    #: The instance is disabled (``qmod -d``, qstat state ``d``).
    DISABLED = "disabled"
    #: The instance is suspended (``qmod -s``, qstat state ``s``).
    SUSPENDED = "suspended"


@dataclass(frozen=True)
class LevelObject:
    """Values of one object: the global host, an execution host or a queue instance.

    Texts are parsed with the attribute's type (keys may be names or shortcuts); ``used``
    holds consumable bookings in base units, ``used_nonexclusive`` the second counter of
    EXCL attributes. ``builtin`` is for queue instances (see :func:`queue_builtins`),
    ``load_values`` for the global and execution hosts.
    """

    name: str
    complex_values: Mapping[str, str] = field(default_factory=dict)
    load_values: Mapping[str, str] = field(default_factory=dict)
    builtin: Mapping[str, str] = field(default_factory=dict)
    used: Mapping[str, float] = field(default_factory=dict)
    used_nonexclusive: Mapping[str, float] = field(default_factory=dict)


def queue_builtins(
    queue_instance: str,
    *,
    slots: int,
    seq_no: int = 0,
    overrides: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The built-in attributes of queue instance ``cq@host``: ``qname`` and ``hostname``
    from the name, ``slots``, ``seq_no``, every limit INFINITY, then ``overrides``."""
    queue, _, host = queue_instance.partition("@")
    values = {limit: "INFINITY" for limit in QUEUE_LIMITS}
    values.update(
        {
            "qname": queue,
            "hostname": host,
            "slots": str(slots),
            "seq_no": str(seq_no),
            "rerun": "FALSE",
            "tmpdir": "/tmp",
            "calendar": "NONE",
            "min_cpu_interval": "00:05:00",
        }
    )
    values.update(overrides or {})
    return values


@dataclass(frozen=True)
class Offer:
    """What one object offers for one attribute; ``value`` is compared with a one-slot
    request, ``capacity``/``used`` describe a consumable."""

    name: str
    level: Level
    source: Source
    value: Value
    capacity: float | None = None
    used: float = 0.0
    used_nonexclusive: float = 0.0

    @property
    def code(self) -> str:
        """Grid Engine's two-letter origin code, e.g. ``hl`` or ``qc``."""
        return self.level.letter + self.source.value

    @property
    def available(self) -> float | None:
        return None if self.capacity is None else self.capacity - self.used


@lru_cache(maxsize=65_536)
def _parse(definition: ComplexDefinition, text: str, role: str) -> Value:
    """:func:`parse_value`, memoised: the same texts are parsed for every object and every
    evaluation (a scheduling run evaluates thousands of queue instances per job), and
    definitions are immutable. Errors are raised again each time (never cached)."""
    return parse_value(definition, text, role=role)


#: One object's offers per attribute name (:func:`level_offers`).
Offers = Mapping[str, tuple[Offer, ...]]


def _restrictive(relop: Relop, first: float, second: float) -> float:
    return min(first, second) if relop in (Relop.LE, Relop.LT) else max(first, second)


def _merge(definition: ComplexDefinition, base: Offer, other: Offer) -> Offer:
    """``other`` (a built-in or load value) merged into ``base`` by the more-restrictive
    rule; ``==``/``!=`` keep the configured value, strings take the load value."""
    if definition.relop in (Relop.EQ, Relop.NE):
        return base
    if isinstance(base.value, str) or isinstance(other.value, str):
        return Offer(base.name, base.level, other.source, other.value, base.capacity, base.used)
    merged = _restrictive(definition.relop, base.value, other.value)
    source = base.source if merged == base.value else other.source
    return Offer(
        base.name,
        base.level,
        source,
        merged,
        base.capacity,
        base.used,
        base.used_nonexclusive,
    )


def level_offers(
    table: ComplexTable, obj: LevelObject, level: Level
) -> dict[str, tuple[Offer, ...]]:
    """The offers of one object per attribute name, by the within-level merge rule."""
    configured = {table.resolve(k).name: v for k, v in obj.complex_values.items()}
    builtin = {table.resolve(k).name: v for k, v in obj.builtin.items()}
    loads = {table.resolve(k).name: v for k, v in obj.load_values.items()}
    offers: dict[str, tuple[Offer, ...]] = {}
    for name in dict.fromkeys([*configured, *builtin, *loads]):
        definition = table[name]
        used = float(obj.used.get(name, 0.0))
        used_nonexclusive = float(obj.used_nonexclusive.get(name, 0.0))
        primary: Offer | None = None
        extra: list[Offer] = []
        if name in configured:
            primary = _capacity_or_fixed(definition, configured[name], level, used, "capacity")
            primary = Offer(
                name,
                level,
                primary.source,
                primary.value,
                primary.capacity,
                used,
                used_nonexclusive,
            )
        if name in builtin:
            if name == "slots":
                own = _capacity_or_fixed(definition, builtin[name], level, used, "load")
            else:
                # A built-in limit (h_vmem=INFINITY, ...) is a fixed per-slot value even
                # when the attribute is made consumable; capacities come from
                # complex_values only.
                limit = _parse(definition, builtin[name], "load")
                own = Offer(name, level, Source.FIXED, limit)
            own = Offer(
                name, level, own.source, own.value, own.capacity, own.used, used_nonexclusive
            )
            if primary is None:
                primary = own
            elif primary.source is Source.CONSUMABLE:
                # A consumable keeps its capacity check; the built-in limit is checked too.
                extra.append(Offer(name, level, Source.FIXED, own.value))
            else:
                primary = _merge(definition, primary, Offer(name, level, Source.FIXED, own.value))
        if name in loads:
            load = Offer(name, level, Source.LOAD, _parse(definition, loads[name], "load"))
            primary = load if primary is None else _merge(definition, primary, load)
        assert primary is not None
        offers[name] = (primary, *extra)
    return offers


def _capacity_or_fixed(
    definition: ComplexDefinition, text: str, level: Level, used: float, role: str
) -> Offer:
    if definition.is_consumable:
        capacity = _parse(definition, text, "capacity")
        assert isinstance(capacity, float)
        available = capacity if definition.relop is Relop.EXCL else capacity - used
        return Offer(definition.name, level, Source.CONSUMABLE, available, capacity, used)
    value = _parse(definition, text, role)
    return Offer(definition.name, level, Source.FIXED, value)


def check_offers(
    definition: ComplexDefinition,
    requested: Value,
    offers: tuple[Offer, ...],
    *,
    semantics: Semantics = "6.1",
) -> tuple[Offer, FitCode] | None:
    """The first offer a one-slot request does not fit, with the reason, or None."""
    for offer in offers:
        if definition.relop is Relop.EXCL and offer.capacity is not None:
            assert isinstance(requested, float)
            if not compare(definition.type, Relop.EXCL, requested, offer.capacity):
                return offer, FitCode.MISMATCH
            if not exclusive_fits(requested, offer.capacity, offer.used, offer.used_nonexclusive):
                return offer, FitCode.EXCLUSIVE_IN_USE
            continue
        if not compare(
            definition.type, definition.relop, requested, offer.value, semantics=semantics
        ):
            return offer, FitCode.MISMATCH
    return None


@dataclass(frozen=True)
class LevelFit:
    """Outcome of one level: ``ok``, or the failing attribute, offer and reason; the
    requests found there; the slot capacity (None = unlimited)."""

    level: Level
    ok: bool
    code: FitCode | None = None
    attribute: str | None = None
    offer: Offer | None = None
    found: frozenset[str] = frozenset()
    slots: int | None = None


def _booked_amount(definition: ComplexDefinition, hard: RequestList) -> float:
    request = hard.get(definition.name)
    if request is not None:
        assert isinstance(request.parsed, float)
        return request.parsed
    value = definition.default_value
    assert isinstance(value, float)
    return value


def evaluate_level(
    table: ComplexTable,
    level: Level,
    obj: LevelObject,
    hard: RequestList,
    *,
    semantics: Semantics = "6.1",
    offers: Offers | None = None,
) -> LevelFit:
    """Check the hard requests (and FORCED attributes, slots, defaults) against one
    object's own offers (``offers``: precomputed by a caller that evaluates the same
    object many times, as :func:`level_offers` would give them)."""
    check_semantics(semantics)
    offers = offers if offers is not None else level_offers(table, obj, level)
    requested = {request.name for request in hard}
    for name in offers:
        definition = table[name]
        if definition.requestable is Requestable.FORCED and name not in requested:
            return LevelFit(level, False, FitCode.FORCED_NOT_REQUESTED, name, offers[name][0])
    # Implicit slots=1 (the default of slots), then defaults of unrequested consumables.
    for name, item in offers.items():
        definition = table[name]
        if not definition.is_consumable or name in requested or item[0].capacity is None:
            continue
        default = definition.default_value
        assert isinstance(default, float)
        if default == 0 and definition.relop is not Relop.EXCL:
            continue  # a zero default is neither checked nor booked
        failure = check_offers(definition, default, item, semantics=semantics)
        if failure is not None:
            code = failure[1]
            if name == "slots":
                code = FitCode.NO_FREE_SLOTS
            elif code is FitCode.MISMATCH:
                code = FitCode.DEFAULT_REQUEST_MISMATCH
            return LevelFit(level, False, code, name, failure[0])
    found: set[str] = set()
    for request in hard:
        if request.name not in offers:
            continue
        definition = table[request.name]
        failure = check_offers(
            definition, request.parsed, offers[request.name], semantics=semantics
        )
        if failure is not None:
            return LevelFit(level, False, failure[1], request.name, failure[0])
        found.add(request.name)
    return LevelFit(level, True, found=frozenset(found), slots=_slot_capacity(table, offers, hard))


def _slot_capacity(
    table: ComplexTable, offers: Mapping[str, tuple[Offer, ...]], hard: RequestList
) -> int | None:
    """min over per-slot consumables booked here of floor(available / amount)."""
    capacity: int | None = None
    for name, item in offers.items():
        definition = table[name]
        offer = item[0]
        if (
            definition.consumable is not Consumable.YES
            or definition.relop is Relop.EXCL
            or offer.capacity is None
        ):
            continue
        amount = _booked_amount(definition, hard)
        slots = consumable_slot_capacity(offer.capacity, offer.used, amount)
        if slots is not None:
            capacity = slots if capacity is None else min(capacity, slots)
    return capacity


@dataclass(frozen=True)
class QueueFit:
    """Whether a queue instance can take the job (one slot), and why not.

    ``global_slots``/``host_slots``/``queue_slots`` are each level's slot capacity for
    this job (None = unlimited), ``slots_avail`` their minimum. Soft violation counts are
    computed for fitting instances only (0 otherwise).
    """

    queue: str
    fits: bool
    level: Level | None = None
    code: FitCode | None = None
    attribute: str | None = None
    message: str | None = None
    global_slots: int | None = None
    host_slots: int | None = None
    queue_slots: int | None = None
    soft_violations: int = 0
    soft_violations_naive: int = 0

    @property
    def slots_avail(self) -> int | None:
        known = [s for s in (self.global_slots, self.host_slots, self.queue_slots) if s is not None]
        return min(known) if known else None


def _where(level: Level, obj: LevelObject) -> str:
    if level is Level.GLOBAL:
        return "cannot run globally"
    if level is Level.HOST:
        return f'cannot run at host "{obj.name}"'
    return f'cannot run in queue "{obj.name}"'


def _message(table: ComplexTable, fit: LevelFit, obj: LevelObject, hard: RequestList) -> str:
    prefix = f"(-l {hard.category_text()}) {_where(fit.level, obj)} because "
    name = fit.attribute or ""
    if fit.code is FitCode.UNKNOWN_RESOURCE:
        return prefix + f"job requests unknown resource ({name})"
    if fit.code is FitCode.FORCED_NOT_REQUESTED:
        kind = "queue instance" if fit.level is Level.QUEUE else "host"
        return f"does not request 'forced' resource \"{name}\" of {kind} {obj.name}"
    if fit.code is FitCode.EXCLUSIVE_IN_USE:
        return prefix + f"exclusive resource ({name}) is already in use"
    if fit.code is FitCode.NO_FREE_SLOTS and fit.level is Level.QUEUE:
        return f'queue instance "{obj.name}" dropped because it is full'
    offer = fit.offer
    assert offer is not None
    shown = format_value(table[name].type, offer.value)
    lead = (
        "for default request it offers only"
        if fit.code
        in (
            FitCode.DEFAULT_REQUEST_MISMATCH,
            FitCode.NO_FREE_SLOTS,
        )
        else "it offers only"
    )
    return prefix + f"{lead} {offer.code}:{name}={shown}"


def count_soft_violations(
    table: ComplexTable,
    objects: tuple[LevelObject, LevelObject, LevelObject],
    soft: RequestList,
    *,
    semantics: Semantics = "6.1",
    offers: tuple[Offers, Offers, Offers] | None = None,
) -> tuple[int, int]:
    """(faithful, naive) soft violation counts for global, host and queue objects."""
    levels = (Level.GLOBAL, Level.HOST, Level.QUEUE)
    if not soft.requests:
        return 0, 0
    per_level = (
        list(offers)
        if offers is not None
        else [level_offers(table, obj, level) for obj, level in zip(objects, levels, strict=True)]
    )
    faithful = naive = 0
    for request in soft:
        definition = table[request.name]
        matched = defined = failed = False
        for level, own in zip(levels, per_level, strict=True):
            item = own.get(request.name)
            if item is not None:
                defined = True
                if check_offers(definition, request.parsed, item, semantics=semantics) is None:
                    matched = True
                else:
                    faithful += 1
                    failed = True
            elif level is Level.QUEUE and not matched:
                faithful += 1  # Grid Engine's "not found on the queue" count (gridengine.md)
        if failed or not defined:
            naive += 1
    return faithful, naive


def evaluate_queue_instance(
    table: ComplexTable,
    global_host: LevelObject,
    host: LevelObject,
    queue: LevelObject,
    hard: RequestList,
    soft: RequestList | None = None,
    *,
    semantics: Semantics = "6.1",
    offers: tuple[Offers, Offers, Offers] | None = None,
) -> QueueFit:
    """Whether ``queue`` (on ``host``) can take a one-slot job with these requests.
    ``offers`` are the three objects' precomputed :func:`level_offers`, if the caller
    keeps them."""
    soft = soft if soft is not None else RequestList((), soft=True)
    fits: list[LevelFit] = []
    levels = ((Level.GLOBAL, global_host), (Level.HOST, host), (Level.QUEUE, queue))
    for index, (level, obj) in enumerate(levels):
        own = offers[index] if offers is not None else None
        fit = evaluate_level(table, level, obj, hard, semantics=semantics, offers=own)
        if not fit.ok:
            return QueueFit(
                queue.name, False, level, fit.code, fit.attribute, _message(table, fit, obj, hard)
            )
        fits.append(fit)
    found = frozenset().union(*(fit.found for fit in fits))
    missing = [request.name for request in hard if request.name not in found]
    if missing:
        fit = LevelFit(Level.QUEUE, False, FitCode.UNKNOWN_RESOURCE, missing[0])
        return QueueFit(
            queue.name,
            False,
            Level.QUEUE,
            FitCode.UNKNOWN_RESOURCE,
            missing[0],
            _message(table, fit, queue, hard),
        )
    faithful, naive = count_soft_violations(
        table, (global_host, host, queue), soft, semantics=semantics, offers=offers
    )
    return QueueFit(
        queue.name,
        True,
        global_slots=fits[0].slots,
        host_slots=fits[1].slots,
        queue_slots=fits[2].slots,
        soft_violations=faithful,
        soft_violations_naive=naive,
    )
