"""A job's request, parsed and validated as a whole before anything is stored.

Every notation a job may carry is parsed here; the first invalid field raises
InvalidFieldError naming the field, so a submission either stores everything or nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from app.matching.allocation.vertex_requests import build_requests, list_need, min_nodes, node_needs
from app.matching.errors import InvalidFieldError
from app.matching.momotor.rows import parse_resources
from app.notations.debusine.metadata import NAMESPACE_PATTERN
from app.notations.errors import NotationError
from app.notations.flux import jobspec as rfc14
from app.notations.flux.constraints import Constraint, constraint_to_json, parse_constraint
from app.notations.flux.requires import compile_requires_constraint
from app.notations.flux.shape import parse_shape_resources
from app.notations.gridengine.attribute_table import ComplexTable
from app.notations.gridengine.queue_lists import QueueLists, parse_queue_list
from app.notations.gridengine.requests import RequestList, parse_request_list
from app.notations.momotor.resources import Resources

PRIORITY_RANGE = (-1_000_000, 1_000_000)
#: A job's command: at most this many arguments of at most this many characters.
MAX_ARGUMENTS = 4096
MAX_ARGUMENT_LENGTH = 65_536
#: Longest time limit of a job's command, in seconds (one week).
MAX_TIMEOUT = 7 * 24 * 3600


@dataclass(frozen=True)
class JobSpec:
    """What a submitter sends. ``constraint`` (RFC 31 object) and ``requires`` (RFC 35
    text) are alternatives, and so are ``shape`` (RFC 46) and ``jobspec`` (RFC 14 list)."""

    resources: str = ""
    priority: int = 0
    slots: int = 1
    constraint: dict[str, Any] | None = None
    requires: str | None = None
    shape: str | None = None
    jobspec: list[Any] | None = None
    #: A registered debusine-style task type (docs/notations/debusine.md), and what the agent
    #: runs for it.
    task: str | None = None
    command: list[str] | None = None
    timeout: int | None = None
    #: Grid Engine ``-l`` lists (hard and soft) and ``-pe name`` with its slot range.
    hard: str = ""
    soft: str = ""
    pe: str | None = None
    pe_slots: str | None = None
    #: Grid Engine ``-q``, ``-masterq`` and ``-soft -q`` lists (wc_queue_list).
    queue_list: str = ""
    master_queue_list: str = ""
    soft_queue_list: str = ""
    #: Grid Engine ``qsub -P``: a project that must exist (project(5)).
    project: str | None = None
    #: Grid Engine ``qsub -w``: ``e`` refuses a job that could run nowhere even in an
    #: empty cluster; ``w`` and ``n`` (the default) accept it (jobmatch shows no warning).
    verify: str = "n"


@dataclass(frozen=True)
class ParsedRequest:
    tags: Resources
    slots: int
    constraint: Constraint | None
    jobspec: rfc14.Resources | None
    task: str | None = None
    hard: RequestList = field(default_factory=lambda: RequestList(()))
    soft: RequestList = field(default_factory=lambda: RequestList((), soft=True))
    pe: str | None = None
    pe_min: int = 1
    pe_max: int = 1
    queues: QueueLists = field(default_factory=QueueLists)

    @property
    def grid_engine(self) -> bool:
        """Whether the job asks anything of Grid Engine (then it waits when nothing fits
        now, as Grid Engine keeps it pending)."""
        return bool(self.hard.requests or self.soft.requests or self.queues) or (
            self.pe is not None
        )

    @property
    def constraint_json(self) -> str | None:
        if self.constraint is None:
            return None
        return json.dumps(
            constraint_to_json(self.constraint), sort_keys=True, separators=(",", ":")
        )

    @property
    def jobspec_json(self) -> str | None:
        if self.jobspec is None:
            return None
        return json.dumps(
            rfc14.resources_to_json(self.jobspec), sort_keys=True, separators=(",", ":")
        )


_Input = TypeVar("_Input")
_Parsed = TypeVar("_Parsed")


def _parsed(field: str, parse: Callable[[_Input], _Parsed], value: _Input) -> _Parsed:
    """``parse(value)``, a notation error in it reported against the job's ``field``."""
    try:
        return parse(value)
    except NotationError as error:
        raise InvalidFieldError(field, str(error), error) from error


