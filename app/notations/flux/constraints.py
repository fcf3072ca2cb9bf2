"""RFC 31 job constraints: validation, a typed normalised tree, evaluation on one target.

A constraint is a JSON object with at most one operator key whose value is an array:
``properties`` (strings; ``^name`` = must be absent), ``hostlist`` (RFC 29 strings), ``ranks``
(RFC 22 strings), ``and``/``or``/``not`` (constraint objects). ``{}``, ``{"and": []}`` and
``{"or": []}`` match everything; ``{"not": []}`` matches nothing (RFC 31).

Decisions recorded in the vectors (docs/notations/flux.md#rfc-31-constraints):

* ``not`` with several values means NOT(AND(values)) (flux-core and Fluxion).
* ``hostlist: []`` and ``ranks: []`` match nothing; ``properties: []`` matches everything
  (flux-core).
* A property also matches the target's hostname (flux-core), as the vectors' ``expected``
  says; Fluxion does not (``hostname_is_property=False`` reproduces Fluxion).
* A property may not contain ``! & ' " ` | ( )``, and ``^`` only as its first character
  (Fluxion's stricter rule, the vectors' ``expected``); it may not be empty.

The tree (:class:`And`, :class:`Or`, :class:`Not`, :class:`Properties`, :class:`Hosts`,
:class:`Ranks`) has its hostlists and idsets parsed, so a later SQL compiler needs no strings.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from app.notations.errors import NotationError, did_you_mean
from app.notations.flux.hostlist import Hostlist, HostlistError, parse_hostlist
from app.notations.flux.idset import IdSet, IdsetError, parse_idset

#: What an operand entry parses to: a Hostlist or an IdSet.
_Parsed = TypeVar("_Parsed")

OPERATORS = ("properties", "hostlist", "ranks", "and", "or", "not")
#: Characters a property name may not contain (flux-core ``match.c``).
INVALID_PROPERTY_CHARS = "!&'\"`|()"
#: Deepest nesting of and/or/not accepted.
MAX_DEPTH = 32
#: Most operator objects in one constraint.
MAX_NODES = 10_000


class ConstraintError(NotationError):
    """An RFC 31 constraint object is malformed: not an object, several or unknown
    operators, a value that is not an array, or an invalid property, hostlist or idset."""

    notation = "rfc31-constraint"


@dataclass(frozen=True)
class Target:
    """One execution target (a node): what a constraint is evaluated against."""

    hostname: str | None = None
    rank: int | None = None
    properties: frozenset[str] = frozenset()


@dataclass(frozen=True)
class And:
    """All terms hold; no terms = always true."""

    terms: tuple[Constraint, ...] = ()


@dataclass(frozen=True)
class Or:
    """At least one term holds; no terms = always true (RFC 31's special case)."""

    terms: tuple[Constraint, ...] = ()


@dataclass(frozen=True)
class Not:
    """The term does not hold. ``{"not": []}`` becomes ``Not(And())``: never true."""

    term: Constraint


@dataclass(frozen=True)
class Properties:
    """Every ``required`` property present and every ``forbidden`` one absent."""

    required: frozenset[str] = frozenset()
    forbidden: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Hosts:
    """Hostname in the union of the hostlists (an empty union matches nothing)."""

    hostlists: tuple[Hostlist, ...]

    def names(self) -> frozenset[str]:
        """All names of the union, materialised (bounded by the hostlist limits)."""
        return frozenset(name for hostlist in self.hostlists for name in hostlist)


@dataclass(frozen=True)
class Ranks:
    """Rank in the idset (an empty set matches nothing)."""

    ids: IdSet


Constraint = And | Or | Not | Properties | Hosts | Ranks


def parse_constraint(value: object) -> Constraint:
    """Validate an RFC 31 constraint (parsed JSON) and return its normalised tree."""
    counter = [0]
    return _parse(value, "constraint", 1, counter)


def _parse(value: object, path: str, depth: int, counter: list[int]) -> Constraint:
    counter[0] += 1
    if counter[0] > MAX_NODES:
        raise ConstraintError(
            f"more than {MAX_NODES} operator objects", expected=f"at most {MAX_NODES}"
        )
    if depth > MAX_DEPTH:
        raise ConstraintError(
            f"{path} nests deeper than {MAX_DEPTH} levels",
            expected=f"at most {MAX_DEPTH} levels of and/or/not",
        )
    if not isinstance(value, dict):
        raise ConstraintError(
            f"{path}: constraint must be JSON object, found {_json_type(value)}",
            expected='an object such as {"properties": ["ssd"]}',
        )
    if not value:
        return And()
    if len(value) > 1:
        raise ConstraintError(
            f"{path}: constraint map may not contain > 1 operation ({', '.join(map(str, value))})",
            expected="exactly one operator per object; combine them with and",
        )
    ((operator, operand),) = value.items()
    if operator not in OPERATORS:
        raise ConstraintError(
            f"{path}: unknown constraint operator: {operator}"
            + did_you_mean(str(operator), OPERATORS),
            expected="one of " + ", ".join(OPERATORS),
        )
    here = f"{path}.{operator}"
    if not isinstance(operand, list):
        raise ConstraintError(
            f"{here}: {operator}{' operator' if operator in ('and', 'or', 'not') else ''} value "
            f"must be an array, found {_json_type(operand)}",
            expected="a JSON array",
        )
    if operator in ("and", "or", "not"):
        terms = tuple(
            _parse(item, f"{here}[{index}]", depth + 1, counter)
            for index, item in enumerate(operand)
        )
        if operator == "not":
            return Not(terms[0] if len(terms) == 1 else And(terms))
        return _flatten(And(terms) if operator == "and" else Or(terms))
    if operator == "properties":
        return _properties(operand, here)
    if operator == "hostlist":
        return Hosts(
            tuple(_hostlist(item, f"{here}[{i}]", operand) for i, item in enumerate(operand))
        )
    return Ranks(
        IdSet().union(*(_idset(item, f"{here}[{i}]", operand) for i, item in enumerate(operand)))
    )


def _flatten(node: And | Or) -> Constraint:
    """``and`` inside ``and`` (or ``or`` inside ``or``) is the same as one flat list."""
    kind = type(node)
    terms: list[Constraint] = []
    for term in node.terms:
        if isinstance(term, And | Or) and type(term) is kind and term.terms:
            terms.extend(term.terms)
        else:
            terms.append(term)
    return kind(tuple(terms))


def _properties(values: list[object], path: str) -> Properties:
    required: set[str] = set()
    forbidden: set[str] = set()
    for index, item in enumerate(values):
        if not isinstance(item, str):
            raise ConstraintError(
                f"{path}[{index}]: non-string property specified ({_json_type(item)})",
                expected="property names as strings",
            )
        name, negated = (item[1:], True) if item.startswith("^") else (item, False)
        for position, char in enumerate(name):
            if char in INVALID_PROPERTY_CHARS or char == "^":
                where = "'^' only as the first character" if char == "^" else "a plain name"
                raise ConstraintError(
                    f"{path}[{index}]: invalid character {char!r} in property {json.dumps(item)}",
                    text=item,
                    position=position + (1 if negated else 0),
                    expected=where,
                )
        if not name:
            raise ConstraintError(
                f"{path}[{index}]: empty property {item!r}", text=item, expected="a property name"
            )
        (forbidden if negated else required).add(name)
    return Properties(frozenset(required), frozenset(forbidden))


def _hostlist(item: object, path: str, values: list[object]) -> Hostlist:
    return _operand_entry(
        item,
        path,
        values,
        parse_hostlist,
        HostlistError,
        "hostlist",
        "hostlist",
        "RFC 29 hostlist strings",
    )


def _idset(item: object, path: str, values: list[object]) -> IdSet:
    return _operand_entry(
        item, path, values, parse_idset, IdsetError, "ranks", "idset", "RFC 22 idset strings"
    )


def _operand_entry(
    item: object,
    path: str,
    values: list[object],
    parse: Callable[[str], _Parsed],
    error_type: type[NotationError],
    operator: str,
    notation: str,
    expected: str,
) -> _Parsed:
    """One string of a ``hostlist`` or ``ranks`` operand (RFC 31) parsed by its own
    notation (RFC 29 hostlist, RFC 22 idset); its error is re-raised as a ConstraintError
    at ``path``, naming the ``operator`` and the ``notation``, that keeps the position and
    what was expected."""
    if not isinstance(item, str):
        raise ConstraintError(f"{path}: {operator} entry is {_json_type(item)}", expected=expected)
    try:
        return parse(item)
    except error_type as error:
        raise ConstraintError(
            f"{path}: invalid {notation} {item!r} in {json.dumps(values)}: {error.message}",
            text=item,
            position=error.position,
            expected=error.expected,
        ) from error


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    for kind, name in ((dict, "an object"), (list, "an array"), (str, "a string")):
        if isinstance(value, kind):
            return name
    if isinstance(value, int | float):
        return "a number"
    return "null" if value is None else type(value).__name__


def matches(constraint: Constraint, target: Target, *, hostname_is_property: bool = True) -> bool:
    """Whether ``target`` satisfies ``constraint``."""
    if isinstance(constraint, And):
        return all(
            matches(t, target, hostname_is_property=hostname_is_property) for t in constraint.terms
        )
    if isinstance(constraint, Or):
        if not constraint.terms:
            return True
        return any(
            matches(t, target, hostname_is_property=hostname_is_property) for t in constraint.terms
        )
    if isinstance(constraint, Not):
        return not matches(constraint.term, target, hostname_is_property=hostname_is_property)
    if isinstance(constraint, Properties):
        have = set(target.properties)
        if hostname_is_property and target.hostname is not None:
            have.add(target.hostname)
        return constraint.required <= have and not (constraint.forbidden & have)
    if isinstance(constraint, Hosts):
        return target.hostname is not None and any(
            target.hostname in hostlist for hostlist in constraint.hostlists
        )
    return target.rank is not None and target.rank in constraint.ids


def evaluate(value: object, target: Target, *, hostname_is_property: bool = True) -> bool:
    """Validate a raw RFC 31 object and evaluate it on ``target``."""
    return matches(parse_constraint(value), target, hostname_is_property=hostname_is_property)


def constraint_to_json(constraint: Constraint) -> dict[str, object]:
    """Canonical RFC 31 object for a tree (``parse_constraint`` of it gives the tree back)."""
    if isinstance(constraint, And):
        return {"and": [constraint_to_json(t) for t in constraint.terms]}
    if isinstance(constraint, Or):
        return {"or": [constraint_to_json(t) for t in constraint.terms]}
    if isinstance(constraint, Not):
        return {"not": [constraint_to_json(constraint.term)]}
    if isinstance(constraint, Properties):
        names = sorted(constraint.required) + sorted("^" + n for n in constraint.forbidden)
        return {"properties": names}
    if isinstance(constraint, Hosts):
        return {"hostlist": [hostlist.encode() for hostlist in constraint.hostlists]}
    return {"ranks": [constraint.ids.encode()] if constraint.ids else []}


def validate_property_name(name: str) -> str:
    """Check a worker's property name as RFC 31 ``properties`` values must be written
    (without the ``^`` that negates them); return it unchanged."""
    if not name:
        raise ConstraintError("empty property name", text=name, expected="a property name")
    for position, char in enumerate(name):
        if char in INVALID_PROPERTY_CHARS or char == "^":
            raise ConstraintError(
                f"invalid character {char!r} in property {name!r}",
                text=name,
                position=position,
                expected="a plain name without ^ ! & ' \" ` | ( )",
            )
    return name


def leaves(constraint: Constraint) -> Iterator[Properties | Hosts | Ranks]:
    """The leaves of a tree in depth-first order (the numbering the SQL rows use)."""
    if isinstance(constraint, And | Or):
        for term in constraint.terms:
            yield from leaves(term)
    elif isinstance(constraint, Not):
        yield from leaves(constraint.term)
    else:
        yield constraint
