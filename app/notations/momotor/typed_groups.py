"""Value-type resources: the typed groups Momotor planned ("ram >= 1 GiB") and never built.

A group is typed only when the caller declares it, e.g.
``Resources.from_string(text, typed={"ram": "memory"})``; every other group keeps Momotor's
tag semantics, so declaring nothing gives exactly Momotor. The declaration is not part of the
text: both sides of a match must be parsed with the same declarations (a typed group against
a non-empty tag group raises :class:`~app.notations.momotor.errors.GroupKindMismatchError`).

Types: ``int``, ``double``, ``memory`` (bytes), ``time`` (seconds), any case, or the
:class:`~app.notations.quantities.ValueType` members INT, DOUBLE, MEMORY, TIME. Numbers use
Grid Engine's value syntax (docs/notations/gridengine.md#values: ``2G``, ``1.5g``, ``0x10K``,
``1:30:00``,
``INFINITY``); MEMORY also takes the binary units ``KiB``, ``MiB``, ``GiB``, ``TiB``, with or
without a space (``1 GiB``, ``512MiB``).

Items of a typed group (after Momotor's own quoting and escaping rules)::

    = v   or  v     a value this side states ("ram = 2147483648")
    op v            a required condition on the other side's value
    ?op v           an optional condition
    op is one of  <  <=  ==  !=  >=  >      ("=" states, "==" tests)

A group states at most one value; a condition reads "<other side's value> op v", so a job's
``ram >= 1 GiB`` against a worker's ``ram = 2147483648`` holds, and a worker's ``ram <= 4G``
constrains the value a job states. Conditions may sit on either side and are judged the same.

Comparison strength table (the value is the group's cell, combined as for tags: the minimum
within the group, the maximum across groups, a group without cells counts as NEUTRAL)::

    condition \\ other side | states a value that holds | a value that fails | no value
    required  op v         | STRONG (-1.0)             | NoMatch            | NoMatch
    optional ?op v         | STRONG (-1.0)             | ignored            | ignored
    a stated value = v     | no cell of its own (it only answers conditions)

So a worker that meets a job's preference ranks better (STRONG) than one that does not
(NEUTRAL), and a missed requirement rejects the pair as a missing required tag does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from app.notations.errors import did_you_mean
from app.notations.momotor.errors import GroupKindMismatchError, TagsError
from app.notations.momotor.strengths import STRONG, NoMatch
from app.notations.quantities import QuantityError, ValueType, canonical_number, parse_number

__all__ = [
    "BINARY_UNITS",
    "OPERATORS",
    "Comparison",
    "ComparisonSyntaxError",
    "ConflictingValuesError",
    "UnknownValueTypeError",
    "ValueGroup",
    "declared_types",
    "parse_comparison",
    "parse_quantity",
]

#: Comparison operators; "=" states a value, the others are conditions.
OPERATORS: Final = ("<", "<=", "=", "==", "!=", ">=", ">")
#: Binary unit suffixes accepted for MEMORY values, in bytes.
BINARY_UNITS: Final = {"KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}
#: The strength of a condition that holds.
MET: Final = STRONG

_TYPES: Final = {
    t.value.lower(): t for t in (ValueType.INT, ValueType.DOUBLE, ValueType.MEMORY, ValueType.TIME)
}
_ITEM_RE: Final = re.compile(r"(?P<opt>\?)?[ \t]*(?P<op><=|>=|==|!=|<|>|=)?[ \t]*(?P<num>.*)", re.S)
_BINARY_RE: Final = re.compile(r"(?P<num>.*?)[ \t]?(?P<unit>[KMGT]iB)", re.S)


class UnknownValueTypeError(TagsError):
    """A typed-group declaration names a type that value-type resources do not support."""


class ComparisonSyntaxError(TagsError):
    """An item of a typed group is not a comparison ``[?]op number`` or a value ``= number``."""


class ConflictingValuesError(TagsError):
    """A typed group states two different values."""


def declared_types(typed: Mapping[str, ValueType | str]) -> dict[str, ValueType]:
    """Group name -> value type, checked; names are matched exactly as group names are."""
    result: dict[str, ValueType] = {}
    for name, kind in typed.items():
        key = kind.value.lower() if isinstance(kind, ValueType) else str(kind).strip().lower()
        found = _TYPES.get(key)
        if found is None:
            raise UnknownValueTypeError(
                f"group {name!r} is declared with unknown value type {kind!r}"
                + did_you_mean(key, _TYPES),
                text=str(kind),
                position=0,
                expected="one of " + ", ".join(_TYPES),
            )
        result[name] = found
    return result


def parse_quantity(text: str, value_type: ValueType) -> float:
    """A number of ``value_type`` in Grid Engine syntax, or for MEMORY with a binary unit.

    Raises :class:`~app.notations.quantities.QuantityError` (position inside ``text``).
    """
    binary = _BINARY_RE.fullmatch(text)
    if binary is not None:
        if value_type is not ValueType.MEMORY:
            raise QuantityError(
                f"binary unit {binary['unit']!r} in a {value_type.value_noun}",
                text=text,
                position=binary.start("unit"),
                expected="a plain number; binary units are for memory values",
            )
        number = binary["num"]
        if not number or number[-1] in " \t":
            raise QuantityError(
                f"no number before {binary['unit']!r}",
                text=text,
                position=binary.start("unit"),
                expected="a number then at most one blank before the unit",
            )
        return parse_number(number, value_type) * BINARY_UNITS[binary["unit"]]
    return parse_number(text, value_type)


@dataclass(frozen=True, slots=True)
class Comparison:
    """One item of a typed group: a stated value (``=``) or a condition on the other side."""

    operator: str
    value: float
    required: bool = True

    @property
    def optional(self) -> bool:
        """Written with ``?``: unmet is ignored instead of NoMatch."""
        return not self.required

    @property
    def excluded(self) -> bool:
        """Always False: comparisons have no excluded mode (use ``!=``)."""
        return False

    @property
    def states_value(self) -> bool:
        """``= v``: this side's value, not a condition."""
        return self.operator == "="

    def holds(self, other: float) -> bool:
        """Whether ``other op value`` is true."""
        op = self.operator
        if op == "<":
            return other < self.value
        if op == "<=":
            return other <= self.value
        if op in ("=", "=="):
            return other == self.value
        if op == "!=":
            return other != self.value
        if op == ">=":
            return other >= self.value
        return other > self.value

    def as_str(self, value_type: ValueType = ValueType.DOUBLE) -> str:
        """Canonical text: optional ``?``, the operator, a blank, the exact number."""
        prefix = "" if self.required else "?"
        return f"{prefix}{self.operator} {canonical_number(self.value, value_type)}"


