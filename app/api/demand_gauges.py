"""The demand figures that /metrics and ``GET /v1/demand/scale`` serve (issue 40), computed
at most once per JOBMATCH_DEMAND_METRICS_SECONDS per server process.

Demand with worker templates simulates new workers with the real services and can take
seconds at farm scale, and scrapers (Prometheus, several KEDA triggers) poll on their own
clocks: so no scrape computes it unbounded. The last answer is kept for the TTL; a request
that finds it stale starts one computation in a background thread and answers with the
last value at once (a scrape never waits for a simulation, except before the process's
first figures: it has nothing to serve yet, so it waits for that one computation). While
one computation runs, every other request serves the last value: single-flight. A
computation that fails keeps the last value, logs why and is tried again by the next
request.

Label cardinality is bounded: the first :data:`MAX_CATEGORY_LABELS` categories with
waiting jobs (by id, the demand service's own page order; 500 is its largest page) are
labelled by id, and the jobs of every category past them are summed per answer under
``category="other"``; at most :data:`MAX_TEMPLATE_LABELS` templates (by name) are
simulated, as ``GET /v1/demand?templates=`` takes at most that many.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from app.api.routes.demand import MAX_TEMPLATES
from app.db.base import utcnow
from app.db.engine import Database
from app.matching.allocation.allocator import Policy
from app.matching.demand.report import Demand
from app.matching.demand.report import demand as demand_report
from app.matching.demand.templates import list_templates
from app.wire.demand import ANSWERS

log = logging.getLogger(__name__)

#: Categories labelled by id in ``jobmatch_demand_jobs`` (the largest page of demand).
MAX_CATEGORY_LABELS = 500
#: Templates simulated for the gauges.
MAX_TEMPLATE_LABELS = MAX_TEMPLATES
#: The ``category`` label of the jobs of the categories past the labelled ones.
OTHER_CATEGORIES = "other"


@dataclass(frozen=True)
class DemandFigures:
    """One computation: waiting jobs by (answer, category label), the suggested new
    workers per template (0 for a template the mix does not use), the jobs the suggested
    mix would start per template, when it was computed (Unix time) and how long it took."""

    jobs: dict[tuple[str, str], int]
    totals: dict[str, int]
    workers: dict[str, int]
    starts: dict[str, int]
    unrunnable: int
    computed_at: float
    seconds: float


def figures_of(
    answer: Demand, templates: list[str], computed_at: float, seconds: float
) -> DemandFigures:
    """The figures of one demand answer (its first page of categories labelled by id)."""
    jobs: dict[tuple[str, str], int] = {}
    labelled = dict.fromkeys(ANSWERS, 0)
    for category in answer.categories:
        jobs[(category.answer, str(category.category_id))] = category.waiting
        labelled[category.answer] += category.waiting
    for name in ANSWERS:
        rest = answer.jobs.get(name, 0) - labelled[name]
        if rest > 0:
            jobs[(name, OTHER_CATEGORIES)] = rest
    workers = dict.fromkeys(templates, 0)
    starts = dict.fromkeys(templates, 0)
    unrunnable = 0
    if answer.suggestion is not None:
        for item in answer.suggestion.mix:
            workers[item.template] = item.workers
            starts[item.template] = item.jobs
        unrunnable = sum(u.jobs for u in answer.suggestion.unrunnable)
    return DemandFigures(
        jobs=jobs,
        totals={name: answer.jobs.get(name, 0) for name in ANSWERS},
        workers=workers,
        starts=starts,
        unrunnable=unrunnable,
        computed_at=computed_at,
        seconds=seconds,
    )


def compute_figures(database: Database, policy: Policy) -> DemandFigures:
    """Demand now, over every template (the first :data:`MAX_TEMPLATE_LABELS` by name), in
    its own transaction (the simulation's savepoints are rolled back: nothing is stored)."""
    started = time.monotonic()
    with database.transaction(write=False) as session:
        templates = list_templates(session, limit=MAX_TEMPLATE_LABELS)
        answer = demand_report(
            session,
            policy,
            utcnow(),
            templates=templates or None,
            limit=MAX_CATEGORY_LABELS,
            offset=0,
        )
    return figures_of(answer, [t.name for t in templates], time.time(), time.monotonic() - started)


class DemandGauges:
    """The process's cached demand figures (see the module's docstring). ``ttl`` 0: off,
    :meth:`figures` answers None. ``clock`` is the monotonic clock the TTL is measured on
    (tests pass their own)."""

    def __init__(
        self,
        compute: Callable[[], DemandFigures],
        ttl: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._compute = compute
        self.ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._last: DemandFigures | None = None
        self._computed_at: float | None = None
        self._running: threading.Thread | None = None
        #: Computations started (for the tests of single-flight, and the docs' claim).
        self.computations = 0

    def figures(self) -> DemandFigures | None:
        """The last figures, refreshed in the background when older than the TTL. Before
        the process has any, a call waits for the first computation (its own, or the one
        under way) rather than start a second."""
        if self.ttl <= 0:
            return None
        with self._lock:
            fresh = self._computed_at is not None and self._clock() - self._computed_at < self.ttl
            running = self._running
            if not fresh and running is None:
                running = threading.Thread(
                    target=self._refresh, name="jobmatch-demand-gauges", daemon=True
                )
                self._running = running
                self.computations += 1
                running.start()
            first = self._last is None
        if first and running is not None:
            running.join()
        return self._last

    def settle(self) -> None:
        """Wait for the computation under way, if any (tests; the server's shutdown)."""
        running = self._running
        if running is not None:
            running.join()

    def _refresh(self) -> None:
        try:
            figures = self._compute()
        except Exception:
            # Keep serving the last figures; the next request past the TTL tries again.
            log.exception("demand figures for /metrics could not be computed")
            with self._lock:
                self._running = None
            return
        with self._lock:
            self._last = figures
            self._computed_at = self._clock()
            self._running = None
