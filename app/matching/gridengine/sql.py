"""Hard ``-l`` requests as SQL predicates, level by level with the strict hierarchy
(docs/notations/gridengine.md#levels-and-the-strict-hierarchy), for the misfit cache.

A request fails an object (the global host, a worker, a queue instance) when the object
has an *effective* static value of the attribute that does not satisfy
``requested RELOP offered``: numbers compare the normalised ``number`` columns, strings
test the offered ``string`` against the request (app/db/dialect.py
:func:`~app.db.dialect.string_request_match`: PostgreSQL ``~`` with the compiled regex,
SQLite a non-backtracking automaton). Every row
that counts is checked, which for ``<``, ``<=``, ``>``, ``>=`` is the same as checking the
most restrictive one (the within-object merge); for ``==``/``!=`` only the row of highest
precedence counts (``effective``). A consumable's fixed value is its capacity: the static
test is that one slot's request fits the whole capacity; the booked part is dynamic.

An object also fails when a FORCED attribute is present there and the job does not
hard-request it, or when an unrequested consumable's non-zero default exceeds the
capacity there. Per-job (JOB) consumables of a parallel job are checked on the global host
only: a host or queue instance that lacks one may still take slave tasks. A queue instance
fails as well when a hard request is present at none of global, its host and itself
("unknown resource"), or has too few slots.

Reason codes (added to app/matching/misfits.py):

==========  ============================================================================
sge-global  the global host rejects the job: no worker can take it
sge-host    the worker (execution host) rejects it
sge-queue   every queue instance of the worker rejects it (or it has none), by its
            values or by the job's ``-q`` list
sge-queue-  some queue instance of the worker would take it, but every such one is
unavailable disabled or suspended (``qmod -d``/``-s``; app/matching/gridengine/
            queue_states.py)
==========  ============================================================================

Numeric load values are left out: they change all the time and are checked at dispatch
time by the reference evaluator, together with consumable availability.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Select,
    and_,
    case,
    exists,
    not_,
    or_,
    select,
    true,
    tuple_,
    union_all,
)
from sqlalchemy.orm import InstrumentedAttribute, aliased

from app.db.dialect import string_request_match
from app.db.models import (
    Attribute,
    AttributeValue,
    Category,
    CategoryRequest,
    QueueInstance,
    Worker,
)
from app.matching import reasons
from app.matching.gridengine.queue_lists import allowed_instance
from app.matching.reasons import MisfitClauses, MisfitPair, ReasonClause
from app.notations.quantities import ValueType

REASONS = {
    "sge-global": "a hard request does not fit the global host",
    "sge-host": "a hard request does not fit the execution host",
    "sge-queue": "no queue instance of the worker fits the hard requests",
    "sge-queue-unavailable": (
        "every queue instance of the worker that fits is disabled or suspended"
    ),
}


def _satisfied(
    attribute: type[Attribute], request: type[CategoryRequest], value: type[AttributeValue]
) -> ColumnElement[bool]:
    """``requested RELOP offered`` for one request and one offered row."""
    relop, req, off = attribute.relop, request.number, value.number
    numeric = or_(
        and_(relop == "==", req == off),
        and_(relop == "!=", req != off),
        and_(relop == "<=", req <= off),
        and_(relop == "<", req < off),
        and_(relop == ">=", req >= off),
        and_(relop == ">", req > off),
        and_(relop == "EXCL", or_(req == 0, req <= off)),
    )
    folds = attribute.type.in_((ValueType.CSTRING.value, ValueType.HOST.value))
    matched = string_request_match(value.string, request.text, folds, request.regex)
    string = case((relop == "==", matched), else_=not_(matched))
    return case((request.regex.is_not(None), string), else_=numeric)


def _static(value: type[AttributeValue]) -> ColumnElement[bool]:
    """Rows the static cache may use: fixed and built-in values, string load values."""
    return and_(value.effective, or_(value.kind != "load", value.string.is_not(None)))


#: The bound parameter holding the scope's category or worker id (shared by every
#: family's scoped clauses).
SCOPE_PARAM = reasons.SCOPE_PARAM


@dataclass(frozen=True)
class Scope:
    """What one misfit statement covers: one new category against every worker, or one
    changed worker against every category (app/matching/misfits.py writes no other kind).

    The clauses are compiled as uncorrelated sets of rejected (category, object) pairs
    narrowed to the scope, which the database builds once per statement (a hashed
    subplan on PostgreSQL, an ephemeral index on SQLite) and probes per pair. Correlated
    EXISTS per (category, worker) pair let PostgreSQL's planner rebuild a hash of every
    queue instance's values once per worker: quadratic in the cluster size. The id is a
    bound parameter (:data:`SCOPE_PARAM`), so the expression is built once per kind.
    """

    category_id: int | None = None
    worker_id: int | None = None

    def __post_init__(self) -> None:
        if (self.category_id is None) == (self.worker_id is None):
            raise ValueError("a misfit scope names one category or one worker")

    @property
    def kind(self) -> str:
        return "category" if self.category_id is not None else "worker"

    @property
    def params(self) -> dict[str, int]:
        value = self.category_id if self.category_id is not None else self.worker_id
        assert value is not None
        return {SCOPE_PARAM: value}


def _scope_id() -> BindParameter[int]:
    return reasons.scope_id()


def _narrow(
    kind: str,
    level: str,
    category_id: InstrumentedAttribute[int],
    value: type[AttributeValue],
) -> list[ColumnElement[bool]]:
    """Scope filters for rows of (category, value at ``level``)."""
    if kind == "category":
        return [category_id == _scope_id()]
    if level == "host":
        return [value.object_key == _scope_id()]
    if level == "queue_instance":
        return [value.worker_id == _scope_id()]
    return []


def _forced(attribute: type[Attribute], value: type[AttributeValue]) -> list[ColumnElement[bool]]:
    """A FORCED attribute's value: only jobs that request the attribute may use it."""
    return [attribute.requestable == "FORCED"]


