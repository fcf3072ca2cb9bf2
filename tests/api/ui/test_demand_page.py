"""The console's Demand page through Starlette's TestClient, on issue 40's cluster: the page
shows what GET /v1/demand answers (the same service, the same paging), its totals by
answer, each category with its request, age, answer and reasons, the templates with the
suggested mix and the jobs no template could run; its text escaped, its empty states
said, nothing stored, and only an admin sees it."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.db.engine import Database
from tests.api.ui.test_console import _sign_in
from tests.conftest import ADMIN_TOKEN
from tests.support.demand_cluster import DemandCluster, load_demand_cluster
from tests.support.table_digest import table_digest

pytestmark = pytest.mark.db


def _sender(client: TestClient, admin: dict[str, str]) -> Any:
    def send(method: str, path: str, body: Any, token: str | None) -> tuple[int, Any]:
        headers = admin if token is None else {"Authorization": f"Bearer {token}"}
        answer = client.request(method, path, json=body, headers=headers)
        return answer.status_code, answer.json() if answer.content else None

    return send


@pytest.fixture
def cluster(client: TestClient, admin_headers: dict[str, str]) -> DemandCluster:
    return load_demand_cluster(_sender(client, admin_headers))


def _api(client: TestClient, admin: dict[str, str], query: str) -> dict[str, Any]:
    answer = client.get(f"/v1/demand{query}", headers=admin)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _rows(page: str, table: str) -> list[str]:
    found = re.search(rf'<table class="list" id="{table}">.*?<tbody>(.*?)</tbody>', page, re.S)
    assert found, page
    return re.findall(r"<tr[^>]*>.*?</tr>", found.group(1), re.S)


def _cells(row: str) -> list[str]:
    """A row's cells as text: tags dropped, entities decoded, spaces collapsed."""
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    return [" ".join(html.unescape(re.sub(r"<[^>]+>", " ", c)).split()) for c in cells]


def test_the_page_shows_what_the_api_answers_and_stores_nothing(
    client: TestClient,
    database: Database,
    admin_headers: dict[str, str],
    cluster: DemandCluster,
) -> None:
    _sign_in(client, ADMIN_TOKEN)
    assert 'href="/ui/demand"' in client.get("/ui").text
    before = table_digest(database)

    page = client.get("/ui/demand")

    assert page.status_code == 200, page.text
    assert table_digest(database) == before
    api = _api(client, admin_headers, "?templates=*")
    assert api["jobs"] == {"never": 2, "capacity": 3, "policy": 0, "ready": 1}
    totals = {c[0]: (int(c[1]), int(c[2])) for c in map(_cells, _rows(page.text, "demand-totals"))}
    assert totals == {a: (api["jobs"][a], api["category_counts"][a]) for a in api["jobs"]}

    rows = {int(c[0]): c for c in map(_cells, _rows(page.text, "demand-categories"))}
    assert list(rows) == [item["category_id"] for item in api["items"]]
    for item in api["items"]:
        _category, _request, waiting, _oldest, answer, why, _take, template = rows[
            item["category_id"]
        ]
        assert (int(waiting), answer) == (item["waiting"], item["answer"])
        assert why == (" ".join(item["reasons"]) or "—")
        assert template == (item["template"] or "—")
    java17 = rows[cluster.java17]
    assert java17[1] == "java:17;language:java"  # the queue page's canonical text
    assert java17[5].startswith("no worker offers tag '17' in group 'java'")
    assert java17[7] == "java17-box"
    # The reasons' quotes reach the page escaped, never as markup.
    assert "tag &#39;17&#39; in group &#39;java&#39;" in page.text
    assert rows[cluster.java11][2:5] == ["3", rows[cluster.java11][3], "capacity"]
    assert rows[cluster.java11][6] == "3 slots, 3 nodes"
    three = next(i for i in api["items"] if i["category_id"] == cluster.three_nodes)
    assert three["need"] == {"slots": 1, "nodes": 3, "vertices": {"core": 24}, "consumables": {}}
    assert rows[cluster.three_nodes][6] == "1 slot, 3 nodes 24 core"

    mix = [_cells(r) for r in _rows(page.text, "demand-mix")]
    assert [(m[0], int(m[1]), int(m[2])) for m in mix] == [
        (m["template"], m["workers"], m["jobs"]) for m in api["suggestion"]["mix"]
    ]
    assert [m[0] for m in mix] == ["java17-box", "node-8core"]
    assert "Add 2 workers, costing 4.0 in all: they would start 2 waiting jobs." in page.text
    unrunnable = [_cells(r) for r in _rows(page.text, "demand-unrunnable")]
    assert [(int(u[0]), int(u[2])) for u in unrunnable] == [(cluster.java11, 3)]
    assert unrunnable[0][3] == "no template asked about could run them"
    templates = {c[0]: c for c in map(_cells, _rows(page.text, "demand-templates"))}
    assert templates["java17-box"][1:] == [
        "resources language: ?java; java: ?17",
        "4",
        "1.0",
        "any",
        "1",
        "1",
    ]
    assert templates["node-8core"][1] == "inventory node/[core=8]"


