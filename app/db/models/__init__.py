"""All ORM models; importing this package registers every table on ``Base.metadata``."""

from app.db.models.cluster import Queue, QueueInstance, Worker, WorkerTag
from app.db.models.enums import JobState, TagMode, WorkerState
from app.db.models.flux import (
    ConstraintHostRun,
    ConstraintProperty,
    ConstraintRankRun,
    ResourceVertex,
    WorkerNamePart,
    WorkerProperty,
)
from app.db.models.inventory import (
    CategoryNodeNeed,
    CategoryShape,
    InventoryBooking,
    InventoryCount,
    InventoryVertex,
    WorkerInventory,
)
from app.db.models.jobs import Allocation, Category, CategoryMisfit, CategoryTag, Job
from app.db.models.tokens import ApiToken, Role

__all__ = [
    "Allocation",
    "ApiToken",
    "Category",
    "CategoryMisfit",
    "CategoryNodeNeed",
    "CategoryShape",
    "CategoryTag",
    "ConstraintHostRun",
    "ConstraintProperty",
    "ConstraintRankRun",
    "InventoryBooking",
    "InventoryCount",
    "InventoryVertex",
    "Job",
    "JobState",
    "Queue",
    "QueueInstance",
    "ResourceVertex",
    "Role",
    "TagMode",
    "Worker",
    "WorkerInventory",
    "WorkerNamePart",
    "WorkerProperty",
    "WorkerState",
    "WorkerTag",
]
