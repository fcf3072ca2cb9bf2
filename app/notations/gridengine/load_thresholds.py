"""A queue's ``load_thresholds`` (queue_conf(5)): ``np_load_avg=1.75,mem_free=1G``
(docs/notations/gridengine.md#load-thresholds).

queue_conf(5): "a comma separated list with each list element consisting of the
complex_name of a load value, an equal sign and the threshold value"; when one threshold
is exceeded no further jobs are scheduled to the queue. Grid Engine 6.2u5 decides it in
``load_check_alarm()`` (source/libs/sched/sge_select_queue.c): the instance is in alarm
when ``load RELOP threshold`` holds with the attribute's relop (``resource_cmp()``), so
``load_avg`` (``>=``) alarms at a load at or above the threshold and ``mem_free`` (``<=``)
at or below it.

jobmatch takes numeric, non-consumable attributes only: string thresholds and consumables
(which 6.2u5 compares with their free amount) are refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from app.notations.errors import NotationError
from app.notations.gridengine.attribute_table import ComplexTable
from app.notations.gridengine.definitions import ComplexDefinition, ComplexError
from app.notations.gridengine.values import compare, parse_value
from app.notations.quantities import QuantityError

__all__ = [
    "MAX_THRESHOLDS",
    "LoadThreshold",
    "LoadThresholdError",
    "LoadThresholds",
    "parse_load_thresholds",
]

#: Items one list may hold (a queue's thresholds are checked for every job it is offered).
MAX_THRESHOLDS = 64


class LoadThresholdError(NotationError):
    """A ``load_thresholds`` list names an unknown, string or consumable attribute, lacks
    ``=value`` or has a value its attribute's type does not parse."""

    notation = "queue_conf load_thresholds"


@dataclass(frozen=True)
class LoadThreshold:
    """One threshold: the attribute (full name), the value as written and parsed."""

    definition: ComplexDefinition
    text: str
    limit: float

    def exceeded(self, load: float) -> bool:
        """``load RELOP threshold`` (resource_cmp() of 6.2u5): the instance is in alarm."""
        return compare(self.definition.type, self.definition.relop, load, self.limit)

    def to_text(self) -> str:
        return f"{self.definition.name}={self.text}"


@dataclass(frozen=True)
class LoadThresholds:
    """A queue's thresholds in the order given (empty: the queue never alarms)."""

    items: tuple[LoadThreshold, ...] = ()

    def __iter__(self) -> Iterator[LoadThreshold]:
        return iter(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def text(self) -> str:
        """``name=value`` items joined by commas, ``NONE`` when empty (queue_conf's form)."""
        return ",".join(item.to_text() for item in self.items) or "NONE"


def _fail(message: str, text: str, position: int, expected: str) -> LoadThresholdError:
    return LoadThresholdError(message, text=text, position=position, expected=expected)


def parse_load_thresholds(text: str, table: ComplexTable) -> LoadThresholds:
    """Parse ``text`` (``NONE`` or blank: no thresholds) against the attribute table; a
    later threshold of the same attribute replaces an earlier one."""
    if not text.strip() or text.strip().upper() == "NONE":
        return LoadThresholds()
    found: dict[str, LoadThreshold] = {}
    start = 0
    for item in text.split(","):
        offset = start + len(item) - len(item.lstrip())
        start += len(item) + 1
        name, equals, value = (part.strip() for part in item.partition("="))
        if not name:
            raise _fail("empty threshold", text, offset, "name=value")
        if not equals or not value:
            raise _fail(
                f"threshold {name!r} has no value", text, offset + len(name), "'=' and a value"
            )
        try:
            definition = table.resolve(name, text=text, position=offset)
        except ComplexError as error:
            raise _fail(error.message, text, offset, "the name of a load value") from None
        if not definition.type.is_numeric or definition.is_consumable:
            raise _fail(
                f"{definition.name} is a {definition.type.value}"
                + (" consumable" if definition.is_consumable else "")
                + " attribute; thresholds are taken on numeric load values",
                text,
                offset,
                "a numeric, non-consumable attribute such as np_load_avg",
            )
        value_at = offset + item.strip().index("=") + 1 + (len(item.split("=", 1)[1]) - len(value))
        try:
            limit = parse_value(definition, value, role="load")
        except QuantityError as error:
            raise _fail(error.message, text, value_at, error.expected or "a number") from None
        assert isinstance(limit, float)
        if len(found) == MAX_THRESHOLDS and definition.name not in found:
            raise _fail(
                f"more than {MAX_THRESHOLDS} thresholds",
                text[:64] + "...",
                offset,
                f"at most {MAX_THRESHOLDS}",
            )
        found[definition.name] = LoadThreshold(definition, value, limit)
    return LoadThresholds(tuple(found.values()))
