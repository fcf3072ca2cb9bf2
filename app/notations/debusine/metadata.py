"""debusine-style worker metadata and declarative task requirements (debusine issue #8).

Worker metadata
    *Static* metadata is a flat JSON object an administrator sets (``{"system:cpu_count": 8,
    "tasks_denylist": ["sbuild"]}``). *Dynamic* metadata is what the worker reports,
    namespaced by task name, each namespace carrying an integer ``version`` (1 when the task
    does not set one): ``{"sbuild": {"version": 2, "chroots": ["bookworm"]}}``. Flattened,
    namespace ``sbuild`` key ``chroots`` is ``sbuild:chroots``. The *effective* metadata is
    the dynamic keys overlaid by the static ones: on a clash static wins, and values are not
    merged below the top level (debusine's ``Worker.metadata()``).

    ``tasks_allowlist`` and ``tasks_denylist`` are lists of task names and belong to the
    static side only: a worker must not widen its own placement by reporting them (the
    provenance argument of debusine's later scheduler tags; docs/notations/debusine.md). Likewise
    ``<namespace>:version`` is reported by the worker, never pinned statically, so a version
    mismatch always means "this worker's code differs from the server's".

Allow/deny precedence (debusine issue #8, and debusine's scheduler)
    When ``tasks_allowlist`` is present (even empty) it is the whole list and the denylist is
    ignored; otherwise every task except those in ``tasks_denylist`` is allowed.

Requirements
    A small JSON condition tree over the effective metadata, compiled to SQL by
    app/matching/debusine/sql.py and evaluated here in Python (the tests' oracle):

    ==========================================  =============================================
    ``{"and": [r, ...]}`` / ``{"or": [r, ...]}``  all / any (``and: []`` true, ``or: []`` false)
    ``{"not": r}``                                negation
    ``{"exists": key}``                           the key is present (any value, even null)
    ``{"eq": [key, v]}``                          present and equal to the scalar ``v``
    ``{"ne": [key, v]}``                          present and not equal to ``v``
    ``{"lt"|"le"|"gt"|"ge": [key, n]}``           a number (not a boolean) compared with ``n``
    ``{"in": [key, [v, ...]]}``                   a scalar equal to one of the values
    ``{"contains": [key, v]}``                    a list that has ``v`` among its elements
    ==========================================  =============================================

    Scalars are strings, numbers and booleans; equality is JSON equality with booleans
    distinct from numbers (``true`` is not ``1``) and ``1`` equal to ``1.0``. A missing key
    makes every leaf but ``exists`` false, so ``{"not": {"eq": ...}}`` is the way to say
    "absent or different".
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from app.notations.errors import NotationError, did_you_mean

Scalar: TypeAlias = str | int | float | bool

ALLOWLIST = "tasks_allowlist"
DENYLIST = "tasks_denylist"
SPECIAL_KEYS = (ALLOWLIST, DENYLIST)
VERSION = "version"
DEFAULT_VERSION = 1

#: A key: segments of letters, digits and ``_ . + -`` joined by single colons.
KEY_PATTERN = re.compile(r"[A-Za-z0-9_.+-]+(?::[A-Za-z0-9_.+-]+)*")
#: A namespace (task name) has no colon; lower case as debusine's task names.
NAMESPACE_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.+-]*")
MAX_KEY_LENGTH = 255
#: Numbers beyond this lose integer precision in a double, which is how SQL compares them.
MAX_EXACT_NUMBER = 2**53
MAX_DEPTH = 32
MAX_NODES = 10_000
MAX_VERSION = 2**31 - 1

COMPARISONS = ("lt", "le", "gt", "ge")
OPERATORS = ("and", "or", "not", "exists", "eq", "ne", *COMPARISONS, "in", "contains")


class MetadataError(NotationError):
    """Worker metadata (static or dynamic) breaks the rules of debusine issue #8: a bad key, a bad
    namespace or version, a reserved key on the wrong side, or a non-JSON value."""

    notation = "debusine-metadata"


class RequirementError(NotationError):
    """A task's requirement tree is not a valid condition: unknown operator, wrong operand
    shape, bad key, or a value that is not a scalar. ``position`` is the path in the tree."""

    notation = "task-requirements"


# ---------------------------------------------------------------------------- metadata


def _check_key(key: object, where: str) -> str:
    if not isinstance(key, str):
        raise MetadataError(f"{where}: a key must be a string", expected="a string key")
    if len(key) > MAX_KEY_LENGTH or not KEY_PATTERN.fullmatch(key):
        raise MetadataError(
            f"{where}: invalid key {key!r}",
            text=key,
            expected="segments of letters, digits, '_.+-' joined by ':' (at most 255 chars)",
        )
    return key


def _check_value(value: object, where: str, depth: int = 0) -> None:
    """A JSON value whose numbers are finite and exact enough to compare in SQL."""
    if depth > MAX_DEPTH:
        raise MetadataError(f"{where}: nested too deeply", expected=f"at most {MAX_DEPTH} levels")
    if value is None or isinstance(value, (str, bool)):
        return
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise MetadataError(f"{where}: not a finite number", expected="a finite number")
        if abs(value) > MAX_EXACT_NUMBER:
            raise MetadataError(
                f"{where}: number {value} is too large to compare exactly",
                expected=f"a number of magnitude at most 2**53 ({MAX_EXACT_NUMBER})",
            )
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check_value(item, f"{where}[{index}]", depth + 1)
        return
    if isinstance(value, dict):
        for name, item in value.items():
            if not isinstance(name, str):
                raise MetadataError(f"{where}: object keys must be strings")
            _check_value(item, f"{where}.{name}", depth + 1)
        return
    raise MetadataError(f"{where}: {type(value).__name__} is not a JSON value")


def _check_task_list(value: object, key: str) -> None:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise MetadataError(f"{key} must be a list of task names", expected="a list of strings")
    for item in value:
        if not NAMESPACE_PATTERN.fullmatch(item):
            raise MetadataError(
                f"{key}: invalid task name {item!r}",
                text=item,
                expected="a lower-case task name (letters, digits, '_.+-')",
            )


def parse_static(data: object) -> dict[str, Any]:
    """Validate an administrator's static metadata (a flat object); return a copy."""
    if not isinstance(data, dict):
        raise MetadataError("static metadata must be a JSON object", expected="an object")
    result: dict[str, Any] = {}
    for key, value in data.items():
        _check_key(key, "static metadata")
        if key.endswith(f":{VERSION}"):
            raise MetadataError(
                f"{key!r}: a namespace version is reported by the worker, not set statically",
                text=key,
                expected="a key other than '<namespace>:version'",
            )
        if key in SPECIAL_KEYS:
            _check_task_list(value, key)
        _check_value(value, key)
        result[key] = value
    return result


