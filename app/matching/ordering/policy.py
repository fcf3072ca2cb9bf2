"""The deployment's ordering policy as the pull uses it: its rules (app/wire/ordering.py)
and the fair-share half-life, and the SQL terms each rule orders by.

The policy is the process's: the server sets it from its settings when it starts
(:func:`use`, called by app/api/app.py), and every pull, explain and what-if of the
process reads it (:func:`active`), so that they all decide by the same rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, case, func, literal_column

from app.db.models import SubmitterGroup, SubmitterShare
from app.settings import Settings
from app.wire.ordering import DEFAULT_ORDERING, FAIR_SHARE, GROUP_SHARE, SHARE_RULES, parse_ordering

#: What a submitter without usage ranks at: before any with usage.
NO_USAGE: ColumnElement[float] = literal_column("-1e300")


@dataclass(frozen=True)
class Ordering:
    """An ordering policy: the rules, best first, and the fair-share half-life."""

    rules: tuple[str, ...] = DEFAULT_ORDERING
    halflife_seconds: float = 86_400.0

    @classmethod
    def of(cls, text: str, halflife_seconds: float = 86_400.0) -> Ordering:
        """The policy that ``JOBMATCH_ORDERING`` names (checked: OrderingError)."""
        return cls(parse_ordering(text), halflife_seconds)

    @classmethod
    def from_settings(cls, settings: Settings) -> Ordering:
        return cls.of(settings.ordering, settings.fair_share_halflife_seconds)

    @property
    def fair_share(self) -> bool:
        """Whether the pull orders by usage against shares (``fair-share`` or
        ``group-share``): usage is booked, every submitter has a row, and the heads are
        per category and submitter."""
        return any(rule in SHARE_RULES for rule in self.rules)

    @property
    def group_share(self) -> bool:
        """Whether the pull orders groups of submitters by their usage against share."""
        return GROUP_SHARE in self.rules

    @property
    def leading_share_rules(self) -> tuple[str, ...]:
        """The share rules the policy starts with (none when it starts with another)."""
        leading: list[str] = []
        for rule in self.rules:
            if rule not in SHARE_RULES:
                break
            leading.append(rule)
        return tuple(leading)

    @property
    def is_default(self) -> bool:
        """Today's order (priority, then age): the pull's statements are the ones it
        always had, seeking in ``ix_jobs_waiting_order``."""
        return self.rules == DEFAULT_ORDERING

    @property
    def within_submitter(self) -> tuple[str, ...]:
        """The rules that order one submitter's jobs (the share rules tie them all)."""
        return tuple(rule for rule in self.rules if rule not in SHARE_RULES)

    def text(self) -> str:
        return ",".join(self.rules)


DEFAULT = Ordering()
_active = DEFAULT


def use(ordering: Ordering) -> None:
    """Make ``ordering`` the process's policy (the server does at start; tests too)."""
    global _active
    _active = ordering


def active() -> Ordering:
    """The process's ordering policy."""
    return _active


def share_key(halflife_seconds: float) -> ColumnElement[float]:
    """A submitter's standing, lower first: log2 of its usage per weight decayed to a
    common instant, up to a term that is the same for every submitter (see
    app/db/models/shares.py). The half-life is written into the text: statements are
    built once per policy."""
    per_second: ColumnElement[float] = literal_column(repr(1.0 / halflife_seconds))
    return func.coalesce(
        SubmitterShare.usage_log2 + SubmitterShare.usage_epoch * per_second, NO_USAGE
    )


def group_key(halflife_seconds: float) -> ColumnElement[float]:
    """The standing of a submitter's group, lower first, as :func:`share_key` is the
    submitter's: the group's row books its members' usage, so the same arithmetic over
    it gives log2 of the group's usage per group weight. A submitter without a group is
    a group of its own (Slurm's rule for a user directly under an account: it is a
    sibling of the sub-accounts, with its own shares): its key is its own. Needs
    ``submitter_groups`` outer-joined on :data:`GROUP_OF_SUBMITTER`."""
    per_second: ColumnElement[float] = literal_column(repr(1.0 / halflife_seconds))
    in_group = func.coalesce(
        SubmitterGroup.usage_log2 + SubmitterGroup.usage_epoch * per_second, NO_USAGE
    )
    return case((SubmitterShare.group_name.is_(None), share_key(halflife_seconds)), else_=in_group)


#: The join that :func:`group_key` reads the group's row through.
GROUP_OF_SUBMITTER = SubmitterGroup.name == SubmitterShare.group_name


def order_terms(
    rules: tuple[str, ...],
    priority: Any,
    submitted_at: Any,
    job_id: Any,
    share: Any = None,
    group: Any = None,
) -> list[Any]:
    """ORDER BY terms for ``rules`` over the given columns, the job id last: ``share``
    and ``group`` are the submitter's and its group's standing (when the rules have
    them)."""
    terms: list[Any] = []
    for rule in rules:
        if rule == "priority":
            terms.append(priority.desc())
        elif rule == "age":
            terms.append(submitted_at)
        elif rule == FAIR_SHARE and share is not None:
            terms.append(share)
        elif rule == GROUP_SHARE and group is not None:
            terms.append(group)
    return [*terms, job_id]