def _default_exceeds_capacity(
    attribute: type[Attribute], value: type[AttributeValue]
) -> list[ColumnElement[bool]]:
    """A consumable capacity below the attribute's default, which a job that does not
    request the attribute is booked for."""
    return [
        value.kind == "fixed",
        attribute.consumable != "NO",
        attribute.relop != "EXCL",
        attribute.default_number > 0,
        not_(attribute.default_number <= value.number),
    ]


def _checked_here(
    level: str, attribute: type[Attribute], is_parallel: ColumnElement[bool]
) -> list[ColumnElement[bool]]:
    """A per-job (JOB) consumable of a parallel job is checked at its master queue only
    (app/matching/gridengine/master.py): a host or queue instance that cannot supply it may
    still take slave tasks, so it is no static misfit there. The global host is every
    job's, master included."""
    if level == "global":
        return []
    return [or_(attribute.consumable != "JOB", attribute.relop == "EXCL", not_(is_parallel))]


def _unrequested_values(
    kind: str,
    level: str,
    rejects: Callable[[type[Attribute], type[AttributeValue]], list[ColumnElement[bool]]],
) -> Select[int, int]:
    """(category id, object key) pairs where a value at ``level`` that ``rejects`` holds
    for meets a category that has no hard request of its attribute."""
    c, a, v, cr = (
        aliased(Category),
        aliased(Attribute),
        aliased(AttributeValue),
        aliased(CategoryRequest),
    )
    return (
        select(c.id, v.object_key).select_from(c).join(v, true()).join(a, a.id == v.attribute_id)
    ).where(
        v.level == level,
        *rejects(a, v),
        *_checked_here(level, a, c.pe.is_not(None)),
        ~exists()
        .where(cr.category_id == c.id, cr.soft.is_(False), cr.attribute_id == a.id)
        .correlate_except(cr),
        *_narrow(kind, level, c.id, v),
    )


