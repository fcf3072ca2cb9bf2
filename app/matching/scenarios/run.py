"""`jobmatch scenario run`: each case of a file to its family's runner, on a scratch
database, and whether its outcome matches its ``expected``.

A case without ``family`` (or with ``gridengine``) is a Grid Engine case of the
``sge62u5-reference-v1`` format (app/matching/gridengine/scenarios.py); ``momotor``,
``flux`` and ``debusine`` cases run through app/matching/scenarios/families.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from app.db.engine import Database
from app.matching.gridengine import scenarios as gridengine
from app.matching.scenarios import families
from app.matching.scenarios.cases import (
    CaseResult,
    ScenarioError,
    fresh_sqlite_databases,
    read_cases,
    where,
)
from app.matching.scenarios.compare import matches

GRIDENGINE = "gridengine"


def check_case(case: Mapping[str, Any]) -> None:
    """What the case's family requires of it; ScenarioError otherwise."""
    if case.get("family", GRIDENGINE) == GRIDENGINE:
        gridengine.check_case(case)
    else:
        families.check_case(case)


def run_case(database: Database, case: Mapping[str, Any]) -> dict[str, Any]:
    """The outcome of one case on ``database``, in a transaction that is rolled back."""
    if case.get("family", GRIDENGINE) == GRIDENGINE:
        return gridengine.run_case(database, case)
    return families.run_case(database, case)


def read_scenarios(path: Path) -> list[dict[str, Any]]:
    """The cases of a file, each checked against its family's format."""
    cases = read_cases(path)
    for case in cases:
        try:
            check_case(case)
        except ScenarioError as error:
            raise ScenarioError(f"{where(path, case)}: {error}") from None
    return cases


def result_of(case: Mapping[str, Any], outcome: dict[str, Any]) -> CaseResult:
    expected = case.get("expected")
    matched = None if expected is None else matches(expected, outcome)
    if "sql_disagrees" in outcome or "error" in outcome:
        # The engine's SQL filter and its evaluator disagreed, or the case's cluster could
        # not be set up (Grid Engine cases): the case fails, with or without expected.
        matched = False
    return CaseResult(str(case["id"]), str(case.get("title", "")), outcome, matched)


def run_file(
    path: Path,
    database: Database | None = None,
    *,
    fresh: Callable[[], Database] | None = None,
) -> list[CaseResult]:
    """Every case of the file: on ``database`` when given (each case rolled back), else
    each on a fresh SQLite database of its own, from ``fresh`` when given (the maker of
    :func:`fresh_sqlite_databases`, shared by the files of one run)."""
    cases = read_scenarios(path)
    if database is not None:
        return [result_of(case, run_case(database, case)) for case in cases]
    if fresh is None:
        with fresh_sqlite_databases() as make:
            return run_file(path, fresh=make)
    results = []
    for case in cases:
        scratch = fresh()
        try:
            results.append(result_of(case, run_case(scratch, case)))
        finally:
            scratch.dispose()
    return results
