"""The `jobmatch` command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
import uvicorn

from app import __version__
from app.db import migrate
from app.db.dialect import is_sqlite
from app.settings import get_settings

cli = typer.Typer(
    help="jobmatch: matchmaking for job systems.", no_args_is_help=True, add_completion=False
)
db_cli = typer.Typer(help="Database schema migrations (Alembic).", no_args_is_help=True)
cli.add_typer(db_cli, name="db")
scenario_cli = typer.Typer(
    help="Grid Engine scenarios (sge62u5-reference-v1).", no_args_is_help=True
)
cli.add_typer(scenario_cli, name="scenario")


def _print_version(asked: bool) -> None:
    if asked:
        typer.echo(f"jobmatch {__version__}")
        raise typer.Exit()


@cli.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="print the version and exit"
        ),
    ] = False,
) -> None:
    # No docstring: the Typer's own help text stays the program's description.
    pass


@cli.command()
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

    from app.api.http_protocol import LimitedHttpProtocol

    overrides = {
        "max_body_bytes": max_body_bytes,
        "header_timeout_seconds": header_timeout,
        "body_timeout_seconds": body_timeout,
        "keep_alive_seconds": keep_alive,
        "max_connections": max_connections,
        "backlog": backlog,
    }
    for field, value in overrides.items():
        if value is not None:
            # Through the environment: the worker processes (--workers) read their
            # settings from it, as they read every other setting.
            os.environ[f"JOBMATCH_{field.upper()}"] = str(value)
    get_settings.cache_clear()
    settings = get_settings()
    if migrate_first is None:
        # The embedded database belongs to this process; a shared PostgreSQL is migrated
        # as an explicit deployment step.
        migrate_first = is_sqlite(settings.database_url)
    if migrate_first:
        migrate.upgrade(settings.database_url)
    uvicorn.run(
        "app.api.app:create_app_from_environment",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_config=None,
        http=LimitedHttpProtocol,
        timeout_keep_alive=settings.keep_alive_seconds,
        limit_concurrency=settings.max_connections,
        backlog=settings.backlog,
    )


#: Where `jobmatch demo` writes unless told otherwise: a file of its own, so that the demo's
#: workers and jobs never mix with those of the server's database (./jobmatch.db).
DEMO_DATABASE_URL = "sqlite:///./jobmatch-demo.db"


@cli.command()
def demo(
    pull: Annotated[bool, typer.Option(help="let each demo worker pull once")] = True,
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
    another database.
    """
    from sqlalchemy import make_url

    from app.db.engine import Database
    from app.matching.demo import DEMO_WORKERS, load_demo
    from app.matching.dispatch import pull as dispatch

    settings = get_settings()
    if is_sqlite(database_url):
        migrate.upgrade(database_url)
    database = Database(database_url, busy_timeout=settings.sqlite_busy_timeout)
    try:
        with database.transaction() as session:
            report = load_demo(session)
        shown_url = make_url(database_url).render_as_string(hide_password=True)
        typer.echo(
            f"{len(DEMO_WORKERS)} workers registered; {len(report)} jobs submitted in {shown_url}\n"
        )
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
        if pull:
            typer.echo("\ndispatch (each worker pulls once):")
            for spec in DEMO_WORKERS:
                with database.transaction() as session:
                    pulled = dispatch.pull(session, spec.name)
                    got = f"job {pulled.id}" if pulled else "nothing (204)"
                typer.echo(f"    {spec.name:<12} -> {got}")
    finally:
        database.dispose()


@cli.command()
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
        raise typer.Exit(2) from error


@cli.command()
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
        raise typer.Exit(2) from error


@cli.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def worker(ctx: typer.Context) -> None:
    """Run a worker agent: the same as `jobmatch-agent` (`jobmatch worker --help` lists
    its options)."""
    from app.agent.main import main as agent_main

    raise typer.Exit(agent_main(ctx.args))


@scenario_cli.command("run")
def scenario_run(
    file: Annotated[Path, typer.Argument(help="scenario file, one JSON object per line")],
    as_json: Annotated[
        bool, typer.Option("--json", help="one JSON object per case: {id, outcome}")
    ] = False,
) -> None:
    """Run each scenario against a fresh database; print outcomes and which matched."""
    from app.matching.gridengine.scenarios import ScenarioError, run_file

    try:
        results = run_file(file)
    except (ScenarioError, OSError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from error
    if as_json:
        for result in results:
            typer.echo(json.dumps({"id": result.id, "outcome": result.outcome}, sort_keys=True))
        return
    for result in results:
        verdict = {True: "matches", False: "DIFFERS", None: "no expected"}[result.matched]
        typer.echo(f"{result.id}: {result.title} [{verdict}]")
        typer.echo("  " + json.dumps(result.outcome, sort_keys=True))
    matched = sum(1 for r in results if r.matched)
    differ = sum(1 for r in results if r.matched is False)
    typer.echo(f"scenarios: {matched} matched, {differ} differ, {len(results)} run")
    if differ:
        raise typer.Exit(1)


@db_cli.command("upgrade")
def db_upgrade(
    revision: Annotated[str, typer.Argument(help="target revision")] = "head",
    sql: Annotated[bool, typer.Option("--sql", help="print the SQL instead of running it")] = False,
) -> None:
    """Upgrade the schema (to head by default)."""
    migrate.upgrade(get_settings().database_url, revision, sql=sql)


@db_cli.command("downgrade")
def db_downgrade(
    revision: Annotated[str, typer.Argument(help="target revision, e.g. -1 or base")],
    sql: Annotated[bool, typer.Option("--sql", help="print the SQL instead of running it")] = False,
) -> None:
    """Downgrade the schema to REVISION."""
    migrate.downgrade(get_settings().database_url, revision, sql=sql)


@db_cli.command("current")
def db_current() -> None:
    """Show the schema revision of the database and whether it is at head."""
    url = get_settings().database_url
    current = migrate.current_revisions_at(url)
    heads = migrate.head_revisions()
    state = "at head" if current == heads else f"head is {', '.join(sorted(heads))}"
    typer.echo(f"{', '.join(sorted(current)) or '(empty)'} ({state})")


@db_cli.command("check")
def db_check() -> None:
    """Check the bookkeeping invariants (exit 1 and list them when any is broken)."""
    from app.db.engine import Database
    from app.matching.invariants import violations

    database = Database(get_settings().database_url)
    try:
        with database.transaction(write=False) as session:
            problems = violations(session)
    finally:
        database.dispose()
    for problem in problems:
        typer.echo(problem, err=True)
    if problems:
        raise typer.Exit(1)
    typer.echo("ok: every job is in one state and the bookings equal what running jobs hold")


def main() -> None:
    cli(prog_name="jobmatch")


if __name__ == "__main__":
    main()
