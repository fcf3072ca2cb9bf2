"""GET /metrics in the Prometheus text format.

Counters and histograms come from every server process (prometheus-client's multiprocess
mode, set up by `jobmatch serve`: app/metrics.py); the gauges that describe the database
are read from it at scrape time by the one process that answers.

Anyone may scrape by default. With JOBMATCH_METRICS_REQUIRE_TOKEN the app mounts
``guarded_router`` instead of ``router``: the same answer, behind any valid token (the
scrape tells job counts by state and the size of the cluster).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from app.api.auth import PrincipalDep
from app.api.demand_gauges import DemandFigures, DemandGauges
from app.api.deps import SessionDep
from app.api.responses import errors
from app.matching.ordering import policy
from app.matching.ordering.shares import GroupStanding, Standing, group_standings, standings
from app.matching.stats import Stats, collect
from app.metrics import multiprocess_dir

router = APIRouter(tags=["health"])
guarded_router = APIRouter(tags=["health"])


class _DatabaseGauges(Collector):
    """Gauges read from the database at scrape time: each family is one kind of thing,
    so that no sum over a label mixes unlike ones (booked and total slots are two)."""

    def __init__(
        self, stats: Stats, shares: list[Standing], groups: list[GroupStanding] | None = None
    ) -> None:
        self.stats = stats
        self.shares = shares
        self.groups = groups or []

    def collect(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily("jobmatch_jobs", "Jobs by state.", labels=["state"])
        for state, count in sorted(self.stats.jobs_by_state.items()):
            jobs.add_metric([state], count)
        workers = GaugeMetricFamily(
            "jobmatch_workers", "Registered workers by state.", labels=["state"]
        )
        for state, count in sorted(self.stats.workers_by_state.items()):
            workers.add_metric([state], count)
        slots = GaugeMetricFamily(
            "jobmatch_slots_capacity", "Slots of all queue instances (booked or not)."
        )
        slots.add_metric([], self.stats.slots_total)
        booked = GaugeMetricFamily(
            "jobmatch_slots_booked", "Slots of queue instances booked by running jobs."
        )
        booked.add_metric([], self.stats.slots_booked)
        labels = ["consumable", "level"]
        capacity = GaugeMetricFamily(
            "jobmatch_consumable_capacity",
            "Capacity of a Grid Engine consumable, summed over the objects of one level "
            "(global, host, queue), in the consumable's base unit.",
            labels=labels,
        )
        used = GaugeMetricFamily(
            "jobmatch_consumable_booked",
            "Amount of a Grid Engine consumable booked by running jobs, summed over the "
            "objects of one level, in the consumable's base unit.",
            labels=labels,
        )
        for figures in self.stats.consumables:
            capacity.add_metric([figures.name, figures.level], figures.capacity)
            used.add_metric([figures.name, figures.level], figures.booked)
        yield from (jobs, workers, slots, booked, capacity, used)
        yield from self._fair_share()

    def _fair_share(self) -> Iterator[Metric]:
        """Usage against share per submitter, under a policy with fair share."""
        if not self.shares:
            return
        usage = GaugeMetricFamily(
            "jobmatch_submitter_usage",
            "Slot-seconds a submitter's ended jobs used, decayed to now with the half-life.",
            labels=["submitter"],
        )
        share = GaugeMetricFamily(
            "jobmatch_submitter_share",
            "A submitter's share: its weight over every submitter's (0 to 1).",
            labels=["submitter"],
        )
        fraction = GaugeMetricFamily(
            "jobmatch_submitter_usage_fraction",
            "A submitter's decayed usage over everybody's (0 to 1).",
            labels=["submitter"],
        )
        for standing in self.shares:
            usage.add_metric([standing.submitter], standing.usage)
            share.add_metric([standing.submitter], standing.share)
            fraction.add_metric([standing.submitter], standing.usage_fraction)
        yield from (usage, share, fraction)
        yield from self._groups()

    def _groups(self) -> Iterator[Metric]:
        """Usage against share per named group of submitters (a submitter without a group
        is a group of its own, already exported as a submitter)."""
        named = [group for group in self.groups if group.group is not None]
        if not named:
            return
        usage = GaugeMetricFamily(
            "jobmatch_group_usage",
            "Slot-seconds a group's members' ended jobs used, decayed to now with the half-life.",
            labels=["group"],
        )
        share = GaugeMetricFamily(
            "jobmatch_group_share",
            "A group's share: its weight over every group's, a submitter without a group "
            "counting as a group of its own (0 to 1).",
            labels=["group"],
        )
        fraction = GaugeMetricFamily(
            "jobmatch_group_usage_fraction",
            "A group's decayed usage over everybody's (0 to 1).",
            labels=["group"],
        )
        for group in named:
            usage.add_metric([str(group.group)], group.usage)
            share.add_metric([str(group.group)], group.share)
            fraction.add_metric([str(group.group)], group.usage_fraction)
        yield from (usage, share, fraction)


class _DemandGauges(Collector):
    """The demand figures (issue 40), as the process last computed them (within
    JOBMATCH_DEMAND_METRICS_SECONDS; app/api/demand_gauges.py)."""

    def __init__(self, figures: DemandFigures) -> None:
        self.figures = figures

    def collect(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily(
            "jobmatch_demand_jobs",
            "Waiting jobs by why they wait (answer: never, capacity, policy, ready) and "
            "category id (past the first 500 categories: category=other), as GET /v1/demand "
            "answers.",
            labels=["answer", "category"],
        )
        for (answer, category), count in sorted(self.figures.jobs.items()):
            jobs.add_metric([answer, category], count)
        workers = GaugeMetricFamily(
            "jobmatch_demand_workers",
            "New workers of each worker template in the suggested mix of GET "
            "/v1/demand?templates=* (0: the mix uses none of it).",
            labels=["template"],
        )
        for template, count in sorted(self.figures.workers.items()):
            workers.add_metric([template], count)
        computed = GaugeMetricFamily(
            "jobmatch_demand_computed_timestamp_seconds",
            "When this process last computed the demand figures (Unix time).",
        )
        computed.add_metric([], self.figures.computed_at)
        took = GaugeMetricFamily(
            "jobmatch_demand_compute_seconds",
            "How long that computation took.",
        )
        took.add_metric([], self.figures.seconds)
        yield from (jobs, workers, computed, took)


def _scrape(request: Request, session: SessionDep) -> Response:
    directory = multiprocess_dir()
    if directory is None:
        processes = generate_latest(REGISTRY)
    else:
        # Summed over the files of every process (and those that have stopped, so that no
        # counter goes down when a worker process is replaced).
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
        processes = generate_latest(registry)
    database = CollectorRegistry()
    ordering = policy.active()
    shares = standings(session, ordering.halflife_seconds) if ordering.fair_share else []
    groups = group_standings(session, ordering.halflife_seconds) if ordering.fair_share else []
    database.register(_DatabaseGauges(collect(session), shares, groups))
    gauges: DemandGauges = request.app.state.demand_gauges
    figures = gauges.figures()
    if figures is not None:
        database.register(_DemandGauges(figures))
    return Response(processes + generate_latest(database), media_type=CONTENT_TYPE_LATEST)


_DESCRIPTION = """Request, dispatch and submit-to-dispatch latencies, category (misfit
cache) hits and misses, transaction retries, lease expiries and requeues, long-poll waiters
and wake-ups (all server processes together); jobs and workers by state, booked and total
slots and consumables (read from the database now); the demand of the waiting jobs by
answer and category and the suggested new workers per template (computed at most once per
JOBMATCH_DEMAND_METRICS_SECONDS per process)."""

_TEXT: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/plain": {}}, "description": "The Prometheus text format"}
}


@router.get(
    "/metrics",
    operation_id="get_metrics",
    summary="Prometheus metrics",
    description=_DESCRIPTION,
    response_class=Response,
    responses={**_TEXT, **errors(503)},
)
def metrics(request: Request, session: SessionDep) -> Response:
    """The metrics, to anyone (the default)."""
    return _scrape(request, session)


@guarded_router.get(
    "/metrics",
    operation_id="get_metrics",
    summary="Prometheus metrics",
    description=_DESCRIPTION,
    response_class=Response,
    responses={**_TEXT, **errors(401, 503)},
)
def guarded_metrics(request: Request, session: SessionDep, _caller: PrincipalDep) -> Response:
    """The metrics, to a caller with any valid token (JOBMATCH_METRICS_REQUIRE_TOKEN)."""
    return _scrape(request, session)
