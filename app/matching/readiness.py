"""Can a worker run a job now? The dynamic half of an explanation, and its summary.

The static half (app/matching/candidates.py ``explain_job``) says which clauses rule a
worker out for good: the misfit cache decides it in SQL, explain.py says it in words.
Whether a worker can run the job *now* is not decided here a second time: a pull by the
worker is rehearsed in a savepoint that is rolled back (issue 35), for a job on one node
the pull's own steps for this job (app/matching/dispatch/pull.py ``would_start``) and
then the whole pull (does it take this job, or another first?), for a job on several
nodes the decision of ``POST /v1/jobs/{id}/allocate`` (allocate.py ``placement_now``).
:class:`DynamicCheck` only puts into words why a pull would not start it: the worker's
state, free slots, free inventory and the Grid Engine evaluator on the current values.

Each worker gets one of four answers: ``now`` (its next pull, or an allocation now,
starts the job), ``outranked`` (it could start it, but its next pull takes another job
first), ``not-now`` (room is taken, or the worker is not taking work) and ``never`` (it,
or the set of registered workers, could never hold the job). The summary counts workers
per answer, so that every worker is accounted for, and per first failing clause, as
HTCondor's ``condor_q -better-analyze`` does, and names the one change that would let the
job run soonest.
"""

from __future__ import annotations

import copy
import dataclasses
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import (
    Category,
    CategoryShape,
    Job,
    JobState,
    Worker,
    WorkerInventory,
    WorkerState,
)
from app.db.tables import INVENTORY_BOOKINGS
from app.matching import liveness
from app.matching.allocation import allocate, trees
from app.matching.allocation.allocator import Policy, place_requests
from app.matching.candidates import StaticExplanation, explain_job
from app.matching.category_fit import TooFewNodes, too_few_nodes
from app.matching.demand.templates import WAITING_FOR, template_for
from app.matching.dispatch import task_limits
from app.matching.dispatch.pull import category_requests, next_job, would_start
from app.matching.gridengine.decide import has_complex_values, pe_from_database, plan_job
from app.matching.gridengine.groups import load_groups
from app.matching.gridengine.queue_lists import names_queues
from app.matching.gridengine.quotas import load_quota_book
from app.matching.gridengine.state import ClusterState, load_state
from app.matching.gridengine.table import load_table
from app.matching.misfits import REASONS
from app.matching.ordering import policy as ordering_policy
from app.matching.ordering import standing
from app.matching.slots import worker_free_slots
from app.wire.explanation import Clause, ExplainSummary, WorkerExplanation
from app.words import plural

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
    "outranked": "the worker could start the job now, but its next pull takes another job first",
    "not-placed": "an allocation now places the job on other workers",
    "waits-for-nodes": "the job needs several nodes at once, and too few can hold it now",
    "pull-declines": "a pull by the worker would not start the job now",
    "task-concurrency": "its array job runs as many tasks at once as its qsub -tc allows",
}

#: The answers a waiting job gets from each worker (issue 35): ``now``, ``outranked``
#: (could run, other jobs go first), ``not-now`` (room is taken, or the worker takes no
#: work now) and ``never``.
NOW, OUTRANKED, NOT_NOW, NEVER = "now", "outranked", "not-now", "never"

#: The reasons a fitting worker is not running the job because room is taken.
BUSY_REASONS = ("no-free-slots", "inventory-busy", "sge-now", "waits-for-nodes")

_STATE_CODES = {
    WorkerState.DRAINING: "worker-draining",
    WorkerState.DISABLED: "worker-disabled",
    WorkerState.OFFLINE: "worker-offline",
    WorkerState.UNKNOWN: liveness.REASON_CODE,
}


def state_code(state: WorkerState) -> str | None:
    """The reason code of a worker state in which it takes no new work (None: active):
    the three above, and ``worker-<state>`` for any other state of
    ``UNAVAILABLE_WORKER_STATES``, so that a new one is explained without a change here."""
    if state is WorkerState.ACTIVE:
        return None
    return _STATE_CODES.get(state, f"worker-{state.value}")


def _state_clause(worker: WorkerNow) -> list[Clause]:
    code = state_code(worker.state)
    if code is None:
        return []
    if code == liveness.REASON_CODE:
        return [Clause(code, liveness.unknown_words(worker.last_seen, worker.registered_at))]
    why = f" ({worker.state_reason})" if worker.state_reason else ""
    words = DYNAMIC_REASONS.get(code, f"the worker is {worker.state.value}")
    return [Clause(code, words + why)]


