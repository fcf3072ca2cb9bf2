"""The parts of a what-if's answer (``POST /v1/whatif``) that the server builds and the
client reads as they are: a job of ``add_jobs``, a category's counts before and after the
change, and the job a worker would pull first."""

from __future__ import annotations

from dataclasses import dataclass

from app.wire.states import JobState


@dataclass(frozen=True)
class AddedJob:
    """One of ``add_jobs``, as its submission stored it in the what-if's savepoint."""

    index: int
    #: Provisional: the id the submission got before the rollback.
    id: int
    state: JobState
    category_id: int
    failure_reason: str | None


@dataclass(frozen=True)
class CategoryCounts:
    """A category's waiting jobs and how many of them some worker could take now, before
    and after the change."""

    category_id: int
    waiting_before: int
    waiting_after: int
    runnable_before: int
    runnable_after: int


@dataclass(frozen=True)
class FirstPull:
    """The job a worker of the change set would get if it pulled first after the change
    (None: nothing); ``placed`` when it is a job the scheduler had placed on it."""

    worker: str
    job: int | None
    placed: bool
