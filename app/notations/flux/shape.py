"""RFC 46 resource shapes: ``slot=4{nodelevel}/node{-x}/socket=2+/core=4+`` <-> RFC 14 lists.

Grammar (RFC 46)::

    list   : '[' vertex (';' vertex)* ']' | vertex
    vertex : 'slot' ('=' count)? ('{' label (',' item)* '}')? '/' list
           | type ('=' count)? dict? ('/' list)?
    dict   : '{' (item (',' item)*)? '}'
    item   : key ':' VALUE | ('+'|'-')? key

Conventions where RFC 46 is silent (docs/notations/flux.md#rfc-46-shapes): C1/C2 range counts become
RFC 14 dicts; C3 idset counts keep their text, brackets stripped; C4 a lone ``a-b`` is a range
and ``[N]`` the integer N; C5 a lone unlabelled slot gets ``default_label``; C6 ``x`` means
``exclusive`` only as a key of a vertex dict, and the first entry of a slot's braces is always
its label; C7 labels are strings; C8 value typing (quoted -> string, exact ``true``/``false``/
``null`` -> literals, a complete JSON number -> number, arrays strict JSON, nested objects in
the relaxed syntax, anything else -> string); C9 RFC 14 rules are checked after expansion;
C10 whitespace outside quotes is an error.

Further decisions: a reserved key (``type``, ``count``, ``with``, ``label``) inside braces
and a repeated key are syntax errors (A6, A7); ``slot{}`` is a syntax error (the grammar
requires a label inside a slot's braces); ``slot`` is case-sensitive (A9); both ``"`` (JSON
escapes) and ``'`` (no escapes) quote strings (A4).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Literal, Unpack

from app.notations.errors import NotationError, Where
from app.notations.flux.jobspec import (
    JobspecError,
    Resources,
    ResourceVertex,
    resources_to_json,
    validate_resources,
)
from app.notations.flux.ranges import (
    CountSyntaxError,
    IdsetCount,
    RangeCount,
    RangeError,
    parse_count_string,
)

ShapeErrorKind = Literal["syntax", "count", "slot", "rfc14"]
RangeForm = Literal["dict", "string"]

#: Longest shape text accepted.
MAX_SHAPE_LENGTH = 65_536
#: Deepest nesting of lists, braces and arrays accepted.
MAX_SHAPE_DEPTH = 32

_SPECIAL = set("[]{};/,:=\"'")
_COUNT_CHARS = set("0123456789,-+:*^")
_VALUE_STOP = set(",{}[];\"'")
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_SAFE_WORD = re.compile(r"[A-Za-z0-9_.@][A-Za-z0-9_.@+-]*")
_BRACE_RESERVED = ("type", "count", "with", "label")
_LITERALS: dict[str, object] = {"true": True, "false": False, "null": None}


class ShapeError(NotationError):
    """An RFC 46 shape string is malformed (``kind="syntax"``), has an invalid count
    (``"count"``), breaks the slot label rules (``"slot"``) or expands to a resources list
    that breaks another RFC 14 rule (``"rfc14"``)."""

    notation = "rfc46-shape"

    def __init__(
        self,
        message: str,
        *,
        kind: ShapeErrorKind,
        **where: Unpack[Where],
    ) -> None:
        self.kind = kind
        super().__init__(f"{kind} error: {message}", **where)


@dataclass
class _Vertex:
    """A vertex as parsed, before slot labels are settled and RFC 14 checks run."""

    type: str
    count: object
    position: int
    label: str | None = None
    items: dict[str, object] = field(default_factory=dict)
    children: list[_Vertex] = field(default_factory=list)


class _Parser:
    def __init__(self, text: str, ranges: RangeForm) -> None:
        self.text = text
        self.pos = 0
        self.ranges = ranges

    # -- helpers ------------------------------------------------------------------------

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def error(self, message: str, expected: str, position: int | None = None) -> ShapeError:
        where = self.pos if position is None else position
        return ShapeError(message, kind="syntax", text=self.text, position=where, expected=expected)

    def unexpected(self, expected: str) -> ShapeError:
        char = self.peek()
        if char == "":
            return self.error("unexpected end of shape", expected)
        if char.isspace():
            return self.error(
                "whitespace is not allowed outside quotes", expected + " (remove the space)"
            )
        return self.error(f"unexpected {char!r}", expected)

    def expect(self, char: str, expected: str) -> None:
        if self.peek() != char:
            raise self.unexpected(expected)
        self.pos += 1

    # -- grammar ------------------------------------------------------------------------

    def shape(self) -> list[_Vertex]:
        if self.text == "":
            raise self.error("empty shape", "a resource vertex such as slot/core")
        vertices = self.vertex_list(1)
        if self.pos != len(self.text):
            char = self.peek()
            if char == ";":
                raise self.error("';' outside brackets", "vertices separated by ';' inside '[...]'")
            if char == "/":
                raise self.error("'/' after a bracketed list", "the end of the shape")
            raise self.unexpected("the end of the shape")
        return vertices

    def vertex_list(self, depth: int) -> list[_Vertex]:
        if depth > MAX_SHAPE_DEPTH:
            raise self.error(
                f"shape nests deeper than {MAX_SHAPE_DEPTH} levels",
                f"at most {MAX_SHAPE_DEPTH} levels",
            )
        if self.peek() != "[":
            return [self.vertex(depth)]
        opening = self.pos
        self.pos += 1
        if self.peek() == "]":
            raise self.error("empty list '[]'", "at least one vertex inside '[...]'")
        vertices = [self.vertex(depth)]
        while self.peek() == ";":
            self.pos += 1
            vertices.append(self.vertex(depth))
        if self.peek() == "":
            raise self.error(f"'[' at position {opening} is never closed", "']' closing the list")
        self.expect("]", "';' and another vertex, or ']' closing the list")
        return vertices

    def vertex(self, depth: int) -> _Vertex:
        start = self.pos
        vtype = self.word("a resource type")
        vertex = _Vertex(type=vtype, count=1, position=start)
        if self.peek() == "=":
            self.pos += 1
            vertex.count = self.count()
        if self.peek() == "{":
            self.braces(vertex, depth)
        if self.peek() == "/":
            self.pos += 1
            if self.peek() in ("", ";", "]"):
                raise self.unexpected(f"the resources inside {vtype!r} after '/'")
            vertex.children = self.vertex_list(depth + 1)
        elif vtype == "slot":
            raise self.unexpected("'/' and the resources a slot contains")
        return vertex

    def count(self) -> object:
        start = self.pos
        if self.peek() == "[":
            close = self.text.find("]", start)
            if close < 0:
                raise self.error("'[' of a count is never closed", "']'")
            self.pos = close + 1
        else:
            while self.peek() in _COUNT_CHARS and self.peek() != "":
                self.pos += 1
        token = self.text[start : self.pos]
        if token == "":
            raise self.unexpected("a count (integer, idset or range) after '='")
        if self.peek() not in ("", "{", "/", ";", "]"):
            raise self.unexpected("'{', '/', ';', ']' or the end after the count")
        try:
            count = parse_count_string(token)
        except RangeError as error:
            offset = error.position or 0
            # docs/notations/flux.md#rfc-46-shapes: a count token that is not well-formed RFC 45
            # text is a grammar violation (``syntax``); a well-formed one breaking RFC 14's
            # rules is a ``count`` error.
            raise ShapeError(
                f"invalid count {token!r}: {error.message}",
                kind="syntax" if isinstance(error, CountSyntaxError) else "count",
                text=self.text,
                position=start + offset,
                expected=error.expected,
            ) from error
        if isinstance(count, RangeCount):
            if self.ranges == "dict":
                return count.as_dict()
            return token[1:-1] if token.startswith("[") else token
        if isinstance(count, IdsetCount):
            return count.text
        return count

    def braces(self, vertex: _Vertex, depth: int) -> None:
        opening = self.pos
        self.pos += 1
        if vertex.type == "slot":
            if self.peek() in ("+", "-"):
                raise self.error(
                    "a slot's braces must start with its label", "the slot label first"
                )
            if self.peek() == "}":
                raise self.error("empty braces on a slot", "the slot label, or no braces at all")
            vertex.label = self.word("the slot label")
            if self.peek() == ":":
                raise self.error(
                    "the first entry of a slot's braces is its label, not key:value",
                    "a bare label such as slot{mylabel,key:value}",
                )
            if self.peek() == ",":
                self.pos += 1
                self.items(vertex.items, True, depth, opening)
        elif self.peek() != "}":
            self.items(vertex.items, True, depth, opening)
        if self.peek() == "":
            raise self.error(f"'{{' at position {opening} is never closed", "'}'")
        self.expect("}", "',' and another item, or '}'")

    def items(self, into: dict[str, object], vertex_level: bool, depth: int, opening: int) -> None:
        while True:
            start = self.pos
            key, value = self.item(vertex_level, depth)
            if vertex_level and key in _BRACE_RESERVED:
                raise self.error(
                    f"key {key!r} cannot be set inside braces",
                    "type=count{...}/children; a slot label as the first entry of slot{...}",
                    start,
                )
            if key in into:
                raise self.error(f"key {key!r} is given twice", "each key once", start)
            into[key] = value
            if self.peek() != ",":
                return
            self.pos += 1
            if self.peek() in ("}", ""):
                raise self.unexpected(f"another item after ',' (braces opened at {opening})")

    def item(self, vertex_level: bool, depth: int) -> tuple[str, object]:
        sign = self.peek() if self.peek() in ("+", "-") else None
        if sign:
            self.pos += 1
        quoted = self.peek() in ("'", '"')
        key = self.word("a key")
        if vertex_level and not quoted and key == "x":
            key = "exclusive"
        if self.peek() == ":":
            if sign:
                raise self.error(
                    f"'{sign}{key}' marks a boolean and cannot take a value",
                    f"either {sign}{key} or {key}:value",
                )
            self.pos += 1
            return key, self.value(depth)
        return key, sign != "-"

    def value(self, depth: int) -> object:
        char = self.peek()
        if char in ("'", '"'):
            return self.quoted()
        if char == "[":
            return self.json_array()
        if char == "{":
            if depth + 1 > MAX_SHAPE_DEPTH:
                raise self.error("values nest too deeply", f"at most {MAX_SHAPE_DEPTH} levels")
            opening = self.pos
            self.pos += 1
            nested: dict[str, object] = {}
            if self.peek() != "}":
                self.items(nested, False, depth + 1, opening)
            if self.peek() == "":
                raise self.error(f"'{{' at position {opening} is never closed", "'}'")
            self.expect("}", "',' and another item, or '}'")
            return nested
        start = self.pos
        while self.peek() and self.peek() not in _VALUE_STOP and not self.peek().isspace():
            self.pos += 1
        token = self.text[start : self.pos]
        if token == "":
            raise self.unexpected("a value after ':'")
        if token in _LITERALS:
            return _LITERALS[token]
        if _JSON_NUMBER.fullmatch(token):
            return json.loads(token)
        return token

    def json_array(self) -> object:
        start = self.pos
        try:
            value, end = json.JSONDecoder().raw_decode(self.text, start)
        except json.JSONDecodeError as error:
            raise self.error(
                f"invalid JSON array: {error.msg}", "a JSON array such as [1,2]", error.pos
            ) from error
        except RecursionError as error:
            raise self.error("array nests too deeply", "a shallower array", start) from error
        in_string = escaped = False
        for index in range(start, end):  # C10: JSON whitespace is still whitespace
            char = self.text[index]
            if in_string:
                escaped = not escaped and char == "\\"
                in_string = escaped or char != '"'
            elif char == '"':
                in_string = True
            elif char.isspace():
                raise self.error(
                    "whitespace is not allowed outside quotes", "a compact JSON array", index
                )
        self.pos = end
        return value

    def word(self, what: str) -> str:
        if self.peek() in ("'", '"'):
            return self.quoted()
        start = self.pos
        while self.peek() and self.peek() not in _SPECIAL and not self.peek().isspace():
            self.pos += 1
        if self.pos == start:
            raise self.unexpected(what)
        return self.text[start : self.pos]

    def quoted(self) -> str:
        start = self.pos
        quote = self.peek()
        if quote == '"':
            try:  # a double-quoted string is a JSON string, escapes included (A4)
                value, end = json.JSONDecoder().raw_decode(self.text, start)
            except json.JSONDecodeError as error:
                raise self.error(
                    "unclosed or invalid quoted string", 'a closing "', start
                ) from error
            self.pos = end
            return str(value)
        close = self.text.find("'", start + 1)
        if close < 0:
            raise self.error("unclosed quoted string", "a closing '", start)
        self.pos = close + 1
        return self.text[start + 1 : close]


def _settle_slots(vertices: list[_Vertex], text: str, default_label: str) -> None:
    """RFC 46: a label may be omitted only when the shape holds exactly one slot."""
    slots: list[_Vertex] = []

    def collect(level: list[_Vertex]) -> None:
        for vertex in level:
            if vertex.type == "slot":
                slots.append(vertex)
            collect(vertex.children)

    collect(vertices)
    unlabelled = [slot for slot in slots if slot.label is None]
    if unlabelled and len(slots) > 1:
        raise ShapeError(
            f"the shape has {len(slots)} slots and the one at position "
            f"{unlabelled[0].position} has no label",
            kind="slot",
            text=text,
            position=unlabelled[0].position,
            expected="a label on every slot, e.g. slot{name}/...",
        )
    if unlabelled:
        unlabelled[0].label = default_label
    seen: dict[str, int] = {}
    for slot in slots:
        assert slot.label is not None
        if slot.label in seen:
            raise ShapeError(
                f"slot label {slot.label!r} is used twice (first at position {seen[slot.label]})",
                kind="slot",
                text=text,
                position=slot.position,
                expected="unique slot labels",
            )
        seen[slot.label] = slot.position


def _to_json(
    vertices: list[_Vertex], path: str, positions: dict[str, int]
) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for index, vertex in enumerate(vertices):
        here = f"{path}[{index}]"
        positions[here] = vertex.position
        item: dict[str, object] = {"type": vertex.type, "count": vertex.count}
        if vertex.label is not None:
            item["label"] = vertex.label
        item.update(vertex.items)
        if vertex.children:
            item["with"] = _to_json(vertex.children, f"{here}.with", positions)
        out.append(item)
    return out


def _parse(
    text: str, default_label: str, ranges: RangeForm
) -> tuple[list[dict[str, object]], Resources]:
    if not isinstance(text, str):
        raise ShapeError(f"expected text, found {type(text).__name__}", kind="syntax")
    if len(text) > MAX_SHAPE_LENGTH:
        raise ShapeError(
            f"shape is {len(text)} characters long",
            kind="syntax",
            expected=f"at most {MAX_SHAPE_LENGTH} characters",
        )
    vertices = _Parser(text, ranges).shape()
    _settle_slots(vertices, text, default_label)
    positions: dict[str, int] = {}
    resources = _to_json(vertices, "resources", positions)
    try:
        model = validate_resources(resources)
    except JobspecError as error:
        vertex_path = max((p for p in positions if error.path.startswith(p)), key=len, default="")
        kind: ShapeErrorKind = (
            "count" if error.rule == "count" else "slot" if error.rule == "slot" else "rfc14"
        )
        raise ShapeError(
            error.message,
            kind=kind,
            text=text,
            position=positions.get(vertex_path),
            expected=error.expected,
        ) from error
    return resources, model


def parse_shape(
    text: str, default_label: str = "default", *, ranges: RangeForm = "dict"
) -> list[dict[str, object]]:
    """Expand an RFC 46 shape into the RFC 14 resources list (JSON-ready dicts).

    ``ranges="string"`` keeps RFC 45 range counts as written (flux-core's default) instead of
    the C1/C2 dicts.
    """
    return _parse(text, default_label, ranges)[0]


def parse_shape_resources(text: str, default_label: str = "default") -> Resources:
    """Expand an RFC 46 shape into the validated resources model."""
    return _parse(text, default_label, "dict")[1]


def format_shape(
    resources: Resources | list[dict[str, object]], default_label: str = "default"
) -> str:
    """The canonical shape of a resources list: ``=1`` and empty braces omitted, counts in
    their shortest RFC 45/22 text, ``x``/``-x`` for exclusive, a lone slot's label omitted when
    it is ``default_label``. Raises :class:`ShapeError` when no shape expands to the list
    (e.g. a label on a non-slot vertex)."""
    model = resources if isinstance(resources, tuple) else _validated(resources)
    slots = sum(1 for vertex in _all(model) if vertex.type == "slot")
    text = _format_list(model, slots, default_label)
    expected = resources_to_json(model)
    try:
        again = parse_shape(text, default_label)
    except ShapeError as error:
        raise ShapeError(
            f"resources list has no RFC 46 shape form ({error.message})",
            kind="rfc14",
            expected="a list whose every key a shape can express",
        ) from error
    if again != expected:
        raise ShapeError(
            "resources list has no RFC 46 shape form (it would read back differently)",
            kind="rfc14",
            expected="a list whose every key a shape can express",
        )
    return text


def _validated(resources: object) -> Resources:
    try:
        return validate_resources(resources)
    except JobspecError as error:
        raise ShapeError(
            error.message,
            kind="count" if error.rule == "count" else "slot" if error.rule == "slot" else "rfc14",
            expected=error.expected,
        ) from error


def _all(vertices: Resources) -> list[ResourceVertex]:
    out: list[ResourceVertex] = []
    for vertex in vertices:
        out.append(vertex)
        out.extend(_all(vertex.with_))
    return out


def _format_list(vertices: Resources, slots: int, default_label: str) -> str:
    parts = [_format_vertex(vertex, slots, default_label) for vertex in vertices]
    return parts[0] if len(parts) == 1 else "[" + ";".join(parts) + "]"


def _format_vertex(vertex: ResourceVertex, slots: int, default_label: str) -> str:
    text = _format_word(vertex.type)
    count = vertex.count
    if count != 1:
        text += "=" + (count.short() if isinstance(count, RangeCount) else str(count))
    items: list[str] = []
    if vertex.unit is not None:
        items.append("unit:" + _format_value(vertex.unit))
    if vertex.exclusive is not None:
        items.append("x" if vertex.exclusive else "-x")
    if vertex.id is not None:
        items.append("id:" + _format_value(vertex.id))
    for key, value in vertex.extension_values().items():
        items.append(_format_item(key, value, vertex_level=True))
    if vertex.label is not None and vertex.type != "slot":
        raise ShapeError(
            f"{vertex.type!r} vertex has label {vertex.label!r}; a shape can label only slots",
            kind="rfc14",
            expected="labels on slot vertices only",
        )
    if vertex.label is not None:
        lone_default = slots == 1 and vertex.label == default_label and not items
        if not lone_default:
            items.insert(0, _format_word(vertex.label))
    if items:
        text += "{" + ",".join(items) + "}"
    if vertex.with_:
        text += "/" + _format_list(vertex.with_, slots, default_label)
    return text


def _format_word(word: str) -> str:
    if _SAFE_WORD.fullmatch(word):
        return word
    return json.dumps(word, ensure_ascii=False)


def _format_key(key: str, vertex_level: bool) -> str:
    if vertex_level and key == "x":
        return '"x"'
    return _format_word(key)


def _format_item(key: str, value: object, *, vertex_level: bool) -> str:
    shown = _format_key(key, vertex_level)
    if value is True:
        return shown
    if value is False:
        return "-" + shown
    return f"{shown}:{_format_value(value)}"


def _format_value(value: object) -> str:
    if isinstance(value, str):
        if value in _LITERALS or _JSON_NUMBER.fullmatch(value) or not _SAFE_WORD.fullmatch(value):
            return json.dumps(value, ensure_ascii=False)
        return value
    if isinstance(value, dict):
        inner = [_format_item(key, item, vertex_level=False) for key, item in value.items()]
        return "{" + ",".join(inner) + "}"
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
