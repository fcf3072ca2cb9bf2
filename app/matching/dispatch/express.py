"""The common pull and the common finish on PostgreSQL, without a Session or ORM objects.

Most pulls of a farm take a plain job (Momotor tags, RFC 31 constraints: no Grid Engine
rules, no allocation, no plug-in) and most finishes end a job that holds slots only. The
general way decides those in two statements each already (:func:`~.puller.lock_puller`
and :data:`~.pull_plain.TAKE_BEST_CORE`; :data:`~.finish_sql.LOCK_REPORTER` and
:data:`~.finish_sql.END_IN_ONE_CORE`). Here the same statements run through
:class:`~app.db.prebuilt.Prebuilt` on a Core connection's transaction, and the job comes
back as its row: the Python around them was most of a pull's cost over HTTP (issue 23).
The second statement of each is the variant that names the worker by name
(:data:`~.pull_plain.TAKE_BEST_BY_NAME`, :data:`~.finish_sql.END_BY_NAME_CORE`), so that
both are sent in one pipeline (:func:`~app.db.prebuilt.rows_together`): BEGIN, one round
trip, COMMIT. Each lock is leaner than the general way's (issue 38): the pull's
(:data:`~.puller.LOCK_PULLER_ALONE`) leaves the worker's facts to the take by name,
which reads them anyway, and the finish's (:data:`~.finish_sql.LOCK_REPORTER_ALONE`)
locks the reporting worker alone, as it never ends a job holding vertices, whose workers
the general way locks in order.

Whatever these functions cannot decide they answer with None, having written nothing
but the worker's ``last_seen`` (which the general way writes again): the caller commits
and runs the general way (:func:`.pull.pull_for`, :func:`.pull.finish`) in a transaction
of its own, which decides it and words any error. Committing rather than rolling back
matters: psycopg forgets every prepared statement of a connection at each rollback, and
the next statements on it would be parsed and planned again (a Grid Engine worker's every
pull goes the general way). Only a pull that claimed a job and then found no room for it
raises :class:`HandOver`, for a rollback. ``tests/matching/dispatch/test_express.py``
holds both ways to the same rows.

:func:`pull_on_loop` and :func:`finish_on_loop` are the same on psycopg's asyncio
connection (app/db/event_loop.py), for the express lane to run in the event loop without
a thread: one set of decisions (:func:`_after_take`, :func:`_started`, :func:`_ended`)
serves both.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from types import SimpleNamespace
from typing import Any, Protocol

from sqlalchemy import Connection

from app.db import notify
from app.db.event_loop import LoopTransaction
from app.db.models import JobEventKind
from app.db.notify import EVERYTHING
from app.db.prebuilt import Prebuilt, rows_together
from app.db.tables import JOBS
from app.matching.dispatch.batch_sql import END_MANY_QUIETLY, take_limit, take_many_by_name
from app.matching.dispatch.finish_sql import (
    END_BY_NAME_CORE,
    END_BY_NAME_QUIETLY,
    LOCK_REPORTER_ALONE,
)
from app.matching.dispatch.pull import FINAL_OUTCOMES, MAX_OUTPUT, waited_seconds
from app.matching.dispatch.pull_plain import (
    TAKE_BEST_BY_NAME,
    TAKE_BEST_BY_NAME_WIDE,
    TAKE_BEST_BY_NAME_WITH_ROOM,
    TAKE_BEST_CORE,
    TAKE_BEST_CORE_WIDE,
)
from app.matching.dispatch.puller import LOCK_PULLER_ALONE, Puller, puller_of_lock_and_facts
from app.matching.domain_events import job_event
from app.matching.liveness import REVIVE_PREBUILT, note_revived
from app.matching.wakeups import job_taken, job_waiting, room_changed
from app.metrics import DISPATCH_LATENCY, JOB_WAIT

_LOCK_PULLER = Prebuilt(LOCK_PULLER_ALONE)
#: By whether the pull is one of a batch (it looks at more heads: pull_plain.BATCH_HEADS),
#: then by whether the worker has an inventory.
_TAKE_BEST = {
    False: {managed: Prebuilt(statement) for managed, statement in TAKE_BEST_CORE.items()},
    True: {managed: Prebuilt(statement) for managed, statement in TAKE_BEST_CORE_WIDE.items()},
}
_TAKE_BY_NAME = {False: Prebuilt(TAKE_BEST_BY_NAME), True: Prebuilt(TAKE_BEST_BY_NAME_WIDE)}
_TAKE_BY_NAME_WITH_ROOM = Prebuilt(TAKE_BEST_BY_NAME_WITH_ROOM)
_LOCK_REPORTER = Prebuilt(LOCK_REPORTER_ALONE)
_REVIVE = REVIVE_PREBUILT
_END_BY_NAME = {failed: Prebuilt(statement) for failed, statement in END_BY_NAME_CORE.items()}
_END_MANY_QUIETLY = Prebuilt(END_MANY_QUIETLY)
_END_BY_NAME_QUIETLY = {
    failed: Prebuilt(statement) for failed, statement in END_BY_NAME_QUIETLY.items()
}
#: The job's columns, first in the rows of the take and of the end.
_JOB_COLUMNS = tuple(column.name for column in JOBS.c)


class HandOver(Exception):
    """The express pull claimed a job and then found the worker's room gone (a concurrent
    pull of the same worker booked it): roll back, go the general way."""


@dataclass(frozen=True)
class Pulled:
    """What an express pull did: the job it started (its columns as attributes), or
    None, and the worker as the pull's lock read it."""

    job: SimpleNamespace | None
    puller: Puller


