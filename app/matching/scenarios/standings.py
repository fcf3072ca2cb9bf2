"""Where fair share stands in a case (docs/scenarios.md, docs/ordering.md): its
``ordering`` policy, each submitter's ``usage``, ``weights`` and ``groups``, and each
group's ``group_weights``, checked before anything runs and set, as the admin routes and
a booking set them, before anything is read."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.matching.errors import MatchingError
from app.matching.ordering import policy as ordering_policy
from app.matching.ordering import shares as fair_shares
from app.matching.ordering import usage as fair_share_usage
from app.matching.scenarios.cases import ScenarioError
from app.wire.ordering import OrderingError

#: A group's name, as ``PUT /v1/groups/{name}`` and ``PUT /v1/shares/{submitter}``'s
#: ``group`` take it (app/api/schemas/common.py's NAME_PATTERN, which this layer may not
#: import): a case names no group the API would refuse.
GROUP_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@+-]{0,254}")
#: The fields of a case that set where fair share stands, submitters' then groups'.
PER_SUBMITTER = ("usage", "weights")


def ordering_of(case: Mapping[str, Any]) -> ordering_policy.Ordering:
    """The case's ordering policy (today's by default)."""
    try:
        return ordering_policy.Ordering.of(str(case.get("ordering", "priority,age")))
    except OrderingError as error:
        raise ScenarioError(f"case {case['id']}: ordering: {error}") from None


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _group_name(case: Mapping[str, Any], field: str, name: object) -> None:
    if not isinstance(name, str) or GROUP_NAME.fullmatch(name) is None:
        raise ScenarioError(
            f"case {case['id']}: {field}: {name!r} is not a group name (letters, digits and "
            "'_', '.', ':', '@', '+', '-', starting with a letter, a digit or '_')"
        )


def check_standings(case: Mapping[str, Any]) -> None:
    """``ordering``, ``usage``, ``weights``, ``groups`` and ``group_weights``, when the
    case has them; ScenarioError naming the field otherwise."""
    ordering_of(case)
    for field in PER_SUBMITTER:
        given = case.get(field, {})
        if not isinstance(given, dict) or not all(_is_number(v) for v in given.values()):
            raise ScenarioError(f"case {case['id']}: '{field}' maps submitters to numbers")
    groups = case.get("groups", {})
    if not isinstance(groups, dict):
        raise ScenarioError(
            f"case {case['id']}: 'groups' maps submitters to group names (null: none)"
        )
    for submitter, group in groups.items():
        if group is not None:
            _group_name(case, f"groups: {submitter}", group)
    weights = case.get("group_weights", {})
    if not isinstance(weights, dict) or not all(_is_number(v) for v in weights.values()):
        raise ScenarioError(f"case {case['id']}: 'group_weights' maps groups to numbers")
    for group in weights:
        _group_name(case, "group_weights", group)


def stand(session: Session, case: Mapping[str, Any], halflife_seconds: float) -> None:
    """Set the case's group weights, memberships and submitter weights, then book its
    usage as of now: a member's usage counts for its group, as a real booking's does."""
    steps: list[tuple[str, Callable[[str, Any], None]]] = [
        ("group_weights", lambda name, w: fair_shares.set_group_weight(session, name, float(w))),
        ("groups", lambda name, g: fair_shares.set_group(session, name, g, halflife_seconds)),
        ("weights", lambda name, w: fair_shares.set_weight(session, name, float(w))),
    ]
    for field, apply in steps:
        for name, value in case.get(field, {}).items():
            try:
                apply(name, value)
            except MatchingError as error:
                raise ScenarioError(f"case {case['id']}: {field}: {name}: {error}") from None
    now = utcnow()
    for name, used in case.get("usage", {}).items():
        fair_share_usage.book(session, name, float(used), now, halflife_seconds)
