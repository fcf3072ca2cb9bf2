"""Ranked eligible workers of a job: SQL filters, Python computes Momotor strengths.

Order: strength (lower is a better match), then the worker's first queue in queue order,
then the worker's name.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import (
    UNAVAILABLE_WORKER_STATES,
    Category,
    CategoryMisfit,
    CategoryNodeNeed,
    CategoryShape,
    InventoryCount,
    Job,
    JobState,
    Queue,
    QueueInstance,
    Task,
    Worker,
    WorkerInventory,
    WorkerProperty,
    WorkerState,
)
from app.matching.categories import accepted_by_plugin, get_or_create_category
from app.matching.category_fit import current_misfit, too_few_nodes
from app.matching.debusine.metadata import read_metadata
from app.matching.debusine.registry import get_task
from app.matching.errors import ConflictError, NotFoundError
from app.matching.explain import (
    bare_worker_clauses,
    constraint_clauses,
    inventory_clauses,
    plugin_clause,
    slot_clauses,
    state_clauses,
    tag_clauses,
    task_clauses,
)
from app.matching.gridengine.table import load_table
from app.matching.misfits import fits_category, reasons_now
from app.matching.momotor.rows import parse_resources
from app.matching.requests import JobSpec, parse_request
from app.matching.slots import worker_free_slots
from app.notations.debusine.metadata import Requirement, parse_requirement
from app.notations.flux.constraints import Target, parse_constraint
from app.notations.momotor.resources import Resources
from app.notations.momotor.strengths import NoMatch
from app.task_plugins import can_run_on
from app.wire.explanation import Clause

log = logging.getLogger(__name__)

STRENGTH_NAMES = {
    -math.inf: "STRONGEST",
    -1.0: "STRONG",
    0.0: "NEUTRAL",
    1.0: "WEAK",
    math.inf: "WEAKEST",
}


@dataclass(frozen=True)
class Candidate:
    worker: str
    strength: float
    free_slots: int
    state: WorkerState

    @property
    def strength_name(self) -> str:
        return STRENGTH_NAMES.get(self.strength, "")


def _candidates(
    session: Session, category_id: int, resources: str, job_task: Task | None = None
) -> list[Candidate]:
    free = worker_free_slots(func.sum)
    # A queue instance's own seq_no (a per-host value), else its cluster queue's.
    first_queue = (
        select(func.min(func.coalesce(QueueInstance.seq_no, Queue.seq_no)))
        .select_from(Queue)
        .join(QueueInstance, QueueInstance.queue_id == Queue.id)
        .where(QueueInstance.worker_id == Worker.id)
        .scalar_subquery()
    )
    category = session.get(Category, category_id)
    if category is None or too_few_nodes(session, category_id) is not None:
        # No set of registered workers could hold it (issue 35): nobody is a candidate.
        return []
    rows = session.execute(
        select(Worker.id, Worker.name, Worker.resources, Worker.state, free, first_queue).where(
            Worker.state.not_in(UNAVAILABLE_WORKER_STATES),
            fits_category(category, Worker.id, Worker.generation),
        )
    ).all()
    if job_task is not None and job_task.plugin is not None:
        # The task's can_run_on plug-in, on the workers SQL kept and on no others.
        accepted = accepted_by_plugin(session, job_task, [row[0] for row in rows])
        rows = [row for row in rows if row[0] in accepted]
    task = parse_resources(resources)
    strengths: dict[str, float | None] = {}  # many workers share one definition
    ranked: list[tuple[float, int, str, Candidate]] = []
    for _id, name, worker_resources, state, free_slots, queue_seq in rows:
        if worker_resources not in strengths:
            try:
                strengths[worker_resources] = task.match(Resources.from_string(worker_resources))
            except NoMatch:
                # The SQL predicates and Momotor's table disagree: a bug, never hidden.
                log.error("SQL kept worker %s but Momotor says NoMatch", name)
                strengths[worker_resources] = None
        strength = strengths[worker_resources]
        if strength is None:
            continue
        candidate = Candidate(name, strength, int(free_slots), state)
        ranked.append((strength, queue_seq if queue_seq is not None else 0, name, candidate))
    ranked.sort(key=lambda entry: entry[:3])
    return [entry[3] for entry in ranked]


def _job_task(session: Session, name: str | None) -> Task | None:
    return session.scalar(select(Task).where(Task.name == name)) if name is not None else None


def require_waiting(session: Session, job: Job) -> None:
    """Candidates and placements are computed for waiting jobs; for any other job say
    what it is instead (ConflictError), rather than answer as if it waited."""
    if job.state is JobState.WAITING:
        return
    if job.state is JobState.RUNNING:
        where = session.scalar(select(Worker.name).where(Worker.id == job.worker_id))
        now = f"is running on {where}" if where is not None else "is running"
    elif job.failure_reason:
        now = f"is {job.state.value} ({job.failure_reason})"
    else:
        now = f"is {job.state.value}"
    raise ConflictError(f"job {job.id} {now}; candidates are computed for waiting jobs")


def job_candidates(session: Session, job: Job) -> list[Candidate]:
    return _candidates(session, job.category_id, job.resources, _job_task(session, job.task))


def dry_run(session: Session, spec: JobSpec) -> list[Candidate]:
    """The candidates a job would have, computed in a savepoint that is rolled back."""
    request = parse_request(spec, load_table(session))
    task = get_task(session, spec.task, field="task") if spec.task is not None else None
    savepoint = session.begin_nested()
    try:
        category = get_or_create_category(session, request, task.id if task else None)
        return _candidates(session, category.id, spec.resources, task)
    finally:
        savepoint.rollback()


@dataclass(frozen=True)
class StaticExplanation:
    """One worker against a job's request alone (what it is and offers, not what it runs
    now): ``eligible`` when no clause fails."""

    worker: str
    eligible: bool
    #: The reason code cached in SQL (category_misfits), None when SQL says it fits.
    misfit_reason: str | None
    clauses: list[Clause]


def explain_job(
    session: Session, job: Job, worker_name: str | None = None
) -> list[StaticExplanation]:
    """For each worker (or the one named): every clause that keeps it from running the job."""
    largest = (
        select(func.coalesce(func.max(QueueInstance.slots), 0))
        .where(QueueInstance.worker_id == Worker.id)
        .scalar_subquery()
    )
    category = session.get(Category, job.category_id)
    listed_misfit = (
        select(CategoryMisfit.reason).where(current_misfit(job.category_id)).scalar_subquery()
    )
    query = select(
        Worker.id, Worker.name, Worker.rank, Worker.resources, Worker.state, largest, listed_misfit
    ).order_by(Worker.name)
    if worker_name is not None:
        query = query.where(Worker.name == worker_name)
    rows: list[tuple[Any, ...]] = [tuple(row) for row in session.execute(query)]
    if worker_name is not None and not rows:
        raise NotFoundError(f"no worker named {worker_name!r}")
    if category is not None and category.lists_fits:
        # Only the fits are stored: the reasons of the others are computed now.
        computed = reasons_now(session, category.id, [row[0] for row in rows])
        rows = [(*row[:-1], computed.get(row[0])) for row in rows]
    task = parse_resources(job.resources)
    tree = (
        parse_constraint(json.loads(category.constraint))
        if category and category.constraint
        else None
    )
    properties = worker_properties(session, [row[0] for row in rows]) if tree else {}
    job_task = _job_task(session, job.task)
    requirements = (
        parse_requirement(json.loads(job_task.requirements))
        if job_task is not None and job_task.requirements is not None
        else None
    )
    needs = {
        (t, u): int(n)
        for t, u, n in session.execute(
            select(CategoryNodeNeed.type, CategoryNodeNeed.unit, CategoryNodeNeed.amount).where(
                CategoryNodeNeed.category_id == job.category_id
            )
        )
    }
    totals = inventory_totals(session, [row[0] for row in rows]) if needs else {}
    shape = session.execute(
        select(CategoryShape.min_nodes, CategoryShape.cores_alone).where(
            CategoryShape.category_id == job.category_id
        )
    ).one_or_none()
    if shape is not None:
        # Workers without an inventory (they offer node/[core=<slots>], issue 35).
        totals = totals or inventory_totals(session, [row[0] for row in rows])
    explanations = []
    for worker_id, name, rank, resources, state, largest_slots, reason in rows:
        target = Target(hostname=name, rank=rank, properties=properties.get(worker_id, frozenset()))
        clauses = [
            *state_clauses(state),
            *tag_clauses(task, Resources.from_string(resources)),
            *(constraint_clauses(tree, target) if tree is not None else []),
            *slot_clauses(job.slots, int(largest_slots)),
            *inventory_clauses(needs, totals.get(worker_id)),
            *(
                bare_worker_clauses(shape[0], shape[1], int(largest_slots))
                if shape is not None and worker_id not in totals
                else []
            ),
        ]
        if job_task is not None:
            clauses += _task_explanation(session, job_task, requirements, worker_id, clauses)
        explanations.append(StaticExplanation(name, not clauses, reason, clauses))
    return explanations


def _task_explanation(
    session: Session,
    task: Task,
    requirements: Requirement | None,
    worker_id: int,
    other_clauses: list[Clause],
) -> list[Clause]:
    """The debusine clauses (issue #8) of one worker; the plug-in is asked only when nothing
    declared refuses (it runs on SQL survivors only, as in matching)."""
    worker = session.get(Worker, worker_id)
    assert worker is not None
    view = read_metadata(session, worker)
    clauses = task_clauses(
        task.name, task.version, requirements, view.static, view.versions, view.effective
    )
    declared_fit = not clauses and not other_clauses
    if declared_fit and task.plugin is not None and not can_run_on(task.plugin, view.effective):
        clauses.append(plugin_clause(task.name, task.plugin))
    return clauses


def inventory_totals(
    session: Session, worker_ids: list[int]
) -> dict[int, dict[tuple[str, str], int]]:
    """Everything each worker's inventory holds, per (type, unit); workers without an
    inventory are left out."""
    found: dict[int, dict[tuple[str, str], int]] = {
        worker_id: {}
        for worker_id in session.scalars(
            select(WorkerInventory.worker_id).where(WorkerInventory.worker_id.in_(worker_ids))
        )
    }
    for worker_id, type_, unit, total in session.execute(
        select(
            InventoryCount.worker_id, InventoryCount.type, InventoryCount.unit, InventoryCount.total
        ).where(InventoryCount.worker_id.in_(worker_ids))
    ):
        found[worker_id][(type_, unit)] = int(total)
    return found


def worker_properties(session: Session, worker_ids: list[int]) -> dict[int, frozenset[str]]:
    """The properties of the given workers."""
    found: dict[int, set[str]] = {}
    for worker_id, name in session.execute(
        select(WorkerProperty.worker_id, WorkerProperty.name).where(
            WorkerProperty.worker_id.in_(worker_ids)
        )
    ):
        found.setdefault(worker_id, set()).add(name)
    return {worker_id: frozenset(names) for worker_id, names in found.items()}
