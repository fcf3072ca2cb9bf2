"""A what-if of groups agrees with reality (issue 41, as tests/api/test_whatif_agrees.py
holds workers and jobs to it): under ``group-share,fair-share,priority,age``, on
generated memberships, weights and usage, a change set of ``set_weights`` (with and
without ``group``) and ``set_group_weights`` stores nothing, and applying it for real
through ``PUT /v1/shares/{submitter}`` and ``PUT /v1/groups/{name}`` makes the worker's
real pull take the job the what-if said it would."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.db.engine import Database
from tests.support.table_digest import empty_tables, table_digest
from tests.support.thoroughness import examples

SUBMITTERS = ["s0", "s1", "s2", "s3"]
GROUPS = ["g0", "g1", "g2"]
#: A submitter's group: none, or one of the groups.
MEMBERSHIP = st.sampled_from([None, *GROUPS])
WEIGHTS = st.sampled_from([0.5, 1, 3, 1e3])


@st.composite
def standings(draw: st.DrawFn) -> dict[str, Any]:
    """Each submitter's group, weight, jobs run to their end (its usage: slots times the
    moments they ran) and jobs that wait; each group's weight."""
    return {
        "members": {s: draw(MEMBERSHIP) for s in SUBMITTERS},
        "weights": {s: draw(WEIGHTS) for s in SUBMITTERS},
        "group_weights": {g: draw(WEIGHTS) for g in GROUPS[:2]},
        # The slots of each job run, per submitter: more slots, more usage. Each runs
        # one at least: a submitter that used nothing goes first whatever the weights.
        "ran": {
            s: draw(st.lists(st.integers(min_value=1, max_value=3), min_size=1, max_size=2))
            for s in SUBMITTERS
        },
        "waiting": {s: draw(st.integers(min_value=0, max_value=2)) for s in SUBMITTERS},
    }


@st.composite
def change_sets(draw: st.DrawFn) -> dict[str, Any]:
    """Weights of some submitters, each moved to a group, out of one, or left where it
    is; weights of some groups (g2 new)."""
    moved = draw(st.lists(st.sampled_from(SUBMITTERS), max_size=3, unique=True))
    set_weights = []
    for submitter in moved:
        item: dict[str, Any] = {"submitter": submitter, "weight": draw(WEIGHTS)}
        if draw(st.booleans()):
            item["group"] = draw(MEMBERSHIP)
        set_weights.append(item)
    groups = draw(st.lists(st.sampled_from(GROUPS), max_size=2, unique=True))
    return {
        "set_weights": set_weights,
        "set_group_weights": [{"group": g, "weight": draw(WEIGHTS)} for g in groups],
        "pull_workers": ["w"],
    }


def _ok(response: Any) -> Any:
    assert response.status_code in (200, 201), response.text
    return response.json()


def _build(client: TestClient, admin: dict[str, str], standing: dict[str, Any]) -> str:
    """The standings through the real routes; the worker's token."""
    worker = _ok(client.post("/v1/workers", json={"name": "w", "slots": 3}, headers=admin))
    w = {"Authorization": f"Bearer {worker['token']}"}
    for name, group in standing["members"].items():
        body = {"weight": standing["weights"][name], "group": group}
        _ok(client.put(f"/v1/shares/{name}", json=body, headers=admin))
    for group, weight in standing["group_weights"].items():
        _ok(client.put(f"/v1/groups/{group}", json={"weight": weight}, headers=admin))
    tokens = {
        name: _ok(
            client.post("/v1/tokens", json={"role": "submitter", "subject": name}, headers=admin)
        )["token"]
        for name in SUBMITTERS
    }
    for name, runs in standing["ran"].items():
        auth = {"Authorization": f"Bearer {tokens[name]}"}
        for slots in runs:
            job = _ok(client.post("/v1/jobs", json={"slots": slots}, headers=auth))["id"]
            assert _ok(client.post("/v1/workers/w/pull", headers=w))["id"] == job
            finish = {"outcome": "finished"}
            _ok(client.post(f"/v1/jobs/{job}/finish", json=finish, headers=w))
    for name, count in standing["waiting"].items():
        auth = {"Authorization": f"Bearer {tokens[name]}"}
        for _ in range(count):
            _ok(client.post("/v1/jobs", json={}, headers=auth))
    return str(worker["token"])


def _apply(client: TestClient, admin: dict[str, str], changes: dict[str, Any]) -> None:
    """The change set through the routes it names, in the what-if's order."""
    for item in changes["set_weights"]:
        body = {k: v for k, v in item.items() if k != "submitter"}
        _ok(client.put(f"/v1/shares/{item['submitter']}", json=body, headers=admin))
    for item in changes["set_group_weights"]:
        body = {"weight": item["weight"]}
        _ok(client.put(f"/v1/groups/{item['group']}", json=body, headers=admin))


@settings(
    max_examples=examples(15),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(standing=standings(), changes=change_sets())
def test_applying_group_changes_gives_the_pull_the_whatif_predicted(
    group_client: TestClient,
    admin_headers: dict[str, str],
    database: Database,
    standing: dict[str, Any],
    changes: dict[str, Any],
) -> None:
    empty_tables(database)
    client, admin = group_client, admin_headers
    token = _build(client, admin, standing)
    digest = table_digest(database)

    answer = _ok(client.post("/v1/whatif", json=changes, headers=admin))

    assert table_digest(database) == digest
    (predicted,) = answer["first_pulls"]
    _apply(client, admin, changes)
    pulled = client.post("/v1/workers/w/pull", headers={"Authorization": f"Bearer {token}"})
    assert pulled.status_code in (200, 204), pulled.text
    got = pulled.json()["id"] if pulled.status_code == 200 else None
    assert got == predicted["job"], (answer, _ok(client.get("/v1/shares", headers=admin)))
