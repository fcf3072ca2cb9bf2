"""`jobmatch scenario run`: scenario files of every family (Grid Engine, Momotor, Flux,
debusine) against fresh databases, each case marked matched or not, with what differs."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli.errors import ExitCode, fail
from app.cli.help import command_group, examples

scenario_cli = command_group(
    "Scenarios of every family: Grid Engine (sge62u5-reference-v1), Momotor, Flux, debusine."
)


def case_record(result: Any, expected: Any) -> dict[str, Any]:
    """One line of `--json`: the case, its outcome, whether it matched and what differs."""
    from app.matching.scenarios.compare import differences

    differing = [] if expected is None else differences(expected, result.outcome)
    if result.matched is False and not differing:
        # The engine's SQL filter and its evaluator disagreed (sql_disagrees).
        differing = [{"path": ".sql_disagrees", "expected": None, "actual": True}]
    return {
        "id": result.id,
        "title": result.title,
        "matched": result.matched,
        "differences": differing,
        "outcome": result.outcome,
    }


def _run(
    path: Path, fresh: Callable[[], Any], position: str, progress: bool
) -> list[dict[str, Any]]:
    from app.matching.scenarios.cases import ScenarioError
    from app.matching.scenarios.run import read_scenarios, run_file

    try:
        cases = read_scenarios(path)
        if progress:
            typer.echo(f"{position} {path}: running {len(cases)} cases...", err=True)
        results = run_file(path, fresh=fresh)
    except (ScenarioError, OSError) as error:
        fail(str(error), ExitCode.USAGE)
    expected = {str(case["id"]): case.get("expected") for case in cases}
    return [case_record(result, expected.get(result.id)) for result in results]


def _print_case(record: dict[str, Any], *, outcome: bool) -> None:
    """A case's line, its outcome's JSON when ``outcome``, and where it differs."""
    verdict = {True: "matches", False: "DIFFERS", None: "no expected"}[record["matched"]]
    typer.echo(f"{record['id']}: {record['title']} [{verdict}]")
    if outcome:
        typer.echo("  " + json.dumps(record["outcome"], sort_keys=True))
    for difference in record["differences"]:
        typer.echo(
            f"  differs at {difference['path']}: expected "
            f"{json.dumps(difference['expected'])}, got {json.dumps(difference['actual'])}"
        )


def file_line(path: Path, records: list[dict[str, Any]]) -> str:
    """One file's verdict: `FILE: N cases, N agree` and, when some do not, how many
    differ and how many have no expected outcome."""
    agree = sum(1 for record in records if record["matched"] is True)
    differ = sum(1 for record in records if record["matched"] is False)
    unexpected = len(records) - agree - differ
    line = f"{path}: {len(records)} case{'' if len(records) == 1 else 's'}, {agree} agree"
    if differ:
        line += f", {differ} differ"
    if unexpected:
        line += f", {unexpected} without expected"
    return line


@scenario_cli.command(
    "run",
    epilog=examples(
        "jobmatch scenario run tests/scenarios/*/*.jsonl",
        "jobmatch scenario run tests/scenarios/sge/seed.jsonl --verbose",
        "jobmatch scenario run tests/scenarios/sge/*.jsonl --json | jq 'select(.matched|not)'",
    ),
)
def scenario_run(
    files: Annotated[list[Path], typer.Argument(help="scenario files, one JSON object per line")],
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="every case with its outcome, not only those that differ",
        ),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="one JSON object per case, every case: {id, title, matched, differences, outcome}",
        ),
    ] = False,
    progress: Annotated[
        bool | None,
        typer.Option(
            "--progress/--no-progress",
            help="say on stderr which file runs [default: when stderr is a terminal]",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run each scenario against a fresh database; say per file how many cases agree with
    their expected outcome, and show the cases that differ (exit 1 when any differs)."""
    from app.matching.scenarios.cases import fresh_sqlite_databases

    show_progress = sys.stderr.isatty() if progress is None else progress
    records: list[dict[str, Any]] = []
    # One migrated template for every file of the run: each case still starts from a
    # fresh copy of it.
    with fresh_sqlite_databases() as fresh:
        for number, path in enumerate(files, start=1):
            file_records = _run(path, fresh, f"[{number}/{len(files)}]", show_progress)
            records += file_records
            if as_json:
                for record in file_records:
                    typer.echo(json.dumps(record, sort_keys=True))
                continue
            # A person reads one line per file, then what needs a look: the cases that
            # differ (all of them, with their outcomes, with --verbose).
            typer.echo(file_line(path, file_records))
            for record in file_records:
                if verbose or record["matched"] is not True:
                    _print_case(record, outcome=verbose)
    matched = sum(1 for record in records if record["matched"])
    differ = sum(1 for record in records if record["matched"] is False)
    if not as_json:
        typer.echo(f"scenarios: {matched} matched, {differ} differ, {len(records)} run")
    if differ:
        raise typer.Exit(int(ExitCode.REFUSED))
