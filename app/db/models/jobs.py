"""The job side: categories (with their cached fit: misfits or fits), jobs, allocations."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Index, String, Text, false, text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, utcnow
from app.db.dialect import partial_index
from app.db.models.enums import JobState, string_enum


class Category(Base):
    """Everything a job asks for, in canonical form. Jobs that ask for the same thing share
    one category, so what they fit is decided (and cached) once."""

    __tablename__ = "categories"

    id: Mapped[int] = mapped_column(primary_key=True)
    #: SHA-256 of ``key``; unique, so concurrent submissions of a new request meet here.
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    #: Canonical JSON of the request: tags and slots (later notations add their parts).
    key: Mapped[str] = mapped_column(Text)
    resources: Mapped[str] = mapped_column(Text, default="")
    slots: Mapped[int] = mapped_column(default=1)
    #: Canonical RFC 31 JSON of the constraint, NULL without one; its leaves are rows of
    #: constraint_properties, constraint_host_runs and constraint_rank_runs.
    constraint: Mapped[str | None] = mapped_column(Text, default=None)
    #: Canonical RFC 14 resources JSON, NULL without one; its vertices are rows of
    #: category_resource_vertices.
    jobspec: Mapped[str | None] = mapped_column(Text, default=None)
    #: Grid Engine ``-l`` lists in category form (sorted ``name=value``, ``NONE`` if empty);
    #: their items are rows of category_requests.
    hard: Mapped[str] = mapped_column(Text, default="NONE", server_default="NONE")
    soft: Mapped[str] = mapped_column(Text, default="NONE", server_default="NONE")
    #: Grid Engine ``-pe name min-max``; NULL for a sequential job.
    pe: Mapped[str | None] = mapped_column(String(255), default=None)
    pe_min: Mapped[int] = mapped_column(default=1, server_default="1")
    pe_max: Mapped[int] = mapped_column(default=1, server_default="1")
    #: Grid Engine ``-q``, ``-masterq`` and ``-soft -q`` lists in category form (items
    #: joined by commas, ``NONE`` if empty); their items are rows of category_queue_refs.
    queue_list: Mapped[str] = mapped_column(Text, default="NONE", server_default="NONE")
    master_queue_list: Mapped[str] = mapped_column(Text, default="NONE", server_default="NONE")
    soft_queue_list: Mapped[str] = mapped_column(Text, default="NONE", server_default="NONE")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    #: Which pairs the fit cache lists for this category: its misfits (category_misfits,
    #: with their reasons) or, when it was created, if those outnumbered the workers that
    #: fit it, its fits (category_fits). Writing the smaller side keeps a new category
    #: cheap on a large farm (issue 23); app/matching/misfits.py chooses, and every
    #: reader goes through it.
    lists_fits: Mapped[bool] = mapped_column(default=False, server_default=false())


class CategoryMisfit(Base):
    """A worker cannot run any job of a category, and why (a reason code of the first
    failing clause). Written by INSERT ... SELECT; valid only while ``generation`` equals the
    worker's generation."""

    __tablename__ = "category_misfits"
    # A pull asks "which categories does this worker, at its generation, not fit?": with
    # the generation in the index that is an index-only range scan on both databases.
    __table_args__ = (
        Index("ix_category_misfits_worker", "worker_id", "generation", "category_id"),
    )

    category_id: Mapped[int] = mapped_column(
        ForeignKey("categories.id", ondelete="CASCADE"), primary_key=True
    )
    worker_id: Mapped[int] = mapped_column(
        ForeignKey("workers.id", ondelete="CASCADE"), primary_key=True
    )
    generation: Mapped[int]
    reason: Mapped[str] = mapped_column(String(64))


