"""``jobmatch-agent``: the worker agent's command line (``jobmatch worker`` calls it too).

It imports the HTTP client and the standard library only (argparse, not the server's
typer), so a worker host runs it without the server's stack: ``pip install
'jobmatch[agent]'`` provides what it needs. The token is read from JOBMATCH_WORKER_TOKEN
(an option would show it in the process list).

Exit status: 0 after a normal stop (SIGTERM, SIGINT, --max-jobs), 1 when the spool cannot
be used, 2 for bad options, 3 when the server refuses the worker (its token or its name).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from app import __version__
from app.agent.execution import ALLOWED_ENVIRONMENT, TOKEN_VARIABLE
from app.agent.runner import Agent, AgentOptions, WorkerRefused
from app.agent.spool import SpoolError
from app.client import RetryPolicy, Timeouts, WorkerClient
from app.logs import configure_logging

REFUSED = 3
#: The environment variables the agent reads (besides those it passes on to jobs).
SERVER_VARIABLE, SPOOL_VARIABLE, LOG_FORMAT_VARIABLE = (
    "JOBMATCH_SERVER",
    "JOBMATCH_AGENT_SPOOL",
    "JOBMATCH_LOG_FORMAT",
)
READS_ENVIRONMENT = (TOKEN_VARIABLE, SERVER_VARIABLE, SPOOL_VARIABLE, LOG_FORMAT_VARIABLE)


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, not {text}")
    return value


def _not_negative(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return value


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {text}")
    return value


#: The options in seconds: flag, value check, default, what it sets.
SECONDS_OPTIONS = (
    ("--wait", _not_negative, 30.0, "seconds a pull waits on the server for a job "
     "(long-poll, up to 60)"),
    ("--poll-interval", _positive, 5.0, "seconds between pulls when the server answers at once"),
    ("--heartbeat-interval", _positive, 30.0, "seconds between heartbeats while jobs run"),
    ("--load-interval", _positive, 60.0, "seconds between Grid Engine load reports"),
    ("--output-interval", _positive, 1.0, "seconds between chunks of a running job's output"),
    ("--grace", _not_negative, 30.0, "on SIGTERM, seconds running jobs may still take before "
     "they are stopped and returned to the queue"),
    ("--backoff-max", _positive, 60.0, "longest wait between tries while the server "
     "cannot be reached"),
)  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jobmatch-agent",
        description="Run a jobmatch worker agent: report this host's facts and load, pull "
        "jobs (long-poll), run their commands, stream their output, report their ends. "
        f"The worker's token is read from {TOKEN_VARIABLE}.",
        epilog="Examples:\n"
        f"  {TOKEN_VARIABLE}=... jobmatch-agent --server http://127.0.0.1:8000 --name w1\n"
        f"  {TOKEN_VARIABLE}=... jobmatch worker --server http://jobmatch:8000 --slots 4\n"
        "\nA pull waits up to --wait seconds without a word to the server: keep it well "
        "under the server's JOBMATCH_LEASE_SECONDS (300 by default).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    env = os.environ.get
    add = parser.add_argument
    add("--version", action="version", version=f"jobmatch-agent {__version__}")
    add(
        "--server",
        default=env(SERVER_VARIABLE),
        help="the jobmatch server's URL, e.g. http://127.0.0.1:8000 [env JOBMATCH_SERVER]",
    )
    add("--name", help="the worker's registered name [default: the host name]")
    add("--slots", type=_count, default=1, help="jobs run at once [default: 1]")
    for flag, kind, default, text in SECONDS_OPTIONS:
        add(flag, type=kind, default=default, help=f"{text} [{default:g}]")
    add("--max-jobs", type=_count, help="exit after this many jobs")
    add(
        "--spool",
        type=Path,
        default=env(SPOOL_VARIABLE),
        help="directory where the agent keeps its jobs across restarts (one per agent) "
        "[env JOBMATCH_AGENT_SPOOL; default $XDG_STATE_HOME/jobmatch/agent-NAME]",
    )
    add(
        "--work-dir",
        type=Path,
        help="where each job gets its working directory [default: SPOOL/work]",
    )
    add(
        "--pass-env",
        action="append",
        default=[],
        metavar="NAME",
        help="pass this variable of the agent's environment to jobs (repeatable); always "
        f"passed: {', '.join(ALLOWED_ENVIRONMENT)}",
    )
    add("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    add(
        "--log-format",
        default=env(LOG_FORMAT_VARIABLE, "json"),
        choices=("json", "text"),
        help="json lines like the server, or text [env JOBMATCH_LOG_FORMAT; json]",
    )
    return parser


def _options(args: argparse.Namespace, name: str) -> AgentOptions:
    spool: Path = args.spool
    if spool is None:
        state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        spool = Path(state) / "jobmatch" / f"agent-{name}"
    return AgentOptions(
        name=name,
        slots=args.slots,
        wait=min(args.wait, 60.0),
        poll_interval=args.poll_interval,
        heartbeat_interval=args.heartbeat_interval,
        load_interval=args.load_interval,
        output_interval=args.output_interval,
        grace=args.grace,
        backoff_max=args.backoff_max,
        max_jobs=args.max_jobs,
        spool=spool,
        work_dir=args.work_dir or spool / "work",
        pass_env=tuple(args.pass_env),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    token = os.environ.get(TOKEN_VARIABLE, "")
    if not args.server:
        parser.error("--server (or JOBMATCH_SERVER) is required")
    if not token:
        parser.error(f"set {TOKEN_VARIABLE} to this worker's token")
    if TOKEN_VARIABLE in args.pass_env:
        parser.error(f"--pass-env {TOKEN_VARIABLE}: the agent's token never reaches a job")
    configure_logging(args.log_level, args.log_format)
    name = args.name or socket.gethostname()
    options = _options(args, name)
    # Short tries per call: the agent's own backoff retries for as long as it takes.
    retry = RetryPolicy(attempts=2, timeout=10.0, wait_max=1.0)
    with WorkerClient(args.server, token, name, retry=retry, timeouts=Timeouts()) as client:
        try:
            agent = Agent(client, options, secret=token)
        except SpoolError as error:
            print(f"jobmatch-agent: error: {error}", file=sys.stderr)
            return 1
        signal.signal(signal.SIGTERM, agent.stop)
        signal.signal(signal.SIGINT, agent.stop)
        try:
            return agent.run()
        except WorkerRefused as refused:
            logging.getLogger("jobmatch.agent").error("stopped: %s", refused)
            print(f"jobmatch-agent: error: {refused}", file=sys.stderr)
            return REFUSED
        except SpoolError as error:
            print(f"jobmatch-agent: error: {error}", file=sys.stderr)
            return 1


def run() -> None:
    """The console script's entry point."""
    sys.exit(main())


if __name__ == "__main__":
    run()
