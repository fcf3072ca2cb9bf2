"""Explanations of Grid Engine jobs in the words of ``qstat -j`` (docs/notations/gridengine.md):
``(-l LIST) cannot run at host "H" because it offers only hl:arch=sol-amd64`` and the like,
one line per queue instance that cannot take the job, from the reference evaluator on the
current values and bookings, ``queue instance "all.q@h1" dropped because it is disabled``
(or suspended, or overloaded) for an instance the scheduler drops before any job,
``cannot run in queue "all.q@h1" because it is not contained in its hard queue list
(-q)`` for an instance the job's ``-q`` list leaves out, and
``cannot run because it exceeds limit "alice/////" in rule
"max_u_slots/1"`` where a resource quota leaves it nothing."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.db.models import Category, Job, JobState
from app.matching.gridengine.decide import category_lists, has_complex_values
from app.matching.gridengine.groups import load_groups
from app.matching.gridengine.master import refused_for_job_consumable, slave_fit
from app.matching.gridengine.queue_conf import any_queue_conf
from app.matching.gridengine.queue_lists import (
    category_queue_lists,
    instance_parts,
    not_in_hard_list,
    not_master_queue,
)
from app.matching.gridengine.queue_states import dropped
from app.matching.gridengine.quotas import load_quota_book
from app.matching.gridengine.state import load_state
from app.matching.gridengine.table import load_table


def scheduling_info(session: Session, job: Job) -> list[str]:
    """Lines for a waiting job with Grid Engine requests (empty otherwise). A global
    failure is one line for all; host failures are reported once per host."""
    category = session.get(Category, job.category_id)
    if category is None or job.state is not JobState.WAITING:
        return []
    queues = category_queue_lists(
        category.queue_list, category.master_queue_list, category.soft_queue_list
    )
    plain = (
        category.hard == "NONE" and category.soft == "NONE" and category.pe is None and not queues
    )
    if plain and not has_complex_values(session, 0) and not any_queue_conf(session):
        return []
    table = load_table(session)
    state = load_state(session, table)
    state.groups = load_groups(session)
    queues = queues.resolved(state.groups.host_groups)
    hard, soft = category_lists(table, category.hard, category.soft)
    quota_book = load_quota_book(session)
    quotas = (
        None
        if quota_book is None
        else quota_book.for_job(state, job.submitter, category.pe, hard, project=job.project)
    )
    lines: list[str] = []
    for slot in state.queue_order():
        unavailable = dropped(state, slot)
        if unavailable is not None:
            _add(lines, unavailable.message)
            continue
        queue, host = instance_parts(slot.name)
        if not queues.allows(queue, host):
            _add(lines, not_in_hard_list(slot.name).message)
            continue
        fit = state.evaluate(slot, hard, soft)
        if fit.fits and category.pe is not None and not queues.can_be_master(queue, host):
            _add(lines, not_master_queue(slot.name).message)
        if fit.fits and quotas is not None:
            # A resource quota that leaves the job nothing here (sge_resource_quota(5)).
            fit = quotas.limit_fit(slot, fit)
        if fit.fits or fit.message is None:
            continue
        message = fit.message
        slave_only = (
            category.pe is not None
            and refused_for_job_consumable(table, fit)
            and slave_fit(state, slot, hard, soft).fits
        )
        if slave_only:
            # A per-job consumable it lacks bars only the master task.
            message = f'queue instance "{slot.name}" can only take slave tasks: {message}'
        _add(lines, message)
    return lines


def _add(lines: list[str], message: str | None) -> None:
    if message is not None and message not in lines:
        lines.append(message)
