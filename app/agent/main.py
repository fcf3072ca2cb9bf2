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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NoReturn

import stamina.instrumentation

from app import __version__
from app.agent.execution import ALLOWED_ENVIRONMENT, TOKEN_VARIABLE
from app.agent.runner import Agent, AgentOptions, WorkerRefused
from app.agent.spool import SpoolError
from app.client import RetryPolicy, Timeouts, WorkerClient, retry_line, server_url_mistake
from app.logs import configure_logging

REFUSED = 3
USAGE = 2
#: The environment variables the agent reads (besides those it passes on to jobs). The
#: server's URL is JOBMATCH_URL, as for the `jobmatch` commands; JOBMATCH_SERVER, its old
#: name, is still read (with a warning).
URL_VARIABLE, OLD_URL_VARIABLE, SPOOL_VARIABLE, LOG_FORMAT_VARIABLE = (
    "JOBMATCH_URL",
    "JOBMATCH_SERVER",
    "JOBMATCH_AGENT_SPOOL",
    "JOBMATCH_LOG_FORMAT",
)
READS_ENVIRONMENT = (
    TOKEN_VARIABLE,
    URL_VARIABLE,
    OLD_URL_VARIABLE,
    SPOOL_VARIABLE,
    LOG_FORMAT_VARIABLE,
)
#: Loggers of the HTTP libraries: a line per request is for debugging, not for the log of
#: a worker that pulls every 30 seconds.
HTTP_LOGGERS = ("httpx2", "httpcore2", "httpx", "httpcore")

log = logging.getLogger("jobmatch.agent")


class OneLineParser(argparse.ArgumentParser):
    """argparse, with a usage error said as every `jobmatch` command says one: a single
    `error:` line naming --help, exit 2 (argparse prints the usage block, then the error)."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE, f"error: {message} (see '{self.prog} --help')\n")


class DebugOnly(logging.Filter):
    """Turns a record into a DEBUG one, kept only when the log shows DEBUG (a logger
    filter: the HTTP libraries log each request at INFO)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger().isEnabledFor(logging.DEBUG)


def log_retry(details: stamina.instrumentation.RetryDetails) -> None:
    """stamina's retry hook: one line saying what failed, and which attempt comes when."""
    log.warning("%s", retry_line(details))


def quiet_http_libraries() -> None:
    """Request lines of the HTTP libraries at DEBUG, retries as one line of the agent's
    (instead of stamina's bare `stamina.retry_scheduled`)."""
    for name in HTTP_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, DebugOnly) for f in logger.filters):
            logger.addFilter(DebugOnly())
    stamina.instrumentation.set_on_retry_hooks([log_retry])


def server_from_environment(environ: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The server's URL from the environment, and a warning line when it came from (or
    was also set as) the deprecated JOBMATCH_SERVER."""
    url, old = environ.get(URL_VARIABLE), environ.get(OLD_URL_VARIABLE)
    if old is None:
        return url, None
    if url is not None:
        return url, (
            f"warning: {OLD_URL_VARIABLE} is deprecated and ignored: {URL_VARIABLE} is "
            f"set too, and wins ({url})"
        )
    return old, f"warning: {OLD_URL_VARIABLE} is deprecated: set {URL_VARIABLE} instead"


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


def build_parser(prog: str = "jobmatch-agent") -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=prog,
        description="Run a jobmatch worker agent: report this host's facts and load, pull "
        "jobs (long-poll), run their commands, stream their output, report their ends. "
        f"The worker's token is read from {TOKEN_VARIABLE}.",
        epilog="Examples:\n"
        f"  {TOKEN_VARIABLE}=... jobmatch-agent --url http://127.0.0.1:8000 --name w1\n"
        f"  {TOKEN_VARIABLE}=... jobmatch worker --url http://jobmatch:8000 --slots 4\n"
        "\nA pull waits up to --wait seconds without a word to the server: keep it well "
        "under the server's JOBMATCH_LEASE_SECONDS (300 by default).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    env = os.environ.get
    add = parser.add_argument
    add("--version", action="version", version=f"jobmatch-agent {__version__}")
    add(
        "--url",
        "--server",
        dest="url",
        help="the jobmatch server's URL, e.g. http://127.0.0.1:8000 [env JOBMATCH_URL; "
        "--server and JOBMATCH_SERVER are its old names]",
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


def main(argv: Sequence[str] | None = None, prog: str = "jobmatch-agent") -> int:
    """Run the agent; ``prog`` is how it was called (`jobmatch worker` runs it too)."""
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    token = os.environ.get(TOKEN_VARIABLE, "")
    if not args.url:
        args.url, warning = server_from_environment(os.environ)
        if warning is not None:
            print(warning, file=sys.stderr)
    if not args.url:
        parser.error(f"--url (or {URL_VARIABLE}) is required")
    mistake = server_url_mistake(args.url)
    if mistake is not None:
        parser.error(f"the server URL {args.url!r} (--url, {URL_VARIABLE}) {mistake}")
    if not token:
        parser.error(f"set {TOKEN_VARIABLE} to this worker's token")
    if TOKEN_VARIABLE in args.pass_env:
        parser.error(f"--pass-env {TOKEN_VARIABLE}: the agent's token never reaches a job")
    configure_logging(args.log_level, args.log_format)
    quiet_http_libraries()
    name = args.name or socket.gethostname()
    options = _options(args, name)
    # Short tries per call: the agent's own backoff retries for as long as it takes.
    retry = RetryPolicy(attempts=2, timeout=10.0, wait_max=1.0)
    with WorkerClient(args.url, token, name, retry=retry, timeouts=Timeouts()) as client:
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
            log.error("stopped: %s", refused)
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
