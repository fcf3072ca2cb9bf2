"""`jobmatch workers ...`: see the workers and steer their lifecycle, over HTTP."""

from __future__ import annotations

from typing import Annotated

import typer

from app.cli.connection import LimitOption, Remote, remote_command
from app.cli.errors import CommandError, ExitCode
from app.cli.help import command_group
from app.cli.output import (
    DEFAULT_LIMIT,
    Column,
    Row,
    field,
    print_fields,
    print_table,
)
from app.client import NULL, Conflict, WorkerPatch, WorkerState

workers_cli = command_group("See the workers and steer them: list, show, drain, resume, delete.")

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


@remote_command(
    workers_cli,
    "list",
    "jobmatch workers list",
    "jobmatch workers list -o wide --limit 500",
    "jobmatch workers list -o json | jq -r '.items[].name'",
)
def list_workers(remote: Remote, limit: LimitOption = DEFAULT_LIMIT) -> None:
    """List the workers: state, slots used/total, rank, last heard from."""
    remote.list_and_show(lambda client: client.list_workers, limit, WORKER_COLUMNS)


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


@remote_command(
    workers_cli,
    "show",
    "jobmatch workers show w1",
    "jobmatch workers show w1 -o json | jq .free",
)
def show_worker(remote: Remote, name: NameArgument) -> None:
    """Show one worker: its description, slots, free inventory and queue instances."""
    remote.call_and_show(
        lambda client: client.get_worker(name),
        lambda worker: print_worker(worker, wide=remote.wide),
    )


def print_state(worker: Row) -> None:
    typer.echo(f"worker {worker.get('name')}: {state(worker)}")


def set_state(remote: Remote, name: str, new_state: WorkerState, reason: str | None) -> None:
    """PATCH only the worker's state and reason: its resources, slots and the rest stay."""
    patch = WorkerPatch(state=new_state, reason=reason or NULL)
    remote.call_and_show(lambda client: client.update_worker(name, patch), print_state)


@remote_command(
    workers_cli,
    "drain",
    "jobmatch workers drain w1 --reason 'kernel upgrade'",
    "jobmatch workers drain w1 --reason 'disk full' -o json | jq .state_reason",
)
def drain_worker(
    remote: Remote,
    name: NameArgument,
    reason: Annotated[
        str, typer.Option(help="why, for whoever reads `workers list`", show_default=False)
    ],
) -> None:
    """Drain a worker: it finishes the jobs it runs and gets no new one."""
    set_state(remote, name, WorkerState.DRAINING, reason)


@remote_command(
    workers_cli,
    "resume",
    "jobmatch workers resume w1",
    "jobmatch workers resume w1 --reason 'fixed'",
)
def resume_worker(
    remote: Remote,
    name: NameArgument,
    reason: Annotated[
        str | None,
        typer.Option(help="why, if worth saying [default: the old reason is cleared]"),
    ] = None,
) -> None:
    """Make a draining or disabled worker active again: it gets jobs again."""
    set_state(remote, name, WorkerState.ACTIVE, reason)


def requeue_hint(error: Conflict, name: str) -> str:
    """The 409 of deleting a worker that runs jobs, with what to type instead of the
    API's `requeue=true`: the server's reason (which jobs it runs), then the options."""
    reason = (error.detail or "the worker runs jobs").split(";")[0]
    return (
        f"{error.status} {error.title}: {reason}; drain it (jobmatch workers drain {name} "
        f"--reason ...) and wait for them to end, or return them to the queue with "
        f"jobmatch workers delete {name} --requeue"
    )


@remote_command(
    workers_cli,
    "delete",
    "jobmatch workers delete w1",
    "jobmatch workers delete w1 --requeue",
)
def delete_worker(
    remote: Remote,
    name: NameArgument,
    requeue: Annotated[
        bool,
        typer.Option(
            "--requeue",
            help="return the jobs it runs to the queue first (without it, a worker that "
            "runs jobs is refused: exit 1)",
        ),
    ] = False,
) -> None:
    """Remove a worker and its token. With -o json nothing is printed (the API answers 204
    without a body)."""
    with remote.client() as client:
        try:
            client.delete_worker(name, requeue=requeue)
        except Conflict as error:
            if requeue:
                raise
            raise CommandError(requeue_hint(error, name), ExitCode.REFUSED) from None
    if not remote.json:
        typer.echo(f"worker {name}: deleted" + (" (its jobs requeued)" if requeue else ""))