def pull(connection: Connection, worker_name: str, now: datetime) -> Pulled | None:
    """Lock the worker and take its best job, as the general pull's plain way does; the
    caller commits. None when the general way must decide: an unknown worker, a Grid
    Engine worker, a placed job to deliver, a head that needs a plug-in, Grid Engine rules
    or an allocation (see the module docstring).

    The lock and the take by name are sent together: after BEGIN, one round trip
    decides the pull of a worker without an inventory (issue 23). A worker with one is
    taken for by id in a second round trip, as the general way does."""
    params = _pull_params(worker_name, now)
    locked, taken = rows_together(
        connection, (_LOCK_PULLER, params), (_TAKE_BY_NAME[False], params)
    )
    step = _after_take(locked, taken, worker_name)
    if isinstance(step, _TakeById):
        (row,) = _TAKE_BEST[False][True].rows(connection, step.params(now))
        step = _started(row, step.puller)
    if step is not None and step.job is not None:
        notify.sent_by_statement(connection, job_taken(step.job.category_id, step.job.id))
    return step


async def pull_on_loop(
    transaction: LoopTransaction, worker_name: str, now: datetime, *, batch: bool = False
) -> Pulled | None:
    """:func:`pull` in a transaction on the event loop's connection (app/db/event_loop.py):
    the same statements and decisions, without a Session, an SQLAlchemy connection or a
    thread. ``batch``: the pull is one of a batch, and looks at more heads (concurrent
    batches hold theirs locked: pull_plain.BATCH_HEADS)."""
    params = _pull_params(worker_name, now)
    locked, taken = await transaction.rows(
        (_LOCK_PULLER, params),
        (_TAKE_BY_NAME[batch], params),
    )
    return await _pulled_on_loop(transaction, locked, taken, worker_name, now, batch)


async def _pulled_on_loop(
    transaction: LoopTransaction,
    locked: list[tuple[Any, ...]],
    taken: list[tuple[Any, ...]],
    worker_name: str,
    now: datetime,
    batch: bool,
) -> Pulled | None:
    """What the lock and the take by name decided, with the take by id run when it must
    (:func:`pull_on_loop`)."""
    step = _after_take(locked, taken, worker_name)
    if isinstance(step, _TakeById):
        ((row,),) = await transaction.rows((_TAKE_BEST[batch][True], step.params(now)))
        step = _started(row, step.puller)
    if step is not None and step.job is not None:
        notify.sent_by_statement(transaction, job_taken(step.job.category_id, step.job.id))
    return step


@dataclass
class BatchDone:
    """What an express batch did (:func:`batch_on_loop`): the jobs its reports ended (in
    their order), the pulls that started a job (best first), and the last pull's answer:
    None when the general way must decide it (only ever the first pull's, when no job
    was started), else the pull that found nothing more or the last that started one."""

    ended: list[SimpleNamespace]
    pulls: list[Pulled]
    last: Pulled | None


