"""The task registry: every task type the server knows (debusine issue #8: "the full list of
existing tasks should be known to the server"), with its version, requirements and plug-in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import Task
from app.matching import announce
from app.matching.errors import InvalidFieldError, NotFoundError
from app.matching.misfits import recache_task_misfits
from app.matching.named_rows import rows_by_name
from app.notations.debusine.metadata import (
    MAX_VERSION,
    NAMESPACE_PATTERN,
    canonical_requirement,
    parse_requirement,
)
from app.notations.errors import NotationError, did_you_mean
from app.task_plugins import PluginNotFoundError, load_plugin


@dataclass(frozen=True)
class TaskSpec:
    name: str
    version: int = 1
    description: str = ""
    requirements: Any = None
    plugin: str | None = None


def _validate(spec: TaskSpec) -> str | None:
    if not NAMESPACE_PATTERN.fullmatch(spec.name) or len(spec.name) > 255:
        raise InvalidFieldError(
            "name", "a task name is lower case: letters, digits and '_.+-', e.g. 'sbuild'"
        )
    if not 1 <= spec.version <= MAX_VERSION:
        raise InvalidFieldError("version", "must be a positive integer")
    requirements = None
    if spec.requirements is not None:
        try:
            requirements = canonical_requirement(parse_requirement(spec.requirements))
        except NotationError as error:
            raise InvalidFieldError("requirements", str(error), error) from error
    if spec.plugin is not None:
        try:
            load_plugin(spec.plugin)
        except PluginNotFoundError as error:
            raise InvalidFieldError(
                "plugin", f"{error}; install it on the server before registering the task"
            ) from error
    return requirements


def upsert_task(session: Session, spec: TaskSpec) -> tuple[Task, bool]:
    """Register a task type or update it. A new version or new requirements re-evaluate the
    task's categories against every worker in this transaction."""
    requirements = _validate(spec)
    task = session.scalar(select(Task).where(Task.name == spec.name).with_for_update())
    if task is None:
        task = Task(
            name=spec.name,
            version=spec.version,
            description=spec.description,
            requirements=requirements,
            plugin=spec.plugin,
        )
        session.add(task)
        session.flush()
        announce.everything_changed(session)
        return task, True
    matching_changed = task.version != spec.version or task.requirements != requirements
    task.version = spec.version
    task.description = spec.description
    task.requirements = requirements
    task.plugin = spec.plugin
    session.flush()
    if matching_changed:
        recache_task_misfits(session, task.id)
    announce.everything_changed(session)
    return task, False


def get_task(session: Session, name: str, *, field: str | None = None) -> Task:
    """The task named ``name``. With ``field`` an unknown name is a bad field of a request
    (422, e.g. a job's ``task``); without, a missing resource (404)."""
    task = session.scalar(select(Task).where(Task.name == name))
    if task is not None:
        return task
    known = list(session.scalars(select(Task.name).order_by(Task.name)))
    message = f"unknown task {name!r}{did_you_mean(name, known)}"
    if field is not None:
        raise InvalidFieldError(field, message + "; register it with POST /v1/tasks first")
    raise NotFoundError(message)


def list_tasks(session: Session, *, limit: int | None = None, offset: int = 0) -> list[Task]:
    """Task types by name (``limit`` None: all of them)."""
    return rows_by_name(session, Task, limit=limit, offset=offset)


def requirements_json(task: Task) -> Any:
    return json.loads(task.requirements) if task.requirements is not None else None
