"""The task registry (debusine issue #8): the task types the server knows, with their versions,
declarative requirements and optional ``can_run_on`` plug-in."""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter, Response, status

from app.api.auth import AdminDep, PrincipalDep
from app.api.deps import SessionDep
from app.api.paging import Paging100Dep
from app.api.responses import BODY_ERRORS, errors
from app.api.retries import RetryingRoute
from app.api.schemas.common import NamePath, Page
from app.api.schemas.tasks import TaskIn, TaskOut
from app.db.models import Task
from app.matching.debusine import registry as task_registry
from app.matching.debusine.registry import TaskSpec

router = APIRouter(prefix="/v1/tasks", tags=["tasks"], route_class=RetryingRoute)


def task_out(task: Task) -> TaskOut:
    return TaskOut(
        name=task.name,
        version=task.version,
        description=task.description,
        requirements=task_registry.requirements_json(task),
        plugin=task.plugin,
        created_at=task.created_at,
        updated_at=task.updated_at,
    )


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    operation_id="register_task",
    summary="Register or update a task type",
    responses={
        200: {"model": TaskOut, "description": "An existing task type was updated"},
        201: {"description": "A new task type was registered"},
        **errors(401, 403, 409, 503, *BODY_ERRORS),
    },
)
def register_task(
    body: TaskIn, session: SessionDep, _admin: AdminDep, response: Response
) -> TaskOut:
    """Register a task type, or update the one of that name (200). A new version or new
    requirements re-evaluate its waiting jobs against every worker at once. 409 when a
    concurrent request registered the same new name first."""
    # TaskSpec has the body's fields, by name.
    task, created = task_registry.upsert_task(session, TaskSpec(**dict(body)))
    if not created:
        response.status_code = status.HTTP_200_OK
    return task_out(task)


@router.get(
    "",
    operation_id="list_tasks",
    summary="List task types",
    responses=errors(401, 422, 503),
)
def list_tasks(session: SessionDep, _who: PrincipalDep, paging: Paging100Dep) -> Page[TaskOut]:
    """The registered task types by name, a page at a time (workers read them to know
    what to analyse)."""
    return paging.listing(partial(task_registry.list_tasks, session), task_out)


@router.get(
    "/{name}",
    operation_id="get_task",
    summary="Show a task type",
    responses=errors(401, 404, 422, 503),
)
def get_task(name: NamePath, session: SessionDep, _who: PrincipalDep) -> TaskOut:
    """The task type's version, requirements and plug-in."""
    return task_out(task_registry.get_task(session, name))
