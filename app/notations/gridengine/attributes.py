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

A :class:`ComplexTable` adds the rules that span rows: names and shortcuts are unique
across both columns, built-in attributes cannot be deleted and keep their type (the string
family STRING/CSTRING/RESTRING may be switched among itself).

Comparisons follow Grid Engine's ``requested RELOP offered`` orientation (section a): the
job's value on the left, the host's or queue's value on the right.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeVar

from app.notations.errors import NotationError, did_you_mean
from app.notations.gridengine.default_table import DEFAULT_COMPLEX_ROWS
from app.notations.gridengine.strings import (
    Semantics,
    StringExpressionError,
    check_semantics,
    is_expression,
    match_string,
)
from app.notations.gridengine.wildcard_nfa import compile_request
from app.notations.quantities import (
    QuantityError,
    ValueType,
    canonical_number,
    format_number,
    is_infinity,
    parse_number,
)

__all__ = [
    "BUILTIN_NAMES",
    "STRING_FAMILY",
    "ComplexDefinition",
    "ComplexError",
    "ComplexTable",
    "Consumable",
    "HostResolver",
    "Relop",
    "Requestable",
    "Value",
    "check_table_change",
    "compare",
    "compare_text",
    "consumable_fits",
    "consumable_slot_capacity",
    "default_table",
    "definitions_from_rows",
    "exclusive_fits",
    "format_value",
    "normalize_value",
    "parse_value",
]

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


_E = TypeVar("_E", bound=enum.Enum)


class Requestable(enum.Enum):
    """Whether ``-l`` may name the attribute (YES), must name it where present (FORCED),
    or may not name it (NO)."""

    NO = "NO"
    YES = "YES"
    FORCED = "FORCED"

    @classmethod
    def parse(cls, text: str) -> Requestable:
        return _parse_keyword(cls, text, "requestable")


class Consumable(enum.Enum):
    """NO, YES (amount per slot) or JOB (amount per job, booked on the master queue)."""

    NO = "NO"
    YES = "YES"
    JOB = "JOB"

    @classmethod
    def parse(cls, text: str) -> Consumable:
        return _parse_keyword(cls, text, "consumable")


def _parse_keyword(kind: type[_E], text: str, column: str) -> _E:
    token = text.strip().upper()
    for member in kind:
        if member.value == token:
            return member
    words = [str(member.value) for member in kind]
    raise ComplexError(
        f"invalid {column} value {text!r}{did_you_mean(token, words)}",
        text=text,
        position=0,
        expected="one of " + ", ".join(words),
    )


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


#: Names of the 51 attributes of the 6.2u5 default table (all of them are built-in).
BUILTIN_NAMES: frozenset[str] = frozenset(str(row["name"]) for row in DEFAULT_COMPLEX_ROWS)


