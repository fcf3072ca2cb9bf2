"""``-l`` resource request lists of Grid Engine: ``-l h_vmem=2G,arch=lx*``.

A list is ``name[=value]`` items separated by commas or blanks. Each item is checked the
way qmaster checks a submission (docs/notations/gridengine.md#requests--l):

* the name or shortcut must be in the attribute table (else "unknown resource", with the
  nearest name suggested); a shortcut is replaced by the full name;
* ``slots`` cannot be requested with ``-l`` (Grid Engine wants ``-pe``);
* requestable NO attributes are rejected; soft requests of consumables are rejected;
* ``-l gpu`` without a value means ``gpu=TRUE`` for BOOL attributes and is an error for
  every other type;
* the value must parse for the type; consumables take neither INFINITY nor negative
  amounts; TIME values are stored as whole seconds; HOST names are resolved;
* hard string requests must be well-formed expressions (6.1+); ``qname`` values may not
  contain ``@``;
* a later request of the same attribute replaces an earlier one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from app.notations.errors import NotationError
from app.notations.gridengine.attribute_table import ComplexTable
from app.notations.gridengine.definitions import (
    ComplexDefinition,
    ComplexError,
    HostResolver,
    Requestable,
    Value,
)
from app.notations.gridengine.strings import (
    Semantics,
    StringExpressionError,
    check_request_size,
    check_semantics,
    parse_expression,
)
from app.notations.gridengine.values import normalize_value, parse_value
from app.notations.quantities import QuantityError, ValueType

__all__ = [
    "Request",
    "RequestError",
    "RequestList",
    "build_request",
    "parse_request_list",
    "requests_from_pairs",
]

_SEPARATORS = ", \t\n\r\v\f"


class RequestError(NotationError):
    """A ``-l`` request list names an unknown or non-requestable attribute, lacks or has an
    invalid value, or breaks one of Grid Engine's submission rules."""

    notation = "sge-request"


@dataclass(frozen=True)
class Request:
    """One accepted request: the full attribute name, the stored text and the parsed value
    (a number for numeric types, the pattern text for string types)."""

    name: str
    value: str
    parsed: Value

    def to_text(self) -> str:
        return f"{self.name}={self.value}"


@dataclass(frozen=True)
class RequestList:
    """The requests of one ``-l`` list (hard or soft), in first-mention order."""

    requests: tuple[Request, ...]
    soft: bool = False

    def __iter__(self) -> Iterator[Request]:
        return iter(self.requests)

    def __len__(self) -> int:
        return len(self.requests)

    def get(self, name: str) -> Request | None:
        """The request of attribute ``name`` (full name), if any."""
        return next((request for request in self.requests if request.name == name), None)

    def to_text(self) -> str:
        """``name=value`` items joined by commas; parses back to an equal list."""
        return ",".join(request.to_text() for request in self.requests)

    def category_text(self) -> str:
        """Grid Engine's category/diagnostic form: sorted by name, or ``NONE`` when empty."""
        if not self.requests:
            return "NONE"
        return ",".join(sorted(request.to_text() for request in self.requests))


def _error(
    inner: NotationError | str, text: str, position: int, expected: str | None
) -> RequestError:
    message = inner if isinstance(inner, str) else inner.message
    return RequestError(message, text=text, position=position, expected=expected)


def build_request(
    table: ComplexTable,
    name: str,
    value: str | None,
    *,
    soft: bool = False,
    semantics: Semantics = "6.1",
    resolve_host: HostResolver | None = None,
    soge: bool = False,
    text: str | None = None,
    name_position: int = 0,
    value_position: int = 0,
) -> Request:
    """One request ``name=value`` (``value`` None for a bare ``-l name``), checked against
    ``table``. ``text`` and the positions locate errors in a larger input."""
    check_semantics(semantics)
    source = text if text is not None else (name if value is None else f"{name}={value}")
    if value is None and text is None:
        value_position = len(name)
    elif text is None:
        value_position = len(name) + 1
    try:
        definition = table.resolve(name, text=source, position=name_position)
    except ComplexError as error:
        raise _error(error, source, name_position, error.expected) from None
    _check_requestable(definition, name, soft, source, name_position)
    if value is None:
        if definition.type is not ValueType.BOOL:
            raise _error(
                f"denied: missing value for request {definition.name!r} "
                f"(only BOOL attributes may be requested without a value)",
                source,
                value_position,
                f"'=' and a {definition.type.value_noun}",
            )
        value = "TRUE"
    try:
        parsed = parse_value(
            definition, value, role="request", resolve_host=resolve_host, soge=soge
        )
    except (QuantityError, ComplexError) as error:
        raise _value_error(definition, error, source, value_position) from None
    if definition.type.is_string:
        _check_string_request(definition, value, soft, semantics, source, value_position)
    return Request(definition.name, normalize_value(definition, parsed, value), parsed)


