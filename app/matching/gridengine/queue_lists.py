"""A category's ``-q``, ``-masterq`` and ``-soft -q`` lists: their rows, the SQL test of
a queue instance against them (the misfit cache) and the verdicts the decision and the
explanation use (docs/notations/gridengine.md#queue-lists--q--masterq).

Grid Engine 6.2u5 (source/libs/sched/sge_select_queue.c):

* ``sge_queue_match_static()``: an instance the ``-q`` list does not name cannot run the
  job ("cannot run in queue "q@h" because it is not contained in its hard queue list
  (-q)", MSG_SCHEDD_INFO_NOTINHARDQUEUELST_S), unless the ``-masterq`` list names it;
  an instance the ``-masterq`` list does not name is no candidate for the master queue;
* ``parallel_tag_queues_suitable4job()``: an instance named by ``-masterq`` but not by
  ``-q`` is given one slot, the master task's;
* ``compute_soft_violations()``: each item of a soft ``-q`` list that does not name the
  instance is one soft violation.

A host group item (``cq@@grp``) names the hosts of the groups its pattern matches when a
decision resolves the lists (``QueueLists.resolved``); the SQL filter of the misfit cache
lets every host through for it (a superset: groups change without the category, and the
cache must never rule out a worker that fits).
"""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy import ColumnElement, and_, exists, false, func, insert, or_, select, true
from sqlalchemy.orm import InstrumentedAttribute, Session, aliased

from app.db.dialect import string_request_match
from app.db.models import Category, CategoryQueueRef, Queue, QueueInstance, Worker
from app.notations.gridengine.evaluator import FitCode, Level, QueueFit
from app.notations.gridengine.queue_lists import QueueList, QueueLists, parse_queue_list
from app.notations.gridengine.string_regex import request_regex
from app.notations.quantities import ValueType

__all__ = [
    "allowed_instance",
    "category_queue_lists",
    "instance_parts",
    "names_no_queues",
    "names_queues",
    "not_in_hard_list",
    "not_master_queue",
    "store_queue_refs",
    "with_soft_queue_violations",
]


def store_queue_refs(session: Session, category_id: int, queues: QueueLists) -> None:
    """One row per item of each list, compiled for SQL like a string request (the queue
    part as a STRING, the host part as a HOST, which SQL compares lower-cased)."""
    rows = [
        {
            "category_id": category_id,
            "list": name,
            "position": position,
            "queue_text": reference.queue,
            "queue_regex": request_regex(ValueType.STRING, reference.queue),
            "host_text": reference.host,
            # A host group item: its hosts are not known to SQL (the groups change
            # without the category), so the SQL filter lets every host through and the
            # evaluator decides; the regex is "any host".
            "host_regex": None
            if reference.host is None
            else request_regex(
                ValueType.HOST, "*" if reference.host_group is not None else reference.host
            ),
        }
        for name, items in (("hard", queues.hard), ("master", queues.master), ("soft", queues.soft))
        for position, reference in enumerate(items)
    ]
    if rows:
        session.execute(insert(CategoryQueueRef), rows)


def _named_by(
    category_id: InstrumentedAttribute[int],
    instance: type[QueueInstance],
    lists: tuple[str, ...],
) -> ColumnElement[bool]:
    """Some item of the category's ``lists`` names the queue instance."""
    ref, queue, host = aliased(CategoryQueueRef), aliased(Queue), aliased(Worker)
    named = (
        select(ref.id)
        .join(queue, queue.id == instance.queue_id)
        .join(host, host.id == instance.worker_id)
        .where(
            ref.category_id == category_id,
            ref.list.in_(lists),
            string_request_match(queue.name, ref.queue_text, false(), ref.queue_regex),
            or_(
                ref.host_text.is_(None),
                ref.host_text.startswith("@"),
                string_request_match(
                    func.lower(host.name),
                    func.coalesce(ref.host_text, ""),
                    true(),
                    ref.host_regex,
                ),
            ),
        )
        .correlate_except(ref, queue, host)
    )
    return exists(named)


def allowed_instance(
    category: type[Category], instance: type[QueueInstance]
) -> ColumnElement[bool]:
    """The queue instance may take tasks of the category's jobs: no ``-q`` list, or an
    item of ``-q`` or ``-masterq`` names it (:meth:`QueueLists.allows` in SQL)."""
    return or_(
        category.queue_list == "NONE",
        _named_by(category.id, instance, ("hard", "master")),
    )


def names_queues(category: Category) -> bool:
    """Whether the category's jobs have a hard or soft ``-q`` list (a ``-masterq`` one
    comes with a parallel environment): then only the Grid Engine rules decide them."""
    given = (category.queue_list or "NONE", category.soft_queue_list or "NONE")
    return given != ("NONE", "NONE")


def names_no_queues() -> ColumnElement[bool]:
    """:func:`names_queues` negated, in SQL over ``categories``."""
    return and_(Category.queue_list == "NONE", Category.soft_queue_list == "NONE")


_LISTS: dict[tuple[str, str, str], QueueLists] = {}


def category_queue_lists(hard: str | None, master: str | None, soft: str | None) -> QueueLists:
    """A category's stored lists (category form, ``NONE`` when empty; None for a category
    not flushed yet, whose columns still await their defaults) parsed again; memoised, as
    a run decides many jobs of few categories."""
    key = (hard or "NONE", master or "NONE", soft or "NONE")
    lists = _LISTS.get(key)
    if lists is None:
        if len(_LISTS) > 10_000:
            _LISTS.clear()
        parsed = [QueueList() if text == "NONE" else parse_queue_list(text) for text in key]
        lists = _LISTS[key] = QueueLists(parsed[0], parsed[1], parsed[2])
    return lists


def not_in_hard_list(name: str) -> QueueFit:
    """The refusal of queue instance ``name`` (``cq@host``) that no ``-q`` item names,
    in qstat -j's words (MSG_SCHEDD_INFO_NOTINHARDQUEUELST_S of Grid Engine 6.2u5)."""
    return QueueFit(
        name,
        False,
        Level.QUEUE,
        FitCode.NOT_IN_QUEUE_LIST,
        None,
        f'cannot run in queue "{name}" because it is not contained in its hard queue list (-q)',
    )


def not_master_queue(name: str) -> QueueFit:
    """The refusal as master of an instance no ``-masterq`` item names. 6.2u5 reports no
    message for it in qstat -j; the words are those of its scheduler's debug print."""
    return QueueFit(
        name,
        False,
        Level.QUEUE,
        FitCode.NOT_IN_MASTER_QUEUE_LIST,
        None,
        f'queue instance "{name}" cannot be master: it is not contained in the master hard '
        "queue list (-masterq)",
    )


def with_soft_queue_violations(fit: QueueFit, soft: QueueList, queue: str, host: str) -> QueueFit:
    """A fitting instance's soft violations with those of the soft ``-q`` list: one per
    item that does not name it (faithful, as 6.2u5 counts), one if none does (naive: the
    list would reject it as a hard one)."""
    if not soft or not fit.fits:
        return fit
    missed = soft.rejections(queue, host)
    if not missed:
        return fit
    naive = 0 if missed < len(soft.references) else 1
    return replace(
        fit,
        soft_violations=fit.soft_violations + missed,
        soft_violations_naive=fit.soft_violations_naive + naive,
    )


def instance_parts(name: str) -> tuple[str, str]:
    """(cluster queue, host) of a queue instance name ``cq@host``."""
    queue, _at, host = name.partition("@")
    return queue, host
