"""Grid Engine numeric values: one parser for INT, DOUBLE, MEMORY, TIME and BOOL.

Grid Engine 6.2u5 runs every numeric complex value (``-l h_vmem=2G``, ``complex_values
slots=8``, a load report) through one routine; the declared type only changes the wording
of the error (docs/notations/gridengine.md#values). So ``true`` is a valid MEMORY, ``1k`` a valid
TIME and ``1:00:00`` a valid INT. The rules, in the order they are tried:

1. ``true``/``false`` in any case -> 1/0;
2. ``infinity`` in any case -> :data:`INFINITY` (the largest double, as in Grid Engine);
3. text containing ``:`` -> ``hours:minutes:seconds``, exactly three decimal fields, empty
   fields are 0, blanks may follow the seconds;
4. text containing ``.`` or not starting with ``0`` -> a C ``strtod`` decimal (leading
   blanks, sign, fraction, exponent) followed by at most one multiplier letter;
5. otherwise (leading ``0``, no dot) -> a C integer with base detection (``0x1F`` hex,
   ``017`` octal, ``08`` an error) followed by at most one multiplier letter.

Multipliers: ``k``=1000, ``K``=1024, ``m``=1000², ``M``=1024², ``g``=1000³, ``G``=1024³
(``t``/``T`` only with ``soge=True``, the Son of Grid Engine 8.x extension).

Deliberate narrowing of C ``strtod`` (documented choice): hexadecimal floats, ``nan`` and
``inf`` spellings other than the ``infinity`` keyword are rejected, and a result that
overflows a double is an error instead of silently becoming infinite.
"""

from __future__ import annotations

import enum
import math
import sys

from app.notations.errors import NotationError

__all__ = [
    "INFINITY",
    "MULTIPLIERS",
    "SOGE_MULTIPLIERS",
    "QuantityError",
    "ValueType",
    "canonical_number",
    "format_memory",
    "format_number",
    "format_time",
    "is_infinity",
    "parse_number",
]

#: Grid Engine's INFINITY: DBL_MAX, not an IEEE infinity, so it survives SQL columns and
#: arithmetic comparisons exactly like in the original (``x <= INFINITY`` for every value).
INFINITY: float = sys.float_info.max

MULTIPLIERS: dict[str, int] = {
    "k": 1000,
    "K": 1024,
    "m": 1000**2,
    "M": 1024**2,
    "g": 1000**3,
    "G": 1024**3,
}
#: Son of Grid Engine 8.x adds tera multipliers; Grid Engine 6.x rejects them.
SOGE_MULTIPLIERS: dict[str, int] = {**MULTIPLIERS, "t": 1000**4, "T": 1024**4}

_BLANKS = " \t\n\r\v\f"  # what C isspace() skips in front of a strtod number
_DIGITS = "0123456789"


class ValueType(enum.Enum):
    """The nine complex attribute types of Grid Engine 6.x (``qconf -sc`` column ``type``)."""

    INT = "INT"
    DOUBLE = "DOUBLE"
    MEMORY = "MEMORY"
    TIME = "TIME"
    BOOL = "BOOL"
    STRING = "STRING"
    CSTRING = "CSTRING"
    RESTRING = "RESTRING"
    HOST = "HOST"

    @property
    def is_numeric(self) -> bool:
        """INT, DOUBLE, MEMORY, TIME and BOOL: values are numbers, relops compare them."""
        return self in _NUMERIC

    @property
    def is_string(self) -> bool:
        """STRING, CSTRING, RESTRING and HOST: values are matched as string expressions."""
        return not self.is_numeric

    @property
    def value_noun(self) -> str:
        """How error messages name a value of this type ("memory value", ...)."""
        return _NOUNS[self]

    @classmethod
    def parse(cls, text: str) -> ValueType:
        """The type named by ``text`` (any case, as in ``qconf -sc``)."""
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise QuantityError(
                f"unknown complex type {text!r}",
                text=text,
                position=0,
                expected="one of " + ", ".join(t.value for t in cls),
            ) from None


_NUMERIC = frozenset(
    {ValueType.INT, ValueType.DOUBLE, ValueType.MEMORY, ValueType.TIME, ValueType.BOOL}
)
_NOUNS = {
    ValueType.INT: "integer value",
    ValueType.DOUBLE: "double value",
    ValueType.MEMORY: "memory value",
    ValueType.TIME: "time value",
    ValueType.BOOL: "boolean value",
    ValueType.STRING: "string value",
    ValueType.CSTRING: "caseless string value",
    ValueType.RESTRING: "string value",
    ValueType.HOST: "host name",
}


class QuantityError(NotationError):
    """A numeric complex value (INT, DOUBLE, MEMORY, TIME, BOOL) could not be parsed or is
    not allowed where it was used (e.g. INFINITY or a negative amount for a consumable)."""

    notation = "sge-value"


def is_infinity(value: float) -> bool:
    """Whether ``value`` is Grid Engine's INFINITY (DBL_MAX) or an IEEE infinity."""
    return value >= INFINITY


