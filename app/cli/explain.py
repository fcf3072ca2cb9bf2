"""`jobmatch jobs explain` for people: one row per worker, then what blocks the job."""

from __future__ import annotations

from typing import Any

import typer

from app.cli.output import Column, Row, field, print_lines, print_table, text


def _first_clause(row: Row) -> Row:
    clauses = row.get("clauses") or []
    return clauses[0] if clauses else {}


def reason(row: Row) -> str:
    """The misfit code of the first failing clause (the code v_category_fit shows)."""
    return str(row.get("misfit_reason") or _first_clause(row).get("reason") or "-")


def why(row: Row) -> str:
    """The first failing clause in words, or that the worker fits."""
    clause = _first_clause(row)
    if clause:
        return str(clause.get("message") or clause.get("reason"))
    return "fits" if row.get("eligible") else "-"


def every_clause(row: Row) -> str:
    return (
        "; ".join(f"{c.get('reason')}: {c.get('message')}" for c in row.get("clauses") or []) or "-"
    )


def explanation_columns(rows: list[Row]) -> tuple[Column, ...]:
    """The table's columns; `CAN RUN NOW` only when the server reports the dynamic fit."""
    columns = [Column("WORKER", field("worker")), Column("ELIGIBLE", field("eligible"))]
    if any("can_run_now" in row for row in rows):
        columns.append(Column("CAN RUN NOW", field("can_run_now")))
    columns += [
        Column("REASON", reason),
        Column("WHY", why),
        Column("EVERY CLAUSE", every_clause, wide_only=True),
    ]
    return tuple(columns)


def summary_lines(summary: Any) -> list[str]:
    """A summary object of any shape, one `name: value` line per field."""
    if not isinstance(summary, dict):
        return [text(summary)]
    return [f"  {name.replace('_', ' ')}: {text(value)}" for name, value in summary.items()]


def allocation_lines(allocation: Row) -> list[str]:
    lines = [
        f"allocation: {'placeable now' if allocation.get('placeable') else 'cannot be placed now'}"
        f" ({allocation.get('candidate_workers')} candidate workers)"
    ]
    for shortfall in allocation.get("shortfalls") or []:
        lines.append(
            f"  {shortfall.get('path')}: needed {shortfall.get('needed')}, found "
            f"{shortfall.get('found')} in {shortfall.get('places')} places "
            f"(workers: {text(shortfall.get('workers'))})"
        )
    return lines


def print_explanation(explanation: Row, *, wide: bool) -> None:
    rows = explanation.get("workers") or []
    typer.echo(f"job {explanation.get('job')}:")
    if rows:
        print_table(rows, explanation_columns(rows), wide=wide)
    else:
        typer.echo("  no worker is registered")
    lines: list[str] = []
    if explanation.get("summary"):
        lines += ["summary:", *summary_lines(explanation["summary"])]
    if explanation.get("scheduling_info"):
        lines += ["scheduling info:", *(f"  {line}" for line in explanation["scheduling_info"])]
    if explanation.get("allocation"):
        lines += allocation_lines(explanation["allocation"])
    print_lines(lines)
