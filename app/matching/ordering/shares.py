"""Reading and setting the shares (docs/ordering.md): each submitter's weight, group, share
and usage decayed to now, each group's likewise, as the admin routes, the console, the
CLI (over HTTP) and /metrics show them; and the weights and groups an administrator sets.

A submitter's share is its weight over the sum of the weights of the submitters with
rows; its usage fraction is its decayed usage over everybody's. The pull takes first the
submitter with the least usage per weight, which is the one whose usage fraction is the
smallest part of its share (``usage fraction / share``, the same order). Groups are
compared the same way (``group-share``), a submitter without a group counting as a group
of its own with its own weight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import SubmitterGroup, SubmitterShare
from app.matching.errors import InvalidFieldError
from app.matching.ordering.decay import decayed, usage_log2
from app.matching.ordering.usage import add_usage, ensure_rows

#: Weights beyond this are refused: the pull's arithmetic takes their log.
MAX_WEIGHT = 1e9


@dataclass(frozen=True)
class Standing:
    """One submitter's weight, share (a fraction of 1), usage decayed to ``at`` and its
    fraction of everybody's usage (0 when nobody used anything)."""

    submitter: str
    weight: float
    share: float
    usage: float
    usage_fraction: float
    #: The group it belongs to; None: a group of its own.
    group: str | None = None

    @property
    def below_share(self) -> bool:
        """Whether it used less than its share (it goes before those that used more)."""
        return self.usage_fraction < self.share


@dataclass(frozen=True)
class GroupStanding:
    """One group of submitters (``group`` None: a submitter without a group, a group of
    its own): its weight, its share (its weight over every group's), its members' usage
    decayed to now and that usage over everybody's."""

    group: str | None
    members: tuple[str, ...]
    weight: float
    share: float
    usage: float
    usage_fraction: float

    @property
    def below_share(self) -> bool:
        """Whether its members used less than its share (they go first, by group)."""
        return self.usage_fraction < self.share


def _now_usage(used: float, epoch: float, now: float, halflife_seconds: float) -> float:
    return decayed(used, max(0.0, now - epoch), halflife_seconds) if used > 0 else 0.0


def standings(
    session: Session, halflife_seconds: float, at: datetime | None = None, by_group: bool = False
) -> list[Standing]:
    """Every submitter with a row, furthest below its share first (the pull's order);
    ``by_group`` (a policy with ``group-share``): its group's standing first."""
    now = (at or utcnow()).timestamp()
    rows = session.execute(
        select(
            SubmitterShare.submitter,
            SubmitterShare.weight,
            SubmitterShare.usage,
            SubmitterShare.usage_epoch,
            SubmitterShare.group_name,
        ).order_by(SubmitterShare.submitter)
    ).all()
    usage = {
        name: _now_usage(used, epoch, now, halflife_seconds) for name, _w, used, epoch, _g in rows
    }
    total_weight = sum(weight for _name, weight, _used, _epoch, _group in rows) or 1.0
    total_usage = sum(usage.values())
    listed = [
        Standing(
            submitter=name,
            weight=weight,
            share=weight / total_weight,
            usage=usage[name],
            usage_fraction=usage[name] / total_usage if total_usage > 0 else 0.0,
            group=group,
        )
        for name, weight, _used, _epoch, group in rows
    ]
    if by_group:
        groups = {
            member: g.usage / g.weight
            for g in group_standings(session, halflife_seconds, at)
            for member in g.members
        }
        listed.sort(key=lambda s: (groups[s.submitter], s.usage / s.weight, s.submitter))
    else:
        listed.sort(key=lambda s: (s.usage / s.weight, s.submitter))
    return listed


def group_standings(
    session: Session, halflife_seconds: float, at: datetime | None = None
) -> list[GroupStanding]:
    """Every group (those with rows, with or without members, and each submitter without
    a group as a group of its own), furthest below its share first (the order of
    ``group-share``)."""
    now = (at or utcnow()).timestamp()
    members: dict[str, list[str]] = {}
    alone: list[GroupStanding] = []
    for name, weight, used, epoch, group in session.execute(
        select(
            SubmitterShare.submitter,
            SubmitterShare.weight,
            SubmitterShare.usage,
            SubmitterShare.usage_epoch,
            SubmitterShare.group_name,
        ).order_by(SubmitterShare.submitter)
    ):
        if group is None:
            alone.append(
                GroupStanding(
                    None, (name,), weight, 0.0, _now_usage(used, epoch, now, halflife_seconds), 0.0
                )
            )
        else:
            members.setdefault(group, []).append(name)
    named = [
        GroupStanding(
            name,
            tuple(members.get(name, ())),
            weight,
            0.0,
            _now_usage(used, epoch, now, halflife_seconds),
            0.0,
        )
        for name, weight, used, epoch in session.execute(
            select(
                SubmitterGroup.name,
                SubmitterGroup.weight,
                SubmitterGroup.usage,
                SubmitterGroup.usage_epoch,
            ).order_by(SubmitterGroup.name)
        )
    ]
    every = [*named, *alone]
    total_weight = sum(g.weight for g in every) or 1.0
    total_usage = sum(g.usage for g in every)
    listed = [
        GroupStanding(
            g.group,
            g.members,
            g.weight,
            g.weight / total_weight,
            g.usage,
            g.usage / total_usage if total_usage > 0 else 0.0,
        )
        for g in every
    ]
    listed.sort(key=lambda g: (g.usage / g.weight, g.group or "", g.members))
    return listed


