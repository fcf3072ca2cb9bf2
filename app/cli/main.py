"""The `jobmatch` program: its groups, --version, and the last guard against tracebacks."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer
from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError

from app import __version__
from app.cli.catalog import attributes_cli, tasks_cli
from app.cli.categories import categories_cli
from app.cli.database import db_cli
from app.cli.demand import demand_cli
from app.cli.errors import EXIT_CODES_HELP, ExitCode
from app.cli.groups import acls_cli, hostgroups_cli, projects_cli
from app.cli.help import examples
from app.cli.jobs import jobs_cli
from app.cli.local import local_cli
from app.cli.quotas import quotas_cli
from app.cli.scenarios import scenario_cli
from app.cli.shares import shares_cli
from app.cli.templates import templates_cli
from app.cli.tokens import tokens_cli
from app.cli.usage import usage_message
from app.cli.values import values_cli
from app.cli.whatif import whatif_cli
from app.cli.workers import workers_cli

#: Set to 1 to see the traceback of an unexpected error instead of its one line.
DEBUG_ENV = "JOBMATCH_DEBUG"

#: The commands that talk to a server, and those that open the database themselves; the
#: help names both lists (tests/cli/test_help.py holds them to the registered commands).
REMOTE_COMMANDS = (
    "workers",
    "jobs",
    "categories",
    "tasks",
    "attributes",
    "values",
    "quotas",
    "shares",
    "hostgroups",
    "acls",
    "projects",
    "whatif",
    "demand",
    "templates",
    "tokens",
)
LOCAL_COMMANDS = ("serve", "db", "demo", "scenario")

cli = typer.Typer(
    help="jobmatch: matchmaking for job systems.\n\n"
    f"Remote commands ({', '.join(REMOTE_COMMANDS)}) talk "
    "to a server: --url or JOBMATCH_URL (default http://127.0.0.1:8000), --token or "
    f"JOBMATCH_TOKEN. Local commands ({', '.join(LOCAL_COMMANDS)}) use "
    "JOBMATCH_DATABASE_URL; shape and requires need neither, and worker runs the agent.",
    epilog=examples(
        "jobmatch workers list --url http://127.0.0.1:8000 --token dev-admin-token",
        "jobmatch jobs explain 12 -o wide",
        "jobmatch db upgrade && jobmatch serve",
        "jobmatch COMMAND --help   # each command's options and examples",
    )
    + "\n\n"
    + EXIT_CODES_HELP,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
cli.add_typer(local_cli)
cli.add_typer(workers_cli, name="workers")
cli.add_typer(jobs_cli, name="jobs")
cli.add_typer(categories_cli, name="categories")
cli.add_typer(tasks_cli, name="tasks")
cli.add_typer(attributes_cli, name="attributes")
cli.add_typer(values_cli, name="values")
cli.add_typer(quotas_cli, name="quotas")
cli.add_typer(shares_cli, name="shares")
cli.add_typer(hostgroups_cli, name="hostgroups")
cli.add_typer(acls_cli, name="acls")
cli.add_typer(projects_cli, name="projects")
cli.add_typer(templates_cli, name="templates")
cli.add_typer(tokens_cli, name="tokens")
cli.add_typer(db_cli, name="db")
cli.add_typer(scenario_cli, name="scenario")
cli.add_typer(whatif_cli)
cli.add_typer(demand_cli)


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


def main() -> None:
    """Run the program; an error no command expected is still one line on stderr."""
    try:
        # Not standalone: click's usage errors come here, to be said in one line.
        returned = cli(prog_name="jobmatch", standalone_mode=False)
    except NoArgsIsHelpError as error:
        # `jobmatch jobs` alone: the group's help, as click prints it.
        error.show()
        sys.exit(error.exit_code)
    except UsageError as error:
        typer.echo(f"error: {usage_message(error)}", err=True)
        sys.exit(int(ExitCode.USAGE))
    except ClickException as error:
        typer.echo(f"error: {' '.join(error.format_message().split())}", err=True)
        sys.exit(error.exit_code)
    except typer.Abort:
        typer.echo("error: aborted", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        typer.echo("error: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        # The reader went away (`jobmatch jobs list | head`): what it wanted was written.
        # Standard output is pointed at /dev/null so that Python's flush at exit is quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    except Exception as error:
        if os.environ.get(DEBUG_ENV) == "1":
            raise
        typer.echo(
            f"error: {type(error).__name__}: {error} (set {DEBUG_ENV}=1 for the traceback)",
            err=True,
        )
        sys.exit(int(ExitCode.SERVER))
    # Click returns the code of a typer.Exit (or the command's value: None, success).
    sys.exit(returned if isinstance(returned, int) else 0)
