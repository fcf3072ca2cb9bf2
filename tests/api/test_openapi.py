"""The OpenAPI document describes the API (issue 21): operationIds chosen by hand, a summary
and a description on every operation, an example on every request body (and the examples
work together on a real server), every property and parameter described, and each
operation listing only the errors it can return, each as the problem schema.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections import Counter
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from pydantic import BaseModel, SecretStr

import app.api.schemas
from app.api import auth
from app.api.app import create_app, service_routes
from app.api.schemas.common import Problem
from app.settings import Settings

PROBLEM_JSON = "application/problem+json"

#: What FastAPI generates when a route sets no operation_id: the path with `_v1_` in it,
#: and the method at the end (`submit_job_v1_jobs_post`).
GENERATED_ID = re.compile(r"_v1_|_(get|post|put|patch|delete|head|options)$")
SNAKE_CASE = re.compile(r"^[a-z]+(_[a-z]+)+$")


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> FastAPI:
    """The app (building it opens no database)."""
    database = tmp_path_factory.mktemp("openapi") / "unused.db"
    return create_app(Settings(database_url=f"sqlite:///{database}", admin_token=SecretStr("x")))


@pytest.fixture(scope="module")
def document(api: FastAPI) -> dict[str, Any]:
    return api.openapi()


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, operation)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    ]


def _schema_models() -> dict[str, type[BaseModel]]:
    """Every pydantic model of app/api/schemas, by class name (the schema's name)."""
    models: dict[str, type[BaseModel]] = {}
    for module_info in pkgutil.iter_modules(app.api.schemas.__path__):
        module = importlib.import_module(f"app.api.schemas.{module_info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseModel):
                models[value.__name__] = value
    return models


def _body_schema_name(operation: dict[str, Any]) -> str:
    """The component a request body refers to (directly, or as the one non-null choice of
    an optional body)."""
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    choices = schema.get("anyOf", [schema])
    (reference,) = [choice["$ref"] for choice in choices if "$ref" in choice]
    return str(reference).rsplit("/", 1)[-1]


def test_operation_ids_are_chosen_by_hand_and_unique(document: dict[str, Any]) -> None:
    ids = [operation.get("operationId", "") for _, _, operation in _operations(document)]
    generated = [i for i in ids if not SNAKE_CASE.match(i) or GENERATED_ID.search(i)]
    assert generated == [], "set operation_id= on the route: snake_case, verb first"
    assert [i for i, n in Counter(ids).items() if n > 1] == []


def test_every_operation_has_a_summary_and_a_description() -> None:
    """Set by hand: FastAPI would make a summary of the function's name."""
    routes = [r for r in service_routes() if isinstance(r, APIRoute) and r.include_in_schema]
    assert len(routes) >= 45
    assert [r.path for r in routes if not r.summary] == []
    assert [r.path for r in routes if not (r.description or "").strip()] == []


def test_every_property_and_parameter_is_described(document: dict[str, Any]) -> None:
    undescribed = [
        f"{name}.{prop}"
        for name, schema in document["components"]["schemas"].items()
        for prop, definition in schema.get("properties", {}).items()
        if not definition.get("description")
    ]
    assert undescribed == []
    parameters = [
        f"{method} {path} {parameter['in']}.{parameter['name']}"
        for method, path, operation in _operations(document)
        for parameter in operation.get("parameters", [])
        if not parameter.get("description")
    ]
    assert parameters == []


def test_every_request_body_has_examples_its_model_accepts(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    models = _schema_models()
    bodies = {
        _body_schema_name(operation)
        for _, _, operation in _operations(document)
        if "requestBody" in operation
    }
    assert len(bodies) >= 14
    for name in sorted(bodies):
        examples = schemas[name].get("examples")
        assert examples, f"{name}: add json_schema_extra examples to its model"
        for example in examples:
            models[name].model_validate(example)


def test_response_models_carry_no_request_examples(document: dict[str, Any]) -> None:
    """AttributeOut and PeOut inherit their bodies' models but not their examples, which
    lack what the answers add."""
    schemas = document["components"]["schemas"]
    for name, schema in schemas.items():
        for example in schema.get("examples", []):
            assert set(schema.get("required", [])) <= set(example), name


def test_each_operation_lists_only_the_errors_it_can_return(document: dict[str, Any]) -> None:
    for method, path, operation in _operations(document):
        where = f"{method} {path}"
        errors = {int(status) for status in operation["responses"] if status[0] in "45"}
        has_body = "requestBody" in operation
        parameters = operation.get("parameters", [])
        in_path = [p for p in parameters if p["in"] == "path"]
        assert 500 not in errors, where  # a 500 is a bug, not a promise
        if operation.get("security"):
            # The token gate may refuse the token, limit its rate, or not reach the DB.
            assert {401, 429, 503} <= errors, where
            retry_after = operation["responses"]["429"]["headers"]["Retry-After"]
            assert retry_after["schema"] == {"type": "integer", "minimum": 1}, where
        else:
            assert not errors & {401, 403, 429}, where
        assert (408 in errors) == has_body, where
        assert (413 in errors) == has_body, where
        assert (422 in errors) == bool(has_body or parameters), where
        if not in_path:
            assert 404 not in errors, where
        for status in errors:
            content = operation["responses"][str(status)]["content"]
            assert list(content) == [PROBLEM_JSON], where
            assert content[PROBLEM_JSON]["schema"] == {"$ref": "#/components/schemas/Problem"}
    assert document["paths"]["/healthz"]["get"]["responses"].keys() == {"200"}


#: The dependencies that refuse a valid token for its role (or its worker).
ROLE_CHECKS = {
    auth.require_admin,
    auth.require_submitter,
    auth.require_worker,
    auth.require_any_worker,
}


def _calls(dependant: Any) -> set[Any]:
    found = {dependant.call}
    for dependency in dependant.dependencies:
        found |= _calls(dependency)
    return found


def test_403_is_listed_where_a_role_is_checked(document: dict[str, Any]) -> None:
    """Any valid token may call the other routes (the Flux tools, the task registry), so
    they cannot answer 403; get_worker_metadata refuses another worker's token in the
    route itself."""
    for route in service_routes():
        if not isinstance(route, APIRoute) or not route.include_in_schema:
            continue
        checks_role = bool(_calls(route.dependant) & ROLE_CHECKS)
        for method in route.methods:
            responses = document["paths"][route.path][method.lower()]["responses"]
            assert ("403" in responses) == checks_role or route.name == "get_metadata", (
                method,
                route.path,
            )


def test_the_problem_schema_has_the_errors_array(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    (array,) = [
        choice
        for choice in schemas["Problem"]["properties"]["errors"]["anyOf"]
        if choice.get("type") == "array"
    ]
    assert array["items"] == {"$ref": "#/components/schemas/FieldProblem"}
    assert {"field", "message", "type", "notation", "position", "expected", "input"} == set(
        schemas["FieldProblem"]["properties"]
    )


def _problem(response: Any) -> Problem:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == PROBLEM_JSON
    return Problem.model_validate(response.json())


def test_a_notation_error_is_a_problem_with_its_position(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    problem = _problem(
        client.post("/v1/match", json={"resources": "language java"}, headers=admin_headers)
    )
    assert problem.errors is not None
    (error,) = problem.errors
    assert (error.field, error.notation, error.input) == (
        "body.resources",
        "momotor-tags",
        "language java",
    )
    assert error.position is not None
    assert error.expected


@pytest.mark.parametrize(
    ("content_type", "body", "message"),
    [
        # RFC 8259 section 8.1: JSON exchanged between systems is UTF-8.
        ("application/json", b'{"resources": "\xff"}', "the body is not UTF-8 JSON"),
        ("application/json; charset=latin-1", '{"resources": "é"}'.encode("latin-1"), "UTF-8"),
        ("application/json", b'{"resources": ', "the body is not valid JSON"),
        ("text/plain", b'{"resources": "a: x"}', "Content-Type: application/json"),
    ],
)
def test_a_body_that_is_not_utf8_json_is_a_422_problem(
    client: TestClient,
    admin_headers: dict[str, str],
    content_type: str,
    body: bytes,
    message: str,
) -> None:
    """FastAPI answers undecodable bytes with a 400 that no operation documents; the API
    answers 422, as for any other invalid body, and stores nothing."""
    headers = {**admin_headers, "content-type": content_type}
    problem = _problem(client.post("/v1/jobs", content=body, headers=headers))
    assert problem.errors is not None
    (error,) = problem.errors
    assert error.field == "body"
    assert message in error.message
    assert client.get("/v1/jobs", headers=admin_headers).json()["items"] == []


def test_a_json_syntax_error_names_its_position(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    headers = {**admin_headers, "content-type": "application/json"}
    problem = _problem(client.post("/v1/match", content=b'{"resources" "a"}', headers=headers))
    assert problem.errors is not None
    assert problem.errors[0].position == len('{"resources" ')


def _examples(document: dict[str, Any], name: str) -> list[Any]:
    examples: list[Any] = document["components"]["schemas"][name]["examples"]
    return examples


def test_the_request_examples_work_together(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    """The examples describe one cluster: its workers, task types, attribute, values and
    parallel environment are accepted, and then each example job waits for a worker."""
    document = client.app.openapi()  # type: ignore[attr-defined]
    a = admin_headers

    def ok(response: Any, status: int) -> Any:
        assert response.status_code == status, response.text
        is_json = response.headers.get("content-type") == "application/json"
        return response.json() if is_json else response.text

    tokens = {
        worker["name"]: ok(client.post("/v1/workers", json=worker, headers=a), 201)["token"]
        for worker in _examples(document, "WorkerIn")
    }
    for token in _examples(document, "TokenCreate"):
        ok(client.post("/v1/tokens", json=token, headers=a), 201)
    for task in _examples(document, "TaskIn"):
        ok(client.post("/v1/tasks", json=task, headers=a), 201)
    (static,) = _examples(document, "StaticMetadataIn")
    ok(client.put("/v1/workers/w1/metadata", json=static, headers=a), 200)
    (dynamic,) = _examples(document, "DynamicMetadataIn")
    w1 = {"Authorization": f"Bearer {tokens['w1']}"}
    ok(client.post("/v1/workers/w1/metadata", json=dynamic, headers=w1), 200)
    (attribute,) = _examples(document, "AttributeIn")
    ok(client.post("/v1/attributes", json=attribute, headers=a), 201)
    global_values, host_values, queue_values = _examples(document, "ValuesIn")
    ok(client.put("/v1/values/global", json=global_values, headers=a), 200)
    ok(client.put("/v1/values/hosts/exec1", json=host_values, headers=a), 200)
    ok(client.put("/v1/values/queues/all.q/exec1", json=queue_values, headers=a), 200)
    (pe,) = _examples(document, "PeIn")
    ok(client.put("/v1/pes/mpi", json=pe, headers=a), 200)
    for job in _examples(document, "JobIn"):
        assert ok(client.post("/v1/jobs", json=job, headers=a), 201)["state"] == "waiting", job
    for path, name in [
        ("/v1/flux/shape", "ShapeIn"),
        ("/v1/flux/requires", "RequiresIn"),
        ("/v1/flux/constraint", "ConstraintIn"),
    ]:
        for example in _examples(document, name):
            ok(client.post(path, json=example, headers=a), 200)
