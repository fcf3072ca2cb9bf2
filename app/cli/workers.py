"""`jobmatch workers ...`: see the workers and steer their lifecycle, over HTTP."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from app.cli.connection import (
    LimitOption,
    OutputFormat,
    OutputOption,
    Remote,
    TokenOption,
    UrlOption,
)
from app.cli.help import examples
from app.cli.output import (
    DEFAULT_LIMIT,
    Column,
    Row,
    collect_pages,
    field,
    print_fields,
    print_table,
)

workers_cli = typer.Typer(
    help="See the workers and steer them: list, show, drain, resume, delete.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

NameArgument = Annotated[str, typer.Argument(help="the worker's name", show_default=False)]


def slots(row: Row) -> str:
    """Used and total slots over the worker's queue instances, e.g. `1/2`."""
    queues = row.get("queues") or []
    used = sum(int(q.get("used_slots", 0)) for q in queues)
    total = sum(int(q.get("slots", 0)) for q in queues)
    return f"{used}/{total}"


def free_inventory(row: Row) -> str:
    free = row.get("free") or {}
    return ", ".join(f"{kind}={count}" for kind, count in sorted(free.items())) or "-"


def state(row: Row) -> str:
    """The state, with the reason a person gave for it when the server reports one."""
    reason = row.get("state_reason") or row.get("reason")
    return f"{row.get('state')} ({reason})" if reason else str(row.get("state"))


WORKER_COLUMNS = (
    Column("NAME", field("name")),
    Column("STATE", state),
    Column("SLOTS", slots),
    Column("RANK", field("rank")),
    Column("LAST SEEN", field("last_seen")),
    Column("RESOURCES", field("resources"), wide_only=True),
    Column("PROPERTIES", field("properties"), wide_only=True),
    Column("FREE", free_inventory, wide_only=True),
    Column("GENERATION", field("generation"), wide_only=True),
)


@workers_cli.command(
    "list",
    epilog=examples(
        "jobmatch workers list",
        "jobmatch workers list -o wide --limit 500",
        "jobmatch workers list -o json | jq -r '.items[].name'",
    ),
)
def list_workers(
    url: UrlOption = "http://127.0.0.1:8000",
    token: TokenOption = None,
    output: OutputOption = OutputFormat.TABLE,
    limit: LimitOption = DEFAULT_LIMIT,
) -> None:
    """List the workers: state, slots used/total, rank, last heard from."""
    remote = Remote(url, token, output)
    with remote.client() as client:

        def fetch(size: int, offset: int) -> Any:
            client.list_workers(limit=size, offset=offset)
            return client.last_json

        page = collect_pages(fetch, limit)
    remote.show_page(page, WORKER_COLUMNS)


def print_worker(worker: Row, *, wide: bool) -> None:
    """One worker as `name: value` lines, then its queue instances."""
    fields = [
        ("name", worker.get("name")),
        ("state", state(worker)),
        ("slots used/total", slots(worker)),
        ("rank", worker.get("rank")),
        ("resources", worker.get("resources")),
        ("properties", worker.get("properties")),
        ("inventory", worker.get("inventory")),
        ("free", free_inventory(worker)),
        ("last seen", worker.get("last_seen")),
    ]
    if wide:
        fields += [
            ("generation", worker.get("generation")),
            ("created", worker.get("created_at")),
            ("updated", worker.get("updated_at")),
        ]
    print_fields(fields)
    queues = worker.get("queues") or []
    if queues:
        typer.echo("")
        print_table(
            queues,
            (
                Column("QUEUE", field("queue")),
                Column("SLOTS", field("slots")),
                Column("USED", field("used_slots")),
            ),
            wide=wide,
        )


@workers_cli.command(
    "show",
    epilog=examples("jobmatch workers show w1", "jobmatch workers show w1 -o json | jq .free"),
)
def show_worker(
    name: NameArgument,
    url: UrlOption = "http://127.0.0.1:8000",
    token: TokenOption = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Show one worker: its description, slots, free inventory and queue instances."""
    remote = Remote(url, token, output)
    with remote.client() as client:
        client.get_worker(name)
    remote.show(client.last_json, lambda worker: print_worker(worker, wide=remote.wide))
