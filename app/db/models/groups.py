"""Grid Engine host groups, user access lists and projects as rows
(docs/notations/gridengine.md#host-groups-access-lists-and-projects).

A host group keeps its members as given (hosts and ``@sub`` groups, in list order); the
hosts a group finally holds are resolved in Python (app/notations/gridengine/groups.py)
when a cluster state is loaded, so that a change to a sub-group counts at once for every
group that contains it. An access list keeps its member users; a project is a name a job
may give (``qsub -P``).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, utcnow


class HostGroup(Base):
    """A host group (``qconf -ahgrp``); ``name`` includes its leading ``@``."""

    __tablename__ = "host_groups"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(256), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class HostGroupMember(Base):
    """One entry of a host group's ``hostlist``: a host name or ``@group`` (a sub-group)."""

    __tablename__ = "host_group_members"
    __table_args__ = (UniqueConstraint("group_id", "member"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    group_id: Mapped[int] = mapped_column(ForeignKey("host_groups.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    member: Mapped[str] = mapped_column(String(256))


class AccessList(Base):
    """A user access list (``qconf -au user list``), named without ``@``."""

    __tablename__ = "access_lists"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class AccessListMember(Base):
    """One user of an access list's ``entries``."""

    __tablename__ = "access_list_members"
    __table_args__ = (UniqueConstraint("list_id", "member"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    list_id: Mapped[int] = mapped_column(ForeignKey("access_lists.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    member: Mapped[str] = mapped_column(String(255))


class Project(Base):
    """A project (``qconf -aprj``): a job naming it with ``qsub -P`` is accepted."""

    __tablename__ = "projects"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
