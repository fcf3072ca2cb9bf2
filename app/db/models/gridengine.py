"""Grid Engine complex attributes as rows (docs/notations/gridengine.md): the attribute
table, values at the global, host and queue-instance levels, consumable capacities with their
bookings, parallel environments, and the ``-l`` requests of a category.

Levels: ``global`` (no object, ``object_key`` 0), ``host`` (a worker) and
``queue_instance``. Values are kept as written (``text``) and normalised for SQL: numbers
in base units (bytes, seconds, 0/1) in ``number``; strings in ``string``, lower-cased for
the case-insensitive types CSTRING and HOST.
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base

LEVELS = ("global", "host", "queue_instance")
_LEVEL_CHECK = "level IN ('global', 'host', 'queue_instance')"
_OBJECT_CHECK = (
    "(level = 'global' AND worker_id IS NULL AND queue_instance_id IS NULL AND object_key = 0)"
    " OR (level = 'host' AND worker_id IS NOT NULL AND queue_instance_id IS NULL"
    " AND object_key = worker_id)"
    " OR (level = 'queue_instance' AND worker_id IS NOT NULL AND queue_instance_id IS NOT NULL"
    " AND object_key = queue_instance_id)"
)
#: A mapped_column sort_order below the default 0, for mixin columns that come first.
_FIRST = -1


class Attribute(Base):
    """One complex attribute (a ``qconf -sc`` row). ``builtin`` rows come from the 6.2u5
    default table seeded by the migration: they cannot be deleted and keep their type."""

    __tablename__ = "attributes"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    shortcut: Mapped[str] = mapped_column(String(255), unique=True)
    type: Mapped[str] = mapped_column(String(16))
    relop: Mapped[str] = mapped_column(String(8))
    requestable: Mapped[str] = mapped_column(String(8))
    consumable: Mapped[str] = mapped_column(String(8))
    default: Mapped[str] = mapped_column(Text)
    #: The default in base units for numeric types (NULL for strings), for SQL checks.
    default_number: Mapped[float | None] = mapped_column(Float, default=None)
    urgency: Mapped[float] = mapped_column(Float, default=0.0)
    builtin: Mapped[bool] = mapped_column(Boolean, default=False)


class _AttributeAtObject:
    """The columns that place a row of one attribute at one object: the level, and the
    worker or queue instance it names (``object_key`` repeats that id, 0 at the global
    level, so one unique key covers every level). Values and consumables share them.

    ``sort_order`` keeps these columns first, where the migrations put them: a mixin's
    columns would otherwise follow the class's own."""

    id: Mapped[int] = mapped_column(primary_key=True, sort_order=_FIRST)
    attribute_id: Mapped[int] = mapped_column(
        ForeignKey("attributes.id", ondelete="RESTRICT"), sort_order=_FIRST
    )
    level: Mapped[str] = mapped_column(String(16), sort_order=_FIRST)
    object_key: Mapped[int] = mapped_column(Integer, default=0, sort_order=_FIRST)
    worker_id: Mapped[int | None] = mapped_column(
        ForeignKey("workers.id", ondelete="CASCADE"), default=None, sort_order=_FIRST
    )
    queue_instance_id: Mapped[int | None] = mapped_column(
        ForeignKey("queue_instances.id", ondelete="CASCADE"),
        default=None,
        index=True,
        sort_order=_FIRST,
    )


class AttributeValue(_AttributeAtObject, Base):
    """A value of an attribute at one object: ``fixed`` (``complex_values``; for a
    consumable its capacity), ``load`` (a load value) or ``builtin`` (a queue instance's
    built-in attribute such as ``qname`` or ``h_rt``).

    ``source`` says who wrote the row: ``admin`` (every fixed and built-in value, and load
    values set through ``PUT /v1/values/...``) or ``report`` (the worker's own load report,
    ``PUT /v1/workers/{name}/load``). Each replaces only its own rows, so a report never
    erases what an administrator set; an admin's load value of an attribute hides the
    reported one at the same object (docs/notations/gridengine.md).

    ``effective`` is False for a row that matching does not see: a reported load value an
    admin's load value hides, and for relops ``==``/``!=`` every row but the first of
    fixed, builtin, admin load, reported load (gridengine.md); for the other relops every
    other row counts, and checking each is the same as checking the most restrictive one.
    """

    __tablename__ = "attribute_values"
    __table_args__ = (
        UniqueConstraint("attribute_id", "level", "object_key", "kind", "source"),
        CheckConstraint(_LEVEL_CHECK, name="level_known"),
        CheckConstraint("kind IN ('fixed', 'load', 'builtin')", name="kind_known"),
        CheckConstraint("source IN ('admin', 'report')", name="source_known"),
        # Only load values are reported; the rest is configuration.
        CheckConstraint("source = 'admin' OR kind = 'load'", name="only_loads_reported"),
        CheckConstraint(_OBJECT_CHECK, name="object_matches_level"),
        Index("ix_attribute_values_object", "level", "object_key", "attribute_id"),
        Index("ix_attribute_values_worker", "worker_id"),
    )

    kind: Mapped[str] = mapped_column(String(8))
    text: Mapped[str] = mapped_column(Text)
    number: Mapped[float | None] = mapped_column(Float, default=None)
    string: Mapped[str | None] = mapped_column(Text, default=None)
    effective: Mapped[bool] = mapped_column(Boolean, default=True)
    source: Mapped[str] = mapped_column(String(8), default="admin", server_default="admin")


