"""A what-if's change set, as the services take it, and the errors of one of its items."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.matching.errors import ConflictError, InvalidFieldError, NotFoundError
from app.matching.requests import JobSpec
from app.matching.worker_lifecycle import WorkerChanges
from app.matching.workers import WorkerSpec
from app.notations.errors import NotationError


@dataclass(frozen=True)
class WorkerChange:
    """``change_workers`` item: the worker's name and the fields a PATCH would change."""

    name: str
    changes: WorkerChanges


@dataclass(frozen=True)
class ValuesChange:
    """``set_values`` item: a Grid Engine object (``level`` ``global``, ``host`` with its
    ``host``, or ``queue_instance`` with its ``queue`` and ``host``) and the kinds of values
    that replace its own, as ``PUT /v1/values/...`` takes them."""

    level: str
    host: str | None
    queue: str | None
    values: Mapping[str, Mapping[str, str] | None]


@dataclass(frozen=True)
class WeightChange:
    """``set_weights`` item: a submitter's fair-share weight (docs/ordering.md) and, when
    ``moves``, the group it is put in (``group`` None: none), as ``PUT
    /v1/shares/{submitter}`` with a ``group`` does; without it, it stays where it is."""

    submitter: str
    weight: float
    group: str | None = None
    #: Whether the item names a group at all (``null`` included), as the route tells a
    #: body's ``"group": null`` from one without ``group``.
    moves: bool = False


@dataclass(frozen=True)
class GroupWeightChange:
    """``set_group_weights`` item: a group's weight, as ``PUT /v1/groups/{name}`` sets it
    (the group is made if it has no row)."""

    group: str
    weight: float


@dataclass(frozen=True)
class ChangeSet:
    """What a what-if applies, in this order: registrations (a name that exists is
        replaced, as ``POST /v1/workers?replace=true`` does), changes of some fields, Grid
        Engine values, resource quota sets added, replaced and removed, submitters' weights and
    groups, groups' weights, drains, removals (with
        the removed workers' running jobs returned to the queue), then submissions."""

    add_workers: tuple[WorkerSpec, ...] = ()
    change_workers: tuple[WorkerChange, ...] = ()
    set_values: tuple[ValuesChange, ...] = ()
    #: Quota set texts, as ``POST /v1/quotas`` and ``PUT /v1/quotas/{name}`` take them
    #: (a replacement names its set in its text).
    add_quota_sets: tuple[str, ...] = ()
    replace_quota_sets: tuple[str, ...] = ()
    remove_quota_sets: tuple[str, ...] = ()
    #: Fair-share weights (and groups), as ``PUT /v1/shares/{submitter}`` sets them.
    set_weights: tuple[WeightChange, ...] = ()
    #: Group weights, as ``PUT /v1/groups/{name}`` sets them.
    set_group_weights: tuple[GroupWeightChange, ...] = ()
    drain_workers: tuple[str, ...] = ()
    remove_workers: tuple[str, ...] = ()
    add_jobs: tuple[JobSpec, ...] = ()
    #: A waiting job whose candidates before and after the change are wanted.
    explain_job: int | None = None
    #: Workers whose first pull is wanted beside those the change set adds or changes
    #: (who goes first after a change of weights, say).
    pull_workers: tuple[str, ...] = ()


class ChangeRefused(InvalidFieldError):
    """An item of the change set was refused by the service that applied it (a notation
    that did not parse, a worker that does not exist, a rank another worker holds); the
    field names the item, e.g. ``add_jobs.3.resources``, and nothing was stored."""


def refused(item: str, error: Exception) -> ChangeRefused:
    """``error``, raised by a service while it applied ``item`` (``add_jobs.3``), as the
    refusal of that item: an invalid field keeps its name below the item's."""
    if isinstance(error, InvalidFieldError):
        return ChangeRefused(f"{item}.{error.field}", error.message, error.error)
    if isinstance(error, NotationError):
        return ChangeRefused(item, str(error), error)
    if isinstance(error, (NotFoundError, ConflictError)):
        return ChangeRefused(item, str(error))
    raise TypeError(f"not a refusal of a change: {error!r}")


#: The service errors a what-if reports as the refusal of one item.
REFUSALS = (InvalidFieldError, NotationError, NotFoundError, ConflictError)
