"""The FastAPI application factory."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import APIRouter, FastAPI
from starlette.routing import BaseRoute

from app import __version__, heap
from app.api import capacity
from app.api.body_limits import BodyLimitMiddleware
from app.api.demand_gauges import DemandGauges, compute_figures
from app.api.docs_ui import install_docs_ui
from app.api.express import ExpressLane
from app.api.index import install_index
from app.api.lease_sweeper import LeaseSweeper
from app.api.longpoll import STATE_KEY, LongPoll, quiet_within
from app.api.middleware import RequestIdMiddleware
from app.api.problems import install_problem_handlers, install_problem_openapi
from app.api.routes import (
    categories,
    demand,
    demand_scale,
    flux,
    gridengine,
    groups,
    health,
    jobs,
    leases,
    metrics,
    output,
    queues,
    quotas,
    shares,
    tasks,
    tokens,
    whatif,
    workers,
)
from app.api.schema_gate import SchemaGateMiddleware, SchemaWatch
from app.api.token_gate import TokenGateMiddleware
from app.api.ui import routes as console
from app.db.connections import ConnectionOptions
from app.db.engine import Database
from app.db.event_loop import EventLoopConnections
from app.db.revocations import RevocationWatch
from app.logs import configure_logging
from app.matching.ordering import policy as ordering_policy
from app.matching.ordering.usage import rows_for_waiting_jobs
from app.metrics import forget_this_process
from app.settings import Settings, get_settings

log = logging.getLogger(__name__)

DESCRIPTION = """\
jobmatch decides which workers can run a job, how well, and which job a worker runs next.

Every error is an RFC 9457 `application/problem+json` body; a 422 lists each invalid field
in `errors`, with the position and the expectation of a notation that did not parse. Each
operation documents the errors it can return. Besides those, any request may be answered
408 when its headers arrive too slowly, 503 with `Retry-After` when the server has too
many open connections or when the database schema is not at the migration head (naming
both revisions and `jobmatch db upgrade`; the probes excepted), and 404 or 405 for a path
or method the API does not have; a 500 is a bug (logged, without details in the answer).

