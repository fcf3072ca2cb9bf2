"""The ordering policy of a deployment (``JOBMATCH_ORDERING``): which waiting job a worker
takes first, as an ordered list of rules, each a column the pull orders by in SQL.

The rules are words shared by the server (which orders by them), its settings (which
check them at start) and the client (which shows them): ``priority`` (higher first),
``group-share`` (the group of submitters furthest below its share first),
``fair-share`` (the submitter furthest below its share first, docs/ordering.md) and
``age`` (older first). The job's id breaks what every rule leaves tied.
"""

from __future__ import annotations

#: The rules a policy may name, each with what it puts first.
RULES = {
    "priority": "the higher priority",
    "group-share": "the group of submitters furthest below its share",
    "fair-share": "the submitter furthest below its share",
    "age": "the older job",
}
#: Today's order, and the order of a deployment that does not ask for another
#: (debusine's rule: the highest priority, then the oldest).
DEFAULT_ORDERING: tuple[str, ...] = ("priority", "age")
FAIR_SHARE = "fair-share"
GROUP_SHARE = "group-share"
#: The rules that order submitters by their usage against their shares.
SHARE_RULES = (GROUP_SHARE, FAIR_SHARE)


class OrderingError(ValueError):
    """The ordering policy names an unknown rule, names one twice, names none, or puts
    ``group-share`` after ``fair-share``."""


def parse_ordering(text: str) -> tuple[str, ...]:
    """The rules of ``JOBMATCH_ORDERING`` (comma-separated, best first), checked."""
    rules = tuple(part.strip().lower() for part in text.split(","))
    if rules == ("",):
        raise OrderingError(f"expected at least one rule of {', '.join(RULES)}")
    for position, rule in enumerate(rules, start=1):
        if rule not in RULES:
            raise OrderingError(f"rule {position} is {rule!r}: expected one of {', '.join(RULES)}")
        if rule in rules[: position - 1]:
            raise OrderingError(f"rule {position} ({rule!r}) is named twice")
        # fair-share orders every submitter on its own, so a group rule after it could
        # only split the ties of equally used submitters: a policy written in the wrong
        # order, which is said rather than silently obeyed.
        if rule == GROUP_SHARE and FAIR_SHARE in rules[: position - 1]:
            raise OrderingError(
                f"rule {position} ({rule!r}) comes after {FAIR_SHARE!r}: "
                f"expected {GROUP_SHARE!r} before {FAIR_SHARE!r}"
            )
    return rules
