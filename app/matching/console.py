"""What the web console shows: read services over the cluster, one per page.

Every function takes ``submitter``: None for an admin, who sees everything, or the name a
submitter token acts for, who sees its own jobs only (and the categories of its own jobs),
as ``GET /v1/jobs/{id}`` lets it. Workers are visible to both roles, as ``GET /v1/workers``
is. The routes of app/api/ui render what these return; they hold no SQL.
"""

from __future__ import annotations

import json
import shlex
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, Select, func, select
from sqlalchemy.orm import Session, defer

from app.db.models import (
    UNAVAILABLE_WORKER_STATES,
    Category,
    CategoryMisfit,
    InventoryCount,
    Job,
    JobEvent,
    JobEventKind,
    JobState,
    QueueInstance,
    Worker,
    WorkerState,
)
from app.matching.category_fit import category_fit, too_few_nodes
from app.matching.gridengine.values import Target, read_values
from app.matching.misfits import REASONS, reasons_now
from app.matching.readiness import DYNAMIC_REASONS
from app.matching.requests import JobSpec
from app.matching.stats import count_by_state
from app.matching.workers import WorkerDescription, describe_worker
from app.notations.flux.requires import format_requires
from app.notations.flux.shape import ShapeError, format_shape
from app.wire.categories import WorkerFit
from app.wire.values import Values
from app.words import noun, plural

SelectT = TypeVar("SelectT", bound=Select[*tuple[Any, ...]])

#: How far back the overview's dispatch rate looks, in minutes.
DISPATCH_WINDOW_MINUTES = 15

#: The most rows a console list shows; the pages say when there are more.
PAGE_ROWS = 200


def reason_words(code: str | None) -> str:
    """The sentence for a reason code: a misfit's (the table of app/matching/misfits.py)
    or one of explain's dynamic codes (app/matching/readiness.py)."""
    if code is None:
        return "fits"
    return REASONS.get(code) or DYNAMIC_REASONS.get(code, code)


def _own(submitter: str | None) -> list[ColumnElement[bool]]:
    """What keeps a submitter's pages to its own jobs (nothing for an admin: None)."""
    return [] if submitter is None else [Job.submitter == submitter]


def _own_jobs(query: SelectT, submitter: str | None) -> SelectT:
    return query.where(*_own(submitter))


@dataclass(frozen=True)
class WaitingJob:
    id: int
    category_id: int
    submitted_at: datetime


@dataclass(frozen=True)
class Overview:
    """The overview page: counts by state, dispatches per minute, the oldest waiting job."""

    workers_by_state: dict[str, int]
    jobs_by_state: dict[str, int]
    #: Dispatches in each minute of the window, oldest minute first.
    dispatches_per_minute: list[tuple[datetime, int]]
    oldest_waiting: WaitingJob | None

    @property
    def dispatch_rate(self) -> float:
        """Mean dispatches per minute over the window."""
        counts = [count for _minute, count in self.dispatches_per_minute]
        return sum(counts) / len(counts) if counts else 0.0

    @property
    def dispatch_peak(self) -> int:
        """The most dispatches of one minute of the window: the top of the sparkline's axis."""
        return max((count for _minute, count in self.dispatches_per_minute), default=0)

    def bar_tenths(self, count: int) -> int:
        """A minute's bar height in tenths of the peak (0 to 10), so the busiest minute
        fills the chart whatever its count; a minute with any dispatch shows at least 1."""
        if count <= 0 or self.dispatch_peak <= 0:
            return 0
        return max(1, round(10 * count / self.dispatch_peak))


def _dispatches_per_minute(
    session: Session, submitter: str | None, now: datetime
) -> list[tuple[datetime, int]]:
    end = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    start = end - timedelta(minutes=DISPATCH_WINDOW_MINUTES)
    query = (
        select(JobEvent.at)
        .join(Job, Job.id == JobEvent.job_id)
        .where(JobEvent.kind == JobEventKind.DISPATCHED, JobEvent.at >= start)
    )
    if submitter is not None:
        query = query.where(Job.submitter == submitter)
    minutes: Counter[datetime] = Counter()
    for (moment,) in session.execute(query):
        minutes[moment.replace(second=0, microsecond=0)] += 1
    return [
        (start + timedelta(minutes=i), minutes[start + timedelta(minutes=i)])
        for i in range(DISPATCH_WINDOW_MINUTES)
    ]


