"""The common submission on PostgreSQL, without a Session or ORM objects (issue 38).

Most submissions ask for Momotor tags or a Flux constraint only, of a category that
exists already. For those, :func:`app.matching.submission.submit_job` reads the
attribute table, looks the category up, asks whether some worker fits it, inserts the job
and its history through the unit of work and announces it at the commit: about seven
statements and the ORM around them. Here the same decisions take two statements, both
:class:`~app.db.prebuilt.Prebuilt` on the event loop's connection (app/db/event_loop.py):

* :data:`LOOKUP`: the category by its key's hash, and whether some available worker
  fits it (asked each time: workers change);
* :data:`INSERT`: one statement of data-modifying CTEs that inserts the job and its
  history rows (submitted, and failed for a job no worker fits) and, for a waiting job,
  sends the announcement with ``pg_notify`` in the statement, as the pull's take does.

What they cannot decide (:func:`plain_request` refuses the body, or the category does
not exist yet) is answered None before anything is written: the caller rolls back and
the general way decides, creating the category and wording any error.
``tests/api/test_express.py`` holds both ways to the same answers and rows.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from sqlalchemy import (
    String,
    bindparam,
    case,
    exists,
    insert,
    literal,
    null,
    select,
    true,
    union_all,
)

from app.db import notify
from app.db.event_loop import LoopTransaction
from app.db.models import Category, JobEventKind, JobState
from app.db.models.enums import UNAVAILABLE_WORKER_STATES
from app.db.prebuilt import Prebuilt
from app.db.tables import (
    CATEGORIES,
    CATEGORY_FITS,
    CATEGORY_MISFITS,
    JOB_EVENTS,
    JOBS,
    WORKER_TEMPLATES,
    WORKERS,
)
from app.matching.announce import job_token_column
from app.matching.categories import category_key
from app.matching.domain_events import job_event
from app.matching.errors import InvalidFieldError
from app.matching.requests import JobSpec, ParsedRequest, parse_request
from app.matching.submission import NO_SUITABLE_WORKER, VERIFY_LEVELS, Prepared, job_values
from app.matching.wakeups import WAITING, job_waiting
from app.metrics import CATEGORY_LOOKUPS


def _cache_row(table: Any) -> Any:
    """A row of the category's fit cache (``table``) for the worker at its generation
    (app/matching/misfits.py), correlated to both by hand: they are two levels out."""
    return (
        exists()
        .where(
            table.c.category_id == CATEGORIES.c.id,
            table.c.worker_id == WORKERS.c.id,
            table.c.generation == WORKERS.c.generation,
        )
        .correlate(CATEGORIES, WORKERS)
    )


#: The category of a key hash, whether some available worker fits it (by its fit rows for
#: a category that lists them, else by the absence of misfit rows, as
#: :func:`app.matching.misfits.fits` decides) and whether any worker template is
#: registered (then a job no worker fits may wait for one: the general way decides).
LOOKUP = Prebuilt(
    select(
        CATEGORIES.c.id,
        exists(
            select(WORKERS.c.id).where(
                # One comparison per state: an IN list would expand at each execution.
                *(WORKERS.c.state != state for state in UNAVAILABLE_WORKER_STATES),
                case(
                    (CATEGORIES.c.lists_fits, _cache_row(CATEGORY_FITS)),
                    else_=~_cache_row(CATEGORY_MISFITS),
                ),
            )
        ),
        exists(select(WORKER_TEMPLATES.c.id)),
    ).where(CATEGORIES.c.key_hash == bindparam("p_key_hash", type_=String))
)

#: The columns :func:`app.matching.submission.job_values` gives a new job.
_VALUE_COLUMNS = tuple(
    job_values(
        JobSpec(),
        Prepared(parse_request(JobSpec()), None, None, Category(id=0)),
        submitter="",
        submitted_at=datetime.min,
        failed=False,
    )
)
_JOB_COLUMNS = tuple(column.name for column in JOBS.c)


def _insert(failed: bool) -> Any:
    """The job, its history rows and (waiting) its announcement, in one statement; the
    job's columns back."""
    values: dict[str, Any] = {
        name: bindparam(f"p_{name}", type_=JOBS.c[name].type) for name in _VALUE_COLUMNS
    }
    # The columns' own defaults, given here: SQLAlchemy sends a default per execution,
    # which a statement compiled once cannot.
    values |= {"attempts": 0, "awaiting_pickup": False}
    job = insert(JOBS).values(values).returning(*JOBS.c).cte("job")
    kind_type = JOB_EVENTS.c.kind.type
    at = bindparam("p_submitted_at", type_=JOB_EVENTS.c.at.type)
    events = [select(job.c.id, literal(JobEventKind.SUBMITTED, kind_type), null(), at)]
    if failed:
        events.append(
            select(
                job.c.id,
                literal(JobEventKind.FAILED, kind_type),
                literal(NO_SUITABLE_WORKER, JOB_EVENTS.c.detail.type),
                at,
            )
        )
    source = events[0] if len(events) == 1 else union_all(*events)
    recorded = insert(JOB_EVENTS).from_select(["job_id", "kind", "detail", "at"], source)
    answer = select(*job.c)
    if not failed:
        # A SELECT in WITH runs only when read: the answer reads it.
        announced = (
            select(notify.notify_column(job_token_column(WAITING, job.c.category_id, job.c.id)))
            .select_from(job)
            .cte("announced")
        )
        answer = select(*job.c, *announced.c).select_from(job.outerjoin(announced, true()))
    return answer.add_cte(recorded.cte("recorded"))


