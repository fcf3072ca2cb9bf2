"""Behind a TLS proxy, `jobmatch serve` learns the scheme as docs/operations.md says (issue 39).

The page says that `jobmatch serve` runs uvicorn with its proxy-headers handling on:
`X-Forwarded-Proto` is believed from the loopback addresses only, or from the addresses of
uvicorn's `FORWARDED_ALLOW_IPS`, and the console marks its cookies `Secure` when the scheme
it sees is https. These tests sign in to the console of a real `jobmatch serve` the way a
proxy on the same host forwards a browser's https request, and once from an address the
server was told not to trust.
"""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.databases import migrated_database, run_directory
from tests.live_server import LIVE_ADMIN_TOKEN, LiveServer


def sign_in(server: LiveServer, headers: dict[str, str]) -> tuple[int, list[str]]:
    """POST the console's sign-in form; the status and the Set-Cookie headers."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.request(
            "POST",
            "/ui/sign-in",
            body=urlencode({"token": LIVE_ADMIN_TOKEN}),
            headers={"Content-Type": "application/x-www-form-urlencoded", **headers},
        )
        response = connection.getresponse()
        response.read()
        return response.status, response.headers.get_all("set-cookie") or []
    finally:
        connection.close()


@pytest.fixture
def own_database(backend: str, tmp_path: Path, pytestconfig: pytest.Config) -> Iterator[str]:
    """A fresh, migrated database of the backend for this test's server alone."""
    with migrated_database(backend, tmp_path, run_directory(pytestconfig)) as url:
        yield url


def serving(database_url: str, log: Path, env: dict[str, str]) -> LiveServer:
    """`jobmatch serve` on the database, with ``env`` added to its environment."""
    server = LiveServer(database_url, log, env=env)
    server.start()
    return server


def test_a_proxy_on_the_loopback_is_believed(
    own_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # uvicorn's default, whatever the developer's shell says.
    monkeypatch.delenv("FORWARDED_ALLOW_IPS", raising=False)
    server = serving(own_database, tmp_path / "server.log", {})
    try:
        own = f"127.0.0.1:{server.port}"
        status, cookies = sign_in(
            server, {"X-Forwarded-Proto": "https", "Origin": f"https://{own}", "Host": own}
        )
        assert status == 303 and cookies, cookies
        assert all("Secure" in cookie for cookie in cookies), cookies
        # Without the header the console is plain http, and says so.
        status, cookies = sign_in(server, {"Origin": f"http://{own}", "Host": own})
        assert status == 303 and cookies, cookies
        assert not any("Secure" in cookie for cookie in cookies), cookies
    finally:
        server.stop()


def test_forwarded_allow_ips_names_whom_to_believe(own_database: str, tmp_path: Path) -> None:
    """Told to trust another address only, the server ignores the loopback's header: the
    https Origin is then not the console's own, and the form is refused."""
    server = serving(own_database, tmp_path / "server.log", {"FORWARDED_ALLOW_IPS": "10.9.9.9"})
    try:
        own = f"127.0.0.1:{server.port}"
        status, cookies = sign_in(
            server, {"X-Forwarded-Proto": "https", "Origin": f"https://{own}", "Host": own}
        )
        assert status == 403 and not cookies, (status, cookies)
        status, cookies = sign_in(
            server, {"X-Forwarded-Proto": "https", "Origin": f"http://{own}", "Host": own}
        )
        assert status == 303 and not any("Secure" in cookie for cookie in cookies), cookies
    finally:
        server.stop()