T = TypeVar("T")


def rehearse(session: Session, action: Callable[[], T]) -> T:
    """Run ``action`` (a pull, or part of one) in a savepoint and roll it back: what it
    would do, and nothing done. What the action asked to announce or log after the commit
    is forgotten with it."""
    saved = {key: copy.copy(value) for key, value in session.info.items()}
    savepoint = session.begin_nested()
    try:
        return action()
    finally:
        savepoint.rollback()
        session.info.clear()
        session.info.update(saved)
        session.expire_all()


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
        #: Whether the last Grid Engine refusal was a resource quota's (a policy that
        #: holds the job, as against room: app/matching/demand/answers.py).
        self.quota_refused = False

    def clauses(self, worker: WorkerNow) -> list[Clause]:
        """The first dynamic clause that keeps the worker from taking the job now, if any
        (a pull stops at the first, so the explanation does too)."""
        stopped = _state_clause(worker)
        if stopped:
            return stopped
        if worker.largest_free < self.job.slots:
            return [
                Clause(
                    "no-free-slots",
                    f"the job needs {plural(self.job.slots, 'slot')} on one queue "
                    f"instance; the worker has at most {worker.largest_free} free now "
                    f"({plural(worker.running_jobs, 'running job')})",
                )
            ]
        if self.grid_engine_job or has_complex_values(self.session, worker.id):
            return self._grid_engine(worker)
        return self._inventory(worker)

    def _grid_engine(self, worker: WorkerNow) -> list[Clause]:
        if self._state is None:
            self._state = load_state(self.session, load_table(self.session))
            self._state.groups = load_groups(self.session)
        state = self._state
        decision, _bookings = plan_job(
            state,
            self.category,
            state.queue_order([worker.id]),
            pe_from_database(self.session),
            trace=True,
            quota_book=load_quota_book(self.session),
            user=self.job.submitter,
            project=self.job.project,
        )
        self.quota_refused = decision.quota_refusal is not None
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
        holders = holding_jobs(self.session, worker.id)
        if not holders:
            # Nothing holds any of it: the whole inventory cannot hold the job, now or
            # ever (the coarse totals let it pass; the shape does not).
            return [
                Clause(
                    "inventory-too-small",
                    "the worker's inventory cannot hold the job even with nothing running"
                    + (f": {short}" if short else ""),
                )
            ]
        return [
            Clause(
                "inventory-busy",
                DYNAMIC_REASONS["inventory-busy"]
                + (f": {short}" if short else "")
                + f" (held by running job(s) {', '.join(map(str, holders))})",
            )
        ]


def holding_jobs(session: Session, worker_id: int) -> list[int]:
    """The running jobs that hold vertices of the worker's inventory now."""
    return sorted(
        session.connection()
        .execute(
            select(INVENTORY_BOOKINGS.c.job_id)
            .where(
                INVENTORY_BOOKINGS.c.worker_id == worker_id,
                INVENTORY_BOOKINGS.c.released_at.is_(None),
            )
            .distinct()
        )
        .scalars()
    )


def summarise(
    verdicts: list[WorkerExplanation],
    workers: dict[str, WorkerNow],
    short: TooFewNodes | None = None,
) -> ExplainSummary:
    """The counts of a waiting job's explanation: per answer (they add up to the number
    of workers), eligible and fit-but-busy as before, and per first failing clause.
    ``short``: the job needs more nodes than fit (then the suggestion is to add some)."""
    failures = Counter(v.reason for v in verdicts if v.reason is not None)
    answers = Counter(v.answer for v in verdicts)
    eligible = [v for v in verdicts if v.eligible]
    ready = [v for v in eligible if v.can_run_now]
    return ExplainSummary(
        workers=len(verdicts),
        eligible=len(eligible),
        can_run_now=len(ready),
        fit_but_busy=len(eligible) - len(ready),
        first_failures=dict(sorted(failures.items())),
        suggestion=(
            f"register {plural(short.needed - short.found, 'more worker')} with an inventory "
            f"that could hold a node of it (it needs {plural(short.needed, 'node')}; "
            f"{short.found} could hold one)"
            if short is not None
            else _suggestion(verdicts, workers)
        ),
        outranked=answers[OUTRANKED],
        not_now=answers[NOT_NOW],
        never=answers[NEVER],
    )


