"""The server URL a person gives (`--url`, JOBMATCH_URL), checked for the mistakes people
make before any request: the program says which and what to give instead, where httpx
would answer "Request URL is missing an 'http://' or 'https://' protocol" or every call
would be a 404 under `/v1/v1/`."""

from __future__ import annotations

from urllib.parse import urlsplit

SCHEMES = ("http", "https")


def server_url_mistake(url: str) -> str | None:
    """What is wrong with ``url`` as the root of a jobmatch server, as the end of a line
    that names the URL ("has no scheme: give http://..."); None when nothing is. The
    mistakes: no scheme, another scheme, no host, the API's `/v1` prefix at its end."""
    given = url.strip()
    if not given:
        return "is empty: give one such as http://127.0.0.1:8000"
    if "://" not in given:
        return f"has no scheme: give http://{given} (or https://)"
    parts = urlsplit(given)
    if parts.scheme.lower() not in SCHEMES:
        return "must start with http:// or https://"
    if not parts.netloc:
        return "names no host: give one such as http://127.0.0.1:8000"
    if parts.path.rstrip("/").endswith("/v1"):
        root = given[: given.rstrip("/").rfind("/v1")]
        return f"ends with /v1: give the server's root, {root} (each request adds /v1)"
    return None
