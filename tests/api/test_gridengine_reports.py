"""A worker's load report never erases what an administrator set (issue 35), over HTTP on
both databases.

An administrator sets values with ``PUT /v1/values/hosts/{host}`` (``complex_values``, and
``load_values`` for a host that reports none itself, as the README sets ``arch``); the
worker reports with ``PUT /v1/workers/{name}/load``. Each replaces only its own values.
Which one a match sees follows Grid Engine's within-object rules (the Complex Attribute
Specification of 2003, section 3, overriding attributes: a host's configured value
overrides its load value ``arch``; for ``mem_free`` a configured 1 GB beside a reported
4 GB gives 1 GB): a fixed value keeps its place beside a report, and an administrator's
load value stands in for the reported one of its attribute.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.support.http_api import submit

Headers = dict[str, str]


def _worker(client: TestClient, admin: Headers, name: str = "w1") -> Headers:
    body = {"name": name, "queues": [{"name": "all.q", "slots": 2}]}
    response = client.post("/v1/workers", json=body, headers=admin)
    assert response.status_code in (200, 201), response.text
    return {"Authorization": f"Bearer {response.json()['token']}"}


def _admin_sets(client: TestClient, admin: Headers, host: str, **kinds: dict[str, str]) -> bool:
    response = client.put(f"/v1/values/hosts/{host}", json=kinds, headers=admin)
    assert response.status_code == 200, response.text
    return bool(response.json()["static_changed"])


def _report(client: TestClient, worker: Headers, name: str, **values: str) -> bool:
    response = client.put(f"/v1/workers/{name}/load", json={"load_values": values}, headers=worker)
    assert response.status_code == 200, response.text
    return bool(response.json()["static_changed"])


def _values(client: TestClient, admin: Headers, host: str = "w1") -> dict[str, Any]:
    response = client.get(f"/v1/values/hosts/{host}", headers=admin)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def _generation(client: TestClient, admin: Headers, name: str = "w1") -> int:
    return int(client.get(f"/v1/workers/{name}", headers=admin).json()["generation"])


def _fitting(client: TestClient, admin: Headers, job: dict[str, Any]) -> list[str]:
    """The workers the job's category fits (the misfit cache at their generation)."""
    category = client.get(f"/v1/categories/{job['category_id']}", headers=admin).json()
    return [w["worker"] for w in category["workers"] if w["fits"]]


def _pull(client: TestClient, worker: Headers, name: str = "w1") -> int | None:
    response = client.post(f"/v1/workers/{name}/pull", headers=worker)
    assert response.status_code in (200, 204), response.text
    return None if response.status_code == 204 else int(response.json()["id"])


def test_a_report_without_the_admins_values_leaves_them_and_the_job_runs(
    client: TestClient, admin_headers: Headers
) -> None:
    """The README's walk-through: arch and h_vmem set by the administrator, then the
    agent's first report, which does not name them; w1 still offers both, and a
    ``-l arch=lx*`` job's category fits it and its pull starts the job."""
    w1 = _worker(client, admin_headers)
    _admin_sets(
        client,
        admin_headers,
        "w1",
        complex_values={"h_vmem": "8G"},
        load_values={"arch": "lx-amd64"},
    )
    # The first report makes load_avg and num_proc present: a new static picture.
    assert _report(client, w1, "w1", load_avg="0.500000", num_proc="2")
    generation = _generation(client, admin_headers)
    assert not _report(client, w1, "w1", load_avg="0.250000", num_proc="2")

    values = _values(client, admin_headers)
    assert values["complex_values"] == {"h_vmem": "8G"}
    assert values["load_values"] == {"arch": "lx-amd64"}
    assert values["reported_load_values"] == {"load_avg": "0.250000", "num_proc": "2"}
    assert values["matching_uses"] == {
        "arch": ["load_values"],
        "h_vmem": ["complex_values"],
        "load_avg": ["reported_load_values"],
        "num_proc": ["reported_load_values"],
    }
    # New numbers of the same reported attributes are dynamic: the misfit rows stand.
    assert _generation(client, admin_headers) == generation

    job = submit(client, admin_headers, hard="arch=lx*,h_vmem=2G")
    assert job["state"] == "waiting"
    assert _fitting(client, admin_headers, job) == ["w1"]
    assert _pull(client, w1) == job["id"]


