"""Task plug-ins: the Python parts of a task type that cannot be declared (debusine issue #8).

A task type may name an entry point of group ``jobmatch.tasks``. The object it loads (a
class, an instance or a module) may have:

* ``can_run_on(metadata: Mapping[str, Any]) -> bool``: run on the server, only for the
  workers that SQL already found suitable, with the worker's effective flat metadata;
* ``analyze_worker() -> Mapping[str, Any]``: run by the worker agent; its result is the
  task's namespace of the dynamic metadata, ``version`` included;
* ``version``: the version the worker reports when ``analyze_worker`` sets none (else 1).

Pure standard library: the server (app.matching) and the agent (app.agent) both use it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import lru_cache
from importlib.metadata import entry_points
from typing import Any

ENTRY_POINT_GROUP = "jobmatch.tasks"

log = logging.getLogger(__name__)


class PluginNotFoundError(LookupError):
    """No entry point of that name is installed in group ``jobmatch.tasks``."""


@lru_cache(maxsize=256)
def load_plugin(name: str) -> Any:
    """The object behind the entry point ``name``; raises PluginNotFoundError."""
    found = entry_points(group=ENTRY_POINT_GROUP, name=name)
    for entry_point in found:
        return entry_point.load()
    raise PluginNotFoundError(f"no entry point {name!r} in group {ENTRY_POINT_GROUP!r}")


def installed_plugins() -> list[str]:
    return sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})


def can_run_on(plugin_name: str, metadata: Mapping[str, Any]) -> bool:
    """The plug-in's verdict; a plug-in without ``can_run_on`` accepts every worker. A
    missing plug-in or one that raises refuses: the server cannot vouch for the worker."""
    try:
        plugin = load_plugin(plugin_name)
    except Exception:
        log.exception("task plug-in %r cannot be loaded; refusing", plugin_name)
        return False
    check = getattr(plugin, "can_run_on", None)
    if check is None:
        return True
    try:
        return bool(check(metadata))
    except Exception:
        log.exception("task plug-in %r raised in can_run_on; refusing", plugin_name)
        return False


def analyze_worker(plugin_name: str | None) -> dict[str, Any] | None:
    """The namespace a task contributes on this worker, ``version`` filled in (1 unless the
    plug-in says otherwise). ``None`` when the plug-in is missing here or fails, so the
    worker reports nothing for the task and cannot be given it."""
    if plugin_name is None:
        return {"version": 1}
    try:
        plugin = load_plugin(plugin_name)
    except PluginNotFoundError:
        log.warning("task plug-in %r is not installed on this worker", plugin_name)
        return None
    analyze = getattr(plugin, "analyze_worker", None)
    try:
        data = dict(analyze()) if analyze is not None else {}
    except Exception:
        log.exception("task plug-in %r raised in analyze_worker", plugin_name)
        return None
    data.setdefault("version", getattr(plugin, "version", 1))
    return data
