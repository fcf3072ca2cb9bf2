"""The client and the API cannot drift apart: every operation of the server's OpenAPI
document has exactly one client method, and the client names no operation the server lacks.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from app.api.app import create_app
from app.client import AdminClient, SubmitterClient, WorkerClient, errors, models, requests, worker
from app.client.base import BaseClient
from app.client.operations import Operation, all_operations, covered_by
from app.settings import Settings
from app.wire import categories, demand, demand_scale, explanation, queues, values, whatif

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def openapi(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The server's OpenAPI document (building the app opens no database)."""
    database = tmp_path_factory.mktemp("openapi") / "unused.db"
    settings = Settings(database_url=f"sqlite:///{database}", admin_token=SecretStr("x"))
    document: dict[str, Any] = create_app(settings).openapi()
    return document


@pytest.fixture(scope="module")
def api_operations(openapi: dict[str, Any]) -> set[tuple[str, str]]:
    document = openapi
    return {
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method in operations
    }


def _pairs(operations: object) -> set[tuple[str, str]]:
    return {(op.method, op.path) for op in operations if isinstance(op, Operation)}  # type: ignore[attr-defined]


def test_every_openapi_operation_has_a_client_method(api_operations: set[tuple[str, str]]) -> None:
    covered = _pairs(covered_by(AdminClient)) | _pairs(covered_by(WorkerClient))
    missing = sorted(api_operations - covered)
    assert not missing, f"add a client method (app/client) marked @covers for: {missing}"
    stale = sorted(covered - api_operations)
    assert not stale, f"client methods for operations the server does not have: {stale}"


def test_the_operation_table_matches_the_openapi_document(
    api_operations: set[tuple[str, str]],
) -> None:
    assert _pairs(all_operations()) == api_operations


def test_each_operation_is_covered_once_and_by_the_right_role() -> None:
    admin, worker = covered_by(AdminClient), covered_by(WorkerClient)
    base, submitter = covered_by(BaseClient), covered_by(SubmitterClient)
    # What both an admin and a worker may call lives in the shared base, nowhere else.
    assert set(admin) & set(worker) == set(base)
    # An admin can do whatever a submitter can.
    assert set(submitter) <= set(admin)
    # No operation is sent by two differently named methods.
    names = [name for table in (admin, worker) for name in table.values()]
    assert len(set(admin.values()) | set(worker.values())) == len(set(names))
    worker_only = {op.path for op in set(worker) - set(base)}
    assert worker_only == {
        "/v1/workers/{name}/pull",
        "/v1/workers/{name}/pull-batch",
        "/v1/workers/{name}/heartbeat",
        "/v1/workers/{name}/metadata",
        "/v1/jobs/{job_id}/finish",
        "/v1/jobs/{job_id}/return",
        "/v1/workers/{name}/load",
        "/v1/workers/{name}/jobs/{job_id}/output",
    }


def test_only_requests_safe_to_repeat_are_marked_idempotent() -> None:
    """RFC 9110 section 9.2.2: GET, PUT and DELETE are idempotent; of the POSTs only pure
    computations (match, the Flux tools and the what-if, which rolls its changes back) are."""
    pure_posts = {op.path for op in all_operations() if op.method == "POST" and op.idempotent}
    assert pure_posts == {
        "/v1/match",
        "/v1/flux/shape",
        "/v1/flux/requires",
        "/v1/flux/constraint",
        "/v1/whatif",
    }


def test_the_agent_extra_is_the_client_dependencies_and_pinned() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    agent = project["optional-dependencies"]["agent"]
    names = {re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0].lower() for spec in agent}
    # The client's two, and the JSON log formatter the agent shares with the server
    # (app/logs.py, issue 25).
    assert names == {"httpx2", "stamina", "python-json-logger"}
    pins = {
        line.split("==")[0].lower()
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    }
    assert names | {"tenacity"} <= pins


