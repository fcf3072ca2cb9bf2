"""What the agent reports about its host (debusine's ``analyze_worker``): the built-in
``system`` facts, and each registered task's namespace from its plug-in."""

from __future__ import annotations

import os
import platform
from collections.abc import Iterable
from typing import Any

from app.client.models import Task
from app.task_plugins import analyze_worker

#: Debian architecture names of common machine names (debusine reports Debian's).
DEBIAN_ARCHITECTURES = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "i386": "i386",
    "i686": "i386",
    "armv7l": "armhf",
    "ppc64le": "ppc64el",
    "s390x": "s390x",
    "riscv64": "riscv64",
}


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def system_facts() -> dict[str, Any]:
    machine = platform.machine()
    facts: dict[str, Any] = {
        "version": 1,
        "cpu_count": os.cpu_count() or 1,
        "machine": machine,
        "architecture": DEBIAN_ARCHITECTURES.get(machine.lower(), machine.lower()),
        "os": platform.system().lower(),
        "python_version": platform.python_version(),
    }
    memory = _memory_bytes()
    if memory is not None:
        facts["total_physical_memory"] = memory
    return facts


def analyze(tasks: Iterable[Task]) -> dict[str, Any]:
    """The dynamic metadata report: ``system`` plus one namespace per registered task whose
    plug-in (if it names one) is installed here and analyses without error."""
    report: dict[str, Any] = {"system": system_facts()}
    for task in tasks:
        namespace = analyze_worker(task.plugin)
        if namespace is not None:
            report[task.name] = namespace
    return report
