"""`jobmatch jobs ...`: list, show, explain, submit and cancel jobs, over HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli.connection import LimitOption, Remote, read_list, remote_command
from app.cli.errors import CommandError, ExitCode
from app.cli.explain import print_explanation
from app.cli.files import read_file_or_stdin
from app.cli.help import command_group
from app.cli.job_output import (
    OUTCOME_CODES,
    follow_output,
    note,
    print_history,
    print_output,
)
from app.cli.output import (
    DEFAULT_LIMIT,
    Column,
    Row,
    field,
    notations,
    print_fields,
    print_lines,
    print_table,
)
from app.client import AdminClient, Forbidden, JobSpec, JobState
from app.words import plural

jobs_cli = command_group(
    "List, show, explain, submit and cancel jobs; read their output and history."
)

JobArgument = Annotated[
    int, typer.Argument(metavar="ID", min=1, help="the job's id", show_default=False)
]

#: The fields that carry what a job asks for, in every notation, in the order shown.
REQUEST_FIELDS = (
    *("resources", "constraint", "shape", "jobspec", "task", "hard", "soft", "pe"),
    *("queue_list", "master_queue_list", "soft_queue_list", "project"),
)


def request_summary(row: Row) -> str:
    """What the job asks for, in its notations: `resources=...; hard=...`."""
    return notations((name, row.get(name)) for name in REQUEST_FIELDS)


JOB_COLUMNS = (
    Column("ID", field("id")),
    Column("STATE", field("state")),
    Column("PRIORITY", field("priority")),
    Column("SLOTS", field("slots")),
    Column("CATEGORY", field("category_id")),
    Column("WORKER", field("worker")),
    Column("SUBMITTER", field("submitter")),
    Column("SUBMITTED", field("submitted_at")),
    Column("REQUEST", request_summary, wide_only=True),
    Column("ATTEMPTS", field("attempts"), wide_only=True),
    Column("FAILURE", field("failure_reason"), wide_only=True),
    Column("ENDED", field("ended_at"), wide_only=True),
)


def caller_subject(client: AdminClient) -> str | None:
    """Whose jobs are "mine": the admin token submits as `admin`; any other token already
    sees only its own jobs (None: nothing to filter). Only the admin may list tokens, so
    that one read tells the two apart."""
    try:
        client.list_tokens(limit=1)
    except Forbidden:
        return None
    return "admin"


@remote_command(
    jobs_cli,
    "list",
    "jobmatch jobs list",
    "jobmatch jobs list --state waiting --category 3 -o wide",
    "jobmatch jobs list --mine --limit 500 -o json | jq '.items | length'",
)
def list_jobs(
    remote: Remote,
    state: Annotated[
        JobState | None, typer.Option(help="only jobs in this state", show_default=False)
    ] = None,
    category: Annotated[
        int | None, typer.Option(min=1, help="only jobs of this category id", show_default=False)
    ] = None,
    mine: Annotated[
        bool, typer.Option("--mine", help="only the jobs this token submitted")
    ] = False,
    limit: LimitOption = DEFAULT_LIMIT,
) -> None:
    """List jobs in the order they were submitted (a submitter token sees its own)."""
    with remote.client() as client:
        subject = caller_subject(client) if mine else None

        def keep(row: Row) -> bool:
            return subject is None or row.get("submitter") == subject

        page = read_list(client, client.list_jobs, limit, keep, state=state, category=category)
    remote.show_page(page, JOB_COLUMNS)


#: `jobs show` prints at most the last this many lines of a job's output, and of those at
#: most the last this many characters; `jobs output ID` prints it whole.
SHOWN_OUTPUT_LINES = 20
SHOWN_OUTPUT_CHARS = 4000


def output_tail(output: str) -> tuple[str, int]:
    """The end of a job's output that `jobs show` prints (its last SHOWN_OUTPUT_LINES
    lines, at most SHOWN_OUTPUT_CHARS characters), and how many lines it leaves out."""
    lines = output.splitlines()
    kept = lines[-SHOWN_OUTPUT_LINES:]
    text = "\n".join(kept)
    if len(text) > SHOWN_OUTPUT_CHARS:
        text = text[-SHOWN_OUTPUT_CHARS:]
        kept = text.splitlines()
    return text, len(lines) - len(kept)


def print_output_block(job: Row) -> None:
    """The job's output under the fields, its lines as the command printed them (two
    spaces in), cut to its end when long, with the command that prints all of it."""
    output = job.get("output")
    if job.get("state") not in OUTCOME_CODES:  # not ended: its output may still grow
        follow = f"jobmatch jobs output {job.get('id')} --follow"
        print_lines([f"output:    (while it runs: {follow})"])
        return
    if not output:
        print_lines(["output:    -"])
        return
    text, cut = output_tail(output)
    lines = ["output:"]
    if cut:
        lines.append(
            f"  [{plural(cut, 'earlier line')} cut: jobmatch jobs output {job.get('id')} "
            "prints them all]"
        )
    lines += [f"  {line}" for line in text.splitlines()]
    print_lines(lines)


def print_job(job: Row, *, wide: bool) -> None:
    fields: list[tuple[str, Any]] = [
        ("id", job.get("id")),
        ("state", job.get("state")),
        ("request", request_summary(job)),
        ("slots", job.get("slots")),
        ("priority", job.get("priority")),
        ("category", job.get("category_id")),
        ("submitter", job.get("submitter")),
        ("worker", job.get("worker")),
        ("failure", job.get("failure_reason")),
        ("submitted", job.get("submitted_at")),
        ("started", job.get("started_at")),
        ("ended", job.get("ended_at")),
        ("exit code", job.get("exit_code")),
    ]
    if wide:
        fields += [
            ("attempts", job.get("attempts")),
            ("command", job.get("command")),
            ("timeout", job.get("timeout")),
            ("pe slots", job.get("pe_slots")),
        ]
    print_fields(fields)
    print_output_block(job)


@remote_command(
    jobs_cli, "show", "jobmatch jobs show 12", "jobmatch jobs show 12 -o json | jq .state"
)
def show_job(remote: Remote, job_id: JobArgument) -> None:
    """Show one job: what it asks for, its state, where it runs, its exit code and the
    end of its output (`jobs output ID` prints all of it)."""
    remote.call_and_show(
        lambda client: client.get_job(job_id), lambda job: print_job(job, wide=remote.wide)
    )


@remote_command(
    jobs_cli,
    "output",
    "jobmatch jobs output 12",
    "jobmatch jobs output 12 --follow   # until the job ends; exits 0, 6 failed, 7 cancelled",
    "jobmatch jobs output 12 --follow -o json | jq -r .text",
)
def job_output(
    remote: Remote,
    job_id: JobArgument,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            "-f",
            help="print new output as it comes until the job ends, then exit with its "
            "outcome: 0 finished, 6 failed, 7 cancelled",
        ),
    ] = False,
    interval: Annotated[
        float,
        typer.Option(min=0.05, help="with --follow, seconds between two reads"),
    ] = 1.0,
) -> None:
    """Print a job's output: what its worker streamed so far (or, when it streamed
    nothing, what it reported with the job's end). -o json prints the API's answer (with
    --follow, one line of JSON per answer that carries text)."""
    with remote.client() as client:
        if not follow:
            print_output(client, job_id, json=remote.json)
            return
        try:
            code = follow_output(client, job_id, json=remote.json, interval=interval)
        except KeyboardInterrupt:
            # The person stopped following; the job itself goes on.
            note(f"stopped following job {job_id}; it goes on")
            raise typer.Exit(130) from None
    raise typer.Exit(code)


@remote_command(
    jobs_cli,
    "history",
    "jobmatch jobs history 12",
    "jobmatch jobs history 12 -o json | jq '.events[].kind'",
)
def job_history(remote: Remote, job_id: JobArgument) -> None:
    """Show what happened to a job, oldest first: submitted, dispatched (to which
    worker), requeued, returned, finished, failed, cancelled."""
    remote.call_and_show(
        lambda client: client.job_history(job_id),
        lambda history: print_history(history, wide=remote.wide),
    )


@remote_command(
    jobs_cli,
    "explain",
    "jobmatch jobs explain 12",
    "jobmatch jobs explain 12 --worker w1 -o wide",
    "jobmatch jobs explain 12 -o json | jq '.workers[] | select(.eligible)'",
)
def explain_job(
    remote: Remote,
    job_id: JobArgument,
    worker: Annotated[
        str | None, typer.Option(help="only this worker [default: every worker]")
    ] = None,
) -> None:
    """Why each worker can or cannot run a job, clause by clause."""
    remote.call_and_show(
        lambda client: client.explain_job(job_id, worker=worker),
        lambda answer: print_explanation(answer, wide=remote.wide),
    )


@remote_command(
    jobs_cli, "cancel", "jobmatch jobs cancel 12", "jobmatch jobs cancel 12 -o json | jq .state"
)
def cancel_job(remote: Remote, job_id: JobArgument) -> None:
    """Cancel a waiting or running job (refused, exit 1, when it has already ended)."""
    remote.call_and_show(
        lambda client: client.cancel_job(job_id),
        lambda job: typer.echo(f"job {job['id']}: {job['state']}"),
    )


def _json_option(value: str | None, name: str) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError as error:
        raise CommandError(f"--{name} is not JSON: {error}", ExitCode.USAGE) from None


def _file_body(path: Path | None) -> dict[str, Any]:
    """The JSON object of --file (`-` reads standard input)."""
    if path is None:
        return {}
    try:
        body = json.loads(read_file_or_stdin(path))
    except (OSError, ValueError) as error:
        raise CommandError(f"--file {path}: {error}", ExitCode.USAGE) from None
    if not isinstance(body, dict):
        raise CommandError(f"--file {path}: expected a JSON object", ExitCode.USAGE)
    return body


#: The options `jobs submit` takes as JSON text (an RFC 31 constraint, an RFC 14 list).
JSON_OPTIONS = ("constraint", "jobspec")


#: The fields by which a job asks for something, in any notation: a job with none of them
#: runs on any worker, which `jobs submit` does only when told --anything.
ASKING_FIELDS = (*REQUEST_FIELDS, "requires")


def job_spec(file: Path | None, options: dict[str, Any], *, anything: bool = True) -> JobSpec:
    """The job to submit: --file's fields, overridden by the options given (the JSON ones
    parsed first, so that a bad one is reported before the file is read). Unless
    ``anything``, a job that asks for nothing in any notation is refused."""
    given = {
        key: _json_option(value, key) if key in JSON_OPTIONS else value
        for key, value in options.items()
    }
    body = _file_body(file)
    body.update({key: value for key, value in given.items() if value not in (None, [])})
    if not anything and not any(body.get(name) not in (None, "", []) for name in ASKING_FIELDS):
        raise CommandError(
            "the job asks for nothing (no --resources, --requires, --constraint, --shape, "
            "--jobspec, --task, --hard, --soft, --pe, -q, --project or such field in "
            "--file), so any worker would run it; give what it needs, or --anything",
            ExitCode.USAGE,
        )
    try:
        return JobSpec(**body)
    except TypeError as error:
        raise CommandError(f"not a field of a job: {error}", ExitCode.USAGE) from None


def job_field(help_text: str, *flags: str) -> Any:
    """The option of a job field given as text: the field is left out of the job unless
    the option is given (the server's default applies), so its help shows no default."""
    return typer.Option(*flags, help=help_text, show_default=False)


@remote_command(
    jobs_cli,
    "submit",
    "jobmatch jobs submit --resources 'language: java; java: 12'",
    "jobmatch jobs submit --requires 'host:node[0-3] ssd' --shape 'slot=4/node'",
    "jobmatch jobs submit --hard 'h_vmem=2G,arch=lx*' --pe mpi --pe-slots 2-4",
    "jobmatch jobs submit --task shell --timeout 60 -- python3 -c 'print(42)'",
    "jobmatch jobs submit --file job.json -o json | jq .id",
    "jobmatch jobs submit -t 1-100:2 --tc 10 -- ./render.sh",
)
def submit_job(
    remote: Remote,
    command: Annotated[
        list[str] | None,
        typer.Argument(help="the command a task job runs (after --)", show_default=False),
    ] = None,
    resources: Annotated[str | None, job_field("Momotor tags")] = None,
    requires: Annotated[str | None, job_field("Flux RFC 35 constraint text")] = None,
    constraint: Annotated[str | None, job_field("Flux RFC 31 constraint, as JSON")] = None,
    shape: Annotated[str | None, job_field("Flux RFC 46 shape")] = None,
    jobspec: Annotated[str | None, job_field("RFC 14 resources list, as JSON")] = None,
    task: Annotated[str | None, job_field("debusine task type")] = None,
    timeout: Annotated[
        int | None, typer.Option(min=1, help="seconds a task job may run", show_default=False)
    ] = None,
    hard: Annotated[str | None, job_field("Grid Engine hard -l list")] = None,
    soft: Annotated[str | None, job_field("Grid Engine soft -l list")] = None,
    pe: Annotated[str | None, job_field("Grid Engine parallel environment")] = None,
    pe_slots: Annotated[str | None, job_field("slot range of the PE, e.g. 2-4")] = None,
    queue_list: Annotated[
        str | None, job_field("Grid Engine hard -q list, e.g. all.q@h*", "--queue", "-q")
    ] = None,
    master_queue_list: Annotated[
        str | None, job_field("Grid Engine -masterq list (with --pe)", "--masterq")
    ] = None,
    soft_queue_list: Annotated[
        str | None, job_field("Grid Engine soft -q list", "--soft-queue")
    ] = None,
    project: Annotated[
        str | None, job_field("Grid Engine project (qsub -P; must exist)", "--project", "-P")
    ] = None,
    verify: Annotated[
        str | None,
        job_field("Grid Engine qsub -w: e refuses a job that could run nowhere", "--verify", "-w"),
    ] = None,
    slots: Annotated[int | None, typer.Option(min=1, help="slots [server default: 1]")] = None,
    priority: Annotated[int | None, typer.Option(help="priority [server default: 0]")] = None,
    tasks: Annotated[
        str | None,
        job_field(
            "Grid Engine array job, qsub -t n[-m[:s]]: one job per task id (through "
            "POST /v1/jobs/bulk)",
            "--tasks",
            "-t",
        ),
    ] = None,
    task_concurrency: Annotated[
        int | None,
        typer.Option(
            "--tc",
            "--task-concurrency",
            min=1,
            help="qsub -tc: at most this many tasks of the array run at once (with -t)",
            show_default=False,
        ),
    ] = None,
    file: Annotated[
        Path | None,
        typer.Option(help="a JSON body of POST /v1/jobs ('-': stdin); options override it"),
    ] = None,
    anything: Annotated[
        bool,
        typer.Option(
            "--anything",
            help="submit a job that asks for nothing, which any worker may run (without it, "
            "such a job is refused: exit 2)",
        ),
    ] = False,
) -> None:
    """Submit a job in any notation; prints it (its id and state first). With -t, an array
    job: prints its tasks' jobs."""
    options = {
        "resources": resources,
        "requires": requires,
        "constraint": constraint,
        "shape": shape,
        "jobspec": jobspec,
        "task": task,
        "command": command,
        "timeout": timeout,
        "hard": hard,
        "soft": soft,
        "pe": pe,
        "pe_slots": pe_slots,
        "queue_list": queue_list,
        "master_queue_list": master_queue_list,
        "soft_queue_list": soft_queue_list,
        "project": project,
        "verify": verify,
        "slots": slots,
        "priority": priority,
        "tasks": tasks,
        "task_concurrency": task_concurrency,
    }
    if tasks is not None or task_concurrency is not None:
        # An array job goes through the bulk route, which answers every task's job.
        remote.call_and_show(
            lambda client: client.submit_jobs([job_spec(file, options, anything=anything)]),
            lambda answer: print_submitted(answer, wide=remote.wide),
        )
        return
    # Read inside the call, where a bad --file or JSON option becomes one line and exit 2.
    remote.call_and_show(
        lambda client: client.submit_job(job_spec(file, options, anything=anything)),
        lambda job: print_job(job, wide=remote.wide),
    )


#: The columns of a bulk submission's answer.
SUBMITTED_COLUMNS = [
    Column("ID", field("id")),
    Column("STATE", field("state")),
    Column("ARRAY", field("array_id")),
    Column("TASK", field("task_id")),
    Column("FAILURE", field("failure_reason")),
]


def print_submitted(answer: Row, *, wide: bool) -> None:
    print_table(answer.get("jobs", []), SUBMITTED_COLUMNS, wide=wide)


def job_bodies(path: Path) -> list[dict[str, Any]]:
    """The job bodies of a file ('-': stdin): a JSON list of objects, or JSON lines (one
    object a line; blank lines are skipped)."""
    try:
        content = read_file_or_stdin(path)
    except OSError as error:
        raise CommandError(f"{path}: {error}", ExitCode.USAGE) from None
    try:
        if content.lstrip().startswith("["):
            bodies = json.loads(content)
        else:
            bodies = [json.loads(line) for line in content.splitlines() if line.strip()]
    except ValueError as error:
        raise CommandError(
            f"{path}: not a JSON list or JSON lines: {error}", ExitCode.USAGE
        ) from None
    if not isinstance(bodies, list) or not all(isinstance(b, dict) for b in bodies):
        raise CommandError(f"{path}: expected JSON objects (job bodies)", ExitCode.USAGE)
    if not bodies:
        raise CommandError(f"{path}: no job bodies", ExitCode.USAGE)
    return bodies


@remote_command(
    jobs_cli,
    "submit-many",
    "jobmatch jobs submit-many jobs.json",
    "jobmatch jobs submit-many - --chunk 500 -o json < jobs.jsonl | jq .count",
)
def submit_many(
    remote: Remote,
    path: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            help="job bodies as POST /v1/jobs takes them: a JSON list, or JSON lines ('-': stdin)",
            show_default=False,
        ),
    ],
    chunk: Annotated[
        int,
        typer.Option(
            min=1,
            help="bodies per request (the server takes at most JOBMATCH_MAX_BULK_JOBS)",
        ),
    ] = 1000,
) -> None:
    """Submit many jobs through POST /v1/jobs/bulk, CHUNK bodies per request; each request
    is stored whole or not at all. Prints every job (id, state, array, task) in file
    order; when a request is refused, the jobs of the earlier ones stay submitted and the
    error says how many."""
    stored: list[Any] = []
    # Read inside the call, where a bad file becomes one line and exit 2.
    with remote.client() as client:
        bodies = job_bodies(path)
        for start in range(0, len(bodies), chunk):
            try:
                answer = client.submit_jobs(bodies[start : start + chunk])
            except Exception:
                if stored:
                    typer.echo(
                        f"jobmatch: the {plural(len(stored), 'job')} of bodies 0 to "
                        f"{start - 1} were "
                        f"submitted; the request of bodies {start} onwards was not (the "
                        "error's body indexes count from its first body)",
                        err=True,
                    )
                raise
            stored.extend(answer.jobs)
    jobs = [
        {
            "id": job.id,
            "state": job.state.value,
            "array_id": job.array_id,
            "task_id": job.task_id,
            "failure_reason": job.failure_reason,
        }
        for job in stored
    ]
    remote.show(
        {"count": len(jobs), "jobs": jobs}, lambda answer: print_submitted(answer, wide=remote.wide)
    )