#: By whether the job fails at once ("No suitable worker found").
INSERT = {failed: Prebuilt(_insert(failed)) for failed in (False, True)}


def plain_request(spec: JobSpec) -> ParsedRequest | None:
    """The parsed request of a body that needs nothing but SQL to submit: no Grid Engine
    field, project or ``-w e``, no task, no shape or jobspec. None for any other body,
    and for one the parser refuses (the route words the error)."""
    if (
        spec.task is not None
        or spec.project is not None
        or spec.verify not in VERIFY_LEVELS
        or spec.verify == "e"
        or spec.hard.strip()
        or spec.soft.strip()
        or spec.pe is not None
        or spec.pe_slots is not None
        or spec.queue_list
        or spec.master_queue_list
        or spec.soft_queue_list
        or spec.shape is not None
        or spec.jobspec is not None
    ):
        return None
    try:
        request = parse_request(spec)
    except InvalidFieldError:
        return None
    return None if request.grid_engine else request


@dataclass(frozen=True)
class Submitted:
    """The job the express submission stored (its columns as attributes)."""

    job: SimpleNamespace


def key_hash(request: ParsedRequest) -> str:
    """The hash :func:`app.matching.categories.get_or_create_category` looks a category
    up by."""
    return hashlib.sha256(category_key(request).encode("utf-8")).hexdigest()


async def submit_on_loop(
    transaction: LoopTransaction,
    spec: JobSpec,
    request: ParsedRequest,
    *,
    submitter: str,
    now: datetime,
) -> Submitted | None:
    """Store the job of a plain request (:func:`plain_request`) as
    :func:`app.matching.submission.submit_job` would; the caller commits. None, having
    written nothing, when the category does not exist yet: the general way creates it."""
    (found,) = await transaction.rows((LOOKUP, {"p_key_hash": key_hash(request)}))
    if not found:
        return None
    ((category_id, fits, templates),) = found
    if not fits and templates:
        # Whether a template's new worker would fit it takes a registration in a
        # savepoint (app/matching/submission): the general way's.
        return None
    failed = not fits
    prepared = Prepared(request, None, None, Category(id=category_id))
    values = job_values(spec, prepared, submitter=submitter, submitted_at=now, failed=failed)
    params = {f"p_{name}": value for name, value in values.items()}
    ((row,),) = await transaction.rows((INSERT[failed], params))
    job = SimpleNamespace(**dict(zip(_JOB_COLUMNS, row, strict=False)))
    if not failed:
        # The statement named the job it inserted (``c<category>.<job>``).
        notify.sent_by_statement(transaction, job_waiting(category_id, job.id))
    return Submitted(job)


def note_submission(submitted: Submitted) -> None:
    """After the commit: count and log as the general way does (a category found, the
    job's history)."""
    job = submitted.job
    CATEGORY_LOOKUPS.labels("hit").inc()
    job_event(None, JobEventKind.SUBMITTED, job.id)
    if job.state is JobState.FAILED:
        job_event(None, JobEventKind.FAILED, job.id, detail=NO_SUITABLE_WORKER)
