"""A job's results on the command line: its output (`jobs output ID [--follow]`) and its
history (`jobs history ID`), read over HTTP.

The output a worker streams while the job runs is read from `GET /v1/jobs/{id}/output`
by offset; the server keeps a bounded tail of it, so a reader that fell behind is told how
much it missed. When nothing was streamed (a worker that reports its output only with the
job's end), the job's own `output` field is what there is.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any

import typer

from app.cli.errors import ExitCode
from app.cli.output import Column, Row, field, print_json, print_json_line, print_table
from app.client import AdminClient, JobState
from app.words import plural

#: How each end of a job makes `jobs output --follow` exit.
OUTCOME_CODES = {
    JobState.FINISHED.value: ExitCode.OK,
    JobState.FAILED.value: ExitCode.JOB_FAILED,
    JobState.CANCELLED.value: ExitCode.JOB_CANCELLED,
}

HISTORY_COLUMNS = (
    Column("AT", field("at")),
    Column("EVENT", field("kind")),
    Column("WORKER", field("worker")),
    Column("DETAIL", field("detail")),
)


def note(message: str) -> None:
    """A line for the person at the terminal, on stderr, so that stdout holds only the
    job's output."""
    typer.echo(f"({message})", err=True)


@dataclass
class OutputReader:
    """Reads a job's output chunk by chunk from where it left off, writing it as it
    comes; ``json`` writes each answer of the API as one line of JSON instead."""

    client: AdminClient
    job_id: int
    json: bool = False
    offset: int = 0
    streamed: bool = False

    def job(self) -> Row:
        self.client.get_job(self.job_id)
        return dict(self.client.last_json)

    def read(self) -> None:
        """Write what the job printed since the last read."""
        self.client.job_output(self.job_id, offset=self.offset)
        answer: dict[str, Any] = dict(self.client.last_json)
        next_offset = int(answer.get("next_offset", 0))
        if next_offset < self.offset:
            # A new attempt (the job was requeued and runs again): its output starts over.
            note(f"job {self.job_id} started again; its output starts over")
            self.offset = 0
            self.read()
            return
        if answer.get("missed"):
            lost = plural(int(answer["missed"]), "character")
            note(f"{lost} of output before this are no longer kept by the server")
        text = str(answer.get("text") or "")
        if self.json:
            if text or answer.get("missed"):
                print_json_line(answer)
        elif text:
            sys.stdout.write(text)
            sys.stdout.flush()
        self.streamed = self.streamed or next_offset > 0
        self.offset = next_offset

    def end(self, job: Row) -> None:
        """After the last read of an ended job: when its worker streamed nothing, the
        output it reported with the end."""
        reported = job.get("output")
        if self.streamed or not reported:
            return
        if self.json:
            # Not an answer of the output route: marked, with the same "text" key for jq.
            print_json_line({"job": self.job_id, "text": reported, "reported_with_end": True})
            return
        sys.stdout.write(reported if reported.endswith("\n") else reported + "\n")
        sys.stdout.flush()


def print_output(client: AdminClient, job_id: int, *, json: bool) -> None:
    """The job's output so far (`jobs output ID`): with -o json, the API's answer."""
    reader = OutputReader(client, job_id)
    job = reader.job()
    if json:
        client.job_output(job_id)
        print_json(client.last_json)
        return
    reader.read()
    if job.get("state") in OUTCOME_CODES:
        reader.end(job)
    elif not reader.streamed:
        note(f"job {job_id} is {job.get('state')}: no output yet; --follow waits for it")


def follow_output(client: AdminClient, job_id: int, *, json: bool, interval: float) -> int:
    """Write the job's output as it comes until the job ends; the exit code of its end
    (OUTCOME_CODES). The job's state is read before its output each time, so that the
    read after the end is seen holds everything the worker sent."""
    reader = OutputReader(client, job_id, json=json)
    while True:
        job = reader.job()
        reader.read()
        state = job.get("state")
        if state in OUTCOME_CODES:
            reader.end(job)
            ending = f"job {job_id} {state}"
            if job.get("exit_code") is not None:
                ending += f", exit code {job['exit_code']}"
            if job.get("failure_reason"):
                ending += f": {job['failure_reason']}"
            note(ending)
            return int(OUTCOME_CODES[state])
        time.sleep(interval)


def print_history(history: Row, *, wide: bool) -> None:
    print_table(history.get("events", []), HISTORY_COLUMNS, wide=wide)
