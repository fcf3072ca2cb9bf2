"""A what-if agrees with reality (issue 24 item 3): on generated clusters and change sets,
applying the change set for real through the routes it names (POST /v1/workers, PATCH,
drain, DELETE ?requeue=true, POST /v1/jobs) gives exactly the runnable waiting jobs the
what-if predicted, per job (each one's ``GET /v1/jobs/{id}/explain`` can-run-now) and per
category, and the first worker's real pull gets the job the what-if said it would."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.db.engine import Database
from tests.support.table_digest import empty_tables, table_digest
from tests.support.thoroughness import examples

OFFERS = ["language: ?java, ?python", "language: ?java", "language: ?python", "language: ?c"]
ASKS = ["language: java", "language: python", "language: ?java", "", "language: c"]


@st.composite
def clusters(draw: st.DrawFn) -> dict[str, Any]:
    """Workers (with 1 or 2 slots, some draining), jobs each worker runs, waiting jobs."""
    count = draw(st.integers(min_value=1, max_value=3))
    workers = [
        {
            "name": f"w{i}",
            "resources": draw(st.sampled_from(OFFERS)),
            "slots": draw(st.integers(min_value=1, max_value=2)),
        }
        for i in range(count)
    ]
    return {
        "workers": workers,
        "pulls": draw(st.lists(st.sampled_from([w["name"] for w in workers]), max_size=3)),
        "waiting": draw(
            st.lists(
                st.tuples(st.sampled_from(ASKS), st.integers(min_value=1, max_value=2)),
                max_size=4,
            )
        ),
        "draining": draw(st.lists(st.sampled_from([w["name"] for w in workers]), max_size=1)),
    }


@st.composite
def change_sets(draw: st.DrawFn, names: list[str]) -> dict[str, Any]:
    """A change set over the workers ``names``: new workers, changed ones (resources, or
    more slots than any had), drained and removed ones, new jobs."""
    added = [
        {
            "name": f"new{i}",
            "resources": draw(st.sampled_from(OFFERS)),
            "slots": draw(st.integers(min_value=1, max_value=2)),
        }
        for i in range(draw(st.integers(min_value=0, max_value=2)))
    ]
    changed_names = draw(st.lists(st.sampled_from(names), max_size=2, unique=True))
    changed = [
        draw(
            st.sampled_from(
                [{"name": name, "resources": offer} for offer in OFFERS]
                + [{"name": name, "slots": 3}, {"name": name, "state": "active"}]
            )
        )
        for name in changed_names
    ]
    every = names + [w["name"] for w in added]
    return {
        "add_workers": added,
        "change_workers": changed,
        "drain_workers": draw(st.lists(st.sampled_from(every), max_size=2, unique=True)),
        "remove_workers": draw(st.lists(st.sampled_from(every), max_size=2, unique=True)),
        "add_jobs": [
            {"resources": ask, "slots": slots}
            for ask, slots in draw(
                st.lists(
                    st.tuples(st.sampled_from(ASKS), st.integers(min_value=1, max_value=2)),
                    max_size=3,
                )
            )
        ],
    }


def _ok(response: Any, *statuses: int) -> Any:
    assert response.status_code in (statuses or (200,)), response.text
    return response.json() if response.content else None


def _build(client: TestClient, admin: dict[str, str], cluster: dict[str, Any]) -> None:
    tokens = {}
    for worker in cluster["workers"]:
        tokens[worker["name"]] = _ok(client.post("/v1/workers", json=worker, headers=admin), 201)[
            "token"
        ]
    for name in cluster["pulls"]:
        submit = client.post("/v1/jobs", json={"resources": "language: ?c"}, headers=admin)
        _ok(submit, 201)
        pulled = client.post(
            f"/v1/workers/{name}/pull", headers={"Authorization": f"Bearer {tokens[name]}"}
        )
        assert pulled.status_code in (200, 204), pulled.text
    for ask, slots in cluster["waiting"]:
        _ok(client.post("/v1/jobs", json={"resources": ask, "slots": slots}, headers=admin), 201)
    for name in cluster["draining"]:
        _ok(client.patch(f"/v1/workers/{name}", json={"state": "draining"}, headers=admin))


def _waiting(client: TestClient, admin: dict[str, str]) -> dict[int, int]:
    """Every waiting job's id and category."""
    page = _ok(client.get("/v1/jobs?state=waiting&limit=500", headers=admin))
    return {job["id"]: job["category_id"] for job in page["items"]}


