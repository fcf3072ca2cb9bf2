"""Fair share between submitters and between groups of submitters (docs/ordering.md):
each submitter's share weight, its group and its usage, and each group's weight and usage,
decayed lazily.

``usage`` is the slot-seconds (vertex-seconds for a job holding vertices) the submitter's
ended jobs used, as of ``usage_at``; what it is worth now is
``usage * 2 ** -((now - usage_at) / half-life)``, computed by whoever reads it, so no
periodic job rewrites the rows. The pull orders by ``usage_log2 + usage_epoch /
half-life`` (the log of the decayed usage per weight, plus a term every submitter shares),
plain arithmetic on both databases: the submitter with the least usage per weight, the
one furthest below its share, comes first. A group's row books the usage of its members
(each booking is made on both rows, and a submitter that changes group takes its usage
along), so that its ``usage_log2`` is the log of the group's usage per group weight.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, Float, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, utcnow


class SubmitterShare(Base):
    """One submitter's weight and decayed usage. A row exists for every submitter that
    submitted while fair share was on (the pull reads the heads per category and
    submitter of these rows), and for every one whose usage was booked or weight set."""

    __tablename__ = "submitter_shares"
    __table_args__ = (
        CheckConstraint("weight > 0", name="weight_positive"),
        CheckConstraint("usage >= 0", name="usage_not_negative"),
    )

    submitter: Mapped[str] = mapped_column(String(255), primary_key=True)
    #: The submitter's share is its weight over the weights of every submitter (1 each
    #: by default: equal shares).
    weight: Mapped[float] = mapped_column(Float, default=1.0, server_default="1")
    #: Slot-seconds used, as of ``usage_at`` (decayed up to then).
    usage: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")
    usage_at: Mapped[datetime] = mapped_column(default=utcnow)
    #: ``usage_at`` in seconds since the Unix epoch, for the pull's arithmetic.
    usage_epoch: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")
    #: log2(usage / weight); NULL while the usage is 0 (the submitter goes first).
    usage_log2: Mapped[float | None] = mapped_column(Float, default=None)
    #: The group it belongs to (a course, a project); NULL: a group of its own, whose
    #: weight and usage are the submitter's.
    group_name: Mapped[str | None] = mapped_column(
        String(255), ForeignKey("submitter_groups.name", ondelete="RESTRICT"), default=None
    )


class SubmitterGroup(Base):
    """One group of submitters: its weight and the decayed usage of its members, kept as
    a submitter's is (the same columns, the same arithmetic)."""

    __tablename__ = "submitter_groups"
    __table_args__ = (
        CheckConstraint("weight > 0", name="weight_positive"),
        CheckConstraint("usage >= 0", name="usage_not_negative"),
    )

    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    #: The group's share is its weight over the weights of every group, a submitter
    #: without a group counting as a group of its own with its weight.
    weight: Mapped[float] = mapped_column(Float, default=1.0, server_default="1")
    #: Slot-seconds its members used, as of ``usage_at`` (decayed up to then).
    usage: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")
    usage_at: Mapped[datetime] = mapped_column(default=utcnow)
    usage_epoch: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")
    #: log2(usage / weight); NULL while the usage is 0.
    usage_log2: Mapped[float | None] = mapped_column(Float, default=None)
