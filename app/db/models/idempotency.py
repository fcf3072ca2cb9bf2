"""Idempotency keys of submissions: a replayed request gets the job the first one made."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, utcnow


class IdempotencyKey(Base):
    """``Idempotency-Key`` of a submission, per submitter, with a hash of its body."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (UniqueConstraint("submitter", "key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    submitter: Mapped[str] = mapped_column(String(255))
    key: Mapped[str] = mapped_column(String(255))
    #: SHA-256 of the canonical JSON of the request body.
    request_hash: Mapped[str] = mapped_column(String(64))
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
