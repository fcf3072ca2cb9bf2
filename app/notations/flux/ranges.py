"""RFC 45 range strings and the RFC 14 resource ``count`` values they stand for.

A count is one of: a positive integer; an RFC 22 idset of acceptable counts (``"4,9,16,25"``);
an RFC 45 range string (``"2-8:2:*"``, ``"4+"``); or the RFC 14 range dict
``{min, max?, operator?, operand?}``. The model is ``int | RangeCount | IdsetCount``.

Conventions (docs/notations/flux.md#rfc-45-ranges-and-rfc-14-counts): C1 a bounded range maps
to a dict with all four keys;
C2 an open range maps to ``{min}`` when operator and operand are the defaults, otherwise to
``{min, operator, operand}`` (never ``max: Infinity``); C3 an idset count keeps its text as
written, brackets stripped; C4 a lone ``a-b`` is a range, ``[N]`` is the integer N.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from app.notations.errors import NotationError, did_you_mean
from app.notations.flux.idset import IdSet, IdsetError, IdsetSyntaxError, parse_idset

Operator = Literal["+", "*", "^"]
OPERATORS: tuple[Operator, ...] = ("+", "*", "^")
CountKind = Literal["integer", "range", "idset", "range|idset"]

#: Largest count value accepted anywhere (fits a signed 64-bit SQL column).
COUNT_MAX = 2**63 - 1
#: Longest count text accepted.
MAX_COUNT_TEXT = 4096

_NUMBER = r"(?:0|[1-9][0-9]*)"
_RANGE = re.compile(
    rf"(?P<min>{_NUMBER})(?:-(?P<max>{_NUMBER})|(?P<open>\+))"
    rf"(?::(?P<operand>{_NUMBER})(?::(?P<operator>[+*^]))?)?"
)
_INTEGER = re.compile(r"[0-9]+")
_RANGE_DICT_KEYS = ("min", "max", "operator", "operand")


class RangeError(NotationError):
    """A count (RFC 45 range string, RFC 22 idset count, integer or RFC 14 range dict) is
    malformed or violates RFC 14's rules on min, max, operator and operand."""

    notation = "rfc45-range"


class CountSyntaxError(RangeError):
    """A count token is not a well-formed RFC 45 range, RFC 22 idset or integer string (a
    dangling separator, a stray character, an unbalanced bracket, nothing at all), as
    opposed to a well-formed count that breaks RFC 14's rules (0, leading zeros, max below
    min, operand rules)."""


@dataclass(frozen=True)
class RangeCount:
    """The value sequence ``min, min∘k, ...`` up to ``max`` (open when ``max`` is None)."""

    min: int
    max: int | None = None
    operator: Operator = "+"
    operand: int = 1

    def __post_init__(self) -> None:
        _check_range(self.min, self.max, self.operator, self.operand, None, None)

    # -- forms --------------------------------------------------------------------------

    def as_dict(self) -> dict[str, object]:
        """RFC 14 range dict per C1 (bounded: four keys) and C2 (open: elide defaults)."""
        if self.max is not None:
            return {
                "min": self.min,
                "max": self.max,
                "operator": self.operator,
                "operand": self.operand,
            }
        if self.operator == "+" and self.operand == 1:
            return {"min": self.min}
        return {"min": self.min, "operator": self.operator, "operand": self.operand}

    def long(self) -> str:
        """flux-core's long encoding: ``min-max:operand:operator``; ``min == max`` is plain."""
        if self.max == self.min:
            return str(self.min)
        bound = "+" if self.max is None else f"-{self.max}"
        return f"{self.min}{bound}:{self.operand}:{self.operator}"

    def short(self, *, brackets: bool = False) -> str:
        """Shortest RFC 45 string: defaults dropped (``2-5``, ``2+``, ``1-5:2``)."""
        if self.max == self.min:
            return str(self.min)
        text = f"{self.min}" + ("+" if self.max is None else f"-{self.max}")
        if self.operator != "+":
            text += f":{self.operand}:{self.operator}"
        elif self.operand != 1:
            text += f":{self.operand}"
        return f"[{text}]" if brackets else text

    def __str__(self) -> str:
        return self.short()

    # -- values -------------------------------------------------------------------------

    def values(self) -> Iterator[int]:
        """Acceptable counts in ascending order (endless for an open range)."""
        value = self.min
        limit = COUNT_MAX if self.max is None else self.max
        while value <= limit:
            yield value
            value = self._step(value)

    def _step(self, value: int) -> int:
        if self.operator == "+":
            return value + self.operand
        if self.operator == "*":
            return value * self.operand
        # '^' grows doubly exponentially; stop computing once past any representable count.
        return value**self.operand if value <= COUNT_MAX else COUNT_MAX + 1

    def __contains__(self, item: object) -> bool:
        if not isinstance(item, int) or isinstance(item, bool):
            return False
        if item < self.min or (self.max is not None and item > self.max):
            return False
        if self.operator == "+":
            return (item - self.min) % self.operand == 0
        return any(value == item for value in itertools.takewhile(lambda v: v <= item, self))

    def __iter__(self) -> Iterator[int]:
        return self.values()

    def largest(self, available: int) -> int | None:
        """Largest acceptable count not above ``available`` (RFC 14: allocate the most)."""
        if available < self.min:
            return None
        cap = available if self.max is None else min(available, self.max)
        if self.operator == "+":
            return self.min + (cap - self.min) // self.operand * self.operand
        best = self.min
        for value in self.values():
            if value > cap:
                break
            best = value
        return best


