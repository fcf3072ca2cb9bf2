"""Administration of resource quota sets (``qconf -arqs``, ``-srqs``, ``-mrqs``,
``-drqs``): a set is written from its text form, stored with one row per limit, and the
jobs already running are counted against it at once, as Grid Engine recounts its usage
when a set changes (a new limit stops new jobs only: running ones are never preempted).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import (
    Allocation,
    Attribute,
    Category,
    Job,
    JobState,
    QuotaLimit,
    QuotaUsage,
)
from app.db.models import QuotaSet as QuotaSetRow
from app.matching import announce
from app.matching.errors import ConflictError, InvalidFieldError
from app.matching.gridengine.decide import category_lists
from app.matching.gridengine.groups import load_groups
from app.matching.gridengine.quotas import QuotaAmount, QuotaBook, book_quotas, loaded_set
from app.matching.gridengine.state import load_state
from app.matching.gridengine.table import load_table
from app.matching.named_rows import row_by_name, rows_by_name
from app.notations.gridengine.quota_check import check_quota_set
from app.notations.gridengine.quota_parser import parse_quota_set
from app.notations.gridengine.quotas import QuotaError, QuotaSet


@dataclass(frozen=True)
class UsageLine:
    """What running jobs hold of one limit under one usage key (``qquota``'s line)."""

    rule: str
    key: str
    attribute: str
    used: float
    limit: str


def list_quota_sets(session: Session, *, limit: int, offset: int) -> list[QuotaSetRow]:
    return rows_by_name(session, QuotaSetRow, limit=limit, offset=offset)


def get_quota_set(session: Session, name: str, *, lock: bool = False) -> QuotaSetRow:
    missing = f"resource quota set {name!r} not found"
    return row_by_name(session, QuotaSetRow, name, missing=missing, lock=lock)


def definition_of(row: QuotaSetRow) -> QuotaSet:
    return parse_quota_set(row.text)


def create_quota_set(session: Session, text: str) -> QuotaSetRow:
    """``qconf -arqs``: a new set from its text; 409 when the name is taken."""
    quota_set = _checked(session, text)
    if session.scalar(select(QuotaSetRow.id).where(QuotaSetRow.name == quota_set.name)):
        raise ConflictError(f"resource quota set {quota_set.name!r} already exists")
    return _store(session, quota_set)


def replace_quota_set(session: Session, name: str, text: str) -> QuotaSetRow:
    """``qconf -mrqs``: the set's new definition; its usage is counted again from the
    running jobs. The name in the text must be the set's."""
    quota_set = _checked(session, text)
    if quota_set.name != name:
        raise InvalidFieldError(
            "text", f"the text defines set {quota_set.name!r}, not {name!r} (a set keeps its name)"
        )
    return _replace(session, quota_set)


def replace_named_quota_set(session: Session, text: str) -> QuotaSetRow:
    """``qconf -Mrqs``: the set the text names gets the text's definition (404 when there
    is no such set)."""
    return _replace(session, _checked(session, text))


def _replace(session: Session, quota_set: QuotaSet) -> QuotaSetRow:
    row = get_quota_set(session, quota_set.name, lock=True)
    session.delete(row)
    session.flush()
    return _store(session, quota_set)


def _checked(session: Session, text: str) -> QuotaSet:
    """The set the text defines, checked against the attribute table; a 422 on the body's
    ``text`` naming the notation, the position and what was expected otherwise."""
    try:
        return check_quota_set(parse_quota_set(text), load_table(session), text=text)
    except QuotaError as error:
        raise InvalidFieldError("text", error.message, error) from None


def delete_quota_set(session: Session, name: str) -> None:
    """``qconf -drqs``: the set, its limits and their books go (what running jobs held
    of it is forgotten with them)."""
    row = get_quota_set(session, name, lock=True)
    session.delete(row)
    session.flush()
    announce.everything_changed(session)


def _store(session: Session, quota_set: QuotaSet) -> QuotaSetRow:
    row = QuotaSetRow(
        name=quota_set.name,
        description=quota_set.description,
        enabled=quota_set.enabled,
        text=quota_set.to_text(),
    )
    session.add(row)
    session.flush()
    ids: dict[str, int] = {
        name: id_ for name, id_ in session.execute(select(Attribute.name, Attribute.id))
    }
    for index, rule in enumerate(quota_set.rules):
        for limit in rule.limits:
            session.add(
                QuotaLimit(
                    set_id=row.id,
                    rule_index=index,
                    rule_label=quota_set.rule_label(index),
                    attribute_id=ids[limit.attribute],
                    text=limit.text,
                    number=limit.number,
                )
            )
    session.flush()
    if quota_set.enabled:
        _count_running_jobs(session, row, quota_set)
    # A looser (or removed) limit may let waiting jobs run: wake the waiting pulls.
    announce.everything_changed(session)
    return row


def _count_running_jobs(session: Session, row: QuotaSetRow, quota_set: QuotaSet) -> None:
    """Book what the running jobs take of the new set, past its limits if need be."""
    holdings = session.execute(
        select(
            Job.id,
            Job.submitter,
            Job.project,
            Job.pe,
            Category.hard,
            Category.soft,
            Allocation.id,
            Allocation.queue_instance_id,
            Allocation.slots,
        )
        .join(Category, Category.id == Job.category_id)
        .join(Allocation, Allocation.job_id == Job.id)
        .where(Job.state == JobState.RUNNING, Allocation.released_at.is_(None))
        .order_by(Job.id, Allocation.id)
    ).all()
    if not holdings:
        return
    table = load_table(session)
    state = load_state(session, table)
    state.groups = load_groups(session)
    book = QuotaBook([loaded_set(session, row.id, row.name, quota_set)])
    jobs: dict[int, tuple[str, str | None, str | None, str, str, dict[int, int], int]] = {}
    for job_id, user, project, pe, hard, soft, _allocation, qi_id, slots in holdings:
        if qi_id not in state.slots:
            continue
        entry = jobs.setdefault(job_id, (user, project, pe, hard, soft, {}, qi_id))
        entry[5][qi_id] = entry[5].get(qi_id, 0) + slots
    booked: list[tuple[int, list[QuotaAmount]]] = []
    for job_id, (user, project, pe, hard, soft, assignment, master) in jobs.items():
        hard_list, _soft = category_lists(table, hard, soft)
        quotas = book.for_job(state, user, pe, hard_list, project=project)
        amounts = quotas.amounts(assignment, master)
        booked.append((job_id, [a for a in amounts if a.amount > 0]))
    book_quotas(session, booked, force=True)


def usage_lines(session: Session, row: QuotaSetRow) -> list[UsageLine]:
    """The set's books: each limit's usage per key, in rule order (what ``qquota``
    shows)."""
    lines = session.execute(
        select(
            QuotaLimit.rule_label, QuotaUsage.key, Attribute.name, QuotaUsage.used, QuotaLimit.text
        )
        .join(QuotaLimit, QuotaLimit.id == QuotaUsage.limit_id)
        .join(Attribute, Attribute.id == QuotaLimit.attribute_id)
        .where(QuotaLimit.set_id == row.id)
        .order_by(QuotaLimit.rule_index, Attribute.name, QuotaUsage.key)
    ).all()
    return [
        UsageLine(rule, key, attribute, used, limit) for rule, key, attribute, used, limit in lines
    ]
