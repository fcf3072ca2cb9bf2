"""The parts of a job category's answer (``GET /v1/categories``) that the server builds and
the client reads as they are: what the category's jobs ask for, and one worker's fit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.wire.states import WorkerState


@dataclass(frozen=True)
class CategoryRequest:
    """What the jobs of a category ask for, per family in its own notation: Momotor tags
    (canonical text) and slots; an RFC 31 constraint and an RFC 14 jobspec (JSON); Grid
    Engine hard and soft ``-l`` lists and a parallel environment with its slot range; a
    debusine task. None where the jobs ask nothing of that family."""

    resources: str
    slots: int
    constraint: Any
    jobspec: Any
    hard: str | None
    soft: str | None
    pe: str | None
    pe_slots: str | None
    task: str | None


@dataclass(frozen=True)
class WorkerFit:
    """One worker against one category: it fits, or the reason code of the first failing
    clause (as ``v_category_fit`` has it) and what that code means."""

    worker: str
    state: WorkerState
    fits: bool
    reason: str | None
    message: str | None
