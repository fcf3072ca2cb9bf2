"""The scheduler's ``load_formula`` (sched_conf(5)): ``np_load_avg``, ``np_load_avg*2+mem_used``
(docs/notations/gridengine.md#queue-sort-and-load-formula).

sched_conf(5): "a simple algebraic expression used to derive a single weighted load value
from all or part of the load parameters reported by sge_execd(8) for each host and from
all or part of the consumable resources", of the syntax
``{w1|load_val1[*w1]}[{+|-}{w2|load_val2[*w2]}[{+|-}...]]``, "no blanks are allowed".

What Grid Engine 6.2u5 accepts is what ``validate_load_formula()``
(source/libs/sgeobj/sge_centry.c) lets through when ``qconf -msconf`` stores it: the
keyword ``none`` is refused; the formula is cut into terms at ``+`` and ``-``; a term is
one factor or two joined by ``*``; the first factor is an attribute of the complex (by name
or shortcut, a ``$`` before it ignored) that is not a string type, or a number; the second
is a number; a third factor is refused ("multiple weighting factors"). The grammar here::

    formula := ['-'] term { ('+' | '-') term }
    term    := factor [ '*' number ]
    factor  := ['$'] attribute | number
    number  := digits ['.' digits] | '.' digits

``scaled_mixed_load()`` (source/libs/sched/sort_hosts.c) evaluates it per host: each term
is its factor times its weight, the terms are added or subtracted from left to right (a
leading ``-`` negates the first), and an attribute is the host's value, else the global
host's (``get_attribute_by_name()``); when one has no value the whole formula is
``ERROR_LOAD_VAL`` (9999), "thereby ensuring that hosts with incorrect load reporting are
considered heavily loaded". jobmatch is stricter than ``validate_load_formula()`` in two
places (docs/notations/gridengine.md#divergences-from-grid-engine): an empty term
(``a++b``, which strtok() skips) and blanks inside the formula (which qconf strips) are
refused. Pure: values are looked up through the function the caller passes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.notations.errors import NotationError
from app.notations.gridengine.attribute_table import ComplexTable
from app.notations.gridengine.definitions import ComplexDefinition

__all__ = [
    "DEFAULT_LOAD_FORMULA",
    "ERROR_LOAD_VALUE",
    "MAX_FORMULA_LENGTH",
    "LoadFormula",
    "LoadFormulaError",
    "Term",
    "parse_load_formula",
]

#: sched_conf(5): "The default load formula is np_load_avg".
DEFAULT_LOAD_FORMULA = "np_load_avg"
#: ERROR_LOAD_VAL of source/libs/sched/sort_hosts.h: a host's value when an attribute of
#: the formula has no value there.
ERROR_LOAD_VALUE = 9999.0
#: Characters a formula may have (it is evaluated for every host of a scheduling run).
MAX_FORMULA_LENGTH = 4096

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")
_DIGITS = frozenset("0123456789")


class LoadFormulaError(NotationError):
    """A ``load_formula`` is empty or ``none``, has a blank, an empty term, a second
    ``*`` weight, a weight that is not a number, or names an attribute that is unknown or
    of a string type."""

    notation = "sched_conf load_formula"


@dataclass(frozen=True)
class Term:
    """One term: its sign, its factor (an attribute or a number) and its weight."""

    negative: bool
    attribute: ComplexDefinition | None
    number: float
    weight: float

    weighted: bool = False

    def text(self) -> str:
        factor = self.attribute.name if self.attribute is not None else _number_text(self.number)
        return f"{factor}*{_number_text(self.weight)}" if self.weighted else factor


@dataclass(frozen=True)
class LoadFormula:
    """A parsed formula: its terms in order, and the text as written."""

    terms: tuple[Term, ...]
    source: str

    def text(self) -> str:
        """The formula with full attribute names (what is stored)."""
        out = ""
        for index, term in enumerate(self.terms):
            if term.negative:
                out += "-"
            elif index:
                out += "+"
            out += term.text()
        return out

    def attributes(self) -> tuple[ComplexDefinition, ...]:
        return tuple(t.attribute for t in self.terms if t.attribute is not None)

    def evaluate(self, value_of: Callable[[ComplexDefinition], float | None]) -> float:
        """The host's weighted load: ``value_of`` gives an attribute's value there (None
        when it has none, which makes the whole value :data:`ERROR_LOAD_VALUE`)."""
        total = 0.0
        for term in self.terms:
            if term.attribute is None:
                factor = term.number
            else:
                found = value_of(term.attribute)
                if found is None:
                    return ERROR_LOAD_VALUE
                factor = found
            value = factor * term.weight
            total = total - value if term.negative else total + value
        return total


def _number_text(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


class _Parser:
    def __init__(self, text: str, table: ComplexTable) -> None:
        self.text = text
        self.table = table
        self.pos = 0

    def error(self, message: str, expected: str, position: int | None = None) -> LoadFormulaError:
        where = self.pos if position is None else position
        return LoadFormulaError(message, text=self.text, position=where, expected=expected)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def parse(self) -> LoadFormula:
        text = self.text
        if not text:
            raise self.error("the formula is empty", "an attribute or a number")
        if text.lower() == "none":
            # validate_load_formula(): MSG_NONE_NOT_ALLOWED_S.
            raise self.error("'none' is not allowed as load_formula", "an attribute or a number")
        terms = []
        negative = False
        if self.peek() == "-":
            negative = True
            self.pos += 1
        while True:
            terms.append(self.term(negative))
            sign = self.peek()
            if sign == "":
                break
            if sign not in "+-":
                what = "a blank" if sign.isspace() else repr(sign)
                raise self.error(
                    f"{what} cannot follow a term (no blanks are allowed)",
                    "'+', '-' or the end of the formula"
                    if terms[-1].weighted
                    else "'*', '+', '-' or the end of the formula",
                )
            negative = sign == "-"
            self.pos += 1
        return LoadFormula(tuple(terms), text)

    def term(self, negative: bool) -> Term:
        attribute, number = self.factor()
        if self.peek() != "*":
            return Term(negative, attribute, number, 1.0)
        self.pos += 1
        if self.peek() == "$" or (self.peek() in _NAME_CHARS and self.peek() not in "0123456789."):
            # validate_load_formula(): MSG_WEIGHTFACTNONUMB_SS.
            raise self.error("a weighting factor must be a number", "a number")
        weight = self.number()
        if self.peek() == "*":
            # validate_load_formula(): MSG_MULTIPLEWEIGHTFACT_S.
            raise self.error(
                "a term has one weighting factor at most", "'+', '-' or the end of the formula"
            )
        return Term(negative, attribute, number, weight, weighted=True)

    def factor(self) -> tuple[ComplexDefinition | None, float]:
        char = self.peek()
        if char in _DIGITS or char == ".":
            return None, self.number()
        start = self.pos
        if char == "$":
            # validate_load_formula() and get_load_value() skip a '$' before the name.
            self.pos += 1
        name_start = self.pos
        while self.peek() != "" and self.peek() in _NAME_CHARS:
            self.pos += 1
        name = self.text[name_start : self.pos]
        if not name:
            found = self.peek()
            what = "the end of the formula" if found == "" else repr(found)
            raise self.error(
                f"{what} where a term begins (an empty term)", "an attribute or a number", start
            )
        definition = self.table.lookup(name)
        if definition is None:
            raise self.error(
                f"unknown attribute {name!r}", "an attribute of the complex", name_start
            )
        if definition.type.is_string:
            # validate_load_formula(): MSG_WRONGTYPE_ATTRIBUTE_SS.
            raise self.error(
                f"attribute {definition.name!r} is of type {definition.type.value}, not a number",
                "a numeric attribute",
                name_start,
            )
        return definition, 0.0

    def number(self) -> float:
        start = self.pos
        while self.peek() != "" and self.peek() in _DIGITS:
            self.pos += 1
        if self.peek() == ".":
            self.pos += 1
            fraction = self.pos
            while self.peek() != "" and self.peek() in _DIGITS:
                self.pos += 1
            if self.pos == fraction and fraction - 1 == start:
                raise self.error("a number needs a digit", "a digit", start)
        if self.pos == start:
            raise self.error("a number was expected", "a number", start)
        return float(self.text[start : self.pos])


def parse_load_formula(text: str, table: ComplexTable) -> LoadFormula:
    """Parse and check a ``load_formula`` against the attribute table; LoadFormulaError
    names the position and what was expected there."""
    if len(text) > MAX_FORMULA_LENGTH:
        raise LoadFormulaError(
            f"the formula has {len(text)} characters, more than {MAX_FORMULA_LENGTH}",
            text=text[:64],
            position=MAX_FORMULA_LENGTH,
            expected="a shorter formula",
        )
    return _Parser(text, table).parse()
