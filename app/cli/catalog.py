"""`jobmatch tasks list` and `jobmatch attributes list`: what jobs may ask for."""

from __future__ import annotations

from app.cli.connection import LimitOption, Remote, remote_command
from app.cli.help import command_group
from app.cli.output import Column, field

tasks_cli = command_group("debusine task types: what a task job may name.")
attributes_cli = command_group("The Grid Engine complex: the attributes a -l request may name.")


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


@remote_command(
    tasks_cli, "list", "jobmatch tasks list", "jobmatch tasks list -o json | jq '.items[].name'"
)
def list_tasks(remote: Remote, limit: LimitOption = CATALOG_LIMIT) -> None:
    """List the registered task types and their requirements."""
    remote.list_and_show(lambda client: client.list_tasks, limit, TASK_COLUMNS)


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


@remote_command(
    attributes_cli,
    "list",
    "jobmatch attributes list",
    "jobmatch attributes list -o json | jq '.items[] | select(.consumable == \"YES\")'",
)
def list_attributes(remote: Remote, limit: LimitOption = CATALOG_LIMIT) -> None:
    """List the complex attributes, as `qconf -sc` shows them."""
    remote.list_and_show(lambda client: client.list_attributes, limit, ATTRIBUTE_COLUMNS)
