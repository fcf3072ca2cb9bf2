"""Dispatch in pull mode: a worker asks for work and gets the best waiting job it can run,
its slots booked in the same transaction; and the end of a job, which frees them.

Every writer takes row locks in one order: the worker (several workers in id order, for a
job that holds vertices on several), then the job, then its queue instances, then inventory
rows. PostgreSQL then never finds a cycle between pulls, allocations, finishes and cancels.

The cost of a pull grows with the number of categories, not of waiting jobs: for each
category the worker fits, the best waiting job is one seek in the partial index
``ix_jobs_waiting_order``; the best of those heads wins (priority, then age, then id).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum, auto
from functools import lru_cache
from typing import Any, Literal

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.orm import Session

from app.db import dialect
from app.db.base import utcnow
from app.db.models import (
    Allocation,
    Category,
    Job,
    JobEventKind,
    JobState,
    Queue,
    QueueInstance,
    Task,
    Worker,
)
from app.db.tables import INVENTORY_BOOKINGS, QUEUE_INSTANCES
from app.matching import announce, domain_events, history, late_reports, liveness
from app.matching.allocation import bookings as vertex_bookings
from app.matching.allocation import trees
from app.matching.allocation.allocator import Policy, place_requests
from app.matching.allocation.vertex_requests import VertexRequest, build_requests
from app.matching.debusine.metadata import effective_metadata
from app.matching.dispatch import pull_claim, pull_heads, pull_plain, task_limits
from app.matching.dispatch.finish_pg import finish_holding_vertices
from app.matching.dispatch.finish_sql import finish_slots_only
from app.matching.dispatch.puller import Puller, lock_puller
from app.matching.dispatch.record import deliver_placed
from app.matching.errors import ConflictError, ForbiddenError, InvalidFieldError, NotFoundError
from app.matching.gridengine.bookings import release_bookings
from app.matching.gridengine.decide import dispatch_on
from app.matching.gridengine.pull import GridEnginePull
from app.matching.gridengine.queue_lists import names_queues
from app.matching.gridengine.state import ClusterState, load_state
from app.matching.locks import worker_by_name
from app.matching.ordering import usage as fair_share_usage
from app.metrics import DISPATCH_LATENCY, JOB_WAIT
from app.notations.flux.jobspec import validate_resources
from app.task_plugins import can_run_on

HEADS_PER_ROUND = pull_heads.HEADS_PER_ROUND
ROUNDS = 3


@dataclass(frozen=True)
class FreeSlots:
    queue_instance_id: int
    queue: str
    free: int


def free_slots(session: Session, worker_id: int) -> list[FreeSlots]:
    """The worker's queue instances in queue order, with their free slots."""
    rows = session.execute(
        select(QueueInstance.id, Queue.name, QueueInstance.slots - QueueInstance.used_slots)
        .join(Queue, Queue.id == QueueInstance.queue_id)
        .where(QueueInstance.worker_id == worker_id)
        .order_by(func.coalesce(QueueInstance.seq_no, Queue.seq_no), QueueInstance.id)
    ).all()
    return [FreeSlots(qi, queue, free) for qi, queue, free in rows]


@lru_cache(maxsize=4096)
def category_requests(jobspec_json: str) -> tuple[VertexRequest, ...]:
    """The allocator's request tree of a category's canonical jobspec."""
    return build_requests(validate_resources(json.loads(jobspec_json)))


def pull(session: Session, worker_name: str, policy: Policy = "first") -> Job | None:
    """Give the worker its next job (running, slots booked), or None when there is none.
    A job with a jobspec given to a worker with an inventory gets its vertices on that
    worker, chosen by ``policy`` and booked in this transaction."""
    return pull_for(session, worker_name, policy)[0]


def pull_for(
    session: Session, worker_name: str, policy: Policy = "first"
) -> tuple[Job | None, Puller]:
    """:func:`pull`, with what the pull read about the worker (its metadata report time,
    for the HTTP answer), so that the caller need not read the worker again. A job the
    scheduler placed on the worker is delivered before any new work
    (``puller.placed_waiting`` then says so)."""
    started = time.perf_counter()
    job, puller, placed = next_job(session, worker_name, policy)
    if job is not None and not placed:
        announce.job_taken_by_pull(session, job.category_id, job.id)
        _note_dispatch(session, job, puller.name, utcnow())
    DISPATCH_LATENCY.labels("job" if job else "none").observe(time.perf_counter() - started)
    return job, puller


