"""The ordering policy of a deployment (``JOBMATCH_ORDERING``): which waiting job a worker
takes first, as an ordered list of rules, each a column the pull orders by in SQL.

The rules are words shared by the server (which orders by them), its settings (which
check them at start) and the client (which shows them): ``priority`` (higher first),
``fair-share`` (the submitter furthest below its share first, docs/ordering.md) and
``age`` (older first). The job's id breaks what every rule leaves tied.
"""

from __future__ import annotations

#: The rules a policy may name, each with what it puts first.
RULES = {
    "priority": "the higher priority",
    "fair-share": "the submitter furthest below its share",
    "age": "the older job",
}
#: Today's order, and the order of a deployment that does not ask for another
#: (debusine's rule: the highest priority, then the oldest).
DEFAULT_ORDERING: tuple[str, ...] = ("priority", "age")
FAIR_SHARE = "fair-share"


class OrderingError(ValueError):
    """The ordering policy names an unknown rule, names one twice, or names none."""


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
    return rules
