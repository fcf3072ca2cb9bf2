"""GET /metrics in the Prometheus text format."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from app.api.deps import SessionDep
from app.api.longpoll import LongPollMetrics
from app.api.responses import errors
from app.matching.stats import Stats, collect

router = APIRouter(tags=["health"])


class _DatabaseGauges(Collector):
    """Gauges read from the database at scrape time."""

    def __init__(self, stats: Stats) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily("jobmatch_jobs", "Jobs by state.", labels=["state"])
        for state, count in sorted(self.stats.jobs_by_state.items()):
            jobs.add_metric([state], count)
        slots = GaugeMetricFamily("jobmatch_slots", "Queue-instance slots.", labels=["kind"])
        slots.add_metric(["total"], self.stats.slots_total)
        slots.add_metric(["booked"], self.stats.slots_booked)
        workers = GaugeMetricFamily("jobmatch_workers", "Registered workers.")
        workers.add_metric([], self.stats.workers)
        yield from (jobs, slots, workers)


@router.get(
    "/metrics",
    operation_id="get_metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={
        200: {"content": {"text/plain": {}}, "description": "The Prometheus text format"},
        **errors(503),
    },
)
def metrics(session: SessionDep, request: Request) -> Response:
    """Request and dispatch latencies, category cache hits and misses, jobs by state and
    booked slots, long-poll waiters and wake-ups, in the Prometheus text format."""
    registry = CollectorRegistry()
    registry.register(_DatabaseGauges(collect(session)))
    registry.register(LongPollMetrics(request.app.state.longpoll.hub))
    return Response(generate_latest() + generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
