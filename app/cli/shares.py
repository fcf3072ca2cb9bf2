"""`jobmatch shares list|weight`: fair share between submitters over HTTP
(docs/ordering.md): each submitter's weight, share and decayed usage, and its weight."""

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


STANDING_COLUMNS = (
    Column("SUBMITTER", field("submitter")),
    Column("WEIGHT", lambda row: f"{float(row['weight']):g}"),
    _percent("share"),
    Column("USAGE", lambda row: f"{float(row['usage']):.1f}"),
    _percent("usage_fraction"),
    Column("BELOW SHARE", lambda row: "yes" if row["below_share"] else "no"),
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


@remote_command(shares_cli, "list", "jobmatch shares list", "jobmatch shares list -o json")
def list_shares(remote: Remote) -> None:
    """Show every submitter's usage (decayed to now) against its share."""
    remote.call_and_show(lambda client: client.list_shares(), print_shares)


@remote_command(shares_cli, "weight", "jobmatch shares weight alice 2")
def set_weight(
    remote: Remote,
    submitter: Annotated[str, typer.Argument(help="the submitter", show_default=False)],
    weight: Annotated[float, typer.Argument(help="its weight (1 by default)", show_default=False)],
) -> None:
    """Give a submitter a weight: its share is its weight over every submitter's."""
    remote.call_and_show(
        lambda client: client.set_share_weight(submitter, weight),
        lambda answer: print_table([answer], STANDING_COLUMNS, wide=False),
    )