def next_job(
    session: Session, worker_name: str, policy: Policy = "first"
) -> tuple[Job | None, Puller, bool]:
    """The work of a pull (the worker stamped and locked, its job claimed and booked)
    without announcing it or timing it, and whether the job is one the scheduler placed:
    a what-if (app/matching/whatif/) pulls this way in a savepoint it rolls back, so that
    nothing is announced and no dispatch is counted."""
    now = utcnow()
    puller = lock_puller(session, worker_name, now)
    if puller is None:
        raise NotFoundError(f"no worker named {worker_name!r}")
    # A job the scheduler placed on this worker goes first: it is booked and its lease
    # is running (app/matching/dispatch/record.py).
    job = deliver_placed(session, puller.id) if puller.placed_waiting else None
    if job is not None:
        return job, puller, True
    return _pull(session, puller, now, policy), puller, False


def would_start(session: Session, worker_name: str, job_id: int, policy: Policy = "first") -> bool:
    """Whether a pull by the worker would start this waiting job were it the best job the
    worker fits: the pull's own steps (the worker's lock and state, the heads query's
    conditions, the task's plug-in, then the claim, Grid Engine rules, placement and
    booking of :meth:`_HeadRounds.take`) applied to this one job. It starts the job as a
    pull would, so the caller runs it in a savepoint that it rolls back
    (app/matching/readiness.py), as a what-if does with whole pulls."""
    now = utcnow()
    puller = lock_puller(session, worker_name, now)
    if puller is None:
        raise NotFoundError(f"no worker named {worker_name!r}")
    if not puller.active or puller.max_free <= 0:
        return False
    fit = pull_heads.job_fit(session, puller, job_id)
    if fit is None:
        return False
    task_id, plain, limited_array = fit
    rounds = _HeadRounds(session, puller, now, policy)
    if task_id is not None and not rounds.plugins.accepts(task_id):
        return False
    taken = rounds.take_head(job_id, plain, limited_array)
    return isinstance(taken, Job) and taken.id == job_id


def _note_dispatch(session: Session, job: Job, worker_name: str, now: datetime) -> None:
    """Log the dispatch and count its wait since submission, once the pull commits."""
    domain_events.job_event(session, JobEventKind.DISPATCHED, job.id, worker=worker_name)
    waited = waited_seconds(job.submitted_at, now)
    domain_events.after_commit(session, lambda: JOB_WAIT.observe(waited))


def waited_seconds(submitted: datetime, now: datetime) -> float:
    """How long a job dispatched ``now`` waited since its submission."""
    if submitted.tzinfo is None:  # SQLite hands back naive UTC datetimes
        submitted = submitted.replace(tzinfo=UTC)
    return max(0.0, (now - submitted).total_seconds())


def _pull(session: Session, puller: Puller, now: datetime, policy: Policy) -> Job | None:
    if not puller.active or puller.max_free <= 0:
        return None
    if not puller.complex_cluster:
        # The common pull in one statement (PostgreSQL); the rounds below are the general way.
        best = pull_plain.take_best_plain(session, puller, now)
        if best.decided:
            return best.job
    return _HeadRounds(session, puller, now, policy).take()


class _Next(Enum):
    """A head the pull passes over: a concurrent pull holds or took it, it does not fit
    after all, or it has no placement on the worker."""

    HEAD = auto()


