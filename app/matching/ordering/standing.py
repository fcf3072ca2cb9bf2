"""Where a waiting job stands (docs/ordering.md): the waiting jobs that a worker's pulls
take before it, by submitter and by the rule that puts each ahead, for explain's
``outranked`` answer.

The comparison is the pull's own order: the same rules, the same columns and, for fair
share and group share, the same standing expressions (app/matching/ordering/policy.py
``share_key``, ``group_key``) the heads query orders by, over the waiting jobs of the
categories the worker fits. The room a job needs is left aside: these are the jobs that
go first, not the ones that fit now.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, case, false, func, literal, or_, select
from sqlalchemy.orm import Session

from app.db.models import Category, Job, JobState, SubmitterGroup, SubmitterShare, Worker
from app.matching.misfits import worker_fits
from app.matching.ordering.policy import GROUP_OF_SUBMITTER, Ordering, group_key, share_key
from app.wire.ordering import FAIR_SHARE, GROUP_SHARE
from app.words import plural

#: Jobs ahead counted at most: explain says "at least" beyond it (limits before work).
MAX_COUNTED = 100_000


@dataclass(frozen=True)
class Ahead:
    """How many waiting jobs of one submitter go before the job, and the first rule of
    the policy that orders them before it (``id`` when every rule ties: submitted first);
    the submitter's group, named when ``group-share`` put them ahead."""

    submitter: str
    rule: str
    count: int
    group: str | None = None


def _rule_terms(
    ordering: Ordering, job: Job, targets: dict[str, float | None]
) -> list[tuple[str, ColumnElement[bool], ColumnElement[bool]]]:
    """(rule, goes before, ties) per rule, then the id, against ``job``'s values
    (``targets``: its submitter's and its group's standing, per share rule)."""
    terms: list[tuple[str, ColumnElement[bool], ColumnElement[bool]]] = []
    for rule in ordering.rules:
        if rule == "priority":
            terms.append((rule, Job.priority > job.priority, Job.priority == job.priority))
        elif rule == "age":
            submitted = literal(job.submitted_at, Job.submitted_at.type)
            terms.append((rule, Job.submitted_at < submitted, Job.submitted_at == submitted))
        else:
            key = _standing_key(rule, ordering)
            target = targets[rule]
            same = Job.submitter == job.submitter
            terms.append(
                (
                    rule,
                    and_(~same, key < target) if target is not None else false(),
                    or_(same, key == target) if target is not None else same,
                )
            )
    terms.append(("id", Job.id < job.id, Job.id == job.id))
    return terms


def _standing_key(rule: str, ordering: Ordering) -> ColumnElement[float]:
    if rule == GROUP_SHARE:
        return group_key(ordering.halflife_seconds)
    return share_key(ordering.halflife_seconds)


def _targets(session: Session, job: Job, ordering: Ordering) -> dict[str, float | None]:
    """The job's submitter's standing and its group's, by the share rules of the policy
    (None without a share row)."""
    found: dict[str, float | None] = {}
    for rule in (GROUP_SHARE, FAIR_SHARE):
        if rule not in ordering.rules:
            continue
        key = session.scalar(
            select(_standing_key(rule, ordering))
            .select_from(SubmitterShare)
            .outerjoin(SubmitterGroup, GROUP_OF_SUBMITTER)
            .where(SubmitterShare.submitter == job.submitter)
        )
        found[rule] = None if key is None else float(key)
    return found


def fitting_categories(session: Session, worker_id: int) -> frozenset[int]:
    """The categories the worker fits (the misfit cache at its generation)."""
    worker = select(Worker.id, Worker.generation).where(Worker.id == worker_id).subquery()
    return frozenset(
        session.scalars(
            select(Category.id)
            .join(worker, worker.c.id == worker_id)
            .where(worker_fits(Category, worker.c.id, worker.c.generation))
        )
    )


class Standings:
    """Where one waiting job stands, per set of fitting categories: workers that fit the
    same categories see the same jobs ahead, so a farm of alike workers costs one count
    (an explanation asks for every worker that would run the job after others)."""

    def __init__(self, session: Session, job: Job, ordering: Ordering) -> None:
        self.session = session
        self.job = job
        self.ordering = ordering
        self._counted: dict[frozenset[int], list[Ahead]] = {}

    def words(self, worker_id: int) -> str:
        categories = fitting_categories(self.session, worker_id)
        if categories not in self._counted:
            self._counted[categories] = jobs_ahead(
                self.session, self.job, categories, self.ordering
            )
        return words(self._counted[categories], self.ordering)


def jobs_ahead(
    session: Session, job: Job, categories: frozenset[int], ordering: Ordering
) -> list[Ahead]:
    """The waiting jobs of these categories (those a worker fits) that its pulls take
    before ``job``, counted per submitter and deciding rule, most first."""
    terms = _rule_terms(ordering, job, _targets(session, job, ordering))
    before: list[ColumnElement[bool]] = []
    for index, (_rule, goes_before, _ties) in enumerate(terms):
        before.append(and_(*(ties for _r, _b, ties in terms[:index]), goes_before))
    deciding: Any = case(*((~ties, rule) for rule, _b, ties in terms[:-1]), else_=literal("id"))
    fitting = sorted(categories)
    ahead = (
        select(Job.submitter, SubmitterShare.group_name, deciding.label("rule"))
        .outerjoin(SubmitterShare, SubmitterShare.submitter == Job.submitter)
        .outerjoin(SubmitterGroup, GROUP_OF_SUBMITTER)
        .where(
            Job.state == JobState.WAITING,
            Job.category_id.in_(fitting),
            Job.id != job.id,
            or_(*before),
        )
        .limit(MAX_COUNTED)
        .subquery()
    )
    rows = session.execute(
        select(ahead.c.submitter, ahead.c.group_name, ahead.c.rule, func.count()).group_by(
            ahead.c.submitter, ahead.c.group_name, ahead.c.rule
        )
    ).all()
    found = [
        Ahead(submitter, rule, int(count), group if rule == GROUP_SHARE else None)
        for submitter, group, rule, count in rows
    ]
    return sorted(found, key=lambda a: (-a.count, a.submitter, a.rule))


_RULE_WORDS = {
    "group-share": "{n} of {who} (group {group} further below its share)",
    "group-share-alone": "{n} of {who} (as a group of one, further below its share)",
    "fair-share": "{n} of {who} (further below {who}'s share)",
    "priority": "{n} of {who} with a higher priority",
    "age": "{n} older of {who}'s",
    "id": "{n} of {who} submitted at the same moment, before it",
}


def words(ahead: list[Ahead], ordering: Ordering) -> str:
    """``3 jobs ahead of it on this worker by fair-share, priority, age: 2 of alice
    (further below alice's share), 1 older of bob's``."""
    total = sum(a.count for a in ahead)
    if total == 0:
        return "no waiting job goes before it on this worker"
    counted = "at least " if total >= MAX_COUNTED else ""
    parts = [
        _RULE_WORDS[
            "group-share-alone" if a.rule == GROUP_SHARE and a.group is None else a.rule
        ].format(n=a.count, who=a.submitter, group=a.group)
        for a in ahead
    ]
    return (
        f"{counted}{plural(total, 'job')} ahead of it on this worker by the ordering "
        f"{', '.join(ordering.rules)}: {', '.join(parts)}"
    )
