"""`jobmatch shares list|weight|group`: fair share between submitters and groups of
submitters over HTTP (docs/ordering.md): each submitter's weight, group, share and
decayed usage, each group's, and their weights."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from app.cli.connection import Remote, remote_command
from app.cli.help import command_group
from app.cli.output import Column, field, print_lines, print_table

shares_cli = command_group(
    "Fair share: each submitter's usage against its share, and the weights (docs/ordering.md)."
)


def _percent(name: str) -> Column:
    return Column(name.upper().replace("_", " "), lambda row: f"{100 * float(row[name]):.1f}%")


def _group(row: Any) -> str:
    return str(row.get("group") or "-")


STANDING_COLUMNS = (
    Column("SUBMITTER", field("submitter")),
    Column("GROUP", _group),
    Column("WEIGHT", lambda row: f"{float(row['weight']):g}"),
    _percent("share"),
    Column("USAGE", lambda row: f"{float(row['usage']):.1f}"),
    _percent("usage_fraction"),
    Column("BELOW SHARE", lambda row: "yes" if row["below_share"] else "no"),
)
GROUP_COLUMNS = (
    # A submitter without a group is a group of its own: named by it, in parentheses.
    Column("GROUP", lambda row: row["group"] or f"({row['members'][0]})"),
    Column("MEMBERS", lambda row: ",".join(row["members"]) or "-"),
    *STANDING_COLUMNS[2:],
)


def print_shares(answer: Any) -> None:
    """The policy, then one line per submitter, furthest below its share first."""
    state = "on" if answer["fair_share"] else "off"
    print_lines(
        [
            f"ordering: {answer['ordering']} (fair share {state}); "
            f"usage in slot-seconds, half-life {float(answer['halflife_seconds']):g} s",
        ]
    )
    print_table(answer["submitters"], STANDING_COLUMNS, wide=False)
    if any(group["group"] for group in answer.get("groups", [])):
        print_lines(["", "groups (a submitter without one is a group of its own):"])
        print_table(answer["groups"], GROUP_COLUMNS, wide=False)


@remote_command(shares_cli, "list", "jobmatch shares list", "jobmatch shares list -o json")
def list_shares(remote: Remote) -> None:
    """Show every submitter's usage (decayed to now) against its share."""
    remote.call_and_show(lambda client: client.list_shares(), print_shares)


@remote_command(
    shares_cli,
    "weight",
    "jobmatch shares weight alice 2",
    "jobmatch shares weight alice 1 --group course-a",
)
def set_weight(
    remote: Remote,
    submitter: Annotated[str, typer.Argument(help="the submitter", show_default=False)],
    weight: Annotated[float, typer.Argument(help="its weight (1 by default)", show_default=False)],
    group: Annotated[
        str | None,
        typer.Option("--group", help="put it in this group (made if new)", show_default=False),
    ] = None,
    no_group: Annotated[bool, typer.Option("--no-group", help="take it out of its group")] = False,
) -> None:
    """Give a submitter a weight: its share is its weight over every submitter's; and,
    with --group or --no-group, its group (without either it stays in its group)."""
    remote.call_and_show(
        lambda client: client.set_share_weight(submitter, weight, group, no_group),
        lambda answer: print_table([answer], STANDING_COLUMNS, wide=False),
    )


@remote_command(shares_cli, "group", "jobmatch shares group course-a 2")
def set_group_weight(
    remote: Remote,
    name: Annotated[str, typer.Argument(help="the group", show_default=False)],
    weight: Annotated[float, typer.Argument(help="its weight (1 by default)", show_default=False)],
) -> None:
    """Give a group of submitters a weight (the group is made if new): its share is its
    weight over every group's, a submitter without a group counting as one."""
    remote.call_and_show(
        lambda client: client.set_group_weight(name, weight),
        lambda answer: print_table([answer], GROUP_COLUMNS, wide=False),
    )
