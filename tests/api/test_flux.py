"""Flux notations over HTTP and the CLI: jobs with constraints and shapes, the tool
endpoints, and precise 422s that store nothing (issue 5)."""

from __future__ import annotations

import json

import pytest
import yaml
from fastapi.testclient import TestClient
from sqlalchemy import func, select, text
from typer.testing import CliRunner

from app import cli as cli_module
from app.db.engine import Database
from app.db.models import Category, Job
from tests.support.http_api import assert_problem


def test_worker_properties_and_constrained_jobs(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    for name, rank, props in (("node0", 0, ["ssd"]), ("node1", 1, []), ("node2", 2, ["ssd"])):
        response = client.post(
            "/v1/workers",
            json={"name": name, "rank": rank, "properties": props},
            headers=admin_headers,
        )
        assert response.status_code == 201 and response.json()["properties"] == props
    job = client.post(
        "/v1/jobs", json={"requires": "host:node[0-1] ssd"}, headers=admin_headers
    ).json()
    assert job["constraint"] == "host:node[0-1] ssd" and job["constraint_syntax"] == "rfc35"
    items = client.get(f"/v1/jobs/{job['id']}/candidates", headers=admin_headers).json()["items"]
    assert [i["worker"] for i in items] == ["node0"]
    job = client.post(
        "/v1/jobs", json={"constraint": {"not": [{"ranks": ["0-1"]}]}}, headers=admin_headers
    ).json()
    items = client.get(f"/v1/jobs/{job['id']}/candidates", headers=admin_headers).json()["items"]
    assert [i["worker"] for i in items] == ["node2"]
    nobody = client.post(
        "/v1/jobs", json={"constraint": {"hostlist": ["gpu[0-9]"]}}, headers=admin_headers
    ).json()
    assert nobody["failure_reason"] == "No suitable worker found"


def test_jobs_with_shapes_store_vertices(
    client: TestClient,
    admin_headers,  # type: ignore[no-untyped-def]
    database: Database,
) -> None:
    # A worker with an inventory: one without takes part in no job on several nodes, and
    # the job would fail at submission (issue 35).
    client.post(
        "/v1/workers",
        json={"name": "w", "inventory": "node/socket=2/core=4"},
        headers=admin_headers,
    )
    job = client.post(
        "/v1/jobs",
        json={"shape": "slot=4{nodelevel}/node{-x}/socket=2+/core=4+"},
        headers=admin_headers,
    ).json()
    assert job["state"] == "waiting" and job["shape"].startswith("slot=4")
    with database.transaction(write=False) as session:
        vertices = session.execute(
            text(
                "SELECT type, label, min_count, depth FROM category_resource_vertices "
                "ORDER BY position"
            )
        ).all()
    assert [tuple(v) for v in vertices] == [
        ("slot", "nodelevel", 4, 0),
        ("node", None, 1, 1),
        ("socket", None, 2, 2),
        ("core", None, 4, 3),
    ]
    same = client.post(
        "/v1/jobs",
        json={
            "jobspec": json.loads(
                json.dumps(
                    client.post(
                        "/v1/flux/shape",
                        json={"shape": "slot=4{nodelevel}/node{-x}/socket=2+/core=4+"},
                        headers=admin_headers,
                    ).json()["resources"]
                )
            )
        },
        headers=admin_headers,
    ).json()
    assert same["category_id"] == job["category_id"]


@pytest.mark.parametrize(
    ("body", "field", "notation"),
    [
        ({"constraint": {"properties": ["a!b"]}}, "body.constraint", "rfc31-constraint"),
        ({"constraint": {"hostlist": ["node[1-"]}}, "body.constraint", "rfc31-constraint"),
        ({"requires": "host:"}, "body.requires", None),
        ({"shape": "slot=4/node{x"}, "body.shape", "rfc46-shape"),
        ({"jobspec": [{"type": "node", "count": 0}]}, "body.jobspec", "rfc14-jobspec"),
        ({"constraint": {}, "requires": "ssd"}, "body.requires", None),
    ],
    ids=["bad-property", "bad-hostlist", "bad-requires", "bad-shape", "bad-jobspec", "both"],
)
def test_invalid_flux_input_is_422_and_nothing_is_stored(  # type: ignore[no-untyped-def]
    client: TestClient, admin_headers, database: Database, body, field, notation
) -> None:
    client.post("/v1/workers", json={"name": "w"}, headers=admin_headers)
    problem = assert_problem(client.post("/v1/jobs", json=body, headers=admin_headers), 422)
    (error,) = problem["errors"]
    assert error["field"] == field
    if notation is not None:
        assert error["notation"] == notation
    with database.transaction(write=False) as session:
        assert session.scalar(select(func.count()).select_from(Job)) == 0
        assert session.scalar(select(func.count()).select_from(Category)) == 0


def test_shape_endpoint_json_and_yaml(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    response = client.post("/v1/flux/shape", json={"shape": "slot=4/node"}, headers=admin_headers)
    assert response.json() == {
        "shape": "slot=4/node",
        "resources": [
            {"type": "slot", "count": 4, "label": "default", "with": [{"type": "node", "count": 1}]}
        ],
    }
    as_yaml = client.post(
        "/v1/flux/shape", json={"shape": "slot=4/node", "format": "yaml"}, headers=admin_headers
    )
    assert as_yaml.headers["content-type"].startswith("application/yaml")
    assert yaml.safe_load(as_yaml.text) == response.json()["resources"]
    bad = assert_problem(
        client.post("/v1/flux/shape", json={"shape": "slot=4/node{"}, headers=admin_headers), 422
    )
    assert bad["errors"][0]["position"] is not None
    assert_problem(client.post("/v1/flux/shape", json={"shape": "node"}), 401)


def test_requires_and_constraint_endpoints(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    compiled = client.post(
        "/v1/flux/requires", json={"requires": "host:node[0-1] ssd"}, headers=admin_headers
    ).json()
    assert compiled == {
        "constraint": {"and": [{"hostlist": ["node[0-1]"]}, {"properties": ["ssd"]}]}
    }
    valid = client.post(
        "/v1/flux/constraint",
        json={"constraint": {"properties": ["b", "^a"]}},
        headers=admin_headers,
    ).json()
    assert valid == {"constraint": {"properties": ["b", "^a"]}}
    problem = assert_problem(
        client.post(
            "/v1/flux/constraint", json={"constraint": {"frob": []}}, headers=admin_headers
        ),
        422,
    )
    assert problem["errors"][0]["notation"] == "rfc31-constraint"


def test_cli_shape_and_requires() -> None:
    runner = CliRunner()
    result = runner.invoke(cli_module.cli, ["shape", "slot=4/node"])
    assert result.exit_code == 0
    assert json.loads(result.output)[0]["count"] == 4
    result = runner.invoke(cli_module.cli, ["shape", "slot=4/node", "--yaml"])
    assert yaml.safe_load(result.output)[0]["type"] == "slot"
    result = runner.invoke(cli_module.cli, ["requires", "host:node[0-1]", "ssd"])
    assert json.loads(result.output) == {
        "and": [{"hostlist": ["node[0-1]"]}, {"properties": ["ssd"]}]
    }
    result = runner.invoke(cli_module.cli, ["shape", "slot=4/node{"])
    assert result.exit_code == 2 and "error:" in result.output