def standing_of(session: Session, submitter: str, halflife_seconds: float) -> Standing | None:
    """One submitter's standing among all (None without a row)."""
    for standing in standings(session, halflife_seconds):
        if standing.submitter == submitter:
            return standing
    return None


def group_standing_of(
    session: Session, group: str, halflife_seconds: float
) -> GroupStanding | None:
    """One named group's standing among all (None without a row)."""
    for standing in group_standings(session, halflife_seconds):
        if standing.group == group:
            return standing
    return None


def _check_weight(weight: float) -> None:
    if not (
        isinstance(weight, (int, float)) and math.isfinite(weight) and 0 < weight <= MAX_WEIGHT
    ):
        raise InvalidFieldError("weight", f"must be a number above 0 and at most {MAX_WEIGHT:g}")


def set_weight(session: Session, submitter: str, weight: float) -> None:
    """Give the submitter a weight (its share grows with it); its row is made if need be.
    The stored usage keeps its instant; only its log per weight, which the pull orders
    by, moves."""
    _check_weight(weight)
    ensure_rows(session, [submitter])
    row = session.get(SubmitterShare, submitter, with_for_update=True, populate_existing=True)
    assert row is not None  # just made
    row.weight = float(weight)
    row.usage_log2 = usage_log2(row.usage, row.weight)
    session.flush()


def ensure_group(session: Session, name: str) -> SubmitterGroup:
    """The group's row, locked; made (weight 1, no usage) if it has none. Concurrent
    requests may make the same group: the primary key lets one insert win."""
    insert_into = (
        postgresql.insert if session.connection().dialect.name == "postgresql" else sqlite.insert
    )
    now = utcnow()
    session.execute(
        insert_into(SubmitterGroup).on_conflict_do_nothing(index_elements=["name"]),
        [{"name": name, "usage_at": now, "usage_epoch": now.timestamp()}],
    )
    row = session.get(SubmitterGroup, name, with_for_update=True, populate_existing=True)
    assert row is not None  # just made
    return row


def set_group_weight(session: Session, name: str, weight: float) -> None:
    """Give a group a weight (its share grows with it); its row is made if need be."""
    _check_weight(weight)
    row = ensure_group(session, name)
    row.weight = float(weight)
    row.usage_log2 = usage_log2(row.usage, row.weight)
    session.flush()


def set_group(session: Session, submitter: str, group: str | None, halflife_seconds: float) -> None:
    """Put the submitter in ``group`` (made with weight 1 if it has no row), or in none.
    The submitter takes its usage along, decayed to now: it is taken from its old
    group's and added to the new one's, so that a group's usage stays the sum of its
    members' (a group left without members keeps none). Rows are locked submitter
    first, then groups, as a booking locks them."""
    ensure_rows(session, [submitter])
    row = session.get(SubmitterShare, submitter, with_for_update=True, populate_existing=True)
    assert row is not None  # just made
    if row.group_name == group:
        return
    now = utcnow().timestamp()
    carried = _now_usage(row.usage, row.usage_epoch, now, halflife_seconds)
    old = row.group_name
    # Both groups locked in the order of their names, so that two moves between the
    # same groups in opposite directions do not wait for each other.
    locked = {
        name: ensure_group(session, name)
        for name in sorted(name for name in (old, group) if name is not None)
    }
    if old is not None:
        left = locked[old]
        add_usage(left, -carried, now, halflife_seconds)
        others = session.scalar(
            select(SubmitterShare.submitter)
            .where(SubmitterShare.group_name == old, SubmitterShare.submitter != submitter)
            .limit(1)
        )
        if others is None:
            # Nobody left: none of the rounding of the subtraction stays behind.
            add_usage(left, -left.usage, left.usage_epoch, halflife_seconds)
    if group is not None:
        add_usage(locked[group], carried, now, halflife_seconds)
    row.group_name = group
    session.flush()
