"""The commands that run here, not against a server: serve, demo, the Flux tools and the
worker agent. Heavy imports (the server, the database) happen inside each command, so that
the remote commands start quickly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli.database import check_database_url, database_errors, shown_url
from app.cli.errors import ExitCode, fail
from app.cli.help import examples

local_cli = typer.Typer(rich_markup_mode=None)

#: Seconds uvicorn gives a worker process (--workers N) to answer its health ping.
WORKER_HEALTHCHECK_SECONDS = 60


@local_cli.command(
    epilog=examples(
        "jobmatch serve",
        "jobmatch serve --host 0.0.0.0 --port 8080 --workers 4 --migrate",
        "JOBMATCH_DATABASE_URL=postgresql+psycopg://user@db/jobmatch jobmatch serve --migrate",
    )
)
def serve(
    host: Annotated[str, typer.Option(help="interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    workers: Annotated[int, typer.Option(min=1, help="worker processes")] = 1,
    migrate_first: Annotated[
        bool | None,
        typer.Option(
            "--migrate/--no-migrate",
            help="upgrade the schema to head before serving "
            "[default: yes on SQLite, no on PostgreSQL]",
            show_default=False,
        ),
    ] = None,
    max_body_bytes: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="largest request body in bytes; a larger one is answered 413 before it is "
            "read (default: JOBMATCH_MAX_BODY_BYTES, 1048576)",
        ),
    ] = None,
    header_timeout: Annotated[
        float | None,
        typer.Option(
            min=0.001,
            help="seconds a connection may take to send a request's headers before it is "
            "answered 408 and closed (default: JOBMATCH_HEADER_TIMEOUT_SECONDS, 10)",
        ),
    ] = None,
    body_timeout: Annotated[
        float | None,
        typer.Option(
            min=0.001,
            help="seconds a request may take to send its whole body before it is answered "
            "408 and its connection closed (default: JOBMATCH_BODY_TIMEOUT_SECONDS, 30)",
        ),
    ] = None,
    keep_alive: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="seconds an idle keep-alive connection stays open "
            "(default: JOBMATCH_KEEP_ALIVE_SECONDS, 5)",
        ),
    ] = None,
    max_connections: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="open connections per worker process; requests beyond them are answered "
            "503 with Retry-After (default: JOBMATCH_MAX_CONNECTIONS, 1000)",
        ),
    ] = None,
    backlog: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="connections the kernel queues before they are accepted "
            "(default: JOBMATCH_BACKLOG, 2048)",
        ),
    ] = None,
) -> None:
    """Serve the HTTP API, with limits on what each client can make it hold.

    Long because typer reads the options from the signature: the body itself is short."""
    import os

    from app.cli import metrics_dir
    from app.cli.errors import CommandError
    from app.cli.listening import bind_listening_socket, listen_url

    # The port first, before a line is logged or the database migrated (or a running
    # server's metrics directory emptied): a taken one is one line and exit code 2.
    try:
        listener = bind_listening_socket(host, port)
    except CommandError as error:
        fail(error.message, error.code)
    # --port 0 lets the system choose: the URL names the port it chose.
    url = listen_url(host, listener.getsockname()[1])

    # Then, before anything imports prometheus-client: every process counts in files there.
    metrics_dir.set_up()

    import logging

    import uvicorn

    from app.api import capacity
    from app.api.http_protocol import LimitedHttpProtocol
    from app.db import migrate
    from app.db.dialect import is_sqlite
    from app.logs import configure_logging
    from app.settings import get_settings

    overrides: dict[str, object] = {
        "max_body_bytes": max_body_bytes,
        "header_timeout_seconds": header_timeout,
        "body_timeout_seconds": body_timeout,
        "keep_alive_seconds": keep_alive,
        "max_connections": max_connections,
        "backlog": backlog,
    }
    # Each process's share of the rate limits (app/api/rate_limits.py).
    overrides["server_processes"] = workers
    # Each process logs where it listens when it starts (app/api/app.py).
    overrides["listen_url"] = url
    for field, value in overrides.items():
        if value is not None:
            # Through the environment: the worker processes (--workers) read their
            # settings from it, as they read every other setting.
            os.environ[f"JOBMATCH_{field.upper()}"] = str(value)
    get_settings.cache_clear()
    settings = get_settings()
    check_database_url(settings.database_url)
    # Before the worker processes start: they inherit the raised limit.
    files = capacity.raise_open_files_limit()
    configure_logging(settings.log_level, settings.log_format)
    short, line = capacity.start_message(
        files, capacity.budgets_for(settings, files.after), workers
    )
    logging.getLogger("app.capacity").log(logging.WARNING if short else logging.INFO, line)
    if migrate_first is None:
        # The embedded database belongs to this process; a shared PostgreSQL is migrated
        # as an explicit deployment step.
        migrate_first = is_sqlite(settings.database_url)
    if migrate_first:
        with database_errors(settings.database_url):
            migrate.upgrade(settings.database_url)
    config = uvicorn.Config(
        "app.api.app:create_app_from_environment",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_config=None,
        http=LimitedHttpProtocol,
        timeout_keep_alive=settings.keep_alive_seconds,
        # The budgets are the protocol's (app/api/capacity.py): uvicorn's one limit
        # counted waiting pulls and probes alike.
        limit_concurrency=None,
        backlog=settings.backlog,
        # A worker process answers uvicorn's health pings only once it has imported the
        # app's modules (its HTTP protocol class comes pickled): on a loaded 2-core host
        # that took over uvicorn's default 5 s, and each process was killed and spawned
        # again, forever (issue 25's multi-process test never saw one start).
        timeout_worker_healthcheck=WORKER_HEALTHCHECK_SECONDS,
    )
    _serve_on(config, listener)


def _serve_on(config: Any, listener: Any) -> None:
    """Serve with uvicorn on the socket `serve` bound, as `uvicorn.run` would serve on a
    socket of its own: one process, or a supervisor of ``config.workers`` processes that
    share the socket."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    if config.workers > 1:
        Multiprocess(config, sockets=[listener]).run()
        return
    server = uvicorn.Server(config)
    server.run(sockets=[listener])
    if not server.started:
        # The application failed to start (its lifespan said so, in the log above).
        raise typer.Exit(int(ExitCode.UNREACHABLE))


