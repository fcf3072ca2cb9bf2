"""Queue instances the scheduler drops before it matches any job: suspended ones, those in
load alarm and disabled ones (docs/notations/gridengine.md#queue-instance-states).

Grid Engine 6.2u5 drops them in this order, and ``qstat -j`` says why in the first one's
words:

* suspended (``qmod -s``): qmaster hands the scheduler no suspended instance (the
  ``where_queue`` condition of sge_sched_prepare_data.c leaves out QI_SUSPENDED,
  QI_SUSPENDED_ON_SUBORDINATE and QI_CAL_SUSPENDED), and ``scheduler_method()``
  (source/daemons/qmaster/sge_sched_thread.c) reports each as
  MSG_SCHEDD_INFO_QUEUENOTAVAIL_: ``queue instance "all.q@h1" dropped because it is
  temporarily not available``. Not in the list, it takes neither a master nor a slave
  task;
* in load alarm: ``sge_split_queue_load()`` with ``QU_load_thresholds`` in
  ``dispatch_jobs()`` (app/matching/gridengine/load_alarm.py);
* disabled (``qmod -d``): ``sge_split_disabled()`` (source/libs/sched/sge_select_queue.c)
  right after, MSG_SCHEDD_INFO_QUEUEDISABLED_: ``queue instance "all.q@h1" dropped
  because it is disabled``.

The jobs already running there keep their slots and consumables (jobmatch neither
suspends them, as ``qmod -s`` does, nor suspends subordinate queues). States are set by
an administrator, so they are static: the misfit cache rules out a worker whose every
instance that would fit is unavailable (reason ``sge-queue-unavailable``,
app/matching/gridengine/sql.py), and a changed state recomputes the worker's rows.
"""

from __future__ import annotations

from app.matching.gridengine.load_alarm import load_alarm
from app.matching.gridengine.state import ClusterState, QueueSlot
from app.notations.gridengine.evaluator import FitCode, Level, QueueFit

__all__ = ["dropped", "state_refusal"]


def state_refusal(slot: QueueSlot, letter: str) -> QueueFit | None:
    """The refusal for state ``letter`` (``s`` or ``d``) when the instance is in it."""
    if letter not in slot.states:
        return None
    if letter == "s":
        code, why = FitCode.SUSPENDED, "temporarily not available"
    else:
        code, why = FitCode.DISABLED, "disabled"
    return QueueFit(
        slot.name,
        False,
        Level.QUEUE,
        code,
        None,
        f'queue instance "{slot.name}" dropped because it is {why}',
    )


def dropped(state: ClusterState, slot: QueueSlot) -> QueueFit | None:
    """The instance's refusal when the scheduler drops it before matching any job
    (suspended, in load alarm, disabled, in 6.2u5's order), else None."""
    if slot.states:
        suspended = state_refusal(slot, "s")
        if suspended is not None:
            return suspended
    alarm = load_alarm(state, slot)
    if alarm is not None or not slot.states:
        return alarm
    return state_refusal(slot, "d")
