"""The migration tree is sound on both databases and agrees with the models."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, select

import app.db.models  # noqa: F401  (registers the tables)
from app.db import migrate
from app.db.base import Base
from tests.databases import fresh_database


@pytest.fixture
def empty_url(backend: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    with fresh_database(backend, tmp_path) as url:
        yield url


def _tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _schema_diff(url: str) -> list[object]:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection, opts={"compare_type": True, "include_object": migrate.include_object}
            )
            return list(compare_metadata(context, Base.metadata))
    finally:
        engine.dispose()


def test_single_head() -> None:
    config = migrate.alembic_config("sqlite://")
    assert len(ScriptDirectory.from_config(config).get_heads()) == 1


def test_upgrade_downgrade_upgrade(empty_url: str) -> None:
    migrate.upgrade(empty_url)
    assert set(Base.metadata.tables) <= _tables(empty_url)
    assert migrate.current_revisions_at(empty_url) == migrate.head_revisions()

    migrate.downgrade(empty_url, "base")
    assert _tables(empty_url) <= {"alembic_version"}

    migrate.upgrade(empty_url)
    assert migrate.current_revisions_at(empty_url) == migrate.head_revisions()


def test_models_match_migrations(empty_url: str) -> None:
    """procrastinate's habit: the migrated schema equals the models (no autogenerate diff)."""
    migrate.upgrade(empty_url)
    assert _schema_diff(empty_url) == []


def test_every_revision_steps_down_and_up(empty_url: str) -> None:
    """Each migration's downgrade undoes its upgrade, one step at a time."""
    config = migrate.alembic_config(empty_url)
    revisions = list(ScriptDirectory.from_config(config).walk_revisions("base", "heads"))
    for revision in reversed(revisions):
        migrate.upgrade(empty_url, revision.revision)
        migrate.downgrade(empty_url, "-1")
        migrate.upgrade(empty_url, revision.revision)
    assert migrate.current_revisions_at(empty_url) == migrate.head_revisions()


def test_offline_sql_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    migrate.upgrade("sqlite:///unused.db", sql=True)
    out = capsys.readouterr().out
    assert "CREATE TABLE api_tokens" in out
    assert not Path("unused.db").exists()


def test_spans_of_registered_inventories_are_filled_in(empty_url: str) -> None:
    """0013 gives the free counts of inventories registered before it the spans that
    registration gives them now (the size of each type's smallest subtree), not the
    default bound of 1. The node spans 1 + 2 x (1 + 4 + 1) + 1 pool + 4 unitless
    memory vertices."""
    from app.db.engine import Database
    from app.db.models import InventoryCount
    from app.matching import workers
    from app.matching.workers import WorkerSpec

    migrate.upgrade(empty_url)
    database = Database(empty_url)
    try:
        with database.transaction() as session:
            workers.upsert_worker(
                session,
                WorkerSpec(
                    name="n0",
                    rank=0,
                    slots=4,
                    inventory="node/[socket=2/[core=4;gpu=1];memory=2{unit:GB};memory=4]",
                ),
            )

        def spans() -> dict[tuple[str, str], int]:
            with database.transaction(write=False) as session:
                rows = session.execute(
                    select(InventoryCount.type, InventoryCount.unit, InventoryCount.span)
                ).all()
                return {(type_, unit): span for type_, unit, span in rows}

        registered = spans()
        assert registered == {
            ("node", ""): 18,
            ("socket", ""): 6,
            ("core", ""): 1,
            ("gpu", ""): 1,
            ("memory", "GB"): 1,
            ("memory", ""): 1,
        }
        migrate.downgrade(empty_url, "0012")
        migrate.upgrade(empty_url)
        assert spans() == registered
    finally:
        database.dispose()


def test_cores_alone_and_the_verdicts_of_workers_without_an_inventory_are_filled_in(
    empty_url: str,
) -> None:
    """0024 (issue 35) gives the categories stored before it ``cores_alone`` and corrects
    the cached verdicts the new rule changes: a worker without an inventory offers
    node/[core=<slots>] and nothing else, so a GPU job and a two-node job misfit it (as
    registration after 0024 says), while two cores on its two slots still fit."""
    from sqlalchemy import delete, text

    from app.db.engine import Database
    from app.db.models import CategoryMisfit, CategoryShape, Worker
    from app.matching import submission, workers
    from app.matching.requests import JobSpec
    from app.matching.workers import WorkerSpec

    migrate.upgrade(empty_url)
    database = Database(empty_url)
    shapes = {"gpu": "slot/[core=1;gpu=1]", "two": "node=2/slot/core=1", "cores": "slot/core=2"}
    try:
        with database.transaction() as session:
            workers.upsert_worker(session, WorkerSpec(name="bare", slots=2))
            workers.upsert_worker(
                session, WorkerSpec(name="inv", rank=0, slots=8, inventory="node/[core=8;gpu=1]")
            )
            categories = {
                name: submission.submit_job(
                    session, JobSpec(shape=shape), submitter="t"
                ).category_id
                for name, shape in shapes.items()
            }

        def state() -> tuple[dict[str, int | None], dict[str, str | None]]:
            with database.transaction(write=False) as session:
                bare = session.scalar(select(Worker.id).where(Worker.name == "bare"))
                cores = {
                    category_id: amount
                    for category_id, amount in session.execute(
                        select(CategoryShape.category_id, CategoryShape.cores_alone)
                    )
                }
                misfits = {
                    category_id: reason
                    for category_id, reason in session.execute(
                        select(CategoryMisfit.category_id, CategoryMisfit.reason).where(
                            CategoryMisfit.worker_id == bare
                        )
                    )
                }
                return (
                    {name: cores[c] for name, c in categories.items()},
                    {name: misfits.get(c) for name, c in categories.items()},
                )

        expected = (
            {"gpu": None, "two": None, "cores": 2},
            {"gpu": "inventory-too-small", "two": "needs-several-nodes", "cores": None},
        )
        assert state() == expected
        # The revision before 0024, wherever the chain puts it.
        before = ScriptDirectory.from_config(migrate.alembic_config("sqlite://")).get_revision(
            "0024"
        )
        assert before is not None and isinstance(before.down_revision, str)
        migrate.downgrade(empty_url, before.down_revision)
        with database.transaction() as session:
            # The cache as it was before 0024: no jobspec ruled out a worker without one.
            session.execute(
                delete(CategoryMisfit).where(
                    CategoryMisfit.worker_id
                    == select(Worker.id).where(Worker.name == "bare").scalar_subquery()
                )
            )
            # inv fits all three: no misfit row is left.
            assert session.execute(text("SELECT count(*) FROM category_misfits")).scalar() == 0
        migrate.upgrade(empty_url)
        assert state() == expected
    finally:
        database.dispose()


