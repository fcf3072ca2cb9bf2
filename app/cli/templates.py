"""`jobmatch templates put|list|show|delete`: the worker templates (issue 40), the kinds of
worker an autoscaler can create, which `jobmatch demand --templates` simulates."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.cli.connection import (
    DEFAULT_URL,
    LimitOption,
    OutputFormat,
    Remote,
    TokenOption,
    UrlOption,
    remote_command,
)
from app.cli.files import read_json_object
from app.cli.help import command_group, examples
from app.cli.output import DEFAULT_LIMIT, Column, Row, field, print_fields, print_lines

templates_cli = command_group(
    "Worker templates: the kinds of worker an autoscaler can create (admin token)."
)

NameArgument = Annotated[
    str, typer.Argument(metavar="NAME", help="the template's name", show_default=False)
]

TEMPLATE_COLUMNS = (
    Column("NAME", field("name")),
    Column("RESOURCES", field("resources")),
    Column("SLOTS", field("slots")),
    Column("INVENTORY", field("inventory")),
    Column("COST", field("cost")),
    Column("MAX", lambda row: "any" if row.get("max_count") is None else row["max_count"]),
    Column("STATE", field("state"), wide_only=True),
    Column("PROPERTIES", field("properties"), wide_only=True),
    Column("QUEUES", field("queues"), wide_only=True),
)


def print_template(template: Row) -> None:
    print_fields(
        [
            ("template", template.get("name")),
            ("resources", template.get("resources")),
            ("slots", template.get("slots")),
            ("state", template.get("state")),
            ("queues", template.get("queues")),
            ("properties", template.get("properties")),
            ("inventory", template.get("inventory")),
            ("cost", template.get("cost")),
            ("max count", "any" if template.get("max_count") is None else template["max_count"]),
        ]
    )


@remote_command(
    templates_cli,
    "put",
    "jobmatch templates put java17-box java17-box.yaml",
    'echo \'{"resources": "language: ?java; java: ?17", "slots": 4}\' | '
    "jobmatch templates put java17-box -",
)
def put_template(
    remote: Remote,
    name: NameArgument,
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            help="the template, JSON or YAML ('-': stdin): a worker body as `workers add` "
            "sends it, without a name (resources, slots, inventory, queues, properties, "
            "state), with cost and max_count",
            show_default=False,
        ),
    ],
) -> None:
    """Register or replace a worker template. It is checked as a worker registration is:
    what one refuses, this refuses, and nothing is stored."""
    remote.call_and_show(
        lambda client: client.put_template(name, read_json_object(file, "resources, slots, ...")),
        print_template,
    )


@remote_command(templates_cli, "list", "jobmatch templates list", "jobmatch templates list -o json")
def list_templates(remote: Remote, limit: LimitOption = DEFAULT_LIMIT) -> None:
    """List the worker templates by name."""
    remote.list_and_show(lambda client: client.list_templates, limit, TEMPLATE_COLUMNS)


@remote_command(templates_cli, "show", "jobmatch templates show java17-box")
def show_template(remote: Remote, name: NameArgument) -> None:
    """Show one worker template."""
    remote.call_and_show(lambda client: client.get_template(name), print_template)


@templates_cli.command("delete", epilog=examples("jobmatch templates delete java17-box"))
def delete_template(
    name: NameArgument,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
) -> None:
    """Delete a worker template (jobs that waited for its workers keep waiting)."""
    remote = Remote(url, token, OutputFormat.TABLE)
    with remote.client() as client:
        client.delete_template(name)
    print_lines([f"deleted template {name}"])
