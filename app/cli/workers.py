"""`jobmatch workers ...`: see the workers and steer their lifecycle, over HTTP."""

from __future__ import annotations

from typing import Annotated

import typer

from app.cli.connection import (
    LimitOption,
    OutputFormat,
    OutputOption,
    Remote,
    TokenOption,
    UrlOption,
    read_list,
)
from app.cli.help import examples
from app.cli.output import (
    DEFAULT_LIMIT,
    Column,
    Row,
    field,
    print_fields,
    print_table,
)
from app.client import NULL, WorkerPatch, WorkerState

workers_cli = typer.Typer(
    help="See the workers and steer them: list, show, drain, resume, delete.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

NameArgument = Annotated[
    str, typer.Argument(metavar="NAME", help="the worker's name", show_default=False)
]


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
        page = read_list(client, client.list_workers, limit)
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
    if worker.get("state_set_by") or worker.get("state_changed_at"):
        fields += [
            ("state set by", worker.get("state_set_by")),
            ("state changed", worker.get("state_changed_at")),
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


def print_state(worker: Row) -> None:
    typer.echo(f"worker {worker.get('name')}: {state(worker)}")


def set_state(remote: Remote, name: str, new_state: WorkerState, reason: str | None) -> None:
    """PATCH only the worker's state and reason: its resources, slots and the rest stay."""
    with remote.client() as client:
        client.update_worker(name, WorkerPatch(state=new_state, reason=reason or NULL))
    remote.show(client.last_json, print_state)


@workers_cli.command(
    "drain",
    epilog=examples(
        "jobmatch workers drain w1 --reason 'kernel upgrade'",
        "jobmatch workers drain w1 --reason 'disk full' -o json | jq .state_reason",
    ),
)
def drain_worker(
    name: NameArgument,
    reason: Annotated[
        str, typer.Option(help="why, for whoever reads `workers list`", show_default=False)
    ],
    url: UrlOption = "http://127.0.0.1:8000",
    token: TokenOption = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Drain a worker: it finishes the jobs it runs and gets no new one."""
    set_state(Remote(url, token, output), name, WorkerState.DRAINING, reason)


@workers_cli.command(
    "resume",
    epilog=examples("jobmatch workers resume w1", "jobmatch workers resume w1 --reason 'fixed'"),
)
def resume_worker(
    name: NameArgument,
    reason: Annotated[
        str | None,
        typer.Option(help="why, if worth saying [default: the old reason is cleared]"),
    ] = None,
    url: UrlOption = "http://127.0.0.1:8000",
    token: TokenOption = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Make a draining or disabled worker active again: it gets jobs again."""
    set_state(Remote(url, token, output), name, WorkerState.ACTIVE, reason)


@workers_cli.command(
    "delete",
    epilog=examples("jobmatch workers delete w1", "jobmatch workers delete w1 --requeue"),
)
def delete_worker(
    name: NameArgument,
    requeue: Annotated[
        bool,
        typer.Option(
            "--requeue",
            help="return the jobs it runs to the queue first (without it, a worker that "
            "runs jobs is refused: exit 1)",
        ),
    ] = False,
    url: UrlOption = "http://127.0.0.1:8000",
    token: TokenOption = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Remove a worker and its token. With -o json nothing is printed (the API answers 204
    without a body)."""
    remote = Remote(url, token, output)
    with remote.client() as client:
        client.delete_worker(name, requeue=requeue)
    if not remote.json:
        typer.echo(f"worker {name}: deleted" + (" (its jobs requeued)" if requeue else ""))
