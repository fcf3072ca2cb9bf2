"""Bodies of the category routes: what a category asks for, its jobs, and its fit."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from app.api.schemas.common import WorkerNameField, WorkerStateField


class CategoryRequestOut(BaseModel):
    """What the jobs of the category ask for, per family in its own notation; null where
    they ask nothing of that family."""

    resources: str = Field(description="Momotor tags, canonical text (empty for none)")
    slots: int = Field(description="slots on one queue instance")
    constraint: Any = Field(description="RFC 31 constraint (JSON), also for RFC 35 text")
    jobspec: Any = Field(description="RFC 14 resources list (JSON), also for an RFC 46 shape")
    hard: str | None = Field(description="Grid Engine hard `-l` requests, canonical")
    soft: str | None = Field(description="Grid Engine soft `-l` requests, canonical")
    pe: str | None = Field(description="Grid Engine parallel environment")
    pe_slots: str | None = Field(description="the parallel environment's slot range, `min-max`")
    task: str | None = Field(description="debusine task name")


class CategoryOut(BaseModel):
    id: int = Field(description="the category's id (a job's `category_id`)")
    created_at: datetime = Field(description="when a job first asked for this request")
    request: CategoryRequestOut = Field(
        description="what the category's jobs ask for, per family in its notation"
    )
    waiting: int = Field(description="jobs of the category that wait")
    running: int = Field(description="jobs of the category that run")
    fitting_workers: int = Field(
        description="workers that fit the category (static fit, whatever their state)"
    )


class WorkerFitOut(BaseModel):
    """One worker against the category, as the SQL view `v_category_fit` has it."""

    worker: WorkerNameField
    state: WorkerStateField
    fits: bool = Field(description="no clause rules the worker out (static fit)")
    reason: str | None = Field(
        description="the reason code of the first failing clause (`category_misfits.reason`)"
    )
    message: str | None = Field(description="what the reason code means")


class CategoryDetailOut(CategoryOut):
    workers: list[WorkerFitOut] = Field(description="every worker, by name")
