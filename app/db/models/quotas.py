"""Grid Engine resource quota sets as rows (docs/notations/gridengine.md#resource-quota-sets):
the sets with their canonical ``qconf -srqs`` text, one row per limit of each rule, the usage
of each limit per usage key (the values of a rule's expanded filters, e.g. one row per user
for ``users {*}``), and what each running job holds of them.

The set's text is the definition (its rules' filters are matched in Python, by
app/notations/gridengine/quotas.py); the limits are rows so that an attribute a quota
limits cannot be deleted, and the usage rows are the books, updated by guarded UPDATEs
(``used + amount <= limit``) exactly as consumable_usage is.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, utcnow


class QuotaSet(Base):
    """A resource quota set (``qconf -arqs``): its name, description, enabled flag and its
    rules, kept as the canonical text ``qconf -srqs`` prints."""

    __tablename__ = "quota_sets"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    description: Mapped[str] = mapped_column(Text, default="NONE")
    enabled: Mapped[bool] = mapped_column(Boolean, default=False)
    text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class QuotaLimit(Base):
    """One ``attr=value`` of one rule: ``rule_index`` is the rule's 0-based position in
    its set, ``rule_label`` its name in messages (``set/name`` or ``set/N``). ``number`` is
    the static limit in base units, NULL for a dynamic limit (``$num_proc*2``, evaluated
    per host at dispatch)."""

    __tablename__ = "quota_limits"
    __table_args__ = (UniqueConstraint("set_id", "rule_index", "attribute_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    set_id: Mapped[int] = mapped_column(ForeignKey("quota_sets.id", ondelete="CASCADE"))
    rule_index: Mapped[int] = mapped_column(Integer)
    rule_label: Mapped[str] = mapped_column(String(512))
    attribute_id: Mapped[int] = mapped_column(
        ForeignKey("attributes.id", ondelete="RESTRICT"), index=True
    )
    text: Mapped[str] = mapped_column(Text)
    number: Mapped[float | None] = mapped_column(Float, default=None)


class QuotaUsage(Base):
    """How much of a limit running jobs hold, per usage key (Grid Engine's "rue" name:
    the values of the rule's expanded filters, ``user/project/pe/queue/host``)."""

    __tablename__ = "quota_usage"
    __table_args__ = (
        UniqueConstraint("limit_id", "key"),
        CheckConstraint("used >= 0", name="used_not_negative"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    limit_id: Mapped[int] = mapped_column(ForeignKey("quota_limits.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(1024))
    used: Mapped[float] = mapped_column(Float, default=0.0)


class QuotaBooking(Base):
    """An amount of a quota usage row a running job holds; given back when it ends."""

    __tablename__ = "quota_bookings"
    __table_args__ = (CheckConstraint("amount >= 0", name="amount_not_negative"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    usage_id: Mapped[int] = mapped_column(
        ForeignKey("quota_usage.id", ondelete="CASCADE"), index=True
    )
    amount: Mapped[float] = mapped_column(Float)
