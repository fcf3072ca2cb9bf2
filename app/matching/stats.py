"""Figures about the database for /metrics: jobs and workers by state, slots and
consumables booked and in total."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from app.db.models import (
    Attribute,
    ConsumableUsage,
    Job,
    JobState,
    QueueInstance,
    Worker,
    WorkerState,
)

#: The enumeration of a state column (a job's, a worker's).
StateT = TypeVar("StateT", bound=enum.StrEnum)


@dataclass(frozen=True)
class ConsumableFigures:
    """One consumable at one level (global, host or queue instance), summed over the
    objects of that level: what they hold in total and what running jobs booked."""

    name: str
    level: str
    capacity: float
    booked: float


@dataclass(frozen=True)
class Stats:
    jobs_by_state: dict[str, int]
    workers_by_state: dict[str, int]
    slots_total: int
    slots_booked: int
    consumables: list[ConsumableFigures]


def count_by_state(
    session: Session,
    column: InstrumentedAttribute[StateT],
    states: type[StateT],
    *conditions: ColumnElement[bool],
) -> dict[str, int]:
    """How many rows (those meeting ``conditions``) are in each state of ``column``, by
    the state's value; every state is there, 0 where no row is in it, so an answer names
    the same states whatever the data. One aggregate query."""
    counts = {state.value: 0 for state in states}
    query = select(column, func.count()).where(*conditions).group_by(column)
    for state, count in session.execute(query):
        counts[state.value] = count
    return counts


def collect(session: Session) -> Stats:
    """Four aggregate queries, whatever the size of the cluster (one row per state or
    consumable and level)."""
    jobs = count_by_state(session, Job.state, JobState)
    workers = count_by_state(session, Worker.state, WorkerState)
    total, booked = session.execute(
        select(
            func.coalesce(func.sum(QueueInstance.slots), 0),
            func.coalesce(func.sum(QueueInstance.used_slots), 0),
        )
    ).one()
    consumables = [
        ConsumableFigures(name, level, float(capacity), float(used))
        for name, level, capacity, used in session.execute(
            select(
                Attribute.name,
                ConsumableUsage.level,
                func.sum(ConsumableUsage.capacity),
                func.sum(ConsumableUsage.used),
            )
            .join(Attribute, Attribute.id == ConsumableUsage.attribute_id)
            .group_by(Attribute.name, ConsumableUsage.level)
            .order_by(Attribute.name, ConsumableUsage.level)
        )
    ]
    return Stats(jobs, workers, int(total), int(booked), consumables)
