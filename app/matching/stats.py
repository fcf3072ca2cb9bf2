"""Figures about the database for /metrics: jobs by state, slots booked and free."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import Job, JobState, QueueInstance, Worker


@dataclass(frozen=True)
class Stats:
    jobs_by_state: dict[str, int]
    slots_total: int
    slots_booked: int
    workers: int


def collect(session: Session) -> Stats:
    by_state = {state.value: 0 for state in JobState}
    for state, count in session.execute(select(Job.state, func.count()).group_by(Job.state)):
        by_state[state.value] = count
    total, booked = session.execute(
        select(
            func.coalesce(func.sum(QueueInstance.slots), 0),
            func.coalesce(func.sum(QueueInstance.used_slots), 0),
        )
    ).one()
    workers = session.scalar(select(func.count()).select_from(Worker)) or 0
    return Stats(by_state, int(total), int(booked), int(workers))
