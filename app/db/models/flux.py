"""Flux notations as rows: worker properties and name parts, the leaves of a category's
RFC 31 constraint, and the vertices of its RFC 14 resources."""

from __future__ import annotations

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base


class WorkerProperty(Base):
    """A property of a worker, as RFC 31 ``properties`` constraints test them."""

    __tablename__ = "worker_properties"

    worker_id: Mapped[int] = mapped_column(
        ForeignKey("workers.id", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(255), primary_key=True)


class WorkerNamePart(Base):
    """One way to read a worker's name as ``prefix + digits + suffix`` (RFC 29).

    A hostlist run ``prefix[lo-hi]suffix`` with zero-pad ``width`` contains the name when
    some part has that prefix and suffix, ``lo <= number <= hi``, and ``digits`` equals the
    number padded to ``width`` (``digits_len = max(width, natural_len)``). Every substring of
    every digit run of the name is stored, so the test is exact and needs no string
    functions in SQL; names are short, so this is a few rows per worker.
    """

    __tablename__ = "worker_name_parts"
    __table_args__ = (Index("ix_worker_name_parts_lookup", "prefix", "suffix", "number"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    worker_id: Mapped[int] = mapped_column(ForeignKey("workers.id", ondelete="CASCADE"), index=True)
    prefix: Mapped[str] = mapped_column(Text)
    number: Mapped[int] = mapped_column(BigInteger)
    digits_len: Mapped[int] = mapped_column(Integer)
    #: Digits of the number without leading zeros (1 for zero).
    natural_len: Mapped[int] = mapped_column(Integer)
    suffix: Mapped[str] = mapped_column(Text)


class ConstraintProperty(Base):
    """A ``properties`` leaf value of a category's constraint; ``negated`` for ``^name``."""

    __tablename__ = "constraint_properties"

    id: Mapped[int] = mapped_column(primary_key=True)
    category_id: Mapped[int] = mapped_column(ForeignKey("categories.id", ondelete="CASCADE"))
    leaf: Mapped[int]
    name: Mapped[str] = mapped_column(String(255))
    negated: Mapped[bool]

    __table_args__ = (Index("ix_constraint_properties_leaf", "category_id", "leaf"),)


class ConstraintHostRun(Base):
    """One run of a ``hostlist`` leaf: a literal name (``lo`` NULL, name in ``prefix``) or
    ``prefix[lo-hi]suffix`` zero-padded to ``width``."""

    __tablename__ = "constraint_host_runs"

    id: Mapped[int] = mapped_column(primary_key=True)
    category_id: Mapped[int] = mapped_column(ForeignKey("categories.id", ondelete="CASCADE"))
    leaf: Mapped[int]
    prefix: Mapped[str] = mapped_column(Text)
    lo: Mapped[int | None] = mapped_column(BigInteger)
    hi: Mapped[int] = mapped_column(BigInteger)
    width: Mapped[int]
    suffix: Mapped[str] = mapped_column(Text)

    __table_args__ = (Index("ix_constraint_host_runs_leaf", "category_id", "leaf"),)


class ConstraintRankRun(Base):
    """One run ``lo..hi`` of a ``ranks`` leaf's idset."""

    __tablename__ = "constraint_rank_runs"

    id: Mapped[int] = mapped_column(primary_key=True)
    category_id: Mapped[int] = mapped_column(ForeignKey("categories.id", ondelete="CASCADE"))
    leaf: Mapped[int]
    lo: Mapped[int] = mapped_column(BigInteger)
    hi: Mapped[int] = mapped_column(BigInteger)

    __table_args__ = (Index("ix_constraint_rank_runs_leaf", "category_id", "leaf"),)


class ResourceVertex(Base):
    """One vertex of a category's RFC 14 resources list, in depth-first order."""

    __tablename__ = "category_resource_vertices"

    id: Mapped[int] = mapped_column(primary_key=True)
    category_id: Mapped[int] = mapped_column(
        ForeignKey("categories.id", ondelete="CASCADE"), index=True
    )
    position: Mapped[int]
    parent_position: Mapped[int | None]
    depth: Mapped[int]
    type: Mapped[str] = mapped_column(String(255))
    #: The count as canonical JSON: an integer, an RFC 45 range dict or an idset string.
    count: Mapped[str] = mapped_column(Text)
    #: The smallest acceptable count, for coarse SQL filtering.
    min_count: Mapped[int] = mapped_column(BigInteger)
    label: Mapped[str | None] = mapped_column(String(255))
    exclusive: Mapped[bool | None]
    unit: Mapped[str | None] = mapped_column(String(64))
