"""Why a category's jobs wait, in the three answers an autoscaler needs, from the same
decisions the pull and the explanation make:

- ``never``: no registered worker fits the category (the misfit cache), or fewer fit than
  the nodes one job needs, or the task's plug-in refuses every worker that fits;
- ``ready``: a pull by some fitting worker would start its first job were it that
  worker's best (app/matching/dispatch/pull.py ``would_start``, rehearsed and rolled back,
  as the explanation's ``now`` and ``outranked``), or for a job on several nodes an
  allocation now would place it (``placement_now``);
- ``policy``: a worker with room declines it for a quota, an array's ``-tc`` or another
  rule of the pull's (the explanation's dynamic clause says which);
- ``capacity``: otherwise: the fitting workers are busy or not taking work.

One job per category is judged (the category is the whole request). The pull's decision
for the first jobs of every category comes first, in one statement
(app/matching/dispatch/plain_starts.py): a plain job that a worker of the plain kind
would start is ``ready``, and a job no fitting worker has room for is ``capacity``,
without a rehearsal. The others (Grid Engine values, inventories, plug-ins, arrays with
a limit) rehearse at most :data:`JUDGED_WORKERS` workers with room, the roomiest first.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import (
    Category,
    CategoryMisfit,
    CategoryTag,
    Job,
    TagMode,
    Task,
    Worker,
    WorkerState,
    WorkerTag,
)
from app.matching.allocation import allocate
from app.matching.allocation.allocator import Policy
from app.matching.categories import accepted_by_plugin
from app.matching.category_fit import too_few_nodes
from app.matching.demand.need import job_slots
from app.matching.demand.waiting import WaitingCategory
from app.matching.dispatch import task_limits
from app.matching.dispatch.plain_starts import StartNow
from app.matching.dispatch.pull import would_start
from app.matching.misfits import REASONS, fits_category, reasons_now
from app.matching.readiness import DynamicCheck, WorkerNow, rehearse
from app.matching.slots import worker_free_slots
from app.wire.demand import CAPACITY, NEVER, POLICY, READY
from app.words import plural

#: Workers with room rehearsed per category before it is said to be held by policy.
JUDGED_WORKERS = 16

#: The explanation's dynamic reason codes that say a rule, not room, holds the job.
POLICY_CODES = frozenset({"task-concurrency", "pull-declines"})


@dataclass(frozen=True)
class Verdict:
    """A category's answer and, in words, why."""

    answer: str
    reasons: list[str]


def _plugin_refuses_all(session: Session, category: Category, task_name: str | None) -> bool:
    """Whether the category's task has a ``can_run_on`` plug-in that refuses every worker
    the cache lets run it (then no registered worker could ever run its jobs)."""
    if task_name is None:
        return False
    task = session.scalar(select(Task).where(Task.name == task_name))
    if task is None or task.plugin is None:
        return False
    fitting = list(
        session.scalars(
            select(Worker.id)
            .where(fits_category(category, Worker.id, Worker.generation))
            .order_by(Worker.id)
        )
    )
    return not accepted_by_plugin(session, task, fitting, first_only=True)


def missing(session: Session, category: Category) -> list[str]:
    """What no registered worker offers the category, in words: the required tags no
    worker offers, else the first failing clause of the misfit cache per code, the most
    common first, with how many workers fail on it."""
    total = int(session.scalar(select(func.count(Worker.id))) or 0)
    if total == 0:
        return ["no worker is registered"]
    required = session.execute(
        select(CategoryTag.group_name, CategoryTag.value)
        .where(CategoryTag.category_id == category.id, CategoryTag.mode == TagMode.REQUIRED)
        .order_by(CategoryTag.group_name, CategoryTag.value)
    ).all()
    said = [
        f"no worker offers tag {value!r} in group {group!r}"
        for group, value in required
        if session.scalar(
            select(WorkerTag.id)
            .where(
                WorkerTag.group_name == group,
                WorkerTag.value == value,
                WorkerTag.mode != TagMode.EXCLUDED,
            )
            .limit(1)
        )
        is None
    ]
    if said:
        return said
    if category.lists_fits:
        counts = Counter(code for code in reasons_now(session, category.id).values() if code)
    else:
        counts = Counter(
            {
                code: int(count)
                for code, count in session.execute(
                    select(CategoryMisfit.reason, func.count())
                    .join(Worker, Worker.id == CategoryMisfit.worker_id)
                    .where(
                        CategoryMisfit.category_id == category.id,
                        CategoryMisfit.generation == Worker.generation,
                    )
                    .group_by(CategoryMisfit.reason)
                )
            }
        )
    return [
        f"{REASONS.get(code, code)} ({count} of {plural(total, 'worker')})"
        for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]


