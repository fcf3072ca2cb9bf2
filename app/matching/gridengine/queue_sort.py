"""The order in which the scheduler tries queue instances: sched_conf(5)
``queue_sort_method`` and ``load_formula``
(docs/notations/gridengine.md#queue-sort-and-load-formula).

Grid Engine 6.2u5 computes each host's value of the load formula once per scheduling run
(``sort_host_list()`` and ``scaled_mixed_load()`` in source/libs/sched/sort_hosts.c), ranks
the hosts by it (``sequential_update_host_order()`` in sge_select_queue.c gives hosts of
equal value the same ``QU_host_seq_no``) and sorts the queue instances with
``lPSortList(queue_list, "%I+ %I+", QU_host_seq_no, QU_seq_no)`` for ``load`` and
``"%I+ %I+", QU_seq_no, QU_host_seq_no`` for ``seqno`` (sge_sequential_assignment(),
parallel_tag_queues_suitable4job()). Instances equal in both keep the order of the list
(qsort() over qmaster's list); jobmatch keeps the order of creation, the queue instance id.

Without a stored configuration jobmatch sorts by seq_no, then creation, and reads no load
(Grid Engine's default is ``load`` with ``np_load_avg``): scenarios and clusters set up
before the configuration existed keep their order.

An attribute of the formula is the host's load value, else the global host's; an ``np_``
value a host did not report is computed from the plain one and ``num_proc`` as its
execution daemon would. A host without one gets 9999 (``ERROR_LOAD_VAL``). Load values
are the ones reported, without load adjustments (``job_load_adjustments``).

The pull decides among one worker's instances, which share one host value: the order of
seq_no, then creation that :func:`~app.matching.gridengine.state.state_of_rows` gives is
the run's order restricted to that worker, under either method.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.db.models import SchedulerConfig
from app.matching import announce
from app.matching.errors import InvalidFieldError
from app.notations.errors import NotationError
from app.notations.gridengine.attribute_table import ComplexTable
from app.notations.gridengine.definitions import ComplexDefinition
from app.notations.gridengine.load_formula import LoadFormula, parse_load_formula
from app.notations.gridengine.values import parse_value

__all__ = [
    "SORT_METHODS",
    "QueueSort",
    "get_scheduler_config",
    "load_number",
    "load_queue_sort",
    "reported_load",
    "reset_scheduler_config",
    "set_scheduler_config",
]

#: sched_conf(5) queue_sort_method values.
SORT_METHODS = ("load", "seqno")


def load_number(definition: ComplexDefinition, text: str) -> float | None:
    """A load value's text as a number, None when it does not parse as one (a host may
    report anything; a bad report must not stop the scheduler)."""
    try:
        value = parse_value(definition, text, role="load")
    except NotationError:
        return None
    return value if isinstance(value, float) else None


def reported_load(
    table: ComplexTable, objects: Sequence[Mapping[str, str]], definition: ComplexDefinition
) -> tuple[float, str] | None:
    """An attribute's load value in the first of ``objects`` (load values by name: the
    host's, then the global host's) that has it, with how it was found. An ``np_`` value
    an object did not report is computed from its plain one and ``num_proc``, as Grid
    Engine's execution daemon puts it in the host's own report (sge_build_load_report()):
    so a host's computed value shadows the global host's."""
    for values in objects:
        text = values.get(definition.name)
        if text is not None:
            value = load_number(definition, text)
            return None if value is None else (value, "no load adjustment")
        computed = _per_processor(table, values, definition)
        if computed is not None:
            return computed
    return None


def _per_processor(
    table: ComplexTable, values: Mapping[str, str], definition: ComplexDefinition
) -> tuple[float, str] | None:
    """An ``np_`` value computed as the execution daemon reports it: the plain load
    divided by ``num_proc`` (load_avg.c)."""
    base = table.lookup(definition.name[3:]) if definition.name.startswith("np_") else None
    if base is None:
        return None
    plain, processors = values.get(base.name), values.get("num_proc")
    if plain is None or processors is None:
        return None
    load, count = load_number(base, plain), load_number(table["num_proc"], processors)
    if load is None or count is None or count < 1:
        return None
    return load / count, f"= {base.name} {load:f} / {int(count)} processors"


@dataclass(frozen=True)
class QueueSort:
    """A stored scheduler configuration: the sort method and the parsed formula."""

    method: str
    formula: LoadFormula

    def host_value(
        self, table: ComplexTable, host: Mapping[str, str], global_host: Mapping[str, str]
    ) -> float:
        """The host's load formula value (``scaled_mixed_load()``)."""

        def value_of(definition: ComplexDefinition) -> float | None:
            found = reported_load(table, (host, global_host), definition)
            return None if found is None else found[0]

        return self.formula.evaluate(value_of)

    def key(self, seq_no: int, host_value: float, qi_id: int) -> tuple[float, float, int]:
        """The instance's sort key: (host value, seq_no) for ``load``, (seq_no, host
        value) for ``seqno``, then creation."""
        if self.method == "load":
            return (host_value, seq_no, qi_id)
        return (seq_no, host_value, qi_id)


def load_queue_sort(session: Session, table: ComplexTable) -> QueueSort | None:
    """The stored configuration parsed against ``table``; None when there is none, or
    when its formula no longer parses (an attribute removed since), which sorts as if
    there were none rather than stop the scheduler."""
    row = session.get(SchedulerConfig, 1)
    if row is None:
        return None
    try:
        return QueueSort(row.queue_sort_method, parse_load_formula(row.load_formula, table))
    except NotationError:
        return None


def get_scheduler_config(session: Session) -> SchedulerConfig | None:
    return session.get(SchedulerConfig, 1)


def set_scheduler_config(
    session: Session, queue_sort_method: str, load_formula: str, table: ComplexTable
) -> SchedulerConfig:
    """Store the configuration (``qconf -msconf``), the formula checked against the
    attribute table. The order of every run after it changes: waiting pulls look again."""
    if queue_sort_method not in SORT_METHODS:
        raise InvalidFieldError(
            "queue_sort_method",
            f"queue_sort_method is {queue_sort_method!r}, not one of {', '.join(SORT_METHODS)}",
        )
    try:
        formula = parse_load_formula(load_formula, table)
    except NotationError as error:
        raise InvalidFieldError("load_formula", error.message, error) from error
    row = session.get(SchedulerConfig, 1)
    if row is None:
        row = SchedulerConfig(id=1, queue_sort_method=queue_sort_method, load_formula="")
        session.add(row)
    row.queue_sort_method = queue_sort_method
    row.load_formula = formula.text()
    session.flush()
    announce.everything_changed(session)
    return row


def reset_scheduler_config(session: Session) -> None:
    """Remove the configuration: seq_no, then creation order again."""
    row = session.get(SchedulerConfig, 1)
    if row is not None:
        session.delete(row)
        session.flush()
        announce.everything_changed(session)
