"""The request bodies of a case, as the services take them.

A worker is a ``POST /v1/workers`` body, a job a ``POST /v1/jobs`` body and a task a
``POST /v1/tasks`` body, with the same field names and defaults: the runner builds the
same specs the routes build, so the services see what they would see from the API. A field
the body does not have is a ScenarioError, as the API's ``extra="forbid"`` makes it a 422.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import Any

from app.db.models import WorkerState
from app.matching.debusine.registry import TaskSpec
from app.matching.requests import JobSpec
from app.matching.scenarios.cases import ScenarioError
from app.matching.workers import QueueSpec, WorkerSpec

WORKER_FIELDS = frozenset(f.name for f in fields(WorkerSpec))
JOB_FIELDS = frozenset(f.name for f in fields(JobSpec))
TASK_FIELDS = frozenset(f.name for f in fields(TaskSpec))


def check_fields(what: str, body: Mapping[str, Any], allowed: Iterable[str]) -> None:
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise ScenarioError(f"{what}: unknown field(s) {', '.join(unknown)}")


def worker_spec(body: Mapping[str, Any]) -> WorkerSpec:
    """A ``POST /v1/workers`` body as ``worker_spec`` in app/api/routes/workers.py reads it."""
    if not isinstance(body.get("name"), str):
        raise ScenarioError(f"worker {body!r}: a worker needs a 'name'")
    check_fields(f"worker {body['name']}", body, WORKER_FIELDS)
    return WorkerSpec(
        name=body["name"],
        resources=body.get("resources", ""),
        slots=body.get("slots", 1),
        rank=body.get("rank"),
        state=WorkerState(body.get("state", WorkerState.ACTIVE.value)),
        queues=tuple(QueueSpec(q["name"], q["slots"]) for q in body.get("queues") or ()),
        properties=tuple(body.get("properties", ())),
        inventory=body.get("inventory"),
    )


def job_spec(body: Mapping[str, Any]) -> JobSpec:
    """A ``POST /v1/jobs`` body as ``JobIn.spec`` reads it."""
    check_fields("job", body, JOB_FIELDS)
    return JobSpec(**body)


def task_spec(body: Mapping[str, Any]) -> TaskSpec:
    """A ``POST /v1/tasks`` body as ``register_task`` reads it."""
    check_fields(f"task {body.get('name')}", body, TASK_FIELDS)
    return TaskSpec(**body)
