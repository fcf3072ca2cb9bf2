"""The request bodies of a case, as the services take them.

A worker is a ``POST /v1/workers`` body, a job a ``POST /v1/jobs`` body and a task a
``POST /v1/tasks`` body, with the same field names and defaults: the runner builds the
same specs the routes build, so the services see what they would see from the API. A field
the body does not have is a ScenarioError, as the API's ``extra="forbid"`` makes it a 422.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from app.matching.debusine.registry import TaskSpec
from app.matching.requests import JobSpec
from app.matching.scenarios.cases import ScenarioError
from app.matching.workers import WorkerSpec

WORKER_FIELDS = frozenset(f.name for f in fields(WorkerSpec))
JOB_FIELDS = frozenset(f.name for f in fields(JobSpec))
TASK_FIELDS = frozenset(f.name for f in fields(TaskSpec))

Spec = TypeVar("Spec")


def check_fields(what: str, body: Mapping[str, Any], allowed: Iterable[str]) -> None:
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise ScenarioError(f"{what}: unknown field(s) {', '.join(unknown)}")


WORKER_SPEC = TypeAdapter(WorkerSpec)
JOB_SPEC = TypeAdapter(JobSpec)
TASK_SPEC = TypeAdapter(TaskSpec)


def _spec(
    adapter: TypeAdapter[Spec], what: str, body: Mapping[str, Any], allowed: Iterable[str]
) -> Spec:
    """The body as a spec, its values checked against the spec's types (a wrong type is
    a 422 from the API, so a format error here, never a traceback)."""
    check_fields(what, body, allowed)
    try:
        return adapter.validate_python(dict(body))
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ScenarioError(f"{what}: {where}: {first['msg']}") from None


def worker_spec(body: Mapping[str, Any]) -> WorkerSpec:
    """A ``POST /v1/workers`` body as ``worker_spec`` in app/api/routes/workers.py reads it."""
    if not isinstance(body.get("name"), str):
        raise ScenarioError(f"worker {body!r}: a worker needs a 'name'")
    return _spec(WORKER_SPEC, f"worker {body['name']}", body, WORKER_FIELDS)


def job_spec(body: Mapping[str, Any]) -> JobSpec:
    """A ``POST /v1/jobs`` body as ``JobIn.spec`` reads it."""
    return _spec(JOB_SPEC, "job", body, JOB_FIELDS)


def task_spec(body: Mapping[str, Any]) -> TaskSpec:
    """A ``POST /v1/tasks`` body as ``register_task`` reads it."""
    return _spec(TASK_SPEC, f"task {body.get('name')}", body, TASK_FIELDS)
