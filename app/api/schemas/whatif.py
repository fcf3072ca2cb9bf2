"""Bodies of ``POST /v1/whatif``: a change set to the live cluster, and what it would
change."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from app.api.schemas.common import MAX_ID, BodyInt, Name
from app.api.schemas.gridengine import ValuesIn
from app.api.schemas.jobs import CandidateOut, JobIn
from app.api.schemas.quotas import QuotaSetIn
from app.api.schemas.shares import GroupWeightIn, WeightIn
from app.api.schemas.workers import WorkerIn, WorkerName, WorkerPatch
from app.db.models import JobState

#: The most items of one kind a body may hold whatever the settings say, so that pydantic
#: never reads an unbounded list; the configured limits (JOBMATCH_WHATIF_MAX_WORKERS and
#: JOBMATCH_WHATIF_MAX_JOBS) are checked below this.
MAX_ITEMS = 10_000
#: The most Grid Engine value changes and quota set changes of each kind: each may
#: recompute the misfit rows of every worker (a global value) or recount the running jobs
#: (a quota set), so their number is bounded far below the other items'.
MAX_ADMIN_ITEMS = 100


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


QuotaSetName = Annotated[Name, Field(description="a resource quota set's name")]


class ValuesChangeIn(ValuesIn):
    """The values of one Grid Engine object, as ``PUT /v1/values/...`` takes them: the
    global host, a host (`host`), or a queue instance (`queue` at `host`)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"level": "global", "complex_values": {"lic": "8"}},
                {"level": "host", "host": "w1", "complex_values": {"h_vmem": "16G"}},
                {"level": "queue_instance", "queue": "all.q", "host": "w1", "attributes": {}},
            ]
        },
    )

    level: Literal["global", "host", "queue_instance"] = Field(
        description="which object: `global`, `host` or `queue_instance`"
    )
    host: Name | None = Field(
        default=None, description="the host (a worker's name) of a `host` or `queue_instance`"
    )
    queue: Name | None = Field(default=None, description="the queue of a `queue_instance`")

    @model_validator(mode="after")
    def _names_match_the_level(self) -> Self:
        wants_host = self.level != "global"
        wants_queue = self.level == "queue_instance"
        if wants_host != (self.host is not None):
            raise ValueError(
                f"level {self.level!r} " + ("needs a `host`" if wants_host else "takes no `host`")
            )
        if wants_queue != (self.queue is not None):
            raise ValueError(
                f"level {self.level!r} "
                + ("needs a `queue`" if wants_queue else "takes no `queue`")
            )
        return self


def _items(most: int, description: str) -> Any:
    """A list field of the change set: empty when left out, at most ``most`` items."""
    return Field(default_factory=list, max_length=most, description=description)


WHATIF_EXAMPLES: list[JsonValue] = [
    {
        "add_workers": [{"name": "w9", "resources": "language: ?java; java: ?11, ?12", "slots": 2}],
        "drain_workers": ["w1"],
        "add_jobs": [{"resources": "language: java; java: 12"}],
        "explain_job": 1,
    },
    {"remove_workers": ["node0"], "change_workers": [{"name": "w2", "slots": 8}]},
    {
        "set_values": [{"level": "global", "complex_values": {"lic": "8"}}],
        "add_quota_sets": [
            {"text": "{\n name max_u_slots\n enabled TRUE\n limit users {*} to slots=4\n}\n"}
        ],
    },
]


class WeightChangeIn(WeightIn):
    """A submitter's fair-share weight and, when given, its group (`null`: none), as `PUT
    /v1/shares/{submitter}` sets them."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"submitter": "alice", "weight": 2},
                {"submitter": "bob", "weight": 1, "group": "course-a"},
            ]
        },
    )

    submitter: Name = Field(description="the submitter")


class GroupWeightChangeIn(GroupWeightIn):
    """A group's weight, as `PUT /v1/groups/{name}` sets it (the group is made if new)."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"group": "course-a", "weight": 2}]}
    )

    group: Name = Field(description="the group of submitters")


class WhatIfIn(BaseModel):
    """A change set. It is applied in this order, each item by the service of its own
    route: `add_workers` (as `POST /v1/workers?replace=true`: an existing name is replaced
    whole), `change_workers` (as `PATCH /v1/workers/{name}`), `set_values` (as `PUT
    /v1/values/...`), `add_quota_sets` (as `POST /v1/quotas`), `replace_quota_sets` (as
    `PUT /v1/quotas/{name}`, the set named in the text), `remove_quota_sets` (as `DELETE
    /v1/quotas/{name}`), `set_weights` (as `PUT /v1/shares/{submitter}`, its `group`
    included), `set_group_weights` (as `PUT /v1/groups/{name}`), `drain_workers` (state
    `draining`),
    `remove_workers` (as `DELETE /v1/workers/{name}?requeue=true`) and `add_jobs` (as
    `POST /v1/jobs`). Nothing is stored."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": WHATIF_EXAMPLES})

    add_workers: list[WorkerIn] = _items(
        MAX_ITEMS,
        "workers to register (or replace), as POST /v1/workers takes them",
    )
    change_workers: list[WorkerChangeIn] = _items(
        MAX_ITEMS,
        "changes of some fields of existing workers, as PATCH /v1/workers/{name} "
        "takes them, with the worker's `name`",
    )
    set_values: list[ValuesChangeIn] = _items(
        MAX_ADMIN_ITEMS,
        "Grid Engine values of the global host, hosts or queue instances, as "
        "PUT /v1/values/... takes them, with the object's `level`, `host` and `queue`",
    )
    add_quota_sets: list[QuotaSetIn] = _items(
        MAX_ADMIN_ITEMS,
        "resource quota sets to add, as POST /v1/quotas takes them",
    )
    replace_quota_sets: list[QuotaSetIn] = _items(
        MAX_ADMIN_ITEMS,
        "new definitions of existing resource quota sets (each names its set "
        "in its text), as PUT /v1/quotas/{name} takes them",
    )
    remove_quota_sets: list[QuotaSetName] = _items(
        MAX_ADMIN_ITEMS,
        "names of resource quota sets to remove",
    )
    set_weights: list[WeightChangeIn] = _items(
        MAX_ADMIN_ITEMS,
        "fair-share weights of submitters and, with `group`, their groups (`null`: "
        "none), as PUT /v1/shares/{submitter} sets them",
    )
    set_group_weights: list[GroupWeightChangeIn] = _items(
        MAX_ADMIN_ITEMS,
        "weights of groups of submitters (a group is made if new), as PUT "
        "/v1/groups/{name} sets them",
    )
    drain_workers: list[WorkerName] = _items(
        MAX_ITEMS,
        "names of workers to drain (they finish what they run, get nothing new)",
    )
    remove_workers: list[WorkerName] = _items(
        MAX_ITEMS,
        "names of workers to remove; the jobs they run go back to the queue",
    )
    add_jobs: list[JobIn] = _items(
        MAX_ITEMS,
        "jobs to submit, as POST /v1/jobs takes them",
    )
    explain_job: BodyInt | None = Field(
        default=None,
        ge=1,
        le=MAX_ID,
        description="a waiting job whose candidates before and after the change are wanted",
    )
    pull_workers: list[WorkerName] = _items(
        MAX_ITEMS,
        "workers whose first pull the answer shows, beside those the change set adds or "
        "changes (who would go first after a change of weights)",
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
