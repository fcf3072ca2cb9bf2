"""What callers send: request bodies as frozen dataclasses.

Every field left at None is left out of the JSON, so the server applies its documented
default (see the OpenAPI document for each field's meaning).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.client.models import WorkerState
from app.client.parsing import NULL, Null
from app.wire.queues import QueueSpec

__all__ = [
    "NULL",
    "AttributeSpec",
    "JobSpec",
    "PeSpec",
    "QueueInstancePatch",
    "TaskSpec",
    "ValuesSpec",
    "WhatIfSpec",
    "WorkerChange",
    "WorkerPatch",
    "WorkerSpec",
]


@dataclass(frozen=True)
class JobSpec:
    """A job to submit (or to match with /v1/match) in any of the supported notations:
    Momotor tags (``resources``), Flux (``constraint``, ``requires``, ``shape``,
    ``jobspec``), debusine (``task``) and Grid Engine (``hard``, ``soft``, ``pe``,
    ``queue_list``, ``master_queue_list``, ``soft_queue_list``, ``project`` and
    ``verify``, qsub's ``-P`` and ``-w``); with ``tasks`` (qsub ``-t``) and
    ``task_concurrency`` (``-tc``) an array job, which only ``submit_jobs`` sends."""

    resources: str | None = None
    priority: int | None = None
    slots: int | None = None
    constraint: dict[str, Any] | None = None
    requires: str | None = None
    shape: str | None = None
    jobspec: list[Any] | None = None
    task: str | None = None
    command: list[str] | None = None
    timeout: int | None = None
    hard: str | None = None
    soft: str | None = None
    pe: str | None = None
    pe_slots: str | None = None
    queue_list: str | None = None
    master_queue_list: str | None = None
    soft_queue_list: str | None = None
    project: str | None = None
    verify: str | None = None
    #: Grid Engine array job, qsub -t ``n[-m[:s]]``, and -tc: submit_jobs only.
    tasks: str | None = None
    task_concurrency: int | None = None


@dataclass(frozen=True)
class WorkerSpec:
    """A worker to register (POST /v1/workers); with ``replace=True`` it replaces a worker
    of the same name whole."""

    name: str
    resources: str | None = None
    slots: int | None = None
    rank: int | None = None
    state: WorkerState | None = None
    queues: list[QueueSpec] | None = None
    properties: list[str] | None = None
    inventory: str | list[Any] | None = None


@dataclass(frozen=True)
class WorkerPatch:
    """A change of some fields of a worker (PATCH /v1/workers/{name}): fields left at None
    keep their values; :data:`NULL` clears ``reason``, ``rank`` or ``inventory``.
    ``WorkerPatch(state=WorkerState.DRAINING, reason="kernel upgrade")`` drains a worker
    and keeps everything else."""

    state: WorkerState | None = None
    reason: str | Null | None = None
    resources: str | None = None
    slots: int | None = None
    rank: int | Null | None = None
    queues: list[QueueSpec] | None = None
    properties: list[str] | None = None
    inventory: str | list[Any] | Null | None = None


@dataclass(frozen=True)
class QueueInstancePatch:
    """A change of a queue instance (PATCH /v1/queues/{name}/instances/{host}): fields left
    at None stay; :data:`NULL` gives ``seq_no`` or ``load_thresholds`` the cluster queue's
    again. ``QueueInstancePatch(disabled=True)`` is ``qmod -d``, ``suspended=True`` is
    ``qmod -s``."""

    disabled: bool | None = None
    suspended: bool | None = None
    seq_no: int | Null | None = None
    load_thresholds: str | Null | None = None


@dataclass(frozen=True)
class TaskSpec:
    """A debusine task type: its requirements and optional can_run_on plug-in."""

    name: str
    version: int | None = None
    description: str | None = None
    requirements: Any = None
    plugin: str | None = None


@dataclass(frozen=True)
class AttributeSpec:
    """A Grid Engine complex attribute, as one line of complex(5)."""

    name: str
    shortcut: str
    type: str
    relop: str
    requestable: str | None = None
    consumable: str | None = None
    default: str | None = None
    urgency: float | None = None


@dataclass(frozen=True)
class ValuesSpec:
    """complex_values, load_values and attribute values of a host, a queue or the cluster."""

    complex_values: dict[str, str] | None = None
    load_values: dict[str, str] | None = None
    attributes: dict[str, str] | None = None


@dataclass(frozen=True)
class PeSpec:
    """A Grid Engine parallel environment's allocation rule and slots."""

    allocation_rule: str
    slots: int | None = None


@dataclass(frozen=True, kw_only=True)
class WorkerChange(WorkerPatch):
    """A change of some fields of the worker ``name`` in a what-if, as
    :class:`WorkerPatch` says it: ``WorkerChange(name="w2", slots=8)``."""

    name: str


@dataclass(frozen=True, kw_only=True)
class ValuesChange(ValuesSpec):
    """The values of one Grid Engine object in a what-if: ``level`` ``"global"``,
    ``"host"`` (with ``host``) or ``"queue_instance"`` (with ``queue`` and ``host``):
    ``ValuesChange(level="global", complex_values={"lic": "8"})``."""

    level: str
    host: str | None = None
    queue: str | None = None


@dataclass(frozen=True)
class QuotaSetText:
    """A resource quota set in its ``qconf -srqs`` text form, as POST /v1/quotas takes it."""

    text: str


@dataclass(frozen=True)
class WeightChange:
    """A submitter's fair-share weight in a what-if, and its group when ``group`` is
    given (:data:`NULL`: none; None: the group it is in): ``WeightChange("alice", 2)``,
    ``WeightChange("bob", 1, group="course-a")``."""

    submitter: str
    weight: float
    group: str | Null | None = None


@dataclass(frozen=True)
class GroupWeightChange:
    """A group's weight in a what-if (the group is made if new):
    ``GroupWeightChange("course-a", 2)``."""

    group: str
    weight: float


@dataclass(frozen=True)
class WhatIfSpec:
    """A change set for POST /v1/whatif, applied in this order: ``add_workers``,
    ``change_workers``, ``set_values``, ``add_quota_sets``, ``replace_quota_sets`` (each
    names its set in its text), ``remove_quota_sets``, ``drain_workers``,
    ``remove_workers`` (their jobs requeued), ``add_jobs``; ``set_weights`` (fair
    share, and groups) and ``set_group_weights`` come after the quota sets;
    ``explain_job`` names a waiting job whose candidates are compared, ``pull_workers``
    more workers whose first pull is shown."""

    add_workers: list[WorkerSpec] | None = None
    change_workers: list[WorkerChange] | None = None
    set_values: list[ValuesChange] | None = None
    add_quota_sets: list[QuotaSetText] | None = None
    replace_quota_sets: list[QuotaSetText] | None = None
    remove_quota_sets: list[str] | None = None
    set_weights: list[WeightChange] | None = None
    set_group_weights: list[GroupWeightChange] | None = None
    drain_workers: list[str] | None = None
    remove_workers: list[str] | None = None
    add_jobs: list[JobSpec] | None = None
    explain_job: int | None = None
    pull_workers: list[str] | None = None


@dataclass(frozen=True)
class TemplateSpec:
    """A worker template to register or replace (PUT /v1/templates/{name}): a worker body
    as :class:`WorkerSpec` without a name or a rank, plus what one new worker of it costs
    and how many an autoscaler may create; fields at None take the server's defaults."""

    resources: str | None = None
    slots: int | None = None
    state: WorkerState | None = None
    queues: list[QueueSpec] | None = None
    properties: list[str] | None = None
    inventory: str | list[Any] | None = None
    cost: float | None = None
    max_count: int | None = None
