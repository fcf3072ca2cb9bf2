"""The worker's client: pull jobs, report on them, keep the lease and metadata fresh."""

from __future__ import annotations

import contextlib
import math
import socket
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import httpx2

from app.client import operations as ops
from app.client.base import BaseClient
from app.client.models import (
    Heartbeat,
    Job,
    OutputAppended,
    PulledBatch,
    ValuesChanged,
    WorkerMetadata,
)
from app.client.operations import covers
from app.client.parsing import without_none
from app.client.policy import RetryPolicy, Timeouts


@dataclass(frozen=True)
class EndReport:
    """How one of this worker's jobs ended, as a batch pull carries it."""

    job_id: int
    outcome: Literal["finished", "failed"]
    reason: str | None = None
    exit_code: int | None = None
    output: str | None = None


class WorkerClient(BaseClient):
    """One worker, acting with its own worker token."""

    def __init__(
        self,
        base_url: str,
        token: str,
        name: str,
        *,
        timeouts: Timeouts | None = None,
        retry: RetryPolicy | None = None,
        user_agent: str | None = None,
        transport: httpx2.BaseTransport | None = None,
    ) -> None:
        super().__init__(
            base_url,
            token,
            timeouts=timeouts,
            retry=retry,
            user_agent=user_agent,
            transport=transport,
        )
        self.name = name
        self._read_timeout = (timeouts or Timeouts()).read
        #: Whether the last pull's answer asked for a new metadata report.
        self.refresh_requested = False
        #: Whether the last pull was superseded: a newer waiting pull of this worker (from
        #: this process or another one under the same name) took its place.
        self.superseded = False
        # Waiting pulls go through a pool of their own that keeps no connection: each
        # opens one, which the trace hook below sees being made, so that a stopping agent
        # can shut it (cancel_waiting_pulls) instead of waiting out the long-poll.
        self._waiting_http = self._new_http(
            self._http.headers, timeouts, transport, httpx2.Limits(max_keepalive_connections=0)
        )
        self._waiting_lock = threading.Lock()
        self._waiting_streams: list[Any] = []
        self._waiting_cancelled = False

    def close(self) -> None:
        super().close()
        self._waiting_http.close()

    def cancel_waiting_pulls(self) -> None:
        """End the waiting pull in progress now, and any later one at once (safe from
        another thread). Its connection is shut: the server sees the worker gone and takes
        no job for it, and the pull raises ServerUnreachable. Pulls that do not wait and
        every other call go on as before: a stopping agent still reports its jobs."""
        with self._waiting_lock:
            self._waiting_cancelled = True
            streams = list(self._waiting_streams)
        for stream in streams:
            _shut(stream)

    def _waiting_request(self, wait: float | None) -> dict[str, Any]:
        """How a pull that may wait ``wait`` seconds is sent: a waiting one through the
        pool of waiting pulls, its connections traced (so that they can be shut)."""
        if not wait:
            return {}
        return {"http": self._waiting_http, "extensions": {"trace": self._trace_waiting}}

    def _trace_waiting(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's trace of a waiting pull: keep each connection it opens (the TLS
        one replaces the TCP one it wraps); shut it at once when pulls were cancelled."""
        if event not in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            return
        stream = info.get("return_value")
        with self._waiting_lock:
            self._waiting_streams = [stream]
            cancelled = self._waiting_cancelled
        if cancelled:
            _shut(stream)

    def _waited(self) -> None:
        with self._waiting_lock:
            self._waiting_streams = []

    @covers(ops.PULL)
    def pull(self, *, wait: float | None = None) -> Job | None:
        """The next job this worker should run (now running on it), or None when there is
        none. ``wait`` (0 to 60 seconds) asks the server to hold the answer until a job comes
        or the wait ends (a long-poll); the read timeout grows by as much. A server without
        long-poll ignores the parameter and answers at once. Not retried after the request
        may have reached the server: a lost answer's job comes back to the queue when the
        lease expires. A waiting pull that a newer one of this worker superseded answers
        None at once and sets :attr:`superseded` (the server holds one waiting pull per
        free slot of the worker)."""
        query = {"wait": None if wait is None else _seconds(wait)}
        read_timeout = None if wait is None else self._read_timeout + _seconds(wait)
        try:
            response = self._send(
                ops.PULL,
                path={"name": self.name},
                query=query,
                read_timeout=read_timeout,
                **self._waiting_request(wait),
            )
        finally:
            self._waited()
        self.refresh_requested = response.headers.get(REFRESH_HEADER, "").lower() == "true"
        self.superseded = response.headers.get(SUPERSEDED_HEADER, "").lower() == "true"
        if response.status_code == 204:
            return None
        return self._parse(Job, response)

    @covers(ops.PULL_BATCH)
    def pull_batch(
        self,
        finished: Sequence[EndReport] = (),
        *,
        max_jobs: int = 1,
        wait: float | None = None,
    ) -> PulledBatch:
        """Report the jobs this worker ended and pull up to ``max_jobs`` jobs, in one
        request and one transaction on the server (a worker with N free slots asks for N;
        a worker that just ended a job carries its report). Each report is applied as
        :meth:`finish_job` applies one (a resend is answered as the first; a late one is
        recorded and comes back with ``late``); one the server refuses refuses the whole
        request, naming it. ``wait`` long-polls as :meth:`pull` does, after the reports
        are applied. Not retried after the request may have reached the server (as
        :meth:`pull`): send the same reports again with the next batch; they are then
        resends."""
        query = {"max": max_jobs, "wait": None if wait is None else _seconds(wait)}
        read_timeout = None if wait is None else self._read_timeout + _seconds(wait)
        body = {"finished": [without_none(asdict(report)) for report in finished]}
        try:
            response = self._send(
                ops.PULL_BATCH,
                path={"name": self.name},
                query=query,
                body=body,
                read_timeout=read_timeout,
                **self._waiting_request(wait),
            )
        finally:
            self._waited()
        self.refresh_requested = response.headers.get(REFRESH_HEADER, "").lower() == "true"
        self.superseded = response.headers.get(SUPERSEDED_HEADER, "").lower() == "true"
        return self._parse(PulledBatch, response)

    @covers(ops.HEARTBEAT)
    def heartbeat(self) -> Heartbeat:
        """Renew the lease of this worker's jobs; ``refresh_metadata`` asks for a report."""
        return self._call(Heartbeat, ops.HEARTBEAT, path={"name": self.name})

    @covers(ops.REPORT_METADATA)
    def report_metadata(self, metadata: dict[str, Any]) -> WorkerMetadata:
        """EndReport this worker's dynamic (debusine) metadata."""
        return self._call(
            WorkerMetadata,
            ops.REPORT_METADATA,
            path={"name": self.name},
            body={"metadata": metadata},
        )

    @covers(ops.REPORT_LOAD)
    def report_load(self, load_values: dict[str, str]) -> ValuesChanged:
        """EndReport this host's Grid Engine load values: they replace this worker's previous
        report, never the values an administrator set."""
        body = {"load_values": load_values}
        return self._call(ValuesChanged, ops.REPORT_LOAD, path={"name": self.name}, body=body)

    @covers(ops.APPEND_OUTPUT)
    def append_output(self, job_id: int, offset: int, text: str) -> OutputAppended:
        """Send the next chunk of a running job's output, which starts at ``offset``; the
        answer's ``next_offset`` says how far the server has it (a resend is harmless)."""
        return self._call(
            OutputAppended,
            ops.APPEND_OUTPUT,
            path={"name": self.name, "job_id": job_id},
            body={"offset": offset, "text": text},
        )

    def own_metadata(self) -> WorkerMetadata:
        """This worker's metadata as the server sees it."""
        return self.get_metadata(self.name)

    @covers(ops.FINISH_JOB)
    def finish_job(
        self,
        job_id: int,
        outcome: Literal["finished", "failed"],
        *,
        reason: str | None = None,
        exit_code: int | None = None,
        output: str | None = None,
    ) -> Job:
        """EndReport a job's end: ``finished`` or ``failed`` (with a reason, exit code, output)."""
        body = {"outcome": outcome, "reason": reason, "exit_code": exit_code, "output": output}
        return self._call(Job, ops.FINISH_JOB, path={"job_id": job_id}, body=without_none(body))

    @covers(ops.RETURN_JOB)
    def return_job(self, job_id: int, *, reason: str | None = None) -> Job:
        """Give a job back to the queue unrun (it counts as an attempt)."""
        body = without_none({"reason": reason})
        return self._call(Job, ops.RETURN_JOB, path={"job_id": job_id}, body=body)


#: The longest long-poll the server grants, in seconds.
MAX_WAIT = 60

#: Set on pull answers when the worker should report its dynamic metadata again.
REFRESH_HEADER = "Jobmatch-Refresh-Metadata"
#: Set on a waiting pull's 204 when a newer pull of the same worker took its place.
SUPERSEDED_HEADER = "Jobmatch-Superseded"


def _shut(stream: Any) -> None:
    """Shut an httpcore network stream's socket for reading and writing: a thread blocked
    reading it wakes up (closing the socket would not wake it), and the server sees the
    connection end."""
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is None:
        return
    # OSError: already closed, or wrapped by its TLS stream (which is shut instead).
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _seconds(wait: float) -> int:
    """The wait as the query parameter: whole seconds (rounded up), 0 to 60."""
    return min(max(math.ceil(wait), 0), MAX_WAIT)