def test_the_page_pages_as_the_api_does(
    client: TestClient, admin_headers: dict[str, str], cluster: DemandCluster
) -> None:
    _sign_in(client, ADMIN_TOKEN)
    first = client.get("/ui/demand?templates=&limit=2")
    assert first.status_code == 200, first.text
    api = _api(client, admin_headers, "?limit=2")
    shown = [int(_cells(r)[0]) for r in _rows(first.text, "demand-categories")]
    assert shown == [item["category_id"] for item in api["items"]]
    assert "Categories 1 to 2 of 4, by id." in first.text
    assert 'href="/ui/demand?templates=&amp;limit=2&amp;offset=2">Next' in first.text
    assert "Previous" not in first.text
    assert "demand-mix" not in first.text  # no template was asked for

    last = client.get("/ui/demand?templates=&limit=2&offset=2")
    api = _api(client, admin_headers, "?limit=2&offset=2")
    shown = [int(_cells(r)[0]) for r in _rows(last.text, "demand-categories")]
    assert shown == [item["category_id"] for item in api["items"]] and api["next_offset"] is None
    assert "Next" not in last.text
    assert 'href="/ui/demand?templates=&amp;limit=2&amp;offset=0">← Previous' in last.text

    beyond = client.get("/ui/demand?limit=2&offset=10")
    assert "No category on this page: the last is 4." in beyond.text
    assert client.get("/ui/demand?limit=501").status_code == 422


def test_named_templates_and_unknown_ones(
    client: TestClient, admin_headers: dict[str, str], cluster: DemandCluster
) -> None:
    _sign_in(client, ADMIN_TOKEN)
    page = client.get("/ui/demand?templates=node-8core")
    mix = [_cells(r) for r in _rows(page.text, "demand-mix")]
    assert [m[0] for m in mix] == ["node-8core"]
    unrunnable = {int(_cells(r)[0]) for r in _rows(page.text, "demand-unrunnable")}
    assert unrunnable == {cluster.java11, cluster.java17}

    unknown = client.get("/ui/demand?templates=nope,%3Cb%3E")
    assert unknown.status_code == 422
    assert "&lt;b&gt;" in unknown.text and "<b>" not in unknown.text


def test_empty_states(client: TestClient) -> None:
    _sign_in(client, ADMIN_TOKEN)
    page = client.get("/ui/demand")
    assert page.status_code == 200, page.text
    assert "No job is waiting." in page.text
    assert "No worker template is registered" in page.text
    assert "demand-mix" not in page.text


def test_a_submitter_is_refused(
    client: TestClient, admin_headers: dict[str, str], cluster: DemandCluster
) -> None:
    token = client.post(
        "/v1/tokens", json={"role": "submitter", "subject": "carol"}, headers=admin_headers
    ).json()["token"]
    _sign_in(client, token)
    assert client.get("/ui/demand").status_code == 403
    assert 'href="/ui/demand"' not in client.get("/ui").text
