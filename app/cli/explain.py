"""`jobmatch jobs explain` for people: one row per worker, then what blocks the job.

Rendered from the API's JSON, so the fields a newer server adds (each worker's `state`,
`can_run_now` and `reason`; a waiting job's `summary` in the style of `condor_q
-better-analyze`) are shown when they are there and the rest works without them."""

from __future__ import annotations

from typing import Any

import typer

from app.cli.output import Column, Row, field, print_lines, print_table, text
from app.words import plural


def _first_clause(row: Row) -> Row:
    clauses = row.get("clauses") or []
    return clauses[0] if clauses else {}


def reason(row: Row) -> str:
    """The code of the first failing clause (for a worker that is not eligible, the code
    v_category_fit shows)."""
    code = row.get("reason") or row.get("misfit_reason") or _first_clause(row).get("reason")
    return str(code or "-")


def why(row: Row) -> str:
    """The first failing clause in words, or that the worker fits (and can run it now,
    when the server says so)."""
    clause = _first_clause(row)
    if clause:
        return str(clause.get("message") or clause.get("reason"))
    if not row.get("eligible"):
        return "-"
    return "can run it now" if row.get("can_run_now") else "fits"


def every_clause(row: Row) -> str:
    return (
        "; ".join(f"{c.get('reason')}: {c.get('message')}" for c in row.get("clauses") or []) or "-"
    )


def explanation_columns(rows: list[Row]) -> tuple[Column, ...]:
    """The table's columns; `CAN RUN NOW` only when the server reports the dynamic fit."""
    columns = [Column("WORKER", field("worker"))]
    if any("state" in row for row in rows):
        columns.append(Column("STATE", field("state")))
    columns.append(Column("ELIGIBLE", field("eligible")))
    if any(row.get("can_run_now") is not None for row in rows):
        columns.append(Column("CAN RUN NOW", field("can_run_now")))
    if any(row.get("answer") is not None for row in rows):
        columns.append(Column("ANSWER", field("answer")))
    columns += [
        Column("REASON", reason),
        Column("WHY", why),
        Column("EVERY CLAUSE", every_clause, wide_only=True),
    ]
    return tuple(columns)


#: The counts of a summary, in the order `condor_q -better-analyze` reads them.
SUMMARY_COUNTS = ("workers", "eligible", "can_run_now", "fit_but_busy")
#: Per answer (issue 35): with can_run_now they add up to the workers.
ANSWER_COUNTS = ("outranked", "not_now", "never")


def words(name: str) -> str:
    """A JSON field's name as words: `can_run_now` is `can run now`."""
    return name.replace("_", " ")


def counted(value: Any, singular: str) -> str:
    """A count the server sent and its noun (`1 place`, `2 places`); a value that is no
    count is shown as it came."""
    if isinstance(value, int) and not isinstance(value, bool):
        return plural(value, singular)
    return f"{text(value)} {singular}s"


def summary_lines(summary: Any) -> list[str]:
    """A waiting job's summary: the counts, how many workers fail first on each clause,
    and the one change that would let it run soonest; other fields as `name: value`."""
    if not isinstance(summary, dict):
        return [f"summary: {text(summary)}"]
    counts = [
        plural(summary[name], "worker") if name == "workers" else f"{summary[name]} {words(name)}"
        for name in SUMMARY_COUNTS
        if name in summary
    ]
    lines = ["summary: " + ", ".join(counts)] if counts else ["summary:"]
    answers = [f"{summary[name]} {words(name)}" for name in ANSWER_COUNTS if name in summary]
    if answers and "can_run_now" in summary:
        lines.append(f"  answers: {summary['can_run_now']} now, " + ", ".join(answers))
    failures = summary.get("first_failures") or {}
    if failures:
        ranked = sorted(failures.items(), key=lambda item: (-item[1], item[0]))
        lines.append("  first failing clause: " + ", ".join(f"{code} {n}" for code, n in ranked))
    if summary.get("suggestion"):
        lines.append(f"  suggestion: {summary['suggestion']}")
    known = {*SUMMARY_COUNTS, *ANSWER_COUNTS, "first_failures", "suggestion"}
    lines += [
        f"  {name.replace('_', ' ')}: {text(value)}"
        for name, value in summary.items()
        if name not in known
    ]
    return lines


def allocation_lines(allocation: Row) -> list[str]:
    lines = [
        f"allocation: {'placeable now' if allocation.get('placeable') else 'cannot be placed now'}"
        f" ({counted(allocation.get('candidate_workers'), 'candidate worker')})"
    ]
    if allocation.get("note"):
        lines.append(f"  {allocation['note']}")
    for shortfall in allocation.get("shortfalls") or []:
        lines.append(
            f"  {shortfall.get('path')}: needed {shortfall.get('needed')}, found "
            f"{shortfall.get('found')} in {counted(shortfall.get('places'), 'place')} "
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
        lines += summary_lines(explanation["summary"])
    if explanation.get("scheduling_info"):
        lines += ["scheduling info:", *(f"  {line}" for line in explanation["scheduling_info"])]
    if explanation.get("allocation"):
        lines += allocation_lines(explanation["allocation"])
    print_lines(lines)
