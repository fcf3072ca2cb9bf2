"""Swagger UI at /docs from assets the installation carries, not from a CDN.

FastAPI's own /docs page loads Swagger UI's JavaScript and CSS from jsDelivr, so on a
cluster without internet it is a blank page. The PyPI package swagger-ui-py ships a
Swagger UI 5 build (which renders OpenAPI 3.1, the version FastAPI emits) in its static/
folder; the app serves that folder itself under /docs/assets. ReDoc is not served: no
package on PyPI ships it without a web framework of its own, and Swagger UI covers the need.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS_PATH = "/docs"
ASSETS_PATH = "/docs/assets"

#: Swagger UI options. No validator: by default Swagger UI sends the document to
#: validator.swagger.io for a badge, an outside call we do not want.
SWAGGER_UI_PARAMETERS: dict[str, object] = {"validatorUrl": None}


class SwaggerAssetsMissingError(RuntimeError):
    """The swagger-ui-py package (a runtime dependency) is not installed, or its static
    folder with swagger-ui-bundle.js is missing from the installation."""


def swagger_assets_dir() -> Path:
    """The static/ folder of the installed swagger-ui-py, found without importing it (its
    package imports adapters for other web frameworks that we do not need)."""
    spec = importlib.util.find_spec("swagger_ui")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        folder = Path(location) / "static"
        if (folder / "swagger-ui-bundle.js").is_file():
            return folder
    raise SwaggerAssetsMissingError(
        "swagger-ui-py's static/swagger-ui-bundle.js not found; reinstall jobmatch's dependencies"
    )


async def swagger_ui(request: Request) -> HTMLResponse:
    """The Swagger UI page of the app that serves the request.

    A module-level function, not a closure over the app: FastAPI remembers every endpoint
    it has classified (a cache of 4,096 entries per kind), so a closure would keep each app
    built in the process alive with its middleware, connections and state.
    """
    app: FastAPI = request.app
    # Behind a proxy that strips a prefix, every URL of the page carries it.
    root = str(request.scope.get("root_path", "")).rstrip("/")
    return get_swagger_ui_html(
        openapi_url=f"{root}{app.openapi_url}",
        title=f"{app.title} - Swagger UI",
        swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
        swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
        swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon-32x32.png",
        oauth2_redirect_url=None,
        swagger_ui_parameters=SWAGGER_UI_PARAMETERS,
    )


def install_docs_ui(app: FastAPI) -> None:
    """Serve /docs and its assets; the app must be built with docs_url=None."""
    app.mount(ASSETS_PATH, StaticFiles(directory=swagger_assets_dir()), name="docs-assets")
    app.add_api_route(DOCS_PATH, swagger_ui, methods=["GET"], include_in_schema=False)