def _suggestion(verdicts: list[WorkerExplanation], workers: dict[str, WorkerNow]) -> str | None:
    """The change that would let the job run soonest: none when a worker can take it at
    its next pull; else waiting for the jobs that go first on a worker that could start
    it; else resuming a fitting worker that is drained or disabled; else waiting for the
    fitting worker with the fewest running jobs; else the first clause of the worker that
    fails on the rarest reason (the request asks what few offer)."""
    if any(v.can_run_now for v in verdicts):
        return None
    outranked = [v for v in verdicts if v.answer == OUTRANKED]
    if outranked:
        return f"wait: on worker {outranked[0].worker}, {outranked[0].clauses[0].message}"
    eligible = [v for v in verdicts if v.eligible]
    stopped = [v for v in eligible if v.reason is not None and v.reason.startswith("worker-")]
    if stopped:
        return f"resume worker {stopped[0].worker} (it is {stopped[0].state.value})"
    busy = [v for v in eligible if v.reason in BUSY_REASONS]
    if busy:
        soonest = min(busy, key=lambda v: (workers[v.worker].running_jobs, v.worker))
        count = workers[soonest.worker].running_jobs
        if count == 0:
            return f"wait for worker {soonest.worker}: {soonest.clauses[0].message}"
        if count == 1:
            return f"wait for the running job of worker {soonest.worker} to end"
        return f"wait for one of the {count} running jobs of worker {soonest.worker} to end"
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


class _Judge:
    """The answer of each worker for one job, from the rehearsed pull (one node) or
    allocation (several nodes), with :class:`DynamicCheck`'s words for a refusal."""

    def __init__(self, session: Session, job: Job, policy: Policy, lines: list[str]) -> None:
        self.session = session
        self.job = job
        self.policy = policy
        self.lines = lines
        self.waiting = job.state is JobState.WAITING
        category = session.get(Category, job.category_id)
        assert category is not None
        self.category = category
        self.check = DynamicCheck(session, job, category, policy)
        self.nodes = int(
            session.scalar(
                select(CategoryShape.min_nodes).where(CategoryShape.category_id == category.id)
            )
            or 0
        )
        self.too_few: TooFewNodes | None = (
            too_few_nodes(session, category.id) if self.nodes > 1 else None
        )
        self._placement: list[int] | None = None
        self._placed = False
        #: Where the job stands, counted once per set of fitting categories.
        self._standings: standing.Standings | None = None

    def verdict(self, e: StaticExplanation, worker: WorkerNow) -> WorkerExplanation:
        static = _static_clauses(e, self.lines)
        if not static and self.too_few is not None:
            static = [Clause("needs-several-nodes", self.too_few.words)]
        if static or not self.waiting:
            return self._out(e, worker, static, NEVER if self.waiting else None)
        clauses, answer = self._several(worker) if self.nodes > 1 else self._one(worker)
        return self._out(e, worker, clauses, answer)

    def _out(
        self,
        e: StaticExplanation,
        worker: WorkerNow,
        clauses: list[Clause],
        answer: str | None,
    ) -> WorkerExplanation:
        return WorkerExplanation(
            worker=e.worker,
            state=worker.state,
            eligible=answer != NEVER and not (answer is None and clauses),
            can_run_now=(answer == NOW) if self.waiting else None,
            reason=clauses[0].reason if clauses else None,
            misfit_reason=e.misfit_reason,
            clauses=clauses,
            answer=answer,
        )

    def _one(self, worker: WorkerNow) -> tuple[list[Clause], str]:
        """A job on one node: the pull's own steps for this job, then the whole pull."""
        job_id = self.job.id
        # The pull's first two tests, read off the worker without rehearsing it: an
        # active worker, and a queue instance with the job's slots free (lock_puller's
        # state and largest free count; the heads query's ``slots <= max_free``).
        stopped = _state_clause(worker) or worker.largest_free < self.category.slots
        startable = not stopped and rehearse(
            self.session, lambda: would_start(self.session, worker.name, job_id, self.policy)
        )
        if not startable:
            said = self.check.clauses(worker)
            if not said and task_limits.array_is_full(self.session, self.job):
                said = [Clause("task-concurrency", DYNAMIC_REASONS["task-concurrency"])]
            if not said:
                said = [Clause("pull-declines", DYNAMIC_REASONS["pull-declines"])]
            return said, NEVER if said[0].reason == "inventory-too-small" else NOT_NOW
        taken = rehearse(self.session, lambda: _next_job_id(self.session, worker.name, self.policy))
        if taken == job_id:
            return [], NOW
        if taken is None:
            return [Clause("pull-declines", DYNAMIC_REASONS["pull-declines"])], NOT_NOW
        if self._standings is None:
            self._standings = standing.Standings(self.session, self.job, ordering_policy.active())
        return [
            Clause(
                "outranked",
                f"the worker could start the job now, but its next pull takes job {taken} "
                f"first (a job it was placed, or one that goes first): "
                f"{self._standings.words(worker.id)}",
            )
        ], OUTRANKED

    def _several(self, worker: WorkerNow) -> tuple[list[Clause], str]:
        """A job on several nodes: what ``POST /v1/jobs/{id}/allocate`` would do now."""
        stopped = _state_clause(worker)
        if stopped:
            return stopped, NOT_NOW
        if not self._placed:
            self._placement = allocate.placement_now(self.session, self.job, self.policy)
            self._placed = True
        placement = self._placement
        if placement is not None and worker.id in placement:
            return [], NOW
        if placement is not None:
            return [
                Clause(
                    "not-placed",
                    f"an allocation now places the job on {len(placement)} other workers; "
                    "this one is not needed",
                )
            ], NOT_NOW
        holders = holding_jobs(self.session, worker.id)
        if holders or worker.largest_free < self.job.slots:
            held = ", ".join(map(str, holders)) or "its slots"
            return [
                Clause(
                    "inventory-busy",
                    f"{DYNAMIC_REASONS['inventory-busy']} (held by running job(s) {held}), "
                    f"and the job needs {self.nodes} nodes at once",
                )
            ], NOT_NOW
        return [
            Clause(
                "waits-for-nodes",
                f"the job needs {self.nodes} nodes at once; this worker could hold its part "
                "now, but too few others can (they are busy or not taking work)",
            )
        ], NOT_NOW


