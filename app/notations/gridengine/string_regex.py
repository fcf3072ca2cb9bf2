"""A Grid Engine string request compiled to one regular expression, for matching in SQL.

:func:`request_regex` turns a 6.1+ request (a plain string or an expression of fnmatch
patterns joined by ``!``, ``&``, ``|`` and parentheses, see :mod:`complex_strings`) into a
single regular expression that a database can test against the offered value: PostgreSQL
with ``~`` (advanced regular expressions), SQLite with the ``REGEXP`` function that
SQLAlchemy's pysqlite dialect registers (Python's ``re.search``).

The expression is evaluated with zero-width lookaheads, which both engines support: a
pattern ``P`` is ``(?=P\\Z)``, ``!e`` is ``(?!e)``, ``a&b`` is the lookaheads one after
another, ``a|b`` is ``(?:a|b)``, all anchored at ``\\A``. Only the constructs both engines
read alike are emitted: ``(?s)`` (dot matches newline; PostgreSQL's default), ``\\A``,
``\\Z``, ``.``, ``.*``, bracket classes, and a backslash before ASCII punctuation (a
literal in both). Non-ASCII characters are written as they are.

Case-insensitive types (CSTRING, HOST) are compiled from the lower-cased request; the
caller compares against the lower-cased value, as Grid Engine lower-cases both sides.
"""

from __future__ import annotations

from app.notations.gridengine.strings import (
    _ANY,
    And,
    Expression,
    Not,
    Or,
    Pattern,
    _Class,
    _compile_pattern,
    is_expression,
    parse_expression,
)
from app.notations.quantities import ValueType

__all__ = ["NEVER", "request_regex"]

#: A zero-width test that never holds: the next character cannot be both "a" and "b".
NEVER = "(?=a)(?=b)"


def _literal(char: str) -> str:
    if char.isascii() and not char.isalnum() and char != "_":
        return "\\" + char
    return char


def _class(klass: _Class) -> str | None:
    """A bracket class, None when it can accept no character at all."""
    parts = []
    for low, high in klass.ranges:
        if low > high:  # fnmatch accepts nothing for a reversed range; regexes reject it
            continue
        parts.append(_literal(low) if low == high else f"{_literal(low)}-{_literal(high)}")
    if not parts:
        return "." if klass.negated else None
    return "[" + ("^" if klass.negated else "") + "".join(parts) + "]"


def _pattern_body(pattern: str) -> str | None:
    """The regex of one fnmatch pattern (unanchored), None when it never matches."""
    tokens = _compile_pattern(pattern)
    if tokens is None:
        return None
    out = []
    for token in tokens:
        if token is None:
            out.append(".*")
        elif token is _ANY:
            out.append(".")
        elif isinstance(token, _Class):
            compiled = _class(token)
            if compiled is None:
                return None
            out.append(compiled)
        else:
            out.append(_literal(token))
    return "".join(out)


def _zero_width(expression: Expression) -> str:
    if isinstance(expression, Pattern):
        body = _pattern_body(expression.text)
        return NEVER if body is None else f"(?={body}\\Z)"
    if isinstance(expression, Not):
        return f"(?!{_zero_width(expression.operand)})"
    if isinstance(expression, And):
        return "".join(_zero_width(operand) for operand in expression.operands)
    assert isinstance(expression, Or)
    return "(?:" + "|".join(_zero_width(operand) for operand in expression.operands) + ")"


def request_regex(value_type: ValueType, request: str) -> str:
    """The regular expression equivalent to matching ``request`` (6.1+ semantics) against a
    value of ``value_type``; for CSTRING and HOST, against the lower-cased value.

    Raises :class:`~app.notations.gridengine.strings.StringExpressionError` for a malformed
    expression (hard requests are checked at submission, so callers see valid ones).
    """
    if not value_type.is_string:
        raise ValueError(f"{value_type.value} is not a string type")
    folds = value_type in (ValueType.CSTRING, ValueType.HOST)
    text = request.lower() if folds else request
    if not is_expression(text):
        # A plain string compares exactly: every character literal, backslashes too.
        return "(?s)\\A" + "".join(_literal(char) for char in text) + "\\Z"
    return "(?s)\\A" + _zero_width(parse_expression(text))
