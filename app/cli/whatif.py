"""`jobmatch whatif FILE`: what a change set of workers and jobs would change, asked of
the server (POST /v1/whatif), which applies it in a transaction it rolls back."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli.connection import Remote, remote_command
from app.cli.files import read_json_object
from app.cli.output import Column, Row, field, print_lines, print_table, text

whatif_cli = typer.Typer(rich_markup_mode=None)

COUNT_COLUMNS = (
    Column("CATEGORY", field("category_id")),
    Column("WAITING", lambda row: _change(row, "waiting")),
    Column("RUNNABLE", lambda row: _change(row, "runnable")),
)

PULL_COLUMNS = (
    Column("WORKER", field("worker")),
    Column("FIRST PULL", lambda row: "-" if row.get("job") is None else f"job {row['job']}"),
    Column("PLACED", field("placed"), wide_only=True),
)


def _change(row: Row, name: str) -> str:
    before, after = row.get(f"{name}_before"), row.get(f"{name}_after")
    return f"{before}" if before == after else f"{before} -> {after}"


def read_change_set(path: Path) -> dict[str, Any]:
    """The change set of ``path`` (`-`: standard input), JSON or YAML."""
    return read_json_object(path, "add_workers, add_jobs, ...")


def _ids(ids: list[Any]) -> str:
    return ", ".join(str(i) for i in ids) if ids else "none"


def print_answer(answer: Row, *, wide: bool) -> None:
    """The answer for people: the jobs that change, per category, the first pulls, the
    candidates of the explained job."""
    lines = [
        f"runnable now: {_ids(answer.get('runnable_now') or [])}",
        f"no longer runnable: {_ids(answer.get('no_longer_runnable') or [])}",
    ]
    added = answer.get("added_jobs") or []
    if added:
        lines.append(
            "added jobs (provisional ids): "
            + ", ".join(
                f"#{job['index']} -> {job['id']} {job['state']}"
                + (f" ({job['failure_reason']})" if job.get("failure_reason") else "")
                for job in added
            )
        )
    if answer.get("requeued"):
        lines.append(f"requeued from removed workers: {_ids(answer['requeued'])}")
    print_lines(lines)
    categories = [
        row
        for row in answer.get("categories") or []
        if wide
        or row.get("waiting_before") != row.get("waiting_after")
        or row.get("runnable_before") != row.get("runnable_after")
    ]
    if categories:
        typer.echo("")
        print_table(categories, COUNT_COLUMNS, wide=wide)
    pulls = answer.get("first_pulls") or []
    if pulls:
        typer.echo("")
        print_table(pulls, PULL_COLUMNS, wide=wide)
    explained = answer.get("explain_job")
    if explained:
        before = [c.get("worker") for c in explained.get("before") or []]
        after = [c.get("worker") for c in explained.get("after") or []]
        typer.echo("")
        print_lines(
            [
                f"job {explained.get('job')} candidates: {text(before) or '-'} -> "
                f"{text(after) or '-'}",
                f"  gained: {text(explained.get('gained')) or '-'}; "
                f"lost: {text(explained.get('lost')) or '-'}",
            ]
        )
    typer.echo("")
    typer.echo("nothing was stored")


@remote_command(
    whatif_cli,
    "whatif",
    "jobmatch whatif changes.yaml",
    "jobmatch whatif changes.json -o json | jq .runnable_now",
    'echo \'{"drain_workers": ["w1"]}\' | jobmatch whatif -',
)
def what_if(
    remote: Remote,
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            help="the change set, JSON or YAML ('-': stdin): add_workers, change_workers, "
            "drain_workers, remove_workers, add_jobs, explain_job",
            show_default=False,
        ),
    ],
) -> None:
    """What a change set would change, without storing it (admin token): the waiting jobs
    that become runnable and those that stop, per category, the job each added or changed
    worker would pull first, and the candidates of explain_job. Ids of added jobs are
    provisional."""
    # Read inside the call, where a file that cannot be read is one line and exit 2.
    remote.call_and_show(
        lambda client: client.what_if(read_change_set(file)),
        lambda answer: print_answer(answer, wide=remote.wide),
    )
