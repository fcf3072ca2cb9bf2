"""Many jobs in one transaction (POST /v1/jobs/bulk), and Grid Engine array jobs
(``qsub -t n-m:s``, ``-tc``), whose tasks are jobs of their own.

The outcome equals one :func:`app.matching.submission.submit_job` per job, in body order
(the same states, failures, categories and history), and is stored whole or not at all:
every body is checked before the first job is inserted. What the jobs of one request share
is decided once per request: its checks and category (:func:`~.submission.prepare`),
whether some worker fits it; the jobs, their history and the arrays are written with
one INSERT per table (arrays unnested on PostgreSQL, multi-row VALUES on SQLite), and
each category that got waiting jobs is announced once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ARRAY, bindparam, func, insert, select
from sqlalchemy.orm import Session

from app.db import dialect
from app.db.base import utcnow
from app.db.models import JobEventKind, JobState
from app.db.tables import JOB_ARRAYS, JOB_EVENTS, JOBS
from app.matching import announce, domain_events
from app.matching.errors import InvalidFieldError
from app.matching.ordering import usage as fair_share_usage
from app.matching.requests import check_job_fields
from app.matching.submission import (
    NO_SUITABLE_WORKER,
    JobSpec,
    Prepared,
    fails_at_once,
    job_values,
    prepare,
)
from app.notations.errors import NotationError
from app.notations.flux.idset import IdSet
from app.notations.gridengine.task_ranges import TaskRange, parse_task_range
from app.words import plural

#: Rows per INSERT statement: well under SQLite's 32,766 bound parameters (about 30 a job).
ROWS_PER_STATEMENT = 500
#: What the jobs of one request may differ in without another check or category.
_PER_JOB_FIELDS = ("priority", "command", "timeout")


@dataclass(frozen=True)
class BulkItem:
    """One body of a bulk submission: a job, or with ``tasks`` (qsub -t) an array of them."""

    spec: JobSpec
    tasks: str | None = None
    task_concurrency: int | None = None


@dataclass(frozen=True)
class Submitted:
    """What the answer says of each job stored."""

    id: int
    state: JobState
    array_id: int | None
    task_id: int | None
    failure_reason: str | None


def task_range(item: BulkItem) -> TaskRange | None:
    """The item's qsub -t range, None for a single job; InvalidFieldError for a bad one,
    or for -tc without -t."""
    if item.task_concurrency is not None and item.tasks is None:
        raise InvalidFieldError("task_concurrency", "qsub -tc limits an array job: give tasks too")
    if item.task_concurrency is not None and item.task_concurrency < 1:
        raise InvalidFieldError("task_concurrency", "at least 1 task at once")
    if item.tasks is None:
        return None
    try:
        return parse_task_range(item.tasks)
    except NotationError as error:
        raise InvalidFieldError("tasks", str(error), error) from error


def _request_key(spec: JobSpec) -> str:
    """The request without the fields a job of it may change alone."""
    fields = {k: v for k, v in vars(spec).items() if k not in _PER_JOB_FIELDS}
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class _Requests:
    """The checks, category and fit of each distinct request of one bulk submission."""

    def __init__(self, session: Session, submitter: str) -> None:
        self.session = session
        self.submitter = submitter
        self.prepared: dict[str, Prepared] = {}
        self.fails: dict[int, bool] = {}
        #: The last spec asked about and its answer.
        self.last: tuple[JobSpec, tuple[Prepared, bool]] | None = None

    def of(self, spec: JobSpec) -> tuple[Prepared, bool]:
        # Most bulk submissions repeat one body: a spec equal to the one before is the
        # same request, already checked, with the same answer.
        if self.last is not None and self.last[0] == spec:
            return self.last[1]
        self.last = (spec, self._of(spec))
        return self.last[1]

    def _of(self, spec: JobSpec) -> tuple[Prepared, bool]:
        key = _request_key(spec)
        prepared = self.prepared.get(key)
        if prepared is None:
            prepared = prepare(self.session, spec, submitter=self.submitter)
            self.prepared[key] = prepared
        else:
            check_job_fields(spec)
        category_id = prepared.category.id
        if category_id not in self.fails:
            self.fails[category_id] = fails_at_once(self.session, prepared)
        return prepared, self.fails[category_id]


def submit_jobs(
    session: Session, items: list[BulkItem], *, submitter: str, max_tasks: int
) -> list[Submitted]:
    """Store every job of ``items`` (an array's tasks in task order) or none: an
    InvalidFieldError names the body by its index (``jobs.3.resources``)."""
    requests = _Requests(session, submitter)
    planned: list[tuple[BulkItem, Prepared, bool, TaskRange | None]] = []
    total = 0
    for index, item in enumerate(items):
        try:
            ranged = task_range(item)
            total += ranged.count if ranged is not None else 1
            if total > max_tasks:
                raise InvalidFieldError(
                    "tasks",
                    f"the request would submit more than {plural(max_tasks, 'job')} "
                    "(JOBMATCH_MAX_BULK_TASKS)",
                )
            prepared, failed = requests.of(item.spec)
        except InvalidFieldError as error:
            raise InvalidFieldError(
                f"jobs.{index}.{error.field}", error.message, error.error, location=error.location
            ) from error
        planned.append((item, prepared, failed, ranged))
    now = utcnow()
    array_ids = _insert_arrays(session, planned, submitter, now)
    rows: list[dict[str, Any]] = []
    for (item, prepared, failed, ranged), array_id in zip(planned, array_ids, strict=True):
        values = job_values(
            item.spec, prepared, submitter=submitter, submitted_at=now, failed=failed
        )
        if ranged is None:
            rows.append({**values, "array_id": None, "task_id": None, "task_range": None})
        else:
            text = str(ranged)
            rows.extend(
                {**values, "array_id": array_id, "task_id": task_id, "task_range": text}
                for task_id in ranged.ids()
            )
    ids = _insert_returning_ids(session, JOBS, rows)
    fair_share_usage.if_fair_share(session, [submitter])
    _record_history(session, ids, rows)
    for category_id in sorted({r["category_id"] for r in rows if r["state"] is JobState.WAITING}):
        announce.job_waits(session, category_id)
    return [
        Submitted(job_id, r["state"], r["array_id"], r["task_id"], r["failure_reason"])
        for job_id, r in zip(ids, rows, strict=True)
    ]


def submitted(session: Session, ids: list[int]) -> list[Submitted]:
    """What the answer says of each of these jobs now, in the order of ``ids`` (a replayed
    bulk submission's: app/matching/idempotency.py). Read by id ranges: a bulk
    submission's ids are a few runs, and a list of ten thousand binds is not."""
    found: dict[int, Submitted] = {}
    for lo, hi in IdSet.from_ids(ids).runs:
        for row in session.execute(
            select(
                JOBS.c.id, JOBS.c.state, JOBS.c.array_id, JOBS.c.task_id, JOBS.c.failure_reason
            ).where(JOBS.c.id.between(lo, hi))
        ):
            found[row.id] = Submitted(
                row.id, JobState(row.state), row.array_id, row.task_id, row.failure_reason
            )
    return [found[job_id] for job_id in ids if job_id in found]


def _insert_arrays(
    session: Session,
    planned: list[tuple[BulkItem, Prepared, bool, TaskRange | None]],
    submitter: str,
    now: Any,
) -> list[int | None]:
    """One job_arrays row per array of the request: its id per item (None: no array)."""
    arrays = [
        {
            "first_task": ranged.first,
            "last_task": ranged.last,
            "step": ranged.step,
            "task_concurrency": item.task_concurrency,
            "submitter": submitter,
            "submitted_at": now,
        }
        for item, _prepared, _failed, ranged in planned
        if ranged is not None
    ]
    ids = iter(_insert_returning_ids(session, JOB_ARRAYS, arrays))
    return [next(ids) if ranged is not None else None for *_rest, ranged in planned]


def _insert_returning_ids(session: Session, table: Any, rows: list[dict[str, Any]]) -> list[int]:
    """Insert ``rows`` into ``table``; the new ids in row order. A column that is NULL in
    every row is left out of the statement (its default is NULL).

    PostgreSQL gets each column as one array parameter, unnested WITH ORDINALITY: a
    statement of a few lines whatever the number of rows. A multi-row VALUES list of 500
    rows had psycopg parse some 7,500 placeholders out of its text on every execution
    (too long for its cache of parsed queries): 25-45% of a 1,000-job request's time,
    measured. The rows go in ordered by their ordinal, and a row's id is drawn from the
    sequence as it is inserted, so the ids, sorted, are in row order. SQLite, in process,
    takes SQLAlchemy's multi-row INSERTs (insertmanyvalues)."""
    if not rows:
        return []
    columns = {key: [row[key] for row in rows] for key in rows[0]}
    used = [key for key, values in columns.items() if values.count(None) != len(values)]
    if dialect.binds_arrays(session.connection()):
        return _insert_unnested(session, table, columns, used)
    ids: list[int] = []
    statement = insert(table).returning(table.c.id, sort_by_parameter_order=True)
    for start in range(0, len(rows), ROWS_PER_STATEMENT):
        chunk = rows[start : start + ROWS_PER_STATEMENT]
        ids.extend(session.scalars(statement, [{k: row[k] for k in used} for row in chunk]).all())
    return ids


def _insert_unnested(
    session: Session, table: Any, columns: dict[str, list[Any]], used: list[str]
) -> list[int]:
    """PostgreSQL: ``INSERT ... SELECT FROM unnest(arrays) WITH ORDINALITY ORDER BY
    ordinality``; the new ids in row order."""
    # A column with one value in every row (the submitter, the time, most often the
    # category and everything a request of identical bodies asks) is bound once, not as
    # an array of copies: psycopg dumps an array element by element, in Python.
    varying = [key for key in used if columns[key].count(columns[key][0]) != len(columns[key])]
    if not varying:
        # Every column shared: one is still unnested, to give the statement its rows.
        varying = used[:1]
    arrays = [
        bindparam(f"u_{key}", columns[key], type_=ARRAY(table.c[key].type)) for key in varying
    ]
    given = (
        func.unnest(*arrays)
        .table_valued(*varying, with_ordinality="ordinal")
        .render_derived(name="given")
    )
    ordered = select(*(given.c[key] for key in varying), given.c.ordinal).order_by(given.c.ordinal)
    numbered = ordered.cte("numbered")
    values = [
        numbered.c[key]
        if key in varying
        else bindparam(f"u_{key}", columns[key][0], type_=table.c[key].type)
        for key in used
    ]
    statement = (
        insert(table)
        .from_select(used, select(*values).order_by(numbered.c.ordinal))
        .returning(table.c.id)
    )
    ids = sorted(session.scalars(statement).all())
    if len(ids) != len(columns[used[0]]):
        raise RuntimeError(f"inserted {len(ids)} rows of {len(columns[used[0]])}")
    return ids


def _record_history(session: Session, ids: list[int], rows: list[dict[str, Any]]) -> None:
    """The history rows :func:`app.matching.history.record` would add, in the same order
    per job (submitted, then failed for a job no worker fits), and their log lines."""
    events: list[dict[str, Any]] = []
    for job_id, row in zip(ids, rows, strict=True):
        events.append({"job_id": job_id, "kind": JobEventKind.SUBMITTED, "detail": None})
        domain_events.job_event(session, JobEventKind.SUBMITTED, job_id)
        if row["state"] is JobState.FAILED:
            events.append(
                {"job_id": job_id, "kind": JobEventKind.FAILED, "detail": NO_SUITABLE_WORKER}
            )
            domain_events.job_event(session, JobEventKind.FAILED, job_id, detail=NO_SUITABLE_WORKER)
    _insert_returning_ids(session, JOB_EVENTS, events)