def overview(session: Session, *, submitter: str | None, now: datetime) -> Overview:
    workers_by_state = count_by_state(session, Worker.state, WorkerState)
    jobs_by_state = count_by_state(session, Job.state, JobState, *_own(submitter))
    oldest = session.execute(
        _own_jobs(select(Job.id, Job.category_id, Job.submitted_at), submitter)
        .where(Job.state == JobState.WAITING)
        .order_by(Job.submitted_at, Job.id)
        .limit(1)
    ).first()
    return Overview(
        workers_by_state=workers_by_state,
        jobs_by_state=jobs_by_state,
        dispatches_per_minute=_dispatches_per_minute(session, submitter, now),
        oldest_waiting=WaitingJob(oldest[0], oldest[1], oldest[2]) if oldest is not None else None,
    )


@dataclass(frozen=True)
class WorkerRow:
    """One line of the workers page."""

    name: str
    state: str
    #: Why the worker is in its state, who set it and when (None until someone did).
    reason: str | None
    state_set_by: str | None
    state_changed_at: datetime | None
    last_seen: datetime | None
    slots_used: int
    slots_total: int
    free: dict[str, int]
    metadata_reported_at: datetime | None


def _worker_rows(session: Session, query: Select[Worker]) -> list[WorkerRow]:
    found = list(session.scalars(query))
    ids = [w.id for w in found]
    slots = {
        worker_id: (int(used), int(total))
        for worker_id, used, total in session.execute(
            select(
                QueueInstance.worker_id,
                func.sum(QueueInstance.used_slots),
                func.sum(QueueInstance.slots),
            )
            .where(QueueInstance.worker_id.in_(ids))
            .group_by(QueueInstance.worker_id)
        )
    }
    free: dict[int, dict[str, int]] = {worker_id: {} for worker_id in ids}
    for count in session.scalars(
        select(InventoryCount)
        .where(InventoryCount.worker_id.in_(ids))
        .order_by(InventoryCount.type, InventoryCount.unit)
    ):
        key = f"{count.type}:{count.unit}" if count.unit else count.type
        free[count.worker_id][key] = count.free
    return [
        WorkerRow(
            name=w.name,
            state=w.state.value,
            reason=w.state_reason,
            state_set_by=w.state_set_by,
            state_changed_at=w.state_changed_at,
            last_seen=w.last_seen,
            slots_used=slots.get(w.id, (0, 0))[0],
            slots_total=slots.get(w.id, (0, 0))[1],
            free=free[w.id],
            metadata_reported_at=w.metadata_reported_at,
        )
        for w in found
    ]


def worker_rows(session: Session) -> list[WorkerRow]:
    """The workers in name order (at most :data:`PAGE_ROWS`)."""
    return _worker_rows(session, select(Worker).order_by(Worker.name).limit(PAGE_ROWS))


@dataclass(frozen=True)
class RunningJob:
    id: int
    submitter: str
    slots: int
    started_at: datetime | None


@dataclass(frozen=True)
class CategoryWorkerFit:
    """Whether a worker fits a category, and if not the reason code and its words."""

    category_id: int
    request: str
    fits: bool
    reason: str | None
    words: str


