"""The console's what-if page through Starlette's TestClient: an admin pastes a change set
(YAML or JSON) and sees what POST /v1/whatif answers for it; nothing is stored, an invalid
change set is shown again with what is wrong, and only an admin with the CSRF token runs
it."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from app.db.engine import Database
from tests.api.ui.test_console import ORIGIN, _sign_in
from tests.conftest import ADMIN_TOKEN
from tests.support.console_cluster import ConsoleCluster, load_console_cluster
from tests.support.table_digest import table_digest

pytestmark = pytest.mark.db

CHANGES = """\
drain_workers: [java-box]
add_workers:
  - name: spare
    resources: "arch: ?x86"
"""


@pytest.fixture
def cluster(database: Database) -> ConsoleCluster:
    return load_console_cluster(database)


def _ids(page: str, element: str) -> list[int]:
    found = re.search(rf'id="{element}">(.*?)</dd>', page, re.S)
    assert found, page
    return [int(i) for i in re.findall(r">(\d+)</a>", found.group(1))]


def test_an_admin_sees_what_the_api_answers_and_nothing_is_stored(
    client: TestClient,
    database: Database,
    admin_headers: dict[str, str],
    cluster: ConsoleCluster,
) -> None:
    csrf = _sign_in(client, ADMIN_TOKEN)
    form = client.get("/ui/whatif")
    assert form.status_code == 200 and 'id="changes"' in form.text
    assert 'href="/ui/whatif"' in client.get("/ui").text
    before = table_digest(database)

    page = client.post("/ui/whatif", data={"csrf": csrf, "changes": CHANGES}, headers=ORIGIN)

    assert page.status_code == 200, page.text
    assert table_digest(database) == before
    api = client.post(
        "/v1/whatif",
        json={
            "drain_workers": ["java-box"],
            "add_workers": [{"name": "spare", "resources": "arch: ?x86"}],
        },
        headers=admin_headers,
    ).json()
    assert _ids(page.text, "runnable-now") == api["runnable_now"]
    assert _ids(page.text, "no-longer-runnable") == api["no_longer_runnable"]
    assert api["no_longer_runnable"]  # java-box was the only worker of some waiting job
    rows = re.findall(r'<tr data-category="(\d+)">', page.text)
    assert [int(r) for r in rows] == [c["category_id"] for c in api["categories"]]
    assert re.search(r'<tr data-worker="java-box"><td>java-box</td><td>nothing</td>', page.text)
    assert "Nothing was stored." in page.text
    assert CHANGES.splitlines()[0] in page.text  # the form keeps what was pasted


def test_an_invalid_change_set_is_shown_with_its_problems(
    client: TestClient, database: Database, cluster: ConsoleCluster
) -> None:
    csrf = _sign_in(client, ADMIN_TOKEN)
    before = table_digest(database)
    cases = [
        ("add_jobs: [", "not YAML or JSON"),
        ("- java-box", "must be a mapping"),
        ("drain_workers: [java-box]\nadd_jobs:\n  - slots: 0\n", "add_jobs.0.slots: "),
        ("drain_workers: [ghost]", "drain_workers.0: no worker named &#39;ghost&#39;"),
        ("add_jobs:\n  - resources: 'language: java; java'\n", "add_jobs.0.resources: momotor"),
    ]
    for text, words in cases:
        page = client.post("/ui/whatif", data={"csrf": csrf, "changes": text}, headers=ORIGIN)
        assert page.status_code == 422, (text, page.text)
        assert 'id="whatif-problems"' in page.text and words in page.text, (text, page.text)
    assert table_digest(database) == before


def test_only_an_admin_with_the_csrf_token_runs_it(
    client: TestClient, database: Database, cluster: ConsoleCluster
) -> None:
    csrf = _sign_in(client, cluster.alice_token)
    assert client.get("/ui/whatif").status_code == 403
    assert 'href="/ui/whatif"' not in client.get("/ui").text
    refused = client.post("/ui/whatif", data={"csrf": csrf, "changes": CHANGES}, headers=ORIGIN)
    assert refused.status_code == 403 and "needs the admin token" in refused.text
    client.cookies.clear()
    _sign_in(client, ADMIN_TOKEN)
    forged = client.post("/ui/whatif", data={"csrf": "forged", "changes": CHANGES}, headers=ORIGIN)
    assert forged.status_code == 403
