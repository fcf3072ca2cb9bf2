"""The waiting workers of bench/longpoll.py, in client processes of their own (issue 37).

One process cannot hold 10,000 httpx clients waiting on long polls, so bench/longpoll.py
starts K processes (multiprocessing, "spawn") and gives each its share of the workers. In
a process every worker is one asyncio coroutine on a raw stream (``asyncio.open_connection``,
hand-written HTTP/1.1 bytes, keep-alive): it pulls with ``wait``, finishes what it gets at
once and pulls again; a refusal (503, 429...) is counted by status and followed by a sleep
of its Retry-After (else 1 s); a connection the server closed (keep-alive timeout, 408,
the 503 of a full process) is opened again.

What the parent learns, over the process's end of a ``multiprocessing.Pipe``:

* ``("job", job_id, monotonic)`` at once for every job pulled (``time.monotonic()`` is the
  system's clock on Linux, so the parent compares it with its own);
* ``("status", Status)`` every :data:`STATUS_SECONDS` and when stopped: how many pulls are
  open with no answer yet, what the pulls were answered, which connections failed.

The parent sends ``"stop"``. Standard library only (uvloop when installed), so that a
client process starts in a fraction of a second and costs little memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from multiprocessing.connection import Connection

STATUS_SECONDS = 0.25
#: Seconds a connection may take to open.
CONNECT_TIMEOUT = 30.0
#: Seconds past the pull's own wait before its answer counts as lost.
READ_MARGIN = 30.0
FINISH = json.dumps({"outcome": "finished"}).encode()


@dataclass
class Status:
    """One client process's counts so far (``open`` and ``oldest_open`` are current)."""

    workers: int = 0
    #: Workers whose pull was sent and has no answer yet.
    open: int = 0
    #: When the oldest of those pulls was sent (monotonic; 0.0 when none is open).
    oldest_open: float = 0.0
    pulls: int = 0
    #: Pull answers by status code (200, 204, 503...).
    answers: Counter[int] = field(default_factory=Counter)
    #: Finish answers other than 200, by status code.
    finish_refused: Counter[int] = field(default_factory=Counter)
    #: Connection failures by kind (the server closed it, reset, refused, timeout...).
    failures: Counter[str] = field(default_factory=Counter)
    connects: int = 0
    #: The first unexpected exception of a worker coroutine (a bug of this module).
    bug: str = ""


class Closed(Exception):
    """The server closed the connection before a whole answer arrived."""


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """Status, headers (lower-case names) and body of one HTTP/1.1 answer."""
    line = await reader.readline()
    if not line:
        raise Closed("closed before the status line")
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/"):
        raise Closed(f"not a status line: {line[:80]!r}")
    status = int(parts[1])
    headers: dict[str, str] = {}
    while True:
        line = await reader.readline()
        if not line:
            raise Closed("closed within the headers")
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    body = b""
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                break
            chunks.append(chunk[:-2])
        body = b"".join(chunks)
    elif status not in (204, 304) and headers.get("connection", "").lower() == "close":
        body = await reader.read()
    return status, headers, body


def request_bytes(
    method: str, path: str, host: str, token: str | None, body: bytes = b"", close: bool = False
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}"]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    if body:
        lines.append("Content-Type: application/json")
    if method != "GET" or body:
        lines.append(f"Content-Length: {len(body)}")
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def _retry_after(headers: dict[str, str]) -> float:
    try:
        return max(0.0, float(headers.get("retry-after", "1")))
    except ValueError:
        return 1.0