def parse_slot_range(text: str) -> tuple[int, int]:
    """A ``-pe`` slot range: ``n``, ``lo-hi``, ``-hi`` (from 1) or ``lo-`` (up to the PE's
    limit, written as 9999999)."""
    low_text, dash, high_text = (part.strip() for part in text.strip().partition("-"))
    if not all(_is_count(part) for part in (low_text, high_text)):
        raise InvalidFieldError("pe_slots", f"{text!r} is not a slot range (n, lo-hi, -hi or lo-)")
    low = int(low_text) if low_text else 1
    high = (int(high_text) if high_text else MAX_PE_SLOTS) if dash else low
    if low < 1 or high < low:
        raise InvalidFieldError("pe_slots", f"{text!r}: need 1 <= lo <= hi")
    if high > MAX_PE_SLOTS:
        raise InvalidFieldError("pe_slots", f"{text!r}: at most {MAX_PE_SLOTS} slots")
    return low, high


#: Grid Engine's largest slot count (sge_pe(5): an open range ``lo-`` means up to it); it
#: also fits the 32-bit pe_min/pe_max columns.
MAX_PE_SLOTS = 9_999_999


def _is_count(text: str) -> bool:
    """Empty, or ASCII digits only (``int`` would also take ``1_0`` and other scripts'
    digits), at most as many as :data:`MAX_PE_SLOTS` has."""
    return not text or (text.isascii() and text.isdigit() and len(text) <= 8)


def _sge_lists(spec: JobSpec, table: ComplexTable | None) -> tuple[RequestList, RequestList]:
    if not spec.hard.strip() and not spec.soft.strip():
        return RequestList(()), RequestList((), soft=True)
    if table is None:
        raise InvalidFieldError("hard", "Grid Engine requests need the attribute table")
    lists = []
    for name, soft in (("hard", False), ("soft", True)):
        parse = partial(parse_request_list, table=table, soft=soft)
        lists.append(_parsed(name, parse, getattr(spec, name)))
    return lists[0], lists[1]


def parse_request(spec: JobSpec, table: ComplexTable | None = None) -> ParsedRequest:
    """Parse every notation of the job; raise InvalidFieldError for the first bad field.
    ``table`` is the complex attribute table the ``-l`` lists are checked against."""
    tags = parse_resources(spec.resources)
    if spec.slots < 1:
        raise InvalidFieldError("slots", "a job needs at least one slot")
    _check_priority(spec)
    if spec.constraint is not None and spec.requires is not None:
        raise InvalidFieldError(
            "requires", "give either constraint (RFC 31) or requires (RFC 35 text), not both"
        )
    if spec.shape is not None and spec.jobspec is not None:
        raise InvalidFieldError(
            "jobspec", "give either shape (RFC 46) or jobspec (RFC 14), not both"
        )
    constraint = None
    if spec.constraint is not None:
        constraint = _parsed("constraint", parse_constraint, spec.constraint)
    elif spec.requires is not None:
        constraint = _parsed("requires", compile_requires_constraint, spec.requires)
    resources = None
    if spec.shape is not None:
        resources = _parsed("shape", parse_shape_resources, spec.shape)
    elif spec.jobspec is not None:
        resources = _parsed("jobspec", rfc14.validate_resources, spec.jobspec)
    if resources is not None:
        _check_totals("shape" if spec.shape is not None else "jobspec", resources)
    _check_command(spec)
    if spec.task is not None and not NAMESPACE_PATTERN.fullmatch(spec.task):
        raise InvalidFieldError("task", "a task name is lower case: letters, digits, '_.+-'")
    hard, soft = _sge_lists(spec, table)
    pe_min = pe_max = 1
    if spec.pe is not None:
        if spec.slots != 1:
            raise InvalidFieldError("slots", "a parallel job gives its slots with pe_slots")
        pe_min, pe_max = parse_slot_range(spec.pe_slots or "1")
    elif spec.pe_slots is not None:
        raise InvalidFieldError("pe_slots", "pe_slots needs a parallel environment (pe)")
    queues = _queue_lists(spec)
    return ParsedRequest(
        tags=tags,
        slots=spec.slots,
        constraint=constraint,
        jobspec=resources,
        hard=hard,
        soft=soft,
        pe=spec.pe,
        pe_min=pe_min,
        pe_max=pe_max,
        task=spec.task,
        queues=queues,
    )


