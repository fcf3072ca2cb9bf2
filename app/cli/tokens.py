"""`jobmatch tokens list|create|revoke`: worker and submitter tokens over HTTP (admin)."""

from __future__ import annotations

import enum
import re
from typing import Annotated

import typer

from app.cli.connection import LimitOption, Remote, remote_command
from app.cli.errors import CommandError, ExitCode
from app.cli.help import command_group
from app.cli.output import DEFAULT_LIMIT, Column, Row, field, print_fields

tokens_cli = command_group(
    "Worker and submitter tokens: issue them (with an expiry), list them with their last "
    "use, revoke them."
)

TOKEN_COLUMNS = (
    Column("ID", field("id")),
    Column("ROLE", field("role")),
    Column("SUBJECT", field("subject")),
    Column("LABEL", field("label")),
    Column("EXPIRES", field("expires_at")),
    Column("LAST USED", field("last_used_at")),
    Column("REVOKED", field("revoked_at")),
    Column("CREATED", field("created_at"), wide_only=True),
)


class IssuedRole(enum.StrEnum):
    """The roles a token can be issued for (the admin token is a setting)."""

    WORKER = "worker"
    SUBMITTER = "submitter"


#: Seconds per unit of a lifetime such as ``30d``.
DURATION_UNITS = {"s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800}
_DURATION = re.compile(r"(\d{1,9})([smhdw])")


def parse_duration(text: str) -> int:
    """Seconds of a lifetime written as a number and a unit: ``90s``, ``45m``, ``12h``,
    ``30d``, ``2w``."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or int(match[1]) == 0:
        raise CommandError(
            f"--expires-in {text!r}: expected a positive number and a unit "
            "(s, m, h, d or w), e.g. 30d",
            ExitCode.USAGE,
        )
    return int(match[1]) * DURATION_UNITS[match[2]]


def print_token(token: Row) -> None:
    print_fields(
        [
            *([("token", token["token"])] if token.get("token") else []),
            ("id", token.get("id")),
            ("role", token.get("role")),
            ("subject", token.get("subject")),
            ("label", token.get("label")),
            ("created", token.get("created_at")),
            ("expires", token.get("expires_at") or "never"),
            ("last used", token.get("last_used_at") or "never"),
            ("revoked", token.get("revoked_at") or "no"),
        ]
    )


@remote_command(tokens_cli, "list", "jobmatch tokens list", "jobmatch tokens list -o json")
def list_tokens(remote: Remote, limit: LimitOption = DEFAULT_LIMIT) -> None:
    """List the issued tokens, oldest first, revoked and expired ones included, with their
    expiry and their last use (to within the server's JOBMATCH_TOKEN_LAST_USE_SECONDS)."""
    remote.list_and_show(lambda client: client.list_tokens, limit, TOKEN_COLUMNS)


@remote_command(
    tokens_cli,
    "create",
    "jobmatch tokens create submitter ci --label 'the CI pipeline'",
    "jobmatch tokens create worker w1 --expires-in 30d",
)
def create_token(
    remote: Remote,
    role: Annotated[IssuedRole, typer.Argument(help="worker or submitter", show_default=False)],
    subject: Annotated[
        str,
        typer.Argument(help="the worker or submitter name it acts for", show_default=False),
    ],
    label: Annotated[str, typer.Option(help="a note, e.g. where it is used")] = "",
    expires_in: Annotated[
        str | None,
        typer.Option(
            "--expires-in",
            metavar="DURATION",
            help="the token stops working after this long: 90s, 45m, 12h, 30d, 2w",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Issue a token; it is printed once, here, and never again."""
    # Read inside the call, where a CommandError becomes one line and an exit code.
    remote.call_and_show(
        lambda client: client.issue_token(
            role.value,
            subject,
            label=label,
            expires_in_seconds=None if expires_in is None else parse_duration(expires_in),
        ),
        print_token,
    )


@remote_command(tokens_cli, "revoke", "jobmatch tokens revoke 7")
def revoke_token(
    remote: Remote,
    token_id: Annotated[
        int, typer.Argument(metavar="ID", help="the token's id (tokens list)", show_default=False)
    ],
) -> None:
    """Revoke a token: it stops working at once, in every server process."""
    remote.call_and_show(lambda client: client.revoke_token(token_id), print_token)