class _HeadRounds:
    """The general way of a pull: rounds over the best heads until one is taken, with what
    the rounds share (the plug-ins' verdicts, the heads without a placement, the Grid
    Engine state loaded at first need)."""

    def __init__(self, session: Session, puller: Puller, now: datetime, policy: Policy) -> None:
        self.session = session
        self.puller = puller
        self.now = now
        self.policy = policy
        self.plugins = _PluginVerdicts(session, puller.id)
        self.skipped: set[int] = set()
        self.state: ClusterState | None = None
        self.grid_engine: GridEnginePull | None = None

    def take(self) -> Job | None:
        """The job started on the worker, or None."""
        rounds = 0
        while rounds < ROUNDS:
            heads = pull_heads.heads(
                self.session, self.puller, HEADS_PER_ROUND, self.plugins.refused
            )
            refused_before = len(self.plugins.refused)
            found = False
            for job_id, task_id, plain, limited_array, *_standing in heads:
                found = True
                # A plug-in's verdict depends on the task and the worker only, so a refusal
                # rules out every category of the task; the next query leaves them out, and
                # a pull costs O(categories + plug-in tasks), never O(waiting jobs).
                if job_id in self.skipped or (
                    task_id is not None and not self.plugins.accepts(task_id)
                ):
                    continue
                taken = self.take_head(job_id, plain, limited_array)
                if taken is not _Next.HEAD:
                    return taken
            if not found:
                return None
            if len(self.plugins.refused) == refused_before:
                # Every head was taken by concurrent pulls: another round, a bounded number.
                rounds += 1
        return None

    def take_head(
        self, job_id: int, plain: bool, limited_array: int | None = None
    ) -> Job | Literal[_Next.HEAD] | None:
        """Claim and start one head: the job, None when the worker has no room left (the
        pull ends), or :attr:`_Next.HEAD`. A task of an array with a limit (qsub -tc)
        is claimed only while the array, locked, runs fewer tasks than its limit."""
        session, puller = self.session, self.puller
        if limited_array is not None and not task_limits.array_has_room(session, limited_array):
            return _Next.HEAD
        if plain and not puller.complex_cluster:
            # Momotor tags, RFC 31 constraints, tasks: the worker's fit was decided in
            # SQL; claim, book and record in four statements without ORM objects.
            claimed, taken = pull_plain.claim_plain_job(session, job_id, puller, self.now)
            return taken if claimed else _Next.HEAD
        if puller.complex_cluster:
            # Every job of this worker meets the Grid Engine rules (its values, the
            # global host's): claim with the state, decide, then book and start in
            # one statement on PostgreSQL.
            if self.grid_engine is None:
                self.grid_engine = GridEnginePull(session, puller)
            started = self.grid_engine.take(job_id)
            return _Next.HEAD if started is None else started
        held = pull_claim.claim_with_category(session, job_id)
        if held is None:
            return _Next.HEAD
        job, category = held
        return self._start_claimed(job, category)

    def _start_claimed(self, job: Job, category: Category) -> Job | Literal[_Next.HEAD] | None:
        """Book and start a job this pull holds, through the ORM."""
        session, puller = self.session, self.puller
        if (
            puller.complex_cluster
            or category.hard != "NONE"
            or category.pe is not None
            or names_queues(category)
        ):
            # Grid Engine rules: load values and consumables now, bookings
            # (docs/notations/gridengine.md).
            if self.state is None:
                self.state = load_puller_state(session, puller)
            started = start_by_grid_engine_rules(session, puller, job, category, self.state)
            return _Next.HEAD if started is None else started
        placement = None
        if puller.managed and category.jobspec is not None:
            outcome = place_requests(
                trees.worker_tree(session, [puller.id]),
                category_requests(category.jobspec),
                self.policy,
            )
            if outcome.placement is None:
                self.skipped.add(job.id)
                return _Next.HEAD
            placement = outcome.placement
        queue_instance_id = pull_claim.book_first_room(session, puller.id, job.slots)
        if queue_instance_id is None:
            return None
        pull_claim.allocate_slots(session, job.id, queue_instance_id, job.slots, self.now)
        if placement is not None:
            vertex_bookings.book_placement(session, job, placement)
        return pull_claim.start(session, job, puller.id, puller.name)


def load_puller_state(session: Session, puller: Puller) -> ClusterState:
    """The Grid Engine state a pull decides on: the puller's values and consumables, the
    global host's, and the attribute table, read in one statement."""
    return load_state(session, None, [puller.id], names={puller.id: puller.name})


def start_by_grid_engine_rules(
    session: Session, puller: Puller, job: Job, category: Category, state: ClusterState
) -> Job | None:
    """Decide a claimed job on the loaded state through the ORM (the path of workers
    without Grid Engine values) and, when its slots and consumables are booked, start it
    on the puller; None when it does not fit. Workers with values take the Core
    statements of app/matching/gridengine/pull.py instead, which tests compare to this."""
    _decision, booked = dispatch_on(session, state, job, category, state.queue_order())
    if not booked:
        return None
    return pull_claim.start(session, job, job.worker_id or puller.id, puller.name)