@dataclass(frozen=True)
class WorkerDetail:
    """The worker page: its line of the workers page, what it is (GET /v1/workers/{name}:
    Momotor resources, rank, properties, inventory, queue instances), its Grid Engine
    values (GET /v1/values/hosts/{name}), its running jobs and the live categories it
    fits or not."""

    row: WorkerRow
    rank: int | None
    resources: str
    description: WorkerDescription
    values: Values
    running: list[RunningJob]
    fitting: list[CategoryWorkerFit]
    misfitting: list[CategoryWorkerFit]

    @property
    def value_rows(self) -> list[HostValue]:
        """The host's Grid Engine values, one per attribute and kind, with what is booked
        of a consumable's capacity."""
        kinds = (
            ("complex_values", self.values.complex_values),
            ("load_values (admin)", self.values.load_values),
            ("load_values (reported)", self.values.reported_load_values),
        )
        rows = []
        for kind, texts in kinds:
            for name, text in texts.items():
                booked = self.values.consumables.get(name) if kind == "complex_values" else None
                rows.append(
                    HostValue(
                        name,
                        kind,
                        text,
                        None
                        if booked is None
                        else f"{_amount(booked.used)} of {_amount(booked.capacity)}",
                    )
                )
        return rows


@dataclass(frozen=True)
class HostValue:
    """One Grid Engine value of a host: the attribute, which kind of value, its text, and
    for a consumable, what running jobs book of its capacity (``2 of 8``)."""

    attribute: str
    kind: str
    text: str
    booked: str | None


def _amount(value: float) -> str:
    return str(int(value)) if value.is_integer() else f"{value:g}"


#: Between the parts of a request in one line: not a comma, which property lists, -l
#: lists and Momotor tag lists use themselves.
REQUEST_PART_SEPARATOR = " · "


def shape_text(jobspec: str) -> str:
    """RFC 14 resources JSON as a person writes them: the RFC 46 shape
    (``node=3/slot/core=8``) when one expands to the same list, else ``jobspec`` and the
    JSON (a list no shape can say, such as a label on a node)."""
    try:
        return f"shape {format_shape(json.loads(jobspec))}"
    except (ShapeError, ValueError):
        return f"jobspec {jobspec}"


def constraint_text(constraint: str) -> str:
    """RFC 31 constraint JSON as a person writes it: the RFC 35 ``--requires`` text
    (``gpu,ib | host:node[1-4]``) when one compiles to the same constraint, else
    ``constraint`` and the JSON."""
    try:
        text = format_requires(json.loads(constraint))
    except ValueError:
        text = None
    return f"requires {text}" if text is not None else f"constraint {constraint}"


def category_request(category: Category) -> str:
    """A category's request in one line, each part in the text of its notation (the
    category keeps the canonical form only: shapes and RFC 35 text are written back from
    it, each checked to read back the same), joined by :data:`REQUEST_PART_SEPARATOR`."""
    parts = []
    if category.resources:
        parts.append(category.resources.replace("\n", "; "))
    if category.constraint:
        parts.append(constraint_text(category.constraint))
    if category.jobspec:
        parts.append(shape_text(category.jobspec))
    if category.hard != "NONE":
        parts.append(f"-l {category.hard}")
    if category.soft != "NONE":
        parts.append(f"-soft -l {category.soft}")
    if category.pe:
        parts.append(f"-pe {category.pe} {category.pe_min}-{category.pe_max}")
    for option, text in (
        ("-q", category.queue_list),
        ("-masterq", category.master_queue_list),
        ("-soft -q", category.soft_queue_list),
    ):
        if text != "NONE":
            parts.append(f"{option} {text}")
    if category.slots != 1:
        parts.append(f"{category.slots}\u00a0slots")
    return REQUEST_PART_SEPARATOR.join(parts) or "(anything)"


def category_requests(session: Session, category_ids: list[int]) -> dict[int, str]:
    """:func:`category_request` of each category that exists, by id."""
    return {
        c.id: category_request(c)
        for c in session.scalars(select(Category).where(Category.id.in_(category_ids)))
    }


@dataclass(frozen=True)
class RequestPart:
    """One part of a job's request as it was submitted: the field's label with its
    notation (``shape (RFC 46)``), the option a one-line summary puts before it
    (``shape``, ``-l``; empty for Momotor tags) and the text."""

    label: str
    option: str
    text: str


def command_text(command: str | None) -> str | None:
    """A job's argv (JSON) as a shell would take it: ``python3 -c 'print("hi")'``."""
    return shlex.join(json.loads(command)) if command else None


