"""A job's results on the command line (issue 39): `jobs show` prints the exit code and the
output with its lines; `jobs output ID [--follow]` and `jobs history ID`; an empty
`jobs submit` is refused. Run against a live server, on every configured database."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from typing import Any

from app.cli.errors import ExitCode
from app.cli.jobs import SHOWN_OUTPUT_LINES
from tests.cli.conftest import ADMIN, COLUMNS, Jobmatch

#: The most a test waits for a line the program should print at once: a bound against a
#: hang, never what the test measures.
LINE_DEADLINE = 60.0


class RunningJob:
    """A job pulled by the worker w1 through the API, which the test then streams output
    for and ends, as the worker agent would."""

    def __init__(self, jobmatch: Jobmatch) -> None:
        self.jobmatch = jobmatch
        server = jobmatch.server
        registered = jobmatch.api("POST", "/v1/workers", {"name": "w1", "resources": "os: linux"})
        self.token = registered["token"]
        self.id = int(jobmatch.api("POST", "/v1/jobs", {"resources": "os: linux"})["id"])
        status, pulled = server.request("POST", "/v1/workers/w1/pull", None, self.token)
        assert (status, pulled["id"], pulled["state"]) == (200, self.id, "running")
        self.offset = 0

    def send(self, text: str) -> None:
        status, answer = self.jobmatch.server.request(
            "POST",
            f"/v1/workers/w1/jobs/{self.id}/output",
            {"offset": self.offset, "text": text},
            self.token,
        )
        assert status == 200, answer
        self.offset = answer["next_offset"]

    def finish(self, outcome: str, exit_code: int, output: str | None = None) -> None:
        body: dict[str, Any] = {"outcome": outcome, "exit_code": exit_code}
        if outcome == "failed":
            body["reason"] = f"exit status {exit_code}"
        if output is not None:
            body["output"] = output
        status, answer = self.jobmatch.server.request(
            "POST", f"/v1/jobs/{self.id}/finish", body, self.token
        )
        assert status == 200, answer


def ended_job(jobmatch: Jobmatch, output: str, exit_code: int = 0) -> RunningJob:
    job = RunningJob(jobmatch)
    job.finish("finished", exit_code, output)
    return job


def start_following(jobmatch: Jobmatch, job_id: int, *extra: str) -> subprocess.Popen[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("JOBMATCH_")}
    env = {
        **base,
        "COLUMNS": COLUMNS,
        "JOBMATCH_URL": jobmatch.server.base_url,
        "JOBMATCH_TOKEN": ADMIN,
    }
    command = [sys.executable, "-m", "app.cli", "jobs", "output", str(job_id), "--follow"]
    return subprocess.Popen(
        [*command, "--interval", "0.1", *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def next_line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], LINE_DEADLINE)
    assert ready, "the program printed nothing"
    return process.stdout.readline()


def test_show_prints_the_exit_code_and_the_output_with_its_lines(jobmatch: Jobmatch) -> None:
    job = ended_job(jobmatch, "out line\nerr line\n", exit_code=0)
    shown = jobmatch("jobs", "show", str(job.id))
    assert shown.code == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert "exit code: 0" in lines
    assert lines[-3:] == ["output:", "  out line", "  err line"]
    # -o json is the API's job, unchanged.
    assert jobmatch("jobs", "show", str(job.id), "-o", "json").json() == jobmatch.api(
        "GET", f"/v1/jobs/{job.id}"
    )


def test_show_cuts_a_long_output_and_names_the_command_that_prints_it(
    jobmatch: Jobmatch,
) -> None:
    output = "".join(f"line {n}\n" for n in range(1, SHOWN_OUTPUT_LINES + 11))
    job = ended_job(jobmatch, output)
    shown = jobmatch("jobs", "show", str(job.id))
    lines = shown.stdout.splitlines()
    cut_at = lines.index("output:")
    assert lines[cut_at + 1] == (
        f"  [10 earlier lines cut: jobmatch jobs output {job.id} prints them all]"
    )
    assert lines[cut_at + 2 :] == [f"  line {n}" for n in range(11, SHOWN_OUTPUT_LINES + 11)]
    whole = jobmatch("jobs", "output", str(job.id))
    assert (whole.code, whole.stdout) == (0, output)


def test_show_of_a_running_job_says_how_to_follow_it(jobmatch: Jobmatch) -> None:
    job = RunningJob(jobmatch)
    shown = jobmatch("jobs", "show", str(job.id))
    assert shown.stdout.splitlines()[-2:] == [
        "exit code: -",
        f"output:    (while it runs: jobmatch jobs output {job.id} --follow)",
    ]


def test_follow_prints_output_as_it_comes_then_exits_with_the_outcome(
    jobmatch: Jobmatch,
) -> None:
    job = RunningJob(jobmatch)
    job.send("first line\n")
    follower = start_following(jobmatch, job.id)
    try:
        assert next_line(follower) == "first line\n"
        # Sent while it follows: it arrives, and the program goes on following.
        job.send("second line\n")
        assert next_line(follower) == "second line\n"
        assert follower.poll() is None
        job.send("last line\n")
        job.finish("failed", 3)
        stdout, stderr = follower.communicate(timeout=LINE_DEADLINE)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate()
    assert follower.returncode == ExitCode.JOB_FAILED
    assert stdout == "last line\n"
    assert stderr == f"(job {job.id} failed, exit code 3: exit status 3)\n"
    # The whole of it afterwards, as it was streamed.
    again = jobmatch("jobs", "output", str(job.id))
    assert again.stdout == "first line\nsecond line\nlast line\n"


def test_follow_of_a_finished_job_prints_its_output_and_exits_0(jobmatch: Jobmatch) -> None:
    job = ended_job(jobmatch, "42\n")
    followed = jobmatch("jobs", "output", str(job.id), "--follow")
    assert (followed.code, followed.stdout) == (0, "42\n")
    assert followed.stderr == f"(job {job.id} finished, exit code 0)\n"
    # Nothing was streamed: the output reported with the end, marked as such.
    as_json = jobmatch("jobs", "output", str(job.id), "--follow", "-o", "json")
    assert as_json.code == 0, as_json.stderr
    assert [json.loads(line) for line in as_json.stdout.splitlines()] == [
        {"job": job.id, "text": "42\n", "reported_with_end": True}
    ]


def test_follow_of_a_cancelled_job_exits_7(jobmatch: Jobmatch) -> None:
    job = RunningJob(jobmatch)
    jobmatch.api("POST", f"/v1/jobs/{job.id}/cancel")
    followed = jobmatch("jobs", "output", str(job.id), "--follow")
    assert followed.code == ExitCode.JOB_CANCELLED, followed
    assert followed.stderr.startswith(f"(job {job.id} cancelled")


def test_follow_with_json_prints_one_json_line_per_answer(jobmatch: Jobmatch) -> None:
    job = RunningJob(jobmatch)
    job.send("a\n")
    follower = start_following(jobmatch, job.id, "-o", "json")
    try:
        assert next_line(follower) == (
            f'{{"job":{job.id},"offset":0,"text":"a\\n","next_offset":2,"missed":0}}\n'
        )
        job.finish("finished", 0)
        follower.communicate(timeout=LINE_DEADLINE)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate()
    assert follower.returncode == 0


def test_output_of_a_waiting_job_says_there_is_none_yet(jobmatch: Jobmatch) -> None:
    RunningJob(jobmatch)  # w1's one slot is taken: the next job waits
    job = jobmatch.api("POST", "/v1/jobs", {"resources": "os: linux"})
    assert job["state"] == "waiting"
    result = jobmatch("jobs", "output", str(job["id"]))
    assert (result.code, result.stdout) == (0, "")
    assert result.stderr == (
        f"(job {job['id']} is waiting: no output yet; --follow waits for it)\n"
    )
    as_json = jobmatch("jobs", "output", str(job["id"]), "-o", "json").json()
    assert as_json == jobmatch.api("GET", f"/v1/jobs/{job['id']}/output")


def test_output_of_a_job_that_does_not_exist_is_one_line(jobmatch: Jobmatch) -> None:
    for args in (["output", "999"], ["output", "999", "--follow"], ["history", "999"]):
        result = jobmatch("jobs", *args)
        assert result.code == ExitCode.REFUSED, result
        assert result.stderr == "error: 404 Not Found: no job with id 999\n"


def test_history_is_a_table_and_its_json_is_the_apis(jobmatch: Jobmatch) -> None:
    job = ended_job(jobmatch, "done\n")
    table = jobmatch("jobs", "history", str(job.id))
    assert table.code == 0, table.stderr
    header, *rows = [line.split() for line in table.stdout.splitlines() if line.strip()]
    assert header == ["AT", "EVENT", "WORKER", "DETAIL"]
    assert [row[1] for row in rows if row[0] != "─" * len(row[0])] == [
        "submitted",
        "dispatched",
        "finished",
    ]
    assert rows[-1][2] == "w1"
    as_json = jobmatch("jobs", "history", str(job.id), "-o", "json").json()
    assert as_json == jobmatch.api("GET", f"/v1/jobs/{job.id}/history")


def test_an_empty_submission_is_refused_unless_anything(jobmatch: Jobmatch, tmp_path: Any) -> None:
    refused = jobmatch("jobs", "submit")
    assert refused.code == ExitCode.USAGE
    assert refused.stderr.startswith("error: the job asks for nothing (")
    assert refused.stderr.endswith("give what it needs, or --anything\n")
    assert refused.stderr.count("\n") == 1
    # Options that ask nothing do not count; nothing was stored.
    assert jobmatch("jobs", "submit", "--slots", "2", "--", "true").code == ExitCode.USAGE
    assert jobmatch.api("GET", "/v1/jobs")["items"] == []
    anything = jobmatch("jobs", "submit", "--anything", "-o", "json").json()
    assert anything["state"] in ("waiting", "failed")
    # A request in --file counts.
    body = tmp_path / "job.json"
    body.write_text('{"hard": "arch=lx-amd64"}')
    assert jobmatch("jobs", "submit", "--file", str(body)).code == 0


def test_deleting_a_busy_worker_names_requeue(jobmatch: Jobmatch) -> None:
    job = RunningJob(jobmatch)
    refused = jobmatch("workers", "delete", "w1")
    assert refused.code == ExitCode.REFUSED
    assert refused.stderr == (
        f"error: 409 Conflict: worker 'w1' runs job {job.id}; drain it (jobmatch workers "
        "drain w1 --reason ...) and wait for them to end, or return them to the queue with "
        "jobmatch workers delete w1 --requeue\n"
    )
    deleted = jobmatch("workers", "delete", "w1", "--requeue")
    assert deleted.code == 0, deleted.stderr


def test_ctrl_c_stops_following_without_a_traceback(jobmatch: Jobmatch) -> None:
    job = RunningJob(jobmatch)
    job.send("working\n")
    follower = start_following(jobmatch, job.id)
    try:
        assert next_line(follower) == "working\n"
        follower.send_signal(signal.SIGINT)
        stdout, stderr = follower.communicate(timeout=LINE_DEADLINE)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate()
    assert follower.returncode == 130
    assert (stdout, stderr) == ("", f"(stopped following job {job.id}; it goes on)\n")
    assert jobmatch.api("GET", f"/v1/jobs/{job.id}")["state"] == "running"