@dataclass(frozen=True)
class IdsetCount:
    """An RFC 22 idset of acceptable counts; ``text`` is kept as written (C3)."""

    text: str
    ids: IdSet

    def __str__(self) -> str:
        return self.text

    def values(self) -> Iterator[int]:
        """Acceptable counts in ascending order."""
        return iter(self.ids)

    def largest(self, available: int) -> int | None:
        """Largest acceptable count not above ``available``."""
        best = None
        for lo, hi in self.ids.runs:
            if lo > available:
                break
            best = min(hi, available)
        return best


Count = int | RangeCount | IdsetCount


def _check_range(
    minimum: object,
    maximum: object,
    operator: object,
    operand: object,
    text: str | None,
    position: int | None,
) -> None:
    """RFC 14 rules: min >= 1, max >= min, operand >= 1, '*'/'^' need operand >= 2, '^' min >= 2."""

    def fail(message: str, expected: str) -> RangeError:
        return RangeError(message, text=text, position=position, expected=expected)

    for name, value in (("min", minimum), ("max", maximum), ("operand", operand)):
        if name == "max" and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail(f"{name} is {value!r}", f"an integer {name}")
        if not 1 <= value <= COUNT_MAX:
            raise fail(f"{name} is {value}", f"a {name} between 1 and {COUNT_MAX}")
    if operator not in OPERATORS:
        hint = did_you_mean(str(operator), OPERATORS) if isinstance(operator, str) else ""
        raise fail(f"unknown operator {operator!r}{hint}", "one of '+', '*', '^'")
    assert isinstance(minimum, int) and isinstance(operand, int)
    if maximum is not None and isinstance(maximum, int) and maximum < minimum:
        raise fail(f"max {maximum} is below min {minimum}", "max >= min")
    if operator in ("*", "^") and operand < 2:
        raise fail(f"operator {operator!r} with operand {operand} never grows", "operand >= 2")
    if operator == "^" and minimum < 2:
        raise fail(f"operator '^' with min {minimum} never grows", "min >= 2 for '^'")


def parse_range(text: str) -> RangeCount:
    """Parse an RFC 45 range string (``min-max[:operand[:operator]]`` or ``min+[...]``)."""
    body, offset = _strip_brackets(text)
    match = _RANGE.fullmatch(body)
    if match is None:
        raise _range_syntax_error(text, body, offset)
    minimum = int(match.group("min"))
    maximum = None if match.group("open") else int(match.group("max"))
    operand = int(match.group("operand")) if match.group("operand") else 1
    operator = match.group("operator") or "+"
    _check_range(minimum, maximum, operator, operand, text, offset)
    return RangeCount(minimum, maximum, operator, operand)  # type: ignore[arg-type]


def _range_syntax_error(text: str, body: str, offset: int) -> RangeError:
    """Point at the first character where ``body`` stops being a range string prefix."""
    shapes = [
        re.compile(r"[0-9]+"),
        re.compile(r"[0-9]+(?:-[0-9]+|\+)"),
        re.compile(r"[0-9]+(?:-[0-9]+|\+):[0-9]+"),
        re.compile(r"[0-9]+(?:-[0-9]+|\+):[0-9]+:[+*^]"),
    ]
    reach = 0
    for shape in shapes:
        match = shape.match(body)
        if match:
            reach = max(reach, match.end())
    leading = re.search(r"(?:^|[-:])(0[0-9]+)", body)
    if leading:
        return RangeError(
            f"number {leading.group(1)!r} has leading zeros",
            text=text,
            position=offset + leading.start(1),
            expected="decimal numbers without leading zeros",
        )
    found = repr(body[reach]) if reach < len(body) else "end of input"
    return CountSyntaxError(
        f"unexpected {found} in range {text!r}",
        text=text,
        position=offset + reach,
        expected="min-max[:operand[:operator]] or min+[:operand[:operator]]",
    )


def _strip_brackets(text: str) -> tuple[str, int]:
    if not isinstance(text, str):
        raise RangeError(f"expected a string, found {type(text).__name__}", expected="text")
    if len(text) > MAX_COUNT_TEXT:
        raise RangeError(
            f"count text is {len(text)} characters long", expected=f"at most {MAX_COUNT_TEXT}"
        )
    opens, closes = text.startswith("["), text.endswith("]")
    if opens != closes or (opens and len(text) < 2):
        raise CountSyntaxError(
            f"unbalanced bracket in {text!r}",
            text=text,
            position=len(text) if opens else 0,
            expected="one pair of brackets around the whole value, or none",
        )
    body = text[1:-1] if opens else text
    for position, char in enumerate(body):
        if char in "[]":
            raise CountSyntaxError(
                f"nested or stray bracket {char!r}",
                text=text,
                position=position + (1 if opens else 0),
                expected="at most one pair of brackets around the whole value",
            )
    return body, (1 if opens else 0)


