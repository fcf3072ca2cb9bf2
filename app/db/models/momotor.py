"""Momotor's tables: the tag rows of a worker's definition and of a category's request,
normalised as (group, value, mode) so that the misfit predicates can look them up."""

from __future__ import annotations

from sqlalchemy import ForeignKey, Index, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.models.enums import TagMode, string_enum


class _Tag:
    """One tag as (group, value, mode), the columns both sides' tag rows end with."""

    group_name: Mapped[str] = mapped_column(Text)
    value: Mapped[str] = mapped_column(Text)
    mode: Mapped[TagMode] = mapped_column(string_enum(TagMode, "tag_mode", length=1))


class WorkerTag(_Tag, Base):
    """One Momotor tag of a worker's definition: group, value and mode."""

    __tablename__ = "worker_tags"
    __table_args__ = (
        # The misfit predicates look tags up by (group, value) for one worker.
        Index("ix_worker_tags_lookup", "worker_id", "group_name", "value", "mode"),
        # Which workers name this tag: a new category's tag clauses, counted once per
        # statement (app/matching/momotor/sql.py; issue 23).
        Index("ix_worker_tags_tag", "group_name", "value", "mode", "worker_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    worker_id: Mapped[int] = mapped_column(ForeignKey("workers.id", ondelete="CASCADE"))


class CategoryTag(_Tag, Base):
    """One Momotor tag of a category's request."""

    __tablename__ = "category_tags"
    __table_args__ = (
        Index("ix_category_tags_lookup", "category_id", "group_name", "value", "mode"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    category_id: Mapped[int] = mapped_column(ForeignKey("categories.id", ondelete="CASCADE"))
