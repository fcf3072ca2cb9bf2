"""The FastAPI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app import __version__
from app.api.middleware import RequestIdMiddleware
from app.api.problems import install_problem_handlers
from app.api.routes import complexes, flux, health, jobs, tokens, workers
from app.api.schemas import Problem
from app.db.engine import Database
from app.logs import configure_logging
from app.settings import Settings, get_settings

DESCRIPTION = """\
jobmatch decides which workers can run a job, how well, and which job a worker runs next.

Every error is an RFC 9457 `application/problem+json` body. Authenticate with
`Authorization: Bearer <token>`: the admin token from `JOBMATCH_ADMIN_TOKEN`, or a worker or
submitter token issued by `POST /v1/tokens`.
"""


def create_app(settings: Settings | None = None, *, database: Database | None = None) -> FastAPI:
    settings = settings or get_settings()
    configure_logging(settings.log_level, settings.log_format)
    owns_database = database is None
    if database is None:
        database = Database(settings.database_url, busy_timeout=settings.sqlite_busy_timeout)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        if owns_database:
            database.dispose()

    app = FastAPI(
        title="jobmatch",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        responses={
            401: {"model": Problem, "description": "No valid bearer token"},
            403: {"model": Problem, "description": "The token's role may not do this"},
            422: {"model": Problem, "description": "Invalid request or notation"},
        },
    )
    app.state.settings = settings
    app.state.database = database
    app.add_middleware(RequestIdMiddleware)
    install_problem_handlers(app)
    app.include_router(health.router)
    app.include_router(tokens.router)
    app.include_router(workers.router)
    app.include_router(jobs.router)
    app.include_router(flux.router)
    app.include_router(complexes.router)
    return app


def create_app_from_environment() -> FastAPI:
    """Entry point for `uvicorn --factory` (several worker processes each call it)."""
    return create_app()