def submitted_request(job: Job) -> list[RequestPart]:
    """The job's request field by field, exactly as submitted (the job row keeps the
    text of each notation it was given in)."""
    constraint_label = "RFC 35" if job.constraint_syntax == "rfc35" else "RFC 31"
    fields = [
        ("Momotor resources", "", job.resources or None),
        (
            f"constraint ({constraint_label})",
            "requires" if job.constraint_syntax == "rfc35" else "constraint",
            job.constraint,
        ),
        ("shape (RFC 46)", "shape", job.shape),
        ("jobspec (RFC 14)", "jobspec", job.jobspec),
        ("task (debusine)", "task", job.task),
        ("hard -l (Grid Engine)", "-l", job.hard),
        ("soft -l (Grid Engine)", "-soft -l", job.soft),
        (
            "-pe (Grid Engine)",
            "-pe",
            f"{job.pe} {job.pe_slots or ''}".strip() if job.pe else None,
        ),
        ("hard -q (Grid Engine)", "-q", job.queue_list),
        ("-masterq (Grid Engine)", "-masterq", job.master_queue_list),
        ("soft -q (Grid Engine)", "-soft -q", job.soft_queue_list),
        ("-P project (Grid Engine)", "-P", job.project),
    ]
    return [RequestPart(label, option, text) for label, option, text in fields if text]


def request_summary(job: Job) -> str:
    """The job's request in one line, as submitted: ``shape node=3/slot/core=8``."""
    parts = [
        f"{part.option} {part.text}".strip().replace("\n", "; ") for part in submitted_request(job)
    ]
    if job.slots != 1:
        parts.append(f"{job.slots}\u00a0slots")
    return REQUEST_PART_SEPARATOR.join(parts) or "(anything)"


def _live_categories(session: Session, submitter: str | None) -> list[Category]:
    """The categories with waiting or running jobs (of the submitter, when given)."""
    live = _own_jobs(select(Job.category_id), submitter).where(
        Job.state.in_((JobState.WAITING, JobState.RUNNING))
    )
    return list(
        session.scalars(
            select(Category).where(Category.id.in_(live)).order_by(Category.id).limit(PAGE_ROWS)
        )
    )


def _misfit_reasons(
    session: Session, category_ids: list[int], worker_ids: list[int]
) -> dict[tuple[int, int], str]:
    """(category, worker) -> reason code, for the pairs the cache rules out at the
    worker's current generation (as v_category_fit reads it). A category that lists its
    fits has no stored reasons: they are computed for these workers now."""
    rows = session.execute(
        select(CategoryMisfit.category_id, CategoryMisfit.worker_id, CategoryMisfit.reason)
        .join(Worker, Worker.id == CategoryMisfit.worker_id)
        .where(
            CategoryMisfit.generation == Worker.generation,
            CategoryMisfit.category_id.in_(category_ids),
            CategoryMisfit.worker_id.in_(worker_ids),
        )
    )
    found = {(category_id, worker_id): reason for category_id, worker_id, reason in rows}
    fit_listing = session.scalars(
        select(Category.id).where(Category.id.in_(category_ids), Category.lists_fits)
    ).all()
    for category_id in fit_listing:
        for worker_id, reason in reasons_now(session, category_id, worker_ids).items():
            if reason is not None:
                found[(category_id, worker_id)] = reason
    for category_id in category_ids:
        # A job on more nodes than fit is held by no set of workers (issue 35): the
        # workers that fit one node of it are refused too, as explain refuses them.
        if too_few_nodes(session, category_id) is not None:
            for worker_id in worker_ids:
                found.setdefault((category_id, worker_id), "needs-several-nodes")
    return found


