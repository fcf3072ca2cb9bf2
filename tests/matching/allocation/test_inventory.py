"""Worker inventories as rows (app/matching/allocation/inventory.py): the ranks copied onto
inventories and counts follow the worker's rank (issue 9)."""

from __future__ import annotations

from sqlalchemy import select

from app.db.engine import Database
from app.db.models import InventoryCount, Worker, WorkerInventory
from app.matching import workers
from app.matching.workers import WorkerSpec
from tests.support.inventory_cluster import NODE, build_cluster


def test_rank_copies_follow_the_worker(database: Database) -> None:
    build_cluster(database)
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="n3", rank=100, slots=16, inventory=NODE))
        workers.upsert_worker(session, WorkerSpec(name="n4", rank=None, slots=16, inventory=NODE))
    with database.transaction(write=False) as session:
        ranks = dict(session.execute(select(Worker.id, Worker.rank)).all())
        copies = [
            *session.execute(select(WorkerInventory.worker_id, WorkerInventory.rank)),
            *session.execute(select(InventoryCount.worker_id, InventoryCount.rank)),
        ]
    assert copies and all(rank == ranks[worker_id] for worker_id, rank in copies)
