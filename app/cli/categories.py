"""`jobmatch categories list|show`: the job categories and their fit over the workers, as
the SQL view v_category_fit has it, over HTTP."""

from __future__ import annotations

from typing import Annotated

import typer

from app.cli.connection import LimitOption, Remote, remote_command
from app.cli.help import command_group
from app.cli.output import (
    DEFAULT_LIMIT,
    Column,
    Row,
    field,
    notations,
    print_fields,
    print_lines,
    print_table,
)

categories_cli = command_group(
    "Job categories (jobs that ask for the same) and which workers fit them."
)


def request_text(row: Row) -> str:
    """What the category's jobs ask for, in their notations: `resources=...; hard=...`."""
    request = row.get("request") or {}
    # One slot is what every job asks unless it says otherwise: not worth a mention.
    return notations((k, v) for k, v in request.items() if (k, v) != ("slots", 1))


CATEGORY_COLUMNS = (
    Column("ID", field("id")),
    Column("WAITING", field("waiting")),
    Column("RUNNING", field("running")),
    Column("FITTING WORKERS", field("fitting_workers")),
    Column("REQUEST", request_text),
    Column("CREATED", field("created_at"), wide_only=True),
)

FIT_COLUMNS = (
    Column("WORKER", field("worker")),
    Column("STATE", field("state")),
    Column("FITS", field("fits")),
    Column("REASON", field("reason")),
    Column("WHY", field("message")),
)


@remote_command(
    categories_cli,
    "list",
    "jobmatch categories list",
    "jobmatch categories list -o json | jq '.items[] | select(.fitting_workers == 0)'",
)
def list_categories(remote: Remote, limit: LimitOption = DEFAULT_LIMIT) -> None:
    """List the categories: what their jobs ask for, how many wait and run, how many
    workers fit."""
    remote.list_and_show(lambda client: client.list_categories, limit, CATEGORY_COLUMNS)


def print_category(category: Row, *, wide: bool) -> None:
    print_fields(
        [
            ("category", category.get("id")),
            ("request", request_text(category)),
            ("waiting", category.get("waiting")),
            ("running", category.get("running")),
            ("fitting workers", category.get("fitting_workers")),
            ("created", category.get("created_at")),
        ]
    )
    workers = category.get("workers") or []
    if not workers:
        print_lines(["", "no worker is registered"])
        return
    typer.echo("")
    print_table(workers, FIT_COLUMNS, wide=wide)
    reasons: dict[str, int] = {}
    for worker in workers:
        if not worker.get("fits"):
            reasons[str(worker.get("reason"))] = reasons.get(str(worker.get("reason")), 0) + 1
    if reasons:
        counted = ", ".join(f"{reason} {count}" for reason, count in sorted(reasons.items()))
        print_lines([f"workers that do not fit, by reason: {counted}"])


@remote_command(
    categories_cli,
    "show",
    "jobmatch categories show 3",
    "jobmatch categories show 3 -o json | jq '.workers[] | select(.fits)'",
)
def show_category(
    remote: Remote,
    category_id: Annotated[
        int, typer.Argument(metavar="ID", min=1, help="the category's id", show_default=False)
    ],
) -> None:
    """Show one category and its fit over every worker: fits, or the reason code of the
    first failing clause and its words."""
    remote.call_and_show(
        lambda client: client.get_category(category_id),
        lambda answer: print_category(answer, wide=remote.wide),
    )
