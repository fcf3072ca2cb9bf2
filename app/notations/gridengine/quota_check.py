"""Resolving a parsed resource quota set against the attribute table: full attribute
names, static limits parsed for their type, and the checks ``qconf`` makes (a limit names a
consumable; a dynamic limit's attributes are INT or DOUBLE).
"""

from __future__ import annotations

from dataclasses import replace

from app.notations.gridengine.attribute_table import ComplexTable
from app.notations.gridengine.definitions import ComplexError
from app.notations.gridengine.quotas import Limit, QuotaError, QuotaSet
from app.notations.gridengine.values import parse_value
from app.notations.quantities import QuantityError, ValueType

__all__ = ["check_quota_set"]


def check_quota_set(
    quota_set: QuotaSet, table: ComplexTable, *, text: str | None = None
) -> QuotaSet:
    """The set with its limits resolved against the attribute table: full attribute names,
    static values parsed for their type (``number`` in base units). A limit must name a
    consumable (``slots`` included: jobmatch enforces limits on what jobs book); a dynamic
    limit's attributes must be INT or DOUBLE (``sge_resource_quota(5)``). Positions in
    errors point into ``text``, the text the set was parsed from (else its canonical text)."""
    if text is None:
        text = quota_set.to_text()
    rules = []
    for index, rule in enumerate(quota_set.rules):
        label = quota_set.rule_label(index)
        limits = tuple(_checked_limit(limit, table, text, label) for limit in rule.limits)
        rules.append(replace(rule, limits=limits))
    return replace(quota_set, rules=tuple(rules))


def _checked_limit(limit: Limit, table: ComplexTable, text: str, label: str) -> Limit:
    """One limit of rule ``label`` resolved: its attribute's full name, and its parsed
    number (static) or its terms' full attribute names (dynamic)."""
    position = text.find(limit.to_text())
    try:
        definition = table.resolve(limit.attribute, text=text, position=position)
    except ComplexError as error:
        raise _refusal(text, position, label, error.message, "a consumable attribute") from None
    if not definition.is_consumable:
        raise _refusal(
            text,
            position,
            label,
            f"{definition.name!r} is not a consumable",
            "a consumable attribute or slots (limits on fixed values are not enforced)",
        )
    if limit.dynamic:
        for term in limit.terms:
            if term.attribute is None:
                continue
            found = table.lookup(term.attribute)
            if found is None or found.type not in (ValueType.INT, ValueType.DOUBLE):
                raise _refusal(
                    text,
                    position,
                    label,
                    f"${term.attribute} is not an INT or DOUBLE attribute",
                    "an INT or DOUBLE attribute in a dynamic limit",
                )
        terms = tuple(
            replace(t, attribute=None if t.attribute is None else table[t.attribute].name)
            for t in limit.terms
        )
        return Limit(definition.name, limit.text, None, terms)
    try:
        number = parse_value(definition, limit.text, role="capacity")
    except (ComplexError, QuantityError) as error:
        raise _refusal(
            text,
            position,
            label,
            f"invalid value {limit.text!r} for {definition.name!r}: "
            f"{getattr(error, 'message', error)}",
            f"a value of type {definition.type.name}",
        ) from None
    assert isinstance(number, float)
    return Limit(definition.name, limit.text, number)


def _refusal(text: str, position: int, label: str, message: str, expected: str) -> QuotaError:
    """The error for a limit of rule ``label`` that jobmatch cannot enforce."""
    return QuotaError(f"rule {label!r}: {message}", text=text, position=position, expected=expected)