def _runnable(client: TestClient, admin: dict[str, str], job_ids: list[int]) -> set[int]:
    """The waiting jobs whose explanation says some worker can run them now, or after the
    jobs that go first there (issue 35: outranked)."""
    summaries = [
        _ok(client.get(f"/v1/jobs/{job_id}/explain", headers=admin))["summary"]
        for job_id in job_ids
    ]
    return {
        job_id
        for job_id, summary in zip(job_ids, summaries, strict=True)
        if summary["can_run_now"] + summary["outranked"] > 0
    }


def _apply(
    client: TestClient, admin: dict[str, str], changes: dict[str, Any]
) -> tuple[list[int], dict[str, str]]:
    """The change set through the real routes, in the what-if's order; the ids of the
    added jobs and the tokens of the added workers."""
    tokens = {}
    for worker in changes["add_workers"]:
        # The what-if replaces a worker of an existing name whole, as replace=true does.
        tokens[worker["name"]] = _ok(
            client.post("/v1/workers?replace=true", json=worker, headers=admin), 200, 201
        )["token"]
    for change in changes["change_workers"]:
        body = {k: v for k, v in change.items() if k != "name"}
        _ok(client.patch(f"/v1/workers/{change['name']}", json=body, headers=admin))
    for name in changes["drain_workers"]:
        _ok(client.patch(f"/v1/workers/{name}", json={"state": "draining"}, headers=admin))
    for name in changes["remove_workers"]:
        _ok(client.delete(f"/v1/workers/{name}?requeue=true", headers=admin), 204)
    added = [
        _ok(client.post("/v1/jobs", json=job, headers=admin), 201)["id"]
        for job in changes["add_jobs"]
    ]
    return added, tokens


def _counts(waiting: dict[int, int], runnable: set[int]) -> dict[int, tuple[int, int]]:
    counts: dict[int, tuple[int, int]] = {}
    for job_id, category in waiting.items():
        total, ready = counts.get(category, (0, 0))
        counts[category] = (total + 1, ready + (job_id in runnable))
    return counts


@settings(
    max_examples=examples(15),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data(), cluster=clusters())
def test_applying_the_change_set_gives_what_the_whatif_predicted(
    client: TestClient,
    admin_headers: dict[str, str],
    database: Database,
    data: st.DataObject,
    cluster: dict[str, Any],
) -> None:
    empty_tables(database)
    admin = admin_headers
    _build(client, admin, cluster)
    changes = data.draw(change_sets([w["name"] for w in cluster["workers"]]))
    waiting_before = _waiting(client, admin)
    runnable_before = _runnable(client, admin, list(waiting_before))
    digest = table_digest(database)

    answer = _ok(client.post("/v1/whatif", json=changes, headers=admin))

    assert table_digest(database) == digest
    real_ids, tokens = _apply(client, admin, changes)
    provisional = {
        job["id"]: real for job, real in zip(answer["added_jobs"], real_ids, strict=True)
    }
    waiting_after = _waiting(client, admin)
    runnable_after = _runnable(client, admin, list(waiting_after))

    def real(ids: list[int]) -> set[int]:
        return {provisional.get(job_id, job_id) for job_id in ids}

    assert real(answer["runnable_now"]) == runnable_after - runnable_before
    assert real(answer["no_longer_runnable"]) == runnable_before - runnable_after
    states = [job["state"] for job in answer["added_jobs"]]
    assert states == ["waiting" if job_id in waiting_after else "failed" for job_id in real_ids]
    # Per category: a category that had waiting jobs keeps its id; a new one is named by
    # the provisional category of an added job.
    # A job that failed at submission has no waiting category to name (it may share an
    # existing category, which then keeps its id).
    new_categories = {
        job["category_id"]: waiting_after[real_id]
        for job, real_id in zip(answer["added_jobs"], real_ids, strict=True)
        if real_id in waiting_after
    }
    predicted = {
        new_categories.get(c["category_id"], c["category_id"]): (
            (c["waiting_before"], c["runnable_before"]),
            (c["waiting_after"], c["runnable_after"]),
        )
        for c in answer["categories"]
    }
    then, now = _counts(waiting_before, runnable_before), _counts(waiting_after, runnable_after)
    assert predicted == {
        category: (then.get(category, (0, 0)), now.get(category, (0, 0)))
        for category in then.keys() | now.keys()
    }
    # The first worker that pulls gets what the what-if said it would.
    if answer["first_pulls"]:
        first = answer["first_pulls"][0]
        token = (
            tokens.get(first["worker"])
            or _ok(
                client.post(
                    "/v1/tokens", json={"role": "worker", "subject": first["worker"]}, headers=admin
                ),
                201,
            )["token"]
        )
        pulled = client.post(
            f"/v1/workers/{first['worker']}/pull", headers={"Authorization": f"Bearer {token}"}
        )
        got = pulled.json()["id"] if pulled.status_code == 200 else None
        assert got == (provisional.get(first["job"], first["job"]) if first["job"] else None)