def _next_job_id(session: Session, worker_name: str, policy: Policy) -> int | None:
    job, _puller, _placed = next_job(session, worker_name, policy)
    return None if job is None else job.id


def _verdicts(
    session: Session, job: Job, worker_name: str | None, policy: Policy, lines: list[str]
) -> tuple[Iterator[WorkerExplanation], dict[str, WorkerNow]]:
    """Each worker (or the one named) against the job, judged one by one as the iterator
    is read, so that a caller who needs only the first worker that can run the job stops
    there; and the workers' state of now."""
    explained = explain_job(session, job, worker_name)
    now = workers_now(session, [e.worker for e in explained])
    judge = _Judge(session, job, policy, lines)
    return (judge.verdict(e, now[e.worker]) for e in explained), now


def explain_workers(
    session: Session, job: Job, worker_name: str | None, policy: Policy, lines: list[str]
) -> tuple[list[WorkerExplanation], ExplainSummary | None]:
    """Every worker (or the one named) against the job, and for a waiting job the
    summary. ``lines`` are the job's Grid Engine scheduling lines (qstat -j words)."""
    waiting = job.state is JobState.WAITING
    judged, now = _verdicts(session, job, worker_name, policy, lines)
    verdicts = list(judged)
    if not waiting:
        return verdicts, None
    summary = summarise(verdicts, now, too_few_nodes(session, job.category_id))
    if summary.eligible == 0:
        # Nothing registered could hold it: it waits for a new worker of a template
        # (issue 40), if one would fit it.
        template = template_for(session, job.category_id)
        if template is not None:
            summary = dataclasses.replace(summary, suggestion=WAITING_FOR.format(template))
    return verdicts, summary


def some_worker_can_run_now(session: Session, job: Job, policy: Policy) -> bool:
    """Whether some worker could start the waiting ``job`` now, at its next pull or after
    the jobs that go first there (an answer ``now`` or ``outranked``: the summary's
    ``can_run_now`` plus ``outranked`` above 0), judging workers only until the first."""
    judged, _now = _verdicts(session, job, None, policy, [])
    return any(verdict.answer in (NOW, OUTRANKED) for verdict in judged)
