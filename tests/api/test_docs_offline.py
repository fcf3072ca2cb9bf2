"""/docs works without internet: the page and everything it loads come from the app.

FastAPI's default /docs page loads Swagger UI from a CDN (cdn.jsdelivr.net); jobmatch
serves the swagger-ui-py package's assets itself (app/api/docs_ui.py).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from fastapi.testclient import TestClient

EXPECTED_TYPES = {".js": "javascript", ".css": "text/css", ".png": "image/png"}


class _Links(HTMLParser):
    """Every src= and href= of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.links += [value for name, value in attrs if name in {"src", "href"} and value]


def test_docs_and_every_asset_it_links_are_served_locally(client: TestClient) -> None:
    page = client.get("/docs")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    # No absolute URL at all in the page: nothing is fetched from another host.
    assert not re.search(r"(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}", page.text), page.text
    assert "validatorUrl" in page.text and '"validatorUrl": null' in page.text

    parser = _Links()
    parser.feed(page.text)
    assert len(parser.links) == 3, parser.links  # stylesheet, icon, script
    for link in parser.links:
        assert link.startswith("/docs/assets/"), link
        asset = client.get(link)
        assert asset.status_code == 200, link
        suffix = link[link.rindex(".") :]
        assert EXPECTED_TYPES[suffix] in asset.headers["content-type"], (link, asset.headers)
        assert len(asset.content) > 0

    openapi_url = re.search(r"url: '([^']+)'", page.text)
    assert openapi_url is not None and openapi_url.group(1) == "/openapi.json"
    spec = client.get(openapi_url.group(1))
    assert spec.status_code == 200 and spec.json()["openapi"].startswith("3.1")


def test_swagger_ui_is_version_5_which_renders_openapi_3_1(client: TestClient) -> None:
    """Swagger UI 4 shows "Unable to render this definition" for OpenAPI 3.1 documents."""
    bundle = client.get("/docs/assets/swagger-ui-bundle.js").text
    versions = set(re.findall(r'"(5\.\d+\.\d+)"', bundle))
    assert versions, "no Swagger UI 5 version string in the bundle"


def test_redoc_is_not_served(client: TestClient) -> None:
    assert client.get("/redoc").status_code == 404
