"""Where the suite's time goes: a pytest plugin (tests/conftest.py loads it), inert unless
asked (issue 34).

    make test PYTEST_ARGS=--suite-profile=profile.json
    .venv/bin/python -m tests.support.suite_profile profile.json [more.json ...]

Each test is recorded with its wall time (setup, call and teardown together), the CPU it
took in the test process and in the child processes it waited for (servers, the CLI, the
agent, pip), and the kinds of work it did: a live server started, a child process run, a
Hypothesis property, the browser, the wheel build. With xdist every worker writes its own
part (``profile.json.gw0`` ...), which the report reads together. The report sums wall and
CPU per directory and per kind and lists the slowest tests with their kinds.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import live_server

#: The kinds a test is filed under, in the order the report lists them; a test of several
#: kinds is filed under the first it has.
KINDS = ("wheel build", "browser", "live server", "subprocess", "hypothesis", "in-process")


class _Counters:
    """What the running test started, and the time the garbage collector took during it
    (one test runs at a time in a process)."""

    def __init__(self) -> None:
        self.servers = 0
        self.processes = 0
        self.gc_seconds = 0.0
        self._gc_started = 0.0

    def on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            self.gc_seconds += time.perf_counter() - self._gc_started


_counters = _Counters()


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--suite-profile", default=None, help="write each test's times here")


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("--suite-profile"):
        return
    original_start = live_server.LiveServer.start
    original_popen = subprocess.Popen.__init__

    def counted_start(self: live_server.LiveServer, *args: Any, **kwargs: Any) -> None:
        _counters.servers += 1
        original_start(self, *args, **kwargs)

    def counted_popen(self: Any, *args: Any, **kwargs: Any) -> None:
        _counters.processes += 1
        original_popen(self, *args, **kwargs)

    live_server.LiveServer.start = counted_start  # type: ignore[method-assign]
    subprocess.Popen.__init__ = counted_popen  # type: ignore[method-assign]
    gc.callbacks.append(_counters.on_gc)
    config._suite_profile_rows = []  # type: ignore[attr-defined]


def _kind(item: pytest.Item, servers: int, processes: int) -> str:
    path = item.nodeid
    if "wheel" in item.name:
        return "wheel build"
    if "test_browser" in path:
        return "browser"
    if servers:
        return "live server"
    if processes:
        return "subprocess"
    if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
        return "hypothesis"
    return "in-process"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    rows = getattr(item.config, "_suite_profile_rows", None)
    if rows is None:
        yield
        return
    _counters.servers = _counters.processes = 0
    _counters.gc_seconds = 0.0
    wall, cpu = time.monotonic(), _cpu()
    yield
    rows.append(
        {
            "test": item.nodeid,
            "wall": time.monotonic() - wall,
            "cpu": _cpu() - cpu,
            "kind": _kind(item, _counters.servers, _counters.processes),
            "servers": _counters.servers,
            "gc": _counters.gc_seconds,
        }
    )


def pytest_unconfigure(config: pytest.Config) -> None:
    rows = getattr(config, "_suite_profile_rows", None)
    target = config.getoption("--suite-profile", None)
    if not rows or not target:
        return  # not asked, or xdist's controlling process (it runs no test)
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    path = Path(f"{target}.{worker}" if worker else target)
    path.write_text(json.dumps({"tests": rows, "process": _process_state()}))


def _process_state() -> dict[str, Any]:
    """The test process at its end: its open handles on database files, its resident
    memory now and at its peak (MB), and the objects the collector tracks. The handles
    are counted after a collection (garbage still holding a connection is not a leak) and
    listed by file, whose directory names the test that opened it."""
    gc.collect()
    handles = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.endswith((".db", ".db-wal", ".db-shm", ".db-journal")):
            handles.append(target)
    status = Path("/proc/self/status").read_text()
    memory = {
        key: int(line.split()[1]) // 1024
        for line in status.splitlines()
        for key in ("VmRSS", "VmHWM")
        if line.startswith(key + ":")
    }
    return {
        "database_handles": len(handles),
        **memory,
        "objects": len(gc.get_objects()),
        "handle_files": dict(Counter(handles)),
    }


def _directory(test: str) -> str:
    parts = test.split("::")[0].split("/")
    return "/".join(parts[:-1]) if len(parts) > 1 else parts[0]


def report(paths: list[Path], slowest: int = 30) -> str:
    """The tables of the module docstring, as Markdown."""
    rows: list[dict[str, Any]] = []
    processes: list[str] = []
    for path in paths:
        for part in sorted(path.parent.glob(path.name + "*")):
            data = json.loads(part.read_text())
            rows += [{"gc": 0.0, **row} for row in data["tests"]]
            processes.append(f"{part.name}: {data['process']}")
    lines = [f"{len(rows)} tests, {sum(r['wall'] for r in rows):.0f} s wall summed", ""]
    lines += ["Test processes at their end:", *processes, ""]
    worst = max(rows, key=lambda r: r["gc"], default=None)
    if worst is not None:
        lines += [f"Most time in the garbage collector: {worst['gc']:.2f} s, {worst['test']}", ""]
    grouped_by: tuple[tuple[Callable[[dict[str, Any]], str], str], ...] = (
        (lambda row: _directory(row["test"]), "directory"),
        (lambda row: str(row["kind"]), "kind"),
    )
    for group_of, title in grouped_by:
        sums: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0])
        for row in rows:
            entry = sums[group_of(row)]
            entry[0] += 1
            entry[1] += row["wall"]
            entry[2] += row["cpu"]
            entry[3] += row["servers"]
        lines += [
            f"| {title} | tests | wall s | CPU s | servers started |",
            "|---|---|---|---|---|",
        ]
        for group, (count, wall, cpu, servers) in sorted(sums.items(), key=lambda kv: -kv[1][1]):
            lines.append(f"| {group} | {count:.0f} | {wall:.1f} | {cpu:.1f} | {servers:.0f} |")
        lines.append("")
    lines += ["| test | kind | wall s | CPU s |", "|---|---|---|---|"]
    for row in sorted(rows, key=lambda r: -r["wall"])[:slowest]:
        lines.append(f"| {row['test']} | {row['kind']} | {row['wall']:.1f} | {row['cpu']:.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report([Path(arg) for arg in sys.argv[1:]]))
