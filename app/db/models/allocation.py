"""Worker inventories as rows: one per concrete resource vertex, the free counts per type
that SQL filters on, the bookings of running jobs, and what a category needs per node."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, CheckConstraint, ForeignKey, Index, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, utcnow
from app.db.dialect import partial_index


class WorkerInventory(Base):
    """A worker's declared resource graph (as given), its place above the node, and the
    counters the packing policy orders by."""

    __tablename__ = "worker_inventories"
    __table_args__ = (
        # Entirely free nodes in rank order: whole-node requests seek the first ones.
        partial_index(
            "ix_worker_inventories_untouched", "rank", "worker_id", where="untouched = vertices"
        ),
    )

    worker_id: Mapped[int] = mapped_column(
        ForeignKey("workers.id", ondelete="CASCADE"), primary_key=True
    )
    #: The inventory as given: a shape string or RFC 14 JSON text (see ``syntax``).
    inventory: Mapped[str] = mapped_column(Text)
    syntax: Mapped[str] = mapped_column(String(16))
    #: JSON list of [type, id] pairs above the node (cluster, switch, ...).
    upper: Mapped[str] = mapped_column(Text, default="[]")
    vertices: Mapped[int]
    #: Vertices no job uses at all (not held, not shared, nothing drawn).
    untouched: Mapped[int]
    #: A copy of the worker's rank (the scheduler's ``first`` order), kept equal by
    #: inventory.set_rank whenever the worker's rank changes.
    rank: Mapped[int | None]


class InventoryVertex(Base):
    """One concrete vertex of a worker's inventory, in depth-first order; the subtree of a
    vertex is the positions ``position .. last_position`` of the same worker."""

    __tablename__ = "inventory_vertices"
    __table_args__ = (
        CheckConstraint("used >= 0 AND used <= size", name="used_within_size"),
        CheckConstraint("shared >= 0", name="shared_not_negative"),
        # Held exclusively means nobody else shares it or draws from it.
        CheckConstraint("held_by IS NULL OR (shared = 0 AND used = 0)", name="held_alone"),
        Index("ix_inventory_vertices_worker_position", "worker_id", "position", unique=True),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    worker_id: Mapped[int] = mapped_column(ForeignKey("workers.id", ondelete="CASCADE"))
    position: Mapped[int]
    last_position: Mapped[int]
    parent_position: Mapped[int | None]
    depth: Mapped[int]
    type: Mapped[str] = mapped_column(String(255))
    #: Logical id within the worker and type (core 0..31), as RFC 20 R names them.
    logical_id: Mapped[int] = mapped_column(BigInteger)
    unit: Mapped[str | None] = mapped_column(String(64))
    size: Mapped[int] = mapped_column(BigInteger, default=1)
    used: Mapped[int] = mapped_column(BigInteger, default=0)
    shared: Mapped[int] = mapped_column(default=0)
    #: The job of the active exclusive booking whose subtree holds this row: a copy the
    #: scheduler's filter reads instead of the bookings. No foreign key (0014): PostgreSQL
    #: checked it once per held row of every booking (39 for a whole node);
    #: app/matching/allocation/invariants.py vouches for it, and for more than a key would.
    held_by: Mapped[int | None] = mapped_column(default=None)


class InventoryCount(Base):
    """Free units of one (type, unit) on one worker: vertices not held (discrete) or the
    undrawn amount of pools not held. Recomputed from the vertex rows on every change."""

    __tablename__ = "inventory_counts"
    __table_args__ = (
        CheckConstraint("free >= 0 AND free <= total", name="free_within_total"),
        Index("ix_inventory_counts_lookup", "type", "unit", "worker_id", "free"),
        # Workers with some of a type free, in rank order: the scheduler's survivors query
        # seeks the first ones instead of walking every full low-rank node.
        partial_index(
            "ix_inventory_counts_room", "type", "unit", "rank", "worker_id", where="free > 0"
        ),
    )

    worker_id: Mapped[int] = mapped_column(
        ForeignKey("workers.id", ondelete="CASCADE"), primary_key=True
    )
    type: Mapped[str] = mapped_column(String(255), primary_key=True)
    #: The pool unit, or "" for discrete vertices.
    unit: Mapped[str] = mapped_column(String(64), primary_key=True)
    total: Mapped[int] = mapped_column(BigInteger)
    free: Mapped[int] = mapped_column(BigInteger)
    #: A copy of the worker's rank, as on WorkerInventory.
    rank: Mapped[int | None]
    #: Vertices in the smallest subtree of a vertex of this (type, unit) on the worker,
    #: itself included; fixed by the inventory. A worker with fewer untouched vertices
    #: (WorkerInventory.untouched) has no entirely free vertex of the type: the cheap test
    #: that spares the scheduler the subtree scan of every worker it walks. 1, the weakest
    #: bound, where nothing better is known.
    span: Mapped[int] = mapped_column(default=1, server_default=text("1"))


class InventoryBooking(Base):
    """What a job holds: a vertex's subtree exclusively, a vertex shared, or an amount drawn
    from a pool. An exclusive booking of a vertex exists at most once while it is active."""

    __tablename__ = "inventory_bookings"
    __table_args__ = (
        Index("ix_inventory_bookings_job", "job_id"),
        partial_index(
            "ix_inventory_bookings_exclusive",
            "vertex_id",
            unique=True,
            where="mode = 'exclusive' AND released_at IS NULL",
        ),
        CheckConstraint("amount >= 1", name="amount_positive"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    vertex_id: Mapped[int] = mapped_column(ForeignKey("inventory_vertices.id", ondelete="CASCADE"))
    worker_id: Mapped[int] = mapped_column(ForeignKey("workers.id", ondelete="CASCADE"))
    mode: Mapped[str] = mapped_column(String(16))
    amount: Mapped[int] = mapped_column(BigInteger, default=1)
    booked_at: Mapped[datetime] = mapped_column(default=utcnow)
    released_at: Mapped[datetime | None] = mapped_column(default=None)


class CategoryNodeNeed(Base):
    """What one node must have free, at least, to take part in a category's job."""

    __tablename__ = "category_node_needs"

    category_id: Mapped[int] = mapped_column(
        ForeignKey("categories.id", ondelete="CASCADE"), primary_key=True
    )
    type: Mapped[str] = mapped_column(String(255), primary_key=True)
    unit: Mapped[str] = mapped_column(String(64), primary_key=True)
    amount: Mapped[int] = mapped_column(BigInteger)


class CategoryShape(Base):
    """Facts of a category's resources used by dispatch: the nodes it needs at least, and
    what a worker without an inventory (which offers ``node/[core=<slots>]``) must hold."""

    __tablename__ = "category_shapes"

    category_id: Mapped[int] = mapped_column(
        ForeignKey("categories.id", ondelete="CASCADE"), primary_key=True
    )
    min_nodes: Mapped[int]
    #: The cores the whole job needs when it asks for nothing but cores on at most one
    #: node; NULL when it asks for anything else (a GPU, a pool, several nodes), which a
    #: worker without an inventory never offers (issue 35).
    cores_alone: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