def parse_comparison(
    text: str, value_type: ValueType, *, position: int = 0, source: str | None = None
) -> Comparison:
    """One typed item (already unquoted and unescaped). ``position`` is where the item starts
    in ``source``; errors carry positions in ``source``."""
    source = text if source is None else source
    if text.startswith("~"):
        raise ComparisonSyntaxError(
            f"excluded item {text!r} in a typed group",
            text=source,
            position=position,
            expected="a comparison such as '!= 4' or '< 4' instead of the '~' prefix",
        )
    found = _ITEM_RE.fullmatch(text)
    assert found is not None  # every part of the pattern is optional
    operator = found["op"] or "="
    optional = found["opt"] is not None
    number = found["num"].rstrip(" \t")
    if not number:
        raise ComparisonSyntaxError(
            f"comparison {text!r} has no number",
            text=source,
            position=position + found.start("num"),
            expected=f"a {value_type.value_noun} after {operator!r}",
        )
    if optional and operator == "=":
        raise ComparisonSyntaxError(
            f"stated value {text!r} cannot be optional",
            text=source,
            position=position,
            expected="'= v' for a value, or '?op v' with op one of < <= == != >= >",
        )
    try:
        value = parse_quantity(number, value_type)
    except QuantityError as error:
        raise ComparisonSyntaxError(
            f"bad {value_type.value_noun} {number!r} in {text!r}: {error.message}",
            text=source,
            position=position + found.start("num") + (error.position or 0),
            expected=error.expected
            or f"an operator ({' '.join(OPERATORS)}) then a {value_type.value_noun}",
        ) from error
    return Comparison(operator, value, not optional)


