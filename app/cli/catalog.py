"""`jobmatch tasks list` and `jobmatch attributes list`: what jobs may ask for."""

from __future__ import annotations

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
from app.cli.output import Column, field

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


#: The API's own page size for these lists, so that `-o json` equals its plain answer.
CATALOG_LIMIT = 100


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
    epilog=examples("jobmatch tasks list", "jobmatch tasks list -o json | jq '.items[].name'"),
)
def list_tasks(
    url: UrlOption = "http://127.0.0.1:8000",
    token: TokenOption = None,
    output: OutputOption = OutputFormat.TABLE,
    limit: LimitOption = CATALOG_LIMIT,
) -> None:
    """List the registered task types and their requirements."""
    remote = Remote(url, token, output)
    with remote.client() as client:
        page = read_list(client, client.list_tasks, limit)
    remote.show_page(page, TASK_COLUMNS)


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
        "jobmatch attributes list -o json | jq '.items[] | select(.consumable == \"YES\")'",
    ),
)
def list_attributes(
    url: UrlOption = "http://127.0.0.1:8000",
    token: TokenOption = None,
    output: OutputOption = OutputFormat.TABLE,
    limit: LimitOption = CATALOG_LIMIT,
) -> None:
    """List the complex attributes, as `qconf -sc` shows them."""
    remote = Remote(url, token, output)
    with remote.client() as client:
        page = read_list(client, client.list_attributes, limit)
    remote.show_page(page, ATTRIBUTE_COLUMNS)
