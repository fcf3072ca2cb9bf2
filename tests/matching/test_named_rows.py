"""app/matching/named_rows.py: the one lookup by name and the one page in name order that
workers, complex attributes, parallel environments, quota sets and task types share."""

from __future__ import annotations

import pytest

from app.db.engine import Database
from app.db.models import ParallelEnvironment, Worker
from app.matching import workers
from app.matching.errors import NotFoundError
from app.matching.named_rows import row_by_name, rows_by_name
from app.matching.workers import WorkerSpec


def test_a_row_is_found_by_its_name_and_a_missing_one_is_not_found_in_the_callers_words(
    database: Database,
) -> None:
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="w1"))
    with database.transaction() as session:
        assert row_by_name(session, Worker, "w1", missing="-", lock=True).name == "w1"
        with pytest.raises(NotFoundError, match=r"^no pe called 'x'$"):
            row_by_name(session, ParallelEnvironment, "x", missing="no pe called 'x'")


def test_a_page_is_in_name_order_from_its_offset_and_no_limit_reads_the_rest(
    database: Database,
) -> None:
    with database.transaction() as session:
        for name in ("c", "a", "d", "b"):
            workers.upsert_worker(session, WorkerSpec(name=name))
    with database.transaction() as session:
        assert [w.name for w in rows_by_name(session, Worker, limit=2, offset=1)] == ["b", "c"]
        assert [w.name for w in rows_by_name(session, Worker, limit=None, offset=2)] == ["c", "d"]