@dataclass(frozen=True)
class Namespace:
    """One namespace of a dynamic report: its version and its keys (without the prefix)."""

    name: str
    version: int
    values: Mapping[str, Any]

    def flat(self) -> Iterator[tuple[str, Any]]:
        for key, value in self.values.items():
            yield f"{self.name}:{key}", value


def parse_dynamic(data: object) -> dict[str, Namespace]:
    """Validate a worker's report ``{namespace: {key: value, "version": n}}``."""
    if not isinstance(data, dict):
        raise MetadataError("dynamic metadata must be a JSON object", expected="an object")
    result: dict[str, Namespace] = {}
    for name, body in data.items():
        if not isinstance(name, str) or not NAMESPACE_PATTERN.fullmatch(name):
            raise MetadataError(
                f"invalid namespace {name!r}",
                text=str(name),
                expected="a lower-case task name (letters, digits, '_.+-'), e.g. 'sbuild'",
            )
        if name in SPECIAL_KEYS:
            raise MetadataError(
                f"{name} is static metadata, set by an administrator; a worker cannot report it",
                text=name,
                expected="a task namespace",
            )
        if not isinstance(body, dict):
            raise MetadataError(f"namespace {name!r} must be an object", expected="an object")
        version = body.get(VERSION, DEFAULT_VERSION)
        if isinstance(version, bool) or not isinstance(version, int):
            raise MetadataError(
                f"{name}:version must be a plain integer", expected="an integer such as 1"
            )
        if not 1 <= version <= MAX_VERSION:
            raise MetadataError(f"{name}:version {version} is out of range", expected=">= 1")
        values: dict[str, Any] = {}
        for key, value in body.items():
            if key == VERSION:
                continue
            _check_key(f"{name}:{key}", f"namespace {name!r}")
            _check_value(value, f"{name}:{key}")
            values[key] = value
        result[name] = Namespace(name, version, values)
    return result


def flatten_dynamic(namespaces: Mapping[str, Namespace]) -> dict[str, Any]:
    """The flat keys of a report, ``<namespace>:version`` included (as debusine shows it)."""
    flat: dict[str, Any] = {}
    for namespace in namespaces.values():
        flat[f"{namespace.name}:{VERSION}"] = namespace.version
        flat.update(namespace.flat())
    return flat


