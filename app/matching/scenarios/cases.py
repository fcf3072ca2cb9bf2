"""Reading scenario files, and the scratch databases cases run on.

A file holds one JSON object per line; blank lines and lines starting with ``#`` are
skipped. Every case has an ``id``; its ``family`` (``gridengine`` when absent, the
``sge62u5-reference-v1`` format) says what else it needs.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.db import migrate
from app.db.engine import Database


class ScenarioError(ValueError):
    """A scenario line is not valid JSON or lacks what the format requires."""


@dataclass(frozen=True)
class CaseResult:
    id: str
    title: str
    outcome: dict[str, Any]
    matched: bool | None  # None: the case has no expected


def read_cases(path: Path) -> list[dict[str, Any]]:
    """The cases of a file, each a JSON object with an ``id``; ScenarioError names the
    line of the first that is not."""
    cases = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            case = json.loads(line)
        except json.JSONDecodeError as error:
            raise ScenarioError(f"{path}:{number}: {error.msg} at column {error.colno}") from None
        if not isinstance(case, dict) or "id" not in case:
            raise ScenarioError(f"{path}:{number}: a case is a JSON object with an 'id'")
        case["_line"] = number
        cases.append(case)
    return cases


def where(path: Path, case: dict[str, Any]) -> str:
    """``file:line`` of a case, for the errors that name it."""
    return f"{path}:{case.get('_line', '?')}"


@contextmanager
def fresh_sqlite_databases() -> Iterator[Callable[[], Database]]:
    """A migrated SQLite template, copied afresh for each case (migrating per case is slow).

    Every case gets the same :class:`Database`, its file replaced by the template's copy:
    one engine keeps its compiled statements from case to case, where an engine per case
    compiled every statement again (two thirds of a scenario file's time)."""
    directory = Path(tempfile.mkdtemp(prefix="jobmatch-scenarios-"))
    template = directory / "template.db"
    migrate.upgrade(f"sqlite:///{template}")
    target = directory / "case.db"
    database = Database(f"sqlite:///{target}")

    def make() -> Database:
        database.dispose()  # no connection may keep the last case's file open
        for leftover in (directory / "case.db-wal", directory / "case.db-shm"):
            leftover.unlink(missing_ok=True)
        shutil.copyfile(template, target)
        return database

    try:
        yield make
    finally:
        database.dispose()
        shutil.rmtree(directory, ignore_errors=True)
