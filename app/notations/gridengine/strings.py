"""Grid Engine string matching: wildcard patterns and the 6.1+ boolean expression language.

A string request (``-l arch=lx*|sol*``) is the *pattern*; the value offered by a host or
queue is the *subject* (docs/notations/gridengine.md#comparisons).

Grid Engine 6.1 and later (the default, ``semantics="6.1"``):

* a request without any of ``* ? [ ] & | ! ( )`` is compared plainly: STRING and RESTRING
  exactly, CSTRING and HOST ignoring case;
* otherwise it is an expression ``or := and ('|' and)*``, ``and := unary ('&' unary)*``,
  ``unary := '!' unary | '(' or ')' | pattern``. The operators and blanks are terminals
  everywhere, also inside ``[...]``, and cannot be escaped; so ``[linux|solaris]`` is the
  two patterns ``[linux`` and ``solaris]``, and ``[!a]`` is a syntax error;
* each pattern is matched like glibc ``fnmatch(pattern, value, 0)``: ``*``, ``?``,
  ``[a-c]`` classes (``[!..]``/``[^..]`` negate), backslash escapes, an unterminated
  ``[`` is literal, ``/`` and a leading ``.`` are ordinary. CSTRING and HOST lower-case
  pattern and value first.

Grid Engine 6.0 (``semantics="6.0"``): STRING exact, CSTRING and HOST ignoring case, no
wildcards; RESTRING splits the request at every ``|`` (empty pieces dropped) and matches
each piece with fnmatch - the rules of the 2003 Complex Attribute Specification.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from app.notations.errors import NotationError
from app.notations.quantities import ValueType

__all__ = [
    "EXPRESSION_CHARACTERS",
    "MAX_NESTING",
    "MAX_REQUEST_LENGTH",
    "MAX_WILDCARDS",
    "And",
    "Expression",
    "Not",
    "Or",
    "Pattern",
    "Semantics",
    "StringExpressionError",
    "check_request_size",
    "check_semantics",
    "fnmatch",
    "is_expression",
    "match_string",
    "parse_expression",
]

#: Which Grid Engine release's matching rules apply: "6.0" or "6.1" (= 6.1, 6.2, 6.2u5).
Semantics = Literal["6.0", "6.1"]

#: Characters that turn a string request into an expression (6.1+).
EXPRESSION_CHARACTERS = frozenset("*?[]&|!()")
_OPERATORS = "!&|()"
_BLANKS = " \t\n\r\v\f"

#: Bounds on one string request, checked before it is parsed or matched (issue 19). Grid
#: Engine itself sets none; real requests (``lx*|sol*``, ``*.example.com``) are a few
#: dozen characters. The matcher is linear whatever the pattern (app/notations/
#: wildcard_nfa.py), so these bound the cost of one match and the depth of the parser's
#: recursion, not an exponential.
MAX_REQUEST_LENGTH = 1024
#: Wildcards (``*``, ``?``, ``[``) in one request.
MAX_WILDCARDS = 64
#: Parentheses and ``!`` nested in one another.
MAX_NESTING = 32
_WILDCARDS = "*?["


class StringExpressionError(NotationError):
    """A string request is not a well-formed expression: an unbalanced parenthesis, an
    operator without operand, or two patterns separated only by a blank."""

    notation = "sge-expression"


def check_semantics(semantics: str) -> Semantics:
    """``semantics`` as a :data:`Semantics` value, or a ValueError naming the choices."""
    if semantics == "6.0":
        return "6.0"
    if semantics == "6.1":
        return "6.1"
    raise ValueError(f"unknown Grid Engine semantics {semantics!r}; expected '6.0' or '6.1'")


# ---------------------------------------------------------------------------------------
# fnmatch, as glibc does it with flags 0


@dataclass(frozen=True)
class _Class:
    negated: bool
    ranges: tuple[tuple[str, str], ...]

    def accepts(self, char: str) -> bool:
        inside = any(low <= char <= high for low, high in self.ranges)
        return inside != self.negated


_Token = str | _Class | None  # a literal character, a class, None for "*"; "?" is _ANY
_ANY = _Class(negated=True, ranges=())


def _compile_pattern(pattern: str) -> list[_Token] | None:
    """Tokens of an fnmatch pattern; None when it can never match (a trailing backslash)."""
    tokens: list[_Token] = []
    i = 0
    n = len(pattern)
    while i < n:
        char = pattern[i]
        if char == "*":
            if not tokens or tokens[-1] is not None:  # runs of * are one *
                tokens.append(None)
            i += 1
        elif char == "?":
            tokens.append(_ANY)
            i += 1
        elif char == "\\":
            if i + 1 >= n:
                return None
            tokens.append(pattern[i + 1])
            i += 2
        elif char == "[":
            parsed = _compile_class(pattern, i + 1)
            if parsed is None:  # unterminated: the [ is an ordinary character
                tokens.append("[")
                i += 1
            else:
                klass, i = parsed
                tokens.append(klass)
        else:
            tokens.append(char)
            i += 1
    return tokens


def _compile_class(pattern: str, start: int) -> tuple[_Class, int] | None:
    """The bracket expression starting after ``[``; None when no closing ``]`` exists."""
    i = start
    n = len(pattern)
    negated = i < n and pattern[i] in "!^"
    if negated:
        i += 1
    ranges: list[tuple[str, str]] = []
    first = True
    while i < n:
        char = pattern[i]
        if char == "]" and not first:
            return _Class(negated=negated, ranges=tuple(ranges)), i + 1
        first = False
        if char == "\\" and i + 1 < n:
            i += 1
            char = pattern[i]
        i += 1
        low = char
        if i + 1 < n and pattern[i] == "-" and pattern[i + 1] != "]":
            high = pattern[i + 1]
            i += 2
            if high == "\\" and i < n:
                high = pattern[i]
                i += 1
            ranges.append((low, high))
        else:
            ranges.append((low, low))
    return None


def fnmatch(pattern: str, value: str) -> bool:
    """Whether ``value`` matches the shell pattern ``pattern`` (glibc fnmatch, flags 0)."""
    tokens = _compile_pattern(pattern)
    if tokens is None:
        return False
    # Greedy match with one backtrack point per "*": linear in practice, never exponential.
    t = v = 0
    star_t = star_v = -1
    while v < len(value):
        if t < len(tokens) and tokens[t] is None:
            star_t, star_v = t, v
            t += 1
            continue
        if t < len(tokens) and _accepts(tokens[t], value[v]):
            t += 1
            v += 1
            continue
        if star_t < 0:
            return False
        star_v += 1
        t, v = star_t + 1, star_v
    while t < len(tokens) and tokens[t] is None:
        t += 1
    return t == len(tokens)


def _accepts(token: _Token, char: str) -> bool:
    if isinstance(token, _Class):
        return token.accepts(char)
    return token == char


# ---------------------------------------------------------------------------------------
# The expression language (6.1+)


@dataclass(frozen=True)
class Pattern:
    """One fnmatch pattern of an expression."""

    text: str

    def to_text(self) -> str:
        return self.text


@dataclass(frozen=True)
class Not:
    """``!operand``."""

    operand: Expression

    def to_text(self) -> str:
        inner = self.operand.to_text()
        return f"!{inner}" if isinstance(self.operand, Pattern | Not) else f"!({inner})"


@dataclass(frozen=True)
class And:
    """``a&b&...``; nested conjunctions are flattened."""

    operands: tuple[Expression, ...]

    def to_text(self) -> str:
        return "&".join(
            f"({op.to_text()})" if isinstance(op, Or) else op.to_text() for op in self.operands
        )


@dataclass(frozen=True)
class Or:
    """``a|b|...``; nested disjunctions are flattened."""

    operands: tuple[Expression, ...]

    def to_text(self) -> str:
        return "|".join(op.to_text() for op in self.operands)


Expression = Pattern | Not | And | Or


def is_expression(text: str) -> bool:
    """Whether a 6.1+ request is an expression rather than a plain string."""
    return any(char in EXPRESSION_CHARACTERS for char in text)


def _tokenize(text: str) -> list[tuple[str, str, int]]:
    """(kind, text, position) with kind one of ``! & | ( )`` or ``p`` for a pattern."""
    tokens: list[tuple[str, str, int]] = []
    i = 0
    n = len(text)
    while i < n:
        char = text[i]
        if char in _BLANKS:
            i += 1
        elif char in _OPERATORS:
            tokens.append((char, char, i))
            i += 1
        else:
            start = i
            while i < n and text[i] not in _OPERATORS and text[i] not in _BLANKS:
                # A backslash escapes inside a pattern only; it cannot hide an operator.
                if text[i] == "\\" and i + 1 < n and text[i + 1] not in _OPERATORS + _BLANKS:
                    i += 1
                i += 1
            tokens.append(("p", text[start:i], start))
    return tokens


def check_request_size(text: str) -> None:
    """Refuse a string request longer than :data:`MAX_REQUEST_LENGTH` or with more than
    :data:`MAX_WILDCARDS` wildcards, naming the first position past the bound."""
    if len(text) > MAX_REQUEST_LENGTH:
        raise StringExpressionError(
            f"string request is {len(text)} characters long, more than {MAX_REQUEST_LENGTH}",
            text=text[:64] + "...",
            position=MAX_REQUEST_LENGTH,
            expected=f"at most {MAX_REQUEST_LENGTH} characters",
        )
    count = 0
    for position, char in enumerate(text):
        if char in _WILDCARDS:
            count += 1
            if count > MAX_WILDCARDS:
                raise StringExpressionError(
                    f"string request has more than {MAX_WILDCARDS} wildcards (* ? [)",
                    text=text,
                    position=position,
                    expected=f"at most {MAX_WILDCARDS} wildcards",
                )


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.index = 0
        self.depth = 0

    def _peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def _fail(self, expected: str) -> StringExpressionError:
        token = self._peek()
        if token is None:
            found, position = "end of expression", len(self.text)
        elif token[0] == "p":
            found, position = f"pattern {token[1]!r}", token[2]
        else:
            found, position = f"{token[1]!r}", token[2]
        return StringExpressionError(
            f"malformed string expression {self.text!r}: unexpected {found}",
            text=self.text,
            position=position,
            expected=expected,
        )

    def parse(self) -> Expression:
        if not self.tokens:
            raise self._fail("a pattern")
        expression = self._or()
        if self._peek() is not None:
            raise self._fail("'|', '&' or end of expression (blanks cannot separate patterns)")
        return expression

    def _or(self) -> Expression:
        return self._joined("|", Or, self._and)

    def _and(self) -> Expression:
        return self._joined("&", And, self._unary)

    def _joined(
        self, symbol: str, kind: type[And] | type[Or], operand: Callable[[], Expression]
    ) -> Expression:
        """One ``operand`` or several separated by ``symbol``, joined into one ``kind``."""
        operands = [operand()]
        while (token := self._peek()) is not None and token[0] == symbol:
            self.index += 1
            operands.append(operand())
        return _flatten(kind, operands)

    def _unary(self) -> Expression:
        token = self._peek()
        if token is None:
            raise self._fail("a pattern, '!' or '('")
        kind = token[0]
        if kind in "!(":
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise self._fail(f"at most {MAX_NESTING} nested '!' and '('")
            try:
                return self._nested(kind)
            finally:
                self.depth -= 1
        if kind == "p":
            self.index += 1
            return Pattern(token[1])
        raise self._fail("a pattern, '!' or '('")

    def _nested(self, kind: str) -> Expression:
        if kind == "!":
            self.index += 1
            return Not(self._unary())
        if kind == "(":
            self.index += 1
            inner = self._or()
            closing = self._peek()
            if closing is None or closing[0] != ")":
                raise self._fail("')'")
            self.index += 1
            return inner
        raise self._fail("a pattern, '!' or '('")


def _flatten(kind: type[And] | type[Or], operands: list[Expression]) -> Expression:
    if len(operands) == 1:
        return operands[0]
    flat: list[Expression] = []
    for operand in operands:
        if isinstance(operand, kind):
            flat.extend(operand.operands)
        else:
            flat.append(operand)
    return kind(tuple(flat))


def parse_expression(text: str) -> Expression:
    """The 6.1+ expression in ``text``; raises :class:`StringExpressionError`.

    A plain string (see :func:`is_expression`) parses to one :class:`Pattern`.
    :data:`MAX_NESTING` bounds the parser's recursion; the size bounds of
    :func:`check_request_size` are a rule of submission (a request stored before them is
    still evaluated, by a matcher linear in any case).
    """
    if not is_expression(text):
        return Pattern(text)
    return _Parser(text).parse()


def _evaluate(expression: Expression, test: Callable[[str], bool]) -> bool:
    if isinstance(expression, Pattern):
        return test(expression.text)
    if isinstance(expression, Not):
        return not _evaluate(expression.operand, test)
    if isinstance(expression, And):
        return all(_evaluate(op, test) for op in expression.operands)
    return any(_evaluate(op, test) for op in expression.operands)


def _ignores_case(value_type: ValueType) -> bool:
    return value_type in (ValueType.CSTRING, ValueType.HOST)


def match_string(
    value_type: ValueType, pattern: str, value: str, *, semantics: Semantics = "6.1"
) -> bool:
    """Whether the offered ``value`` matches the requested ``pattern`` for ``value_type``.

    Raises :class:`StringExpressionError` when a 6.1+ expression is malformed; the caller
    decides what that means (:func:`app.notations.gridengine.values.compare` makes ``==``
    fail and ``!=`` succeed, as Grid Engine does).
    """
    if not value_type.is_string:
        raise ValueError(f"{value_type.value} is not a string type")
    folds = _ignores_case(value_type)
    if semantics == "6.0":
        if value_type is ValueType.RESTRING:
            pieces = [piece for piece in pattern.split("|") if piece]
            return any(fnmatch(piece, value) for piece in pieces)
        return pattern.lower() == value.lower() if folds else pattern == value
    check_semantics(semantics)
    if not is_expression(pattern):
        return pattern.lower() == value.lower() if folds else pattern == value
    expression = parse_expression(pattern)
    subject = value.lower() if folds else value

    def test(piece: str) -> bool:
        return fnmatch(piece.lower() if folds else piece, subject)

    return _evaluate(expression, test)
