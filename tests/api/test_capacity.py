"""The budgets of a server process (issue 37), sized from its open-files limit, and the
line `jobmatch serve` logs about them at start."""

from __future__ import annotations

import subprocess
import sys

from app.api import capacity
from app.settings import Settings


def test_the_waiting_budget_is_what_the_open_files_leave() -> None:
    settings = Settings(db_pool_size=10, db_max_overflow=20)
    budget = capacity.budgets_for(settings, open_files=20_000)
    assert budget.reserved == capacity.RESERVED_FILES + 30
    assert budget.connections == 1000
    assert budget.waiting_pulls == 20_000 - budget.reserved - 1000
    assert budget.total == budget.connections + budget.waiting_pulls


def test_a_configured_waiting_budget_is_kept_and_a_small_limit_leaves_none() -> None:
    assert capacity.budgets_for(Settings(max_waiting_pulls=7), 20_000).waiting_pulls == 7
    assert capacity.budgets_for(Settings(), open_files=1024).waiting_pulls == 0


def test_the_start_line_warns_when_the_host_holds_fewer_than_a_farm() -> None:
    files = capacity.OpenFiles(before=1024, after=4096)
    short, line = capacity.start_message(files, capacity.budgets_for(Settings(), 4096), 2)
    assert short
    assert "open files: 4096 per process (raised from 1024)" in line
    assert "fewer than 10000" in line and "ulimit -Hn" in line
    roomy = capacity.budgets_for(Settings(), 20_000)
    short, line = capacity.start_message(capacity.OpenFiles(20_000, 20_000), roomy, 1)
    assert not short
    assert "raised" not in line and f"{roomy.waiting_pulls} waiting pulls" in line


def test_the_soft_limit_is_raised_to_the_hard_one() -> None:
    """In a child process: lowered first, then raised back by raise_open_files_limit."""
    script = (
        "import resource\n"
        "from app.api import capacity\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))\n"
        "files = capacity.raise_open_files_limit()\n"
        "print(files.before, files.after, resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split()
    before, after, soft = (int(x) for x in out)
    assert before == 256
    assert after == soft > 256
