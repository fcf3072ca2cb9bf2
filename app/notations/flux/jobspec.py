"""RFC 14 canonical jobspec, resources part: validation, model and canonical JSON/YAML.

A resources list is a non-empty list of vertices ``{type, count, unit?, exclusive?, with?,
label?, id?}``. Rules enforced (docs/notations/flux.md#rfc-14-jobspec-resources, convention
C9): ``type`` a
non-empty string; ``count`` per :mod:`app.notations.flux.ranges`; ``unit``, ``label`` and ``id``
strings; ``exclusive`` a boolean; ``with`` a non-empty list; a ``slot`` has a label and a
``with``; labels are unique in the whole list. Keys outside RFC 14 ("extension keys", which
RFC 46 shapes may carry) pass through untouched unless ``allow_extensions=False`` asks for the
RFC 14 schema's ``additionalProperties: false``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, Unpack

import yaml

from app.notations.errors import NotationError, Where
from app.notations.flux.ranges import Count, RangeError, count_to_json, validate_count

#: Reserved vertex keys of RFC 14.
RESERVED_KEYS = ("type", "count", "unit", "exclusive", "with", "label", "id")
#: Deepest ``with`` nesting accepted.
MAX_DEPTH = 32
#: Most vertices accepted in one resources list.
MAX_VERTICES = 10_000

JobspecRule = Literal["structure", "count", "slot", "type"]


class JobspecError(NotationError):
    """A jobspec resources list breaks an RFC 14 rule; ``path`` names the offending value
    (e.g. ``resources[0].with[1].count``) and ``rule`` the family of rule broken."""

    notation = "rfc14-jobspec"

    def __init__(
        self,
        message: str,
        *,
        path: str,
        rule: JobspecRule,
        **where: Unpack[Where],
    ) -> None:
        self.path = path
        self.rule = rule
        super().__init__(f"{path}: {message}", **where)


@dataclass(frozen=True)
class ResourceVertex:
    """One validated resource vertex. Extension values are kept as canonical JSON text so the
    model stays hashable; :meth:`extension_values` decodes them."""

    type: str
    count: Count
    label: str | None = None
    unit: str | None = None
    exclusive: bool | None = None
    id: str | None = None
    extensions: tuple[tuple[str, str], ...] = ()
    with_: tuple[ResourceVertex, ...] = ()

    def extension_values(self) -> dict[str, object]:
        """Extension keys with their decoded JSON values, in key order."""
        return {key: json.loads(text) for key, text in self.extensions}

    def to_json(self, *, ranges: Literal["dict", "string"] = "dict") -> dict[str, object]:
        """The vertex as a JSON-ready dict in canonical key order."""
        out: dict[str, object] = {
            "type": self.type,
            "count": count_to_json(self.count, ranges=ranges),
        }
        if self.label is not None:
            out["label"] = self.label
        if self.unit is not None:
            out["unit"] = self.unit
        if self.exclusive is not None:
            out["exclusive"] = self.exclusive
        if self.id is not None:
            out["id"] = self.id
        out.update(self.extension_values())
        if self.with_:
            out["with"] = [child.to_json(ranges=ranges) for child in self.with_]
        return out


Resources = tuple[ResourceVertex, ...]


def validate_resources(value: object, *, allow_extensions: bool = True) -> Resources:
    """Validate an RFC 14 resources list (parsed JSON/YAML) and return its model."""
    state = _State(allow_extensions)
    vertices = state.vertex_list(value, "resources", 1)
    return vertices


class _State:
    def __init__(self, allow_extensions: bool) -> None:
        self.allow_extensions = allow_extensions
        self.labels: dict[str, str] = {}
        self.vertices = 0

    def vertex_list(self, value: object, path: str, depth: int) -> Resources:
        if not isinstance(value, list):
            raise JobspecError(
                f"is a {type(value).__name__}", path=path, rule="structure", expected="a list"
            )
        if not value:
            raise JobspecError(
                "is empty", path=path, rule="structure", expected="at least one vertex"
            )
        if depth > MAX_DEPTH:
            raise JobspecError(
                f"nests deeper than {MAX_DEPTH} levels",
                path=path,
                rule="structure",
                expected=f"at most {MAX_DEPTH} levels of 'with'",
            )
        return tuple(
            self.vertex(item, f"{path}[{index}]", depth) for index, item in enumerate(value)
        )

    def vertex(self, value: object, path: str, depth: int) -> ResourceVertex:
        self.vertices += 1
        if self.vertices > MAX_VERTICES:
            raise JobspecError(
                f"more than {MAX_VERTICES} vertices",
                path=path,
                rule="structure",
                expected=f"at most {MAX_VERTICES} vertices",
            )
        if not isinstance(value, dict):
            raise JobspecError(
                f"is a {type(value).__name__}", path=path, rule="structure", expected="an object"
            )
        for key in ("type", "count"):
            if key not in value:
                raise JobspecError(
                    f"has no {key!r} key", path=path, rule="structure", expected=f"a {key}"
                )
        vtype = value["type"]
        if not isinstance(vtype, str) or not vtype:
            raise JobspecError(
                f"type {vtype!r} is not a non-empty string",
                path=f"{path}.type",
                rule="type",
                expected="a resource type name",
            )
        try:
            count = validate_count(value["count"])
        except RangeError as error:
            raise JobspecError(
                error.message, path=f"{path}.count", rule="count", expected=error.expected
            ) from error
        strings = {key: self._string(value, key, path) for key in ("unit", "label", "id")}
        exclusive = value.get("exclusive")
        if exclusive is not None and not isinstance(exclusive, bool):
            raise JobspecError(
                f"exclusive is {exclusive!r}",
                path=f"{path}.exclusive",
                rule="type",
                expected="true or false",
            )
        label = strings["label"]
        if vtype == "slot" and label is None:
            raise JobspecError(
                "slot has no label", path=path, rule="slot", expected="a 'label' string"
            )
        if label is not None:
            if not label:
                raise JobspecError(
                    "label is empty", path=f"{path}.label", rule="slot", expected="a name"
                )
            if label in self.labels:
                raise JobspecError(
                    f"label {label!r} is already used at {self.labels[label]}",
                    path=f"{path}.label",
                    rule="slot",
                    expected="labels unique within the jobspec",
                )
            self.labels[label] = path
        extensions = self._extensions(value, path)
        children: Resources = ()
        if "with" in value:
            children = self.vertex_list(value["with"], f"{path}.with", depth + 1)
        elif vtype == "slot":
            raise JobspecError(
                "slot has no 'with'",
                path=path,
                rule="slot",
                expected="a slot to contain at least one resource",
            )
        return ResourceVertex(
            type=vtype,
            count=count,
            label=label,
            unit=strings["unit"],
            exclusive=exclusive,
            id=strings["id"],
            extensions=extensions,
            with_=children,
        )

    @staticmethod
    def _string(value: dict[str, object], key: str, path: str) -> str | None:
        item = value.get(key)
        if item is not None and not isinstance(item, str):
            raise JobspecError(
                f"{key} is {item!r}", path=f"{path}.{key}", rule="type", expected="a string"
            )
        return item

    def _extensions(self, value: dict[str, object], path: str) -> tuple[tuple[str, str], ...]:
        extra = sorted((key for key in value if key not in RESERVED_KEYS), key=str)
        if extra and not self.allow_extensions:
            raise JobspecError(
                f"unknown key {extra[0]!r}",
                path=path,
                rule="structure",
                expected="only " + ", ".join(RESERVED_KEYS),
            )
        out: list[tuple[str, str]] = []
        for key in extra:
            if not isinstance(key, str):
                raise JobspecError(
                    f"key {key!r} is not a string", path=path, rule="type", expected="a string"
                )
            try:
                text = json.dumps(
                    value[key], sort_keys=True, separators=(",", ":"), allow_nan=False
                )
            except (TypeError, ValueError) as error:
                raise JobspecError(
                    f"value of {key!r} is not JSON: {error}",
                    path=f"{path}.{key}",
                    rule="type",
                    expected="a JSON value",
                ) from error
            out.append((key, text))
        return tuple(out)


def resources_to_json(
    resources: Resources, *, ranges: Literal["dict", "string"] = "dict"
) -> list[dict[str, object]]:
    """The resources list as JSON-ready dicts (canonical key order)."""
    return [vertex.to_json(ranges=ranges) for vertex in resources]


def dump_resources_json(resources: Resources) -> str:
    """Canonical JSON text: fixed key order, no insignificant whitespace."""
    return json.dumps(resources_to_json(resources), separators=(",", ":"), ensure_ascii=False)


def dump_resources_yaml(resources: Resources) -> str:
    """YAML text in the layout of the RFC 14 examples (block style, key order kept).

    Non-ASCII characters are written as escapes: PyYAML emits some of them raw (U+0085 NEL,
    U+2028) where a YAML reader folds them as line breaks, which would not round-trip.
    """
    return yaml.safe_dump(
        resources_to_json(resources), sort_keys=False, default_flow_style=False, allow_unicode=False
    )


def load_resources_json(text: str, *, allow_extensions: bool = True) -> Resources:
    """Parse and validate a JSON resources list."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise JobspecError(
            f"is not JSON: {error.msg}",
            path="resources",
            rule="structure",
            text=text,
            position=error.pos,
            expected="a JSON list",
        ) from error
    return validate_resources(value, allow_extensions=allow_extensions)


def load_resources_yaml(text: str, *, allow_extensions: bool = True) -> Resources:
    """Parse (safe loader) and validate a YAML resources list."""
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        raise JobspecError(
            f"is not YAML: {error}",
            path="resources",
            rule="structure",
            text=text,
            position=None if mark is None else mark.index,
            expected="a YAML list",
        ) from error
    return validate_resources(value, allow_extensions=allow_extensions)


def walk(resources: Resources) -> Iterator[tuple[int, ResourceVertex, bool]]:
    """Depth-first ``(depth, vertex, effective exclusive)``. RFC 14: exclusive defaults to
    false outside slots and true for a slot and everything in it, unless a vertex says so."""

    def visit(
        vertices: Resources, depth: int, inherited: bool
    ) -> Iterator[tuple[int, ResourceVertex, bool]]:
        for vertex in vertices:
            default = inherited or vertex.type == "slot"
            exclusive = default if vertex.exclusive is None else vertex.exclusive
            yield depth, vertex, exclusive
            yield from visit(vertex.with_, depth + 1, inherited or vertex.type == "slot")

    return visit(resources, 0, False)
