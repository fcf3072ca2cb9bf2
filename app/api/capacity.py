"""How many connections one server process may hold, and for what.

Every open connection is a file descriptor, so the process's open-files limit bounds them
all. ``jobmatch serve`` raises its soft limit to the hard limit at start
(:func:`raise_open_files_limit`; the worker processes inherit it), and the budgets are
sized from what it got (:func:`budgets`):

* **connections** (``JOBMATCH_MAX_CONNECTIONS``, 1,000): open connections that are not a
  waiting pull (ordinary requests and idle keep-alive connections). Past it, an ordinary
  request is answered 503;
* **waiting pulls** (``JOBMATCH_MAX_WAITING_PULLS``; unset: what the open-files limit
  leaves after the connections and a reserve): pulls waiting for work (``?wait=``). Past
  it, a pull of a worker with none waiting is answered 503 (app/matching/wakeups.py);
* the **reserve** (:data:`RESERVED_FILES` plus the database pool): the database's
  connections, the LISTEN connection, log files, the listening socket.

Health probes (``/healthz``, ``/readyz``, ``/metrics``) and requests with the admin token
count against neither budget: a full budget never hides the server from its operators. A
connection beyond both budgets together is answered 503 as soon as it is accepted and
closed, so that the file descriptors of the reserve stay free.
"""

from __future__ import annotations

import contextlib
import resource
from dataclasses import dataclass
from functools import lru_cache

from app.settings import Settings, get_settings

#: File descriptors kept for what is not a client connection (beyond the database pool):
#: the listening socket, the LISTEN connections, log and metrics files, imports.
RESERVED_FILES = 256

#: Waiting workers one serving host should hold by default (issue 37): a farm of a few
#: thousand runners with room to grow. Fewer is said at start.
FARM_WAITING_WORKERS = 10_000

#: The soft limit asked for when the hard limit is unlimited.
UNLIMITED_OPEN_FILES = 1_048_576


@dataclass(frozen=True)
class OpenFiles:
    """The process's open-files soft limit before and after :func:`raise_open_files_limit`."""

    before: int
    after: int


def open_files_limit() -> int:
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return UNLIMITED_OPEN_FILES if soft == resource.RLIM_INFINITY else int(soft)


def raise_open_files_limit() -> OpenFiles:
    """Raise the soft open-files limit to the hard one (a process may, unprivileged)."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = open_files_limit()
    target = UNLIMITED_OPEN_FILES if hard == resource.RLIM_INFINITY else int(hard)
    if before < target:
        # A container may refuse: the budgets are sized from what holds.
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return OpenFiles(before, open_files_limit())


@dataclass(frozen=True)
class Budgets:
    """What one server process may hold at once (module docstring)."""

    open_files: int
    reserved: int
    connections: int
    waiting_pulls: int

    @property
    def total(self) -> int:
        """Client connections of both kinds together; one more is closed when accepted."""
        return self.connections + self.waiting_pulls


def budgets_for(settings: Settings, open_files: int) -> Budgets:
    reserved = RESERVED_FILES + settings.db_pool_size + settings.db_max_overflow
    if settings.max_waiting_pulls is not None:
        waiting = settings.max_waiting_pulls
    else:
        waiting = max(0, open_files - reserved - settings.max_connections)
    return Budgets(open_files, reserved, settings.max_connections, waiting)


@lru_cache(maxsize=1)
def budgets() -> Budgets:
    """This process's budgets, from its settings and its open-files limit (read once: a
    served process's limit was raised before it started)."""
    return budgets_for(get_settings(), open_files_limit())


def start_message(files: OpenFiles, budget: Budgets, processes: int) -> tuple[bool, str]:
    """The line ``jobmatch serve`` logs at start, and whether it is a warning: the budgets
    of each process, and what the machine's limit costs when it holds fewer waiting
    workers than :data:`FARM_WAITING_WORKERS`."""
    raised = f" (raised from {files.before})" if files.after > files.before else ""
    message = (
        f"open files: {files.after} per process{raised}; each of {processes} process(es) "
        f"holds up to {budget.connections} connections for requests "
        f"(JOBMATCH_MAX_CONNECTIONS) and {budget.waiting_pulls} waiting pulls "
        f"(JOBMATCH_MAX_WAITING_PULLS), {budget.reserved} files reserved"
    )
    held = budget.waiting_pulls * processes
    short = held < FARM_WAITING_WORKERS
    if short:
        message += (
            f"; that is {held} waiting workers in all, fewer than {FARM_WAITING_WORKERS}: "
            "raise the open-files hard limit (ulimit -Hn; LimitNOFILE= under systemd)"
        )
    return short, message
