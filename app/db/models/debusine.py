"""debusine tasks and worker metadata (debusine issue #8): the task registry, and each worker's
static and dynamic metadata as typed rows that SQL can filter on."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, CheckConstraint, Float, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, utcnow


class Task(Base):
    """A registered task type: what it needs, declaratively, and optionally the name of a
    ``jobmatch.tasks`` entry point whose ``can_run_on`` decides what cannot be declared."""

    __tablename__ = "tasks"
    __table_args__ = (CheckConstraint("version >= 1", name="version_positive"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    #: The version the server's code expects workers to report for this namespace.
    version: Mapped[int] = mapped_column(default=1)
    description: Mapped[str] = mapped_column(Text, default="")
    #: Canonical JSON of the requirement tree, NULL when the task needs nothing declared.
    requirements: Mapped[str | None] = mapped_column(Text, default=None)
    plugin: Mapped[str | None] = mapped_column(String(255), default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class CategoryTask(Base):
    """The task type of a category's jobs (categories without a task have no row). A table
    of its own rather than a column of ``categories``, so that adding it altered no table
    SQLite would have to rebuild."""

    __tablename__ = "category_tasks"

    category_id: Mapped[int] = mapped_column(
        ForeignKey("categories.id", ondelete="CASCADE"), primary_key=True
    )
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="RESTRICT"), index=True)


class WorkerMetadata(Base):
    """One metadata value of a worker, flattened to ``namespace:key``.

    ``element`` is NULL for the value itself and 0, 1, ... for the elements of a list
    value (so ``contains`` and the allow/deny lists are plain row lookups). The value is kept
    as canonical JSON and, for scalars, in the typed column SQL compares: ``value_number``
    (numbers, not booleans), ``value_text`` or ``value_bool``. ``effective`` is false for a
    dynamic row whose key the static side overrides (static over dynamic, kept up to date
    on every write of the worker's metadata).
    """

    __tablename__ = "worker_metadata"
    __table_args__ = (
        Index("ix_worker_metadata_lookup", "worker_id", "key", "element"),
        CheckConstraint("source IN ('static', 'dynamic')", name="source_known"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    worker_id: Mapped[int] = mapped_column(ForeignKey("workers.id", ondelete="CASCADE"))
    source: Mapped[str] = mapped_column(String(8))
    key: Mapped[str] = mapped_column(String(255))
    element: Mapped[int | None] = mapped_column(default=None)
    #: string, number, boolean, null, list or object.
    value_type: Mapped[str] = mapped_column(String(8))
    value_json: Mapped[str] = mapped_column(Text)
    value_number: Mapped[float | None] = mapped_column(Float(53), default=None)
    value_text: Mapped[str | None] = mapped_column(Text, default=None)
    value_bool: Mapped[bool | None] = mapped_column(Boolean, default=None)
    effective: Mapped[bool] = mapped_column(default=True)
    reported_at: Mapped[datetime] = mapped_column(default=utcnow)


class WorkerMetadataNamespace(Base):
    """A namespace of the worker's latest dynamic report, with its version and time."""

    __tablename__ = "worker_metadata_namespaces"
    __table_args__ = (CheckConstraint("version >= 1", name="version_positive"),)

    worker_id: Mapped[int] = mapped_column(
        ForeignKey("workers.id", ondelete="CASCADE"), primary_key=True
    )
    namespace: Mapped[str] = mapped_column(String(255), primary_key=True)
    version: Mapped[int]
    reported_at: Mapped[datetime] = mapped_column(default=utcnow)
