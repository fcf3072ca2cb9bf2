"""An executor for the concurrency tests: a loop that acts as one or more workers, pulling
jobs, holding them for a few turns (so that slots are held concurrently) and finishing them.

The same loop runs in threads (SQLite, one shared :class:`Database`) and in spawned
processes (PostgreSQL, one :class:`Database` per process), so it lives in an importable
module and reports through picklable dataclasses. It never asserts: it records what
happened (every dispatch, every finish, every error) and the test judges afterwards.
"""

from __future__ import annotations

import random
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol, TypeVar

from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from app.db import dialect
from app.db.engine import Database
from app.db.models import Job, JobState
from app.matching.dispatch import pull as dispatch

T = TypeVar("T")

#: Errors kept verbatim per executor; more are only counted.
MAX_KEPT_ERRORS = 20


class Flag(Protocol):
    """What threading.Event and multiprocessing's Event have in common."""

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


@dataclass(frozen=True)
class Plan:
    """What one executor does: which workers it acts as, for how long, how it behaves."""

    executor: str
    workers: tuple[str, ...]
    seed: int
    #: Wall-clock bound of the run, counted from the start signal.
    run_seconds: float
    #: A pulled job is held for 0..max_hold further turns of its executor.
    max_hold: int = 3
    #: Share of jobs the worker reports as failed (exercises the failure path's release).
    failure_rate: float = 0.1
    #: Pause after an empty pull, so idle executors do not hammer the database.
    idle_pause: tuple[float, float] = (0.001, 0.004)


@dataclass(frozen=True)
class Dispatch:
    job_id: int
    worker: str
    slots: int
    at: float


@dataclass(frozen=True)
class Finish:
    job_id: int
    worker: str
    outcome: str
    at: float


@dataclass
class Report:
    executor: str
    dispatched: list[Dispatch] = field(default_factory=list)
    finished: list[Finish] = field(default_factory=list)
    pulls: int = 0
    empty_pulls: int = 0
    #: Transactions retried because SQLite said "database is locked".
    busy_retries: int = 0
    errors: list[str] = field(default_factory=list)
    error_count: int = 0
    timed_out: bool = False
    #: Jobs still held when the loop ended (should be none).
    still_held: list[int] = field(default_factory=list)
    duration: float = 0.0
    #: Time spent in pull and in finish transactions (retries included).
    pull_seconds: float = 0.0
    finish_seconds: float = 0.0

    def error(self, where: str, exc: BaseException) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_KEPT_ERRORS:
            lines = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            self.errors.append(f"{self.executor} {where}: {lines}")


@dataclass
class _Held:
    job_id: int
    worker: str
    turns: int


class _Deadline(Exception):
    """The run's time bound passed while a transaction was being retried."""


def _transact(
    database: Database, work: Callable[[Session], T], report: Report, deadline: float
) -> T:
    """Run ``work`` in one transaction; retry only when SQLite reports a busy database."""
    while True:
        try:
            with database.transaction() as session:
                return work(session)
        except OperationalError as exc:
            if not dialect.is_busy_error(exc):
                raise
            report.busy_retries += 1
            if time.time() > deadline:
                raise _Deadline from exc
            time.sleep(random.uniform(0.0005, 0.003))


def _jobs_left_to_pull(database: Database) -> int:
    """Waiting jobs, and jobs the scheduler placed that their worker has not pulled yet
    (a pull delivers them, issue 22)."""
    with database.transaction(write=False) as session:
        return (
            session.scalar(
                select(func.count())
                .select_from(Job)
                .where(
                    (Job.state == JobState.WAITING)
                    | ((Job.state == JobState.RUNNING) & Job.awaiting_pickup.is_(True))
                )
            )
            or 0
        )


def _pull(session: Session, worker: str) -> tuple[int, int] | None:
    job = dispatch.pull(session, worker)
    return None if job is None else (job.id, job.slots)


def _finish(session: Session, *, held: _Held, outcome: str) -> None:
    reason = "exit code 1" if outcome == "failed" else None
    dispatch.finish(session, held.job_id, held.worker, outcome, reason)


def run_executor(database: Database, plan: Plan, go: Flag, submitted: Flag) -> Report:
    """The executor's loop; returns when no job is left to pull and none is held, or at the
    deadline (then ``timed_out`` is set)."""
    report = Report(plan.executor)
    rng = random.Random(plan.seed)
    held: list[_Held] = []
    go.wait()
    started = time.time()
    deadline = started + plan.run_seconds
    turn = 0
    try:
        while True:
            if time.time() > deadline or report.error_count > 100:
                report.timed_out = time.time() > deadline
                break
            due = next((h for h in held if h.turns <= 0), None)
            if due is not None:
                outcome = "failed" if rng.random() < plan.failure_rate else "finished"
                began = time.perf_counter()
                try:
                    _transact(
                        database, partial(_finish, held=due, outcome=outcome), report, deadline
                    )
                except _Deadline:
                    continue
                except Exception as exc:  # recorded; the job stays held and is retried
                    report.error(f"finish job {due.job_id} on {due.worker}", exc)
                    time.sleep(0.005)
                    continue
                finally:
                    report.finish_seconds += time.perf_counter() - began
                held.remove(due)
                report.finished.append(Finish(due.job_id, due.worker, outcome, time.time()))
                continue
            for item in held:
                item.turns -= 1
            worker = plan.workers[turn % len(plan.workers)]
            turn += 1
            report.pulls += 1
            began = time.perf_counter()
            try:
                got = _transact(database, partial(_pull, worker=worker), report, deadline)
            except _Deadline:
                continue
            except Exception as exc:
                report.error(f"pull by {worker}", exc)
                time.sleep(0.005)
                continue
            finally:
                report.pull_seconds += time.perf_counter() - began
            if got is not None:
                job_id, slots = got
                report.dispatched.append(Dispatch(job_id, worker, slots, time.time()))
                held.append(_Held(job_id, worker, rng.randint(0, plan.max_hold)))
                continue
            report.empty_pulls += 1
            # ``submitted`` is set after the last submission committed, so once it is set a
            # count of zero jobs left is final: nothing is left for anyone to pull.
            if not held and submitted.is_set() and _jobs_left_to_pull(database) == 0:
                break
            time.sleep(rng.uniform(*plan.idle_pause))
    except Exception as exc:  # never let an executor die silently
        report.error("loop", exc)
    report.still_held = [h.job_id for h in held]
    report.duration = time.time() - started
    return report


def process_main(url: str, plan: Plan, go: Flag, submitted: Flag, results: Any) -> None:
    """Entry point of a spawned process: its own Database, then the loop; the report goes
    back through ``results`` (a multiprocessing queue) as ("report", Report)."""
    report = Report(plan.executor)
    try:
        database = Database(url, busy_timeout=5.0)
        try:
            database.ping()
            results.put(("ready", plan.executor))
            report = run_executor(database, plan, go, submitted)
        finally:
            database.dispose()
    except BaseException as exc:
        report.error("process", exc)
        results.put(("ready", plan.executor))  # do not leave the parent waiting
    results.put(("report", report))
