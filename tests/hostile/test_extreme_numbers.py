"""Extreme numbers in every notation and every endpoint that takes numbers (issue 19).

SQLite stores 64-bit INTEGERs and PostgreSQL 32-bit INTEGER or 64-bit BIGINT columns; a
number past what the column holds raised OverflowError (a 500) on SQLite, for example
``node=9223372036854775807/slot=...`` in an RFC 46 shape. Every such number must be a 422
that names the field, on both databases, and a refused request stores nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from app.db.engine import Database
from app.db.models import Job
from tests.support.http_api import register
from tests.support.thoroughness import examples

BIG = 9223372036854775807
#: Numbers at and past every bound the databases have, and text that only looks numeric.
EXTREMES: list[Any] = [
    0,
    -1,
    2**31 - 1,
    2**31,
    2**31 + 1,
    -(2**31) - 1,
    2**63 - 1,
    2**63,
    2**63 + 1,
    -(2**63) - 1,
    10**30,
    1.5,
    1e308,
    -1e308,
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
]
#: The detail of a 422 the database raised (a DataError), which names no field.
STORAGE_REFUSAL = "a value in the request cannot be stored"
numbers = st.one_of(
    st.sampled_from(EXTREMES),
    st.integers(min_value=-(2**70), max_value=2**70),
    # JSON has no NaN or Infinity numbers; EXTREMES sends them as text.
    st.floats(allow_nan=False, allow_infinity=False),
)


def _as_text(number: Any) -> str:
    return str(int(number)) if isinstance(number, float) and number.is_integer() else str(number)


def _bodies(n: Any) -> list[tuple[str, str, dict[str, Any]]]:
    """(method, path, body) of every request with a number a client chooses."""
    t = _as_text(n)
    return [
        ("POST", "/v1/jobs", {"shape": f"node={t}/slot={t}/core={t}"}),
        ("POST", "/v1/jobs", {"shape": f"slot={t}/core"}),
        ("POST", "/v1/jobs", {"shape": f"node[{t}]/slot"}),
        ("POST", "/v1/jobs", {"shape": f"node[1-{t}]/slot"}),
        ("POST", "/v1/match", {"shape": f"node={t}/slot={t}/core={t}"}),
        (
            "POST",
            "/v1/jobs",
            {"jobspec": [{"type": "slot", "count": n, "with": [{"type": "core", "count": n}]}]},
        ),
        (
            "POST",
            "/v1/jobs",
            {
                "jobspec": [
                    {
                        "type": "slot",
                        "count": {"min": 1, "max": n, "operator": "+", "operand": 1},
                        "label": "task",
                        "with": [{"type": "core", "count": 1}],
                    }
                ]
            },
        ),
        ("POST", "/v1/jobs", {"requires": f"rank:{t}"}),
        ("POST", "/v1/jobs", {"requires": f"host:node[{t}]"}),
        ("POST", "/v1/jobs", {"constraint": {"ranks": [t]}}),
        ("POST", "/v1/jobs", {"hard": f"h_vmem={t}"}),
        ("POST", "/v1/jobs", {"hard": f"slots={t}"}),
        ("POST", "/v1/jobs", {"hard": f"h_rt={t}"}),
        ("POST", "/v1/jobs", {"hard": f"h_vmem={t}G"}),
        ("POST", "/v1/jobs", {"hard": f"num_proc={t}"}),
        ("POST", "/v1/jobs", {"pe": "mpi", "pe_slots": f"1-{t}"}),
        ("POST", "/v1/jobs", {"pe": "mpi", "pe_slots": t}),
        ("POST", "/v1/jobs", {"resources": f"cpu: {t}"}),
        ("POST", "/v1/jobs", {"priority": n}),
        ("POST", "/v1/jobs", {"slots": n}),
        ("POST", "/v1/jobs", {"timeout": n}),
        ("POST", "/v1/match", {"slots": n}),
        ("POST", "/v1/match", {"hard": f"h_vmem={t}"}),
        ("POST", "/v1/workers", {"name": "wx", "slots": n}),
        ("POST", "/v1/workers", {"name": "wy", "rank": n}),
        ("POST", "/v1/workers", {"name": "wz", "resources": f"cpu: {t}"}),
        ("POST", "/v1/workers", {"name": "wi", "inventory": f"node={t}/core={t}"}),
        ("POST", "/v1/workers", {"name": "wj", "inventory": f"node/[core={t};gpu={t}]"}),
        ("POST", "/v1/workers", {"name": "wk", "inventory": [{"type": "node", "count": n}]}),
        ("POST", "/v1/workers", {"name": "wq", "queues": [{"name": "all.q", "slots": n}]}),
        ("POST", "/v1/tasks", {"name": "sbuild", "version": n}),
        ("POST", "/v1/tasks", {"name": "lint", "requirements": {"ge": ["system:cpu", n]}}),
        ("PUT", "/v1/workers/h1/metadata", {"metadata": {"system:cpu_count": n}}),
        ("PUT", "/v1/values/global", {"complex_values": {"h_vmem": t}}),
        ("PUT", "/v1/values/global", {"complex_values": {"num_proc": t}}),
        ("PUT", "/v1/values/global", {"complex_values": {"h_rt": t}}),
        ("PUT", "/v1/pes/mpi", {"allocation_rule": t, "slots": 4}),
        ("PUT", "/v1/pes/mpi2", {"allocation_rule": "$fill_up", "slots": n}),
        ("POST", "/v1/flux/shape", {"shape": f"node={t}/slot={t}/core={t}"}),
        ("POST", "/v1/flux/requires", {"requires": f"rank:0-{t}"}),
        ("POST", "/v1/flux/constraint", {"constraint": {"ranks": [f"0-{t}"]}}),
        ("GET", f"/v1/jobs?limit={t}&offset={t}", {}),
        ("GET", f"/v1/jobs/{t}", {}),
        ("GET", f"/v1/jobs?category={t}", {}),
        ("GET", f"/v1/workers?limit={t}&offset={t}", {}),
        ("GET", f"/v1/tokens?limit={t}&offset={t}", {}),
    ]


def _jobs(database: Database) -> int:
    with database.transaction(write=False) as session:
        return int(session.scalar(select(func.count()).select_from(Job)) or 0)


def _send(client: TestClient, headers: dict[str, str], method: str, path: str, body: Any) -> Any:
    if method == "GET":
        return client.get(path, headers=headers)
    return client.request(method, path, json=body, headers=headers)


def test_issue_probe_64_bit_shape_is_a_422_naming_the_field(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    register(client, admin_headers, "h1")
    shape = f"node={BIG}/slot={BIG}/core={BIG}"
    for path in ("/v1/jobs", "/v1/match"):
        response = client.post(path, json={"shape": shape}, headers=admin_headers)
        assert response.status_code == 422, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert "shape" in response.json()["detail"] or "count" in response.json()["detail"]
    assert _jobs(database) == 0


@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(number=numbers)
def test_property_extreme_numbers_never_500(
    client: TestClient, admin_headers: dict[str, str], database: Database, number: Any
) -> None:
    before = _jobs(database)
    for method, path, body in _bodies(number):
        response = _send(client, admin_headers, method, path, body)
        assert response.status_code < 500, (method, path, body, response.text)
        if response.status_code == 422:
            assert response.headers["content-type"].startswith("application/problem+json")
            if path == "/v1/jobs":
                assert _jobs(database) == before, (path, body)
        elif path == "/v1/jobs" and method == "POST" and response.status_code == 201:
            before += 1


@pytest.mark.parametrize("number", EXTREMES, ids=str)
def test_every_extreme_number_everywhere(
    client: TestClient, admin_headers: dict[str, str], database: Database, number: Any
) -> None:
    register(client, admin_headers, "h1")
    before = _jobs(database)
    for method, path, body in _bodies(number):
        response = _send(client, admin_headers, method, path, body)
        assert response.status_code < 500, (method, path, body, response.text)
        if response.status_code == 201 and path == "/v1/jobs":
            before += 1
        assert _jobs(database) == before, (method, path, body)
        if response.status_code == 422:
            # Refused by a range check naming the field, not by the database.
            assert STORAGE_REFUSAL not in response.text, (method, path, body)