async def batch_on_loop(
    transaction: LoopTransaction,
    worker_name: str,
    reports: Sequence[BatchReport],
    count: int,
    now: datetime,
) -> BatchDone | None:
    """A batch pull on the event loop's connection: the worker's reports ended, then up
    to ``count`` jobs taken, as :func:`finish_on_loop` and :func:`pull_on_loop` would one
    by one, in the caller's transaction. None when a report needs the general way (a
    resend, a late report, a job holding more than slots, an unknown worker): the caller
    rolls back and the general way decides the whole batch.

    The worker's lock, the end of every report (:data:`~.batch_sql.END_MANY_QUIETLY`,
    or :data:`~.finish_sql.END_BY_NAME_QUIETLY` for one) and the take go in one round
    trip: of up to ``count`` jobs
    (:func:`~.batch_sql.take_many_by_name`), or of one by the single take by name
    (:data:`~.pull_plain.TAKE_BEST_BY_NAME_WITH_ROOM` after reports). Each announces
    the worker's room with the jobs it took, in one notification. When the take of many
    found no free head, its answer decides as the single take's would (the take by id
    of a worker with an inventory, the general way, or nothing for the worker); the
    rest of a batch that wants more than it took, one take at a time
    (app/matching/dispatch/batch_sql.py)."""
    params = {**_pull_params(worker_name, now), "p_count": count, "p_room": bool(reports)}
    many = count > 1
    calls = [(_LOCK_PULLER, params)]
    if len(reports) == 1:
        # One report: the single end's statement, its values bound one by one (arrays
        # of one cost psycopg more to dump than the statement costs PostgreSQL).
        (report,) = reports
        ending = _finish_params(report.job_id, worker_name, report, now)
        if ending is None:
            return None
        calls.append((_END_BY_NAME_QUIETLY[report.outcome == "failed"], ending))
    elif reports:
        arrays = _end_many_params(reports)
        if arrays is None:
            return None
        calls.append((_END_MANY_QUIETLY, {**params, **arrays}))
    if many:
        calls.append((_take_many(count), params))
    else:
        calls.append((_TAKE_BY_NAME_WITH_ROOM if reports else _TAKE_BY_NAME[False], params))
    locked, *answers = await transaction.rows(*calls)
    taken = answers[-1]
    if not locked or locked[0][4]:
        # No such worker, or an unknown one: the general way makes it active again.
        return None
    done = BatchDone([], [], None)
    if reports:
        if len(answers[0]) != len(reports):
            return None
        # The take of many announces the room whatever it took; the single take by
        # name only with the job it took (else the commit announces it).
        room_sent = many or taken[0][0] is not None
        for row in answers[0]:
            job = _job(row[: len(_JOB_COLUMNS)])
            job.worker_revived = False
            _note_end(transaction, locked[0][0], job, room_sent)
            done.ended.append(job)
    if not many:
        done.last = await _pulled_on_loop(transaction, locked, taken, worker_name, now, False)
        if done.last is not None and done.last.job is not None:
            done.pulls.append(done.last)
        return done
    done.pulls = _taken_many(transaction, locked, taken, worker_name)
    if not done.pulls and taken[0][-1] == 0:
        # No free head: the take's answer is the single take's (its last column, the
        # count of free heads, aside).
        single = [row[:-1] for row in taken]
        done.last = await _pulled_on_loop(transaction, locked, single, worker_name, now, True)
        if done.last is None or done.last.job is None:
            return done
        done.pulls.append(done.last)
    done.last = done.pulls[-1] if done.pulls else None
    while len(done.pulls) < count:
        done.last = await pull_on_loop(transaction, worker_name, now, batch=True)
        if done.last is None or done.last.job is None:
            break
        done.pulls.append(done.last)
    if done.last is None and done.pulls:
        done.last = done.pulls[-1]
    return done


def _taken_many(
    transaction: LoopTransaction,
    locked: list[tuple[Any, ...]],
    taken: list[tuple[Any, ...]],
    worker_name: str,
) -> list[Pulled]:
    """The pulls the take of many started (none when it took no job: see
    :func:`batch_on_loop`); :class:`HandOver` when the booking found no room after
    all."""
    width = len(_JOB_COLUMNS)
    if taken[0][0] is None:
        return []
    # Each row is the single take by name's, then the count of free heads
    # (batch_sql.take_many_by_name): the worker's four facts end the single take's row.
    *_, max_free, managed, complex_cluster, placed, _free = taken[0]
    puller = puller_of_lock_and_facts(
        locked[0], (max_free, managed, complex_cluster, placed), worker_name
    )
    pulls = []
    for row in taken:
        if row[width] is None:
            raise HandOver("the worker's room was gone after all")
        job = _job(row[:width])
        notify.sent_by_statement(transaction, job_taken(job.category_id, job.id))
        pulls.append(Pulled(job, puller))
    return pulls


