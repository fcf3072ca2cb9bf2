"""`jobmatch hostgroups|acls|projects list|show|add|replace|delete`: Grid Engine host
groups, user access lists and projects over HTTP, as `qconf -shgrpl`/`-shgrp`/`-ahgrp`/
`-mhgrp`/`-dhgrp`, `-sul`/`-su`/`-au`/`-mu`/`-dul` and `-sprjl`/`-sprj`/`-aprj`/`-dprj`
handle them."""

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
from app.cli.help import command_group, examples
from app.cli.output import Column, field, print_lines

hostgroups_cli = command_group(
    "Grid Engine host groups: @name, hosts and sub-groups, for -q lists and quota filters "
    "(qconf -ahgrp)."
)
acls_cli = command_group(
    "Grid Engine user access lists, named @name in quota filters' users (qconf -au)."
)
projects_cli = command_group("Grid Engine projects, which jobs name with -P (qconf -aprj).")

#: The API's own page size, so that `-o json` equals its plain answer.
PAGE_LIMIT = 100

GROUP_COLUMNS = (
    Column("NAME", field("name")),
    Column("MEMBERS", lambda row: " ".join(row.get("members") or []) or "NONE"),
    Column("HOSTS", lambda row: " ".join(row.get("hosts") or []) or "NONE"),
)
ACL_COLUMNS = (
    Column("NAME", field("name")),
    Column("USERS", lambda row: ",".join(row.get("members") or []) or "NONE"),
)
PROJECT_COLUMNS = (Column("NAME", field("name")),)

NameArgument = Annotated[str, typer.Argument(help="the name", show_default=False)]
MembersArgument = Annotated[
    list[str] | None,
    typer.Argument(help="the members (none: an empty list)", show_default=False),
]


def print_group(answer: Any) -> None:
    """A host group as `qconf -shgrp` prints it, then the hosts it resolves to."""
    print_lines(
        [
            f"group_name {answer['name']}",
            f"hostlist {' '.join(answer.get('members') or []) or 'NONE'}",
            f"hosts {' '.join(answer.get('hosts') or []) or 'NONE'}",
        ]
    )


def print_acl(answer: Any) -> None:
    """An access list as `qconf -su` prints it."""
    print_lines(
        [
            f"name    {answer['name']}",
            "type    ACL",
            f"entries {','.join(answer.get('members') or []) or 'NONE'}",
        ]
    )


def print_project(answer: Any) -> None:
    print_lines([f"name {answer['name']}"])


@remote_command(hostgroups_cli, "list", "jobmatch hostgroups list")
def list_host_groups(remote: Remote, limit: LimitOption = PAGE_LIMIT) -> None:
    """List the host groups (qconf -shgrpl) with their members and hosts."""
    remote.list_and_show(lambda client: client.list_host_groups, limit, GROUP_COLUMNS)


@remote_command(hostgroups_cli, "show", "jobmatch hostgroups show @linux")
def show_host_group(remote: Remote, name: NameArgument) -> None:
    """Show a host group (qconf -shgrp NAME) and the hosts it resolves to."""
    remote.call_and_show(lambda client: client.get_host_group(name), print_group)


@remote_command(hostgroups_cli, "add", "jobmatch hostgroups add @linux h1 h2 @gpu")
def add_host_group(remote: Remote, name: NameArgument, members: MembersArgument = None) -> None:
    """Add a host group of hosts and @sub-groups (qconf -ahgrp)."""
    remote.call_and_show(
        lambda client: client.create_host_group(name, list(members or [])), print_group
    )


@remote_command(hostgroups_cli, "replace", "jobmatch hostgroups replace @linux h1 h3")
def replace_host_group(remote: Remote, name: NameArgument, members: MembersArgument = None) -> None:
    """Give a host group a new hostlist (qconf -mhgrp)."""
    remote.call_and_show(
        lambda client: client.replace_host_group(name, list(members or [])), print_group
    )


# Not `remote_command`s: the API answers 204 with no body, so there is no -o to offer.
@hostgroups_cli.command("delete", epilog=examples("jobmatch hostgroups delete @linux"))
def delete_host_group(
    name: NameArgument, url: UrlOption = DEFAULT_URL, token: TokenOption = None
) -> None:
    """Delete a host group (qconf -dhgrp NAME); refused while another group holds it."""
    with Remote(url, token, OutputFormat.TABLE).client() as client:
        client.delete_host_group(name)
    print_lines([f"deleted host group {name}"])


@remote_command(acls_cli, "list", "jobmatch acls list")
def list_access_lists(remote: Remote, limit: LimitOption = PAGE_LIMIT) -> None:
    """List the user access lists (qconf -sul) with their users."""
    remote.list_and_show(lambda client: client.list_access_lists, limit, ACL_COLUMNS)


@remote_command(acls_cli, "show", "jobmatch acls show staff")
def show_access_list(remote: Remote, name: NameArgument) -> None:
    """Show an access list (qconf -su NAME)."""
    remote.call_and_show(lambda client: client.get_access_list(name), print_acl)


@remote_command(acls_cli, "add", "jobmatch acls add staff alice bob")
def add_access_list(remote: Remote, name: NameArgument, members: MembersArgument = None) -> None:
    """Add an access list of users (qconf -au USER,... NAME)."""
    remote.call_and_show(
        lambda client: client.create_access_list(name, list(members or [])), print_acl
    )


@remote_command(acls_cli, "replace", "jobmatch acls replace staff alice carol")
def replace_access_list(
    remote: Remote, name: NameArgument, members: MembersArgument = None
) -> None:
    """Give an access list new users (qconf -mu NAME)."""
    remote.call_and_show(
        lambda client: client.replace_access_list(name, list(members or [])), print_acl
    )


@acls_cli.command("delete", epilog=examples("jobmatch acls delete staff"))
def delete_access_list(
    name: NameArgument, url: UrlOption = DEFAULT_URL, token: TokenOption = None
) -> None:
    """Delete an access list (qconf -dul NAME)."""
    with Remote(url, token, OutputFormat.TABLE).client() as client:
        client.delete_access_list(name)
    print_lines([f"deleted access list {name}"])


@remote_command(projects_cli, "list", "jobmatch projects list")
def list_projects(remote: Remote, limit: LimitOption = PAGE_LIMIT) -> None:
    """List the projects (qconf -sprjl)."""
    remote.list_and_show(lambda client: client.list_projects, limit, PROJECT_COLUMNS)


@remote_command(projects_cli, "show", "jobmatch projects show p1")
def show_project(remote: Remote, name: NameArgument) -> None:
    """Show a project (qconf -sprj NAME)."""
    remote.call_and_show(lambda client: client.get_project(name), print_project)


@remote_command(projects_cli, "add", "jobmatch projects add p1")
def add_project(remote: Remote, name: NameArgument) -> None:
    """Add a project (qconf -aprj)."""
    remote.call_and_show(lambda client: client.create_project(name), print_project)


@projects_cli.command("delete", epilog=examples("jobmatch projects delete p1"))
def delete_project(
    name: NameArgument, url: UrlOption = DEFAULT_URL, token: TokenOption = None
) -> None:
    """Delete a project (qconf -dprj NAME); jobs that named it keep its name."""
    with Remote(url, token, OutputFormat.TABLE).client() as client:
        client.delete_project(name)
    print_lines([f"deleted project {name}"])