def _scan_decimal(text: str, start: int) -> tuple[float, int] | None:
    """A strtod-style decimal at ``start``: blanks, sign, digits[.digits], exponent.

    Returns the value and the index after it, or None when no number is there (like
    strtod leaving its end pointer at the start).
    """
    i = start
    n = len(text)
    while i < n and text[i] in _BLANKS:
        i += 1
    num_start = i
    if i < n and text[i] in "+-":
        i += 1
    int_digits = i
    while i < n and text[i] in _DIGITS:
        i += 1
    has_digits = i > int_digits
    if i < n and text[i] == ".":
        frac_start = i + 1
        j = frac_start
        while j < n and text[j] in _DIGITS:
            j += 1
        if has_digits or j > frac_start:
            has_digits = True
            i = j
    if not has_digits:
        return None
    # An exponent only counts when digits follow it ("1e" is the number 1 followed by "e").
    if i < n and text[i] in "eE":
        j = i + 1
        if j < n and text[j] in "+-":
            j += 1
        exp_start = j
        while j < n and text[j] in _DIGITS:
            j += 1
        if j > exp_start:
            i = j
    return float(text[num_start:i]), i


def _scan_c_integer(text: str, start: int) -> tuple[int, int]:
    """A C ``strtol(..., 0)`` integer at ``start``, which is known to hold a ``0``.

    ``0x`` followed by hex digits is hexadecimal, otherwise the leading 0 makes it octal;
    the scan stops at the first digit that is not valid for the base (so ``08`` stops
    after ``0`` and the caller reports ``8`` as garbage).
    """
    n = len(text)
    if start + 2 < n and text[start + 1] in "xX" and _is_hex(text[start + 2]):
        i = start + 2
        while i < n and _is_hex(text[i]):
            i += 1
        return int(text[start + 2 : i], 16), i
    i = start + 1
    while i < n and text[i] in "01234567":
        i += 1
    return int(text[start:i], 8), i


def _is_hex(char: str) -> bool:
    return char in "0123456789abcdefABCDEF"


def _error(
    text: str, value_type: ValueType, position: int, found: str, expected: str
) -> QuantityError:
    return QuantityError(
        f"invalid {value_type.value_noun} {text!r}: {found}",
        text=text,
        position=position,
        expected=expected,
    )


def _describe(text: str, position: int) -> str:
    if position >= len(text):
        return "unexpected end of value"
    return f"unexpected {text[position]!r}"


def _parse_time_fields(text: str, value_type: ValueType) -> float:
    """``hours:minutes:seconds``; each field a decimal or empty (0); no range checks."""
    total = 0.0
    position = 0
    for index, factor in enumerate((3600.0, 60.0, 1.0)):
        scanned = _scan_decimal(text, position)
        if scanned is not None:
            field, position = scanned
            total += field * factor
        if index < 2:
            if position >= len(text) or text[position] != ":":
                found = _describe(text, position)
                raise _error(
                    text, value_type, position, found, "':' (time needs hours:minutes:seconds)"
                )
            position += 1
    end = position
    while end < len(text) and text[end] in _BLANKS:
        end += 1
    if end < len(text):
        expected = "end of value after the seconds field"
        if text[end] == ":":
            expected = "exactly three fields hours:minutes:seconds"
        raise _error(text, value_type, end, _describe(text, end), expected)
    return total


def parse_number(
    text: str,
    value_type: ValueType,
    *,
    consumable: bool = False,
    soge: bool = False,
) -> float:
    """The number written in ``text`` for a complex of type ``value_type``.

    MEMORY is returned in bytes, TIME in seconds, BOOL as 0/1 (or any number written as a
    number), INFINITY as :data:`INFINITY`. ``consumable=True`` applies the extra rules for
    consumable capacities and consumable requests: neither INFINITY nor a negative amount
    is allowed. ``soge=True`` accepts the Son of Grid Engine ``t``/``T`` multipliers.

    Raises :class:`QuantityError` naming the type, the 0-based position and what was
    expected there.
    """
    if not value_type.is_numeric:
        raise QuantityError(
            f"type {value_type.value} has no numeric values",
            text=text,
            position=0,
            expected="one of INT, DOUBLE, MEMORY, TIME, BOOL",
        )
    value = _parse_any_number(text, value_type, soge)
    if consumable:
        if is_infinity(value):
            raise QuantityError(
                f"infinity not allowed for consumables ({text!r})",
                text=text,
                position=0,
                expected=f"a finite {value_type.value_noun}",
            )
        if value < 0:
            raise QuantityError(
                f"negative value for consumable ({text!r})",
                text=text,
                position=0,
                expected=f"a {value_type.value_noun} of at least 0",
            )
    return value


