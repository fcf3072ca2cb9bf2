"""Can a worker run a job now? The dynamic half of an explanation, and its summary.

The static half (app/matching/candidates.py ``explain_job``) says which clauses rule a
worker out for good: the misfit cache decides it in SQL, explain.py says it in words. What
changes from minute to minute is checked here the way a pull checks it
(app/matching/dispatch/pull.py): the worker's state, a queue instance with enough free
slots, room in the free inventory for a jobspec, and the Grid Engine evaluator on the
current load values and consumables. The summary counts workers per first failing clause,
as HTCondor's ``condor_q -better-analyze`` does, and names the one change that would let
the job run soonest.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import (
    Category,
    Job,
    JobState,
    Worker,
    WorkerInventory,
    WorkerState,
)
from app.matching import liveness
from app.matching.allocation import trees
from app.matching.allocation.allocator import Policy, place_requests
from app.matching.candidates import StaticExplanation, explain_job
from app.matching.dispatch.pull import category_requests
from app.matching.gridengine.decide import has_complex_values, pe_from_database, plan_job
from app.matching.gridengine.queue_lists import names_queues
from app.matching.gridengine.quotas import load_quota_book
from app.matching.gridengine.state import ClusterState, load_state
from app.matching.gridengine.table import load_table
from app.matching.misfits import REASONS
from app.matching.slots import worker_free_slots
from app.wire.explanation import Clause, ExplainSummary, WorkerExplanation

#: What each dynamic reason code means; the static ones are the misfit codes
#: (app/matching/misfits.py ``REASONS``).
DYNAMIC_REASONS = {
    "worker-draining": "the worker is draining: it finishes what it runs and gets nothing new",
    "worker-disabled": "an administrator disabled the worker",
    "worker-offline": "the worker is offline",
    liveness.REASON_CODE: liveness.MEANING,
    "no-free-slots": "no queue instance of the worker has enough free slots now",
    "inventory-busy": "the worker's free inventory cannot hold the job now",
    "sge-now": "the Grid Engine values or consumables of now do not admit the job",
}

_STATE_CODES = {
    WorkerState.DRAINING: "worker-draining",
    WorkerState.DISABLED: "worker-disabled",
    WorkerState.OFFLINE: "worker-offline",
    WorkerState.UNKNOWN: liveness.REASON_CODE,
}


@dataclass(frozen=True)
class WorkerNow:
    """What a worker is now, as the dynamic checks read it."""

    id: int
    name: str
    state: WorkerState
    state_reason: str | None
    largest_free: int
    running_jobs: int
    #: When it was last heard from, and registered (said of an unknown worker).
    last_seen: datetime | None = None
    registered_at: datetime | None = None


def workers_now(session: Session, names: list[str]) -> dict[str, WorkerNow]:
    """The state, largest free slot count and running job count of the named workers."""
    largest_free = worker_free_slots(func.max)
    running = (
        select(func.count(Job.id))
        .where(Job.worker_id == Worker.id, Job.state == JobState.RUNNING)
        .scalar_subquery()
    )
    rows = session.execute(
        select(
            Worker.id,
            Worker.name,
            Worker.state,
            Worker.state_reason,
            largest_free,
            running,
            Worker.last_seen,
            Worker.created_at,
        ).where(Worker.name.in_(names))
    ).all()
    return {
        name: WorkerNow(id_, name, state, reason, int(free), int(count), seen, created)
        for id_, name, state, reason, free, count, seen, created in rows
    }


class DynamicCheck:
    """The checks of a pull for one waiting job, worker by worker; the Grid Engine state
    and the attribute table are loaded once, when a worker first needs them."""

    def __init__(self, session: Session, job: Job, category: Category, policy: Policy) -> None:
        self.session = session
        self.job = job
        self.category = category
        self.policy = policy
        self.grid_engine_job = (
            category.hard != "NONE"
            or category.soft != "NONE"
            or category.pe is not None
            or names_queues(category)
        )
        self._state: ClusterState | None = None

    def clauses(self, worker: WorkerNow) -> list[Clause]:
        """The first dynamic clause that keeps the worker from taking the job now, if any
        (a pull stops at the first, so the explanation does too)."""
        code = _STATE_CODES.get(worker.state)
        if code == liveness.REASON_CODE:
            words = liveness.unknown_words(worker.last_seen, worker.registered_at)
            return [Clause(code, words)]
        if code is not None:
            why = f" ({worker.state_reason})" if worker.state_reason else ""
            return [Clause(code, DYNAMIC_REASONS[code] + why)]
        if worker.largest_free < self.job.slots:
            return [
                Clause(
                    "no-free-slots",
                    f"the job needs {self.job.slots} slots on one queue instance; the "
                    f"worker has at most {worker.largest_free} free now "
                    f"({worker.running_jobs} running jobs)",
                )
            ]
        if self.grid_engine_job or has_complex_values(self.session, worker.id):
            return self._grid_engine(worker)
        return self._inventory(worker)

    def _grid_engine(self, worker: WorkerNow) -> list[Clause]:
        if self._state is None:
            self._state = load_state(self.session, load_table(self.session))
        state = self._state
        decision, _bookings = plan_job(
            state,
            self.category,
            state.queue_order([worker.id]),
            pe_from_database(self.session),
            trace=True,
            quota_book=load_quota_book(self.session),
            user=self.job.submitter,
        )
        if decision.assignment is not None:
            return []
        said = [fit.message for _slot, fit in decision.fits if fit.message]
        if decision.quota_refusal is not None:
            said.append(decision.quota_refusal)
        words = said[0] if said else DYNAMIC_REASONS["sge-now"]
        return [Clause("sge-now", words)]

    def _inventory(self, worker: WorkerNow) -> list[Clause]:
        if self.category.jobspec is None or self.session.get(WorkerInventory, worker.id) is None:
            return []
        outcome = place_requests(
            trees.worker_tree(self.session, [worker.id]),
            category_requests(self.category.jobspec),
            self.policy,
        )
        if outcome.placement is not None:
            return []
        short = "; ".join(
            f"{s.path}: needs {s.needed}, found at most {s.found}" for s in outcome.shortfalls
        )
        return [
            Clause(
                "inventory-busy",
                DYNAMIC_REASONS["inventory-busy"] + (f": {short}" if short else ""),
            )
        ]


def summarise(verdicts: list[WorkerExplanation], workers: dict[str, WorkerNow]) -> ExplainSummary:
    failures = Counter(v.reason for v in verdicts if v.reason is not None)
    eligible = [v for v in verdicts if v.eligible]
    ready = [v for v in eligible if v.can_run_now]
    return ExplainSummary(
        workers=len(verdicts),
        eligible=len(eligible),
        can_run_now=len(ready),
        fit_but_busy=len(eligible) - len(ready),
        first_failures=dict(sorted(failures.items())),
        suggestion=_suggestion(verdicts, workers),
    )


def _suggestion(verdicts: list[WorkerExplanation], workers: dict[str, WorkerNow]) -> str | None:
    """The change that would let the job run soonest: none when a worker can take it at
    its next pull; else resuming a fitting worker that is drained or disabled; else
    waiting for the fitting worker with the fewest running jobs; else the first clause of
    the worker that fails on the rarest reason (the request asks what few offer)."""
    if any(v.can_run_now for v in verdicts):
        return None
    eligible = [v for v in verdicts if v.eligible]
    stopped = [v for v in eligible if v.reason in ("worker-draining", "worker-disabled")]
    if stopped:
        return f"resume worker {stopped[0].worker} (it is {stopped[0].state.value})"
    busy = [v for v in eligible if v.reason in ("no-free-slots", "inventory-busy", "sge-now")]
    if busy:
        soonest = min(busy, key=lambda v: (workers[v.worker].running_jobs, v.worker))
        count = workers[soonest.worker].running_jobs
        return (
            f"wait for worker {soonest.worker}: {soonest.clauses[0].message}"
            if count == 0
            else f"wait for one of the {count} running jobs of worker {soonest.worker} to end"
        )
    failing = [v for v in verdicts if v.reason is not None and v.clauses]
    if not failing:
        return None
    counts = Counter(v.reason for v in failing)
    rarest = min(failing, key=lambda v: (counts[v.reason], v.worker))
    return f"on worker {rarest.worker}: {rarest.clauses[0].message}"


def _static_clauses(explained: StaticExplanation, lines: list[str]) -> list[Clause]:
    """The static clauses of one worker, the misfit cache's code first; empty when the
    cache says it fits and no task plug-in refuses it. A code the Python clauses do not
    produce (Grid Engine's) gets the code's words and the evaluator's line for the host."""
    plugin = [c for c in explained.clauses if c.reason == "task-plugin"]
    code = explained.misfit_reason
    if code is None:
        return plugin
    static = [c for c in explained.clauses if c.reason not in DYNAMIC_REASONS]
    first = [c for c in static if c.reason == code]
    if not first:
        name = explained.worker
        said = [line for line in lines if f'"{name}"' in line or f"@{name}" in line]
        words = REASONS.get(code, code) + (f": {said[0]}" if said else "")
        first = [Clause(code, words)]
    return first + [c for c in static if c.reason != code]


def _verdicts(
    session: Session, job: Job, worker_name: str | None, policy: Policy, lines: list[str]
) -> tuple[Iterator[WorkerExplanation], dict[str, WorkerNow]]:
    """Each worker (or the one named) against the job, judged one by one as the iterator
    is read, so that a caller who needs only the first worker that can run the job stops
    there; and the workers' state of now."""
    explained = explain_job(session, job, worker_name)
    waiting = job.state is JobState.WAITING
    now = workers_now(session, [e.worker for e in explained])
    category = session.get(Category, job.category_id)
    assert category is not None
    check = DynamicCheck(session, job, category, policy)

    def judge(e: StaticExplanation) -> WorkerExplanation:
        static = _static_clauses(e, lines)
        worker = now[e.worker]
        dynamic = check.clauses(worker) if waiting and not static else []
        clauses = static + dynamic
        return WorkerExplanation(
            worker=e.worker,
            state=worker.state,
            eligible=not static,
            can_run_now=(not clauses) if waiting else None,
            reason=clauses[0].reason if clauses else None,
            misfit_reason=e.misfit_reason,
            clauses=clauses,
        )

    return (judge(e) for e in explained), now


def explain_workers(
    session: Session, job: Job, worker_name: str | None, policy: Policy, lines: list[str]
) -> tuple[list[WorkerExplanation], ExplainSummary | None]:
    """Every worker (or the one named) against the job, and for a waiting job the
    summary. ``lines`` are the job's Grid Engine scheduling lines (qstat -j words)."""
    judged, now = _verdicts(session, job, worker_name, policy, lines)
    verdicts = list(judged)
    return verdicts, summarise(verdicts, now) if job.state is JobState.WAITING else None


def some_worker_can_run_now(session: Session, job: Job, policy: Policy) -> bool:
    """Whether the waiting ``job``'s explanation would count a worker that can run it now
    (its summary's ``can_run_now`` above 0), judging workers only until the first."""
    judged, _now = _verdicts(session, job, None, policy, [])
    return any(verdict.can_run_now for verdict in judged)
