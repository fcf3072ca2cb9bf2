"""Starting a job's command so that it dies with the agent, and finding what is left of it.

Each job runs in a process group of its own, led by a small shim (app/agent/shim.py) that
starts the command inside the group. The shim gets a parent-death signal (Linux
``prctl(PR_SET_PDEATHSIG)``, set in the child before exec, kept across exec): when the
agent dies, even by SIGKILL, the shim is told and kills its whole group, the command's
children included, which a parent-death signal on the command alone would not reach.
What even this misses (the shim killed together with the agent) the agent finds again
on its next start from its spool, by the group id and start time recorded there.

Everything here is the standard library only (the agent runs on build hosts) and a
no-op where the platform lacks the feature (no ``prctl``, no ``/proc``).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

#: prctl(2) option: the signal this process gets when its parent thread dies.
PR_SET_PDEATHSIG = 1
#: The signal the shim gets when the agent dies: one nothing else sends it (the group
#: has no terminal), so the shim can tell it from the SIGTERM meant for the command.
PARENT_DIED = signal.SIGHUP

_PROC = Path("/proc")


def set_parent_death_signal(signum: int) -> bool:
    """Ask the kernel to send ``signum`` to this process when its parent dies; False
    where there is no such feature (not Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), or
    None when it does not exist or the platform has no /proc. Together with the pid it
    names one process: a pid reused later has a later start time."""
    fields = _stat_fields(pid)
    return None if fields is None else int(fields[19])


def boot_id() -> str | None:
    """This boot's id (start times only compare within one boot)."""
    try:
        return (_PROC / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (which may hold spaces and
    parentheses, so the split is at its last ')'): index 0 is the state, 2 the group."""
    try:
        raw = (_PROC / str(pid) / "stat").read_text()
    except (OSError, ValueError):
        return None
    return raw[raw.rindex(")") + 2 :].split()


def group_members(pgid: int) -> dict[int, int]:
    """The live processes of process group ``pgid`` with their start times (empty where
    there is no /proc)."""
    members: dict[int, int] = {}
    try:
        entries = list(_PROC.iterdir())
    except OSError:
        return members
    for entry in entries:
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        # State Z: exited, not yet reaped; it runs nothing any more.
        if fields is not None and int(fields[2]) == pgid and fields[0] != "Z":
            members[int(entry.name)] = int(fields[19])
    return members


def kill_group_left(pgid: int, started: int | None, *, spare: int | None = None) -> list[int]:
    """SIGKILL what is left of a job's process group: every member started no earlier
    than the group's leader was (``started``, its recorded start time), except ``spare``.
    A group whose leader still lives with another start time is not the job's (its id
    was reused) and is left alone. Returns the pids signalled."""
    leader_now = start_time(pgid)
    if started is not None and leader_now is not None and leader_now != started:
        return []
    killed = []
    for pid, since in group_members(pgid).items():
        if pid == spare or (started is not None and since < started):
            continue
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    return killed


@dataclass(frozen=True)
class JobProcess:
    """A started job: the shim leading its process group, and when it started."""

    popen: subprocess.Popen[bytes]
    pgid: int
    started: int | None


def _in_child() -> None:
    """Runs in the forked child before exec: the parent-death signal is kept across exec
    (it is only cleared for set-user-ID programs)."""
    set_parent_death_signal(PARENT_DIED)


#: How the shim is started: by its module's place, not ``-m`` from the working directory
#: (the job's), and with the job's environment, which names no Python path.
_SHIM = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); "
    "from app.agent.shim import main; sys.exit(main(sys.argv[1:]))"
)
#: The directory that holds the ``app`` package (a checkout or site-packages).
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def start_job(
    command: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None
) -> JobProcess:
    """Start ``command`` under the shim, in a new session and process group, with ``env``
    (the agent's own when None) in ``cwd``; its output (stdout and stderr together) is the
    returned process's stdout pipe."""
    shim = [sys.executable, "-c", _SHIM, _PACKAGE_ROOT, str(os.getpid()), "--", *command]
    popen = subprocess.Popen(
        shim,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
        start_new_session=True,  # its own process group, so a stop reaches children
        preexec_fn=_in_child,
    )
    return JobProcess(popen, popen.pid, start_time(popen.pid))


def signal_group(job: JobProcess, signum: int) -> None:
    """Send ``signum`` to the job's whole process group, if it still exists."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(job.pgid, signum)
