"""Bodies of the job routes: submission, reads, candidates, explanations, history,
allocation, finish and return."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from app.api.schemas.common import BodyInt, JobIdField, Text, WorkerNameField, WorkerStateField
from app.db.models import JobEventKind, JobState
from app.matching.dispatch.batch import MAX_BATCH
from app.matching.submission import JobSpec
from app.matching.submission.bulk import BulkItem

#: One realistic job per notation, for the OpenAPI document (tests/api/test_openapi.py
#: submits each of them).
JOB_EXAMPLES: list[JsonValue] = [
    # Momotor tags: the Momotor documentation's first job (app/matching/demo.py).
    {"resources": "language: java; java: 12", "priority": 10},
    # Flux: an RFC 14 jobspec resources list and an RFC 35 constraint.
    {
        "jobspec": [
            {
                "type": "slot",
                "count": 1,
                "label": "task",
                "with": [{"type": "core", "count": 4}, {"type": "gpu", "count": 1}],
            }
        ],
        "requires": "host:node[0-3] ssd",
    },
    # Grid Engine: qsub -l h_vmem=2G,arch=lx* -soft -l cpu=2 -pe mpi 2-4 -q all.q,long.q@exec*
    # -masterq all.q (each item names a queue the example workers have).
    {
        "hard": "h_vmem=2G,arch=lx*",
        "soft": "cpu=2",
        "pe": "mpi",
        "pe_slots": "2-4",
        "queue_list": "all.q,long.q@exec*",
        "master_queue_list": "all.q",
    },
    # debusine: a registered task and the command the worker agent runs.
    {
        "task": "sbuild",
        "command": ["sbuild", "--dist=trixie", "hello_2.12-1.dsc"],
        "timeout": 3600,
    },
]


#: The fields of a job body that make it an array job: only the bulk submission takes
#: them (POST /v1/jobs refuses them, and a single job's spec has none).
ARRAY_FIELDS = frozenset({"tasks", "task_concurrency"})
#: The fields a job body hands the services (JobSpec's, all of JobIn's but ARRAY_FIELDS).
SPEC_FIELDS = tuple(field.name for field in dataclasses.fields(JobSpec))


class JobIn(BaseModel):
    """A job's request, in one or several notations: Momotor tags (`resources`), Flux
    (`constraint` or `requires`, `shape` or `jobspec`), Grid Engine (`hard`, `soft`, `pe`)
    and debusine (`task`)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": JOB_EXAMPLES})

    resources: Text = Field(
        default="",
        max_length=65_536,
        description="Momotor resource definition of what the job needs",
    )
    priority: BodyInt = Field(
        default=0,
        ge=-1_000_000,
        le=1_000_000,
        description="higher runs first; equal priorities run oldest first",
    )
    slots: BodyInt = Field(
        default=1, ge=1, le=1_000_000, description="slots the job takes on its worker"
    )
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
    timeout: BodyInt | None = Field(
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
    queue_list: Text = Field(
        default="",
        max_length=65_536,
        description="Grid Engine hard -q list: the queue instances that may run the job, "
        "e.g. all.q,gpu*@node[0-9]*",
    )
    master_queue_list: Text = Field(
        default="",
        max_length=65_536,
        description="Grid Engine -masterq list: the instances that may be a parallel job's "
        "master queue (needs pe)",
    )
    soft_queue_list: Text = Field(
        default="",
        max_length=65_536,
        description="Grid Engine soft -q list: instances it names are preferred",
    )
    project: Text | None = Field(
        default=None,
        max_length=255,
        description="Grid Engine project (qsub -P); it must exist (GET /v1/projects)",
    )
    verify: Literal["e", "w", "n"] = Field(
        default="n",
        description="Grid Engine qsub -w: `e` refuses (422) a job that could run nowhere "
        "even in an empty cluster; `w` and `n` accept it",
    )

    tasks: Text | None = Field(
        default=None,
        max_length=64,
        description="Grid Engine array job, qsub -t `n[-m[:s]]`: one job per task id n, "
        "n+s, ... up to m (n >= 1, m >= n, s >= 1), each with its `task_id`; submitted "
        "through POST /v1/jobs/bulk only (POST /v1/jobs and a what-if refuse it, POST "
        "/v1/match answers the candidates every task shares)",
    )
    task_concurrency: BodyInt | None = Field(
        default=None,
        ge=1,
        le=2**31 - 1,
        description="Grid Engine qsub -tc: at most this many tasks of the array run at once "
        "(needs tasks)",
    )

    def spec(self) -> JobSpec:
        """The submission as the services take it: JobSpec has the body's fields, by name
        (the array's, ``tasks`` and ``task_concurrency``, are the bulk submission's)."""
        # Read by attribute: model_dump copied every nested value, most of a bulk
        # request's conversion (the fields are plain values the services only read).
        return JobSpec(**{name: getattr(self, name) for name in SPEC_FIELDS})

    def item(self) -> BulkItem:
        """The body as one item of a bulk submission."""
        return BulkItem(self.spec(), self.tasks, self.task_concurrency)


class BulkJobsIn(BaseModel):
    """Many jobs in one request, stored all or none (one bad body refuses the request)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "jobs": [
                        {"resources": "language: java; java: 12", "priority": 10},
                        {"command": ["./render.sh"], "tasks": "1-100:2", "task_concurrency": 4},
                    ]
                }
            ]
        },
    )

    jobs: list[JobIn] = Field(
        min_length=1,
        description="the job bodies, as POST /v1/jobs takes them (at most "
        "JOBMATCH_MAX_BULK_JOBS, 1000 by default); a body with `tasks` is an array job",
    )


class BulkJobOut(BaseModel):
    """One stored job of a bulk submission, in a few fields (GET /v1/jobs/{id} has all)."""

    id: JobIdField
    state: JobState = Field(description="waiting, or failed when no worker could ever run it")
    array_id: int | None = Field(description="the array job it is a task of, if any")
    task_id: int | None = Field(description="its task id in the array (SGE_TASK_ID)")
    failure_reason: str | None = Field(description='e.g. "No suitable worker found"')


class BulkJobsOut(BaseModel):
    count: int = Field(description="jobs stored (an array's tasks each count)")
    jobs: list[BulkJobOut] = Field(
        description="the jobs in body order, an array's tasks in task order"
    )


class JobOut(BaseModel):
    """A job as submitted, with its state and, once it ran, how it ended."""

    id: JobIdField
    state: JobState = Field(description="waiting, running, or how it ended")
    priority: int = Field(description="higher runs first; equal priorities run oldest first")
    slots: int = Field(description="slots the job takes on its worker")
    category_id: int = Field(
        description="the category of jobs with the same request, which fit the same workers"
    )
    resources: str = Field(description="the Momotor resource definition as given")
    constraint: str | None = Field(description="the constraint as given (RFC 31 JSON or RFC 35)")
    constraint_syntax: str | None = Field(description="rfc31 or rfc35")
    shape: str | None = Field(description="the RFC 46 shape as given")
    jobspec: str | None = Field(description="the RFC 14 resources as given (JSON text)")
    task: str | None = Field(description="the registered task type the job runs")
    command: list[str] | None = Field(description="argv the worker agent runs")
    timeout: int | None = Field(description="seconds the command may run")
    hard: str | None = Field(description="Grid Engine hard -l list")
    soft: str | None = Field(description="Grid Engine soft -l list")
    pe: str | None = Field(description="Grid Engine parallel environment")
    pe_slots: str | None = Field(description="slot range of the parallel environment")
    queue_list: str | None = Field(description="Grid Engine hard -q list as given")
    master_queue_list: str | None = Field(description="Grid Engine -masterq list as given")
    soft_queue_list: str | None = Field(description="Grid Engine soft -q list as given")
    project: str | None = Field(default=None, description="Grid Engine project (qsub -P)")
    submitter: str = Field(description="who submitted it: `admin` or the submitter token's subject")
    worker: str | None = Field(description="the worker it runs or ran on; null while waiting")
    failure_reason: str | None = Field(
        description='why it failed, e.g. "No suitable worker found", or the worker\'s reason'
    )
    attempts: int = Field(description="times the job was dispatched")
    exit_code: int | None = Field(description="the command's exit status, as the agent reported")
    output: str | None = Field(description="the tail of the command's output")
    submitted_at: datetime = Field(description="when it was submitted")
    started_at: datetime | None = Field(description="when it was last dispatched")
    ended_at: datetime | None = Field(description="when it finished, failed or was cancelled")
    array_id: int | None = Field(
        default=None, description="the Grid Engine array job (qsub -t) it is a task of"
    )
    task_id: int | None = Field(default=None, description="its task id in the array")
    task_range: str | None = Field(
        default=None, description="the array's task range, `n-m:s` (qsub -t)"
    )


class CandidateOut(BaseModel):
    """One eligible worker. ``strength`` is Momotor's match strength, lower is better:
    -Infinity (STRONGEST), -1.0 (STRONG), 0.0 (NEUTRAL), 1.0 (WEAK), Infinity (WEAKEST).
    Infinities are written as the JSON strings "-Infinity" and "Infinity"."""

    model_config = ConfigDict(ser_json_inf_nan="strings")

    worker: WorkerNameField
    strength: float = Field(description="Momotor match strength, lower is better")
    strength_name: str = Field(
        description="the strength's name: STRONGEST, STRONG, NEUTRAL, WEAK or WEAKEST; "
        "empty for a strength between them"
    )
    free_slots: int = Field(description="the worker's free slots now")
    state: WorkerStateField


class CandidatesOut(BaseModel):
    job: int | None = Field(description="the job, or null for a dry-run match")
    items: list[CandidateOut] = Field(description="eligible workers, best match first")


class ClauseOut(BaseModel):
    """One clause of the job's request that the worker does not meet."""

    reason: str = Field(description="the reason code, as category_misfits.reason stores it")
    message: str = Field(description="the clause and why it fails, in words")
    group: str | None = Field(description="the Momotor group of the clause, if any")
    tag: str | None = Field(description="the Momotor tag of the clause, if any")


class WorkerExplanationOut(BaseModel):
    """One worker against the job. ``eligible`` and ``can_run_now`` never contradict the
    clauses: the first clause's code is ``reason``, and for a worker that is not eligible
    it is the misfit code of ``v_category_fit``."""

    worker: WorkerNameField
    state: WorkerStateField
    eligible: bool = Field(
        description="static fit: no clause of the request rules the worker out (the "
        "misfit cache, `v_category_fit`, says it fits) and the registered workers could "
        "hold the job together (enough nodes for a job on several)"
    )
    can_run_now: bool | None = Field(
        description="a waiting job starts on this worker now: its next pull takes it (a "
        "pull rehearsed and rolled back), or for a job on several nodes an allocation now "
        "places it on this worker among others; null for a job that does not wait"
    )
    answer: str | None = Field(
        default=None,
        description="for a waiting job: `now` (can_run_now), `outranked` (it could start "
        "the job, but its next pull takes another job first), `not-now` (room is taken, "
        "or the worker takes no work now) or `never` (it, or the set of registered "
        "workers, could never hold the job); null for a job that does not wait",
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
        description="eligible workers that do not take it now (outranked, or not now: "
        "state, slots, inventory, Grid Engine values)"
    )
    outranked: int = Field(
        default=0,
        description="workers that could start the job, but whose next pull takes another job",
    )
    not_now: int = Field(
        default=0,
        description="workers whose room is taken, or that take no work now",
    )
    never: int = Field(
        default=0,
        description="workers that could never hold the job (with `can_run_now`, "
        "`outranked` and `not_now` they add up to `workers`)",
    )
    first_failures: dict[str, int] = Field(
        description="per reason code, how many workers fail on it first"
    )
    suggestion: str | None = Field(
        description="the one change that would let the job run soonest, if there is one"
    )


class ShortfallOut(BaseModel):
    path: str = Field(description="the level of the request, e.g. slot/node/core")
    needed: int = Field(description="how many the request needs at that level")
    found: int = Field(description="the most found in one place")
    places: int = Field(description="how many places (vertices) were searched")
    workers: list[str] = Field(description="the workers where that level fell short")


class AllocationExplanationOut(BaseModel):
    placeable: bool = Field(description="whether the job could be placed now")
    candidate_workers: int = Field(
        description="workers that passed the SQL filter (fit, active, enough free per type)"
    )
    shortfalls: list[ShortfallOut] = Field(
        description="the levels of the request that fell short, when it cannot be placed"
    )
    note: str | None = Field(
        default=None, description="why no worker was considered, when none was"
    )


class ExplanationOut(BaseModel):
    job: JobIdField
    workers: list[WorkerExplanationOut] = Field(
        description="each worker (or the one asked for), by name"
    )
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

    kind: JobEventKind = Field(description="what happened to the job")
    worker: str | None = Field(description="the worker it happened on, if any")
    detail: str | None = Field(
        description="more words: the attempt of a dispatch, the reason of a failure or return"
    )
    at: datetime = Field(description="when it happened")


class JobHistoryOut(BaseModel):
    job: JobIdField
    events: list[JobEventOut] = Field(description="changes of state, oldest first")


class AllocationOut(BaseModel):
    """RFC 20-like R of what the job holds: per node its rank, name, the ids of each leaf
    type as an RFC 22 idset and the amounts drawn from pools."""

    job: JobIdField
    R_lite: list[dict[str, Any]] = Field(
        description="per node: `rank`, `node` (the worker), `children` (leaf type -> RFC 22 "
        "idset) and `pools` (amounts drawn per type and unit); empty when the job holds nothing"
    )


class FinishIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"outcome": "finished", "exit_code": 0, "output": "42\n"},
                {"outcome": "failed", "reason": "chroot trixie not found", "exit_code": 2},
            ]
        },
    )

    outcome: Literal["finished", "failed"] = Field(description="how the job ended")
    reason: Text | None = Field(
        default=None, max_length=4096, description="why it failed, kept as its failure_reason"
    )
    exit_code: BodyInt | None = Field(
        default=None, ge=-(2**31), le=2**31 - 1, description="the command's exit status"
    )
    output: Text | None = Field(
        default=None, max_length=1_048_576, description="the command's output (its tail is kept)"
    )