#: Where `jobmatch demo` writes unless told otherwise: a file of its own, so that the demo's
#: workers and jobs never mix with those of the server's database (./jobmatch.db).
DEMO_DATABASE_URL = "sqlite:///./jobmatch-demo.db"
#: The files SQLite may keep beside a database file, removed with it.
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


@local_cli.command(
    epilog=examples(
        "jobmatch demo",
        "jobmatch demo --keep   # add the demo's jobs again to what the database holds",
        "jobmatch demo --no-pull --database-url sqlite:////tmp/demo.db",
    )
)
def demo(
    pull: Annotated[bool, typer.Option(help="let each demo worker pull once")] = True,
    keep: Annotated[
        bool,
        typer.Option(
            "--keep",
            help="add to what the database holds instead of starting it afresh (the "
            "demo's workers are registered again, its jobs submitted again)",
        ),
    ] = False,
    database_url: Annotated[
        str,
        typer.Option(
            help="SQLAlchemy URL of the database the demo writes to (JOBMATCH_DATABASE_URL "
            "is not used, so the demo never writes into the server's database by accident)"
        ),
    ] = DEMO_DATABASE_URL,
) -> None:
    """Load a small example cluster and job mix, and show what jobmatch decides.

    Writes to ./jobmatch-demo.db in the working directory unless --database-url names
    another database, which it starts afresh each run (so that job ids and dispatch are
    the same every time) unless --keep is given. A database holding workers or jobs that
    are not the demo's is never started afresh: the demo refuses it.
    """
    from app.db import migrate
    from app.db.dialect import is_sqlite
    from app.db.engine import Database
    from app.matching.demo import DEMO_WORKERS, load_demo
    from app.settings import get_settings

    shown = shown_url(database_url)
    with database_errors(database_url):
        if keep:
            if is_sqlite(database_url):
                migrate.upgrade(database_url)
            typer.echo(f"{shown}: kept what it held (--keep): the demo adds to it")
        else:
            _start_demo_database_afresh(database_url)
            typer.echo(f"{shown}: started afresh (--keep adds to what it holds instead)")
        database = Database(database_url, busy_timeout=get_settings().sqlite_busy_timeout)
        try:
            with database.transaction() as session:
                report = load_demo(session)
            typer.echo(
                f"{len(DEMO_WORKERS)} workers registered; {len(report)} jobs submitted in {shown}\n"
            )
            _print_demo_report(report)
            if pull:
                _demo_dispatch(database)
        finally:
            database.dispose()


