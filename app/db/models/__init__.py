"""All ORM models; importing this package registers every table on ``Base.metadata``."""

from app.db.models.allocation import (
    CategoryNodeNeed,
    CategoryShape,
    InventoryBooking,
    InventoryCount,
    InventoryVertex,
    WorkerInventory,
)
from app.db.models.cluster import Queue, QueueInstance, SchedulerConfig, Worker
from app.db.models.console import ConsoleSession
from app.db.models.debusine import CategoryTask, Task, WorkerMetadata, WorkerMetadataNamespace
from app.db.models.enums import UNAVAILABLE_WORKER_STATES, JobState, TagMode, WorkerState
from app.db.models.flux import (
    ConstraintHostRun,
    ConstraintProperty,
    ConstraintRankRun,
    ResourceVertex,
    WorkerNamePart,
    WorkerProperty,
)
from app.db.models.gridengine import (
    Attribute,
    AttributeValue,
    CategoryQueueRef,
    CategoryRequest,
    ConsumableUsage,
    JobBooking,
    ParallelEnvironment,
)
from app.db.models.groups import (
    AccessList,
    AccessListMember,
    HostGroup,
    HostGroupMember,
    Project,
)
from app.db.models.history import JobEvent, JobEventKind
from app.db.models.idempotency import BulkIdempotencyKey, IdempotencyKey
from app.db.models.jobs import (
    Allocation,
    Category,
    CategoryFit,
    CategoryMisfit,
    Job,
    JobArray,
)
from app.db.models.momotor import CategoryTag, WorkerTag
from app.db.models.output import JobOutput
from app.db.models.quotas import QuotaBooking, QuotaLimit, QuotaSet, QuotaUsage
from app.db.models.shares import SubmitterGroup, SubmitterShare
from app.db.models.templates import WorkerTemplate
from app.db.models.tokens import ApiToken, Role

__all__ = [
    "UNAVAILABLE_WORKER_STATES",
    "AccessList",
    "AccessListMember",
    "Allocation",
    "ApiToken",
    "Attribute",
    "AttributeValue",
    "BulkIdempotencyKey",
    "Category",
    "CategoryFit",
    "CategoryMisfit",
    "CategoryNodeNeed",
    "CategoryQueueRef",
    "CategoryRequest",
    "CategoryShape",
    "CategoryTag",
    "CategoryTask",
    "ConsoleSession",
    "ConstraintHostRun",
    "ConstraintProperty",
    "ConstraintRankRun",
    "ConsumableUsage",
    "HostGroup",
    "HostGroupMember",
    "IdempotencyKey",
    "InventoryBooking",
    "InventoryCount",
    "InventoryVertex",
    "Job",
    "JobArray",
    "JobBooking",
    "JobEvent",
    "JobEventKind",
    "JobOutput",
    "JobState",
    "ParallelEnvironment",
    "Project",
    "Queue",
    "QueueInstance",
    "QuotaBooking",
    "QuotaLimit",
    "QuotaSet",
    "QuotaUsage",
    "ResourceVertex",
    "Role",
    "SchedulerConfig",
    "SubmitterGroup",
    "SubmitterShare",
    "TagMode",
    "Task",
    "Worker",
    "WorkerInventory",
    "WorkerMetadata",
    "WorkerMetadataNamespace",
    "WorkerNamePart",
    "WorkerProperty",
    "WorkerState",
    "WorkerTag",
    "WorkerTemplate",
]
