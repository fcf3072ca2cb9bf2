"""The options every remote command shares (--url, --token, -o), the client they make, and
`remote_command`, which gives a command those options and hands it one `Remote`.

Remote commands speak HTTP through app.client only: an import-linter contract in
pyproject.toml keeps them (and this module) away from the database and the server code.
"""

from __future__ import annotations

import enum
import functools
import inspect
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any

import stamina.instrumentation
import typer

from app.cli.errors import ExitCode, fail, reported
from app.cli.help import examples
from app.cli.output import Column, Row, collect_pages, more_hint, print_json, print_table
from app.client import AdminClient, RetryPolicy, Timeouts, server_url_mistake

DEFAULT_URL = "http://127.0.0.1:8000"

#: A person waits at the terminal: a few quick retries of a refused connection or a 503,
#: then one clear line, instead of the library's minute of patient backoff.
CLI_RETRY = RetryPolicy(attempts=3, timeout=15.0, wait_initial=0.2, wait_max=1.0, wait_jitter=0.2)
CLI_TIMEOUTS = Timeouts(connect=5.0, read=60.0, write=30.0, pool=5.0)


class OutputFormat(enum.StrEnum):
    """How a command prints what the API answered."""

    TABLE = "table"
    WIDE = "wide"
    JSON = "json"


UrlOption = Annotated[
    str,
    typer.Option(
        "--url",
        metavar="URL",
        envvar="JOBMATCH_URL",
        help="the jobmatch server",
        show_envvar=True,
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        metavar="TOKEN",
        envvar="JOBMATCH_TOKEN",
        help="bearer token: the admin token, or a submitter token for its own jobs",
        show_envvar=True,
        show_default=False,
    ),
]
OutputOption = Annotated[
    OutputFormat,
    typer.Option(
        "--output",
        "-o",
        help="table for people, wide for more columns, json for exactly what the API returned",
        case_sensitive=False,
    ),
]
LimitOption = Annotated[
    int,
    typer.Option("--limit", min=1, help="at most this many items (pages are followed up to it)"),
]


@dataclass(frozen=True)
class Remote:
    """Where and as whom a remote command talks, and how it prints."""

    url: str
    token: str | None
    output: OutputFormat = OutputFormat.TABLE

    @property
    def wide(self) -> bool:
        return self.output is OutputFormat.WIDE

    @property
    def json(self) -> bool:
        return self.output is OutputFormat.JSON

    @contextmanager
    def client(self) -> Iterator[AdminClient]:
        """An API client for the command's calls; its failures become one line and an exit
        code. The admin client has every method; the server decides what the token may do."""
        # A retry is the program's business: no log line about it between the user's lines.
        stamina.instrumentation.set_on_retry_hooks([])
        mistake = server_url_mistake(self.url)
        if mistake is not None:
            fail(f"the server URL {self.url!r} (--url, JOBMATCH_URL) {mistake}", ExitCode.USAGE)
        with reported(token_given=bool(self.token)):
            client = AdminClient(self.url, self.token, timeouts=CLI_TIMEOUTS, retry=CLI_RETRY)
            try:
                yield client
            finally:
                client.close()

    def show(self, answer: Any, for_people: Callable[[Any], None]) -> None:
        """Print one answer: its JSON with `-o json`, else as ``for_people`` shows it."""
        if self.json:
            print_json(answer)
        else:
            for_people(answer)

    def call_and_show(
        self, call: Callable[[AdminClient], object], for_people: Callable[[Any], None]
    ) -> None:
        """Make one API call, then print the JSON the server answered (see `show`)."""
        with self.client() as client:
            call(client)
        self.show(client.last_json, for_people)

    def list_and_show(
        self,
        list_method: Callable[[AdminClient], Callable[..., object]],
        limit: int,
        columns: Sequence[Column],
    ) -> None:
        """Read up to ``limit`` items of a paged list (``list_method`` picks the client's
        method) and print them (see `show_page`)."""
        with self.client() as client:
            page = read_list(client, list_method(client), limit)
        self.show_page(page, columns)

    def show_page(self, page: dict[str, Any], columns: Sequence[Column]) -> None:
        """Print a list: its page's JSON, or a table (and, on stderr, that more follow)."""
        if self.json:
            print_json(page)
            return
        print_table(page.get("items", []), columns, wide=self.wide)
        hint = more_hint(page)
        if hint:
            typer.echo(hint, err=True)


def read_list(
    client: AdminClient,
    list_method: Callable[..., object],
    limit: int,
    keep: Callable[[Row], bool] | None = None,
    **filters: Any,
) -> dict[str, Any]:
    """Up to ``limit`` items of a paged list, read with ``list_method`` of ``client`` (a
    bound method taking ``limit`` and ``offset``), as the server sent them."""

    def fetch(size: int, offset: int) -> Any:
        list_method(limit=size, offset=offset, **filters)
        return client.last_json

    return collect_pages(fetch, limit, keep)


#: The parameters `remote_command` adds, in the order --help lists them.
REMOTE_PARAMETERS = (
    inspect.Parameter(
        "url", inspect.Parameter.KEYWORD_ONLY, default=DEFAULT_URL, annotation=UrlOption
    ),
    inspect.Parameter(
        "token", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=TokenOption
    ),
    inspect.Parameter(
        "output",
        inspect.Parameter.KEYWORD_ONLY,
        default=OutputFormat.TABLE,
        annotation=OutputOption,
    ),
)

RemoteFunction = Callable[..., None]


def remote_command(
    group: typer.Typer, name: str, *example_lines: str
) -> Callable[[RemoteFunction], RemoteFunction]:
    """Register a function as the command ``name`` of ``group``, with --url, --token and -o
    added to its own parameters (before --limit, where it has one, as --help always listed
    them); the function takes them as its first parameter, one ``remote: Remote``.

    Every remote command needs the same three options; written once here, a command's
    signature says only what is its own.
    """

    def register(function: RemoteFunction) -> RemoteFunction:
        own = [
            parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for parameter in inspect.signature(function, eval_str=True).parameters.values()
            if parameter.name != "remote"
        ]
        paging = [parameter for parameter in own if parameter.name == "limit"]
        parameters = [
            *(parameter for parameter in own if parameter.name != "limit"),
            *REMOTE_PARAMETERS,
            *paging,
        ]

        @functools.wraps(function)
        def command(*, url: str, token: str | None, output: OutputFormat, **arguments: Any) -> None:
            function(Remote(url, token, output), **arguments)

        # Typer reads the parameters from the signature and the annotations: both say the
        # command's own parameters and the three shared ones, already evaluated.
        command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in parameters}
        group.command(name, epilog=examples(*example_lines))(command)
        return function

    return register
