"""Bodies of the demand routes (issue 40): worker templates and ``GET /v1/demand``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.api.schemas.categories import CategoryRequestOut
from app.api.schemas.common import BodyFloat, BodyInt
from app.api.schemas.workers import Inventory, Properties, QueueIn, Queues, Resources, Slots
from app.db.models import WorkerState


class TemplateIn(BaseModel):
    """A worker template: a worker body as `POST /v1/workers` takes it, without a name (or
    a rank: a template stands for many workers), with what one new worker of it costs and
    how many an autoscaler may create."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"resources": "language: ?java; java: ?17", "slots": 4, "cost": 1.0},
                {"inventory": "node/[core=8]", "slots": 8, "cost": 2.5, "max_count": 10},
            ]
        },
    )

    resources: Resources = ""
    slots: Slots = 1
    state: WorkerState = Field(
        default=WorkerState.ACTIVE, description="the state its new workers are registered in"
    )
    queues: Queues | None = Field(
        default=None, description="the worker's queue instances; without them one `default` queue"
    )
    properties: Properties = Field(default_factory=list)
    inventory: Inventory | None = Field(
        default=None, description="the worker's resources as a shape or an RFC 14 resources list"
    )
    cost: BodyFloat = Field(
        default=1.0, ge=0, le=1e12, description="what one new worker of it costs (any unit)"
    )
    max_count: BodyInt | None = Field(
        default=None,
        ge=0,
        le=1_000_000,
        description="how many new workers of it an autoscaler may create; null: no limit",
    )

    def worker_body(self) -> dict[str, Any]:
        """The worker body, as stored (JSON)."""
        body = self.model_dump(mode="json", exclude={"cost", "max_count"}, exclude_none=True)
        return body


class TemplateOut(BaseModel):
    name: str = Field(description="the template's name")
    resources: str = Field(description="Momotor resource definition of its workers")
    slots: int = Field(description="slots of the `default` queue (no `queues`)")
    state: WorkerState = Field(description="the state its new workers are registered in")
    queues: list[QueueIn] | None = Field(description="its workers' queue instances")
    properties: list[str] = Field(description="RFC 31 properties of its workers")
    inventory: Any = Field(description="its workers' inventory (shape or RFC 14), or null")
    cost: float = Field(description="what one new worker of it costs")
    max_count: int | None = Field(description="how many an autoscaler may create; null: any")


class NeedOut(BaseModel):
    slots: int = Field(description="slots that would start every waiting job at once")
    nodes: int = Field(description="nodes (a job on several nodes counts each)")
    vertices: dict[str, int] = Field(
        description="inventory vertices by `type` or `type (unit)`, over all the nodes"
    )
    consumables: dict[str, float] = Field(
        description="Grid Engine consumables the jobs request (`-l`), by attribute: a "
        "per-slot amount times the slots, a per-job amount once, an exclusive one the "
        "objects held"
    )


class CategoryDemandOut(BaseModel):
    category_id: int = Field(description="the category (a job's `category_id`)")
    waiting: int = Field(description="its waiting jobs")
    oldest_age: float = Field(description="seconds since its oldest waiting job was submitted")
    request: CategoryRequestOut = Field(description="what its jobs ask for, in their notations")
    answer: str = Field(
        description="why its jobs wait: `never` (no registered worker, or set of workers, "
        "could ever hold one), `capacity` (fitting workers are busy or not taking work), "
        "`policy` (a quota, a limit or a rule of the pull holds them) or `ready` (a pull "
        "or an allocation now would start one)"
    )
    reasons: list[str] = Field(description="why, in words (what is missing, who is busy)")
    need: NeedOut = Field(description="what starting all of them at once would take")
    template: str | None = Field(
        description="the worker template whose new worker would run them, when one would"
    )


class TemplateDemandOut(BaseModel):
    template: str = Field(description="the template")
    workers: int = Field(description="new workers of it that would start `jobs`")
    jobs: int = Field(description="waiting jobs they would start")
    categories: list[int] = Field(description="the categories of those jobs")
    cost: float = Field(description="what the new workers cost in all")


class MixItemOut(BaseModel):
    template: str = Field(description="the template")
    workers: int = Field(description="new workers of it in the mix")
    jobs: int = Field(description="waiting jobs they would start")
    categories: list[int] = Field(description="the categories of those jobs")


class UnrunnableOut(BaseModel):
    category_id: int = Field(description="the category")
    jobs: int = Field(description="its waiting jobs that the mix would not start")
    beyond_limits: bool = Field(
        description="true: a template could run them, but its `max_count` is used up"
    )


class SuggestionOut(BaseModel):
    templates: list[TemplateDemandOut] = Field(description="each template alone")
    mix: list[MixItemOut] = Field(
        description="the suggested new workers (least total cost, then fewest workers)"
    )
    cost: float = Field(description="the mix's cost")
    workers: int = Field(description="the mix's new workers")
    starts: int = Field(description="waiting jobs the mix would start")
    unrunnable: list[UnrunnableOut] = Field(
        description="waiting jobs that today's workers cannot start now and the mix would not"
    )


class DemandOut(BaseModel):
    items: list[CategoryDemandOut] = Field(description="this page's categories, by id")
    limit: int = Field(description="the page size asked for (the `limit` parameter)")
    offset: int = Field(description="how many categories were skipped (the `offset` parameter)")
    next_offset: int | None = Field(description="offset of the next page; null on the last one")
    categories: int = Field(description="categories with waiting jobs, in all")
    jobs: dict[str, int] = Field(description="waiting jobs per answer, over every category")
    category_counts: dict[str, int] = Field(description="categories per answer")
    suggestion: SuggestionOut | None = Field(
        description="with `templates`: what new workers of them would start"
    )