def count_kind(text: str) -> CountKind:
    """How a count string reads: ``integer``, ``range``, ``idset``, or ``range|idset`` (a lone
    ``a-b`` that is both; jobmatch treats it as a range, C4)."""
    count = parse_count_string(text)
    if isinstance(count, int):
        return "integer"
    if isinstance(count, IdsetCount):
        return "idset"
    body, _ = _strip_brackets(text)
    try:
        parse_idset(body)
    except IdsetError:
        return "range"
    return "range|idset"


def parse_count_string(text: str) -> Count:
    """A count written as text: integer, range (C4 for ``a-b``) or idset (C3)."""
    body, offset = _strip_brackets(text)
    if body == "":
        raise CountSyntaxError(
            f"empty count {text!r}",
            text=text,
            position=offset,
            expected="a positive integer, an idset or a range",
        )
    if _INTEGER.fullmatch(body):
        if len(body) > 1 and body.startswith("0"):
            raise RangeError(
                f"count {body!r} has leading zeros",
                text=text,
                position=offset,
                expected="a decimal count without leading zeros",
            )
        return validate_count(int(body), text=text, position=offset)
    if ":" in body or "+" in body or ("," not in body and "-" in body):
        return parse_range(text)
    try:
        ids = parse_idset(body)
    except IdsetError as error:
        # A grammar slip of the idset is a syntax error of the count (RFC 45 token), an
        # idset that breaks RFC 22's rules (order, duplicates) a count error.
        kind = CountSyntaxError if isinstance(error, IdsetSyntaxError) else RangeError
        raise kind(
            f"not a valid idset count: {error.message}",
            text=text,
            position=None if error.position is None else error.position + offset,
            expected=error.expected,
        ) from error
    if ids.first == 0:
        raise RangeError(
            f"idset count {body!r} contains 0",
            text=text,
            position=offset,
            expected="acceptable counts of at least 1",
        )
    return IdsetCount(body, ids)


def range_from_dict(value: object, *, allow_unpaired_operand: bool = False) -> RangeCount:
    """Validate an RFC 14 range dict. RFC 14 wants ``operator`` and ``operand`` together;
    ``allow_unpaired_operand`` accepts either alone with the other defaulted (flux-core C)."""
    if not isinstance(value, dict):
        raise RangeError(f"range count {value!r} is not an object", expected="a dict")
    for key in value:
        if key not in _RANGE_DICT_KEYS:
            raise RangeError(
                f"unknown key {key!r} in range count{did_you_mean(str(key), _RANGE_DICT_KEYS)}",
                expected="only min, max, operator, operand",
            )
    if "min" not in value:
        raise RangeError(f"range count {value!r} has no min", expected="a min key")
    has_operator, has_operand = "operator" in value, "operand" in value
    if has_operator != has_operand and not allow_unpaired_operand:
        given, missing = ("operator", "operand") if has_operator else ("operand", "operator")
        raise RangeError(
            f"range count gives {given} without {missing}",
            expected="operator and operand together, or neither (RFC 14)",
        )
    operator = value.get("operator", "+")
    operand = value.get("operand", 1)
    _check_range(value["min"], value.get("max"), operator, operand, None, None)
    return RangeCount(value["min"], value.get("max"), operator, operand)


def validate_count(value: object, *, text: str | None = None, position: int | None = None) -> Count:
    """Validate an RFC 14 ``count`` JSON value and return its model."""
    if isinstance(value, bool):
        raise RangeError(
            f"count {value!r} is a boolean",
            text=text,
            position=position,
            expected="a positive integer, string or range dict",
        )
    if isinstance(value, int):
        if not 1 <= value <= COUNT_MAX:
            raise RangeError(
                f"count {value} is not positive" if value < 1 else f"count {value} is too large",
                text=text,
                position=position,
                expected=f"an integer between 1 and {COUNT_MAX}",
            )
        return value
    if isinstance(value, str):
        return parse_count_string(value)
    if isinstance(value, dict):
        return range_from_dict(value)
    raise RangeError(
        f"count {value!r} is a {type(value).__name__}",
        text=text,
        position=position,
        expected="a positive integer, an idset or range string, or a range dict",
    )


def count_to_json(count: Count, *, ranges: Literal["dict", "string"] = "dict") -> object:
    """JSON form of a count: integer, idset text (C3), range dict (C1/C2) or range string."""
    if isinstance(count, RangeCount):
        return count.as_dict() if ranges == "dict" else count.short()
    if isinstance(count, IdsetCount):
        return count.text
    return count


def count_values(count: Count) -> Iterator[int]:
    """Acceptable values of any count, ascending (endless for open ranges)."""
    if isinstance(count, int):
        return iter((count,))
    return count.values()
