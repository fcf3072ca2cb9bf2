"""Idempotency keys of submissions: a replayed request gets the job the first one made."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, declared_attr, mapped_column

from app.db.base import Base, utcnow


class _KeyColumns:
    """What every ``Idempotency-Key`` row holds: the key, per submitter, a hash of the
    body it was first used with, and when."""

    @declared_attr.directive
    def __table_args__(cls) -> tuple[UniqueConstraint]:
        # A constraint object belongs to one table: each table gets its own.
        return (UniqueConstraint("submitter", "key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    submitter: Mapped[str] = mapped_column(String(255))
    key: Mapped[str] = mapped_column(String(255))
    #: SHA-256 of the canonical JSON of the request body.
    request_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class IdempotencyKey(_KeyColumns, Base):
    """``Idempotency-Key`` of a submission, per submitter, with a hash of its body."""

    __tablename__ = "idempotency_keys"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), sort_order=1)


class BulkIdempotencyKey(_KeyColumns, Base):
    """``Idempotency-Key`` of a bulk submission (``POST /v1/jobs/bulk``), per submitter,
    with a hash of its body and the ids of the jobs it stored. A bulk submission's ids
    ascend in the order of its answer (app/matching/submission/bulk.py), so they are
    kept as an RFC 22 idset: a few runs (``4031-5030``) however many jobs, readable in
    SQL. NULL only within the transaction that claimed the key."""

    __tablename__ = "bulk_idempotency_keys"

    job_ids: Mapped[str | None] = mapped_column(Text, sort_order=1)
