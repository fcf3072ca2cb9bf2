"""The common pull and the common finish on PostgreSQL, without a Session or ORM objects.

Most pulls of a farm take a plain job (Momotor tags, RFC 31 constraints: no Grid Engine
rules, no allocation, no plug-in) and most finishes end a job that holds slots only. The
general way decides those in two statements each already (:func:`~.puller.lock_puller`
and :data:`~.pull_plain.TAKE_BEST_CORE`; :data:`~.finish_sql.LOCK_REPORTER` and
:data:`~.finish_sql.END_IN_ONE_CORE`). Here the same four statements run through
:class:`~app.db.prebuilt.Prebuilt` on a Core connection's transaction, and the job comes
back as its row: the Python around them was most of a pull's cost over HTTP (issue 23).

Whatever these functions cannot decide they refuse with :class:`HandOver` before anything
is committed: the caller rolls the transaction back and runs the general way
(:func:`.pull.pull_for`, :func:`.pull.finish`), which decides it and words any error.
``tests/matching/dispatch/test_express.py`` holds both ways to the same rows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from sqlalchemy import Connection

from app.db.models import JobEventKind
from app.db.prebuilt import Prebuilt
from app.db.tables import JOBS
from app.matching.dispatch.finish_sql import END_IN_ONE_CORE, LOCK_REPORTER
from app.matching.dispatch.pull import FINAL_OUTCOMES, MAX_OUTPUT, waited_seconds
from app.matching.dispatch.pull_plain import TAKE_BEST_CORE
from app.matching.dispatch.puller import LOCK_PULLER, Puller, puller_of
from app.matching.domain_events import emit_job_event
from app.matching.wakeups import room_changed
from app.metrics import DISPATCH_LATENCY, JOB_WAIT

_LOCK_PULLER = Prebuilt(LOCK_PULLER)
_TAKE_BEST = {managed: Prebuilt(statement) for managed, statement in TAKE_BEST_CORE.items()}
_LOCK_REPORTER = Prebuilt(LOCK_REPORTER)
_END = {failed: Prebuilt(statement) for failed, statement in END_IN_ONE_CORE.items()}
#: The job's columns, first in the rows of the take and of the end.
_JOB_COLUMNS = tuple(column.name for column in JOBS.c)


class HandOver(Exception):
    """The express way cannot decide this request (an unknown worker, a Grid Engine or
    placed job, a job that holds more than slots, ...): roll back, go the general way."""


@dataclass(frozen=True)
class Pulled:
    """What an express pull did: the job it started (its columns as attributes), or
    None, and the worker as the pull's lock read it."""

    job: SimpleNamespace | None
    puller: Puller


def pull(connection: Connection, worker_name: str, now: datetime) -> Pulled:
    """Lock the worker and take its best job, as the general pull's plain way does; the
    caller commits. :class:`HandOver` when the general way must decide."""
    locked = _LOCK_PULLER.rows(connection, {"p_name": worker_name, "p_now": now})
    if not locked:
        raise HandOver(f"no worker named {worker_name!r}")
    puller = puller_of(locked[0], worker_name)
    if puller.complex_cluster or puller.placed_waiting:
        raise HandOver("Grid Engine rules or a placed job")
    if not puller.active or puller.max_free <= 0:
        return Pulled(None, puller)
    (row,) = _TAKE_BEST[puller.managed].rows(
        connection,
        {
            "p_worker_id": puller.id,
            "p_generation": puller.generation,
            "p_max_free": puller.max_free,
            "p_now": now,
            "p_worker": puller.name,
        },
    )
    width = len(_JOB_COLUMNS)
    job, (booked_queue_instance, heads) = _job(row[:width]), row[width : width + 2]
    if job.id is None:
        if heads == 0:
            return Pulled(None, puller)
        raise HandOver("a head needs a plug-in, Grid Engine rules or an allocation")
    if booked_queue_instance is None:
        raise HandOver("the worker's room was gone after all")
    return Pulled(job, puller)


def note_pull(pulled: Pulled, started: float) -> None:
    """After the commit: log and count the dispatch as :func:`.pull.pull_for` does."""
    if pulled.job is not None:
        now = pulled.job.started_at
        emit_job_event(JobEventKind.DISPATCHED, pulled.job.id, pulled.puller.name)
        JOB_WAIT.observe(waited_seconds(pulled.job.submitted_at, now))
    outcome = "job" if pulled.job is not None else "none"
    DISPATCH_LATENCY.labels(outcome).observe(time.perf_counter() - started)


def finish(
    connection: Connection,
    job_id: int,
    worker_name: str,
    outcome: str,
    reason: str | None,
    exit_code: int | None,
    output: str | None,
    now: datetime,
) -> SimpleNamespace:
    """End the worker's running job that holds slots only, as the general finish does;
    the ended job. The caller commits. :class:`HandOver` for anything else (a resend, a
    late report, another worker's job, vertices, consumables, quotas)."""
    if outcome not in FINAL_OUTCOMES:
        raise HandOver(f"outcome {outcome!r}")
    locked = _LOCK_REPORTER.rows(
        connection, {"p_name": worker_name, "p_now": now, "p_job_id": job_id}
    )
    if not locked or locked[0][1]:
        raise HandOver("no such worker, or the job holds vertices")
    worker_id = locked[0][0]
    ended = _END[outcome == "failed"].rows(
        connection,
        {
            "p_job_id": job_id,
            "p_worker_id": worker_id,
            "p_now": now,
            "p_exit_code": exit_code,
            "p_output": output[-MAX_OUTPUT:] if output is not None else None,
            "p_reason": reason or "the worker reported failure",
            "p_worker": worker_name,
            "p_detail": reason,
            "p_announce": room_changed(worker_id),
        },
    )
    if not ended:
        raise HandOver(f"job {job_id} is not a running job of {worker_name!r} holding slots")
    job = _job(ended[0][: len(_JOB_COLUMNS)])
    if job.hard is not None or job.pe is not None:
        # Its end concerns every worker (global consumables): the general way announces it.
        raise HandOver("a Grid Engine job")
    return job


def note_finish(job: SimpleNamespace, worker_name: str, outcome: str, reason: str | None) -> None:
    """After the commit: log the end as :func:`.pull.finish` does."""
    kind = JobEventKind.FINISHED if outcome == "finished" else JobEventKind.FAILED
    emit_job_event(kind, job.id, worker_name, reason)


def _job(values: tuple[Any, ...]) -> SimpleNamespace:
    return SimpleNamespace(**dict(zip(_JOB_COLUMNS, values, strict=True)))
