"""The cluster side: workers (hosts), queues and queue instances (Momotor tag rows: momotor.py)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.db.base import Base, utcnow
from app.db.models.enums import WorkerState, string_enum


class Worker(Base):
    """A host that runs jobs. ``generation`` grows with every change that can alter what
    the worker fits, so cached misfit rows of an older generation are never read."""

    __tablename__ = "workers"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    rank: Mapped[int | None] = mapped_column(unique=True, default=None)
    state: Mapped[WorkerState] = mapped_column(
        string_enum(WorkerState, "worker_state"), default=WorkerState.ACTIVE
    )
    #: Why the worker is in its state (free text from the admin who set it), who set it
    #: (the token's role and subject, e.g. ``admin``) and when; NULL until someone does.
    state_reason: Mapped[str | None] = mapped_column(Text, default=None)
    state_set_by: Mapped[str | None] = mapped_column(String(255), default=None)
    state_changed_at: Mapped[datetime | None] = mapped_column(default=None)
    generation: Mapped[int] = mapped_column(default=1)
    #: The Momotor resource definition exactly as the worker (or its admin) wrote it.
    resources: Mapped[str] = mapped_column(Text, default="")
    last_seen: Mapped[datetime | None] = mapped_column(default=None)
    #: When the worker last reported its dynamic metadata (debusine issue #8); NULL: never.
    metadata_reported_at: Mapped[datetime | None] = mapped_column(default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    # In the order they were made: without it a worker's queues came back in the rows'
    # physical order, which an update of one of them changes (its used slots).
    queue_instances: Mapped[list[QueueInstance]] = relationship(
        back_populates="worker",
        cascade="all, delete-orphan",
        passive_deletes=True,
        order_by="QueueInstance.id",
    )


class Queue(Base):
    """A named queue; ``seq_no`` orders queue instances when a job could go to several."""

    __tablename__ = "queues"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    seq_no: Mapped[int] = mapped_column(default=0)
    #: queue_conf(5) ``load_thresholds`` as stored (``NONE``: none): an instance whose host
    #: exceeds one is in alarm and takes no new job.
    load_thresholds: Mapped[str] = mapped_column(Text, default="NONE", server_default="NONE")


class QueueInstance(Base):
    """A queue on one worker, with its slots. ``used_slots`` is the running total of the
    slots allocated to running jobs; CHECK constraints keep it within capacity."""

    __tablename__ = "queue_instances"
    __table_args__ = (
        UniqueConstraint("queue_id", "worker_id"),
        CheckConstraint("slots >= 0", name="slots_not_negative"),
        CheckConstraint("used_slots >= 0 AND used_slots <= slots", name="used_within_slots"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    queue_id: Mapped[int] = mapped_column(ForeignKey("queues.id", ondelete="RESTRICT"))
    worker_id: Mapped[int] = mapped_column(ForeignKey("workers.id", ondelete="CASCADE"), index=True)
    slots: Mapped[int] = mapped_column(default=1)
    used_slots: Mapped[int] = mapped_column(default=0)
    #: ``qmod -d`` / ``qmod -s`` as qstat's state letters: ``d`` disabled, ``s``
    #: suspended, ``ds`` both, empty for neither (one short column: the pull's state
    #: statement must stay under psycopg's 4,096 characters). A disabled or suspended
    #: instance takes no new job (docs/notations/gridengine.md#queue-instance-states).
    states: Mapped[str] = mapped_column(String(2), default="", server_default="")
    #: Per-host values of the cluster queue's attributes (queue_conf(5) ``seq_no
    #: 0,[h2=1]``): NULL takes the cluster queue's.
    seq_no: Mapped[int | None] = mapped_column(default=None)
    load_thresholds: Mapped[str | None] = mapped_column(Text, default=None)

    worker: Mapped[Worker] = relationship(back_populates="queue_instances")
    queue: Mapped[Queue] = relationship()

    @property
    def disabled(self) -> bool:
        return "d" in self.states

    @property
    def suspended(self) -> bool:
        return "s" in self.states

    def set_states(self, *, disabled: bool, suspended: bool) -> None:
        self.states = ("d" if disabled else "") + ("s" if suspended else "")


class SchedulerConfig(Base):
    """The scheduler configuration jobmatch models (sched_conf(5) ``queue_sort_method`` and
    ``load_formula``): one row at most (``id`` 1); without it queue instances sort by
    seq_no, then creation (docs/notations/gridengine.md#queue-sort-and-load-formula)."""

    __tablename__ = "scheduler_config"
    __table_args__ = (
        CheckConstraint("id = 1", name="single_row"),
        CheckConstraint("queue_sort_method IN ('load', 'seqno')", name="sort_method_known"),
    )

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    queue_sort_method: Mapped[str] = mapped_column(String(8))
    load_formula: Mapped[str] = mapped_column(Text)