class ConsumableUsage(_AttributeAtObject, Base):
    """Capacity and current booking of a consumable at one object (global, host, queue
    instance). A queue instance's ``slots`` live on ``queue_instances`` instead. EXCL
    attributes count exclusive users in ``used`` and the others in ``used_nonexclusive``."""

    __tablename__ = "consumable_usage"
    __table_args__ = (
        UniqueConstraint("attribute_id", "level", "object_key"),
        CheckConstraint(_LEVEL_CHECK, name="level_known"),
        CheckConstraint(_OBJECT_CHECK, name="object_matches_level"),
        CheckConstraint("capacity >= 0", name="capacity_not_negative"),
        CheckConstraint("used >= 0 AND used <= capacity", name="used_within_capacity"),
        CheckConstraint("used_nonexclusive >= 0", name="nonexclusive_not_negative"),
        Index("ix_consumable_usage_worker", "worker_id"),
    )

    capacity: Mapped[float] = mapped_column(Float)
    used: Mapped[float] = mapped_column(Float, default=0.0)
    used_nonexclusive: Mapped[float] = mapped_column(Float, default=0.0)


class JobBooking(Base):
    """An amount of a consumable a running job holds; subtracted again when it ends."""

    __tablename__ = "job_bookings"
    __table_args__ = (CheckConstraint("amount >= 0", name="amount_not_negative"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    usage_id: Mapped[int] = mapped_column(
        ForeignKey("consumable_usage.id", ondelete="RESTRICT"), index=True
    )
    amount: Mapped[float] = mapped_column(Float)
    #: True for the implicit non-exclusive use of an EXCL attribute.
    nonexclusive: Mapped[bool] = mapped_column(Boolean, default=False)


class ParallelEnvironment(Base):
    """A Grid Engine PE: how a parallel job's slots spread over hosts (``$pe_slots``,
    ``$fill_up``, ``$round_robin`` or a fixed number per host) and its slot limit."""

    __tablename__ = "parallel_environments"
    __table_args__ = (CheckConstraint("slots >= 0", name="slots_not_negative"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    allocation_rule: Mapped[str] = mapped_column(String(32))
    slots: Mapped[int] = mapped_column(Integer, default=999_999)


class CategoryRequest(Base):
    """One ``-l`` request of a category, hard or soft, normalised like attribute values.
    ``regex`` holds a string request compiled for SQL (app/notations/gridengine/string_regex.py)."""

    __tablename__ = "category_requests"
    __table_args__ = (
        UniqueConstraint("category_id", "attribute_id", "soft"),
        Index("ix_category_requests_attribute", "attribute_id", "soft"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    category_id: Mapped[int] = mapped_column(ForeignKey("categories.id", ondelete="CASCADE"))
    attribute_id: Mapped[int] = mapped_column(ForeignKey("attributes.id", ondelete="RESTRICT"))
    soft: Mapped[bool] = mapped_column(Boolean)
    text: Mapped[str] = mapped_column(Text)
    number: Mapped[float | None] = mapped_column(Float, default=None)
    regex: Mapped[str | None] = mapped_column(Text, default=None)


#: The lists of a category's queue references: ``-q``, ``-masterq`` and ``-soft -q``.
QUEUE_LISTS = ("hard", "master", "soft")


class CategoryQueueRef(Base):
    """One item of a category's ``-q``, ``-masterq`` or ``-soft -q`` list
    (app/notations/gridengine/queue_lists.py): a cluster queue pattern and an optional
    host pattern, each as given and compiled for SQL like a string request (the host one
    for a lower-cased host name)."""

    __tablename__ = "category_queue_refs"
    __table_args__ = (
        Index("ix_category_queue_refs_category", "category_id", "list"),
        CheckConstraint("list IN ('hard', 'master', 'soft')", name="list_known"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    category_id: Mapped[int] = mapped_column(ForeignKey("categories.id", ondelete="CASCADE"))
    list: Mapped[str] = mapped_column(String(8))
    position: Mapped[int] = mapped_column(Integer)
    queue_text: Mapped[str] = mapped_column(Text)
    queue_regex: Mapped[str] = mapped_column(Text)
    host_text: Mapped[str | None] = mapped_column(Text, default=None)
    host_regex: Mapped[str | None] = mapped_column(Text, default=None)