#: The OpenAPI schema each client model mirrors.
MODELS_BY_SCHEMA: dict[str, type] = {
    "AllocationExplanationOut": models.AllocationExplanation,
    "AllocationOut": models.Allocation,
    "AttributeOut": models.Attribute,
    "BulkJobOut": models.SubmittedJob,
    "BulkJobsOut": models.SubmittedJobs,
    "CandidateOut": models.Candidate,
    "CandidatesOut": models.Candidates,
    "ClauseOut": explanation.Clause,
    "ConstraintOut": models.CompiledConstraint,
    "ExpireOut": models.Expired,
    "ExplanationOut": models.Explanation,
    "ExplainSummaryOut": explanation.ExplainSummary,
    "HeartbeatOut": models.Heartbeat,
    "IssuedToken": models.IssuedToken,
    "JobEventOut": models.JobEvent,
    "JobHistoryOut": models.JobHistory,
    "JobOut": models.Job,
    "MetadataOut": models.WorkerMetadata,
    "NamespaceOut": models.MetadataNamespace,
    "Page_JobOut_": models.JobPage,
    "Page_TokenOut_": models.TokenPage,
    "Page_WorkerOut_": models.WorkerPage,
    "PeOut": models.ParallelEnvironment,
    "OutputAppended": models.OutputAppended,
    "OutputOut": models.JobOutput,
    "QueueInstanceOut": models.QueueSlots,
    "RegisteredWorker": models.RegisteredWorker,
    "ScheduleOut": models.ScheduleRun,
    "ShapeOut": models.ExpandedShape,
    "ShortfallOut": models.Shortfall,
    "TaskOut": models.Task,
    "TokenOut": models.Token,
    "ValuesOut": models.ValuesChanged,
    "WorkerExplanationOut": explanation.WorkerExplanation,
    "WorkerOut": models.Worker,
    "Page_TaskOut_": models.TaskPage,
    "Page_AttributeOut_": models.AttributePage,
    "Page_PeOut_": models.PePage,
    "Page_CategoryOut_": models.CategoryPage,
    "CategoryOut": models.CategorySummary,
    "CategoryDetailOut": models.Category,
    "CategoryRequestOut": categories.CategoryRequest,
    "WorkerFitOut": categories.WorkerFit,
    "ValuesRead": values.Values,
    "ConsumptionOut": values.Consumption,
    "JobIn": requests.JobSpec,
    "WorkerIn": requests.WorkerSpec,
    "WorkerPatch": requests.WorkerPatch,
    "QueueIn": queues.QueueSpec,
    "TaskIn": requests.TaskSpec,
    "AttributeIn": requests.AttributeSpec,
    "ValuesIn": requests.ValuesSpec,
    "PeIn": requests.PeSpec,
    "QuotaSetOut": models.QuotaSet,
    "HostGroupOut": models.HostGroup,
    "Page_HostGroupOut_": models.HostGroupPage,
    "AccessListOut": models.AccessList,
    "Page_AccessListOut_": models.AccessListPage,
    "ProjectOut": models.Project,
    "Page_ProjectOut_": models.ProjectPage,
    "QueueConfOut": models.QueueConf,
    "QueueInstanceConfOut": models.QueueInstanceConf,
    "QueueInstanceConfIn": requests.QueueInstancePatch,
    "SchedulerConfOut": models.SchedulerConf,
    "QuotaRuleOut": models.QuotaRule,
    "QuotaLimitOut": models.QuotaLimit,
    "QuotaUsageOut": models.QuotaUsage,
    "Page_QuotaSetOut_": models.QuotaSetPage,
    "SharesOut": models.Shares,
    "StandingOut": models.Standing,
    "GroupStandingOut": models.GroupStanding,
    "FieldProblem": errors.FieldError,
    "WhatIfIn": requests.WhatIfSpec,
    "WeightChangeIn": requests.WeightChange,
    "GroupWeightChangeIn": requests.GroupWeightChange,
    "WorkerChangeIn": requests.WorkerChange,
    "ValuesChangeIn": requests.ValuesChange,
    "WhatIfOut": models.WhatIf,
    "AddedJobOut": whatif.AddedJob,
    "CategoryCountsOut": whatif.CategoryCounts,
    "FirstPullOut": whatif.FirstPull,
    "CandidatesChangeOut": models.CandidatesChange,
    "EndedOut": models.Ended,
    "PullBatchOut": models.PulledBatch,
    "FinishedIn": worker.EndReport,
    "TemplateIn": requests.TemplateSpec,
    "TemplateOut": models.WorkerTemplate,
    "Page_TemplateOut_": models.WorkerTemplatePage,
    "DemandOut": models.Demand,
    "CategoryDemandOut": demand.CategoryDemand,
    "NeedOut": demand.Need,
    "SuggestionOut": demand.Suggestion,
    "TemplateDemandOut": demand.TemplateDemand,
    "DemandScaleOut": demand_scale.DemandScale,
    "TemplateScaleOut": demand_scale.TemplateScale,
    "MixItemOut": demand.MixItem,
    "UnrunnableOut": demand.Unrunnable,
}