def _parse_any_number(text: str, value_type: ValueType, soge: bool) -> float:
    lowered = text.lower()
    if lowered == "true":
        return 1.0
    if lowered == "false":
        return 0.0
    if lowered == "infinity":
        return INFINITY
    if ":" in text:
        return _checked(_parse_time_fields(text, value_type), text, value_type)
    multipliers = SOGE_MULTIPLIERS if soge else MULTIPLIERS
    expected_number = (
        f"a {value_type.value_noun}: a number with an optional multiplier "
        f"({' '.join(multipliers)}), h:m:s, TRUE, FALSE or INFINITY"
    )
    base: float
    if "." in text or not text.startswith("0"):
        scanned = _scan_decimal(text, 0)
        if scanned is None:
            position = len(text) - len(text.lstrip(_BLANKS))
            raise _error(text, value_type, position, _describe(text, position), expected_number)
        base, position = scanned
    else:
        integer, position = _scan_c_integer(text, 0)
        base = float(integer) if integer.bit_length() <= 1023 else math.inf
    if position < len(text):
        letter = text[position]
        if letter in "89" and not ("." in text or not text.startswith("0")):
            raise _error(
                text,
                value_type,
                position,
                f"{letter!r} is not an octal digit (a leading 0 without a dot means octal)",
                "an octal digit 0-7, or write the number without the leading 0",
            )
        if letter not in multipliers:
            raise _error(
                text,
                value_type,
                position,
                f"unexpected {letter!r} after the number",
                "one multiplier letter (" + " ".join(multipliers) + ") or end of value",
            )
        base *= multipliers[letter]
        position += 1
        if position < len(text):
            raise _error(
                text,
                value_type,
                position,
                f"unexpected {text[position]!r} after the multiplier",
                "end of value (only one multiplier letter is allowed)",
            )
    return _checked(base, text, value_type)


def _checked(value: float, text: str, value_type: ValueType) -> float:
    if math.isinf(value) or math.isnan(value):
        raise QuantityError(
            f"{value_type.value_noun} {text!r} is out of range",
            text=text,
            position=0,
            expected=f"a {value_type.value_noun} below {INFINITY:g} or the keyword INFINITY",
        )
    return value


# ---------------------------------------------------------------------------------------
# Formatting back


def format_memory(value: float) -> str:
    """Grid Engine's diagnostic memory form: ``%.3f`` plus the largest binary unit that fits.

    ``2147483648`` -> ``2.000G``, ``536870912`` -> ``512.000M``, ``1000`` -> ``1000.000``.
    The text parses back to the value within half a unit of the third decimal.
    """
    if is_infinity(value):
        return "INFINITY"
    magnitude = abs(value)
    for letter in ("G", "M", "K"):
        unit = MULTIPLIERS[letter]
        if magnitude >= unit:
            return f"{value / unit:.3f}{letter}"
    return f"{value:.3f}"


def format_time(value: float, *, days: bool = False) -> str:
    """Seconds as ``HH:MM:SS`` (hours may exceed 24), truncated to whole seconds.

    ``days=True`` gives the ``D:HH:MM:SS`` display form of ``qstat`` for a day or more;
    that form is for people only (four fields do not parse back). Negative times are
    written as plain seconds, because ``-0:30:00`` would parse as +1800.
    """
    if is_infinity(value):
        return "INFINITY"
    seconds = int(value)
    if seconds < 0:
        return str(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if days and hours >= 24:
        day_count, hours = divmod(hours, 24)
        return f"{day_count}:{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{hours:02d}:{minutes:02d}:{secs:02d}"


def format_number(value: float, value_type: ValueType) -> str:
    """A value the way Grid Engine shows it: MEMORY ``%.3f``+unit, TIME ``HH:MM:SS``,
    BOOL ``TRUE``/``FALSE`` (other numbers as numbers), INT and DOUBLE as plain numbers.

    Every result parses back with :func:`parse_number`; MEMORY to within the rounding of
    its three decimals, TIME to whole seconds, the rest exactly.
    """
    if not value_type.is_numeric:
        raise QuantityError(
            f"type {value_type.value} has no numeric values",
            text=repr(value),
            position=0,
            expected="one of INT, DOUBLE, MEMORY, TIME, BOOL",
        )
    if value_type is ValueType.MEMORY:
        return format_memory(value)
    if value_type is ValueType.TIME:
        return format_time(value)
    return canonical_number(value, value_type)


def canonical_number(value: float, value_type: ValueType) -> str:
    """An exact text form: parses back with :func:`parse_number` to exactly ``value``.

    Integral values as decimal integers, others as Python's shortest round-trip repr
    (``1.5``, ``1e-05``), INFINITY as ``INFINITY``; BOOL 1/0 as ``TRUE``/``FALSE``.
    """
    value = float(value)  # ints are welcome too (int lacks is_integer() before 3.12)
    if math.isnan(value) or (math.isinf(value) and value < 0):
        raise QuantityError(
            f"{value!r} is not a {value_type.value_noun}",
            text=repr(value),
            position=0,
            expected="a finite number or INFINITY",
        )
    if is_infinity(value):
        return "INFINITY"
    if value_type is ValueType.BOOL and value in (0.0, 1.0):
        return "TRUE" if value == 1.0 else "FALSE"
    if value.is_integer() and abs(value) < 2**63:
        return str(int(value))
    text = repr(value)
    # repr never starts with "0" without a dot, so the octal rule cannot misread it.
    return text
