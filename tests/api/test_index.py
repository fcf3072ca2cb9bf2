"""`GET /` (issue 39): a browser is sent to the console, a program gets a JSON index whose
links all lead somewhere; no token is needed for either."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app import __version__
from app.api.index import wants_html

#: What Firefox and Chromium send when a person types the address.
BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


def test_a_browser_is_sent_to_the_console(client: TestClient) -> None:
    response = client.get("/", headers={"Accept": BROWSER_ACCEPT}, follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/ui"
    assert "Accept" in response.headers["vary"]
    # Followed, it lands on the console's sign-in page.
    page = client.get("/", headers={"Accept": BROWSER_ACCEPT})
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert str(page.url).endswith("/ui/sign-in")


@pytest.mark.parametrize("accept", [None, "*/*", "application/json", "text/html;q=0"])
def test_a_program_gets_the_json_index(client: TestClient, accept: str | None) -> None:
    headers = {"Accept": accept} if accept is not None else {}
    response = client.get("/", headers=headers, follow_redirects=False)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    index = response.json()
    assert index["name"] == "jobmatch"
    assert index["version"] == __version__
    assert index["links"]["console"] == "/ui"
    assert index["links"]["docs"] == "/docs"
    assert index["links"]["openapi"] == "/openapi.json"


def test_every_link_of_the_index_leads_somewhere(client: TestClient) -> None:
    links = client.get("/").json()["links"]
    assert set(links) >= {"console", "docs", "openapi", "health", "ready", "metrics"}
    for name, path in links.items():
        response = client.get(path, follow_redirects=True)
        assert response.status_code == 200, (name, path, response.status_code)


def test_the_index_is_not_an_operation_of_the_api(client: TestClient) -> None:
    assert "/" not in client.get("/openapi.json").json()["paths"]


def test_behind_a_proxy_every_link_carries_its_prefix(client: TestClient) -> None:
    behind = TestClient(client.app, root_path="/jobmatch")
    links = behind.get("/").json()["links"]
    assert links["console"] == "/jobmatch/ui"
    assert all(path.startswith("/jobmatch/") for path in links.values()), links
    redirect = behind.get("/", headers={"Accept": "text/html"}, follow_redirects=False)
    assert redirect.headers["location"] == "/jobmatch/ui"


@pytest.mark.parametrize(
    ("accept", "html"),
    [
        ("text/html", True),
        ("TEXT/HTML; charset=utf-8", True),
        (BROWSER_ACCEPT, True),
        ("application/json, text/html;q=0.5", True),
        ("text/html;q=0", False),
        ("text/html;q=0.0", False),
        ("text/html;q=nonsense", False),
        ("*/*", False),
        ("text/*", False),
        ("", False),
        ("application/json", False),
    ],
)
def test_which_accept_headers_ask_for_html(accept: str, html: bool) -> None:
    assert wants_html(accept) is html
