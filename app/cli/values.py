"""`jobmatch values show global|host NAME|queue QUEUE@HOST`: the Grid Engine values of one
object and its consumables' use, over HTTP."""

from __future__ import annotations

import enum
from typing import Annotated, Any

import typer

from app.cli.connection import Remote, remote_command
from app.cli.errors import CommandError, ExitCode
from app.cli.help import command_group
from app.cli.output import Column, Row, field, print_lines, print_table
from app.client import AdminClient

values_cli = command_group(
    "Grid Engine values: complex, load and queue attribute values, consumables' use."
)


class Level(enum.StrEnum):
    """Where values are set: the cluster, a host, a queue instance."""

    GLOBAL = "global"
    HOST = "host"
    QUEUE = "queue"


VALUE_COLUMNS = (
    Column("ATTRIBUTE", field("attribute")),
    Column("COMPLEX VALUE", field("complex")),
    Column("LOAD VALUE", field("load")),
    Column("REPORTED", field("reported")),
    Column("QUEUE ATTRIBUTE", field("queue")),
    Column("CAPACITY", field("capacity")),
    Column("USED", field("used")),
    Column("MATCHING USES", field("uses")),
)

#: The answer's fields of values, and the column (and the word of MATCHING USES) of each.
_KINDS = {
    "complex_values": "complex",
    "load_values": "load",
    "reported_load_values": "reported",
    "attributes": "queue",
}


def value_rows(values: Row) -> list[Row]:
    """One row per attribute named anywhere in the answer, by name: the administrator's
    load value (LOAD VALUE) apart from the worker's report (REPORTED), and which of them
    matching sees (a reported value an administrator's hides is not among them)."""
    rows: dict[str, Row] = {}
    for key, column in _KINDS.items():
        for name, value in (values.get(key) or {}).items():
            rows.setdefault(name, {"attribute": name})[column] = value
    for name, use in (values.get("consumables") or {}).items():
        row = rows.setdefault(name, {"attribute": name})
        row["capacity"], row["used"] = use.get("capacity"), use.get("used")
    for name, fields in (values.get("matching_uses") or {}).items():
        words = [_KINDS[f] for f in fields if f in _KINDS]
        rows.setdefault(name, {"attribute": name})["uses"] = ",".join(words) or None
    return [rows[name] for name in sorted(rows)]


def read_values(client: AdminClient, level: Level, name: str | None) -> None:
    """GET the values of the object named; refuse a name that does not fit the level."""
    if level is Level.GLOBAL:
        if name is not None:
            raise CommandError("`values show global` takes no name", ExitCode.USAGE)
        client.get_global_values()
    elif name is None:
        raise CommandError(f"`values show {level}` needs a name", ExitCode.USAGE)
    elif level is Level.HOST:
        client.get_host_values(name)
    else:
        queue, at, host = name.partition("@")
        if not (queue and at and host):
            raise CommandError(f"a queue instance is QUEUE@HOST, not {name!r}", ExitCode.USAGE)
        client.get_queue_values(queue, host)


def print_values(values: Any, wide: bool) -> None:
    rows = value_rows(values)
    if rows:
        print_table(rows, VALUE_COLUMNS, wide=wide)
    else:
        print_lines(["no values set"])


@remote_command(
    values_cli,
    "show",
    "jobmatch values show global",
    "jobmatch values show host w1",
    "jobmatch values show queue all.q@w1 -o json | jq .consumables",
)
def show_values(
    remote: Remote,
    level: Annotated[Level, typer.Argument(help="global, host or queue", show_default=False)],
    name: Annotated[
        str | None,
        typer.Argument(
            metavar="[NAME]",
            help="the host, or the queue instance as QUEUE@HOST",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Show the values set on the cluster, a host or a queue instance, and what running
    jobs book of each consumable."""
    remote.call_and_show(
        lambda client: read_values(client, level, name),
        lambda answer: print_values(answer, remote.wide),
    )
