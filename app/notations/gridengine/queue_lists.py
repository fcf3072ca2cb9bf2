"""Queue lists of ``qsub -q`` and ``qsub -masterq``: ``all.q,gpu*@node[0-9]*``
(docs/notations/gridengine.md#queue-lists--q--masterq).

sge_types(1) defines ``wc_queue_list := wc_queue[,wc_queue,...]`` and ``wc_queue :=
wc_cqueue | wc_cqueue@wc_host | wc_cqueue@@wc_hostgroup``. Each part is a wildcard
expression in the language of string requests (app/notations/gridengine/strings.py: ``*``,
``?``, ``[...]``, ``!``, ``&``, ``|``, parentheses). Grid Engine 6.2u5 matches the cluster
queue part as a case-sensitive string and the host part as a host name, ignoring case
(``qref_cq_rejected`` in source/libs/sgeobj/sge_qref.c: ``sge_eval_expression(TYPE_STR,
...)`` and ``TYPE_HOST``). A list accepts a queue instance when one of its items does.

A host part that starts with ``@`` is a wc_hostgroup: a wildcard expression over host
group names (without their ``@``, matched as hosts are, ignoring case), and the item
names the instances on every host of every matching group, sub-groups included
(``qref_list_host_rejected()`` in source/libs/sgeobj/sge_qref.c). A parsed list knows only
the pattern; :meth:`QueueLists.resolved` gives it the cluster's groups
(app/notations/gridengine/groups.py resolves them). A host group item without groups
resolved names nothing. An item that starts with ``@`` has no cluster queue part and is
refused, as qconf refuses it ("Queue names may not begin with @. Perhaps you mean
"*@name"?", MSG_CQUEUE_NAMENOTCORRECT_SS).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

from app.notations.errors import NotationError
from app.notations.gridengine.strings import (
    StringExpressionError,
    check_request_size,
    match_string,
    parse_expression,
)
from app.notations.quantities import ValueType

__all__ = [
    "MAX_QUEUE_REFERENCES",
    "QueueList",
    "QueueListError",
    "QueueLists",
    "QueueReference",
    "parse_queue_list",
]

#: Items one list may hold: matching costs items x queue instances, so the bound comes
#: before any work.
MAX_QUEUE_REFERENCES = 256


class QueueListError(NotationError):
    """A ``-q`` or ``-masterq`` list is empty, has an empty item, an item without a
    cluster queue part (``@name``) or holds a malformed wildcard expression. ``notation``
    names the option (``qsub -q``, ``qsub -soft -q``, ``qsub -masterq``)."""

    def __init__(
        self,
        message: str,
        *,
        option: str,
        text: str | None = None,
        position: int | None = None,
        expected: str | None = None,
    ) -> None:
        self.notation = f"qsub {option}"
        super().__init__(message, text=text, position=position, expected=expected)


@dataclass(frozen=True)
class QueueReference:
    """One item: a cluster queue pattern and, after ``@``, a host pattern (None: any
    host) or ``@`` and a host group pattern. ``group_hosts`` are the (lower-case) hosts of
    the groups the pattern matches, once :meth:`resolved`; None before."""

    queue: str
    host: str | None = None
    group_hosts: frozenset[str] | None = None

    @property
    def host_group(self) -> str | None:
        """The wc_hostgroup pattern (without its ``@``), None for a host or no host part."""
        if self.host is not None and self.host.startswith("@"):
            return self.host[1:]
        return None

    def to_text(self) -> str:
        return self.queue if self.host is None else f"{self.queue}@{self.host}"

    def resolved(self, groups: Mapping[str, frozenset[str]]) -> QueueReference:
        """The item with the hosts of every group its wc_hostgroup matches (group names
        with their ``@``, as stored); itself when it names no host group."""
        pattern = self.host_group
        if pattern is None:
            return self
        hosts: set[str] = set()
        for name, members in groups.items():
            if match_string(ValueType.HOST, pattern, name[1:]):
                hosts |= members
        return replace(self, group_hosts=frozenset(hosts))

    def matches(self, queue: str, host: str) -> bool:
        """Whether the queue instance ``queue@host`` is one this item names."""
        if not match_string(ValueType.STRING, self.queue, queue):
            return False
        if self.host_group is not None:
            return self.group_hosts is not None and host.lower() in self.group_hosts
        return self.host is None or match_string(ValueType.HOST, self.host, host)


@dataclass(frozen=True)
class QueueList:
    """The items of one list, in the order given (an empty list names no restriction)."""

    references: tuple[QueueReference, ...] = ()

    def __iter__(self) -> Iterator[QueueReference]:
        return iter(self.references)

    def __bool__(self) -> bool:
        return bool(self.references)

    def names_host_groups(self) -> bool:
        return any(reference.host_group is not None for reference in self.references)

    def resolved(self, groups: Mapping[str, frozenset[str]]) -> QueueList:
        return QueueList(tuple(reference.resolved(groups) for reference in self.references))

    def contains(self, queue: str, host: str) -> bool:
        """Some item names the queue instance (qref_list_cq_rejected() is false)."""
        return any(reference.matches(queue, host) for reference in self.references)

    def rejections(self, queue: str, host: str) -> int:
        """How many items do not name the queue instance: Grid Engine 6.2u5 counts one
        soft violation per such item of a soft ``-q`` list (compute_soft_violations() in
        source/libs/sched/sge_select_queue.c)."""
        return sum(1 for reference in self.references if not reference.matches(queue, host))

    def category_text(self) -> str:
        """The items joined by commas, or ``NONE`` when empty (how categories store it)."""
        if not self.references:
            return "NONE"
        return ",".join(reference.to_text() for reference in self.references)


@dataclass(frozen=True)
class QueueLists:
    """A job's three lists: hard ``-q`` (the instances that may run any of its tasks),
    ``-masterq`` (those that may be its master queue) and soft ``-q`` (preferred)."""

    hard: QueueList = QueueList()
    master: QueueList = QueueList()
    soft: QueueList = QueueList()

    def __bool__(self) -> bool:
        return bool(self.hard or self.master or self.soft)

    def resolved(self, groups: Mapping[str, frozenset[str]]) -> QueueLists:
        """The lists with their host group items resolved against the cluster's groups
        (name with ``@`` -> lower-case hosts, sub-groups included); the lists themselves
        when no item names a host group."""
        if not any(items.names_host_groups() for items in (self.hard, self.master, self.soft)):
            return self
        return QueueLists(
            self.hard.resolved(groups), self.master.resolved(groups), self.soft.resolved(groups)
        )

    def allows(self, queue: str, host: str) -> bool:
        """Whether the instance may take tasks of the job at all. Grid Engine 6.2u5 skips
        the ``-q`` test for an instance the ``-masterq`` list names (sge_queue_match_static()
        in source/libs/sched/sge_select_queue.c): it may be the master even outside ``-q``."""
        if not self.hard:
            return True
        return self.hard.contains(queue, host) or self.master.contains(queue, host)

    def can_be_master(self, queue: str, host: str) -> bool:
        return not self.master or self.master.contains(queue, host)

    def master_only(self, queue: str, host: str) -> bool:
        """Named by ``-masterq`` but not by ``-q``: the instance offers one slot
        (parallel_tag_queues_suitable4job() of 6.2u5 and 8.1.9), the master task's unless
        a later instance of its host becomes the master."""
        return bool(self.hard) and not self.hard.contains(queue, host)


def _checked_part(part: str, text: str, position: int, option: str, what: str) -> None:
    """A cluster queue or host part: not empty, within the string request bounds and a
    well-formed wildcard expression; errors name their place in the whole list."""
    if not part:
        raise QueueListError(
            f"empty {what} in queue list {text!r}",
            option=option,
            text=text,
            position=position,
            expected=f"a {what} or wildcard pattern",
        )
    try:
        check_request_size(part)
        parse_expression(part)
    except StringExpressionError as error:
        raise QueueListError(
            error.message,
            option=option,
            text=text,
            position=position + (error.position or 0),
            expected=error.expected,
        ) from None


def parse_queue_list(text: str, *, option: str = "-q") -> QueueList:
    """Parse ``text`` (a comma-separated wc_queue_list; blanks around items are ignored,
    an empty or blank text is the empty list). ``option`` names the qsub option in errors."""
    if not text.strip():
        return QueueList()
    references: list[QueueReference] = []
    start = 0
    for item in text.split(","):
        if len(references) == MAX_QUEUE_REFERENCES:
            raise QueueListError(
                f"more than {MAX_QUEUE_REFERENCES} items in queue list",
                option=option,
                text=text[:64] + "...",
                position=start,
                expected=f"at most {MAX_QUEUE_REFERENCES} items",
            )
        stripped = item.strip()
        offset = start + (len(item) - len(item.lstrip()))
        if not stripped:
            raise QueueListError(
                "empty item in queue list",
                option=option,
                text=text,
                position=offset,
                expected="a queue, queue@host or a wildcard pattern",
            )
        blank = next((i for i, char in enumerate(stripped) if char.isspace()), None)
        if blank is not None:
            # Queue and host names hold no blanks; qsub takes the list as one argument.
            raise QueueListError(
                "blank inside a queue list item",
                option=option,
                text=text,
                position=offset + blank,
                expected="',' between items, no blanks inside one",
            )
        queue, at, host = stripped.partition("@")
        if not queue and at:
            raise QueueListError(
                f'the queue name "{stripped}" is not correct: queue names may not begin with @',
                option=option,
                text=text,
                position=offset,
                expected=f"a cluster queue before '@', e.g. \"*{stripped}\"",
            )
        _checked_part(queue, text, offset, option, "cluster queue")
        if at and host.startswith("@"):
            _checked_part(host[1:], text, offset + len(queue) + 2, option, "host group")
        elif at:
            _checked_part(host, text, offset + len(queue) + 1, option, "host")
        references.append(QueueReference(queue, host if at else None))
        start += len(item) + 1
    return QueueList(tuple(references))
