"""The table of API operations and which client method covers each.

Each :class:`Operation` names one (method, path) of the OpenAPI document and whether sending
it twice is safe. Client methods are marked with :func:`covers`; tests/client compare the
table and the marked methods with the server's OpenAPI document, so a new route without a
client method (or a method for a route that is gone) fails the build.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

F = TypeVar("F", bound=Callable[..., object])

#: HTTP methods that RFC 9110 (section 9.2.2) defines as idempotent.
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})


@dataclass(frozen=True)
class Operation:
    """One API operation. ``pure`` marks a POST that changes nothing on the server (a
    computation such as /v1/match), so that, like GET, it may be retried."""

    method: str
    path: str
    pure: bool = False

    @property
    def idempotent(self) -> bool:
        return self.method in IDEMPOTENT_METHODS or self.pure


def covers(operation: Operation) -> Callable[[F], F]:
    """Mark a client method as the one that sends ``operation``."""

    def mark(method: F) -> F:
        method.__jobmatch_operation__ = operation  # type: ignore[attr-defined]
        return method

    return mark


def covered_by(cls: type) -> dict[Operation, str]:
    """The operations the methods of ``cls`` (and its bases) cover, with the method names."""
    found: dict[Operation, str] = {}
    for name in dir(cls):
        operation = getattr(getattr(cls, name, None), "__jobmatch_operation__", None)
        if isinstance(operation, Operation):
            found[operation] = name
    return found


# Service
HEALTHZ = Operation("GET", "/healthz")
READYZ = Operation("GET", "/readyz")
METRICS = Operation("GET", "/metrics")
# Tokens
ISSUE_TOKEN = Operation("POST", "/v1/tokens")
LIST_TOKENS = Operation("GET", "/v1/tokens")
REVOKE_TOKEN = Operation("DELETE", "/v1/tokens/{token_id}")
# Workers
REGISTER_WORKER = Operation("POST", "/v1/workers")
LIST_WORKERS = Operation("GET", "/v1/workers")
GET_WORKER = Operation("GET", "/v1/workers/{name}")
UPDATE_WORKER = Operation("PATCH", "/v1/workers/{name}")
DELETE_WORKER = Operation("DELETE", "/v1/workers/{name}")
PULL = Operation("POST", "/v1/workers/{name}/pull")
PULL_BATCH = Operation("POST", "/v1/workers/{name}/pull-batch")
HEARTBEAT = Operation("POST", "/v1/workers/{name}/heartbeat")
GET_METADATA = Operation("GET", "/v1/workers/{name}/metadata")
SET_STATIC_METADATA = Operation("PUT", "/v1/workers/{name}/metadata")
REPORT_METADATA = Operation("POST", "/v1/workers/{name}/metadata")
REPORT_LOAD = Operation("PUT", "/v1/workers/{name}/load")
APPEND_OUTPUT = Operation("POST", "/v1/workers/{name}/jobs/{job_id}/output")
# Jobs
SUBMIT_JOB = Operation("POST", "/v1/jobs")
SUBMIT_JOBS = Operation("POST", "/v1/jobs/bulk")
LIST_JOBS = Operation("GET", "/v1/jobs")
GET_JOB = Operation("GET", "/v1/jobs/{job_id}")
CANCEL_JOB = Operation("POST", "/v1/jobs/{job_id}/cancel")
JOB_CANDIDATES = Operation("GET", "/v1/jobs/{job_id}/candidates")
EXPLAIN_JOB = Operation("GET", "/v1/jobs/{job_id}/explain")
JOB_HISTORY = Operation("GET", "/v1/jobs/{job_id}/history")
JOB_ALLOCATION = Operation("GET", "/v1/jobs/{job_id}/allocation")
JOB_OUTPUT = Operation("GET", "/v1/jobs/{job_id}/output")
ALLOCATE_JOB = Operation("POST", "/v1/jobs/{job_id}/allocate")
MATCH = Operation("POST", "/v1/match", pure=True)
FINISH_JOB = Operation("POST", "/v1/jobs/{job_id}/finish")
RETURN_JOB = Operation("POST", "/v1/jobs/{job_id}/return")
# Categories
LIST_CATEGORIES = Operation("GET", "/v1/categories")
GET_CATEGORY = Operation("GET", "/v1/categories/{category_id}")
# Flux tools: computations only
EXPAND_SHAPE = Operation("POST", "/v1/flux/shape", pure=True)
COMPILE_REQUIRES = Operation("POST", "/v1/flux/requires", pure=True)
VALIDATE_CONSTRAINT = Operation("POST", "/v1/flux/constraint", pure=True)
# Leases
EXPIRE_LEASES = Operation("POST", "/v1/leases/expire")
# Tasks
LIST_TASKS = Operation("GET", "/v1/tasks")
REGISTER_TASK = Operation("POST", "/v1/tasks")
GET_TASK = Operation("GET", "/v1/tasks/{name}")
# Grid Engine complexes, values, PEs and the scheduler
LIST_ATTRIBUTES = Operation("GET", "/v1/attributes")
CREATE_ATTRIBUTE = Operation("POST", "/v1/attributes")
GET_ATTRIBUTE = Operation("GET", "/v1/attributes/{name}")
CHANGE_ATTRIBUTE = Operation("PUT", "/v1/attributes/{name}")
DELETE_ATTRIBUTE = Operation("DELETE", "/v1/attributes/{name}")
GET_GLOBAL_VALUES = Operation("GET", "/v1/values/global")
GET_HOST_VALUES = Operation("GET", "/v1/values/hosts/{host}")
GET_QUEUE_VALUES = Operation("GET", "/v1/values/queues/{queue}/{host}")
SET_GLOBAL_VALUES = Operation("PUT", "/v1/values/global")
SET_HOST_VALUES = Operation("PUT", "/v1/values/hosts/{host}")
SET_QUEUE_VALUES = Operation("PUT", "/v1/values/queues/{queue}/{host}")
LIST_PES = Operation("GET", "/v1/pes")
GET_PE = Operation("GET", "/v1/pes/{name}")
PUT_PE = Operation("PUT", "/v1/pes/{name}")
DELETE_PE = Operation("DELETE", "/v1/pes/{name}")
RUN_SCHEDULE = Operation("POST", "/v1/schedule")
# Grid Engine resource quota sets
CREATE_QUOTA_SET = Operation("POST", "/v1/quotas")
LIST_QUOTA_SETS = Operation("GET", "/v1/quotas")
GET_QUOTA_SET = Operation("GET", "/v1/quotas/{name}")
REPLACE_QUOTA_SET = Operation("PUT", "/v1/quotas/{name}")
DELETE_QUOTA_SET = Operation("DELETE", "/v1/quotas/{name}")
LIST_SHARES = Operation("GET", "/v1/shares")
SET_SHARE_WEIGHT = Operation("PUT", "/v1/shares/{submitter}")
SET_GROUP_WEIGHT = Operation("PUT", "/v1/groups/{name}")
# Grid Engine host groups, user access lists and projects
CREATE_HOST_GROUP = Operation("POST", "/v1/hostgroups")
LIST_HOST_GROUPS = Operation("GET", "/v1/hostgroups")
GET_HOST_GROUP = Operation("GET", "/v1/hostgroups/{name}")
REPLACE_HOST_GROUP = Operation("PUT", "/v1/hostgroups/{name}")
DELETE_HOST_GROUP = Operation("DELETE", "/v1/hostgroups/{name}")
CREATE_ACCESS_LIST = Operation("POST", "/v1/access-lists")
LIST_ACCESS_LISTS = Operation("GET", "/v1/access-lists")
GET_ACCESS_LIST = Operation("GET", "/v1/access-lists/{name}")
REPLACE_ACCESS_LIST = Operation("PUT", "/v1/access-lists/{name}")
DELETE_ACCESS_LIST = Operation("DELETE", "/v1/access-lists/{name}")
CREATE_PROJECT = Operation("POST", "/v1/projects")
LIST_PROJECTS = Operation("GET", "/v1/projects")
GET_PROJECT = Operation("GET", "/v1/projects/{name}")
DELETE_PROJECT = Operation("DELETE", "/v1/projects/{name}")
GET_QUEUE = Operation("GET", "/v1/queues/{name}")
CONFIGURE_QUEUE = Operation("PUT", "/v1/queues/{name}")
GET_QUEUE_INSTANCE = Operation("GET", "/v1/queues/{name}/instances/{host}")
UPDATE_QUEUE_INSTANCE = Operation("PATCH", "/v1/queues/{name}/instances/{host}")
GET_SCHEDULER = Operation("GET", "/v1/scheduler")
CONFIGURE_SCHEDULER = Operation("PUT", "/v1/scheduler")
RESET_SCHEDULER = Operation("DELETE", "/v1/scheduler")
#: A what-if stores nothing (its changes are rolled back), so it is safe to send again.
WHAT_IF = Operation("POST", "/v1/whatif", pure=True)

# Demand (issue 40): the worker templates and what the waiting jobs need
PUT_TEMPLATE = Operation("PUT", "/v1/templates/{name}")
LIST_TEMPLATES = Operation("GET", "/v1/templates")
GET_TEMPLATE = Operation("GET", "/v1/templates/{name}")
DELETE_TEMPLATE = Operation("DELETE", "/v1/templates/{name}")
GET_DEMAND = Operation("GET", "/v1/demand")
GET_DEMAND_SCALE = Operation("GET", "/v1/demand/scale")


def all_operations() -> frozenset[Operation]:
    """Every operation in this table."""
    return frozenset(value for value in globals().values() if isinstance(value, Operation))