def _pull_params(worker_name: str, now: datetime) -> dict[str, Any]:
    return {"p_name": worker_name, "p_now": now, "p_worker": worker_name}


@dataclass(frozen=True)
class _TakeById:
    """The lock found a worker with an inventory: the take by id decides its pull."""

    puller: Puller

    def params(self, now: datetime) -> dict[str, Any]:
        puller = self.puller
        return {
            "p_worker_id": puller.id,
            "p_generation": puller.generation,
            "p_max_free": puller.max_free,
            "p_now": now,
            "p_worker": puller.name,
        }


def _after_take(
    locked: list[tuple[Any, ...]], taken: list[tuple[Any, ...]], worker_name: str
) -> Pulled | _TakeById | None:
    """What the lock and the take by name decided, or that the take by id must."""
    if not locked:
        return None
    # The take's last columns: ``eligible``, then the worker's facts (PULLER_FACTS).
    ((*served, eligible, max_free, managed, complex_cluster, placed),) = taken
    puller = puller_of_lock_and_facts(
        locked[0], (max_free, managed, complex_cluster, placed), worker_name
    )
    if puller.unknown:
        # The take by name served nothing (the worker is not active); the general way
        # makes it active again and logs it (app/matching/liveness.py).
        return None
    if eligible is not None:
        return _started(tuple(served), puller)
    # The take by name served nothing (see PLAIN_PULLER); the lock says why.
    if puller.complex_cluster or puller.placed_waiting:
        return None
    if not puller.active or puller.max_free <= 0:
        return Pulled(None, puller)
    if not puller.managed:
        return None  # the take read the worker otherwise than the lock: look again
    return _TakeById(puller)


def _started(row: tuple[Any, ...], puller: Puller) -> Pulled | None:
    """The pull a take's row says: the job started, nothing for the worker, or None
    (the general way looks at the heads); :class:`HandOver` when the claim found no
    room left."""
    width = len(_JOB_COLUMNS)
    job, (booked_queue_instance, heads) = _job(row[:width]), row[width : width + 2]
    if job.id is None:
        return Pulled(None, puller) if heads == 0 else None
    if booked_queue_instance is None:
        raise HandOver("the worker's room was gone after all")
    return Pulled(job, puller)


def note_pull(pulled: Pulled, started: float) -> None:
    """After the commit: log and count the dispatch as :func:`.pull.pull_for` does."""
    if pulled.job is not None:
        now = pulled.job.started_at
        job_event(None, JobEventKind.DISPATCHED, pulled.job.id, worker=pulled.puller.name)
        JOB_WAIT.observe(waited_seconds(pulled.job.submitted_at, now))
    outcome = "job" if pulled.job is not None else "none"
    DISPATCH_LATENCY.labels(outcome).observe(time.perf_counter() - started)


class EndReport(Protocol):
    """How the worker says its job ended (the API's finish body)."""

    @property
    def outcome(self) -> str: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def exit_code(self) -> int | None: ...
    @property
    def output(self) -> str | None: ...


def finish(
    connection: Connection, job_id: int, worker_name: str, report: EndReport, now: datetime
) -> SimpleNamespace | None:
    """End the worker's running job that holds slots only, as the general finish does;
    the ended job. The caller commits. None for anything else, which the general way
    decides (a resend, a late report, another worker's job, vertices, consumables,
    quotas, an unknown outcome)."""
    params = _finish_params(job_id, worker_name, report, now)
    if params is None:
        return None
    # The lock and the end by name go together: after BEGIN, one round trip decides the
    # finish (issue 23).
    locked, ended = rows_together(
        connection, (_LOCK_REPORTER, params), (_END_BY_NAME[report.outcome == "failed"], params)
    )
    job = _ended(connection, locked, ended)
    if job is not None and locked[0][2]:
        # The worker was unknown: its report is a word, which makes it active again (an
        # unended job goes the general way, which does it there).
        job.worker_revived = bool(_REVIVE.rows(connection, _revive_params(params)))
    return job