def _roomy_workers(session: Session, category: Category, slots: int) -> list[WorkerNow]:
    """Fitting active workers with a queue instance that has the job's slots free (the
    pull's first two tests), the roomiest first, at most :data:`JUDGED_WORKERS`."""
    largest_free = worker_free_slots(func.max)
    rows = session.execute(
        select(Worker.id, Worker.name, Worker.state, Worker.state_reason, largest_free)
        .where(
            Worker.state == WorkerState.ACTIVE,
            largest_free >= slots,
            fits_category(category, Worker.id, Worker.generation),
        )
        .order_by(largest_free.desc(), Worker.id)
        .limit(JUDGED_WORKERS)
    ).all()
    return [
        WorkerNow(id_, name, state, reason, int(free), 0) for id_, name, state, reason, free in rows
    ]


def pull_would_start(session: Session, worker_name: str, job_id: int, policy: Policy) -> bool:
    """Whether a pull by the worker would start the job were it its best (rehearsed)."""
    return rehearse(session, lambda: would_start(session, worker_name, job_id, policy))


def _no_room(category: Category) -> str:
    return (
        f"every worker that fits is busy or not taking work: none has "
        f"{plural(job_slots(category), 'slot')} free on one queue instance"
    )


def _one_node(session: Session, job: Job, category: Category, policy: Policy) -> Verdict:
    roomy = _roomy_workers(session, category, job_slots(category))
    if not roomy:
        return Verdict(CAPACITY, [_no_room(category)])
    check = DynamicCheck(session, job, category, policy)
    held: list[str] = []
    busy: list[str] = []
    for worker in roomy:
        if pull_would_start(session, worker.name, job.id, policy):
            return Verdict(READY, [f"worker {worker.name} could start it now"])
        clauses = check.clauses(worker)
        if not clauses and task_limits.array_is_full(session, job):
            held.append(f"on worker {worker.name}: its array runs as many tasks as -tc allows")
            continue
        if not clauses:
            held.append(f"on worker {worker.name}: a pull by the worker would not start it")
            continue
        first = clauses[0]
        if first.reason in POLICY_CODES or (first.reason == "sge-now" and check.quota_refused):
            held.append(f"on worker {worker.name}: {first.message}")
        else:
            busy.append(f"on worker {worker.name}: {first.message}")
    if held:
        return Verdict(POLICY, held)
    return Verdict(CAPACITY, busy)


def _several_nodes(session: Session, job: Job, wc: WaitingCategory, policy: Policy) -> Verdict:
    if task_limits.array_is_full(session, job):
        return Verdict(POLICY, ["its array runs as many tasks as its qsub -tc allows"])
    if allocate.placement_now(session, job, policy) is not None:
        return Verdict(READY, ["an allocation now would place it"])
    return Verdict(
        CAPACITY,
        [
            f"the job needs {plural(wc.nodes, 'node')} at once, and too few of the workers "
            "that fit are free now"
        ],
    )


def judge(
    session: Session,
    wc: WaitingCategory,
    policy: Policy,
    start: StartNow | None = None,
    *,
    words: bool = True,
) -> Verdict:
    """The category's answer, judged on its first waiting job. ``start`` is what
    app/matching/dispatch/plain_starts.py found for that job (None: not asked): a worker
    whose pull would start it answers ``ready``, and no room on any worker that fits
    answers ``capacity``, without rehearsing a pull. Without ``words`` the reasons of a
    category no worker fits are left out (counting answers needs none)."""
    category = wc.category
    if not wc.any_fit:
        return Verdict(NEVER, missing(session, category) if words else [])
    if wc.nodes > 1:
        short = too_few_nodes(session, category.id)
        if short is not None:
            return Verdict(NEVER, [short.words])
    if wc.plugin and _plugin_refuses_all(session, category, wc.task):
        return Verdict(
            NEVER, [f"task {wc.task}'s can_run_on plug-in refuses every worker that fits"]
        )
    if wc.nodes <= 1 and start is not None:
        if start.starter is not None:
            return Verdict(READY, [f"worker {start.starter} could start it now"])
        if not start.room:
            return Verdict(CAPACITY, [_no_room(category)])
    job = session.get(Job, wc.first_job)
    assert job is not None
    if wc.nodes > 1:
        return _several_nodes(session, job, wc, policy)
    return _one_node(session, job, category, policy)
