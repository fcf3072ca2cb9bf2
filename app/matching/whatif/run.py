"""``POST /v1/whatif``: apply a change set with the real services (registration, the
worker PATCH, Grid Engine values, resource quota sets, drain, removal, submission) in a
savepoint, read what the real queries say
then (the explanation's can-run-now, the candidates, the pull), and roll the savepoint
back. The answer is what would happen, because it is what happened before the rollback.

Added jobs get the ids the database gave them in the savepoint: provisional, since another
submission may take them first (on PostgreSQL a sequence is not rolled back, so the real
submission gets a later id; on SQLite the next submission gets the same one).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.db.models import WorkerState
from app.matching import announce, submission
from app.matching.allocation.allocator import Policy
from app.matching.candidates import Candidate, job_candidates, require_waiting
from app.matching.dispatch.pull import next_job
from app.matching.gridengine.admin import apply_values
from app.matching.gridengine.quota_sets import (
    create_quota_set,
    delete_quota_set,
    replace_named_quota_set,
)
from app.matching.gridengine.values import resolve_target
from app.matching.ordering import policy as ordering_policy
from app.matching.ordering.shares import set_group, set_group_weight, set_weight
from app.matching.whatif.changes import REFUSALS, ChangeSet, refused
from app.matching.whatif.runnable import Snapshot, snapshot
from app.matching.worker_lifecycle import (
    WorkerChanges,
    delete_worker,
    register_worker,
    update_worker,
)
from app.wire.whatif import AddedJob, CategoryCounts, FirstPull


@dataclass(frozen=True)
class CandidatesChange:
    """The ranked candidates of the named job before and after the change."""

    job: int
    before: list[Candidate]
    after: list[Candidate]

    @property
    def gained(self) -> list[str]:
        """Workers that are candidates after the change and not before."""
        had = {c.worker for c in self.before}
        return [c.worker for c in self.after if c.worker not in had]

    @property
    def lost(self) -> list[str]:
        """Workers that were candidates before the change and no longer are."""
        has = {c.worker for c in self.after}
        return [c.worker for c in self.before if c.worker not in has]


@dataclass(frozen=True)
class Answer:
    """What the change set would change; nothing of it was stored."""

    runnable_now: list[int]
    no_longer_runnable: list[int]
    categories: list[CategoryCounts]
    added_jobs: list[AddedJob]
    #: Running jobs of removed workers that went back to the queue.
    requeued: list[int]
    first_pulls: list[FirstPull]
    explained: CandidatesChange | None


@contextmanager
def _item(name: str) -> Iterator[None]:
    """A service's refusal of the item ``name`` (``add_jobs.3``), said as that item's."""
    try:
        yield
    except REFUSALS as error:
        raise refused(name, error) from error


@dataclass(frozen=True)
class Applied:
    """What applying a change set made: the added jobs, the requeued ones."""

    added_jobs: list[AddedJob]
    requeued: list[int]


def apply_changes(session: Session, changes: ChangeSet, by: str) -> Applied:
    """Every change, in the order of :class:`ChangeSet`, by the services the API uses
    (the caller rolls them back)."""
    for index, spec in enumerate(changes.add_workers):
        with _item(f"add_workers.{index}"):
            # A what-if asks what the cluster would do with this worker: an existing
            # name is replaced whole (POST /v1/workers?replace=true), not refused.
            register_worker(session, spec, by=by, replace=True)
    for index, change in enumerate(changes.change_workers):
        with _item(f"change_workers.{index}"):
            update_worker(session, change.name, change.changes, by=by)
    for index, values in enumerate(changes.set_values):
        with _item(f"set_values.{index}"):
            target = resolve_target(session, values.level, values.host, values.queue)
            apply_values(session, target, values.values)
    for index, text in enumerate(changes.add_quota_sets):
        with _item(f"add_quota_sets.{index}"):
            create_quota_set(session, text)
    for index, text in enumerate(changes.replace_quota_sets):
        with _item(f"replace_quota_sets.{index}"):
            replace_named_quota_set(session, text)
    for index, name in enumerate(changes.remove_quota_sets):
        with _item(f"remove_quota_sets.{index}"):
            delete_quota_set(session, name)
    halflife = ordering_policy.active().halflife_seconds
    for index, weight in enumerate(changes.set_weights):
        with _item(f"set_weights.{index}"):
            # As PUT /v1/shares/{submitter}: the weight, then the group when one is named.
            set_weight(session, weight.submitter, weight.weight)
            if weight.moves:
                set_group(session, weight.submitter, weight.group, halflife)
    for index, group in enumerate(changes.set_group_weights):
        with _item(f"set_group_weights.{index}"):
            set_group_weight(session, group.group, group.weight)
    for index, name in enumerate(changes.drain_workers):
        with _item(f"drain_workers.{index}"):
            update_worker(session, name, WorkerChanges(state=WorkerState.DRAINING), by=by)
    requeued: list[int] = []
    for index, name in enumerate(changes.remove_workers):
        with _item(f"remove_workers.{index}"):
            requeued += delete_worker(session, name, requeue=True, by=by)
    added = []
    for index, job_spec in enumerate(changes.add_jobs):
        with _item(f"add_jobs.{index}"):
            job = submission.submit_job(session, job_spec, submitter=by)
        added.append(AddedJob(index, job.id, job.state, job.category_id, job.failure_reason))
    return Applied(added, sorted(requeued))


def _pulling_workers(changes: ChangeSet) -> list[str]:
    """The workers the change set adds or changes (their own values or those of one of
    their queue instances included) or names in ``pull_workers``, and does not remove,
    in its order."""
    names = [spec.name for spec in changes.add_workers]
    names += [change.name for change in changes.change_workers]
    names += [values.host for values in changes.set_values if values.host is not None]
    names += list(changes.drain_workers)
    names += list(changes.pull_workers)
    removed = set(changes.remove_workers)
    return [name for name in dict.fromkeys(names) if name not in removed]


def _first_pulls(
    session: Session, names: list[str], policy: Policy, asked: tuple[str, ...] = ()
) -> list[FirstPull]:
    """Each worker's pull, each in a savepoint of its own that is rolled back, so that
    each answer is the job it would get if it pulled first. A name of ``asked`` (the
    change set's ``pull_workers``) that names no worker is that item's refusal (a 422
    naming ``pull_workers.N``), as an unknown name in any other item is; it was a 404
    that the route did not document (found by tests/api/test_fuzz.py)."""
    items = {name: f"pull_workers.{index}" for index, name in reversed(list(enumerate(asked)))}
    pulls = []
    for name in names:
        savepoint = session.begin_nested()
        try:
            with _item(items[name]) if name in items else nullcontext():
                job, _puller, placed = next_job(session, name, policy)
            pulls.append(FirstPull(name, job.id if job is not None else None, placed))
        finally:
            savepoint.rollback()
    return pulls


def _counts(before: Snapshot, after: Snapshot) -> list[CategoryCounts]:
    counts = []
    for category_id in sorted(before.categories.keys() | after.categories.keys()):
        then = before.categories.get(category_id)
        now = after.categories.get(category_id)
        counts.append(
            CategoryCounts(
                category_id,
                waiting_before=len(then.waiting) if then else 0,
                waiting_after=len(now.waiting) if now else 0,
                runnable_before=len(then.waiting) if then and then.runnable else 0,
                runnable_after=len(now.waiting) if now and now.runnable else 0,
            )
        )
    return counts


def _candidates_of(session: Session, job_id: int) -> list[Candidate]:
    """The candidates ``GET /v1/jobs/{id}/candidates`` gives, refused as the
    ``explain_job`` field's when the job does not exist or does not wait."""
    with _item("explain_job"):
        job = submission.get_job(session, job_id)
        require_waiting(session, job)
        return job_candidates(session, job)


def what_if(session: Session, changes: ChangeSet, policy: Policy, *, by: str) -> Answer:
    """What ``changes`` would change, computed by applying them in a savepoint that is
    rolled back; ``by`` names who asked (the services record it where they would). A
    refused item raises :class:`~app.matching.whatif.changes.ChangeRefused`, and nothing
    is stored either way."""
    with announce.withheld(session):
        explain_before = (
            _candidates_of(session, changes.explain_job)
            if changes.explain_job is not None
            else None
        )
        before = snapshot(session, policy)
        savepoint = session.begin_nested()
        try:
            applied = apply_changes(session, changes, by)
            after = snapshot(session, policy)
            explain_after = (
                _candidates_of(session, changes.explain_job)
                if changes.explain_job is not None
                else None
            )
            pulls = _first_pulls(session, _pulling_workers(changes), policy, changes.pull_workers)
        finally:
            savepoint.rollback()
    was, will = before.runnable_jobs(), after.runnable_jobs()
    explained = (
        CandidatesChange(changes.explain_job, explain_before, explain_after)
        if changes.explain_job is not None
        and explain_before is not None
        and explain_after is not None
        else None
    )
    return Answer(
        runnable_now=sorted(will - was),
        no_longer_runnable=sorted(was - will),
        categories=_counts(before, after),
        added_jobs=applied.added_jobs,
        requeued=applied.requeued,
        first_pulls=pulls,
        explained=explained,
    )
