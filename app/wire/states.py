"""The string enumerations of the API: their values are what the JSON carries (and what
the database stores)."""

from __future__ import annotations

import enum


class Role(enum.StrEnum):
    """What a token may do. The admin token itself lives in the server's settings; the
    others are issued by the admin."""

    ADMIN = "admin"
    WORKER = "worker"
    SUBMITTER = "submitter"


class WorkerState(enum.StrEnum):
    """``active`` workers receive work; ``draining`` ones finish what they hold and get
    nothing new; ``offline`` and ``disabled`` ones (set by an admin) are known but neither
    receive work nor count as able to run anything. ``unknown`` is set by the server, never
    by an admin: the worker has not been heard from for JOBMATCH_WORKER_TIMEOUT_SECONDS
    (Grid Engine's qhost/qstat show such a host as ``u``, unknown); it gets no work, its
    running jobs keep their leases, and its next word makes it ``active`` again."""

    ACTIVE = "active"
    DRAINING = "draining"
    OFFLINE = "offline"
    DISABLED = "disabled"
    UNKNOWN = "unknown"


class JobState(enum.StrEnum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"


class JobEventKind(enum.StrEnum):
    """What happened to a job: one entry of its history."""

    SUBMITTED = "submitted"
    DISPATCHED = "dispatched"
    REQUEUED = "requeued"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"
    #: The running worker gave the job back unfinished (it stopped, or it restarted and
    #: killed what it had left running): the job waits again.
    RETURNED = "returned"
    #: A worker reported the end of a job it no longer held (its lease had expired): the
    #: report is kept here but changed nothing.
    LATE_REPORT = "late_report"
