"""What the API answers, as frozen dataclasses (parsed by app.client.parsing).

One class per response schema of the OpenAPI document; field names and types follow it.
The parts the server builds field for field as the client reads them (a job's explanation,
a category's request and fit, a what-if's counts, an object's Grid Engine values) are
defined once in app.wire and used here as they are.
Timestamps stay ISO 8601 strings as the server sends them. Fields a newer server adds are
ignored, so an older client keeps working.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from app.wire.categories import CategoryRequest, WorkerFit
from app.wire.demand import CategoryDemand, Suggestion
from app.wire.explanation import ExplainSummary, WorkerExplanation
from app.wire.queues import QueueSlots, QueueSpec
from app.wire.states import JobEventKind as JobEventKind
from app.wire.states import JobState as JobState
from app.wire.states import Role as Role
from app.wire.states import WorkerState as WorkerState
from app.wire.whatif import AddedJob, CategoryCounts, FirstPull

#: What a page lists.
ItemT = TypeVar("ItemT")


@dataclass(frozen=True)
class Page(Generic[ItemT]):
    """One page of a list, as every list operation answers: at most ``limit`` items from
    ``offset``; ``next_offset`` is where the next page starts, None after the last. Each
    list has its own subclass (``JobPage``, ...) naming what it holds."""

    items: list[ItemT]
    limit: int
    offset: int
    next_offset: int | None


@dataclass(frozen=True)
class Token:
    id: int
    role: Role
    subject: str
    label: str
    created_at: str
    revoked_at: str | None
    #: When it stops working; None: never.
    expires_at: str | None
    #: When a request last presented it (coarse: to within the server's interval).
    last_used_at: str | None


@dataclass(frozen=True)
class IssuedToken(Token):
    """A token just issued: the only time its secret is shown."""

    token: str


@dataclass(frozen=True)
class Worker:
    name: str
    rank: int | None
    state: WorkerState
    state_reason: str | None
    state_set_by: str | None
    state_changed_at: str | None
    generation: int
    resources: str
    properties: list[str]
    inventory: str | None
    free: dict[str, int]
    queues: list[QueueSlots]
    last_seen: str | None
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class RegisteredWorker(Worker):
    """A worker as registered; ``token`` is its new worker token, None when
    ``token_kept``: a replacement whose worker goes on with the token it has."""

    token: str | None
    #: Missing, so False, in the answer of a server older than the field.
    token_kept: bool = False


@dataclass(frozen=True)
class Heartbeat:
    worker: str
    last_seen: str | None
    refresh_metadata: bool


@dataclass(frozen=True)
class MetadataNamespace:
    version: int
    reported_at: str


@dataclass(frozen=True)
class WorkerMetadata:
    """debusine-style worker metadata: static (admin), dynamic (the worker's own report) and
    the effective merge that matching reads."""

    worker: str
    generation: int
    static: dict[str, Any]
    dynamic: dict[str, Any]
    effective: dict[str, Any]
    namespaces: dict[str, MetadataNamespace]
    reported_at: str | None
    refresh_metadata: bool


@dataclass(frozen=True)
class Job:
    id: int
    state: JobState
    priority: int
    slots: int
    category_id: int
    resources: str
    constraint: str | None
    constraint_syntax: str | None
    shape: str | None
    jobspec: str | None
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
    attempts: int
    exit_code: int | None
    output: str | None
    submitted_at: str
    started_at: str | None
    ended_at: str | None
    #: Grid Engine -q, -masterq and soft -q lists (absent from servers before them).
    queue_list: str | None = None
    master_queue_list: str | None = None
    soft_queue_list: str | None = None
    #: Grid Engine project (qsub -P; absent from servers before it).
    project: str | None = None
    #: Grid Engine array job (qsub -t): the array, the task's id and the array's range
    #: ``n-m:s`` (absent from servers before them).
    array_id: int | None = None
    task_id: int | None = None
    task_range: str | None = None


@dataclass(frozen=True)
class SubmittedJob:
    """One job of a bulk submission as its answer lists it (get_job has the rest)."""

    id: int
    state: JobState
    array_id: int | None
    task_id: int | None
    failure_reason: str | None


@dataclass(frozen=True)
class SubmittedJobs:
    """A bulk submission's answer: every job stored, in body order (an array's tasks in
    task order)."""

    count: int
    jobs: list[SubmittedJob]


@dataclass(frozen=True)
class Ended:
    """What became of one report a batch pull carried: the job's state after it, and
    ``late`` when the worker had lost the job (recorded in its history, not applied)."""

    job_id: int
    state: JobState
    late: bool
    detail: str | None = None
    now_on: str | None = None


@dataclass(frozen=True)
class PulledBatch:
    """A batch pull's answer: the carried reports' results and the jobs now running."""

    finished: list[Ended]
    jobs: list[Job]
    placed: list[int]


class JobPage(Page[Job]):
    """A page of jobs."""


class WorkerPage(Page[Worker]):
    """A page of workers."""


class TokenPage(Page[Token]):
    """A page of tokens."""


@dataclass(frozen=True)
class Candidate:
    worker: str
    strength: float
    strength_name: str
    free_slots: int
    state: WorkerState


@dataclass(frozen=True)
class Candidates:
    """Workers that could run a job, strongest first (job is None for /v1/match)."""

    job: int | None
    items: list[Candidate]


@dataclass(frozen=True)
class Shortfall:
    path: str
    needed: int
    found: int
    places: int
    workers: list[str]


@dataclass(frozen=True)
class AllocationExplanation:
    placeable: bool
    candidate_workers: int
    shortfalls: list[Shortfall]
    note: str | None = None


@dataclass(frozen=True)
class Explanation:
    job: int
    workers: list[WorkerExplanation]
    scheduling_info: list[str] = field(default_factory=list)
    allocation: AllocationExplanation | None = None
    summary: ExplainSummary | None = None


@dataclass(frozen=True)
class JobEvent:
    kind: JobEventKind
    worker: str | None
    detail: str | None
    at: str


@dataclass(frozen=True)
class JobHistory:
    job: int
    events: list[JobEvent]


@dataclass(frozen=True)
class Allocation:
    """The resources a running job holds, as RFC 20 R_lite entries."""

    job: int
    R_lite: list[dict[str, Any]]


@dataclass(frozen=True)
class ExpandedShape:
    """An RFC 46 shape and the RFC 14 resources list it expands to."""

    shape: str
    resources: list[Any]


@dataclass(frozen=True)
class CompiledConstraint:
    """The canonical RFC 31 constraint object."""

    constraint: dict[str, Any]


@dataclass(frozen=True)
class Expired:
    expired: int


@dataclass(frozen=True)
class Task:
    name: str
    version: int
    description: str
    requirements: Any
    plugin: str | None
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class Attribute:
    """A Grid Engine complex attribute (complex(5))."""

    name: str
    shortcut: str
    type: str
    relop: str
    builtin: bool
    requestable: str | None = None
    consumable: str | None = None
    default: str | None = None
    urgency: float | None = None


@dataclass(frozen=True)
class ValuesChanged:
    static_changed: bool


@dataclass(frozen=True)
class OutputAppended:
    """The server has a job's output up to ``next_offset``."""

    job: int
    next_offset: int


