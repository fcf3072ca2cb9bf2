"""`jobmatch quotas list|show|add|replace|delete`: Grid Engine resource quota sets over HTTP,
as `qconf -srqsl`, `-srqs`, `-Arqs`, `-Mrqs` and `-drqs` handle them."""

from __future__ import annotations

from typing import Annotated, Any

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
from app.cli.errors import CommandError, ExitCode
from app.cli.files import read_file_or_stdin
from app.cli.help import command_group, examples
from app.cli.output import Column, field, print_lines, print_table

quotas_cli = command_group(
    "Grid Engine resource quota sets: limits per user, queue, host or PE (qconf -arqs)."
)

#: The API's own page size, so that `-o json` equals its plain answer.
QUOTA_LIMIT = 100

SET_COLUMNS = (
    Column("NAME", field("name")),
    Column("ENABLED", field("enabled")),
    Column("RULES", lambda row: str(len(row.get("rules") or []))),
    Column("DESCRIPTION", field("description")),
)
USAGE_COLUMNS = (
    Column("RULE", field("rule")),
    Column("KEY", field("key")),
    Column("ATTRIBUTE", field("attribute")),
    Column("USED", field("used")),
    Column("LIMIT", field("limit")),
)

NameArgument = Annotated[str, typer.Argument(help="the set's name", show_default=False)]
FileArgument = Annotated[
    str,
    typer.Argument(
        metavar="FILE", help="the set in qconf -srqs text form; - reads stdin", show_default=False
    ),
]


def _read_text(path: str) -> str:
    try:
        return read_file_or_stdin(path)
    except OSError as error:
        raise CommandError(f"cannot read {path}: {error.strerror}", ExitCode.USAGE) from None
    except UnicodeDecodeError:
        raise CommandError(f"cannot read {path}: not UTF-8 text", ExitCode.USAGE) from None


def print_set(answer: Any) -> None:
    """The set as `qconf -srqs` prints it, then what running jobs hold of each limit."""
    print_lines(str(answer["text"]).rstrip("\n").splitlines())
    usage = answer.get("usage") or []
    if usage:
        print_lines([""])
        print_table(usage, USAGE_COLUMNS, wide=False)


@remote_command(quotas_cli, "list", "jobmatch quotas list")
def list_quota_sets(remote: Remote, limit: LimitOption = QUOTA_LIMIT) -> None:
    """List the resource quota sets (qconf -srqsl)."""
    remote.list_and_show(lambda client: client.list_quota_sets, limit, SET_COLUMNS)


@remote_command(
    quotas_cli, "show", "jobmatch quotas show per_user", "jobmatch quotas show per_user -o json"
)
def show_quota_set(remote: Remote, name: NameArgument) -> None:
    """Show a set (qconf -srqs NAME) and its usage per rule and key (as qquota does)."""
    remote.call_and_show(lambda client: client.get_quota_set(name), print_set)


@remote_command(
    quotas_cli,
    "add",
    "jobmatch quotas add per_user.rqs",
    "printf 'name per_user\\nenabled TRUE\\nlimit users {*} to slots=4\\n' | jobmatch quotas add -",
)
def add_quota_set(remote: Remote, path: FileArgument) -> None:
    """Add a set from a file in qconf -srqs form (qconf -Arqs FILE)."""
    # Read inside the call: a file that cannot be read is one line and exit 2.
    remote.call_and_show(lambda client: client.create_quota_set(_read_text(path)), print_set)


@remote_command(quotas_cli, "replace", "jobmatch quotas replace per_user per_user.rqs")
def replace_quota_set(remote: Remote, name: NameArgument, path: FileArgument) -> None:
    """Replace a set's definition from a file (qconf -Mrqs FILE NAME)."""
    remote.call_and_show(lambda client: client.replace_quota_set(name, _read_text(path)), print_set)


# Not a `remote_command`: the API answers 204 with no body, so there is no -o to offer.
@quotas_cli.command("delete", epilog=examples("jobmatch quotas delete per_user"))
def delete_quota_set(
    name: NameArgument,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
) -> None:
    """Delete a set and its books (qconf -drqs NAME)."""
    remote = Remote(url, token, OutputFormat.TABLE)
    with remote.client() as client:
        client.delete_quota_set(name)
    print_lines([f"deleted resource quota set {name}"])
