"""Demand for autoscalers (issue 40): ``jobmatch_demand_*`` in /metrics and
``GET /v1/demand/scale``, the shape KEDA's metrics-api scaler reads, on issue 40's cluster."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api import demand_gauges
from app.api.app import create_app
from app.api.demand_gauges import compute_figures
from app.db.engine import Database
from app.settings import Settings
from tests.api.test_demand import JAVA17_BOX, NODE_8CORE, _cluster, _put
from tests.support.http_api import assert_problem, define_license, register, submit
from tests.support.table_digest import table_digest


def _client(settings: Settings, database: Database, seconds: float) -> Iterator[TestClient]:
    tuned = settings.model_copy(update={"demand_metrics_seconds": seconds})
    with TestClient(create_app(tuned, database=database), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture
def cached(settings: Settings, database: Database) -> Iterator[TestClient]:
    """An app whose demand figures stay an hour: no test here outlives them."""
    yield from _client(settings, database, 3600)


@pytest.fixture
def uncached(settings: Settings, database: Database) -> Iterator[TestClient]:
    yield from _client(settings, database, 0)


def _samples(text: str, family: str) -> dict[str, float]:
    """The samples of one metric family, by their label text (``answer="never",...``)."""
    found = {}
    for line in text.splitlines():
        if line.startswith(family + "{"):
            labels, value = line[len(family) + 1 :].rsplit("} ", 1)
            found[labels] = float(value)
    return found


def _templates(client: TestClient, admin: dict[str, str]) -> None:
    assert _put(client, admin, "java17-box", JAVA17_BOX).status_code == 201
    assert _put(client, admin, "node-8core", NODE_8CORE).status_code == 201


def test_metrics_show_demand_by_answer_category_and_template(
    cached: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    _templates(cached, admin_headers)
    jobs = _cluster(cached, admin_headers)
    before = table_digest(database)
    text = cached.get("/metrics").text
    assert table_digest(database) == before  # the simulation was rolled back
    category = {name: job["category_id"] for name, job in jobs.items()}
    assert _samples(text, "jobmatch_demand_jobs") == {
        f'answer="capacity",category="{category["java11"]}"': 2,
        f'answer="never",category="{category["java17"]}"': 1,
        f'answer="never",category="{category["three"]}"': 1,
        f'answer="ready",category="{category["java12"]}"': 1,
    }
    # The suggested mix of GET /v1/demand?templates=*: one of each.
    assert _samples(text, "jobmatch_demand_workers") == {
        'template="java17-box"': 1,
        'template="node-8core"': 1,
    }
    assert "jobmatch_demand_computed_timestamp_seconds " in text

    # Within the TTL a scrape serves the figures it has: the new job shows in jobmatch_jobs
    # (read now) but not yet in the demand, and nothing was computed again.
    gauges = cached.app.state.demand_gauges  # type: ignore[attr-defined]
    assert gauges.computations == 1
    submit(cached, admin_headers, "language: java; java: 11")
    again = cached.get("/metrics").text
    assert _samples(again, "jobmatch_jobs")['state="waiting"'] == 6
    assert _samples(again, "jobmatch_demand_jobs") == _samples(text, "jobmatch_demand_jobs")
    assert gauges.computations == 1


def test_metrics_without_demand_when_its_setting_is_zero(
    uncached: TestClient, admin_headers: dict[str, str]
) -> None:
    _templates(uncached, admin_headers)
    _cluster(uncached, admin_headers)
    text = uncached.get("/metrics").text
    assert 'jobmatch_jobs{state="waiting"}' in text
    assert "jobmatch_demand" not in text


def test_categories_past_the_labelled_ones_are_summed_as_other(
    client: TestClient,
    admin_headers: dict[str, str],
    database: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Label cardinality is bounded: past the first categories (500; 2 here) the jobs are
    summed per answer under category="other"."""
    jobs = _cluster(client, admin_headers)
    monkeypatch.setattr(demand_gauges, "MAX_CATEGORY_LABELS", 2)
    figures = compute_figures(database, "first")
    labelled = sorted(job["category_id"] for job in jobs.values())
    first, second = sorted(set(labelled))[:2]
    # The cluster's categories by id: the running java-11 job's (java11), java12, java17,
    # the 3-node shape; java17 failed at submission (no template), so it does not wait.
    assert figures.jobs == {
        ("capacity", str(first)): 2,
        ("ready", str(second)): 1,
        ("never", "other"): 1,
    }
    assert sum(figures.jobs.values()) == sum(figures.totals.values()) == 4
    assert figures.workers == {} and figures.unrunnable == 0