class Clients:
    """The workers of one client process."""

    def __init__(
        self, pipe: Connection, port: int, workers: list[tuple[str, str]], wait: float
    ) -> None:
        self.pipe = pipe
        self.port = port
        self.host = f"127.0.0.1:{port}"
        self.workers = workers
        self.wait = wait
        self.status = Status(workers=len(workers))
        #: Send time of each open pull, by worker name.
        self.open_since: dict[str, float] = {}
        self.stopping = asyncio.Event()

    def snapshot(self) -> Status:
        self.status.open = len(self.open_since)
        self.status.oldest_open = min(self.open_since.values(), default=0.0)
        return self.status

    async def run(self, start_at: float, per_second: float) -> None:
        loop = asyncio.get_running_loop()
        loop.add_reader(self.pipe.fileno(), self._from_parent)
        tasks = []
        for index, (name, token) in enumerate(self.workers):
            delay = max(0.0, start_at + index / per_second - time.monotonic())
            tasks.append(asyncio.create_task(self._worker(name, token, delay)))
        reporter = asyncio.create_task(self._report())
        await self.stopping.wait()
        for task in [*tasks, reporter]:
            task.cancel()
        await asyncio.gather(*tasks, reporter, return_exceptions=True)
        loop.remove_reader(self.pipe.fileno())
        self.open_since.clear()
        self.pipe.send(("status", self.snapshot()))

    def _from_parent(self) -> None:
        try:
            while self.pipe.poll():
                if self.pipe.recv() == "stop":
                    self.stopping.set()
        except EOFError:  # the parent is gone
            self.stopping.set()

    async def _report(self) -> None:
        while True:
            self.pipe.send(("status", self.snapshot()))
            await asyncio.sleep(STATUS_SECONDS)

    async def _worker(self, name: str, token: str, delay: float) -> None:
        await asyncio.sleep(delay)
        try:
            await self._pull_loop(name, token)
        except asyncio.CancelledError:
            raise
        except Exception:
            if not self.status.bug:
                self.status.bug = f"{name}: {traceback.format_exc()}"
            self.open_since.pop(name, None)

    async def _pull_loop(self, name: str, token: str) -> None:
        path = f"/v1/workers/{name}/pull?wait={self.wait:g}"
        pull = request_bytes("POST", path, self.host, token)
        connection: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                fresh = connection is None
                try:
                    if connection is None:
                        connection = await asyncio.wait_for(
                            asyncio.open_connection("127.0.0.1", self.port), CONNECT_TIMEOUT
                        )
                        self.status.connects += 1
                    headers = await self._pull_once(name, token, pull, *connection)
                    if headers.get("connection", "").lower() == "close":
                        connection[1].close()
                        connection = None
                    if headers[":status"] not in ("200", "204"):
                        await asyncio.sleep(_retry_after(headers))
                except (OSError, Closed, asyncio.IncompleteReadError, TimeoutError) as error:
                    kind = type(error).__name__
                    if isinstance(error, Closed | asyncio.IncompleteReadError):
                        kind = "closed by the server"
                    self.status.failures[kind] += 1
                    if connection is not None:
                        connection[1].close()
                    connection = None
                    if fresh:  # a new connection failed: do not hammer the server
                        await asyncio.sleep(1.0)
        finally:
            if connection is not None:
                connection[1].close()

    async def _pull_once(
        self,
        name: str,
        token: str,
        pull: bytes,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> dict[str, str]:
        """One pull (and the finish of the job it got); the last answer's headers, with
        the pull's status under ``:status``."""
        writer.write(pull)
        self.open_since[name] = time.monotonic()
        self.status.pulls += 1
        try:
            status, headers, body = await asyncio.wait_for(
                read_response(reader), self.wait + READ_MARGIN
            )
        finally:
            self.open_since.pop(name, None)
        self.status.answers[status] += 1
        if status == 200:
            job_id = int(json.loads(body)["id"])
            self.pipe.send(("job", job_id, time.monotonic()))
            finish = request_bytes("POST", f"/v1/jobs/{job_id}/finish", self.host, token, FINISH)
            writer.write(finish)
            finished, headers, _ = await asyncio.wait_for(read_response(reader), READ_MARGIN)
            if finished != 200:
                self.status.finish_refused[finished] += 1
        headers[":status"] = str(status)
        return headers


def raise_open_files_limit() -> tuple[int, int]:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit; the new (soft, hard)."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard, hard


def main(
    pipe: Connection,
    port: int,
    workers: list[tuple[str, str]],
    wait: float,
    start_at: float,
    per_second: float,
) -> None:
    """A client process: hold these workers' pulls until the parent says stop."""
    raise_open_files_limit()
    clients = Clients(pipe, port, workers, wait)
    runner: asyncio.Runner
    try:
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:
        runner = asyncio.Runner()
    with runner, contextlib.suppress(KeyboardInterrupt):
        runner.run(clients.run(start_at, per_second))
    pipe.close()