def _queue_lists(spec: JobSpec) -> QueueLists:
    """The ``-q``, ``-masterq`` and ``-soft -q`` lists; ``-masterq`` names the master of
    a parallel job, so it needs ``pe`` (qsub(1): only meaningful together with -pe)."""
    lists = [
        _parsed(field, partial(parse_queue_list, option=option), getattr(spec, field))
        for field, option in (
            ("queue_list", "-q"),
            ("master_queue_list", "-masterq"),
            ("soft_queue_list", "-soft -q"),
        )
    ]
    if lists[1] and spec.pe is None:
        raise InvalidFieldError(
            "master_queue_list", "-masterq names a parallel job's master queue: give pe too"
        )
    return QueueLists(lists[0], lists[1], lists[2])


#: The largest amount a need, booking or count column holds on both databases (SQLite
#: INTEGER and PostgreSQL BIGINT are signed 64-bit).
MAX_STORED_AMOUNT = 2**63 - 1


def _check_totals(field_name: str, resources: rfc14.Resources) -> None:
    """Counts multiply down the tree (``node=N/slot=M/core=K`` needs N*M*K cores); each
    count alone is within RFC 14's bound, but the products are stored and compared as
    64-bit integers too, so a product past that bound is the client's error (issue 19)."""
    requests = build_requests(resources)
    amounts = [*list_need(requests).values(), *node_needs(requests).values()]
    amounts.append(min_nodes(requests))
    if max(amounts, default=0) > MAX_STORED_AMOUNT:
        raise InvalidFieldError(
            field_name,
            f"the counts multiply to more than {MAX_STORED_AMOUNT} of one resource type; "
            "expected totals that fit a signed 64-bit integer",
        )


def check_job_fields(spec: JobSpec) -> None:
    """The checks of the fields that jobs of one request may differ in (priority,
    command, timeout): what a bulk submission checks for each job whose request it has
    parsed already (app/matching/submission/bulk.py)."""
    _check_priority(spec)
    _check_command(spec)


def _check_priority(spec: JobSpec) -> None:
    low, high = PRIORITY_RANGE
    if not low <= spec.priority <= high:
        raise InvalidFieldError("priority", f"must be between {low} and {high}")


def _check_command(spec: JobSpec) -> None:
    """An argv list the agent can hand to exec: non-empty strings without NUL."""
    if spec.command is not None:
        if not spec.command:
            raise InvalidFieldError("command", "an argv list needs at least the program")
        if len(spec.command) > MAX_ARGUMENTS:
            raise InvalidFieldError("command", f"at most {MAX_ARGUMENTS} arguments")
        for index, argument in enumerate(spec.command):
            if not isinstance(argument, str) or "\0" in argument:
                raise InvalidFieldError(f"command.{index}", "a string without NUL characters")
            if len(argument) > MAX_ARGUMENT_LENGTH:
                raise InvalidFieldError(f"command.{index}", "argument too long")
        if not spec.command[0]:
            raise InvalidFieldError("command.0", "the program name is empty")
    if spec.timeout is not None:
        if spec.command is None:
            raise InvalidFieldError("timeout", "a timeout bounds a command; give command too")
        if not 1 <= spec.timeout <= MAX_TIMEOUT:
            raise InvalidFieldError("timeout", f"between 1 and {MAX_TIMEOUT} seconds")
