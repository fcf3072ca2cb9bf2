"""The leader of a job's process group: runs the command and takes the group down with
the agent.

``python -m app.agent.shim AGENT_PID -- COMMAND...`` is what the agent starts for each
job (app/agent/processes.py). The kernel sends it PARENT_DIED when the agent dies, however
it dies; it then SIGKILLs its whole group, so no process of the job runs on after the
agent, while the lease sends the job to another worker. A SIGTERM or SIGINT sent to the
group is meant for the command: the shim lives on until the command ends, then passes on
its exit status (or dies of the same signal). When the command ends, whatever it left
running in the group is killed too: a job is over when its command is.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from types import FrameType

from app.agent.processes import PARENT_DIED, kill_group_left, set_parent_death_signal


def _take_the_group_down(_signum: int = 0, _frame: FrameType | None = None) -> None:
    os.killpg(os.getpgid(0), signal.SIGKILL)  # the shim too: nothing is left to report to


def _for_the_command(_signum: int, _frame: FrameType | None) -> None:
    """The group's SIGTERM/SIGINT also reaches the command, whose answer decides."""


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m app.agent.shim AGENT_PID -- COMMAND...", file=sys.stderr)
        return 2
    agent_pid, command = int(argv[0]), argv[2:]
    signal.signal(PARENT_DIED, _take_the_group_down)
    # A handler, not SIG_IGN: handlers are reset at exec, so the command gets the default.
    signal.signal(signal.SIGTERM, _for_the_command)
    signal.signal(signal.SIGINT, _for_the_command)
    set_parent_death_signal(PARENT_DIED)
    if os.getppid() != agent_pid:
        _take_the_group_down()  # the agent died before the signal was armed
    try:
        child = subprocess.Popen(command)
    except OSError as error:
        print(f"cannot start {command[0]!r}: {error}", file=sys.stderr)
        return 127
    code = child.wait()
    sys.stdout.flush()
    kill_group_left(os.getpgid(0), None, spare=os.getpid())
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
