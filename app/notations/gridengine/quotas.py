"""Grid Engine 6.2 resource quota sets (``qconf -arqs``; ``sge_resource_quota(5)``): what
a set is, its canonical text, and the rules that decide which rule of a set applies to a job.
Reading the text is app/notations/gridengine/quota_parser.py; resolving a set's limits
against the attribute table is app/notations/gridengine/quota_check.py.

A set is a name, a description, an enabled flag and ordered rules::

    {
       name         max_u_slots
       description  "each user at most 4 slots"
       enabled      TRUE
       limit        users {*} to slots=4
    }

A rule is ``limit [name N] [users L] [projects L] [pes L] [queues L] [hosts L] to
attr=value[,attr=value...]``. A filter list is comma separated; an item is a name or an
``fnmatch`` pattern (``*`` is everything), ``!`` before it excludes. Between braces the
list is *expanded*: the limit counts for each matching user (queue, host, ...) separately
instead of for all of them together. A backslash before a newline joins two lines, as
``sge_resource_quota(5)`` says. Within a set the first rule whose filters match a job (and
a queue instance) is the one that applies; every enabled set applies.

An item that starts with ``@`` names a group: an access list in ``users`` (its member
users), a host group in ``hosts`` (its hosts, sub-groups included); the name after the
``@`` may be a pattern, and groups that do not exist match nothing (sge_resource_quota(5):
"The defined user or ACL names need not exist"; Grid Engine 6.2u5
``rqs_match_user_host_scope()`` in source/libs/sgeobj/sge_resource_quota.c). In an
expanded list a group counts each member separately (``users {@staff}`` keeps one usage
entry per member). Matching takes the groups as :class:`QuotaGroups`. ``@`` items in the
other filters are refused (Grid Engine matches them as names there, and no project, PE
or cluster queue name holds an ``@``).
Dynamic limits (``slots=$num_proc*2``) are parsed and checked as the man page and
qconf require (host-specific rules only, INT or DOUBLE attributes); app/matching evaluates
them against each host's value.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field

from app.notations.errors import NotationError

__all__ = [
    "FILTER_KINDS",
    "Filter",
    "FilterItem",
    "Limit",
    "QuotaError",
    "QuotaGroups",
    "QuotaRule",
    "QuotaSet",
    "Term",
]

#: The filters of a rule, in the order ``qconf -srqs`` prints them and in the order of
#: the usage key Grid Engine builds (``rqs_get_rue_string``: user, project, pe, queue, host).
FILTER_KINDS = ("users", "projects", "pes", "queues", "hosts")
_KEY_ORDER = ("users", "projects", "pes", "queues", "hosts")


class QuotaError(NotationError):
    """A resource quota set's text breaks the ``sge_resource_quota(5)`` format (an unknown
    keyword, a malformed filter or limit, a duplicate rule name, a missing ``to``) or names
    something jobmatch cannot enforce (a group outside ``users`` and ``hosts``, a
    non-consumable)."""

    notation = "sge-resource-quota"


@dataclass(frozen=True)
class QuotaGroups:
    """The groups ``@`` items name: access lists (name without ``@`` -> member users) and
    host groups (name with its ``@`` -> lower-case hosts, sub-groups resolved)."""

    access_lists: Mapping[str, frozenset[str]] = field(default_factory=dict)
    host_groups: Mapping[str, frozenset[str]] = field(default_factory=dict)


_NO_GROUPS = QuotaGroups()


@dataclass(frozen=True)
class FilterItem:
    """One item of a filter list: a name or pattern (``@`` and a group's name or pattern
    in ``users`` and ``hosts``), maybe excluded with ``!``."""

    pattern: str
    negated: bool = False

    def matches(
        self,
        value: str | None,
        *,
        fold_case: bool = False,
        groups: Mapping[str, frozenset[str]] | None = None,
    ) -> bool:
        """Whether the value matches the pattern; no pattern matches a missing value (a job
        without a project or PE), so ``*`` means "any project" and ``!*`` "no project".
        A group item matches a member of any group (of ``groups``, keyed by the name the
        item's pattern is matched against) whose name matches it."""
        if value is None:
            return False
        if self.pattern.startswith("@") and groups is not None:
            wanted = self.pattern[1:]
            member = value.lower() if fold_case else value
            for name, members in groups.items():
                key = name[1:] if name.startswith("@") else name
                if _fnmatch(key, wanted, fold_case) and member in members:
                    return True
            return False
        return _fnmatch(value, self.pattern, fold_case)

    def to_text(self) -> str:
        return ("!" if self.negated else "") + self.pattern


@dataclass(frozen=True)
class Filter:
    """A rule's filter of one kind: its items, and whether it is expanded (``{...}``,
    a limit for each matching value separately)."""

    items: tuple[FilterItem, ...]
    expand: bool = False

    def matches(
        self,
        value: str | None,
        *,
        fold_case: bool = False,
        groups: Mapping[str, frozenset[str]] | None = None,
    ) -> bool:
        """Grid Engine's ``rqs_filter_match``: an excluded item that matches rejects; else
        the value must match one of the other items, if there are any."""
        positive = [item for item in self.items if not item.negated]
        excluded = (item for item in self.items if item.negated)
        if any(item.matches(value, fold_case=fold_case, groups=groups) for item in excluded):
            return False
        return not positive or any(
            item.matches(value, fold_case=fold_case, groups=groups) for item in positive
        )

    def to_text(self) -> str:
        body = ",".join(item.to_text() for item in self.items)
        return "{" + body + "}" if self.expand else body


#: What Grid Engine's scaled_mixed_load() returns for a formula it cannot evaluate, e.g. a
#: host without a value the formula names (source/libs/sched/sort_hosts.h ERROR_LOAD_VAL).
ERROR_LOAD_VAL = 9999.0


@dataclass(frozen=True)
class Term:
    """One term of a dynamic limit: ``weight`` times the host's value of ``attribute``
    (a plain number when ``attribute`` is None); ``sign`` is +1 or -1."""

    weight: float
    attribute: str | None = None
    sign: int = 1

    def to_text(self, first: bool) -> str:
        weight = _number_text(self.weight)
        body = weight if self.attribute is None else f"${self.attribute}"
        if self.attribute is not None and self.weight != 1.0:
            body += f"*{weight}"
        if first:
            return body if self.sign > 0 else f"-{body}"
        return ("+" if self.sign > 0 else "-") + body


@dataclass(frozen=True)
class Limit:
    """``attribute=value``: a static limit (``number`` in base units, bytes or seconds)
    or a dynamic one (``terms``, evaluated per host)."""

    attribute: str
    text: str
    number: float | None = None
    terms: tuple[Term, ...] = ()

    @property
    def dynamic(self) -> bool:
        return bool(self.terms)

    def value_for(self, host_values: dict[str, float]) -> float | None:
        """The limit's value: the static number, or the dynamic sum over the host's values.
        When the host lacks a value a term needs, the whole limit is
        :data:`ERROR_LOAD_VAL`, as in Grid Engine 6.2u5 and 8.1.9: rqs_set_dynamical_limit()
        takes scaled_mixed_load()'s result, which is ERROR_LOAD_VAL for a formula it cannot
        evaluate (source/libs/sched/sort_hosts.c), and the rule still applies."""
        if not self.terms:
            return self.number
        total = 0.0
        for term in self.terms:
            if term.attribute is None:
                part = term.weight
            else:
                found = host_values.get(term.attribute)
                if found is None:
                    return ERROR_LOAD_VAL
                part = term.weight * found
            total += term.sign * part
        return total

    def to_text(self) -> str:
        return f"{self.attribute}={self.text}"


@dataclass(frozen=True)
class QuotaRule:
    """A ``limit`` line: its optional name, its filters (None: not given, matches every
    job) and its limits."""

    limits: tuple[Limit, ...]
    name: str | None = None
    users: Filter | None = None
    projects: Filter | None = None
    pes: Filter | None = None
    queues: Filter | None = None
    hosts: Filter | None = None

    def filter(self, kind: str) -> Filter | None:
        found: Filter | None = getattr(self, kind)
        return found

    def matches(
        self,
        user: str,
        project: str | None,
        pe: str | None,
        queue: str,
        host: str,
        groups: QuotaGroups = _NO_GROUPS,
    ) -> bool:
        """Whether the rule's filters all match a job of ``user`` (with its project and
        PE, None without) on queue instance ``queue@host``; ``@`` items of ``users`` and
        ``hosts`` name the ``groups``."""
        values = {"users": user, "projects": project, "pes": pe, "queues": queue, "hosts": host}
        named = {"users": groups.access_lists, "hosts": groups.host_groups}
        for kind in FILTER_KINDS:
            found = self.filter(kind)
            if found is not None and not found.matches(
                values[kind], fold_case=kind == "hosts", groups=named.get(kind)
            ):
                return False
        return True

    def usage_key(
        self, user: str, project: str | None, pe: str | None, queue: str, host: str
    ) -> str:
        """The name of the usage entry a job debits (``rqs_get_rue_string()`` of Grid Engine
        6.2u5 and 8.1.9, source/libs/sgeobj/sge_resource_quota.c): the values of the
        expanded filters in the order user/project/pe/queue/host, empty for filters that
        count everything together, each followed by ``/``; e.g. ``alice/////`` for
        ``users {*}``, ``alice////h1/`` with ``hosts {*}`` too, ``/////`` for none."""
        values = {"users": user, "projects": project, "pes": pe, "queues": queue, "hosts": host}
        parts = []
        for kind in _KEY_ORDER:
            found = self.filter(kind)
            value = values[kind]
            if found is not None and found.expand and value is not None:
                parts.append(value.lower() if kind == "hosts" else value)
            else:
                parts.append("")
        # rqs_get_rue_string() appends "/" after each of the five fields, the last too.
        return "".join(f"{part}/" for part in parts)

    def to_text(self) -> str:
        words = []
        if self.name is not None:
            words += ["name", self.name]
        for kind in FILTER_KINDS:
            found = self.filter(kind)
            if found is not None:
                words += [kind, found.to_text()]
        words += ["to", ",".join(limit.to_text() for limit in self.limits)]
        return " ".join(words)


@dataclass(frozen=True)
class QuotaSet:
    """A resource quota set: rules in order, the first matching one applies."""

    name: str
    rules: tuple[QuotaRule, ...]
    description: str = "NONE"
    enabled: bool = False

    def rule_label(self, index: int) -> str:
        """A rule as Grid Engine names it in messages: ``set/rule-name`` or ``set/N``
        (1-based)."""
        rule = self.rules[index]
        return f"{self.name}/{rule.name if rule.name is not None else index + 1}"

    def to_text(self) -> str:
        """The set as ``qconf -srqs`` prints it."""
        description = self.description
        if description != "NONE":
            description = '"' + description + '"'
        lines = [
            "{",
            f"   {'name':<13}{self.name}",
            f"   {'description':<13}{description}",
            f"   {'enabled':<13}{'TRUE' if self.enabled else 'FALSE'}",
        ]
        lines += [f"   {'limit':<13}{rule.to_text()}" for rule in self.rules]
        lines.append("}")
        return "\n".join(lines) + "\n"


def _fnmatch(value: str, pattern: str, fold_case: bool) -> bool:
    if fold_case:
        return fnmatch.fnmatchcase(value.lower(), pattern.lower())
    return fnmatch.fnmatchcase(value, pattern)


def _number_text(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)
