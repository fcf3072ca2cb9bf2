"""A small JSON-over-HTTP client for the jobmatch API, on the standard library only (the
agent must run on build hosts without the server's dependencies)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any


class ApiError(Exception):
    """The server answered with an error status (its problem+json detail is the message)
    or could not be reached."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status}: {detail}" if status else detail)
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any
    headers: dict[str, str]


class Client:
    def __init__(self, server: str, token: str, *, timeout: float = 30.0) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.timeout = timeout

    def request(self, method: str, path: str, body: Any = None) -> Reply:
        data = json.dumps(body).encode("utf-8") if body is not None else None
        request = urllib.request.Request(
            self.server + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Accept": "application/json",
                **({"Content-Type": "application/json"} if data is not None else {}),
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
                headers = {k.lower(): v for k, v in response.headers.items()}
                return Reply(response.status, json.loads(raw) if raw else None, headers)
        except urllib.error.HTTPError as error:
            raw = error.read()
            try:
                detail = str(json.loads(raw).get("detail", raw.decode("utf-8", "replace")))
            except (ValueError, AttributeError):
                detail = raw.decode("utf-8", "replace")
            raise ApiError(error.code, detail) from error
        except (urllib.error.URLError, OSError) as error:
            raise ApiError(0, f"cannot reach {self.server}: {error}") from error
