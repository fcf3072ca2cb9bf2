"""Hard ``-l`` requests as SQL predicates, level by level with the strict hierarchy
(research/sge.md section e), for the misfit cache.

A request fails an object (the global host, a worker, a queue instance) when the object
has an *effective* static value of the attribute that does not satisfy
``requested RELOP offered``: numbers compare the normalised ``number`` columns, strings
test the offered ``string`` against the request's compiled regex
(app/notations/complex_regex.py) with PostgreSQL ``~`` or SQLite ``REGEXP``. Every row
that counts is checked, which for ``<``, ``<=``, ``>``, ``>=`` is the same as checking the
most restrictive one (the within-object merge); for ``==``/``!=`` only the row of highest
precedence counts (``effective``). A consumable's fixed value is its capacity: the static
test is that one slot's request fits the whole capacity; the booked part is dynamic.

An object also fails when a FORCED attribute is present there and the job does not
hard-request it, or when an unrequested consumable's non-zero default exceeds the
capacity there. A queue instance fails as well when a hard request is present at none of
global, its host and itself ("unknown resource"), or has too few slots.

Reason codes (added to app/matching/misfits.py):

==========  ============================================================================
sge-global  the global host rejects the job: no worker can take it
sge-host    the worker (execution host) rejects it
sge-queue   every queue instance of the worker rejects it (or it has none)
==========  ============================================================================

Numeric load values are left out: they change all the time and are checked at dispatch
time by the reference evaluator, together with consumable availability.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, ColumnExpressionArgument, and_, case, exists, not_, or_
from sqlalchemy.orm import aliased

from app.db.models import (
    Attribute,
    AttributeValue,
    Category,
    CategoryRequest,
    QueueInstance,
    Worker,
)

REASONS = {
    "sge-global": "a hard request does not fit the global host",
    "sge-host": "a hard request does not fit the execution host",
    "sge-queue": "no queue instance of the worker fits the hard requests",
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
    matched = value.string.regexp_match(request.regex)
    string = case((relop == "==", matched), else_=not_(matched))
    return case((request.regex.is_not(None), string), else_=numeric)


def _static(value: type[AttributeValue]) -> ColumnElement[bool]:
    """Rows the static cache may use: fixed and built-in values, string load values."""
    return and_(value.effective, or_(value.kind != "load", value.string.is_not(None)))


def level_rejects(
    category_id: ColumnExpressionArgument[int],
    level: str,
    object_key: ColumnExpressionArgument[int] | int,
) -> ColumnElement[bool]:
    """True when the object at ``level`` rejects the category's hard requests, FORCED
    attributes or consumable defaults."""
    cr, a, v = aliased(CategoryRequest), aliased(Attribute), aliased(AttributeValue)
    mismatch = (
        exists()
        .where(
            cr.category_id == category_id,
            cr.soft.is_(False),
            v.attribute_id == cr.attribute_id,
            v.level == level,
            v.object_key == object_key,
            _static(v),
            a.id == cr.attribute_id,
            not_(_satisfied(a, cr, v)),
        )
        .correlate_except(cr, a, v)
    )
    fa, fv, fcr = aliased(Attribute), aliased(AttributeValue), aliased(CategoryRequest)
    forced = (
        exists()
        .where(
            fv.level == level,
            fv.object_key == object_key,
            fa.id == fv.attribute_id,
            fa.requestable == "FORCED",
            ~exists()
            .where(
                fcr.category_id == category_id,
                fcr.soft.is_(False),
                fcr.attribute_id == fa.id,
            )
            .correlate_except(fcr),
        )
        .correlate_except(fa, fv)
    )
    da, dv, dcr = aliased(Attribute), aliased(AttributeValue), aliased(CategoryRequest)
    default = (
        exists()
        .where(
            dv.level == level,
            dv.object_key == object_key,
            dv.kind == "fixed",
            da.id == dv.attribute_id,
            da.consumable != "NO",
            da.relop != "EXCL",
            da.default_number > 0,
            not_(da.default_number <= dv.number),
            ~exists()
            .where(
                dcr.category_id == category_id,
                dcr.soft.is_(False),
                dcr.attribute_id == da.id,
            )
            .correlate_except(dcr),
        )
        .correlate_except(da, dv)
    )
    return or_(mismatch, forced, default)


def queue_instance_fits(category: type[Category], worker: type[Worker]) -> ColumnElement[bool]:
    """Some queue instance of the worker passes its own level and knows every hard
    request somewhere (global, host or itself), with enough slots."""
    qi = aliased(QueueInstance)
    cr, v = aliased(CategoryRequest), aliased(AttributeValue)
    unknown = (
        exists()
        .where(
            cr.category_id == category.id,
            cr.soft.is_(False),
            ~exists()
            .where(
                v.attribute_id == cr.attribute_id,
                or_(
                    v.level == "global",
                    and_(v.level == "host", v.object_key == worker.id),
                    and_(v.level == "queue_instance", v.object_key == qi.id),
                ),
            )
            .correlate_except(v),
        )
        .correlate_except(cr)
    )
    # Every subquery names the tables it owns and correlates the rest explicitly: nested
    # EXISTS only auto-correlate to the immediately enclosing SELECT, and would otherwise
    # take categories/workers as FROMs of their own.
    return (
        exists()
        .where(
            qi.worker_id == worker.id,
            qi.slots >= category.slots,
            not_(level_rejects(category.id, "queue_instance", qi.id)),
            not_(unknown),
        )
        .correlate_except(qi)
    )


def complex_reasons(
    category: type[Category], worker: type[Worker]
) -> list[tuple[ColumnElement[bool], str]]:
    """(condition, reason code) pairs for the misfit CASE, in hierarchy order. Categories
    and clusters without complex rows pass them at the cost of a few index probes."""
    return [
        (level_rejects(category.id, "global", 0), "sge-global"),
        (level_rejects(category.id, "host", worker.id), "sge-host"),
        (not_(queue_instance_fits(category, worker)), "sge-queue"),
    ]