class ValueGroup:
    """A typed group: at most one stated value and any number of conditions, immutable."""

    __slots__ = ("_conditions", "_hash", "_items", "_required", "_value", "value_type")

    value_type: ValueType
    _items: tuple[Comparison, ...]
    _value: float | None
    _conditions: tuple[Comparison, ...]
    _required: bool
    _hash: int

    def __init__(
        self, value_type: ValueType, items: Iterable[Comparison] = (), *, name: str | None = None
    ) -> None:
        unique = tuple(dict.fromkeys(items))
        values = [item for item in unique if item.states_value]
        if len(values) > 1:
            where = "this group" if name is None else f"group {name!r}"
            texts = " and ".join(repr(item.as_str(value_type)) for item in values[:2])
            raise ConflictingValuesError(
                f"{where} states two values: {texts}",
                expected="one '= v' per typed group",
            )
        setter = object.__setattr__
        setter(self, "value_type", value_type)
        setter(self, "_items", unique)
        setter(self, "_value", values[0].value if values else None)
        setter(self, "_conditions", tuple(item for item in unique if not item.states_value))
        setter(self, "_required", any(item.required for item in self._conditions))
        setter(self, "_hash", hash((value_type, unique)))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("ValueGroup is immutable")

    @classmethod
    def parse(
        cls, name: str, value_type: ValueType, items: Sequence[tuple[str, int, str]]
    ) -> ValueGroup:
        """The group from located item texts ``(text, position, source)``."""
        parsed = [
            parse_comparison(text, value_type, position=at, source=source)
            for text, at, source in items
        ]
        try:
            return cls(value_type, parsed, name=name)
        except ConflictingValuesError as error:
            second = [i for i, item in enumerate(parsed) if item.states_value][1]
            error.text = items[second][2]
            error.position = items[second][1]
            error.args = (error._render(),)
            raise

    @property
    def items(self) -> tuple[Comparison, ...]:
        """The comparisons in first-seen order."""
        return self._items

    @property
    def value(self) -> float | None:
        """The value this side states, if any."""
        return self._value

    def __len__(self) -> int:
        return len(self._items)

    def match(self, worker_group: object) -> float | None:
        """This (task) group against the worker's: STRONG, None (no cell) or NoMatch."""
        return self._match(worker_group)

    def _match(self, worker: object) -> float | None:
        other_value: float | None = None
        other_conditions: tuple[Comparison, ...] = ()
        if isinstance(worker, ValueGroup):
            if worker.value_type is not self.value_type:
                raise GroupKindMismatchError(
                    f"a {self.value_type.value} group cannot be matched against a "
                    f"{worker.value_type.value} group",
                    expected="the same typed-group declarations on both sides",
                )
            other_value = worker._value
            other_conditions = worker._conditions
        elif worker is not None and len(worker):  # type: ignore[arg-type]
            raise GroupKindMismatchError(
                "a typed group cannot be matched against a tag group",
                expected="the same typed-group declarations on both sides",
            )
        best = _judge(self._conditions, other_value)
        theirs = _judge(other_conditions, self._value)
        if best is None:
            return theirs
        return best if theirs is None else min(best, theirs)

    def as_str_tuple(self) -> tuple[str, ...]:
        """The canonical item texts."""
        return tuple(item.as_str(self.value_type) for item in self._items)

    def as_str(self) -> str:
        """The canonical items joined by ``,`` (they never need quotes or escapes)."""
        return ",".join(self.as_str_tuple())

    @classmethod
    def union_named(cls, name: str, parts: Sequence[object]) -> ValueGroup:
        """The union of same-typed groups of one name (used by ``Resources.union``)."""
        kinds = {part.value_type for part in parts if isinstance(part, ValueGroup)}
        tags_present = any(not isinstance(part, ValueGroup) and len(part) for part in parts)  # type: ignore[arg-type]
        if len(kinds) != 1 or tags_present:
            raise GroupKindMismatchError(
                f"group {name!r} is typed differently in the definitions being combined",
                expected="the same typed-group declarations everywhere",
            )
        items = [item for part in parts if isinstance(part, ValueGroup) for item in part._items]
        return cls(kinds.pop(), items, name=name)

    @classmethod
    def difference_named(cls, name: str, group: object, other: object) -> ValueGroup:
        """``group`` without the items of ``other`` (used by ``Resources.difference``)."""
        if not isinstance(group, ValueGroup) or (
            not isinstance(other, ValueGroup) and len(other)  # type: ignore[arg-type]
        ):
            raise GroupKindMismatchError(
                f"group {name!r} is typed differently in the definitions being combined",
                expected="the same typed-group declarations everywhere",
            )
        drop = set(other._items) if isinstance(other, ValueGroup) else set()
        return cls(group.value_type, [item for item in group._items if item not in drop], name=name)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, ValueGroup):
            return NotImplemented
        return self.value_type is other.value_type and self._items == other._items

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"ValueGroup({self.value_type.value}, {self.as_str()!r})"


def _judge(conditions: tuple[Comparison, ...], value: float | None) -> float | None:
    """The strongest cell of ``conditions`` against the other side's ``value``."""
    best: float | None = None
    for condition in conditions:
        if value is not None and condition.holds(value):
            best = MET
        elif condition.required:
            raise NoMatch
    return best
