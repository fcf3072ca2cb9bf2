"""The client and the API cannot drift apart: every operation of the server's OpenAPI
document has exactly one client method, and the client names no operation the server lacks.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from pydantic import SecretStr

from app.api.app import create_app
from app.client import AdminClient, SubmitterClient, WorkerClient
from app.client.base import BaseClient
from app.client.operations import Operation, all_operations, covered_by
from app.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def api_operations(tmp_path_factory: pytest.TempPathFactory) -> set[tuple[str, str]]:
    database = tmp_path_factory.mktemp("openapi") / "unused.db"
    settings = Settings(database_url=f"sqlite:///{database}", admin_token=SecretStr("x"))
    document = create_app(settings).openapi()
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
        "/v1/workers/{name}/heartbeat",
        "/v1/workers/{name}/metadata",
        "/v1/jobs/{job_id}/finish",
        "/v1/jobs/{job_id}/return",
    }


def test_only_requests_safe_to_repeat_are_marked_idempotent() -> None:
    """RFC 9110 section 9.2.2: GET, PUT and DELETE are idempotent; of the POSTs only pure
    computations (match and the Flux tools) are."""
    pure_posts = {op.path for op in all_operations() if op.method == "POST" and op.idempotent}
    assert pure_posts == {
        "/v1/match",
        "/v1/flux/shape",
        "/v1/flux/requires",
        "/v1/flux/constraint",
    }


def test_the_agent_extra_is_the_client_dependencies_and_pinned() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    agent = project["optional-dependencies"]["agent"]
    names = {re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0].lower() for spec in agent}
    assert names == {"httpx2", "stamina"}
    pins = {
        line.split("==")[0].lower()
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    }
    assert names | {"tenacity"} <= pins
