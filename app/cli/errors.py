"""Exit codes scripts can rely on, and every failure as one line on stderr.

The codes are documented in `jobmatch --help` (its epilog is :data:`EXIT_CODES_HELP`) and
in docs/cli.md; tests/cli/test_errors.py holds the commands to them.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer

from app.client import ApiError, ClientError, Forbidden, ServerUnreachable, Unauthorized
from app.client.errors import ServerError


class ExitCode(enum.IntEnum):
    """What `jobmatch` exits with."""

    OK = 0
    #: The API refused the request (a 4xx problem: not found, conflict, invalid field...),
    #: or a local check found problems (a scenario differs, the books disagree).
    REFUSED = 1
    #: The command line itself is wrong: an unknown option, a missing argument, a file
    #: that cannot be read (click's own code for usage errors).
    USAGE = 2
    #: No answer: the server (or, for local commands, the database) cannot be reached.
    UNREACHABLE = 3
    #: The token was refused: missing or unknown (401) or not allowed to do this (403).
    AUTH = 4
    #: The server failed (5xx) or answered something this program does not understand.
    SERVER = 5
    #: `jobs output --follow`: the job it followed ended failed (or its worker lost it
    #: for good).
    JOB_FAILED = 6
    #: `jobs output --follow`: the job it followed was cancelled.
    JOB_CANCELLED = 7


EXIT_CODES_HELP = """\b
Exit codes:
  0  ok
  1  the API refused the request (4xx: not found, conflict, invalid input),
     or a local check found problems (a scenario differs, db check)
  2  usage error (unknown option, missing argument, unreadable file)
  3  cannot reach the server (or, for local commands, the database)
  4  the token was refused (401 unknown or missing, 403 not allowed)
  5  the server failed (5xx) or answered something unexpected
  6  jobs output --follow: the job failed (0: it finished)
  7  jobs output --follow: the job was cancelled

Errors are one line on stderr, starting with "error:". docs/cli.md has more."""


class CommandError(Exception):
    """A command cannot go on; ``message`` says why in one line, ``code`` is the exit code."""

    def __init__(self, message: str, code: ExitCode) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def fail(message: str, code: ExitCode) -> NoReturn:
    """Print ``error: message`` on stderr and exit with ``code``."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(int(code))


def describe_client_error(error: ClientError, *, token_given: bool) -> tuple[str, ExitCode]:
    """The line and the exit code of a failure of the HTTP client."""
    if isinstance(error, ServerUnreachable):
        return f"cannot reach the jobmatch server at {error.url} ({error.reason})", (
            ExitCode.UNREACHABLE
        )
    if isinstance(error, Unauthorized):
        hint = "the token was refused" if token_given else "no token given"
        return (
            f"{hint} ({_api_line(error)}); pass --token or set JOBMATCH_TOKEN",
            ExitCode.AUTH,
        )
    if isinstance(error, Forbidden):
        return f"the token may not do this ({_api_line(error)})", ExitCode.AUTH
    if isinstance(error, ServerError):
        return f"the server failed: {_api_line(error)}", ExitCode.SERVER
    if isinstance(error, ApiError):
        return _api_line(error), ExitCode.REFUSED
    return str(error), ExitCode.SERVER


def _api_line(error: ApiError) -> str:
    """`404 Not Found: no worker named 'x'`, with the first field error of a 422 (its
    notation, position and expectation) on the same line."""
    line = f"{error.status} {error.title}"
    if error.detail:
        line += f": {error.detail}"
    for field in error.errors[:1]:
        where = f"{field.field}: " if field.field else ""
        if field.message and field.message not in line:
            line += f" ({where}{field.message})"
    return " ".join(line.split())


@contextmanager
def reported(*, token_given: bool) -> Iterator[None]:
    """Turn the client's errors raised inside into one line and an exit code."""
    try:
        yield
    except ClientError as error:
        message, code = describe_client_error(error, token_given=token_given)
        fail(message, code)
    except CommandError as error:
        fail(error.message, error.code)
