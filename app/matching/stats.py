"""Figures about the database for /metrics: jobs and workers by state, slots and
consumables booked and in total."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import (
    Attribute,
    ConsumableUsage,
    Job,
    JobState,
    QueueInstance,
    Worker,
    WorkerState,
)


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


def collect(session: Session) -> Stats:
    """Four aggregate queries, whatever the size of the cluster (one row per state or
    consumable and level)."""
    jobs = {state.value: 0 for state in JobState}
    for state, count in session.execute(select(Job.state, func.count()).group_by(Job.state)):
        jobs[state.value] = count
    workers = {state.value: 0 for state in WorkerState}
    for worker_state, count in session.execute(
        select(Worker.state, func.count()).group_by(Worker.state)
    ):
        workers[worker_state.value] = count
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
