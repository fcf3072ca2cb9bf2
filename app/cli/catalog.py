"""`jobmatch tasks list` and `jobmatch attributes list`: what jobs may ask for."""

from __future__ import annotations

from typing import Any

import typer

from app.cli.connection import OutputFormat, OutputOption, Remote, TokenOption, UrlOption
from app.cli.help import examples
from app.cli.output import Column, Row, field, print_table

tasks_cli = typer.Typer(
    help="debusine task types: what a task job may name.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
attributes_cli = typer.Typer(
    help="The Grid Engine complex: the attributes a -l request may name.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def items_of(answer: Any) -> list[Row]:
    """The items of a list answer, a page (`{"items": [...]}`) or a bare array."""
    if isinstance(answer, dict):
        return list(answer.get("items") or [])
    return list(answer or [])


def print_items(answer: Any, columns: tuple[Column, ...], remote: Remote) -> None:
    print_table(items_of(answer), columns, wide=remote.wide)


TASK_COLUMNS = (
    Column("NAME", field("name")),
    Column("VERSION", field("version")),
    Column("PLUGIN", field("plugin")),
    Column("DESCRIPTION", field("description")),
    Column("REQUIREMENTS", field("requirements"), wide_only=True),
    Column("UPDATED", field("updated_at"), wide_only=True),
)


@tasks_cli.command(
    "list",
    epilog=examples("jobmatch tasks list", "jobmatch tasks list -o json | jq '.[].name'"),
)
def list_tasks(
    url: UrlOption = "http://127.0.0.1:8000",
    token: TokenOption = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """List the registered task types and their requirements."""
    remote = Remote(url, token, output)
    with remote.client() as client:
        client.list_tasks()
    remote.show(client.last_json, lambda answer: print_items(answer, TASK_COLUMNS, remote))


ATTRIBUTE_COLUMNS = (
    Column("NAME", field("name")),
    Column("SHORTCUT", field("shortcut")),
    Column("TYPE", field("type")),
    Column("RELOP", field("relop")),
    Column("REQUESTABLE", field("requestable")),
    Column("CONSUMABLE", field("consumable")),
    Column("DEFAULT", field("default")),
    Column("URGENCY", field("urgency"), wide_only=True),
    Column("BUILTIN", field("builtin"), wide_only=True),
)


@attributes_cli.command(
    "list",
    epilog=examples(
        "jobmatch attributes list",
        "jobmatch attributes list -o json | jq '.[] | select(.consumable == \"YES\")'",
    ),
)
def list_attributes(
    url: UrlOption = "http://127.0.0.1:8000",
    token: TokenOption = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """List the complex attributes, as `qconf -sc` shows them."""
    remote = Remote(url, token, output)
    with remote.client() as client:
        client.list_attributes()
    remote.show(client.last_json, lambda answer: print_items(answer, ATTRIBUTE_COLUMNS, remote))
