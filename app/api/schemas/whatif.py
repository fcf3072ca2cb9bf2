"""Bodies of ``POST /v1/whatif``: a change set to the live cluster, and what it would
change."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from app.api.schemas.common import MAX_ID
from app.api.schemas.jobs import CandidateOut, JobIn
from app.api.schemas.workers import WorkerIn, WorkerName, WorkerPatch
from app.db.models import JobState

#: The most items of one kind a body may hold whatever the settings say, so that pydantic
#: never reads an unbounded list; the configured limits (JOBMATCH_WHATIF_MAX_WORKERS and
#: JOBMATCH_WHATIF_MAX_JOBS) are checked below this.
MAX_ITEMS = 10_000


class WorkerChangeIn(WorkerPatch):
    """A change of some fields of the worker ``name``, as ``PATCH /v1/workers/{name}``
    takes it."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"name": "w1", "state": "draining", "reason": "kernel upgrade"},
                {"name": "w2", "slots": 4, "properties": ["ssd", "gpu"]},
            ]
        },
    )

    name: WorkerName


WHATIF_EXAMPLES: list[JsonValue] = [
    {
        "add_workers": [{"name": "w9", "resources": "language: ?java; java: ?11, ?12", "slots": 2}],
        "drain_workers": ["w1"],
        "add_jobs": [{"resources": "language: java; java: 12"}],
        "explain_job": 1,
    },
    {"remove_workers": ["node0"], "change_workers": [{"name": "w2", "slots": 8}]},
]


class WhatIfIn(BaseModel):
    """A change set. It is applied in this order, each item by the service of its own
    route: `add_workers` (as `POST /v1/workers`: an existing name is replaced whole),
    `change_workers` (as `PATCH /v1/workers/{name}`), `drain_workers` (state `draining`),
    `remove_workers` (as `DELETE /v1/workers/{name}?requeue=true`) and `add_jobs` (as
    `POST /v1/jobs`). Nothing is stored."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": WHATIF_EXAMPLES})

    add_workers: list[WorkerIn] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="workers to register (or replace), as POST /v1/workers takes them",
    )
    change_workers: list[WorkerChangeIn] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="changes of some fields of existing workers, as PATCH /v1/workers/{name} "
        "takes them, with the worker's `name`",
    )
    drain_workers: list[WorkerName] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="names of workers to drain (they finish what they run, get nothing new)",
    )
    remove_workers: list[WorkerName] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="names of workers to remove; the jobs they run go back to the queue",
    )
    add_jobs: list[JobIn] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="jobs to submit, as POST /v1/jobs takes them",
    )
    explain_job: int | None = Field(
        default=None,
        ge=1,
        le=MAX_ID,
        description="a waiting job whose candidates before and after the change are wanted",
    )


class AddedJobOut(BaseModel):
    index: int = Field(description="the job's place in `add_jobs`")
    id: int = Field(
        description="the id the submission got: provisional, a real submission may get another"
    )
    state: JobState = Field(description="`waiting`, or `failed` when no worker could run it")
    category_id: int = Field(description="the job's category")
    failure_reason: str | None = Field(description="why it failed at submission, if it did")


class CategoryCountsOut(BaseModel):
    category_id: int = Field(description="the category")
    waiting_before: int = Field(description="its waiting jobs before the change")
    waiting_after: int = Field(description="its waiting jobs after the change")
    runnable_before: int = Field(
        description="its waiting jobs some worker could take now, before the change"
    )
    runnable_after: int = Field(
        description="its waiting jobs some worker could take now, after the change"
    )


class FirstPullOut(BaseModel):
    worker: str = Field(description="a worker the change set adds or changes")
    job: int | None = Field(
        description="the job it would get if it pulled first after the change; null: none"
    )
    placed: bool = Field(description="whether that job is one the scheduler placed on it")


class CandidatesChangeOut(BaseModel):
    job: int = Field(description="the job named by `explain_job`")
    before: list[CandidateOut] = Field(description="its candidates before, best first")
    after: list[CandidateOut] = Field(description="its candidates after, best first")
    gained: list[str] = Field(description="workers that are candidates after and not before")
    lost: list[str] = Field(description="workers that were candidates before and not after")


class WhatIfOut(BaseModel):
    """What the change set would change. Computed by applying it in a savepoint that was
    rolled back: nothing was stored."""

    runnable_now: list[int] = Field(
        description="ids of waiting jobs some worker could take after the change and not "
        "before (added jobs included, by their provisional ids)"
    )
    no_longer_runnable: list[int] = Field(
        description="ids of waiting jobs some worker could take before the change and not after"
    )
    categories: list[CategoryCountsOut] = Field(
        description="every category with waiting jobs before or after, by id"
    )
    added_jobs: list[AddedJobOut] = Field(description="the jobs of `add_jobs`, in order")
    requeued: list[int] = Field(
        description="running jobs of removed workers that would go back to the queue"
    )
    first_pulls: list[FirstPullOut] = Field(
        description="for each worker added or changed (and not removed), its first pull"
    )
    explain_job: CandidatesChangeOut | None = Field(
        description="the candidates of `explain_job`, when it was given"
    )
    provisional_ids: bool = Field(
        default=True,
        description="always true: the ids of added jobs are the ones the submissions got "
        "before the rollback; real submissions may get others",
    )