def worker_detail(session: Session, worker: Worker, *, submitter: str | None) -> WorkerDetail:
    """One worker: its line, its running jobs, and which live categories it fits."""
    (row,) = _worker_rows(session, select(Worker).where(Worker.id == worker.id))
    running = [
        RunningJob(job_id, job_submitter, slots, started)
        for job_id, job_submitter, slots, started in session.execute(
            _own_jobs(select(Job.id, Job.submitter, Job.slots, Job.started_at), submitter)
            .where(Job.worker_id == worker.id, Job.state == JobState.RUNNING)
            .order_by(Job.id)
        )
    ]
    categories = _live_categories(session, submitter)
    reasons = _misfit_reasons(session, [c.id for c in categories], [worker.id])
    fits = [
        CategoryWorkerFit(
            c.id,
            category_request(c),
            (c.id, worker.id) not in reasons,
            reasons.get((c.id, worker.id)),
            reason_words(reasons.get((c.id, worker.id))),
        )
        for c in categories
    ]
    return WorkerDetail(
        row=row,
        rank=worker.rank,
        resources=worker.resources,
        description=describe_worker(session, worker),
        values=read_values(session, Target("host", worker.id)),
        running=running,
        fitting=[f for f in fits if f.fits],
        misfitting=[f for f in fits if not f.fits],
    )


@dataclass(frozen=True)
class QueuedCategory:
    """One line of the queue page: a category's waiting jobs and why they wait."""

    category_id: int
    request: str
    waiting: int
    oldest_submitted_at: datetime
    #: How many available workers (not offline, not disabled) fit the category statically.
    fitting_workers: int
    #: The reason most workers refuse it, with how many do; None when none refuses.
    top_reason: str | None
    top_reason_workers: int

    @property
    def why_waiting(self) -> str:
        if self.fitting_workers:
            fit = noun(self.fitting_workers, "fits", "fit")
            workers = plural(self.fitting_workers, "worker")
            return f"{workers} {fit}: waiting for free slots, inventory or a pull"
        if self.top_reason is None:
            return "no worker is available"
        return f"{reason_words(self.top_reason)} ({plural(self.top_reason_workers, 'worker')})"


def queue_by_category(session: Session, *, submitter: str | None) -> list[QueuedCategory]:
    """Waiting jobs grouped by category, the oldest first."""
    groups = session.execute(
        _own_jobs(select(Job.category_id, func.count(), func.min(Job.submitted_at)), submitter)
        .where(Job.state == JobState.WAITING)
        .group_by(Job.category_id)
        .order_by(func.min(Job.submitted_at))
        .limit(PAGE_ROWS)
    ).all()
    ids = [category_id for category_id, _count, _oldest in groups]
    categories = {c.id: c for c in session.scalars(select(Category).where(Category.id.in_(ids)))}
    workers = list(
        session.scalars(select(Worker.id).where(Worker.state.not_in(UNAVAILABLE_WORKER_STATES)))
    )
    reasons = _misfit_reasons(session, ids, workers)
    lines = []
    for category_id, count, oldest in groups:
        refusals = Counter(
            reason for (c, _w), reason in reasons.items() if c == category_id
        ).most_common(1)
        lines.append(
            QueuedCategory(
                category_id=category_id,
                request=category_request(categories[category_id]),
                waiting=int(count),
                oldest_submitted_at=oldest,
                fitting_workers=len(workers) - sum(1 for c, _w in reasons if c == category_id),
                top_reason=refusals[0][0] if refusals else None,
                top_reason_workers=refusals[0][1] if refusals else 0,
            )
        )
    return lines


@dataclass(frozen=True)
class FitMatrix:
    """Live categories x workers: None where the worker fits, else the reason code."""

    categories: list[tuple[int, str]]
    workers: list[str]
    cells: dict[tuple[int, str], str | None]
    reason_counts: dict[str, int] = field(default_factory=dict)


def fit_matrix(session: Session, *, submitter: str | None) -> FitMatrix:
    """The category x worker fit of the live categories (those with waiting or running
    jobs), as v_category_fit has it, with how many cells each reason code fills. At most
    :data:`PAGE_ROWS` categories and as many workers (in name order)."""
    categories = _live_categories(session, submitter)
    workers = list(
        session.execute(select(Worker.id, Worker.name).order_by(Worker.name).limit(PAGE_ROWS))
    )
    reasons = _misfit_reasons(session, [c.id for c in categories], [w[0] for w in workers])
    cells = {
        (c.id, name): reasons.get((c.id, worker_id))
        for c in categories
        for worker_id, name in workers
    }
    counts = Counter(reason if reason is not None else "fits" for reason in cells.values())
    return FitMatrix(
        categories=[(c.id, category_request(c)) for c in categories],
        workers=[name for _id, name in workers],
        cells=cells,
        reason_counts=dict(sorted(counts.items())),
    )


