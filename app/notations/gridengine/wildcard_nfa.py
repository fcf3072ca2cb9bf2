"""Grid Engine string requests matched without backtracking: SQLite's ``sge_match`` SQL
function and the dispatch-time check (:func:`app.notations.gridengine.values.compare`) use it.

A Python regex for ``*?*?*?...z`` backtracks: every ``*`` may end anywhere, so a failing
match tries exponentially many splits (33.7 s for 12 ``*?`` against a 32-character host
name, as issue 19 measured). This module simulates each fnmatch pattern of a request as a
non-deterministic automaton instead, all of its states at once, one bit per state of a
Python integer (the "shift-and" technique): reading one character of the value is a
constant number of integer operations on ``m + 1`` bits for a pattern of ``m`` tokens.
Matching a value of ``n`` characters therefore costs ``O(n * ceil(m / 64))`` word
operations plus ``O(m)`` to build the acceptance mask of each distinct character, whatever
the pattern: linear in the value, and at worst ``O(n * m)``.

A request is an expression of such patterns (``!``, ``&``, ``|``, parentheses; see
:mod:`app.notations.gridengine.strings`), evaluated over the automata of its patterns, so the
whole request is linear too. The answers are those of
:func:`app.notations.gridengine.strings.match_string` with 6.1+ semantics, the reference the
property tests compare against. That reference's greedy glob keeps one backtrack point
per ``*``: never exponential, but ``O(n * k)`` for a segment of ``k`` characters after a
star (``*aaa...ab`` against ``aaa...a``: 7.3 s for k = 1,000, n = 20,000), where the
automaton took 15 ms.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from app.notations.gridengine.strings import (
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

__all__ = ["CompiledRequest", "compile_request", "sql_request_match"]

#: Distinct characters whose acceptance mask one automaton remembers; beyond that masks
#: are computed per character again, so a value of many distinct characters cannot make
#: a long pattern's cache grow without bound.
_MASK_CACHE_SIZE = 512


@dataclass
class _Automaton:
    """The NFA of one fnmatch pattern: state ``i`` means "the first ``i`` tokens matched".

    ``literals`` maps a character to the bits of the tokens that are that character;
    ``classes`` lists the bracket classes and ``?`` with their bit; ``stars`` has bit ``i``
    set when token ``i`` is ``*`` (a self-loop on state ``i`` and an empty move to ``i + 1``).
    """

    accept_bit: int
    stars: int
    literals: dict[str, int]
    classes: tuple[tuple[_Class, int], ...]
    masks: dict[str, int] = field(default_factory=dict)

    def _mask(self, char: str) -> int:
        mask = self.masks.get(char)
        if mask is None:
            mask = self.literals.get(char, 0)
            for klass, bit in self.classes:
                if klass.accepts(char):
                    mask |= bit
            if len(self.masks) < _MASK_CACHE_SIZE:
                self.masks[char] = mask
        return mask

    def matches(self, value: str) -> bool:
        stars = self.stars
        state = 1 | ((1 & stars) << 1)
        for char in value:
            state = ((state & self._mask(char)) << 1) | (state & stars)
            if not state:
                return False
            state |= (state & stars) << 1
        return bool(state & self.accept_bit)


def _never() -> _Automaton:
    """An automaton without an accepting state: the pattern ends in a lone backslash."""
    return _Automaton(accept_bit=0, stars=0, literals={}, classes=())


def _automaton(pattern: str) -> _Automaton:
    tokens = _compile_pattern(pattern)
    if tokens is None:
        return _never()
    stars = 0
    literals: dict[str, int] = {}
    classes: list[tuple[_Class, int]] = []
    for index, token in enumerate(tokens):
        bit = 1 << index
        if token is None:
            stars |= bit
        elif isinstance(token, _Class):
            classes.append((token, bit))
        else:
            literals[token] = literals.get(token, 0) | bit
    return _Automaton(
        accept_bit=1 << len(tokens), stars=stars, literals=literals, classes=tuple(classes)
    )


_Node = _Automaton | tuple[str, tuple["_Node", ...]]


def _build(expression: Expression) -> _Node:
    if isinstance(expression, Pattern):
        return _automaton(expression.text)
    if isinstance(expression, Not):
        return ("!", (_build(expression.operand),))
    if isinstance(expression, And):
        return ("&", tuple(_build(op) for op in expression.operands))
    assert isinstance(expression, Or)
    return ("|", tuple(_build(op) for op in expression.operands))


def _evaluate(node: _Node, value: str) -> bool:
    if isinstance(node, _Automaton):
        return node.matches(value)
    kind, operands = node
    if kind == "!":
        return not _evaluate(operands[0], value)
    if kind == "&":
        return all(_evaluate(op, value) for op in operands)
    return any(_evaluate(op, value) for op in operands)


@dataclass(frozen=True)
class CompiledRequest:
    """A 6.1+ string request ready to test values; ``plain`` requests compare exactly."""

    plain: str | None
    root: _Node | None

    def matches(self, value: str) -> bool:
        if self.plain is not None:
            return value == self.plain
        assert self.root is not None
        return _evaluate(self.root, value)


@lru_cache(maxsize=256)
def compile_request(request: str, folds: bool) -> CompiledRequest:
    """``request`` compiled once (lower-cased first when ``folds``, as Grid Engine does for
    CSTRING and HOST), without the size bounds of parsing at submission; raises
    :class:`~app.notations.gridengine.strings.StringExpressionError` when malformed."""
    text = request.lower() if folds else request
    if not is_expression(text):
        return CompiledRequest(plain=text, root=None)
    # No size bound here: a request stored before the bounds existed keeps its answer, and
    # the automaton is linear in the value whatever the request's length.
    return CompiledRequest(plain=None, root=_build(parse_expression(text)))


def sql_request_match(request: str | None, folds: object, subject: str | None) -> int | None:
    """The SQL function ``sge_match(request, folds, subject)``: 1 when the stored value
    ``subject`` (already lower-cased for CSTRING and HOST) matches ``request``, 0 when not,
    NULL when either is NULL, as ``subject ~ regex`` answers. A request that does not parse
    (a soft one, or one stored before the parser's bounds) never matches: a SQL function
    that raised would fail the whole statement."""
    if request is None or subject is None:
        return None
    try:
        compiled = compile_request(request, bool(folds))
    except (ValueError, RecursionError):
        return 0
    return int(compiled.matches(subject))
