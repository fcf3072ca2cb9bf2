"""A typed Python client for the jobmatch HTTP API.

Three classes, one per role, share :class:`~app.client.base.BaseClient` (base URL, token,
timeouts, retries, user agent)::

    from app.client import AdminClient, JobSpec, SubmitterClient, WorkerClient

    with SubmitterClient("http://127.0.0.1:8000", token) as jobs:
        job = jobs.submit_job(JobSpec(resources="linux", slots=2))

Its only third-party imports are httpx2 and stamina (``pip install 'jobmatch[agent]'``), so a
worker host needs none of the server's stack. docs/client.md shows an example per role.
"""

from app.client.admin import AdminClient
from app.client.base import USER_AGENT, BaseClient, retry_line
from app.client.errors import (
    ApiError,
    BadRequest,
    ClientError,
    Conflict,
    FieldError,
    Forbidden,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    RequestTimeout,
    ServerError,
    ServerUnreachable,
    ServiceUnavailable,
    TooManyRequests,
    Unauthorized,
    UnexpectedResponse,
    ValidationFailed,
)
from app.client.models import JobState, Role, WorkerState
from app.client.policy import NO_RETRIES, RetryPolicy, Timeouts
from app.client.requests import (
    NULL,
    AttributeSpec,
    GroupWeightChange,
    JobSpec,
    PeSpec,
    QueueInstancePatch,
    QuotaSetText,
    TaskSpec,
    TemplateSpec,
    ValuesChange,
    ValuesSpec,
    WeightChange,
    WhatIfSpec,
    WorkerChange,
    WorkerPatch,
    WorkerSpec,
)
from app.client.submitter import SubmitterClient
from app.client.urls import server_url_mistake
from app.client.worker import EndReport, WorkerClient
from app.wire.queues import QueueSpec

__all__ = [
    "NO_RETRIES",
    "NULL",
    "USER_AGENT",
    "AdminClient",
    "ApiError",
    "AttributeSpec",
    "BadRequest",
    "BaseClient",
    "ClientError",
    "Conflict",
    "EndReport",
    "FieldError",
    "Forbidden",
    "GroupWeightChange",
    "JobSpec",
    "JobState",
    "MethodNotAllowed",
    "NotFound",
    "PayloadTooLarge",
    "PeSpec",
    "QueueInstancePatch",
    "QueueSpec",
    "QuotaSetText",
    "RequestTimeout",
    "RetryPolicy",
    "Role",
    "ServerError",
    "ServerUnreachable",
    "ServiceUnavailable",
    "SubmitterClient",
    "TaskSpec",
    "TemplateSpec",
    "Timeouts",
    "TooManyRequests",
    "Unauthorized",
    "UnexpectedResponse",
    "ValidationFailed",
    "ValuesChange",
    "ValuesSpec",
    "WeightChange",
    "WhatIfSpec",
    "WorkerChange",
    "WorkerClient",
    "WorkerPatch",
    "WorkerSpec",
    "WorkerState",
    "retry_line",
    "server_url_mistake",
]
