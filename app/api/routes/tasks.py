"""The task registry (debusine issue #8): the task types the server knows, with their versions,
declarative requirements and optional ``can_run_on`` plug-in."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from app.api.auth import AdminDep, PrincipalDep
from app.api.deps import SessionDep
from app.api.retries import RetryingRoute
from app.api.schemas.common import LimitQuery, NamePath, OffsetQuery, Page, page_of
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
    response_model=TaskOut,
    responses={200: {"model": TaskOut, "description": "An existing task type was updated"}},
)
def register_task(
    body: TaskIn, session: SessionDep, _admin: AdminDep, response: Response
) -> TaskOut:
    """Register a task type, or update the one of that name (200). A new version or new
    requirements re-evaluate its waiting jobs against every worker at once."""
    spec = TaskSpec(
        name=body.name,
        version=body.version,
        description=body.description,
        requirements=body.requirements,
        plugin=body.plugin,
    )
    task, created = task_registry.upsert_task(session, spec)
    if not created:
        response.status_code = status.HTTP_200_OK
    return task_out(task)


@router.get("", response_model=Page[TaskOut])
def list_tasks(
    session: SessionDep, _who: PrincipalDep, limit: LimitQuery = 100, offset: OffsetQuery = 0
) -> Page[TaskOut]:
    """The registered task types by name, a page at a time (workers read them to know
    what to analyse)."""
    rows = task_registry.list_tasks(session, limit=limit + 1, offset=offset)
    return page_of([task_out(task) for task in rows], limit, offset)


@router.get("/{name}", response_model=TaskOut)
def get_task(name: NamePath, session: SessionDep, _who: PrincipalDep) -> TaskOut:
    return task_out(task_registry.get_task(session, name))
