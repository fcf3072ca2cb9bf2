"""`jobmatch serve` in a child process on a loopback port, for tests that need a real server.

One helper for every suite that talks to a live server (crash safety, hostile clients, the
agent, the README walk-through): it starts the server with the test's database, waits for
`/healthz`, sends requests with the standard library only and stops (or kills) the process.
"""

from __future__ import annotations

import hashlib
import http.client
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: The admin token every live server of the tests is started with.
LIVE_ADMIN_TOKEN = "live-admin-token"


#: Ports handed out by :func:`free_port` in a process of a pytest-xdist run: a block of
#: its own per worker, below Linux's ephemeral range (32768 and up), so that no other
#: worker and no outgoing connection takes a port between the probe and the server's bind.
#: Where the run's blocks start depends on the run (its xdist id), so that two runs on one
#: machine (two clones, a coverage run beside a test run) seldom share a block: they did,
#: and one run's server answered another's requests.
PORT_BLOCK = 100
FIRST_BLOCK_PORT = 20000
BLOCKS = (32768 - FIRST_BLOCK_PORT) // PORT_BLOCK
_next_port = itertools.count()


def _port_block() -> int | None:
    """The first port of this process's block, or None outside a pytest-xdist worker."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not (worker.startswith("gw") and worker[2:].isdigit()):
        return None
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")
    offset = int(hashlib.sha256(run.encode()).hexdigest(), 16) % BLOCKS
    return FIRST_BLOCK_PORT + (offset + int(worker[2:])) % BLOCKS * PORT_BLOCK


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    first = _port_block()
    if first is not None:
        for _ in range(PORT_BLOCK):
            port = first + next(_next_port) % PORT_BLOCK
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LiveServer:
    """`jobmatch serve --no-migrate` against a migrated database, in a child process."""

    def __init__(
        self,
        database_url: str,
        log: Path,
        *,
        env: dict[str, str] | None = None,
        args: tuple[str, ...] = (),
        admin_token: str = LIVE_ADMIN_TOKEN,
    ) -> None:
        self.database_url = database_url
        self.port = free_port()
        self.log = log
        self.env = env or {}
        self.args = args
        self.admin_token = admin_token
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_for_processes(self, processes: int, timeout: float = 300) -> None:
        """Wait until each of ``processes`` worker processes (``--workers``) finished its
        start-up: the first to do so answered /healthz, and traffic must reach all."""
        deadline = time.monotonic() + timeout
        while self.log.read_text().count("Application startup complete.") < processes:
            assert time.monotonic() < deadline, self.log.read_text()[-2000:]
            time.sleep(0.5)

    def start(self, timeout: float = 30.0) -> None:
        """Start the server and return once `/healthz` answers 200."""
        # Each server counts its metrics in a directory of its own (`serve` makes one)
        # unless the test gives one: a directory inherited from the test process would be
        # shared with, and emptied by, every other server it starts.
        inherited = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
        env = {
            **inherited,
            "JOBMATCH_DATABASE_URL": self.database_url,
            "JOBMATCH_ADMIN_TOKEN": self.admin_token,
            "JOBMATCH_LOG_LEVEL": "WARNING",
            **self.env,
        }
        command = [sys.executable, "-m", "app.cli", "serve", "--port", str(self.port)]
        command += ["--no-migrate", *self.args]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, env=env, stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                # Another process's server on this port (another run's, a leftover) answers
                # /healthz too, and a test would talk to it: only our own listener counts.
                # Ours fails to bind and exits, and the loop reports its log.
                if self.request("GET", "/healthz", timeout=2)[0] == 200 and self._listens():
                    return
            except OSError:
                pass
            time.sleep(0.1)
        # A server that did not answer in time must not outlive the test that gave up on it:
        # the fixture never reaches its teardown, and a left-over server loads the machine.
        self.stop()
        raise AssertionError(f"server did not start: {self.log.read_text()[-2000:]}")

    def _listens(self) -> bool:
        """Whether the listening socket on our port is one our server process holds.

        Linux: the socket's inode from /proc/net/tcp, looked up among the process's open
        files. Elsewhere there is no cheap way to ask, and the answer is yes.
        """
        assert self.process is not None
        table = Path("/proc/net/tcp")
        if not table.exists():
            return True
        local = f"0100007F:{self.port:04X}"
        inodes = {
            fields[9]
            for fields in (line.split() for line in table.read_text().splitlines()[1:])
            if fields[1] == local and fields[3] == "0A"  # 0A: LISTEN
        }
        fds = Path(f"/proc/{self.process.pid}/fd")
        try:
            held = {os.readlink(fd) for fd in fds.iterdir()}
        except OSError:  # the process is gone, or a descriptor closed while we looked
            return False
        return any(f"socket:[{inode}]" in held for inode in inodes)

    def kill(self) -> None:
        """SIGKILL: the server gets no chance to clean up."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        """SIGTERM, then wait for the process to exit."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        token: str | None = None,
        *,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 10.0,
    ) -> tuple[int, Any]:
        """Send one request; the answer's status and its JSON body (None when empty).

        `token` defaults to the admin token; pass "" to send no Authorization header. `raw`
        sends those bytes as the body instead of `body` encoded as JSON.
        """
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            payload = raw if raw is not None else (None if body is None else json.dumps(body))
            sent = {"Content-Type": "application/json"}
            bearer = self.admin_token if token is None else token
            if bearer:
                sent["Authorization"] = f"Bearer {bearer}"
            sent.update(headers or {})
            connection.request(method, path, body=payload, headers=sent)
            response = connection.getresponse()
            data = response.read()
            try:
                return response.status, json.loads(data) if data else None
            except ValueError:
                return response.status, data.decode("utf-8", "replace")
        finally:
            connection.close()