class CategoryFit(Base):
    """A worker can run the jobs of a category that lists its fits (``lists_fits``), at
    the worker's ``generation``; rows of other generations are stale and never read.

    No foreign keys: checking one per row locked each worker's row and cost a new category
    20 us per fit row, more than writing it (issue 23). A row is only ever read joined to
    its worker at the current generation, so a row left by a deleted worker is never
    read; app/matching/misfits.py clears a worker's rows whenever it writes them (a
    registration included, so an id SQLite hands out again starts clean) and a new
    category's before it writes them, and deleting a worker deletes its rows."""

    __tablename__ = "category_fits"
    # A pull asks which of the fit-listing categories this worker fits: one index range.
    __table_args__ = (Index("ix_category_fits_worker", "worker_id", "generation", "category_id"),)

    category_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    worker_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    generation: Mapped[int]


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        CheckConstraint("slots >= 1", name="slots_positive"),
        # The dispatch query's index: the best waiting job of one category is one seek.
        partial_index(
            "ix_jobs_waiting_order",
            "category_id",
            text("priority DESC"),
            "submitted_at",
            "id",
            where="state = 'waiting'",
        ),
        # The fair-share pull's index (docs/ordering.md): the best waiting job of one
        # submitter in one category is one seek.
        partial_index(
            "ix_jobs_waiting_submitter_order",
            "category_id",
            "submitter",
            text("priority DESC"),
            "submitted_at",
            "id",
            where="state = 'waiting'",
        ),
        Index("ix_jobs_state_id", "state", "id"),
        # Whether a worker has a placed job to deliver, asked by every pull: one seek into
        # the few placed jobs instead of a walk over every job the worker ever ran (which
        # ix_jobs_worker_id gave, growing with the worker's history). The predicate is
        # written as each database's rendering of ``awaiting_pickup IS true``, the form
        # the queries use: neither proves it from a bare ``awaiting_pickup``.
        Index(
            "ix_jobs_awaiting_pickup",
            "worker_id",
            postgresql_where=text("awaiting_pickup IS TRUE"),
            sqlite_where=text("awaiting_pickup IS 1"),
        ),
        # A submitter's listing: its jobs in id order, filtered before the page is cut.
        Index("ix_jobs_submitter_id", "submitter", "id"),
        # How many tasks of an array run (qsub -tc): one range of the index per array.
        Index("ix_jobs_array_state", "array_id", "state"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    state: Mapped[JobState] = mapped_column(
        string_enum(JobState, "job_state"), default=JobState.WAITING
    )
    priority: Mapped[int] = mapped_column(default=0)
    slots: Mapped[int] = mapped_column(default=1)
    category_id: Mapped[int] = mapped_column(
        ForeignKey("categories.id", ondelete="RESTRICT"), index=True
    )
    #: The Momotor resource definition exactly as submitted.
    resources: Mapped[str] = mapped_column(Text, default="")
    #: The constraint as given: RFC 31 JSON text or RFC 35 text (see constraint_syntax).
    constraint: Mapped[str | None] = mapped_column(Text, default=None)
    constraint_syntax: Mapped[str | None] = mapped_column(String(16), default=None)
    #: The resources as given: an RFC 46 shape string, or RFC 14 JSON text.
    shape: Mapped[str | None] = mapped_column(Text, default=None)
    jobspec: Mapped[str | None] = mapped_column(Text, default=None)
    #: The registered task type's name, NULL for a job without one.
    task: Mapped[str | None] = mapped_column(String(255), default=None)
    #: The argv list (JSON) a worker agent runs, and its time limit in seconds.
    command: Mapped[str | None] = mapped_column(Text, default=None)
    timeout: Mapped[int | None] = mapped_column(default=None)
    #: What the agent reported: the command's exit status and the tail of its output.
    exit_code: Mapped[int | None] = mapped_column(default=None)
    output: Mapped[str | None] = mapped_column(Text, default=None)
    #: Grid Engine ``-l`` lists and ``-pe`` request as given.
    hard: Mapped[str | None] = mapped_column(Text, default=None)
    soft: Mapped[str | None] = mapped_column(Text, default=None)
    pe: Mapped[str | None] = mapped_column(String(255), default=None)
    pe_slots: Mapped[str | None] = mapped_column(String(64), default=None)
    #: Grid Engine ``-q``, ``-masterq`` and ``-soft -q`` lists as given.
    queue_list: Mapped[str | None] = mapped_column(Text, default=None)
    master_queue_list: Mapped[str | None] = mapped_column(Text, default=None)
    soft_queue_list: Mapped[str | None] = mapped_column(Text, default=None)
    #: Grid Engine ``qsub -P``: a project that existed when the job was submitted.
    project: Mapped[str | None] = mapped_column(String(255), default=None)
    submitter: Mapped[str] = mapped_column(String(255), default="admin")
    failure_reason: Mapped[str | None] = mapped_column(Text, default=None)
    worker_id: Mapped[int | None] = mapped_column(
        ForeignKey("workers.id", ondelete="SET NULL"), default=None, index=True
    )
    #: How many times the job was dispatched; a lease that expires counts as an attempt.
    attempts: Mapped[int] = mapped_column(default=0, server_default=text("0"))
    #: The scheduler placed the running job on its worker (POST /v1/schedule or
    #: /v1/jobs/{id}/allocate) and the worker has not received it yet: its next pull
    #: delivers it. Until then the lease runs from the placement (``started_at``), not
    #: from the worker's last word, so a worker that never pulls loses the job.
    awaiting_pickup: Mapped[bool] = mapped_column(default=False, server_default=false())
    submitted_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    ended_at: Mapped[datetime | None] = mapped_column(default=None)
    #: Grid Engine array job (``qsub -t``): the array (job_arrays.id) and this job's task
    #: id in it; both NULL for a job that is not a task of an array. No foreign key, as
    #: for category_fits: a bulk submission of 100,000 tasks would check one per row.
    array_id: Mapped[int | None] = mapped_column(default=None)
    task_id: Mapped[int | None] = mapped_column(default=None)
    #: The array's range, ``n-m:s``, kept with each task: the agent gives it to the
    #: command (SGE_TASK_FIRST, SGE_TASK_LAST, SGE_TASK_STEPSIZE) from the pulled job's
    #: own columns, which is all the express pull reads.
    task_range: Mapped[str | None] = mapped_column(String(64), default=None)


class JobArray(Base):
    """A Grid Engine array job (``qsub -t n-m:s``): its tasks are jobs with its id as
    ``array_id``; ``task_concurrency`` (``qsub -tc``) is how many of them may run at once
    (NULL: no limit)."""

    __tablename__ = "job_arrays"
    __table_args__ = (
        CheckConstraint("first_task >= 1", name="first_task_positive"),
        CheckConstraint("last_task >= first_task", name="last_task_not_before_first"),
        CheckConstraint("step >= 1", name="step_positive"),
        CheckConstraint("task_concurrency >= 1", name="task_concurrency_positive"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    first_task: Mapped[int]
    last_task: Mapped[int]
    step: Mapped[int]
    task_concurrency: Mapped[int | None] = mapped_column(default=None)
    submitter: Mapped[str] = mapped_column(String(255), default="admin")
    submitted_at: Mapped[datetime] = mapped_column(default=utcnow)


class Allocation(Base):
    """Slots of one queue instance held by one job; released when the job ends."""

    __tablename__ = "allocations"
    __table_args__ = (
        CheckConstraint("slots >= 1", name="slots_positive"),
        Index("ix_allocations_job", "job_id"),
        Index("ix_allocations_queue_instance", "queue_instance_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    queue_instance_id: Mapped[int] = mapped_column(
        ForeignKey("queue_instances.id", ondelete="CASCADE")
    )
    slots: Mapped[int]
    allocated_at: Mapped[datetime] = mapped_column(default=utcnow)
    released_at: Mapped[datetime | None] = mapped_column(default=None)