@dataclass(frozen=True)
class ComplexTable:
    """The attribute table: definitions with unique names/shortcuts, and which are built-in."""

    definitions: tuple[ComplexDefinition, ...]
    builtin_names: frozenset[str] = field(default=frozenset())
    _index: Mapping[str, ComplexDefinition] = field(
        init=False, repr=False, compare=False, hash=False
    )
    _names: Mapping[str, ComplexDefinition] = field(
        init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        index: dict[str, ComplexDefinition] = {}
        for definition in self.definitions:
            for word in dict.fromkeys((definition.name, definition.shortcut)):
                other = index.get(word)
                if other is not None:
                    raise ComplexError(
                        f"{word!r} of attribute {definition.name!r} is already used as name "
                        f"or shortcut of {other.name!r}",
                        text=definition.to_line(),
                        expected="names and shortcuts unique across both columns",
                    )
                index[word] = definition
        object.__setattr__(self, "_index", index)
        # Names take precedence over shortcuts; a dict keeps lookups O(1) on the
        # evaluator's hot path (thousands per scheduled job).
        object.__setattr__(self, "_names", {d.name: d for d in self.definitions})

    def __iter__(self) -> Iterator[ComplexDefinition]:
        return iter(self.definitions)

    def __len__(self) -> int:
        return len(self.definitions)

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and self.lookup(word) is not None

    def lookup(self, word: str) -> ComplexDefinition | None:
        """The definition whose name, or else shortcut, is ``word``."""
        definition = self._names.get(word)
        return definition if definition is not None else self._index.get(word)

    def __getitem__(self, word: str) -> ComplexDefinition:
        definition = self.lookup(word)
        if definition is None:
            raise KeyError(word)
        return definition

    def resolve(
        self, word: str, *, text: str | None = None, position: int = 0
    ) -> ComplexDefinition:
        """Like :meth:`lookup`, but an unknown word raises :class:`ComplexError` suggesting
        the nearest name or shortcut."""
        definition = self.lookup(word)
        if definition is None:
            raise ComplexError(
                f"unknown resource {word!r}{did_you_mean(word, self._index)}",
                text=word if text is None else text,
                position=position,
                expected="the name or shortcut of a complex attribute",
            )
        return definition

    def to_text(self) -> str:
        """The table as ``qconf -sc`` lines sorted by name."""
        lines = sorted(definition.to_line() for definition in self.definitions)
        return "\n".join(lines) + ("\n" if lines else "")

    @classmethod
    def from_text(cls, text: str, *, builtin_names: frozenset[str] = frozenset()) -> ComplexTable:
        """Lines as printed by :meth:`to_text` (``#`` comments and blank lines skipped)."""
        definitions = []
        for line in text.splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                definitions.append(ComplexDefinition.from_line(line))
        return cls(tuple(definitions), builtin_names=builtin_names)


def default_table(*, sge60: bool = False) -> ComplexTable:
    """The 6.2u5 default table (51 rows); ``sge60=True`` drops the five rows 6.2 added."""
    rows = [row for row in DEFAULT_COMPLEX_ROWS if row["in_sge60_default"] or not sge60]
    definitions = definitions_from_rows(rows)
    return ComplexTable(definitions, builtin_names=frozenset(d.name for d in definitions))


def check_table_change(old: ComplexTable, new: ComplexTable) -> None:
    """Reject a table change that deletes a built-in attribute of ``old`` or changes its type
    (other than within the string family STRING/CSTRING/RESTRING)."""
    for name in sorted(old.builtin_names):
        before = old.lookup(name)
        after = next((d for d in new.definitions if d.name == name), None)
        if before is None:
            continue
        if after is None:
            raise ComplexError(
                f"built-in attribute {name!r} cannot be deleted",
                text=before.to_line(),
                expected="the built-in attribute kept in the table",
            )
        if after.type is not before.type and not (
            before.type in STRING_FAMILY and after.type in STRING_FAMILY
        ):
            raise ComplexError(
                f"the type of built-in attribute {name!r} cannot change from "
                f"{before.type.value} to {after.type.value}",
                text=after.to_line(),
                expected=(
                    "one of STRING, CSTRING, RESTRING"
                    if before.type in STRING_FAMILY
                    else f"type {before.type.value}"
                ),
            )


# ---------------------------------------------------------------------------------------
# Values


def parse_value(
    definition: ComplexDefinition,
    text: str,
    *,
    role: str = "request",
    resolve_host: HostResolver | None = None,
    soge: bool = False,
) -> Value:
    """``text`` as a value of ``definition``.

    ``role`` is ``"request"`` (a ``-l`` value), ``"capacity"`` (a ``complex_values``
    entry) or ``"load"`` (a load report). Requests and capacities of consumables may be
    neither INFINITY nor negative; load values are taken as reported. A HOST value that is
    not an expression is resolved with ``resolve_host`` (None keeps it as written).
    """
    if role not in ("request", "capacity", "load"):
        raise ValueError(f"unknown role {role!r}; expected 'request', 'capacity' or 'load'")
    if definition.type.is_numeric:
        return parse_number(
            text,
            definition.type,
            consumable=definition.is_consumable and role != "load",
            soge=soge,
        )
    if definition.type is ValueType.HOST and resolve_host is not None and not is_expression(text):
        resolved = resolve_host(text)
        if resolved is None:
            raise ComplexError(
                f"can't resolve host {text!r} for attribute {definition.name!r}",
                text=text,
                position=0,
                expected="a resolvable host name or a host name pattern",
            )
        return resolved
    return text


def normalize_value(definition: ComplexDefinition, value: Value, written: str) -> str:
    """The text Grid Engine stores for a parsed value: TIME as whole seconds (``1:30:00``
    -> ``5400``, fractions truncated), a resolved HOST as its canonical name, everything
    else as written (``1024M`` stays ``1024M``)."""
    if definition.type is ValueType.TIME:
        assert isinstance(value, float)
        return "INFINITY" if is_infinity(value) else str(int(value))
    if definition.type is ValueType.HOST:
        assert isinstance(value, str)
        return value
    return written


def format_value(value_type: ValueType, value: Value) -> str:
    """A value the way Grid Engine's diagnostics print it (MEMORY ``2.000G``, TIME
    ``HH:MM:SS``, strings as they are)."""
    if isinstance(value, str):
        return value
    return format_number(value, value_type)


# ---------------------------------------------------------------------------------------
# Comparisons


def _string_matches(value_type: ValueType, pattern: str, value: str, semantics: Semantics) -> bool:
    """6.1+ requests go through the non-backtracking automaton (compiled once per request,
    linear in the value), as SQLite's misfit SQL does; 6.0's fnmatch pieces through
    :func:`match_string`."""
    if semantics == "6.0":
        return match_string(value_type, pattern, value, semantics=semantics)
    folds = value_type in (ValueType.CSTRING, ValueType.HOST)
    return compile_request(pattern, folds).matches(value.lower() if folds else value)


def compare(
    value_type: ValueType,
    relop: Relop,
    requested: Value,
    offered: Value,
    *,
    semantics: Semantics = "6.1",
) -> bool:
    """Whether ``requested RELOP offered`` holds.

    Numbers compare as doubles. For string types ``requested`` is the pattern and
    ``offered`` the subject; ``==`` holds when the pattern matches, ``!=`` when it does
    not, and a malformed 6.1 expression makes ``==`` false and ``!=`` true. ``EXCL`` here
    is the value part only (``requested == 0 or requested <= offered``); see
    :func:`exclusive_fits` for the utilization part.
    """
    check_semantics(semantics)
    if value_type.is_string:
        if relop not in (Relop.EQ, Relop.NE):
            raise ValueError(f"relop {relop.value} is not defined for strings")
        try:
            matched = _string_matches(value_type, str(requested), str(offered), semantics)
        except StringExpressionError:
            return relop is Relop.NE
        return matched if relop is Relop.EQ else not matched
    if isinstance(requested, str) or isinstance(offered, str):
        raise TypeError("numeric comparison needs parsed numbers")
    if relop is Relop.EQ:
        return requested == offered
    if relop is Relop.NE:
        return requested != offered
    if relop is Relop.LE:
        return requested <= offered
    if relop is Relop.LT:
        return requested < offered
    if relop is Relop.GE:
        return requested >= offered
    if relop is Relop.GT:
        return requested > offered
    return requested == 0 or requested <= offered


def compare_text(
    value_type: ValueType,
    relop: Relop,
    requested: str,
    offered: str,
    *,
    semantics: Semantics = "6.1",
) -> bool:
    """:func:`compare` on texts: numbers are parsed first (QuantityError if invalid)."""
    if value_type.is_numeric:
        return compare(
            value_type,
            relop,
            parse_number(requested, value_type),
            parse_number(offered, value_type),
            semantics=semantics,
        )
    return compare(value_type, relop, requested, offered, semantics=semantics)


def consumable_fits(
    consumable: Consumable, capacity: float, used: float, requested: float, slots: int
) -> bool:
    """Whether a job of ``slots`` slots fits a consumable: per slot (YES) it needs
    ``requested * slots``, per job (JOB) ``requested`` once, of ``capacity - used``."""
    if consumable is Consumable.NO:
        raise ValueError("not a consumable")
    amount = requested if consumable is Consumable.JOB else requested * slots
    return amount <= capacity - used


def consumable_slot_capacity(capacity: float, used: float, requested: float) -> int | None:
    """How many slots a per-slot request of ``requested`` fits into ``capacity - used``:
    ``floor((capacity - used) / requested)``, None (unlimited) for a request of 0."""
    if requested <= 0:
        return None
    available = capacity - used
    if available < requested:
        return 0
    return int(available // requested)


def exclusive_fits(
    requested: float, capacity: float, exclusive_in_use: float, non_exclusive_in_use: float
) -> bool:
    """The EXCL rule (6.2u3+): an exclusive request (non-zero) needs the capacity and no
    user at all; a non-exclusive job (0) only needs that no exclusive job runs there."""
    if requested == 0:
        return exclusive_in_use == 0
    return requested <= capacity and exclusive_in_use == 0 and non_exclusive_in_use == 0
