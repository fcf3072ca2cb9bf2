"""What a running job printed so far: the tail its worker streams to the server."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Integer, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, utcnow


class JobOutput(Base):
    """The last characters of one job's output (at most ``JOBMATCH_OUTPUT_TAIL_CHARS``).

    Offsets count characters from the start of the attempt's output and never move back:
    ``start`` is the offset of the first character kept, so ``start + len(text)`` is where
    the next chunk goes. A new attempt (the job was requeued) starts again at 0.
    """

    __tablename__ = "job_outputs"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    #: The job's ``attempts`` when this output was written: a later attempt replaces it.
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    start: Mapped[int] = mapped_column(BigInteger, default=0)
    text: Mapped[str] = mapped_column(Text, default="")
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