def test_load_values_before_0023_are_taken_for_reports(empty_url: str) -> None:
    """0023 keeps an administrator's values apart from a worker's report. Going down, the
    report an administrator's load value hides goes (the old key holds one load row per
    attribute and object); going up again, the load rows left are taken for reports (who
    wrote them is not known, and a report is replaced by the next one) and the fixed
    values stay configuration."""
    from sqlalchemy import text

    from app.db.engine import Database
    from app.matching.gridengine.admin import set_values
    from app.matching.gridengine.values import REPORT, Target
    from app.matching.workers import WorkerSpec, upsert_worker

    migrate.upgrade(empty_url)
    database = Database(empty_url)
    rows = text(
        "SELECT a.name, v.kind, v.source, v.text FROM attribute_values v"
        " JOIN attributes a ON a.id = v.attribute_id WHERE v.level = 'host'"
        " ORDER BY a.name, v.kind, v.source"
    )
    try:
        with database.transaction() as session:
            worker, _ = upsert_worker(session, WorkerSpec(name="w1", slots=1))
            host = Target("host", worker.id)
            set_values(session, host, "complex_values", {"h_vmem": "8G"})
            set_values(session, host, "load_values", {"arch": "lx-amd64"})
            set_values(
                session, host, "load_values", {"arch": "lx-arm64", "num_proc": "2"}, source=REPORT
            )
        with database.transaction(write=False) as session:
            assert [tuple(r) for r in session.execute(rows)] == [
                ("arch", "load", "admin", "lx-amd64"),
                ("arch", "load", "report", "lx-arm64"),
                ("h_vmem", "fixed", "admin", "8G"),
                ("num_proc", "load", "report", "2"),
            ]
        database.dispose()
        migrate.downgrade(empty_url, "0022")
        database = Database(empty_url)
        with database.transaction(write=False) as session:
            old = text(
                "SELECT a.name, v.kind, v.text FROM attribute_values v"
                " JOIN attributes a ON a.id = v.attribute_id WHERE v.level = 'host'"
                " ORDER BY a.name"
            )
            assert [tuple(r) for r in session.execute(old)] == [
                ("arch", "load", "lx-amd64"),
                ("h_vmem", "fixed", "8G"),
                ("num_proc", "load", "2"),
            ]
        database.dispose()
        migrate.upgrade(empty_url)
        database = Database(empty_url)
        with database.transaction(write=False) as session:
            assert [tuple(r) for r in session.execute(rows)] == [
                ("arch", "load", "report", "lx-amd64"),
                ("h_vmem", "fixed", "admin", "8G"),
                ("num_proc", "load", "report", "2"),
            ]
    finally:
        database.dispose()


def test_quota_usage_keys_gain_their_last_slash(empty_url: str) -> None:
    """0027 (issue 36): Grid Engine's rqs_get_rue_string() (6.2u5 and 8.1.9,
    source/libs/sgeobj/sge_resource_quota.c) writes a "/" after each of the five fields;
    usage rows written before keep their amounts under the new key, and going down
    takes the slash off again."""
    from sqlalchemy import text

    from app.db.engine import Database
    from app.db.models import QuotaLimit, QuotaUsage
    from app.matching.gridengine.quota_sets import create_quota_set

    migrate.upgrade(empty_url)
    database = Database(empty_url)
    keys = text("SELECT key, used FROM quota_usage ORDER BY key")
    try:
        with database.transaction() as session:
            create_quota_set(session, "name per_user\nlimit users {*} to slots=4")
            limit_id = session.scalar(select(QuotaLimit.id))
            assert limit_id is not None
            session.add(QuotaUsage(limit_id=limit_id, key="alice/////", used=2.0))
        before = ScriptDirectory.from_config(migrate.alembic_config("sqlite://")).get_revision(
            "0027"
        )
        assert before is not None and isinstance(before.down_revision, str)
        migrate.downgrade(empty_url, before.down_revision)
        with database.transaction(write=False) as session:
            assert session.execute(keys).all() == [("alice////", 2.0)]
        migrate.upgrade(empty_url)
        with database.transaction(write=False) as session:
            assert session.execute(keys).all() == [("alice/////", 2.0)]
    finally:
        database.dispose()