def _start_demo_database_afresh(url: str) -> None:
    """Empty the demo's database and migrate it to head: a SQLite file is removed, any
    other database has its schema downgraded to nothing and upgraded again.

    Refused (one error line, exit code 2) for a database that is not the demo's own: a
    file that is not a jobmatch database, or one holding workers or jobs that are not the demo's.
    """
    from sqlalchemy.engine import make_url

    from app.db import migrate
    from app.db.engine import Database
    from app.matching.demo import not_of_the_demo

    parsed = make_url(url)
    database_name = parsed.database or ""
    path = (
        Path(database_name)
        if parsed.get_backend_name() == "sqlite"
        and database_name not in ("", ":memory:")
        and not database_name.startswith("file:")
        else None
    )
    if path is not None and not path.exists():
        migrate.upgrade(url)
        return
    shown = shown_url(url)
    if path is not None and path.stat().st_size > 0 and not migrate.current_revisions_at(url):
        fail(
            f"{shown} is not a jobmatch database: the demo starts afresh only a database "
            "of its own; name another with --database-url",
            ExitCode.USAGE,
        )
    migrate.upgrade(url)
    database = Database(url)
    try:
        with database.transaction() as session:
            others = not_of_the_demo(session)
    finally:
        database.dispose()
    if others:
        more = f" and {len(others) - 3} more" if len(others) > 3 else ""
        fail(
            f"{shown} holds what the demo did not put there ({', '.join(others[:3])}{more}): "
            "the demo starts afresh only a database of its own; name another with "
            "--database-url, or add to this one with --keep",
            ExitCode.USAGE,
        )
    if path is not None:
        # The file and what SQLite keeps beside it (a write-ahead log, a rollback journal).
        for leftover in (path, *(Path(f"{path}{suffix}") for suffix in SQLITE_SIDE_FILES)):
            leftover.unlink(missing_ok=True)
    else:
        migrate.downgrade(url, "base")
    migrate.upgrade(url)


def _print_demo_report(report: list[Any]) -> None:
    """Each demo job: its state, its candidates and why each other worker was refused."""
    for entry in report:
        job = entry.job
        first_line = job.resources.replace("\n", "; ")
        typer.echo(
            f"job {job.id} [{first_line}] slots={job.slots} priority={job.priority}: "
            f"{job.state.value}" + (f" ({job.failure_reason})" if job.failure_reason else "")
        )
        for candidate in entry.candidates:
            typer.echo(
                f"    candidate {candidate.worker:<12} strength {candidate.strength:>5} "
                f"({candidate.strength_name})"
            )
        for refusal in entry.refusals:
            for clause in refusal.clauses:
                typer.echo(f"    not {refusal.worker:<12} {clause.message}")


def _demo_dispatch(database: Any) -> None:
    """Each demo worker pulls once; print what it got."""
    from app.matching.demo import DEMO_WORKERS
    from app.matching.dispatch import pull as dispatch

    typer.echo("\ndispatch (each worker pulls once):")
    for spec in DEMO_WORKERS:
        with database.transaction() as session:
            pulled = dispatch.pull(session, spec.name)
            got = f"job {pulled.id}" if pulled else "nothing (204)"
        typer.echo(f"    {spec.name:<12} -> {got}")


@local_cli.command(
    epilog=examples("jobmatch shape 'slot=4/node'", "jobmatch shape 'node=2/slot/core=8' --yaml")
)
def shape(
    text: Annotated[str, typer.Argument(help="an RFC 46 shape, e.g. 'slot=4/node'")],
    yaml: Annotated[bool, typer.Option("--yaml", help="YAML instead of JSON")] = False,
    label: Annotated[str, typer.Option(help="label of an unlabelled slot")] = "default",
) -> None:
    """Expand an RFC 46 shape into its RFC 14 resources list."""
    from app.matching.errors import InvalidFieldError
    from app.matching.flux import tools as flux_tools

    try:
        if yaml:
            typer.echo(flux_tools.shape_as_yaml(text, label), nl=False)
        else:
            resources, _canonical = flux_tools.expand_shape(text, label)
            typer.echo(json.dumps(resources, indent=2))
    except InvalidFieldError as error:
        typer.echo(f"error: {error.message}", err=True)
        raise typer.Exit(int(ExitCode.USAGE)) from error


@local_cli.command(epilog=examples("jobmatch requires 'host:node[0-3] ssd'"))
def requires(
    text: Annotated[list[str], typer.Argument(help="RFC 35 terms, e.g. 'host:node[0-3] ssd'")],
) -> None:
    """Compile RFC 35 text to an RFC 31 constraint, as `flux submit --requires` does."""
    from app.matching.errors import InvalidFieldError
    from app.matching.flux import tools as flux_tools

    try:
        typer.echo(json.dumps(flux_tools.compile_requires_text(" ".join(text)), indent=2))
    except InvalidFieldError as error:
        typer.echo(f"error: {error.message}", err=True)
        raise typer.Exit(int(ExitCode.USAGE)) from error


@local_cli.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
    epilog=examples(
        "JOBMATCH_WORKER_TOKEN=... jobmatch worker --url http://127.0.0.1:8000 --name w1",
        "jobmatch worker --help   # the agent's own options (the same as jobmatch-agent)",
    ),
)
def worker(ctx: typer.Context) -> None:
    """Run a worker agent: the same as `jobmatch-agent` (`jobmatch worker --help` lists
    its options)."""
    from app.agent.main import main as agent_main

    raise typer.Exit(agent_main(ctx.args, prog="jobmatch worker"))
