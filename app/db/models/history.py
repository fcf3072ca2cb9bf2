"""What happened to a job, in order: its history."""

from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, utcnow
from app.db.models.enums import string_enum


class JobEventKind(enum.StrEnum):
    SUBMITTED = "submitted"
    DISPATCHED = "dispatched"
    REQUEUED = "requeued"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"
    #: The running worker gave the job back unfinished (it stopped, or it restarted and
    #: killed what it had left running): the job waits again.
    RETURNED = "returned"
    #: A worker reported the end of a job it no longer held (its lease had expired): the
    #: report is kept here but changed nothing.
    LATE_REPORT = "late_report"


class JobEvent(Base):
    """One change of a job's state, with the worker involved and why."""

    __tablename__ = "job_events"
    __table_args__ = (Index("ix_job_events_job", "job_id", "id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    kind: Mapped[JobEventKind] = mapped_column(string_enum(JobEventKind, "job_event_kind"))
    worker: Mapped[str | None] = mapped_column(String(255), default=None)
    detail: Mapped[str | None] = mapped_column(Text, default=None)
    at: Mapped[datetime] = mapped_column(default=utcnow)
