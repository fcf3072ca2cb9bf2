"""Grid Engine complex values: parsing a value by its attribute's type, its canonical
text, and the comparisons a request makes against what a host or queue offers.

Comparisons follow Grid Engine's ``requested RELOP offered`` orientation (section a): the
job's value on the left, the host's or queue's value on the right.
"""

from __future__ import annotations

from app.notations.gridengine.definitions import (
    ComplexDefinition,
    ComplexError,
    Consumable,
    HostResolver,
    Relop,
    Value,
)
from app.notations.gridengine.strings import (
    Semantics,
    StringExpressionError,
    check_semantics,
    is_expression,
    match_string,
)
from app.notations.gridengine.wildcard_nfa import compile_request
from app.notations.quantities import (
    ValueType,
    format_number,
    is_infinity,
    parse_number,
)


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
