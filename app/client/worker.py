"""The worker's client: pull jobs, report on them, keep the lease and metadata fresh."""

from __future__ import annotations

from typing import Any, Literal

import httpx2

from app.client import operations as ops
from app.client.base import BaseClient
from app.client.models import Heartbeat, Job, WorkerMetadata
from app.client.operations import covers
from app.client.policy import RetryPolicy, Timeouts


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

    @covers(ops.PULL)
    def pull(self) -> Job | None:
        """The next job this worker should run (now running on it), or None when there is
        none. Not retried after the request may have reached the server: a lost answer's job
        comes back to the queue when the lease expires."""
        response = self._send(ops.PULL, path={"name": self.name})
        if response.status_code == 204:
            return None
        return self._parse(Job, response)

    @covers(ops.HEARTBEAT)
    def heartbeat(self) -> Heartbeat:
        """Renew the lease of this worker's jobs; ``refresh_metadata`` asks for a report."""
        return self._call(Heartbeat, ops.HEARTBEAT, path={"name": self.name})

    @covers(ops.REPORT_METADATA)
    def report_metadata(self, metadata: dict[str, Any]) -> WorkerMetadata:
        """Report this worker's dynamic (debusine) metadata."""
        return self._call(
            WorkerMetadata,
            ops.REPORT_METADATA,
            path={"name": self.name},
            body={"metadata": metadata},
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
        """Report a job's end: ``finished`` or ``failed`` (with a reason, exit code, output)."""
        body = {"outcome": outcome, "reason": reason, "exit_code": exit_code, "output": output}
        return self._call(
            Job,
            ops.FINISH_JOB,
            path={"job_id": job_id},
            body={key: value for key, value in body.items() if value is not None},
        )

    @covers(ops.RETURN_JOB)
    def return_job(self, job_id: int, *, reason: str | None = None) -> Job:
        """Give a job back to the queue unrun (it counts as an attempt)."""
        body = {} if reason is None else {"reason": reason}
        return self._call(Job, ops.RETURN_JOB, path={"job_id": job_id}, body=body)
