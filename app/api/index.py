"""`GET /`: where a person or a program lands first.

A browser (its Accept header asks for text/html) is sent to the web console at /ui; any
other client gets a small JSON index naming the service, its version and where its parts
are. Before, `/` answered a 404 problem, which told a new user nothing about where to go.
Not part of the OpenAPI document: it is a signpost, not an operation of the API.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from app import __version__

INDEX_PATH = "/"
CONSOLE_PATH = "/ui"

#: What the JSON index links to, each relative to the server's root.
LINKS = {
    "console": CONSOLE_PATH,
    "docs": "/docs",
    "openapi": "/openapi.json",
    "health": "/healthz",
    "ready": "/readyz",
    "metrics": "/metrics",
}


def wants_html(accept: str) -> bool:
    """Whether an Accept header asks for text/html (a browser's does; ``q=0`` refuses it).

    Only text/html counts, not ``*/*``: curl and the HTTP libraries send ``*/*`` and want
    the JSON.
    """
    for part in accept.split(","):
        media_type, *parameters = (piece.strip() for piece in part.split(";"))
        if media_type.lower() != "text/html":
            continue
        for parameter in parameters:
            name, _, value = parameter.partition("=")
            if name.strip().lower() == "q":
                try:
                    return float(value) > 0
                except ValueError:
                    return False
        return True
    return False


async def index(request: Request) -> Response:
    """A browser goes to the console (303); another client gets the JSON index.

    A module-level function, not a closure over the app (see app/api/docs_ui.py's
    ``swagger_ui`` for why).
    """
    # Behind a proxy that strips a prefix, every link carries it.
    root = str(request.scope.get("root_path", "")).rstrip("/")
    if wants_html(request.headers.get("accept", "")):
        # The answer depends on Accept: a cache must not give a browser's to curl.
        return RedirectResponse(
            f"{root}{CONSOLE_PATH}", status_code=303, headers={"Vary": "Accept"}
        )
    return JSONResponse(
        {
            "name": "jobmatch",
            "version": __version__,
            "links": {name: f"{root}{path}" for name, path in LINKS.items()},
        },
        headers={"Vary": "Accept"},
    )


def install_index(app: FastAPI) -> None:
    """Serve ``GET /``."""
    app.add_api_route(INDEX_PATH, index, methods=["GET"], include_in_schema=False)
