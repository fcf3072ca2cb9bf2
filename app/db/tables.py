"""Core handles of the mapped tables, for statements that need no ORM objects.

The hot paths (pull, finish, allocation, Grid Engine bookings) build their statements
once on these: ``Model.__table__`` is typed loosely, so each module used to cast it
itself; here each table is named once.
"""

from __future__ import annotations

from typing import cast

from sqlalchemy import Table

from app.db.models import (
    Allocation,
    Category,
    CategoryFit,
    CategoryMisfit,
    ConsumableUsage,
    InventoryBooking,
    InventoryCount,
    InventoryVertex,
    Job,
    JobArray,
    JobBooking,
    JobEvent,
    Queue,
    QueueInstance,
    Worker,
    WorkerInventory,
    WorkerTemplate,
)


def table_of(model: type[object]) -> Table:
    """The Core table of a mapped class."""
    return cast(Table, model.__table__)  # type: ignore[attr-defined]


ALLOCATIONS = table_of(Allocation)
CATEGORIES = table_of(Category)
CATEGORY_FITS = table_of(CategoryFit)
CATEGORY_MISFITS = table_of(CategoryMisfit)
CONSUMABLE_USAGE = table_of(ConsumableUsage)
INVENTORY_BOOKINGS = table_of(InventoryBooking)
INVENTORY_COUNTS = table_of(InventoryCount)
INVENTORY_VERTICES = table_of(InventoryVertex)
JOBS = table_of(Job)
JOB_ARRAYS = table_of(JobArray)
JOB_BOOKINGS = table_of(JobBooking)
JOB_EVENTS = table_of(JobEvent)
QUEUE_INSTANCES = table_of(QueueInstance)
QUEUES = table_of(Queue)
WORKERS = table_of(Worker)
WORKER_INVENTORIES = table_of(WorkerInventory)
WORKER_TEMPLATES = table_of(WorkerTemplate)
