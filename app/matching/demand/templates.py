"""Worker templates (issue 40): the kinds of worker an autoscaler can create. A template is
a worker body as ``POST /v1/workers`` takes it, without a name, and is checked by
registering it as such in a savepoint that is rolled back: what a registration refuses, a
template refuses, with the same field names, and nothing is stored."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import Category, Worker, WorkerState, WorkerTemplate
from app.matching.demand.sandbox import rolled_back
from app.matching.errors import InvalidFieldError, NotFoundError
from app.matching.misfits import worker_fits
from app.matching.worker_lifecycle import register_worker
from app.matching.workers import WorkerSpec
from app.wire.queues import QueueSpec

#: What a job that waits for a new worker of a template is said to wait for.
WAITING_FOR = "waiting for a worker like template {}"

#: Who registers a template's simulated workers (the services record it where they would).
SIMULATOR = "demand"


@dataclass(frozen=True)
class Template:
    """A stored template: its name, the worker body (JSON object), what one new worker of
    it costs and how many an autoscaler may create (None: no limit)."""

    name: str
    body: dict[str, Any]
    cost: float
    max_count: int | None

    def spec(self, worker_name: str) -> WorkerSpec:
        """The registration of one new worker of this template named ``worker_name``."""
        body = self.body
        return WorkerSpec(
            name=worker_name,
            resources=body.get("resources", ""),
            slots=body.get("slots", 1),
            state=WorkerState(body.get("state", WorkerState.ACTIVE.value)),
            queues=tuple(QueueSpec(q["name"], q["slots"]) for q in body.get("queues") or ()),
            properties=tuple(body.get("properties", ())),
            inventory=body.get("inventory"),
        )


def _template(row: WorkerTemplate) -> Template:
    return Template(row.name, json.loads(row.body), row.cost, row.max_count)


def free_worker_name(session: Session, template: str, index: int) -> str:
    """A worker name no registered worker has, for the ``index``-th simulated worker of
    ``template`` (``<template>-new<index>``, with ``x`` added until it is free)."""
    name = f"{template}-new{index}"
    while session.scalar(select(Worker.id).where(Worker.name == name)) is not None:
        name += "x"
    return name


def register_simulated(session: Session, template: Template, index: int) -> Worker:
    """Register the ``index``-th new worker of the template (the caller rolls it back)."""
    name = free_worker_name(session, template.name, index)
    worker, _created = register_worker(session, template.spec(name), by=SIMULATOR, replace=False)
    return worker


def fitting_categories(
    session: Session, templates: Iterable[Template], category_ids: Iterable[int]
) -> dict[int, str]:
    """For each of the categories that a new worker of some template would fit (the
    misfit cache, as a submission reads it), the first such template's name, templates
    in the order given."""
    wanted = sorted(set(category_ids))
    found: dict[int, str] = {}
    for template in templates:
        left = [category_id for category_id in wanted if category_id not in found]
        if not left:
            break
        with rolled_back(session):
            worker = register_simulated(session, template, 1)
            fitting = session.scalars(
                select(Category.id).where(
                    Category.id.in_(left), worker_fits(Category, worker.id, worker.generation)
                )
            ).all()
        for category_id in fitting:
            found[category_id] = template.name
    return found


def check_template(session: Session, template: Template) -> None:
    """Register one worker of the template in a savepoint that is rolled back: a refusal
    is the registration's (InvalidFieldError naming the body's field)."""
    if template.body.get("rank") is not None:
        raise InvalidFieldError(
            "rank", "a template stands for many workers, which cannot share one rank"
        )
    if template.max_count is not None and template.max_count < 0:
        raise InvalidFieldError("max_count", "expected a count of workers, 0 or more")
    if template.cost < 0:
        raise InvalidFieldError("cost", "expected a cost of 0 or more")
    with rolled_back(session):
        register_worker(
            session,
            template.spec(free_worker_name(session, template.name, 1)),
            by=SIMULATOR,
            replace=False,
        )


def put_template(session: Session, template: Template) -> tuple[Template, bool]:
    """Store the template, replacing the one of that name (checked first: nothing is
    stored when it is refused). Returns (template, created)."""
    check_template(session, template)
    row = session.scalar(select(WorkerTemplate).where(WorkerTemplate.name == template.name))
    created = row is None
    if row is None:
        row = WorkerTemplate(name=template.name)
        session.add(row)
    row.body = json.dumps(template.body, sort_keys=True)
    row.cost = template.cost
    row.max_count = template.max_count
    row.updated_at = utcnow()
    session.flush()
    return _template(row), created


def get_template(session: Session, name: str) -> Template:
    row = session.scalar(select(WorkerTemplate).where(WorkerTemplate.name == name))
    if row is None:
        raise NotFoundError(f"no worker template named {name!r}")
    return _template(row)


def list_templates(
    session: Session, *, limit: int | None = None, offset: int = 0
) -> list[Template]:
    """Templates by name."""
    query = select(WorkerTemplate).order_by(WorkerTemplate.name).offset(offset)
    if limit is not None:
        query = query.limit(limit)
    return [_template(row) for row in session.scalars(query)]


def templates_named(session: Session, names: list[str]) -> list[Template]:
    """The named templates, in the order given (NotFoundError for a name not stored)."""
    found = {t.name: t for t in list_templates(session) if t.name in set(names)}
    missing = [name for name in names if name not in found]
    if missing:
        raise InvalidFieldError(
            "templates",
            f"no worker template named {', '.join(map(repr, missing))}",
            location="query",
        )
    return [found[name] for name in names]


def delete_template(session: Session, name: str) -> None:
    row = session.scalar(select(WorkerTemplate).where(WorkerTemplate.name == name))
    if row is None:
        raise NotFoundError(f"no worker template named {name!r}")
    session.delete(row)
    session.flush()


def any_template(session: Session) -> bool:
    """Whether some template is registered (then jobs may wait for its workers)."""
    return session.scalar(select(WorkerTemplate.id).limit(1)) is not None


def template_for(session: Session, category_id: int) -> str | None:
    """The first worker template (by name) whose new worker would fit the category, as
    the misfit cache says with the worker registered in a savepoint; None without one.
    What a submission asks of a job no registered worker fits, and what an explanation
    says it waits for."""
    if not any_template(session):
        return None
    return fitting_categories(session, list_templates(session), [category_id]).get(category_id)