def _gjson(document: Any, path: str) -> Any:
    """A GJSON path of plain keys (KEDA's metrics-api `valueLocation`, read with
    github.com/tidwall/gjson): dot-separated, a literal dot escaped as ``\\.``."""
    keys = [key.replace("\0", ".") for key in path.replace("\\.", "\0").split(".")]
    for key in keys:
        document = document[key]
    return document


def test_scale_endpoint_puts_each_figure_at_a_path_keda_reads(
    cached: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    _templates(cached, admin_headers)
    assert _put(cached, admin_headers, "gpu.box", {"resources": "gpu: ?a100"}).status_code == 201
    _cluster(cached, admin_headers)
    before = table_digest(database)
    response = cached.get("/v1/demand/scale", headers=admin_headers)
    assert response.status_code == 200, response.text
    assert table_digest(database) == before
    answer = response.json()
    assert answer["templates"] == {
        "gpu.box": {"workers": 0, "jobs": 0},
        "java17-box": {"workers": 1, "jobs": 1},
        "node-8core": {"workers": 1, "jobs": 1},
    }
    assert answer["jobs"] == {"never": 2, "capacity": 2, "policy": 0, "ready": 1, "waiting": 5}
    assert (answer["workers"], answer["unrunnable"]) == (2, 2)
    assert 0 <= answer["age_seconds"] < 3600
    assert _gjson(answer, "templates.java17-box.workers") == 1
    assert _gjson(answer, "templates.gpu\\.box.workers") == 0
    assert _gjson(answer, "jobs.capacity") == 2
    # Served from the figures /metrics shows: one computation for both.
    cached.get("/metrics")
    assert cached.app.state.demand_gauges.computations == 1  # type: ignore[attr-defined]

    # Named templates are simulated now, for this request only.
    alone = cached.get("/v1/demand/scale?templates=java17-box", headers=admin_headers).json()
    assert alone["templates"] == {"java17-box": {"workers": 1, "jobs": 1}}
    assert alone["unrunnable"] == 3  # the 3-node job and the java-11 ones


def test_scale_endpoint_computes_each_answer_when_the_cache_is_off(
    uncached: TestClient, admin_headers: dict[str, str]
) -> None:
    _templates(uncached, admin_headers)
    jobs = _cluster(uncached, admin_headers)
    first = uncached.get("/v1/demand/scale", headers=admin_headers).json()
    assert first["templates"]["java17-box"] == {"workers": 1, "jobs": 1}
    submit(uncached, admin_headers, "language: java; java: 17")
    second = uncached.get("/v1/demand/scale", headers=admin_headers).json()
    # A java17-box has 4 slots: one new worker starts both java-17 jobs.
    assert second["templates"]["java17-box"] == {"workers": 1, "jobs": 2}
    assert second["jobs"]["never"] == first["jobs"]["never"] + 1
    assert jobs["java17"]["state"] == "waiting"


def test_scale_endpoint_is_for_the_admin_and_checks_its_query(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    assert_problem(client.get("/v1/demand/scale"), 401)
    token = client.post(
        "/v1/tokens", json={"role": "submitter", "subject": "alice"}, headers=admin_headers
    )
    assert token.status_code == 201, token.text
    submitter = {"Authorization": f"Bearer {token.json()['token']}"}
    assert_problem(client.get("/v1/demand/scale", headers=submitter), 403)
    unknown = assert_problem(
        client.get("/v1/demand/scale?templates=nope", headers=admin_headers), 422
    )
    assert unknown["errors"][0]["field"] == "query.templates"
    bad = assert_problem(client.get("/v1/demand/scale?templates=a,,b", headers=admin_headers), 422)
    assert "item 2" in bad["errors"][0]["message"]


def test_a_licence_that_more_hosts_would_not_help_is_unrunnable(
    cached: TestClient, admin_headers: dict[str, str]
) -> None:
    """docs/demand.md's Grid Engine example: a global consumable licence (2) and two 2-slot
    hosts, all busy; five jobs ask -l lic=1, four ask nothing. A burst host would start
    the plain jobs, never the licence ones (aws-parallelcluster#541: more nodes would not
    help): demand suggests one host, and the licence jobs are unrunnable."""
    define_license(cached, admin_headers)
    values = cached.put(
        "/v1/values/global", json={"complex_values": {"lic": "2"}}, headers=admin_headers
    )
    assert values.status_code == 200, values.text
    hosts = {name: register(cached, admin_headers, name, slots=2) for name in ("h1", "h2")}
    assert _put(cached, admin_headers, "host-2slot", {"slots": 2}).status_code == 201
    licensed = [submit(cached, admin_headers, hard="lic=1") for _ in range(5)]
    plain = [submit(cached, admin_headers) for _ in range(4)]
    for name, headers in hosts.items():
        for _ in range(2):
            assert cached.post(f"/v1/workers/{name}/pull", headers=headers).status_code == 200
    answer = cached.get("/v1/demand/scale", headers=admin_headers).json()
    assert answer["templates"] == {"host-2slot": {"workers": 1, "jobs": 2}}
    assert answer["jobs"]["capacity"] == answer["jobs"]["waiting"] == 5
    assert answer["unrunnable"] == 3
    demand = cached.get("/v1/demand?templates=*", headers=admin_headers).json()
    assert demand["suggestion"]["unrunnable"] == [
        {"category_id": licensed[0]["category_id"], "jobs": 3, "beyond_limits": False}
    ]
    # What the three licence jobs left waiting would take: a licence per slot each.
    (licence,) = [c for c in demand["items"] if c["category_id"] == licensed[0]["category_id"]]
    assert licence["need"] == {"slots": 3, "nodes": 3, "vertices": {}, "consumables": {"lic": 3.0}}
    (plain_need,) = [
        c["need"] for c in demand["items"] if c["category_id"] == plain[0]["category_id"]
    ]
    assert plain_need["consumables"] == {}
    assert demand["suggestion"]["mix"][0]["categories"] == [plain[0]["category_id"]]


LINUX_ARM64 = {
    "resources": "os: ?linux; arch: ?arm64; toolchain: ?gcc, ?rust",
    "slots": 2,
    "cost": 1.0,
    "max_count": 10,
}
MACOS = {"resources": "os: ?macos; arch: ?arm64; toolchain: ?xcode", "cost": 4.0, "max_count": 3}


def test_a_ci_farm_scales_runners_by_labels(
    cached: TestClient, admin_headers: dict[str, str]
) -> None:
    """docs/demand.md's CI farm: an amd64 runner exists, arm64 and macOS runners come from
    templates; busy amd64 work is capacity no template adds, arm64 and macOS work is never
    today and counts its runners, and a Windows job fails at submission (neither a
    registered worker nor a template could run it)."""
    runner = register(cached, admin_headers, "amd64-1", "os: ?linux; arch: ?amd64; toolchain: ?gcc")
    assert _put(cached, admin_headers, "linux-arm64", LINUX_ARM64).status_code == 201
    assert _put(cached, admin_headers, "macos", MACOS).status_code == 201
    amd64 = [submit(cached, admin_headers, "os: linux; arch: amd64") for _ in range(2)]
    assert cached.post("/v1/workers/amd64-1/pull", headers=runner).json()["id"] == amd64[0]["id"]
    arm64 = [
        submit(cached, admin_headers, "os: linux; arch: arm64; toolchain: rust") for _ in range(3)
    ]
    macos = submit(cached, admin_headers, "os: macos; toolchain: xcode")
    windows = submit(cached, admin_headers, "os: windows")
    assert [job["state"] for job in (*arm64, macos, windows)] == [*["waiting"] * 4, "failed"]

    answer = cached.get("/v1/demand/scale", headers=admin_headers).json()
    assert answer["templates"] == {
        "linux-arm64": {"workers": 2, "jobs": 3},
        "macos": {"workers": 1, "jobs": 1},
    }
    assert answer["jobs"] == {"never": 4, "capacity": 1, "policy": 0, "ready": 0, "waiting": 5}
    assert (answer["workers"], answer["unrunnable"]) == (3, 1)
    demand = cached.get("/v1/demand?templates=*", headers=admin_headers).json()
    found = {item["category_id"]: item for item in demand["items"]}
    assert found[arm64[0]["category_id"]]["reasons"] == [
        "no worker offers tag 'arm64' in group 'arch'",
        "no worker offers tag 'rust' in group 'toolchain'",
        "waiting for a worker like template linux-arm64",
    ]
    assert found[amd64[1]["category_id"]]["answer"] == "capacity"
    assert demand["suggestion"]["unrunnable"] == [
        {"category_id": amd64[1]["category_id"], "jobs": 1, "beyond_limits": False}
    ]