def spec_summary(spec: JobSpec) -> str:
    """:func:`request_summary` of a job not stored (one of a what-if's ``add_jobs``): its
    fields laid out as a submission stores them, on a job row that is never added."""
    constraint = json.dumps(spec.constraint) if spec.constraint is not None else spec.requires
    syntax = "rfc31" if spec.constraint is not None else "rfc35" if spec.requires else None
    unsaved = Job(
        resources=spec.resources,
        constraint=constraint,
        constraint_syntax=syntax,
        shape=spec.shape,
        jobspec=json.dumps(spec.jobspec) if spec.jobspec is not None else None,
        task=spec.task,
        hard=spec.hard or None,
        soft=spec.soft or None,
        pe=spec.pe,
        pe_slots=spec.pe_slots,
        queue_list=spec.queue_list or None,
        master_queue_list=spec.master_queue_list or None,
        soft_queue_list=spec.soft_queue_list or None,
        project=spec.project,
        slots=spec.slots,
    )
    return request_summary(unsaved)


@dataclass(frozen=True)
class JobLine:
    """One line of the jobs page."""

    id: int
    state: str
    submitter: str
    category_id: int
    worker: str | None
    submitted_at: datetime
    failure_reason: str | None
    #: The request in one line, in the notations it was submitted in.
    request: str
    #: The command as a shell would take it; None for a job without one.
    command: str | None


def recent_jobs(
    session: Session, *, submitter: str | None, state: JobState | None
) -> list[JobLine]:
    """The newest jobs (of the submitter, when given; in that state, when given)."""
    query = (
        _own_jobs(select(Job, Worker.name), submitter)
        # The output tail is the job page's, not the list's: not read for 200 rows.
        .options(defer(Job.output))
        .outerjoin(Worker, Worker.id == Job.worker_id)
        .order_by(Job.id.desc())
        .limit(PAGE_ROWS)
    )
    if state is not None:
        query = query.where(Job.state == state)
    return [
        JobLine(
            job.id,
            job.state.value,
            job.submitter,
            job.category_id,
            worker,
            job.submitted_at,
            job.failure_reason,
            request_summary(job),
            command_text(job.command),
        )
        for job, worker in session.execute(query)
    ]


@dataclass(frozen=True)
class VisibleJob:
    job: Job
    worker: str | None


def visible_job(session: Session, job_id: int, *, submitter: str | None) -> VisibleJob | None:
    """The job and the name of its worker; None when there is no such job or it is
    another submitter's (the console does not tell the two apart)."""
    job = session.get(Job, job_id)
    if job is None or (submitter is not None and job.submitter != submitter):
        return None
    worker = session.get(Worker, job.worker_id) if job.worker_id is not None else None
    return VisibleJob(job, worker.name if worker is not None else None)


@dataclass(frozen=True)
class CategoryPage:
    """One category: its request, its jobs by state (the submitter's own, for a
    submitter), and every worker's fit (app/matching/category_fit.py)."""

    id: int
    request: str
    waiting: int
    running: int
    fit: list[WorkerFit]


def category_page(
    session: Session, category_id: int, *, submitter: str | None
) -> CategoryPage | None:
    """None when there is no such category, or the submitter has no job in it (the
    console does not tell the two apart)."""
    category = session.get(Category, category_id)
    if category is None:
        return None
    counts = dict(
        session.execute(
            _own_jobs(select(Job.state, func.count()), submitter)
            .where(Job.category_id == category_id)
            .group_by(Job.state)
        ).all()
    )
    if submitter is not None and not counts:
        return None
    return CategoryPage(
        id=category.id,
        request=category_request(category),
        waiting=int(counts.get(JobState.WAITING, 0)),
        running=int(counts.get(JobState.RUNNING, 0)),
        fit=category_fit(session, category_id),
    )