class _PluginVerdicts:
    """``can_run_on`` of each task's plug-in for one worker, asked at most once per pull."""

    def __init__(self, session: Session, worker_id: int) -> None:
        self._session = session
        self._worker_id = worker_id
        self._verdicts: dict[int, bool] = {}
        self._metadata: dict[str, Any] | None = None
        self.refused: set[int] = set()

    def accepts(self, task_id: int) -> bool:
        if task_id not in self._verdicts:
            task = self._session.get(Task, task_id)
            verdict = True
            if task is not None and task.plugin is not None:
                if self._metadata is None:
                    self._metadata = effective_metadata(self._session, [self._worker_id])[
                        self._worker_id
                    ]
                verdict = can_run_on(task.plugin, self._metadata)
            self._verdicts[task_id] = verdict
            if not verdict:
                self.refused.add(task_id)
        return self._verdicts[task_id]


# Built once: building a statement costs more than running it (issue 9).
_RETURN_SLOTS = (
    update(QUEUE_INSTANCES)
    .where(QUEUE_INSTANCES.c.id == bindparam("qi_id"))
    .values(used_slots=QUEUE_INSTANCES.c.used_slots - bindparam("b_slots"))
)
_HELD_ALLOCATIONS = (
    select(Allocation)
    .where(Allocation.job_id == bindparam("job_id"), Allocation.released_at.is_(None))
    .with_for_update()
)
_LOCK_JOB = select(Job).where(Job.id == bindparam("job_id")).with_for_update()
_BOOKED_WORKERS = (
    select(INVENTORY_BOOKINGS.c.worker_id)
    .where(
        INVENTORY_BOOKINGS.c.job_id == bindparam("job_id"),
        INVENTORY_BOOKINGS.c.released_at.is_(None),
    )
    .distinct()
)


def release_allocations(session: Session, job: Job) -> None:
    """Free what a job holds: its allocations end and their slots return."""
    allocations = session.scalars(_HELD_ALLOCATIONS, {"job_id": job.id}).all()
    now = utcnow()
    for allocation in allocations:
        session.connection().execute(
            _RETURN_SLOTS, {"qi_id": allocation.queue_instance_id, "b_slots": allocation.slots}
        )
        allocation.released_at = now
    release_bookings(session, job.id)
    vertex_bookings.release(session, job)
    session.flush()


def wait_again(
    session: Session,
    job: Job,
    kind: JobEventKind,
    *,
    worker: str,
    detail: str,
    cause: str | None = None,
) -> None:
    """The running job, what it held already freed, waits again with its original
    submission time (so it keeps its place), and its history says why: the worker gave it
    back, its lease ran out, or its worker was deleted. The attempt stays counted. The
    pulls waiting for its category are woken, whichever of the three it was."""
    announce.job_waits(session, job.category_id, job.id)
    # Its run counts against its submitter's share (fair share), as a finished one does.
    fair_share_usage.book_job(session, job, utcnow())
    job.state = JobState.WAITING
    job.worker_id = None
    job.started_at = None
    history.record(session, job, kind, worker=worker, detail=detail, cause=cause)


def booked_workers(session: Session, job_id: int) -> set[int]:
    """The workers the job holds vertices on (a running job's set does not change)."""
    return set(session.connection().execute(_BOOKED_WORKERS, {"job_id": job_id}).scalars())


def lock_workers(session: Session, worker_ids: set[int]) -> set[int]:
    """Lock the workers' rows in id order (the order every multi-worker writer uses)."""
    session.scalars(
        select(Worker)
        .where(Worker.id.in_(sorted(worker_ids)))
        .order_by(Worker.id)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).all()
    return set(worker_ids)


FINAL_OUTCOMES = {"finished": JobState.FINISHED, "failed": JobState.FAILED}


#: The tail of a command's output kept on the job.
MAX_OUTPUT = 65_536


def _running_job_of(session: Session, job_id: int, worker_name: str) -> tuple[Worker, Job]:
    """The worker and its running job, locked for a change of state."""
    # Lock order: workers, then job, then queue instances, as in pull; the other order
    # deadlocked with a concurrent pull by the same worker on PostgreSQL. A job holding
    # vertices on other workers (multi-node) locks those workers too: releasing rewrites
    # their free counts, whose foreign key waits for any pull that holds their row.
    worker = worker_by_name(session, worker_name)
    locked = lock_workers(session, {worker.id} | booked_workers(session, job_id))
    job = running_on(session.scalars(_LOCK_JOB, {"job_id": job_id}).one_or_none(), job_id, worker)
    if not booked_workers(session, job_id) <= locked:
        raise ConflictError(f"job {job_id} started while it was being finished; retry")
    return worker, job


