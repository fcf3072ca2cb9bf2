"""The fuzzing session of tests/api/test_fuzz.py, in a process of its own.

Schemathesis compiles a JSON Schema validator (jsonschema-rs, native memory) and a
Hypothesis strategy for every operation it draws from and keeps them: one run over the
API's operations left the test process at 2.2-3.2 GB resident, of which Python's own heap
(tracemalloc) held 0.1 GB, and neither clearing schemathesis' caches nor malloc_trim gave
it back (issue 34). A child process that exits returns it all.

``python -m tests.api.fuzz_session DATABASE_URL MODE`` fuzzes every operation of the app
on that (migrated, empty) database and exits 0, or fails with Hypothesis' report.
"""

from __future__ import annotations

import sys
from typing import Any

import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from pydantic import SecretStr
from schemathesis import GenerationMode
from schemathesis.config import PositiveDataAcceptanceConfig
from schemathesis.config._checks import NegativeDataRejectionConfig

from app.api.app import create_app
from app.db.engine import Database
from app.settings import Settings
from tests.support import thoroughness

#: The admin token of the child's app.
ADMIN_TOKEN = "fuzz-admin-token"

#: Examples per operation and mode. Invalid requests take schemathesis several times
#: longer to make than valid ones, hence fewer.
EXAMPLES_PER_OPERATION = {GenerationMode.POSITIVE: 25, GenerationMode.NEGATIVE: 10}

#: The routes only a worker's own token may call: (method, path) as the document has them.
WORKER_OPERATIONS = frozenset(
    {
        ("POST", "/v1/workers/{name}/pull"),
        ("POST", "/v1/workers/{name}/heartbeat"),
        ("POST", "/v1/workers/{name}/metadata"),
        ("POST", "/v1/jobs/{job_id}/finish"),
        ("POST", "/v1/jobs/{job_id}/return"),
    }
)


def _cluster(client: TestClient, admin_headers: dict[str, str]) -> str:
    """Something to find, so that ids and names in paths can hit existing rows; returns
    the worker's token."""
    registered = client.post(
        "/v1/workers", json={"name": "w", "resources": "a: ?x", "slots": 2}, headers=admin_headers
    )
    token: str = registered.json()["token"]
    client.post("/v1/jobs", json={"resources": "a: x"}, headers=admin_headers)
    client.post("/v1/jobs", json={"resources": "a: x"}, headers=admin_headers)
    # A running job, for finish and return to find.
    client.post("/v1/workers/w/pull", headers={"Authorization": f"Bearer {token}"})
    return token


def _has_input(definition: dict[str, Any]) -> bool:
    return bool(definition.get("parameters")) or "requestBody" in definition


def _bound_long_poll(case: Any) -> None:
    """A valid ``wait`` of a pull holds the request up to 60 s when no job comes, and a
    fuzzer draws many: keep valid ones under a tenth of a second (the whole 0-60 range and
    the refusals outside it are tests/api/test_longpoll.py's). Invalid ones stay as drawn."""
    wait = (case.query or {}).get("wait")
    if isinstance(wait, int | float) and not isinstance(wait, bool) and 0 <= wait <= 60:
        case.query["wait"] = min(wait, 0.05)


def fuzz(database_url: str, mode: GenerationMode) -> None:
    """Every operation of the app, drawn in ``mode``, against ``database_url``."""
    thoroughness.register_profiles()
    app_settings = Settings(
        database_url=database_url,
        admin_token=SecretStr(ADMIN_TOKEN),
        log_format="text",
        log_level="WARNING",
    )
    database = Database(database_url)
    try:
        app = create_app(app_settings, database=database)
        with TestClient(app, raise_server_exceptions=False) as client:
            _fuzz_app(client, mode)
    finally:
        database.dispose()


def _fuzz_app(client: TestClient, mode: GenerationMode) -> None:
    admin_headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    worker_token = _cluster(client, admin_headers)
    schema = schemathesis.openapi.from_asgi("/openapi.json", client.app)
    # Unknown query parameters are ignored, as HTTP APIs commonly do, not refused; and the
    # Authorization header is the test's to set, not schemathesis' to break.
    schema.config.generation.update(allow_extra_parameters=False, with_security_parameters=False)
    # 413 refuses invalid data too: a string drawn past a field's maxLength, escaped in JSON
    # as \uXXXX, can outgrow JOBMATCH_MAX_BODY_BYTES, and the body limit answers before
    # validation reads it (a fresh-clone CI run met this on PUT /v1/quotas/{name}).
    schema.config.checks.negative_data_rejection = NegativeDataRejectionConfig(
        expected_statuses=[*NegativeDataRejectionConfig().expected_statuses, "413"]
    )
    # Every check of schemathesis runs (issue 25), the positive-data one included. Its
    # statuses gain 422: a Momotor definition, shape, jobspec or constraint can be a
    # string the schema allows and still not parse, and that 422 (problem+json, naming
    # the position) is the promise, not a bug; schemathesis' own statuses are kept.
    schema.config.checks.positive_data_acceptance = PositiveDataAcceptanceConfig(
        expected_statuses=[*PositiveDataAcceptanceConfig().expected_statuses, "422"]
    )
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20
    if mode is GenerationMode.NEGATIVE:
        # Nothing to make invalid in an operation without parameters or body.
        operations = [op for op in operations if _has_input(op.definition.raw)]
    examples = 0
    unsatisfiable: list[str] = []

    def fuzz_operation(operation: Any) -> None:
        as_worker = (operation.method.upper(), operation.path) in WORKER_OPERATIONS
        token = worker_token if as_worker else ADMIN_TOKEN
        headers = {"Authorization": f"Bearer {token}"}
        # Fixing the name leaves a negative case nothing to break in a route whose only
        # input it is.
        own_name = (
            {"name": "w"}
            if as_worker and "{name}" in operation.path and mode is GenerationMode.POSITIVE
            else None
        )

        @settings(
            max_examples=thoroughness.examples(EXAMPLES_PER_OPERATION[mode]),
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(data=st.data())
        def fuzz(data: st.DataObject) -> None:
            nonlocal examples
            fixed = own_name if own_name and data.draw(st.booleans()) else None
            case = data.draw(operation.as_strategy(mode, path_parameters=fixed))
            # All of schemathesis' checks: no 5xx, status codes each operation documents,
            # content types, response schemas and headers, invalid data refused, valid
            # data accepted (or a notation refused, above).
            _bound_long_poll(case)
            case.call_and_validate(headers=headers)
            examples += 1

        try:
            fuzz()
        except Unsatisfiable:
            unsatisfiable.append(f"{operation.method.upper()} {operation.path}")

    for operation in operations:
        fuzz_operation(operation)
    print(f"fuzzed {len(operations)} operations with {examples} {mode.value} examples")
    print("no invalid request could be made for:", unsatisfiable)


if __name__ == "__main__":
    fuzz(sys.argv[1], GenerationMode(sys.argv[2]))
