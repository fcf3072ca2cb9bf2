"""Grid Engine complex attributes: definitions, the attribute table, values and comparisons.

One row of ``qconf -sc`` is a :class:`ComplexDefinition` (``name shortcut type relop
requestable consumable default urgency``). A definition is validated when it is built, by
the 6.2u5 rules (docs/notations/gridengine.md#the-attribute-table; they refine section 2 of the 2003
Complex Attribute Specification):

* string types (STRING, CSTRING, RESTRING, HOST): relop ``==`` or ``!=``, never consumable;
* BOOL: relop ``==``, or ``EXCL`` which requires a consumable; a BOOL consumable must use
  ``EXCL``;
* INT, DOUBLE, MEMORY, TIME: any relop but ``EXCL``;
* consumables (YES or JOB): relop ``<=`` (``EXCL`` for BOOL); requestable NO needs a
  non-zero default, FORCED a zero default; the default is a consumable amount (finite,
  not negative);
* non-consumables: the default must be 0 (numbers) or ``NONE`` (strings);
* the urgency is a number; ``tmpdir`` can never be requestable.

The rules that span rows live in app/notations/gridengine/attribute_table.py, values
and comparisons in app/notations/gridengine/values.py.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Self

from app.notations.errors import NotationError, did_you_mean
from app.notations.quantities import (
    QuantityError,
    ValueType,
    canonical_number,
    parse_number,
)

#: A parsed complex value: a number (bytes, seconds, 0/1, ...) or a string.
Value = float | str

#: Maps a host name to its canonical name, or None when it cannot be resolved.
HostResolver = Callable[[str], str | None]

#: Built-in string attributes may switch among these types (complex(5); gridengine.md).
STRING_FAMILY = frozenset({ValueType.STRING, ValueType.CSTRING, ValueType.RESTRING})

# Characters that cannot appear in attribute names: Grid Engine's key check forbids the
# first group; "=", ",", blanks and the expression operators would break "-l" lists.
_FORBIDDEN_NAME_CHARACTERS = frozenset(" \t\n\r\v\f/:'\"[]{}|()@%,=!&*?\\")


class ComplexError(NotationError):
    """A complex attribute definition or table violates Grid Engine's validity rules, or a
    value does not fit its attribute (an unknown type, relop or requestable keyword, a
    duplicate name, a relop the type does not allow, a default that is not allowed, ...)."""

    notation = "sge-complex"


class Relop(enum.Enum):
    """Relational operator of a complex; evaluated as ``requested RELOP offered``."""

    EQ = "=="
    NE = "!="
    LE = "<="
    LT = "<"
    GE = ">="
    GT = ">"
    EXCL = "EXCL"

    @classmethod
    def parse(cls, text: str) -> Relop:
        """The relop written as in ``qconf -sc`` (``EXCL`` in any case)."""
        token = text.strip()
        for relop in cls:
            if token == relop.value or (relop is Relop.EXCL and token.upper() == "EXCL"):
                return relop
        hint = {"=<": "<=", "=>": ">=", "=": "==", "<>": "!="}.get(token)
        suffix = f", did you mean {hint!r}?" if hint else did_you_mean(token, _RELOP_WORDS)
        raise ComplexError(
            f"unknown relational operator {text!r}{suffix}",
            text=text,
            position=0,
            expected="one of " + ", ".join(_RELOP_WORDS),
        )


_RELOP_WORDS = [relop.value for relop in Relop]


class _Keyword(enum.Enum):
    """A ``qconf -sc`` column whose values are upper-case keywords (read case-insensitively)."""

    @classmethod
    def parse(cls, text: str) -> Self:
        token = text.strip().upper()
        for member in cls:
            if member.value == token:
                return member
        words = [str(member.value) for member in cls]
        raise ComplexError(
            f"invalid {cls.__name__.lower()} value {text!r}{did_you_mean(token, words)}",
            text=text,
            position=0,
            expected="one of " + ", ".join(words),
        )


class Requestable(_Keyword):
    """Whether ``-l`` may name the attribute (YES), must name it where present (FORCED),
    or may not name it (NO)."""

    NO = "NO"
    YES = "YES"
    FORCED = "FORCED"


class Consumable(_Keyword):
    """NO, YES (amount per slot) or JOB (amount per job, booked on the master queue)."""

    NO = "NO"
    YES = "YES"
    JOB = "JOB"


def _check_name(name: str, column: str) -> None:
    if not name:
        raise ComplexError(f"empty attribute {column}", text=name, position=0, expected=column)
    for position, char in enumerate(name):
        if char in _FORBIDDEN_NAME_CHARACTERS:
            raise ComplexError(
                f"attribute {column} {name!r} contains {char!r}",
                text=name,
                position=position,
                expected="letters, digits, '_', '-' or '.'",
            )


@dataclass(frozen=True)
class ComplexDefinition:
    """One complex attribute (one ``qconf -sc`` row); validated on construction."""

    name: str
    shortcut: str
    type: ValueType
    relop: Relop
    requestable: Requestable
    consumable: Consumable
    default: str
    urgency: float = 0.0

    def __post_init__(self) -> None:
        _check_name(self.name, "name")
        _check_name(self.shortcut, "shortcut")
        self._check_relop()
        self._check_default()

    @property
    def is_consumable(self) -> bool:
        return self.consumable is not Consumable.NO

    @cached_property
    def default_value(self) -> Value:
        """The default parsed for the type (a number for numeric types); parsed once per
        definition (definitions are immutable, and the evaluator asks for the default of
        every consumable it checks). cached_property stores it in the instance dict, past
        the frozen dataclass's __setattr__; it is no field, so equality and hashing do not
        see it."""
        if self.type.is_numeric:
            return parse_number(self.default, self.type)
        return self.default

    def _fail(self, message: str, expected: str) -> ComplexError:
        return ComplexError(
            f"attribute {self.name!r}: {message}", text=self.to_line(), expected=expected
        )

    def _check_relop(self) -> None:
        kind, relop = self.type, self.relop
        if kind.is_string:
            if relop not in (Relop.EQ, Relop.NE):
                raise self._fail(
                    f"relop {relop.value} is not allowed for type {kind.value}", "'==' or '!='"
                )
            if self.is_consumable:
                raise self._fail(
                    f"type {kind.value} cannot be consumable",
                    "consumable NO, or a numeric type",
                )
            return
        if kind is ValueType.BOOL:
            if relop not in (Relop.EQ, Relop.EXCL):
                raise self._fail(
                    f"relop {relop.value} is not allowed for type BOOL", "'==' or 'EXCL'"
                )
            if relop is Relop.EXCL and not self.is_consumable:
                raise self._fail("relop EXCL needs a consumable", "consumable YES or JOB")
            if self.is_consumable and relop is not Relop.EXCL:
                raise self._fail("a BOOL consumable must use relop EXCL", "relop EXCL")
            return
        if relop is Relop.EXCL:
            raise self._fail(
                f"relop EXCL is only allowed for BOOL consumables, not {kind.value}",
                "one of ==, !=, <=, <, >=, >",
            )
        if self.is_consumable and relop is not Relop.LE:
            raise self._fail(f"a consumable must use relop <=, not {relop.value}", "relop '<='")

    def _check_default(self) -> None:
        if self.name == "tmpdir" and self.requestable is not Requestable.NO:
            raise self._fail("tmpdir can never be requestable", "requestable NO")
        if self.type.is_string:
            if self.default.upper() != "NONE":
                raise self._fail(
                    f"default {self.default!r} for a non-consumable; defaults are only "
                    "meaningful for consumables",
                    "default NONE",
                )
            return
        try:
            value = parse_number(self.default, self.type, consumable=self.is_consumable)
        except QuantityError as error:
            raise self._fail(f"invalid default: {error.message}", "a valid default") from None
        if not self.is_consumable:
            if value != 0:
                raise self._fail(
                    f"default {self.default!r} for a non-consumable; defaults are only "
                    "meaningful for consumables",
                    "default 0",
                )
        elif self.requestable is Requestable.NO and value == 0:
            raise self._fail(
                "a non-requestable consumable needs a non-zero default",
                "a default other than 0",
            )
        elif self.requestable is Requestable.FORCED and value != 0:
            raise self._fail("a forced consumable must not have a default", "default 0")

    # -- text forms ------------------------------------------------------------------------

    def to_row(self) -> dict[str, str | float]:
        """The definition as a dict with the column names of ``complex_defaults.jsonl``."""
        return {
            "name": self.name,
            "shortcut": self.shortcut,
            "type": self.type.value,
            "relop": self.relop.value,
            "requestable": self.requestable.value,
            "consumable": self.consumable.value,
            "default": self.default,
            "urgency": self.urgency,
        }

    def to_line(self) -> str:
        """The ``qconf -sc`` line: ``name shortcut type relop requestable consumable default
        urgency``; parses back with :meth:`from_line` to an equal definition."""
        return " ".join(
            (
                self.name,
                self.shortcut,
                self.type.value,
                self.relop.value,
                self.requestable.value,
                self.consumable.value,
                self.default,
                canonical_number(self.urgency, ValueType.DOUBLE),
            )
        )

    @classmethod
    def from_line(cls, line: str) -> ComplexDefinition:
        """One ``qconf -sc`` line (blank separated columns)."""
        columns: list[tuple[str, int]] = []
        position = 0
        for word in line.split():
            position = line.index(word, position)
            columns.append((word, position))
            position += len(word)
        if len(columns) != 8:
            at = columns[8][1] if len(columns) > 8 else len(line)
            raise ComplexError(
                f"a complex line has 8 columns, found {len(columns)}",
                text=line,
                position=at,
                expected="name shortcut type relop requestable consumable default urgency",
            )
        row = dict(zip(_COLUMNS, (word for word, _ in columns), strict=True))
        try:
            return cls.from_row(row)
        except ComplexError as error:
            column = _column_of(error, row)
            raise ComplexError(
                error.message,
                text=line,
                position=columns[column][1] if column is not None else 0,
                expected=error.expected,
            ) from None

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> ComplexDefinition:
        """A definition from a dict with the ``complex_defaults.jsonl`` column names (extra
        keys such as ``origin`` or ``source`` are ignored)."""
        missing = [column for column in _COLUMNS if column not in row]
        if missing:
            raise ComplexError(
                "complex row lacks " + ", ".join(missing),
                text=repr(dict(row)),
                expected="columns " + ", ".join(_COLUMNS),
            )
        urgency_text = str(row["urgency"])
        try:
            urgency = parse_number(urgency_text, ValueType.DOUBLE)
        except QuantityError as error:
            raise ComplexError(
                f"urgency of {row['name']!r}: {error.message}",
                text=urgency_text,
                position=error.position,
                expected="a number",
            ) from None
        try:
            value_type = ValueType.parse(str(row["type"]))
        except QuantityError as error:
            raise ComplexError(
                error.message, text=error.text, position=0, expected=error.expected
            ) from None
        return cls(
            name=str(row["name"]),
            shortcut=str(row["shortcut"]),
            type=value_type,
            relop=Relop.parse(str(row["relop"])),
            requestable=Requestable.parse(str(row["requestable"])),
            consumable=Consumable.parse(str(row["consumable"])),
            default=str(row["default"]),
            urgency=urgency,
        )


_COLUMNS = ("name", "shortcut", "type", "relop", "requestable", "consumable", "default", "urgency")


def _column_of(error: ComplexError, row: Mapping[str, str]) -> int | None:
    """Best guess of the column an error from :meth:`ComplexDefinition.from_row` is about."""
    for index, column in enumerate(_COLUMNS):
        if error.text is not None and error.text == row[column]:
            return index
    for index, keyword in ((3, "relop"), (6, "default"), (5, "consumable"), (4, "requestable")):
        if keyword in error.message:
            return index
    return None


def definitions_from_rows(rows: Iterable[Mapping[str, object]]) -> tuple[ComplexDefinition, ...]:
    """Definitions from ``complex_defaults.jsonl``-shaped dicts, in the given order."""
    return tuple(ComplexDefinition.from_row(row) for row in rows)