ENUMS_BY_SCHEMA: dict[str, type[enum.Enum]] = {
    "JobState": models.JobState,
    "WorkerState": models.WorkerState,
    "Role": models.Role,
    "JobEventKind": models.JobEventKind,
}


def test_models_have_exactly_the_fields_of_their_schemas(openapi: dict[str, Any]) -> None:
    """A field the server adds or renames shows up here, not as a silently ignored value."""
    schemas = openapi["components"]["schemas"]
    for name, model in MODELS_BY_SCHEMA.items():
        fields = {field.name for field in dataclasses.fields(model)}
        assert fields == set(schemas[name]["properties"]), name
        if name.endswith("Out") or name.startswith("Page") or name == "IssuedToken":
            # What the server always sends, the client requires (and nothing else).
            required = {
                field.name
                for field in dataclasses.fields(model)
                if field.default is dataclasses.MISSING
                and field.default_factory is dataclasses.MISSING
            }
            assert required <= set(schemas[name].get("required", [])), name


def test_client_enums_have_the_values_of_the_server_enums(openapi: dict[str, Any]) -> None:
    schemas = openapi["components"]["schemas"]
    for name, enum_class in ENUMS_BY_SCHEMA.items():
        assert {member.value for member in enum_class} == set(schemas[name]["enum"]), name


#: Request bodies the client builds from a method's keyword arguments (few fields each), and
#: the error document, which app.client.errors reads into ApiError.
KEYWORD_BODIES = {
    "BulkJobsIn": "SubmitterClient.submit_jobs",
    "ShapeIn": "BaseClient.expand_shape",
    "RequiresIn": "BaseClient.compile_requires",
    "ConstraintIn": "BaseClient.validate_constraint",
    "TokenCreate": "AdminClient.issue_token",
    "StaticMetadataIn": "AdminClient.set_static_metadata",
    "DynamicMetadataIn": "WorkerClient.report_metadata",
    "FinishIn": "WorkerClient.finish_job",
    "PullBatchIn": "WorkerClient.pull_batch",
    "ReturnIn": "WorkerClient.return_job",
    "LoadValuesIn": "WorkerClient.report_load",
    "OutputChunkIn": "WorkerClient.append_output",
    "QuotaSetIn": "AdminClient.create_quota_set",
    "WeightIn": "AdminClient.set_share_weight",
    "GroupWeightIn": "AdminClient.set_group_weight",
    "HostGroupIn": "AdminClient.create_host_group",
    "MembersIn": "AdminClient.replace_host_group",
    "AccessListIn": "AdminClient.create_access_list",
    "ProjectIn": "AdminClient.create_project",
    "QueueConfIn": "AdminClient.configure_queue",
    "SchedulerConfIn": "AdminClient.configure_scheduler",
    "Problem": "app.client.errors.error_for_response",
}


def test_every_schema_of_the_api_has_its_client_counterpart(openapi: dict[str, Any]) -> None:
    known = set(MODELS_BY_SCHEMA) | set(ENUMS_BY_SCHEMA) | set(KEYWORD_BODIES)
    schemas = set(openapi["components"]["schemas"])
    assert schemas - known == set(), "add a model to app/client/models.py or requests.py"
    assert known - schemas == set(), "the server no longer has these schemas"


def test_keyword_bodies_take_every_field_of_their_schema(openapi: dict[str, Any]) -> None:
    classes = {"BaseClient": BaseClient, "AdminClient": AdminClient, "WorkerClient": WorkerClient}
    for schema, where in KEYWORD_BODIES.items():
        owner, _, method = where.partition(".")
        if owner not in classes:
            continue
        parameters = set(inspect.signature(getattr(classes[owner], method)).parameters)
        properties = set(openapi["components"]["schemas"][schema]["properties"])
        assert properties <= parameters, (where, properties - parameters)