@dataclass(frozen=True)
class JobOutput:
    """A running job's streamed output from ``offset`` to ``next_offset``; ``missed``
    characters before ``offset`` are no longer kept (the server keeps a bounded tail)."""

    job: int
    offset: int
    text: str
    next_offset: int
    missed: int


@dataclass(frozen=True)
class ParallelEnvironment:
    """A Grid Engine parallel environment (sge_pe(5))."""

    name: str
    allocation_rule: str
    slots: int | None = None


@dataclass(frozen=True)
class ScheduleRun:
    considered: int
    dispatched: int
    rejected_categories: int


class TaskPage(Page[Task]):
    """A page of task types."""


class AttributePage(Page[Attribute]):
    """A page of complex attributes."""


class PePage(Page[ParallelEnvironment]):
    """A page of parallel environments."""


@dataclass(frozen=True)
class QuotaLimit:
    """One ``attr=value`` of a resource quota rule, as written."""

    attribute: str
    value: str


@dataclass(frozen=True)
class QuotaRule:
    """A rule of a resource quota set: its label (``set/name`` or ``set/N``), its
    ``limit`` line and its limits."""

    label: str
    text: str
    limits: list[QuotaLimit]


@dataclass(frozen=True)
class QuotaUsage:
    """What running jobs hold of one limit under one usage key (``user/project/pe/
    queue/host``, the values of the rule's expanded filters)."""

    rule: str
    key: str
    attribute: str
    used: float
    limit: str


@dataclass(frozen=True)
class Standing:
    """One submitter under fair share (docs/ordering.md): its weight, its share (weight
    over every submitter's), its usage in slot-seconds decayed to now, and that usage
    over everybody's."""

    submitter: str
    weight: float
    share: float
    usage: float
    usage_fraction: float
    below_share: bool
    #: The group it belongs to; None: a group of its own.
    group: str | None = None


