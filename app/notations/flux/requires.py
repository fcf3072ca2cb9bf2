"""RFC 35 constraint query text (``gpu&ib | host:node[1-4]``) compiled to RFC 31 objects.

Grammar and precedence (RFC 35; whitespace-AND precedence per flux-core, decision A10)::

    query   := or_expr
    or_expr := and_expr (('|' | '||' | 'or' | <juxtaposition>) and_expr)*   left to right
    and_expr:= unary (('&' | '&&' | 'and') unary)*
    unary   := 'not' unary | '-' term | '(' or_expr ')' | term
    term    := [operator ':'] operand     operand may be quoted with ' or "

So ``a|b c`` is ``(a|b) c`` while ``a|b&c`` is ``a|(b&c)``; ``not`` binds tighter than both;
``-`` negates one term only (``-(a|b)`` is an error). ``and``/``or``/``not`` are lowercase
whole words. Only the first ``:`` splits operator from operand; operator names use word
characters and ``. + @ -``.

The parser is parametrised like flux-core's: a default operator for bare terms (or none, then
a bare term is an error), operator aliases, per-operator value splitting, and operators whose
terms merge when ANDed. :data:`FLUX_REQUIRES` is the ``flux run --requires`` configuration.
The result is RFC 31 JSON, not yet validated: unknown operators or bad hostlists surface when
the result goes through :func:`app.notations.flux.constraints.parse_constraint`
(:func:`compile_requires_constraint` does both).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from app.notations.errors import NotationError
from app.notations.flux.constraints import Constraint, constraint_to_json, parse_constraint

#: Longest query accepted.
MAX_QUERY_LENGTH = 65_536
#: Deepest nesting of parentheses and ``not`` accepted.
MAX_DEPTH = 64

_OPERATOR_NAME = re.compile(r"[\w.+@-]+")
_KEYWORD = re.compile(r"(and|or|not)(?=$|[\s()|&])")
_STOP = set("()|&")


class RequiresError(NotationError):
    """An RFC 35 constraint query is malformed: unbalanced parentheses or quotes, a dangling
    operator, an operator without a value, an invalid operator name, or a bare term where
    the parser has no default operator."""

    notation = "rfc35-requires"


def _frozen(mapping: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class QueryParser:
    """An RFC 35 parser configuration (see the module docstring)."""

    default_op: str | None = None
    aliases: Mapping[str, str] = field(default_factory=dict)
    split: Mapping[str, str] = field(default_factory=dict)
    combine: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "aliases", _frozen(self.aliases))
        object.__setattr__(self, "split", _frozen(self.split))
        object.__setattr__(self, "combine", frozenset(self.combine))

    def parse(self, query: str) -> dict[str, object]:
        """Compile ``query`` to an RFC 31 constraint object."""
        if not isinstance(query, str):
            raise RequiresError(f"expected text, found {type(query).__name__}", expected="text")
        if len(query) > MAX_QUERY_LENGTH:
            raise RequiresError(
                f"query is {len(query)} characters long",
                expected=f"at most {MAX_QUERY_LENGTH} characters",
            )
        tokens = _lex(query)
        if not tokens:
            raise RequiresError(
                "empty query", text=query, position=0, expected="a term such as gpu or host:n1"
            )
        node = _Parser(self, query, tokens).parse()
        return _to_json(node)


#: ``flux run --requires``: bare terms are properties (comma lists, merged under AND),
#: ``host``/``hosts`` mean ``hostlist`` and ``rank`` means ``ranks``.
FLUX_REQUIRES = QueryParser(
    default_op="properties",
    aliases={"host": "hostlist", "hosts": "hostlist", "rank": "ranks"},
    split={"properties": ","},
    combine=frozenset({"properties"}),
)


def parse_query(query: str, parser: QueryParser) -> dict[str, object]:
    """Compile an RFC 35 query with the given parser configuration."""
    return parser.parse(query)


def compile_requires(requires: str | Iterable[str]) -> dict[str, object]:
    """Compile ``--requires`` text (several options are joined with spaces, as flux does)."""
    query = requires if isinstance(requires, str) else " ".join(requires)
    return FLUX_REQUIRES.parse(query)


def compile_requires_constraint(requires: str | Iterable[str]) -> Constraint:
    """Compile ``--requires`` text and validate the result as an RFC 31 constraint."""
    return parse_constraint(compile_requires(requires))


# -- lexer -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Token:
    kind: str  # "(", ")", "or", "and", "not", "neg", "term"
    position: int
    operator: str | None = None
    operand: str = ""


def _lex(query: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    length = len(query)
    while pos < length:
        char = query[pos]
        if char.isspace():
            pos += 1
        elif char in "()":
            tokens.append(_Token(char, pos))
            pos += 1
        elif char in "|&":
            run = 2 if query.startswith(char * 2, pos) else 1
            tokens.append(_Token("or" if char == "|" else "and", pos))
            pos += run
        elif char == "-":
            following = query[pos + 1 : pos + 2]
            if following == "" or following.isspace() or following in _STOP:
                what = "'(': '-' negates a single term; use not (...)" if following == "(" else None
                raise RequiresError(
                    f"'-' followed by {what or repr(following or 'end of query')}",
                    text=query,
                    position=pos,
                    expected="a term directly after '-', e.g. -host:n1",
                )
            tokens.append(_Token("neg", pos))
            pos += 1
            pos = _lex_term(query, pos, tokens)
        else:
            keyword = _KEYWORD.match(query, pos)
            if keyword:
                tokens.append(_Token(keyword.group(1), pos))
                pos = keyword.end()
            else:
                pos = _lex_term(query, pos, tokens)
    return tokens


def _read_quoted(query: str, pos: int) -> tuple[str, int]:
    quote = query[pos]
    close = query.find(quote, pos + 1)
    if close < 0:
        raise RequiresError(
            f"unclosed {quote} quote", text=query, position=pos, expected=f"a closing {quote}"
        )
    return query[pos + 1 : close], close + 1


def _read_bare(query: str, pos: int, stop_at_colon: bool) -> int:
    while pos < len(query):
        char = query[pos]
        if char.isspace() or char in _STOP or (stop_at_colon and char == ":"):
            break
        if char in "'\"":
            raise RequiresError(
                f"quote {char} inside a term",
                text=query,
                position=pos,
                expected="quotes around a whole operand, e.g. test:'a b'",
            )
        pos += 1
    return pos


def _lex_term(query: str, pos: int, tokens: list[_Token]) -> int:
    start = pos
    operator: str | None = None
    if query[pos] in "'\"":
        operand, pos = _read_quoted(query, pos)
    else:
        end = _read_bare(query, pos, stop_at_colon=True)
        if end < len(query) and query[end] == ":":
            operator = query[pos:end]
            bad = next((c for c in operator if not _OPERATOR_NAME.fullmatch(c)), None)
            if not operator or bad is not None:
                raise RequiresError(
                    f"invalid character {bad!r} in operator {operator!r}"
                    if bad
                    else "':' with no operator before it",
                    text=query,
                    position=start,
                    expected="an operator of letters, digits, '_', '.', '+', '@' or '-'",
                )
            pos = end + 1
            if pos < len(query) and query[pos] in "'\"":
                operand, pos = _read_quoted(query, pos)
            else:
                end = _read_bare(query, pos, stop_at_colon=False)
                operand, pos = query[pos:end], end
            if operand == "":
                raise RequiresError(
                    f"operator {operator!r} has no value",
                    text=query,
                    position=pos,
                    expected=f"a value after '{operator}:'",
                )
        else:
            operand, pos = query[pos:end], end
            if operand == "":
                raise RequiresError(
                    f"unexpected {query[pos]!r}",
                    text=query,
                    position=pos,
                    expected="a term",
                )
    if pos < len(query) and not (query[pos].isspace() or query[pos] in _STOP):
        raise RequiresError(
            f"unexpected {query[pos]!r} after a quoted operand",
            text=query,
            position=pos,
            expected="whitespace, an operator or ')'",
        )
    tokens.append(_Token("term", start, operator, operand))
    return pos


# -- parser ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Term:
    operator: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class _Group:
    kind: str  # "and" | "or"
    children: tuple[_Node, ...]


@dataclass(frozen=True)
class _Not:
    child: _Node


_Node = _Term | _Group | _Not
_UNARY_START = ("term", "(", "not", "neg")


class _Parser:
    def __init__(self, config: QueryParser, query: str, tokens: list[_Token]) -> None:
        self.config = config
        self.query = query
        self.tokens = tokens
        self.index = 0
        self.depth = 0

    def peek(self) -> _Token | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def fail(self, message: str, position: int, expected: str) -> RequiresError:
        """An error at ``position`` of the query being parsed."""
        return RequiresError(message, text=self.query, position=position, expected=expected)

    def error(self, expected: str) -> RequiresError:
        token = self.peek()
        if token is None:
            return self.fail("unexpected end of query", len(self.query), expected)
        shown = self.query[token.position : token.position + 10].split()[0] or token.kind
        return self.fail(f"unexpected {shown!r}", token.position, expected)

    def parse(self) -> _Node:
        node = self.or_expr()
        if self.peek() is not None:
            token = self.peek()
            assert token is not None
            if token.kind == ")":
                raise self.fail(
                    "')' without a matching '('", token.position, "balanced parentheses"
                )
            raise self.error("the end of the query")
        return node

    def or_expr(self) -> _Node:
        left = self.and_expr()
        while (token := self.peek()) is not None:
            if token.kind == "or":
                self.index += 1
                left = self.make_or(left, self.and_expr())
            elif token.kind in _UNARY_START:
                left = self.make_and(left, self.and_expr())
            else:
                break
        return left

    def and_expr(self) -> _Node:
        left = self.unary()
        while (token := self.peek()) is not None and token.kind == "and":
            self.index += 1
            left = self.make_and(left, self.unary())
        return left

    def unary(self) -> _Node:
        token = self.peek()
        if token is None or token.kind not in _UNARY_START:
            raise self.error("a term, '(', 'not' or '-term'")
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail(
                f"query nests deeper than {MAX_DEPTH} levels",
                token.position,
                f"at most {MAX_DEPTH} levels of parentheses and not",
            )
        self.index += 1
        try:
            if token.kind == "not":
                return _Not(self.unary())
            if token.kind == "neg":
                negated = self.tokens[self.index]  # the lexer always emits a term after '-'
                self.index += 1
                return _Not(self.term(negated))
            if token.kind == "(":
                inner = self.or_expr()
                closing = self.peek()
                if closing is None or closing.kind != ")":
                    if closing is None:
                        raise self.fail("'(' is never closed", token.position, "')'")
                    raise self.error("')'")
                self.index += 1
                return inner
            return self.term(token)
        finally:
            self.depth -= 1

    def term(self, token: _Token) -> _Term:
        operator = token.operator if token.operator is not None else self.config.default_op
        if operator is None:
            raise self.fail(
                f"term {token.operand!r} has no operator and this parser has no default",
                token.position,
                "operator:value",
            )
        operator = self.config.aliases.get(operator, operator)
        separator = self.config.split.get(operator)
        values = token.operand.split(separator) if separator else [token.operand]
        if "" in values:
            raise self.fail(
                f"empty value in {token.operand!r}",
                token.position,
                f"values separated by a single {separator!r}",
            )
        return _Term(operator, tuple(values))

    def make_or(self, left: _Node, right: _Node) -> _Node:
        if isinstance(left, _Group) and left.kind == "or":
            return _Group("or", (*left.children, right))
        return _Group("or", (left, right))

    def make_and(self, left: _Node, right: _Node) -> _Node:
        # Configured operators merge their values when ANDed: "a b" -> properties [a, b].
        if (
            isinstance(left, _Term)
            and isinstance(right, _Term)
            and left.operator == right.operator
            and left.operator in self.config.combine
        ):
            return _Term(left.operator, left.values + right.values)
        if isinstance(left, _Group) and left.kind == "and":
            return _Group("and", (*left.children, right))
        return _Group("and", (left, right))


def _to_json(node: _Node) -> dict[str, object]:
    if isinstance(node, _Term):
        return {node.operator: list(node.values)}
    if isinstance(node, _Not):
        return {"not": [_to_json(node.child)]}
    return {node.kind: [_to_json(child) for child in node.children]}


# -- formatter -------------------------------------------------------------------------------

#: An operand that needs no quotes: no space, parenthesis, ``|``, ``&``, ``:`` or quote,
#: not a keyword, and not starting with ``-`` (which would negate it).
_BARE_OPERAND = re.compile(r"[^\s()|&:'\"-][^\s()|&:'\"]*")
#: The operators :data:`FLUX_REQUIRES` writes under a shorter name.
_SHORT_NAMES = {"hostlist": "host", "ranks": "rank"}


def format_requires(value: object) -> str | None:
    """The RFC 35 ``--requires`` text of an RFC 31 constraint: the form a person types
    (``gpu,ib & (host:node[1-4] | rank:0-3)``), or None when no text compiles back to the
    same constraint (a hostlist of several entries, an operand with both quotes, an empty
    properties list). Checked by compiling the text again, as shapes are
    (:func:`app.notations.flux.shape.format_shape`)."""
    try:
        expected = constraint_to_json(parse_constraint(value))
        text = _format_node(expected, top=True)
        again = constraint_to_json(compile_requires_constraint(text))
    except (NotationError, _NoText):
        return None
    return text if same_constraint(again, expected) else None


def same_constraint(first: Mapping[str, object], second: Mapping[str, object]) -> bool:
    """Whether two RFC 31 constraints (JSON) say the same up to what ``and`` and ``or``
    are: associative, commutative and idempotent, and a ``properties`` list is the ``and``
    of its names. ``b a&host:n[1-2]`` compiles to ``b`` and ``(a & host)`` nested; the text
    written back, ``b & a & host:n[1-2]``, to ``properties [a, b] & host``: both hold on the
    same nodes."""
    return _canonical(first) == _canonical(second)


def _canonical(node: Mapping[str, object]) -> object:
    ((operator, values),) = node.items()
    if not isinstance(values, list):
        return (operator, str(values))
    if operator == "properties":
        names = [("properties", str(name)) for name in values]
        return names[0] if len(names) == 1 else ("and", frozenset(names))
    if operator in ("and", "or"):
        terms: set[object] = set()
        for child in values:
            term = _canonical(child)
            if isinstance(term, tuple) and term[0] == operator:
                terms |= term[1]
            else:
                terms.add(term)
        return next(iter(terms)) if len(terms) == 1 else (operator, frozenset(terms))
    if operator == "not":
        return (operator, tuple(_canonical(child) for child in values))
    return (operator, frozenset(str(v) for v in values))


class _NoText(Exception):
    """A part of the constraint has no RFC 35 text (an empty list of values)."""


def _operand(value: str) -> str:
    if _BARE_OPERAND.fullmatch(value) and not _KEYWORD.fullmatch(value):
        return value
    return f"'{value}'" if "'" not in value else f'"{value}"'


def _format_node(node: dict[str, object], *, top: bool = False) -> str:
    ((operator, values),) = node.items()
    assert isinstance(values, list)
    if operator in ("and", "or"):
        parts = [_format_node(child) for child in values]
        text = (" & " if operator == "and" else " | ").join(parts)
        return text if top or operator == "and" else f"({text})"
    if operator == "not":
        (child,) = values
        inner = _format_node(child, top=True)
        ((child_operator, _),) = child.items()
        return f"not ({inner})" if child_operator in ("and", "or") else f"not {inner}"
    if not values:
        raise _NoText(operator)
    if operator == "properties":
        names = [str(name) for name in values]
        if all(_BARE_OPERAND.fullmatch(n) and not _KEYWORD.fullmatch(n) for n in names):
            return ",".join(names)
        return " & ".join(f"properties:{_operand(name)}" for name in names)
    name = _SHORT_NAMES.get(operator, operator)
    return " & ".join(f"{name}:{_operand(str(v))}" for v in values)
