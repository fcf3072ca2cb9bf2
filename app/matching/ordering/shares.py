"""Reading and setting the shares (docs/ordering.md): each submitter's weight, share and
usage decayed to now, as the admin routes, the console, the CLI (over HTTP) and /metrics
show them; and a weight set by an administrator.

A submitter's share is its weight over the sum of the weights of the submitters with
rows; its usage fraction is its decayed usage over everybody's. The pull takes first the
submitter with the least usage per weight, which is the one whose usage fraction is the
smallest part of its share (``usage fraction / share``, the same order).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import SubmitterShare
from app.matching.errors import InvalidFieldError
from app.matching.ordering.decay import decayed, usage_log2
from app.matching.ordering.usage import ensure_rows

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

    @property
    def below_share(self) -> bool:
        """Whether it used less than its share (it goes before those that used more)."""
        return self.usage_fraction < self.share


def standings(
    session: Session, halflife_seconds: float, at: datetime | None = None
) -> list[Standing]:
    """Every submitter with a row, furthest below its share first (the pull's order)."""
    now = (at or utcnow()).timestamp()
    rows = session.execute(
        select(
            SubmitterShare.submitter,
            SubmitterShare.weight,
            SubmitterShare.usage,
            SubmitterShare.usage_epoch,
        ).order_by(SubmitterShare.submitter)
    ).all()
    usage = {
        name: decayed(used, max(0.0, now - epoch), halflife_seconds) if used > 0 else 0.0
        for name, _weight, used, epoch in rows
    }
    total_weight = sum(weight for _name, weight, _used, _epoch in rows) or 1.0
    total_usage = sum(usage.values())
    listed = [
        Standing(
            submitter=name,
            weight=weight,
            share=weight / total_weight,
            usage=usage[name],
            usage_fraction=usage[name] / total_usage if total_usage > 0 else 0.0,
        )
        for name, weight, _used, _epoch in rows
    ]
    listed.sort(key=lambda s: (s.usage / s.weight, s.submitter))
    return listed


def standing_of(session: Session, submitter: str, halflife_seconds: float) -> Standing | None:
    """One submitter's standing among all (None without a row)."""
    for standing in standings(session, halflife_seconds):
        if standing.submitter == submitter:
            return standing
    return None


def set_weight(session: Session, submitter: str, weight: float) -> None:
    """Give the submitter a weight (its share grows with it); its row is made if need be.
    The stored usage keeps its instant; only its log per weight, which the pull orders
    by, moves."""
    if not (
        isinstance(weight, (int, float)) and math.isfinite(weight) and 0 < weight <= MAX_WEIGHT
    ):
        raise InvalidFieldError("weight", f"must be a number above 0 and at most {MAX_WEIGHT:g}")
    ensure_rows(session, [submitter])
    row = session.get(SubmitterShare, submitter, with_for_update=True, populate_existing=True)
    assert row is not None  # just made
    row.weight = float(weight)
    row.usage_log2 = usage_log2(row.usage, row.weight)
    session.flush()