def effective(static: Mapping[str, Any], dynamic: Mapping[str, Any]) -> dict[str, Any]:
    """Dynamic overlaid by static: static wins on a clash, no deeper merge (debusine issue #8).
    Both sides are deep-copied, as debusine's ``Worker.metadata()`` does: a caller that changes
    the merged metadata (appends to a list) must not change the worker's stored inputs."""
    return {**copy.deepcopy(dict(dynamic)), **copy.deepcopy(dict(static))}


def task_allowed(task: str, static: Mapping[str, Any]) -> bool:
    """debusine's precedence: an allowlist, when present, is the whole list; otherwise all
    tasks but the denied ones."""
    if ALLOWLIST in static:
        return task in static[ALLOWLIST]
    return task not in static.get(DENYLIST, [])


# -------------------------------------------------------------------------- requirements


@dataclass(frozen=True)
class All:
    terms: tuple[Requirement, ...]


@dataclass(frozen=True)
class Any_:
    terms: tuple[Requirement, ...]


@dataclass(frozen=True)
class Not:
    term: Requirement


@dataclass(frozen=True)
class Exists:
    key: str


@dataclass(frozen=True)
class Compare:
    """``eq``/``ne`` with any scalar, ``lt``/``le``/``gt``/``ge`` with a number."""

    op: Literal["eq", "ne", "lt", "le", "gt", "ge"]
    key: str
    value: Scalar


@dataclass(frozen=True)
class In:
    key: str
    values: tuple[Scalar, ...]


@dataclass(frozen=True)
class Contains:
    key: str
    value: Scalar


Requirement: TypeAlias = All | Any_ | Not | Exists | Compare | In | Contains
Leaf: TypeAlias = Exists | Compare | In | Contains


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _scalar(value: object, path: str) -> Scalar:
    if isinstance(value, (str, bool)):
        return value
    if _is_number(value):
        assert isinstance(value, (int, float))
        if isinstance(value, float) and not math.isfinite(value):
            raise RequirementError("not a finite number", position=None, text=path)
        if abs(value) > MAX_EXACT_NUMBER:
            raise RequirementError(
                f"{path}: number too large to compare exactly", expected="|n| <= 2**53"
            )
        return value
    raise RequirementError(
        f"{path}: {json.dumps(value)} is not a scalar",
        text=path,
        expected="a string, number or boolean",
    )


def _req_key(value: object, path: str) -> str:
    if (
        not isinstance(value, str)
        or len(value) > MAX_KEY_LENGTH
        or not KEY_PATTERN.fullmatch(value)
    ):
        raise RequirementError(
            f"{path}: invalid metadata key {json.dumps(value)}",
            text=path,
            expected="a key such as 'system:cpu_count'",
        )
    return value


def _pair(operands: object, path: str, op: str) -> tuple[str, object]:
    if not isinstance(operands, list) or len(operands) != 2:
        raise RequirementError(
            f"{path}: {op!r} takes [key, value]", text=path, expected="a two-element array"
        )
    return _req_key(operands[0], f"{path}[0]"), operands[1]


def parse_requirement(data: object) -> Requirement:
    """The typed tree of a requirement object; RequirementError names the path of a fault."""
    count = 0

    def build(node: object, path: str, depth: int) -> Requirement:
        nonlocal count
        count += 1
        if count > MAX_NODES:
            raise RequirementError("too many conditions", expected=f"at most {MAX_NODES}")
        if depth > MAX_DEPTH:
            raise RequirementError(f"{path}: nested too deeply", expected=f"<= {MAX_DEPTH}")
        if not isinstance(node, dict) or len(node) != 1:
            raise RequirementError(
                f"{path}: a condition is an object with exactly one operator",
                text=path,
                expected="one of " + ", ".join(OPERATORS),
            )
        ((op, operands),) = node.items()
        if op in ("and", "or"):
            if not isinstance(operands, list):
                raise RequirementError(f"{path}.{op}: expected an array of conditions")
            terms = tuple(
                build(term, f"{path}.{op}[{index}]", depth + 1)
                for index, term in enumerate(operands)
            )
            return All(terms) if op == "and" else Any_(terms)
        if op == "not":
            return Not(build(operands, f"{path}.not", depth + 1))
        if op == "exists":
            return Exists(_req_key(operands, f"{path}.exists"))
        if op in ("eq", "ne", *COMPARISONS):
            key, value = _pair(operands, f"{path}.{op}", op)
            scalar = _scalar(value, f"{path}.{op}[1]")
            if op in COMPARISONS and not _is_number(scalar):
                raise RequirementError(
                    f"{path}.{op}[1]: {op!r} compares numbers", expected="a number"
                )
            return Compare(op, key, scalar)
        if op == "in":
            key, values = _pair(operands, f"{path}.in", op)
            if not isinstance(values, list):
                raise RequirementError(f"{path}.in[1]: expected an array of scalars")
            return In(key, tuple(_scalar(v, f"{path}.in[1][{i}]") for i, v in enumerate(values)))
        if op == "contains":
            key, value = _pair(operands, f"{path}.contains", op)
            return Contains(key, _scalar(value, f"{path}.contains[1]"))
        raise RequirementError(
            f"{path}: unknown operator {op!r}{did_you_mean(str(op), OPERATORS)}",
            text=path,
            expected="one of " + ", ".join(OPERATORS),
        )

    return build(data, "$", 0)


