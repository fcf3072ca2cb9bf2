"""Worker templates (issue 40): the kinds of worker an autoscaler can create, which demand
simulates and which let a job that no registered worker fits wait instead of failing."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Float, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, utcnow


class WorkerTemplate(Base):
    """A worker body as ``POST /v1/workers`` takes it, without a name, stored as its JSON
    (it is registered as it stands, in a savepoint, whenever it is simulated), with what
    one new worker of it costs and how many an autoscaler may create (NULL: no limit)."""

    __tablename__ = "worker_templates"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    #: The worker body (JSON object: resources, slots, queues, properties, inventory...).
    body: Mapped[str] = mapped_column(Text)
    cost: Mapped[float] = mapped_column(Float, default=1.0)
    max_count: Mapped[int | None] = mapped_column(default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