async def finish_on_loop(
    transaction: LoopTransaction,
    job_id: int,
    worker_name: str,
    report: EndReport,
    now: datetime,
) -> SimpleNamespace | None:
    """:func:`finish` in a transaction on the event loop's connection
    (app/db/event_loop.py)."""
    params = _finish_params(job_id, worker_name, report, now)
    if params is None:
        return None
    locked, ended = await transaction.rows(
        (_LOCK_REPORTER, params),
        (_END_BY_NAME[report.outcome == "failed"], params),
    )
    job = _ended(transaction, locked, ended)
    if job is not None and locked[0][2]:
        (revived,) = await transaction.rows((_REVIVE, _revive_params(params)))
        job.worker_revived = bool(revived)
    return job


@lru_cache(maxsize=16)
def _take_many_of_limit(limit: int) -> Prebuilt:
    return Prebuilt(take_many_by_name(limit))


def _take_many(count: int) -> Prebuilt:
    """The take of many that takes ``count`` jobs, built on first use."""
    return _take_many_of_limit(take_limit(count))


class BatchReport(EndReport, Protocol):
    """A report a batch carries: a finish body and the job's id."""

    @property
    def job_id(self) -> int: ...


def _end_many_params(reports: Sequence[BatchReport]) -> dict[str, Any] | None:
    """The arrays :data:`~.batch_sql.END_MANY_QUIETLY` ends the reports by, as
    :func:`_finish_params` gives the single end its values; None when an outcome is not
    one the express way ends."""
    if any(report.outcome not in FINAL_OUTCOMES for report in reports):
        return None
    return {
        "p_job_ids": [report.job_id for report in reports],
        "p_failed": [report.outcome == "failed" for report in reports],
        "p_exit_codes": [report.exit_code for report in reports],
        "p_outputs": [
            report.output[-MAX_OUTPUT:] if report.output is not None else None for report in reports
        ],
        "p_reasons": [report.reason or "the worker reported failure" for report in reports],
        "p_details": [report.reason for report in reports],
    }


def _revive_params(params: dict[str, Any]) -> dict[str, Any]:
    return {"p_name": params["p_name"], "p_now": params["p_now"]}


def _finish_params(
    job_id: int, worker_name: str, report: EndReport, now: datetime
) -> dict[str, Any] | None:
    """The parameters of the lock and the end, or None for an outcome the express way
    does not end."""
    outcome, reason, output = report.outcome, report.reason, report.output
    if outcome not in FINAL_OUTCOMES:
        return None
    return {
        "p_name": worker_name,
        "p_now": now,
        "p_job_id": job_id,
        "p_exit_code": report.exit_code,
        "p_output": output[-MAX_OUTPUT:] if output is not None else None,
        "p_reason": reason or "the worker reported failure",
        "p_worker": worker_name,
        "p_detail": reason,
    }


def _ended(
    holder: Connection | LoopTransaction,
    locked: list[tuple[Any, ...]],
    ended: list[tuple[Any, ...]],
) -> SimpleNamespace | None:
    """The job the end by name ended, with the transaction's announcements noted, or
    None (the general way decides)."""
    if not locked or locked[0][1] or not ended:
        return None
    job = _job(ended[0][: len(_JOB_COLUMNS)])
    #: Whether the report made an unknown worker active again (:func:`finish`).
    job.worker_revived = False
    _note_end(holder, locked[0][0], job, room_sent=True)
    return job


def _note_end(
    holder: Connection | LoopTransaction, worker_id: int, job: SimpleNamespace, room_sent: bool
) -> None:
    """The announcements of a job's end: the worker's room (sent by a statement, or left
    for the commit) and what else the end may let run."""
    if room_sent:
        notify.sent_by_statement(holder, room_changed(worker_id))
    else:
        notify.announce(holder, room_changed(worker_id))
    if job.hard is not None or job.pe is not None:
        # It may have held global consumables, which any worker's next job may need:
        # every waiter looks again, as the general finish announces.
        notify.announce(holder, EVERYTHING)
    elif job.array_id is not None:
        # A task of an array: the array's other tasks, held back by its -tc, may run now.
        notify.announce(holder, job_waiting(job.category_id))


def note_finish(job: SimpleNamespace, worker_name: str, report: EndReport) -> None:
    """After the commit: log the end as :func:`.pull.finish` does."""
    kind = JobEventKind.FINISHED if report.outcome == "finished" else JobEventKind.FAILED
    job_event(None, kind, job.id, worker=worker_name, detail=report.reason)
    if job.worker_revived:
        note_revived(None, worker_name)


def _job(values: tuple[Any, ...]) -> SimpleNamespace:
    return SimpleNamespace(**dict(zip(_JOB_COLUMNS, values, strict=True)))