def requirement_to_json(node: Requirement) -> Any:
    """The canonical JSON object of a tree (parses back to an equal tree)."""
    if isinstance(node, All):
        return {"and": [requirement_to_json(t) for t in node.terms]}
    if isinstance(node, Any_):
        return {"or": [requirement_to_json(t) for t in node.terms]}
    if isinstance(node, Not):
        return {"not": requirement_to_json(node.term)}
    if isinstance(node, Exists):
        return {"exists": node.key}
    if isinstance(node, Compare):
        return {node.op: [node.key, node.value]}
    if isinstance(node, In):
        return {"in": [node.key, list(node.values)]}
    return {"contains": [node.key, node.value]}


def canonical_requirement(node: Requirement) -> str:
    return json.dumps(requirement_to_json(node), sort_keys=True, separators=(",", ":"))


def leaves(node: Requirement) -> Iterator[Leaf]:
    if isinstance(node, (All, Any_)):
        for term in node.terms:
            yield from leaves(term)
    elif isinstance(node, Not):
        yield from leaves(node.term)
    else:
        yield node


def scalar_equal(left: object, right: object) -> bool:
    """JSON equality of scalars: booleans only equal booleans, numbers compare by value."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if _is_number(left) and _is_number(right):
        return left == right
    return isinstance(left, str) and isinstance(right, str) and left == right


def _is_scalar(value: object) -> bool:
    return isinstance(value, (str, bool)) or _is_number(value)


def evaluate(node: Requirement, metadata: Mapping[str, Any]) -> bool:
    """Whether the requirement holds on the effective metadata (the SQL compiler's oracle)."""
    if isinstance(node, All):
        return all(evaluate(t, metadata) for t in node.terms)
    if isinstance(node, Any_):
        return any(evaluate(t, metadata) for t in node.terms)
    if isinstance(node, Not):
        return not evaluate(node.term, metadata)
    if node.key not in metadata:
        return False
    value = metadata[node.key]
    if isinstance(node, Exists):
        return True
    if isinstance(node, In):
        return _is_scalar(value) and any(scalar_equal(value, v) for v in node.values)
    if isinstance(node, Contains):
        return isinstance(value, list) and any(
            _is_scalar(item) and scalar_equal(item, node.value) for item in value
        )
    if node.op == "eq":
        return _is_scalar(value) and scalar_equal(value, node.value)
    if node.op == "ne":
        return _is_scalar(value) and not scalar_equal(value, node.value)
    if not _is_number(value):
        return False
    limit = node.value
    assert isinstance(limit, (int, float))
    return bool(
        {
            "lt": value < limit,
            "le": value <= limit,
            "gt": value > limit,
            "ge": value >= limit,
        }[node.op]
    )


def describe_failure(node: Requirement, metadata: Mapping[str, Any]) -> list[str]:
    """Sentences naming the parts of a failing requirement and what the worker has."""
    if evaluate(node, metadata):
        return []
    if isinstance(node, All):
        return [why for term in node.terms for why in describe_failure(term, metadata)]
    if isinstance(node, Any_):
        return [
            "none of these alternatives holds: "
            + "; ".join(json.dumps(requirement_to_json(t)) for t in node.terms)
        ]
    shown = json.dumps(requirement_to_json(node))
    if isinstance(node, Not):
        return [f"requirement {shown} fails: its negation holds"]
    if node.key not in metadata:
        return [f"requirement {shown} fails: the worker has no {node.key}"]
    return [f"requirement {shown} fails: {node.key} is {json.dumps(metadata[node.key])}"]