def _check_requestable(
    definition: ComplexDefinition, name: str, soft: bool, source: str, position: int
) -> None:
    if definition.name == "slots":
        raise _error(
            "slots cannot be requested with -l",
            source,
            position,
            "a parallel environment request (-pe) for more than one slot",
        )
    if definition.requestable is Requestable.NO:
        raise _error(
            f"resource {definition.name!r} is configured as non requestable",
            source,
            position,
            "a requestable attribute",
        )
    if soft and definition.is_consumable:
        raise _error(
            f"soft requests on consumables are not supported ({definition.name!r})",
            source,
            position,
            "a hard request (-hard) for a consumable",
        )


def _check_string_request(
    definition: ComplexDefinition,
    value: str,
    soft: bool,
    semantics: Semantics,
    source: str,
    value_position: int,
) -> None:
    if definition.name == "qname" and "@" in value:
        raise _error(
            "qname requests may not contain '@'",
            source,
            value_position + value.index("@"),
            "a cluster queue name or pattern",
        )
    # Every request, hard or soft, stays within the matcher's bounds; only hard requests
    # are syntax-checked at submit: a malformed soft expression is kept and simply never
    # matches with == (always with !=).
    try:
        check_request_size(value)
        if not soft and semantics == "6.1":
            parse_expression(value)
    except StringExpressionError as error:
        raise _value_error(definition, error, source, value_position) from None


def _value_error(
    definition: ComplexDefinition, error: NotationError, source: str, value_position: int
) -> RequestError:
    """An error inside one request's value (its quantity, attribute rule or string
    expression), moved to its position in the whole ``-l`` list."""
    return _error(
        f"{definition.name}: {error.message}",
        source,
        value_position + (error.position or 0),
        error.expected,
    )


def _items(text: str) -> Iterator[tuple[str, int]]:
    """The items of a list and their start positions; empty items are errors."""
    blanks = " \t\n\r\v\f"
    position = 0
    n = len(text)
    after_comma = False
    pending = True  # no item since the start or since the last comma
    while True:
        while position < n and text[position] in blanks:
            position += 1
        if position >= n:
            if after_comma:
                raise RequestError(
                    "request list ends with a comma",
                    text=text,
                    position=n,
                    expected="name=value after ','",
                )
            return
        if text[position] == ",":
            if pending:
                raise RequestError(
                    "empty request item",
                    text=text,
                    position=position,
                    expected="name=value or a BOOL attribute name",
                )
            pending = after_comma = True
            position += 1
            continue
        start = position
        while position < n and text[position] not in _SEPARATORS:
            position += 1
        pending = after_comma = False
        yield text[start:position], start


def parse_request_list(
    text: str,
    table: ComplexTable,
    *,
    soft: bool = False,
    semantics: Semantics = "6.1",
    resolve_host: HostResolver | None = None,
    soge: bool = False,
) -> RequestList:
    """Parse a ``-l`` list such as ``h_vmem=2G,arch=lx*`` or ``gpu`` against ``table``.

    A blank text is the empty list. Raises :class:`RequestError` with the position of the
    offending item or value.
    """
    if not text.strip():
        return RequestList((), soft=soft)
    collected: dict[str, Request] = {}
    for item, start in _items(text):
        name, equals, value = item.partition("=")
        if not name:
            raise RequestError(
                "request without attribute name",
                text=text,
                position=start,
                expected="an attribute name before '='",
            )
        request = build_request(
            table,
            name,
            value if equals else None,
            soft=soft,
            semantics=semantics,
            resolve_host=resolve_host,
            soge=soge,
            text=text,
            name_position=start,
            value_position=start + len(name) + (1 if equals else 0),
        )
        collected[request.name] = request  # a later request replaces an earlier one
    return RequestList(tuple(collected.values()), soft=soft)


def requests_from_pairs(
    pairs: Iterable[Sequence[str | None]],
    table: ComplexTable,
    *,
    soft: bool = False,
    semantics: Semantics = "6.1",
    resolve_host: HostResolver | None = None,
) -> RequestList:
    """A list from ``[name, value]`` pairs (value None = ``-l name``), as scenarios write
    them."""
    collected: dict[str, Request] = {}
    for pair in pairs:
        if len(pair) != 2 or pair[0] is None:
            raise RequestError(
                f"request pair {list(pair)!r} is not [name, value]",
                text=repr(list(pair)),
                position=0,
                expected="[name, value] with value a string or null",
            )
        name, value = pair[0], pair[1]
        request = build_request(
            table, name, value, soft=soft, semantics=semantics, resolve_host=resolve_host
        )
        collected[request.name] = request
    return RequestList(tuple(collected.values()), soft=soft)