def test_a_report_of_a_value_the_admin_set_changes_nothing_matching_sees(
    client: TestClient, admin_headers: Headers
) -> None:
    """A string (arch, ``==``) and a number (mem_free, ``<=``): the administrator's load
    value hides the reported one, whatever the report says; the report is kept and shown.
    When the administrator takes theirs away, the report is what matching sees, and the
    worker's generation changes with it."""
    w1 = _worker(client, admin_headers)
    _admin_sets(client, admin_headers, "w1", load_values={"arch": "lx-amd64", "mem_free": "8G"})
    before = _generation(client, admin_headers)
    _report(client, w1, "w1", arch="lx-arm64", mem_free="1024.000000M")
    values = _values(client, admin_headers)
    assert values["load_values"] == {"arch": "lx-amd64", "mem_free": "8G"}
    assert values["reported_load_values"] == {"arch": "lx-arm64", "mem_free": "1024.000000M"}
    assert values["matching_uses"] == {"arch": ["load_values"], "mem_free": ["load_values"]}

    amd = submit(client, admin_headers, hard="arch=lx-amd64,mem_free=4G")
    arm = submit(client, admin_headers, hard="arch=lx-arm64")
    assert _fitting(client, admin_headers, amd) == ["w1"]
    assert _fitting(client, admin_headers, arm) == []
    assert _pull(client, w1) == amd["id"]
    assert _pull(client, w1) is None

    # A second report of other numbers and the same strings: nothing matching sees moved.
    generation = _generation(client, admin_headers)
    assert generation > before
    assert not _report(client, w1, "w1", arch="lx-arm64", mem_free="512.000000M")
    assert _generation(client, admin_headers) == generation

    # The administrator's load values go: the worker's own report is what counts now.
    assert _admin_sets(client, admin_headers, "w1", load_values={})
    assert _generation(client, admin_headers) > generation
    values = _values(client, admin_headers)
    assert values["load_values"] == {}
    assert values["matching_uses"] == {
        "arch": ["reported_load_values"],
        "mem_free": ["reported_load_values"],
    }
    assert _fitting(client, admin_headers, arm) == ["w1"]
    assert _pull(client, w1) == arm["id"]


def test_a_fixed_value_and_a_report_merge_by_grid_engines_rules(
    client: TestClient, admin_headers: Headers
) -> None:
    """complex_values beside a report: for ``==`` (num_proc) the fixed value is the one
    that counts; for ``<=`` (mem_free) both count and the more restrictive decides (the
    specification's configured 1 GB beside a reported 4 GB)."""
    w1 = _worker(client, admin_headers)
    _admin_sets(client, admin_headers, "w1", complex_values={"num_proc": "4", "mem_free": "1G"})
    _report(client, w1, "w1", num_proc="2", mem_free="4096.000000M")
    values = _values(client, admin_headers)
    assert values["matching_uses"] == {
        "mem_free": ["complex_values", "reported_load_values"],
        "num_proc": ["complex_values"],
    }
    too_much = submit(client, admin_headers, hard="mem_free=2G")
    assert _pull(client, w1) is None
    four = submit(client, admin_headers, hard="num_proc=4,mem_free=1G")
    assert _pull(client, w1) == four["id"]
    assert client.get(f"/v1/jobs/{too_much['id']}", headers=admin_headers).json()["state"] == (
        "waiting"
    )


def test_a_later_report_replaces_the_earlier_report_only(
    client: TestClient, admin_headers: Headers
) -> None:
    """A report replaces every value the previous report gave (one it leaves out is
    gone), and none an administrator set; an administrator's change of load values leaves
    the report alone."""
    w1 = _worker(client, admin_headers)
    _admin_sets(client, admin_headers, "w1", load_values={"arch": "lx-amd64"})
    _report(client, w1, "w1", load_avg="1.000000", swap_free="0.000000M")
    before = _generation(client, admin_headers)
    # swap_free disappears: an attribute present no more changes the static picture.
    assert _report(client, w1, "w1", load_avg="2.000000")
    assert _generation(client, admin_headers) > before
    values = _values(client, admin_headers)
    assert values["reported_load_values"] == {"load_avg": "2.000000"}
    assert values["load_values"] == {"arch": "lx-amd64"}
    _admin_sets(client, admin_headers, "w1", load_values={"arch": "lx-amd64", "cpu": "10"})
    assert _values(client, admin_headers)["reported_load_values"] == {"load_avg": "2.000000"}
    assert _report(client, w1, "w1")
    values = _values(client, admin_headers)
    assert values["reported_load_values"] == {}
    assert values["load_values"] == {"arch": "lx-amd64", "cpu": "10"}


def test_a_job_that_needs_a_reported_string_follows_the_report(
    client: TestClient, admin_headers: Headers
) -> None:
    """A reported string is static: a report that changes it recomputes the worker's
    misfit rows, so a category's fit follows what the worker says of itself."""
    w1 = _worker(client, admin_headers)
    _report(client, w1, "w1", arch="lx-arm64")
    job = submit(client, admin_headers, hard="arch=lx-amd64")
    assert _fitting(client, admin_headers, job) == []
    assert _report(client, w1, "w1", arch="lx-amd64")
    assert _fitting(client, admin_headers, job) == ["w1"]
    assert _pull(client, w1) == job["id"]
