"""`jobmatch demand`: what the waiting jobs need (GET /v1/demand, issue 40): the totals by
answer, each category with its count, oldest age, answer and reason, and with templates
the suggested new workers."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from app.cli.categories import request_text
from app.cli.connection import LimitOption, Remote, read_list, remote_command
from app.cli.output import DEFAULT_LIMIT, Column, Row, field, more_hint, print_lines, print_table
from app.wire.demand import ANSWERS

demand_cli = typer.Typer(rich_markup_mode=None)


def age(seconds: Any) -> str:
    """Seconds as people read an age: 45s, 12m, 3h, 2d."""
    if not isinstance(seconds, int | float):
        return "-"
    for size, unit in ((86_400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


CATEGORY_COLUMNS = (
    Column("CATEGORY", field("category_id")),
    Column("WAITING", field("waiting")),
    Column("OLDEST", lambda row: age(row.get("oldest_age"))),
    Column("ANSWER", field("answer")),
    Column("REASON", lambda row: "; ".join(row.get("reasons") or [])),
    Column("TEMPLATE", field("template"), wide_only=True),
    Column("NEED", field("need"), wide_only=True),
    Column("REQUEST", lambda row: request_text(row), wide_only=True),
)

MIX_COLUMNS = (
    Column("TEMPLATE", field("template")),
    Column("NEW WORKERS", field("workers")),
    Column("STARTS JOBS", field("jobs")),
    Column("CATEGORIES", field("categories")),
)


def _totals(page: Row) -> str:
    jobs = page.get("jobs") or {}
    counted = ", ".join(f"{answer} {jobs.get(answer, 0)}" for answer in ANSWERS)
    return f"waiting jobs: {sum(jobs.values())} ({counted}) in {page.get('categories')} categories"


def print_suggestion(suggestion: Row, *, wide: bool) -> None:
    typer.echo("")
    if not suggestion.get("mix"):
        print_lines(["suggested new workers: none"])
    else:
        print_lines(
            [
                f"suggested new workers: {suggestion.get('workers')} "
                f"(cost {suggestion.get('cost')}), starting {suggestion.get('starts')} jobs"
            ]
        )
        print_table(suggestion["mix"], MIX_COLUMNS, wide=wide)
    unrunnable = suggestion.get("unrunnable") or []
    if unrunnable:
        print_lines(
            [
                "no template runs: "
                + ", ".join(
                    f"category {u['category_id']} ({u['jobs']} jobs"
                    + (", max_count used up)" if u.get("beyond_limits") else ")")
                    for u in unrunnable
                )
            ]
        )


def print_demand(page: Row, *, wide: bool) -> None:
    print_lines([_totals(page)])
    if page.get("items"):
        typer.echo("")
        print_table(page["items"], CATEGORY_COLUMNS, wide=wide)
    hint = more_hint(page)
    if hint:
        typer.echo(hint, err=True)
    if page.get("suggestion") is not None:
        print_suggestion(page["suggestion"], wide=wide)


@remote_command(
    demand_cli,
    "demand",
    "jobmatch demand",
    "jobmatch demand --templates",
    "jobmatch demand --template java17-box --template node-8core -o wide",
    "jobmatch demand -o json | jq '.items[] | select(.answer == \"never\")'",
)
def demand(
    remote: Remote,
    every_template: Annotated[
        bool,
        typer.Option("--templates", help="simulate every worker template and suggest new workers"),
    ] = False,
    template: Annotated[
        list[str] | None,
        typer.Option(
            "--template",
            metavar="NAME",
            help="simulate this template (repeat for several)",
            show_default=False,
        ),
    ] = None,
    limit: LimitOption = DEFAULT_LIMIT,
) -> None:
    """What the waiting jobs need (admin token): per category how many wait, the oldest's
    age, and why: never (no registered worker could run them), capacity (fitting workers
    are busy), policy (a quota or a limit holds them) or ready. With --templates (or
    --template) the new workers of each template that would start them, as a suggested mix
    (simulated by the server, nothing stored)."""
    with remote.client() as client:

        def one_page(*, limit: int, offset: int) -> object:
            return client.demand(
                template, every_template=every_template, limit=limit, offset=offset
            )

        page = read_list(client, one_page, limit)
    if remote.json:
        remote.show(page, lambda _: None)
    else:
        print_demand(page, wide=remote.wide)
