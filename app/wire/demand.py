"""The parts of the demand answer (``GET /v1/demand``, issue 40) that the server builds and
the client reads as they are: each category of waiting work with why it waits, what it
would take to start it, and per worker template how many new workers would start what.

The answers a category gets (:data:`ANSWERS`): ``never`` (no registered worker, or set of
workers for a job on several nodes, could ever hold it), ``capacity`` (fitting workers
exist but are busy or not taking work), ``policy`` (a quota, a limit or a queue list holds
it) and ``ready`` (a worker's next pull, or an allocation now, would start it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.wire.categories import CategoryRequest

NEVER, CAPACITY, POLICY, READY = "never", "capacity", "policy", "ready"
#: Every answer, in the order the totals list them.
ANSWERS = (NEVER, CAPACITY, POLICY, READY)


@dataclass(frozen=True)
class Need:
    """What it would take to start every waiting job of a category at once: slots, nodes
    (a job on several nodes counts each), the vertices of the nodes' inventories by
    ``type`` or ``type (unit)``, and the Grid Engine consumables the jobs request, by
    attribute (per slot, per job, or for an exclusive one the objects held)."""

    slots: int
    nodes: int
    vertices: dict[str, int]
    consumables: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class CategoryDemand:
    """One category of waiting work: how many jobs wait, how long the oldest has (seconds),
    what they ask for, why they wait (``answer`` and, in words, ``reasons``), what they
    would take (``need``), and with templates registered the template whose new worker
    would start them (None: none, or none asked)."""

    category_id: int
    waiting: int
    oldest_age: float
    request: CategoryRequest
    answer: str
    reasons: list[str]
    need: Need
    template: str | None


@dataclass(frozen=True)
class TemplateDemand:
    """One template alone: how many new workers of it would start the waiting jobs that
    today's workers cannot start now and it can (``jobs``, of ``categories``), at most its
    ``max_count``; ``cost`` is theirs in all."""

    template: str
    workers: int
    jobs: int
    categories: list[int]
    cost: float


@dataclass(frozen=True)
class MixItem:
    """How many new workers of one template the suggested mix adds, and the jobs of which
    categories they would start."""

    template: str
    workers: int
    jobs: int
    categories: list[int]


@dataclass(frozen=True)
class Unrunnable:
    """Waiting jobs of a category that today's workers cannot start now and that no
    template asked about could run (``beyond_limits``: some could, but their templates'
    ``max_count`` is used up)."""

    category_id: int
    jobs: int
    beyond_limits: bool


@dataclass(frozen=True)
class Suggestion:
    """The templates' part of the answer: each template alone, the suggested mix (least
    total cost, then fewest workers), its cost and worker count, the jobs it would start
    and the waiting jobs no template could run."""

    templates: list[TemplateDemand]
    mix: list[MixItem]
    cost: float
    workers: int
    starts: int
    unrunnable: list[Unrunnable]
