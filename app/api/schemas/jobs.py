"""Bodies of the job routes: submission, reads, candidates, explanations, history,
allocation, finish and return."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.api.schemas.common import Text
from app.db.models import JobEventKind, JobState, WorkerState
from app.matching.submission import JobSpec


class JobIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    resources: Text = Field(
        default="",
        max_length=65_536,
        description="Momotor resource definition of what the job needs",
    )
    priority: int = Field(
        default=0,
        ge=-1_000_000,
        le=1_000_000,
        description="higher runs first; equal priorities run oldest first",
    )
    slots: int = Field(default=1, ge=1, le=1_000_000)
    constraint: dict[str, Any] | None = Field(
        default=None, description='RFC 31 constraint, e.g. {"properties": ["ssd"]}'
    )
    requires: Text | None = Field(
        default=None,
        max_length=65_536,
        description="RFC 35 text compiled as flux --requires, e.g. `host:node[0-3] ssd`; "
        "an alternative to constraint",
    )
    shape: Text | None = Field(
        default=None, max_length=65_536, description="RFC 46 shape, e.g. `slot=4/node`"
    )
    jobspec: list[Any] | None = Field(
        default=None,
        max_length=256,
        description="RFC 14 resources list (at most 256 top-level items); an alternative to shape",
    )
    task: Text | None = Field(
        default=None,
        max_length=255,
        description="a registered task type (GET /v1/tasks); its requirements, version and "
        "the workers' allow/deny lists then decide where the job may run",
    )
    command: list[str] | None = Field(
        default=None,
        max_length=4096,
        description='argv the worker agent runs, e.g. `["python3", "-c", "print(1)"]`',
    )
    timeout: int | None = Field(
        default=None, ge=1, le=7 * 24 * 3600, description="seconds the command may run"
    )
    hard: Text = Field(
        default="",
        max_length=65_536,
        description="Grid Engine hard -l list, e.g. h_vmem=2G,arch=lx*",
    )
    soft: Text = Field(default="", max_length=65_536, description="Grid Engine soft -l list")
    pe: Text | None = Field(default=None, max_length=255, description="parallel environment")
    pe_slots: Text | None = Field(
        default=None, max_length=64, description="slot range of the pe: n, lo-hi, -hi, lo-"
    )

    def spec(self) -> JobSpec:
        return JobSpec(
            resources=self.resources,
            priority=self.priority,
            slots=self.slots,
            constraint=self.constraint,
            requires=self.requires,
            shape=self.shape,
            jobspec=self.jobspec,
            task=self.task,
            command=self.command,
            timeout=self.timeout,
            hard=self.hard,
            soft=self.soft,
            pe=self.pe,
            pe_slots=self.pe_slots,
        )


class JobOut(BaseModel):
    id: int
    state: JobState
    priority: int
    slots: int
    category_id: int
    resources: str
    constraint: str | None = Field(description="the constraint as given (RFC 31 JSON or RFC 35)")
    constraint_syntax: str | None = Field(description="rfc31 or rfc35")
    shape: str | None
    jobspec: str | None = Field(description="the RFC 14 resources as given (JSON text)")
    task: str | None
    command: list[str] | None
    timeout: int | None
    hard: str | None
    soft: str | None
    pe: str | None
    pe_slots: str | None
    submitter: str
    worker: str | None
    failure_reason: str | None
    attempts: int = Field(description="times the job was dispatched")
    exit_code: int | None = Field(description="the command's exit status, as the agent reported")
    output: str | None = Field(description="the tail of the command's output")
    submitted_at: datetime
    started_at: datetime | None
    ended_at: datetime | None


class CandidateOut(BaseModel):
    """One eligible worker. ``strength`` is Momotor's match strength, lower is better:
    -Infinity (STRONGEST), -1.0 (STRONG), 0.0 (NEUTRAL), 1.0 (WEAK), Infinity (WEAKEST).
    Infinities are written as the JSON strings "-Infinity" and "Infinity"."""

    model_config = ConfigDict(ser_json_inf_nan="strings")

    worker: str
    strength: float
    strength_name: str
    free_slots: int
    state: WorkerState


class CandidatesOut(BaseModel):
    job: int | None = Field(description="the job, or null for a dry-run match")
    items: list[CandidateOut] = Field(description="eligible workers, best match first")


class ClauseOut(BaseModel):
    reason: str
    message: str
    group: str | None
    tag: str | None


class WorkerExplanationOut(BaseModel):
    """One worker against the job. ``eligible`` and ``can_run_now`` never contradict the
    clauses: the first clause's code is ``reason``, and for a worker that is not eligible
    it is the misfit code of ``v_category_fit``."""

    worker: str
    state: WorkerState
    eligible: bool = Field(
        description="static fit: no clause of the request rules the worker out "
        "(the misfit cache, `v_category_fit`, says it fits)"
    )
    can_run_now: bool | None = Field(
        description="dynamic fit of a waiting job: the worker would get it at its next pull "
        "were it the only waiting job (state active, free slots, free inventory, Grid "
        "Engine values of now); null for a job that does not wait"
    )
    reason: str | None = Field(
        description="the code of the first failing clause (static or dynamic); null when "
        "the worker can run the job now"
    )
    misfit_reason: str | None = Field(description="the reason code cached in SQL, if any")
    clauses: list[ClauseOut] = Field(
        description="the failing clauses, the first one's code in `reason`: every static "
        "clause of a worker that is not eligible, else the first dynamic one"
    )


class ExplainSummaryOut(BaseModel):
    """A waiting job's explanation in the style of HTCondor's `condor_q -better-analyze`."""

    workers: int = Field(description="workers looked at")
    eligible: int = Field(description="workers whose static fit admits the job")
    can_run_now: int = Field(description="workers that would take the job at their next pull")
    fit_but_busy: int = Field(
        description="eligible workers that cannot take it now (state, slots, inventory, "
        "Grid Engine values)"
    )
    first_failures: dict[str, int] = Field(
        description="per reason code, how many workers fail on it first"
    )
    suggestion: str | None = Field(
        description="the one change that would let the job run soonest, if there is one"
    )


class ShortfallOut(BaseModel):
    path: str = Field(description="the level of the request, e.g. slot/node/core")
    needed: int
    found: int = Field(description="the most found in one place")
    places: int = Field(description="how many places (vertices) were searched")
    workers: list[str] = Field(description="the workers where that level fell short")


class AllocationExplanationOut(BaseModel):
    placeable: bool
    candidate_workers: int = Field(
        description="workers that passed the SQL filter (fit, active, enough free per type)"
    )
    shortfalls: list[ShortfallOut]
    note: str | None = Field(
        default=None, description="why no worker was considered, when none was"
    )


class ExplanationOut(BaseModel):
    job: int
    workers: list[WorkerExplanationOut]
    scheduling_info: list[str] = Field(
        default_factory=list,
        description="Grid Engine jobs: why queue instances cannot take the job, in the "
        "words of qstat -j (level, attribute, requested and offered value)",
    )
    allocation: AllocationExplanationOut | None = Field(
        default=None, description="for a waiting job with a shape or jobspec: can it be placed"
    )
    summary: ExplainSummaryOut | None = Field(
        default=None, description="for a waiting job: the counts per reason and a suggestion"
    )


class JobEventOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    kind: JobEventKind
    worker: str | None
    detail: str | None
    at: datetime


class JobHistoryOut(BaseModel):
    job: int
    events: list[JobEventOut] = Field(description="changes of state, oldest first")


class AllocationOut(BaseModel):
    """RFC 20-like R of what the job holds: per node its rank, name, the ids of each leaf
    type as an RFC 22 idset and the amounts drawn from pools."""

    job: int
    R_lite: list[dict[str, Any]]


class FinishIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    outcome: Literal["finished", "failed"]
    reason: Text | None = Field(default=None, max_length=4096)
    exit_code: int | None = Field(default=None, ge=-(2**31), le=2**31 - 1)
    output: Text | None = Field(
        default=None, max_length=1_048_576, description="the command's output (its tail is kept)"
    )


class ReturnIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: Text | None = Field(default=None, max_length=4096, description="why, for the history")