class FinishedIn(FinishIn):
    """A finish body, with the id of the job it reports (a batch pull carries them)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"job_id": 12, "outcome": "finished", "exit_code": 0}]},
    )

    job_id: JobIdField


class PullBatchIn(BaseModel):
    """What a batch pull carries: the ends of the worker's jobs since its last request."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"finished": [{"job_id": 12, "outcome": "finished", "exit_code": 0}]}]
        },
    )

    finished: list[FinishedIn] = Field(
        default_factory=list,
        max_length=MAX_BATCH,
        description="the jobs this worker ended, applied in order before it pulls, each "
        "as POST /v1/jobs/{job_id}/finish applies one",
    )


class EndedOut(BaseModel):
    """What became of one carried report."""

    job_id: JobIdField
    state: JobState = Field(description="the job's state after the report")
    late: bool = Field(
        description="the worker had lost the job (its lease expired, or it was cancelled) "
        "before the report came: the report was recorded in the job's history, not applied"
    )
    detail: str | None = Field(default=None, description="what happened to a late job")
    now_on: str | None = Field(default=None, description="the worker a late job runs on now")


class PullBatchOut(BaseModel):
    """A batch pull's answer: the carried reports' results, and the jobs it started."""

    finished: list[EndedOut] = Field(description="one per carried report, in their order")
    jobs: list[JobOut] = Field(description="the jobs now running on this worker, best first")
    placed: list[int] = Field(
        description="the ids among `jobs` of those the scheduler placed on this worker",
    )


class ReturnIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"reason": "the agent is stopping (SIGTERM)"}]},
    )

    reason: Text | None = Field(default=None, max_length=4096, description="why, for the history")
