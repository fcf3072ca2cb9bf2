"""The agent's loop: report facts, pull, run the job's command, report its end.

A (re)started agent reports its dynamic metadata before it pulls (debusine issue #8), and again
whenever a pull or heartbeat response asks for it. On SIGTERM it stops pulling; a running
command gets ``grace`` seconds to finish (then its result is reported as usual), after
which it is terminated and the job is returned to the queue, unfinished, for another
worker.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from app.agent.client import ApiError, Client
from app.agent.facts import analyze

log = logging.getLogger("jobmatch.agent")

REFRESH_HEADER = "jobmatch-refresh-metadata"
#: The tail of a command's output that is reported, in characters.
OUTPUT_TAIL = 65_536
#: Seconds a terminated command has to exit before it is killed.
KILL_AFTER = 5.0


@dataclass(frozen=True)
class AgentOptions:
    name: str
    poll_interval: float = 5.0
    heartbeat_interval: float = 30.0
    grace: float = 30.0
    #: Stop after this many jobs (None: run until told to stop).
    max_jobs: int | None = None


@dataclass(frozen=True)
class Outcome:
    """How a command ended: ``returned`` when the agent stopped it to give the job back."""

    kind: str  # finished, failed, returned
    exit_code: int | None
    output: str
    reason: str | None = None


class Agent:
    def __init__(self, client: Client, options: AgentOptions) -> None:
        self.client = client
        self.options = options
        self.stopping = threading.Event()
        self._refresh_wanted = False

    # ------------------------------------------------------------------ the server
    def report_metadata(self) -> None:
        tasks = self.client.request("GET", "/v1/tasks").body or []
        report = analyze(tasks)
        self.client.request(
            "POST", f"/v1/workers/{self.options.name}/metadata", {"metadata": report}
        )
        self._refresh_wanted = False
        log.info("reported metadata: %s", ", ".join(sorted(report)))

    def _heartbeat(self) -> None:
        try:
            reply = self.client.request("POST", f"/v1/workers/{self.options.name}/heartbeat")
        except ApiError as error:
            log.warning("heartbeat failed: %s", error)
            return
        if reply.body and reply.body.get("refresh_metadata"):
            self._refresh_wanted = True

    def stop(self, *_args: object) -> None:
        """Stop after (or, past the grace period, instead of) the current job."""
        log.info("stopping")
        self.stopping.set()

    # ------------------------------------------------------------------ the loop
    def run(self) -> int:
        self.report_metadata()
        done = 0
        while not self.stopping.is_set():
            if self._refresh_wanted:
                self.report_metadata()
            try:
                reply = self.client.request("POST", f"/v1/workers/{self.options.name}/pull")
            except ApiError as error:
                log.warning("pull failed: %s", error)
                self.stopping.wait(self.options.poll_interval)
                continue
            if reply.headers.get(REFRESH_HEADER) == "true":
                self._refresh_wanted = True
            if reply.status == 204 or reply.body is None:
                self.stopping.wait(self.options.poll_interval)
                continue
            self.run_job(reply.body)
            done += 1
            if self.options.max_jobs is not None and done >= self.options.max_jobs:
                break
        return 0

    def run_job(self, job: dict[str, Any]) -> Outcome:
        job_id = job["id"]
        log.info("running job %s", job_id)
        outcome = self._execute(job.get("command"), job.get("timeout"))
        try:
            if outcome.kind == "returned":
                self.client.request("POST", f"/v1/jobs/{job_id}/return")
            else:
                self.client.request(
                    "POST",
                    f"/v1/jobs/{job_id}/finish",
                    {
                        "outcome": outcome.kind,
                        "reason": outcome.reason,
                        "exit_code": outcome.exit_code,
                        "output": outcome.output,
                    },
                )
        except ApiError as error:
            # E.g. the job was cancelled meanwhile (409): nothing left to report.
            log.warning("could not report job %s: %s", job_id, error)
        log.info("job %s: %s", job_id, outcome.kind)
        return outcome

    def _execute(self, command: list[str] | None, timeout: int | None) -> Outcome:
        if not command:
            return Outcome("finished", None, "", None)
        try:
            process = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group, so a stop reaches children
            )
        except OSError as error:
            return Outcome("failed", None, "", f"cannot start {command[0]!r}: {error}")
        tail: deque[str] = deque()
        reader = threading.Thread(target=_read_tail, args=(process, tail), daemon=True)
        reader.start()
        started = time.monotonic()
        next_heartbeat = started + self.options.heartbeat_interval
        stop_deadline: float | None = None
        ended_by: str | None = None
        while process.poll() is None:
            now = time.monotonic()
            if timeout is not None and now - started >= timeout:
                ended_by = "timeout"
                _terminate(process)
                break
            if self.stopping.is_set() and stop_deadline is None:
                stop_deadline = now + self.options.grace
            if stop_deadline is not None and now >= stop_deadline:
                ended_by = "stop"
                _terminate(process)
                break
            if now >= next_heartbeat:
                self._heartbeat()
                next_heartbeat = now + self.options.heartbeat_interval
            time.sleep(0.05)
        process.wait()
        reader.join(timeout=KILL_AFTER)
        output = "".join(tail)[-OUTPUT_TAIL:]
        code = process.returncode
        if ended_by == "stop":
            return Outcome("returned", code, output, "the worker stopped")
        if ended_by == "timeout":
            return Outcome("failed", code, output, f"timed out after {timeout} s")
        if code == 0:
            return Outcome("finished", 0, output)
        if code < 0:
            return Outcome("failed", code, output, f"killed by signal {-code}")
        return Outcome("failed", code, output, f"exit status {code}")


def _read_tail(process: subprocess.Popen[bytes], tail: deque[str]) -> None:
    """Keep the last OUTPUT_TAIL characters (roughly) of the command's output."""
    assert process.stdout is not None
    descriptor = process.stdout.fileno()
    size = 0
    # os.read returns what is there (a pipe read never waits for a full buffer).
    for chunk in iter(lambda: os.read(descriptor, 8192), b""):
        text = chunk.decode("utf-8", "replace")
        tail.append(text)
        size += len(text)
        while size - len(tail[0]) > OUTPUT_TAIL:
            size -= len(tail.popleft())


def _terminate(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the command's process group, SIGKILL if it lingers."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=KILL_AFTER)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
