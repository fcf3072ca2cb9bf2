"""What Grid Engine checks of a job at submission beyond its notations
(docs/notations/gridengine.md#submission-checks-qsub--w-e--q--p):

* every item of ``-q``, ``-soft -q`` and ``-masterq`` must name an existing queue
  instance, whatever ``-w`` says: ``qref_list_is_valid()`` (source/libs/sgeobj/sge_qref.c,
  called from source/daemons/qmaster/sge_job_verify.c for the three lists) refuses the job
  with MSG_QREF_QUNKNOWN_S, ``Job was rejected because job requests unknown queue "x"``
  (the same calls in Son of Grid Engine 8.1.9's sge_job_verify.c: the check does not
  depend on ``-w``);
* ``qsub -w e``: the job must be able to run somewhere in an empty cluster, ignoring load
  values (qsub(1) ``-w``: "load values are not taken into account with the verification
  since they are assumed to be too volatile"); otherwise ``verify_suitable_queues()``
  (source/daemons/qmaster/sge_job_qmaster.c) refuses it with MSG_JOB_NOSUITABLEQ_S and
  MSG_JOB_VERIFYERROR: ``error: no suitable queues``. Resource quotas count, with no job
  running (the verification's assignment carries the quota sets).
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import ParallelEnvironment, Queue, QueueInstance, Worker
from app.matching.errors import InvalidFieldError
from app.matching.gridengine.decide import CategoryRequests, PeLookup, plan_job
from app.matching.gridengine.groups import load_groups
from app.matching.gridengine.quotas import QuotaBook, load_quota_book
from app.matching.gridengine.state import ClusterState, load_state
from app.matching.gridengine.table import load_table
from app.notations.gridengine.queue_lists import QueueLists

__all__ = ["NO_SUITABLE_QUEUES", "check_queues_exist", "runs_in_empty_cluster", "unknown_queue"]

#: qsub -w e's refusal (MSG_JOB_NOSUITABLEQ_S with MSG_JOB_VERIFYERROR).
NO_SUITABLE_QUEUES = "error: no suitable queues"


def unknown_queue(item: str) -> str:
    """MSG_QREF_QUNKNOWN_S of Grid Engine 6.2u5."""
    return f'Job was rejected because job requests unknown queue "{item}"'


def check_queues_exist(session: Session, queues: QueueLists) -> None:
    """InvalidFieldError on the list of the first item that names no queue instance."""
    if not queues:
        return
    instances = session.execute(
        select(Queue.name, Worker.name)
        .join(QueueInstance, QueueInstance.queue_id == Queue.id)
        .join(Worker, Worker.id == QueueInstance.worker_id)
    ).all()
    lists = (queues.hard, queues.master, queues.soft)
    named = any(items.names_host_groups() for items in lists)
    # The groups are read only for a list that names one (most lists name none).
    resolved = queues.resolved(load_groups(session).host_groups) if named else queues
    for field_name, items in (
        ("queue_list", resolved.hard),
        ("soft_queue_list", resolved.soft),
        ("master_queue_list", resolved.master),
    ):
        for reference in items:
            if not any(reference.matches(queue, host) for queue, host in instances):
                raise InvalidFieldError(field_name, unknown_queue(reference.to_text()))


def _empty(state: ClusterState) -> None:
    """No job running and no load values: what qsub -w e verifies against."""
    for obj in (state.global_host, *state.hosts.values(), *state.queues.values()):
        obj.used.clear()
        obj.used_nonexclusive.clear()
        obj.load_values.clear()
        obj.changed(None)
    for slot in state.slots.values():
        # Load thresholds compare load values, which the verification ignores.
        slot.thresholds = "NONE"


def _pe_capacity(session: Session) -> PeLookup:
    """A PE's rule and its whole slot limit (no slot of it in use)."""

    def lookup(name: str) -> tuple[str, int] | None:
        pe = session.scalar(select(ParallelEnvironment).where(ParallelEnvironment.name == name))
        return None if pe is None else (pe.allocation_rule, pe.slots)

    return lookup


def runs_in_empty_cluster(
    session: Session, category: CategoryRequests, *, user: str, project: str | None
) -> bool:
    """Whether a job of the category could be dispatched with the cluster empty."""
    state = load_state(session, load_table(session))
    state.groups = load_groups(session)
    _empty(state)
    loaded = load_quota_book(session)
    book = None if loaded is None else QuotaBook(loaded.sets)
    decision, _bookings = plan_job(
        state,
        category,
        state.queue_order(),
        _pe_capacity(session),
        quota_book=book,
        user=user,
        project=project,
    )
    return decision.assignment is not None