def running_on(job: Job | None, job_id: int, worker: Worker) -> Job:
    """``job`` (found by ``job_id``), which must be running on ``worker``; else the error
    that says why not."""
    if job is None:
        raise NotFoundError(f"no job with id {job_id}")
    if job.worker_id != worker.id:
        raise ForbiddenError(f"job {job_id} is not running on worker {worker.name!r}")
    if job.state is not JobState.RUNNING:
        raise ConflictError(f"job {job_id} is {job.state.value}, not running")
    return job


def finish(
    session: Session,
    job_id: int,
    worker_name: str,
    outcome: str,
    reason: str | None = None,
    *,
    exit_code: int | None = None,
    output: str | None = None,
) -> Job:
    """The running worker reports the end of its job (with its command's exit status and
    output, when it ran one); its slots are freed."""
    if outcome not in FINAL_OUTCOMES:
        raise InvalidFieldError("outcome", "must be 'finished' or 'failed'")
    output = output[-MAX_OUTPUT:] if output is not None else None
    ended = _finish(session, job_id, worker_name, outcome, reason, exit_code, output)
    announce.rooms_changed(session, [ended.worker_id])
    if ended.hard is not None or ended.pe is not None:
        # It may have held global consumables, which any worker's next job may need.
        announce.everything_changed(session)
    elif ended.array_id is not None:
        # A task of an array: the array's other tasks, held back by its qsub -tc, may run
        # now on any worker that fits, not only this one. Without it they waited for
        # some other news, or (a waiting pull's renewal standing on its last attempt,
        # app/matching/wakeups.py renew_quietly) for minutes.
        announce.job_waits(session, ended.category_id)
    return ended


def _finish(
    session: Session,
    job_id: int,
    worker_name: str,
    outcome: str,
    reason: str | None,
    exit_code: int | None,
    output: str | None,
) -> Job:
    now = utcnow()
    kind = JobEventKind.FINISHED if outcome == "finished" else JobEventKind.FAILED
    ended = finish_slots_only(
        session, job_id, worker_name, outcome == "failed", reason, exit_code, output, now
    )
    if ended is None and dialect.supports_writing_ctes(session.connection()):
        # A job that holds vertices, in two statements on PostgreSQL.
        ended = finish_holding_vertices(
            session, job_id, worker_name, outcome == "failed", reason, exit_code, output, now
        )
    if ended is not None:
        # The statements wrote the history row themselves; log what they changed.
        domain_events.job_event(session, kind, ended.id, worker=worker_name, detail=reason)
        fair_share_usage.book_job(session, ended)
        return ended
    try:
        worker, job = _running_job_of(session, job_id, worker_name)
    except (ForbiddenError, ConflictError):
        # A resend of an applied report is answered as the first; a report from the worker
        # that lost the job raises LateReportError, recorded; anything else is refused.
        resent = late_reports.resent_or_late(session, job_id, worker_name, kind, exit_code)
        if resent is None:
            raise
        return resent
    release_allocations(session, job)
    job.exit_code = exit_code
    job.output = output
    job.state = FINAL_OUTCOMES[outcome]
    job.ended_at = utcnow()
    if outcome == "failed":
        job.failure_reason = reason or "the worker reported failure"
    history.record(session, job, kind, worker=worker.name, detail=reason)
    liveness.heard_from(session, worker)
    session.flush()
    fair_share_usage.book_job(session, job)
    return job


def return_job(session: Session, job_id: int, worker_name: str, reason: str | None = None) -> Job:
    """The running worker gives its job back (it is stopping, or it restarted and killed
    what it had left running): its slots are freed and it waits again in its place
    (:func:`wait_again`)."""
    worker, job = _running_job_of(session, job_id, worker_name)
    announce.rooms_changed(session, {worker.id} | booked_workers(session, job_id))
    release_allocations(session, job)
    job.awaiting_pickup = False
    wait_again(
        session,
        job,
        JobEventKind.RETURNED,
        worker=worker.name,
        detail=reason or "the worker gave the job back unfinished",
    )
    liveness.heard_from(session, worker)
    session.flush()
    return job
