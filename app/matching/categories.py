"""Job categories: equal requests share one row, its tag rows and its cached misfits."""

from __future__ import annotations

import hashlib
import json

from sqlalchemy import exists, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db.models import (
    UNAVAILABLE_WORKER_STATES,
    Category,
    CategoryTag,
    CategoryTask,
    Task,
    Worker,
)
from app.matching.allocation.inventory import store_category_needs
from app.matching.allocation.vertex_requests import build_requests
from app.matching.debusine.metadata import effective_metadata
from app.matching.flux.rows import store_resource_vertices
from app.matching.flux.sql import store_constraint_rows
from app.matching.gridengine.queue_lists import store_queue_refs
from app.matching.gridengine.rows import store_category_requests
from app.matching.misfits import cache_category_misfits, fits_category
from app.matching.momotor.rows import canonical_resources, tag_rows
from app.matching.requests import ParsedRequest
from app.metrics import CATEGORY_LOOKUPS
from app.task_plugins import can_run_on


def category_key(request: ParsedRequest) -> str:
    """Canonical JSON of everything a job asks for; equal keys mean equal matching."""
    key: dict[str, object] = {
        "resources": canonical_resources(request.tags),
        "slots": request.slots,
        "constraint": request.constraint_json,
        "jobspec": request.jobspec_json,
    }
    # Grid Engine parts only when present, so that keys of other jobs stay as they were.
    if request.hard.requests:
        key["hard"] = request.hard.category_text()
    if request.soft.requests:
        key["soft"] = request.soft.category_text()
    if request.pe is not None:
        key["pe"] = [request.pe, request.pe_min, request.pe_max]
    if request.queues:
        queues = request.queues
        key["queues"] = [
            queues.hard.category_text(),
            queues.master.category_text(),
            queues.soft.category_text(),
        ]
    if request.task is not None:
        # The task's name only: its version and requirements live in the registry, and a
        # change there re-evaluates the task's categories (recache_task_misfits).
        key["task"] = request.task
    return json.dumps(
        key,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )


def get_or_create_category(
    session: Session, request: ParsedRequest, task_id: int | None = None
) -> Category:
    """The category of the request (``task_id``: its task's row, when it names one)."""
    key = category_key(request)
    key_hash = hashlib.sha256(key.encode("utf-8")).hexdigest()
    category = session.scalar(select(Category).where(Category.key_hash == key_hash))
    if category is not None:
        CATEGORY_LOOKUPS.labels("hit").inc()
        return category
    CATEGORY_LOOKUPS.labels("miss").inc()
    try:
        # A concurrent submission of the same new request may win the unique key; then
        # this savepoint is rolled back and its row is used instead.
        with session.begin_nested():
            category = Category(
                key_hash=key_hash,
                key=key,
                resources=canonical_resources(request.tags),
                slots=request.slots,
                constraint=request.constraint_json,
                jobspec=request.jobspec_json,
                hard=request.hard.category_text(),
                soft=request.soft.category_text(),
                pe=request.pe,
                pe_min=request.pe_min,
                pe_max=request.pe_max,
                queue_list=request.queues.hard.category_text(),
                master_queue_list=request.queues.master.category_text(),
                soft_queue_list=request.queues.soft.category_text(),
            )
            session.add(category)
            session.flush()
    except IntegrityError:
        existing = session.scalar(select(Category).where(Category.key_hash == key_hash))
        if existing is None:
            raise
        return existing
    rows = [
        {"category_id": category.id, "group_name": g, "value": v, "mode": m}
        for g, v, m in tag_rows(request.tags)
    ]
    if rows:
        session.execute(insert(CategoryTag), rows)
    if request.constraint is not None:
        store_constraint_rows(session, category.id, request.constraint)
    if request.jobspec is not None:
        store_resource_vertices(session, category.id, request.jobspec)
        store_category_needs(session, category.id, build_requests(request.jobspec))
    if task_id is not None:
        session.add(CategoryTask(category_id=category.id, task_id=task_id))
        session.flush()
    store_category_requests(session, category.id, request.hard, request.soft)
    store_queue_refs(session, category.id, request.queues)
    cache_category_misfits(session, category, task_id)
    return category


#: Workers whose metadata one round of plug-in checks loads.
PLUGIN_BATCH = 100


def any_worker_fits(session: Session, category_id: int, task: Task | None = None) -> bool:
    """Whether some registered worker could run the category's jobs, whatever runs now
    (offline and disabled workers do not count; draining ones do).
    A task's ``can_run_on`` plug-in runs only on the workers SQL kept, until one accepts."""
    category = session.get(Category, category_id)
    if category is None:
        return False
    if task is None or task.plugin is None:
        return bool(
            session.scalar(
                select(
                    exists(
                        select(Worker.id).where(
                            Worker.state.not_in(UNAVAILABLE_WORKER_STATES),
                            fits_category(category, Worker.id, Worker.generation),
                        )
                    )
                )
            )
        )
    survivors = list(
        session.scalars(
            select(Worker.id)
            .where(
                Worker.state.not_in(UNAVAILABLE_WORKER_STATES),
                fits_category(category, Worker.id, Worker.generation),
            )
            .order_by(Worker.id)
        )
    )
    return bool(accepted_by_plugin(session, task, survivors, first_only=True))


def accepted_by_plugin(
    session: Session, task: Task, worker_ids: list[int], *, first_only: bool = False
) -> set[int]:
    """The workers among ``worker_ids`` that the task's plug-in accepts (all of them when
    the task has none); with ``first_only`` it stops at the first acceptance."""
    if task.plugin is None:
        return set(worker_ids)
    accepted: set[int] = set()
    for start in range(0, len(worker_ids), PLUGIN_BATCH):
        batch = worker_ids[start : start + PLUGIN_BATCH]
        for worker_id, metadata in effective_metadata(session, batch).items():
            if can_run_on(task.plugin, metadata):
                accepted.add(worker_id)
                if first_only:
                    return accepted
    return accepted