Authenticate with `Authorization: Bearer <token>`: the admin token from
`JOBMATCH_ADMIN_TOKEN`, or a worker or submitter token issued by `POST /v1/tokens`. A token
may expire (401 saying so). When the server limits the request rate per token
(`JOBMATCH_RATE_LIMIT_PER_SECOND`), a request over it is answered 429 with `Retry-After`;
long-poll pulls are not counted unless `JOBMATCH_RATE_LIMIT_LONG_POLL` is set.
"""


#: The service's routers, in the order the app tries them.
ROUTERS = (
    health.router,
    metrics.router,
    tokens.router,
    workers.router,
    jobs.router,
    categories.router,
    output.router,
    flux.router,
    leases.router,
    tasks.router,
    gridengine.router,
    quotas.router,
    shares.router,
    groups.router,
    queues.router,
    whatif.router,
    demand.router,
    demand_scale.router,
    # The web console: its own sign-in (a cookie), so the token gate lets it through.
    console.router,
)


def service_routers(settings: Settings | None = None) -> list[APIRouter]:
    """The routers an app with these settings mounts: ROUTERS, with /metrics behind a
    token when JOBMATCH_METRICS_REQUIRE_TOKEN says so."""
    guard_metrics = settings is not None and settings.metrics_require_token
    return [
        metrics.guarded_router if router is metrics.router and guard_metrics else router
        for router in ROUTERS
    ]


def service_routes(settings: Settings | None = None) -> list[BaseRoute]:
    """Every route of the routers, for the token gate (which looks at each one's
    dependencies to know whether it needs a token)."""
    return [route for router in service_routers(settings) for route in router.routes]


def _share_rows(database: Database) -> None:
    with database.transaction() as session:
        rows_for_waiting_jobs(session)


def create_app(settings: Settings | None = None, *, database: Database | None = None) -> FastAPI:
    settings = settings or get_settings()
    configure_logging(settings.log_level, settings.log_format)
    owns_database = database is None
    if database is None:
        database = Database(
            settings.database_url,
            busy_timeout=settings.sqlite_busy_timeout,
            options=ConnectionOptions.from_settings(settings),
        )

    # Every pull, explain and what-if of this process orders by the deployment's policy.
    ordering = ordering_policy.Ordering.from_settings(settings)
    ordering_policy.use(ordering)
    schema = SchemaWatch(database)
    # No sweep while the schema is not at head: its tables may not exist yet.
    sweeper = LeaseSweeper(database, settings, ready=schema.ready)
    waiting_budget = capacity.budgets_for(settings, capacity.open_files_limit()).waiting_pulls
    longpoll = LongPoll(database, waiting_budget, quiet_within(settings.worker_timeout_seconds))
    revocations = RevocationWatch(database)
    loop_connections = EventLoopConnections.for_database(database)
    demand_gauges = DemandGauges(
        functools.partial(compute_figures, database, settings.allocation_policy),
        settings.demand_metrics_seconds,
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[dict[str, object]]:
        # Logs a schema not at head (a warning: the server answers 503 until it is).
        await anyio.to_thread.run_sync(schema.check_at_start)
        if ordering.fair_share and schema.ready():
            # Jobs that waited before fair share was turned on get their submitters' rows.
            await anyio.to_thread.run_sync(_share_rows, database)
        sweeper.start()
        longpoll.start()
        revocations.start()
        if loop_connections is not None:
            loop_connections.bind(asyncio.get_running_loop())
        if settings.listen_url:
            # Each process of `serve --workers N` says so: uvicorn's own line names the
            # address once, in the parent, and a worker process only by its pid.
            log.info(
                "listening on %s (process %d)",
                settings.listen_url,
                os.getpid(),
                extra={"url": settings.listen_url, "pid": os.getpid()},
            )
        # The state reaches uvicorn's protocols too: they close the hub when the server
        # starts shutting down (app/api/longpoll.py).
        yield {STATE_KEY: longpoll.hub}
        if loop_connections is not None:
            await loop_connections.close()
        revocations.stop()
        # A demand computation under way uses the database: let it end before disposal.
        await anyio.to_thread.run_sync(demand_gauges.settle)
        longpoll.stop()
        sweeper.stop()
        forget_this_process()
        if owns_database:
            database.dispose()

    app = FastAPI(
        title="jobmatch",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        # /docs is served from packaged assets (app/api/docs_ui.py), not FastAPI's CDN page.
        docs_url=None,
        redoc_url=None,
    )
    install_problem_openapi(app)
    app.state.settings = settings
    app.state.database = database
    app.state.lease_sweeper = sweeper
    app.state.longpoll = longpoll
    app.state.revocations = revocations
    app.state.schema = schema
    app.state.demand_gauges = demand_gauges
    # The last added runs first: request ids and access logs, then the schema gate, the
    # body limits, then the token gate, all before FastAPI reads a byte of the body; the
    # express lane last.
    # The gate and the lane look up the same routes: the service's own.
    routes = service_routes(settings)
    app.add_middleware(
        ExpressLane,
        routes=routes,
        database=database,
        settings=settings,
        loop_connections=loop_connections,
    )
    app.add_middleware(
        TokenGateMiddleware,
        routes=routes,
        database=database,
        settings=settings,
        revocations=revocations,
    )
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=settings.max_body_bytes,
        timeout=settings.body_timeout_seconds,
    )
    app.add_middleware(SchemaGateMiddleware, watch=schema)
    app.add_middleware(RequestIdMiddleware)
    install_problem_handlers(app)
    install_docs_ui(app)
    install_index(app)
    for router in service_routers(settings):
        app.include_router(router)
    return app


def create_app_from_environment() -> FastAPI:
    """Entry point for `uvicorn --factory` (several worker processes each call it): the
    app, with the process's start-up heap set aside from the garbage collector and its
    later survivors set aside as they age (app/heap.py)."""
    app = create_app()
    heap.settle()
    heap.keep_settled()
    return app