@dataclass(frozen=True)
class GroupStanding:
    """One group of submitters under group share (docs/ordering.md; ``group`` None: a
    submitter without a group, a group of its own): its members, weight, share (weight
    over every group's), its members' usage decayed to now, and that over everybody's."""

    group: str | None
    members: list[str]
    weight: float
    share: float
    usage: float
    usage_fraction: float
    below_share: bool


@dataclass(frozen=True)
class Shares:
    """The deployment's ordering rules, its half-life, every submitter's standing in the
    order the pull gives them the next job, and every group's."""

    ordering: str
    fair_share: bool
    halflife_seconds: float
    submitters: list[Standing]
    groups: list[GroupStanding] = field(default_factory=list)


@dataclass(frozen=True)
class QuotaSet:
    """A Grid Engine resource quota set (sge_resource_quota(5)) and its books."""

    name: str
    description: str
    enabled: bool
    text: str
    rules: list[QuotaRule]
    usage: list[QuotaUsage]


@dataclass(frozen=True)
class QueueConf:
    """A cluster queue's configuration: its place in the queue order, its load
    thresholds (queue_conf(5))."""

    name: str
    seq_no: int
    load_thresholds: str


@dataclass(frozen=True)
class QueueInstanceConf:
    """A queue instance's states (``qmod -d``, ``-s``) and values: its own (None: the
    cluster queue's) and those it is sorted and checked by."""

    name: str
    slots: int
    used_slots: int
    disabled: bool
    suspended: bool
    own_seq_no: int | None
    seq_no: int
    own_load_thresholds: str | None
    load_thresholds: str


@dataclass(frozen=True)
class SchedulerConf:
    """The scheduler configuration (sched_conf(5) queue_sort_method, load_formula);
    ``configured`` False when none is stored (seq_no order)."""

    configured: bool
    queue_sort_method: str | None
    load_formula: str | None


class QuotaSetPage(Page[QuotaSet]):
    """A page of resource quota sets."""


@dataclass(frozen=True)
class HostGroup:
    """A Grid Engine host group (hostgroup(5)): its hostlist as given and the hosts it
    resolves to, sub-groups included."""

    name: str
    members: list[str]
    hosts: list[str]


class HostGroupPage(Page[HostGroup]):
    """A page of host groups."""


@dataclass(frozen=True)
class AccessList:
    """A Grid Engine user access list (access_list(5))."""

    name: str
    members: list[str]


class AccessListPage(Page[AccessList]):
    """A page of user access lists."""


@dataclass(frozen=True)
class Project:
    """A Grid Engine project (project(5)), which jobs name with ``qsub -P``."""

    name: str


class ProjectPage(Page[Project]):
    """A page of projects."""


@dataclass(frozen=True)
class CategorySummary:
    """A category as listed: its request, its waiting and running jobs, how many workers
    fit it."""

    id: int
    created_at: str
    request: CategoryRequest
    waiting: int
    running: int
    fitting_workers: int


@dataclass(frozen=True)
class Category(CategorySummary):
    """A category with its fit over every worker."""

    workers: list[WorkerFit]


class CategoryPage(Page[CategorySummary]):
    """A page of job categories."""


@dataclass(frozen=True)
class CandidatesChange:
    """The candidates of a what-if's ``explain_job`` before and after the change."""

    job: int
    before: list[Candidate]
    after: list[Candidate]
    gained: list[str]
    lost: list[str]


@dataclass(frozen=True)
class WhatIf:
    """What a change set would change (POST /v1/whatif); nothing of it was stored."""

    runnable_now: list[int]
    no_longer_runnable: list[int]
    categories: list[CategoryCounts]
    added_jobs: list[AddedJob]
    requeued: list[int]
    first_pulls: list[FirstPull]
    explain_job: CandidatesChange | None
    provisional_ids: bool = True


@dataclass(frozen=True)
class WorkerTemplate:
    """A kind of worker an autoscaler can create (PUT /v1/templates/{name}): a worker body
    without a name, what one new worker of it costs and how many may be created (None:
    no limit)."""

    name: str
    resources: str
    slots: int
    state: WorkerState
    queues: list[QueueSpec] | None
    properties: list[str]
    inventory: Any
    cost: float
    max_count: int | None


class WorkerTemplatePage(Page[WorkerTemplate]):
    """A page of worker templates."""


@dataclass(frozen=True)
class Demand:
    """What the waiting jobs need (GET /v1/demand): a page of categories with why each
    waits, the totals over every category per answer, and with templates asked what new
    workers of them would start."""

    items: list[CategoryDemand]
    limit: int
    offset: int
    next_offset: int | None
    categories: int
    jobs: dict[str, int]
    category_counts: dict[str, int]
    suggestion: Suggestion | None