def rejected_objects(kind: str, level: str) -> Select[int, int]:
    """(category id, object key) pairs where the object at ``level`` rejects the
    category's hard requests, FORCED attributes or consumable defaults."""
    cr, a, v = aliased(CategoryRequest), aliased(Attribute), aliased(AttributeValue)
    parallel = aliased(Category)
    is_parallel = (
        exists().where(parallel.id == cr.category_id, parallel.pe.is_not(None))
    ).correlate_except(parallel)
    mismatch = select(cr.category_id, v.object_key).where(
        cr.soft.is_(False),
        v.attribute_id == cr.attribute_id,
        v.level == level,
        _static(v),
        a.id == cr.attribute_id,
        not_(_satisfied(a, cr, v)),
        *_checked_here(level, a, is_parallel),
        *_narrow(kind, level, cr.category_id, v),
    )
    # Categories x values on purpose: a FORCED value rejects every category that does not
    # request it (the scope keeps one side small).
    forced = _unrequested_values(kind, level, _forced)
    default = _unrequested_values(kind, level, _default_exceeds_capacity)
    return union_all(mismatch, forced, default)  # type: ignore[return-value]


def _no_value(
    request: type[CategoryRequest], level: str, object_key: InstrumentedAttribute[int] | None
) -> ColumnElement[bool]:
    """The requested attribute has no value at ``level`` (at the object ``object_key``
    names, below the global level)."""
    value = aliased(AttributeValue)
    at_object = [] if object_key is None else [value.object_key == object_key]
    return ~(
        exists()
        .where(value.attribute_id == request.attribute_id, value.level == level, *at_object)
        .correlate_except(value)
    )


def fitting_queue_hosts(kind: str, *, available: bool = False) -> Select[int, int]:
    """(category id, worker id) pairs where some queue instance of the worker passes its
    own level and knows every hard request somewhere (global, host or itself), with
    enough slots, and may take the category's jobs by their ``-q``/``-masterq`` lists;
    with ``available``, an instance that is neither disabled nor suspended."""
    c, qi = aliased(Category), aliased(QueueInstance)
    rejected = rejected_objects(kind, "queue_instance").subquery()
    cr, a = aliased(CategoryRequest), aliased(Attribute)
    # Three probes of the (attribute, level, object, kind) index rather than one EXISTS
    # with an OR, which no index serves. A JOB consumable of a parallel job need not be
    # known to a slave queue.
    unknown = (
        exists()
        .where(
            cr.category_id == c.id,
            cr.soft.is_(False),
            a.id == cr.attribute_id,
            *_checked_here("queue_instance", a, c.pe.is_not(None)),
            _no_value(cr, "global", None),
            _no_value(cr, "host", qi.worker_id),
            _no_value(cr, "queue_instance", qi.id),
        )
        .correlate_except(cr)
    )
    narrow = [c.id == _scope_id()] if kind == "category" else [qi.worker_id == _scope_id()]
    if available:
        narrow.append(qi.states == "")
    return select(c.id, qi.worker_id).where(
        qi.slots >= c.slots,
        *narrow,
        allowed_instance(c, qi),
        tuple_(c.id, qi.id).not_in(select(rejected.c.category_id, rejected.c.object_key)),
        not_(unknown),
    )


@lru_cache(maxsize=8)
def complex_reasons(
    category: type[Category], worker: type[Worker], kind: str
) -> tuple[tuple[ColumnElement[bool], str], ...]:
    """(condition, reason code) pairs for the misfit CASE of a statement of scope ``kind``
    (its id bound as :data:`SCOPE_PARAM`), in hierarchy order. Categories and clusters
    without complex rows pass them at the cost of a few index probes. Built once per
    kind: aliasing the models is what costs (hundreds of ms per statement otherwise)."""
    rejected_global = rejected_objects(kind, "global").subquery()
    rejected_host = rejected_objects(kind, "host").subquery()
    pair = tuple_(category.id, worker.id)
    return (
        (category.id.in_(select(rejected_global.c.category_id)), "sge-global"),
        (
            pair.in_(select(rejected_host.c.category_id, rejected_host.c.object_key)),
            "sge-host",
        ),
        (pair.not_in(fitting_queue_hosts(kind)), "sge-queue"),
        (pair.not_in(fitting_queue_hosts(kind, available=True)), "sge-queue-unavailable"),
    )


def _misfit_clauses(pair: MisfitPair) -> tuple[ReasonClause, ...]:
    return complex_reasons(pair.category, pair.worker, pair.scope_kind)


MISFITS = MisfitClauses(REASONS, _misfit_clauses)
