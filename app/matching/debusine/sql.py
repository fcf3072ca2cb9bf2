"""Task requirements (app/notations/debusine/metadata.py) as SQL predicates over a worker's
effective metadata rows, and the allow/deny and version clauses of debusine issue #8.

Each leaf is one EXISTS over ``worker_metadata`` rows of the worker that are effective
(static over dynamic), so a requirement costs one indexed lookup per leaf and never calls
Python. The semantics are those of ``app.notations.debusine.metadata.evaluate``; the tests hold the
two to the same answers on both databases.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, and_, case, exists, false, not_, or_, true
from sqlalchemy.orm import aliased

from app.db.models import Task, Worker, WorkerMetadata, WorkerMetadataNamespace
from app.matching.reasons import MisfitClauses, MisfitPair, ReasonClause
from app.notations.debusine.metadata import (
    ALLOWLIST,
    DENYLIST,
    All,
    Any_,
    Compare,
    Contains,
    Exists,
    In,
    Not,
    Requirement,
    Scalar,
)

SCALAR_TYPES = ("string", "number", "boolean")


def _equals(row: type[WorkerMetadata], value: Scalar) -> ColumnElement[bool]:
    """The row holds the scalar ``value`` (booleans are not numbers, 1 equals 1.0)."""
    if isinstance(value, bool):
        return and_(row.value_type == "boolean", row.value_bool.is_(value))
    if isinstance(value, str):
        return and_(row.value_type == "string", row.value_text == value)
    return and_(row.value_type == "number", row.value_number == float(value))


def _one_of(row: type[WorkerMetadata], values: tuple[Scalar, ...]) -> ColumnElement[bool]:
    texts = [v for v in values if isinstance(v, str)]
    bools = [v for v in values if isinstance(v, bool)]
    numbers = [float(v) for v in values if not isinstance(v, (str, bool))]
    terms: list[ColumnElement[bool]] = []
    if texts:
        terms.append(and_(row.value_type == "string", row.value_text.in_(texts)))
    if numbers:
        terms.append(and_(row.value_type == "number", row.value_number.in_(numbers)))
    for flag in sorted(set(bools)):
        terms.append(and_(row.value_type == "boolean", row.value_bool.is_(flag)))
    return or_(*terms) if terms else false()


def _leaf(node: Exists | Compare | In | Contains, worker: type[Worker]) -> ColumnElement[bool]:
    row = aliased(WorkerMetadata)
    base = [row.worker_id == worker.id, row.key == node.key, row.effective.is_(True)]
    condition: ColumnElement[bool]
    if isinstance(node, Contains):
        return exists().where(*base, row.element.is_not(None), _equals(row, node.value))
    base.append(row.element.is_(None))
    if isinstance(node, Exists):
        condition = true()
    elif isinstance(node, In):
        condition = _one_of(row, node.values)
    elif node.op == "eq":
        condition = _equals(row, node.value)
    elif node.op == "ne":
        condition = and_(row.value_type.in_(SCALAR_TYPES), not_(_equals(row, node.value)))
    else:
        limit = float(node.value)
        number = row.value_number
        compared = {
            "lt": number < limit,
            "le": number <= limit,
            "gt": number > limit,
            "ge": number >= limit,
        }[node.op]
        condition = and_(row.value_type == "number", compared)
    return exists().where(*base, condition)


def compile_requirement(node: Requirement, worker: type[Worker]) -> ColumnElement[bool]:
    """The requirement tree as a boolean predicate on ``worker``."""
    if isinstance(node, All):
        return and_(true(), *(compile_requirement(t, worker) for t in node.terms))
    if isinstance(node, Any_):
        return or_(false(), *(compile_requirement(t, worker) for t in node.terms))
    if isinstance(node, Not):
        return not_(compile_requirement(node.term, worker))
    return _leaf(node, worker)


def _listed(worker: type[Worker], key: str, task: type[Task]) -> ColumnElement[bool]:
    row = aliased(WorkerMetadata)
    return exists().where(
        row.worker_id == worker.id,
        row.key == key,
        row.effective.is_(True),
        row.element.is_not(None),
        row.value_type == "string",
        row.value_text == task.name,
    )


def task_denied(worker: type[Worker], task: type[Task]) -> ColumnElement[bool]:
    """debusine's precedence: a present allowlist is the whole list (the denylist is then
    ignored), otherwise the denylist excludes."""
    row = aliased(WorkerMetadata)
    has_allowlist = exists().where(
        row.worker_id == worker.id,
        row.key == ALLOWLIST,
        row.effective.is_(True),
        row.element.is_(None),
    )
    return case(
        (has_allowlist, not_(_listed(worker, ALLOWLIST, task))),
        else_=_listed(worker, DENYLIST, task),
    )


def task_version_differs(worker: type[Worker], task: type[Task]) -> ColumnElement[bool]:
    """The worker has not reported the task's namespace at the task's registered version."""
    namespace = aliased(WorkerMetadataNamespace)
    return ~exists().where(
        namespace.worker_id == worker.id,
        namespace.namespace == task.name,
        namespace.version == task.version,
    )


REASONS = {
    "task-denied": "the worker's tasks_allowlist or tasks_denylist refuses the job's task",
    "task-version": "the worker reports another version of the job's task, or none",
    "task-requirements": "the task's requirements do not hold on the worker's metadata",
}


def _misfit_clauses(pair: MisfitPair) -> tuple[ReasonClause, ...]:
    """``Task`` is the category's task, outer-joined by the misfit statement (NULL
    columns for a category without one); ``requirements_ok`` the compiled requirements of
    the tasks in question (true: none)."""
    worker = pair.worker
    requirements = pair.requirements_ok if pair.requirements_ok is not None else true()
    return (
        (and_(Task.id.is_not(None), task_denied(worker, Task)), "task-denied"),
        (and_(Task.id.is_not(None), task_version_differs(worker, Task)), "task-version"),
        (not_(requirements), "task-requirements"),
    )


MISFITS = MisfitClauses(REASONS, _misfit_clauses)
